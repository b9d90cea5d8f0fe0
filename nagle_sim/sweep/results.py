"""A sweep's results and its table: model beside kernel, mean and spread over repeats.

Owns: `CellResult` (one cell's model metrics and real runs), `SweepResult`, a cell's note
(`note_of`), and the table every view of a sweep prints (`table`: one column per varied
key, then per metric: model, and with real runs the kernel's mean, its sample standard
deviation over ``--repeat`` runs and the difference; `fmt` for its numbers). Drawing it
is `nagle_sim.render.sweep`'s (terminal) and `nagle_sim.export`'s (tables, plots). Must not
import textual, simpy, realnet or an executor.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..trace import Outcome, Trace
from .grid import Axis, Cell, value_of

MAX_REPEAT = 1_000



@dataclass(slots=True)
class CellResult:
    cell: Cell
    model: dict[str, float | None]
    model_note: str = ""
    real: list[dict[str, float | None]] = field(default_factory=list)
    real_notes: list[str] = field(default_factory=list)

    def real_stat(self, metric: str) -> tuple[float | None, float | None]:
        """(mean, spread) of a metric over the real runs; spread is the sample standard
        deviation (None for a single run: one run says nothing of the spread); None where
        no run produced the metric."""
        values = [v for run in self.real if (v := run.get(metric)) is not None]
        if not values:
            return None, None
        spread = statistics.stdev(values) if len(values) > 1 else None
        return statistics.fmean(values), spread


@dataclass(slots=True)
class SweepResult:
    source: str
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...]
    cells: list[CellResult]
    real: bool = False
    repeat: int = 0


def note_of(trace: Trace) -> str:
    """A cell's note: empty for a run that ended cleanly, else its outcome and message."""
    return "" if trace.outcome is Outcome.OK else f"{trace.outcome}: {trace.message}"


def fmt(value: float | None) -> str:
    """A metric value for a table: counts whole, times and shares to the microsecond."""
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}" if abs(value) < 10_000 else f"{value:.1f}"


def table(result: SweepResult) -> tuple[list[str], list[list[object]]]:
    """Headers and rows: one column per varied key, then per metric (model; with real
    runs: model, the kernel's mean, its sample standard deviation when there are several
    runs per cell, and the difference kernel − model)."""
    headers = [a.key for a in result.axes]
    spread_column = result.repeat > 1
    for m in result.metrics:
        if result.real:
            headers += [f"{m} model", f"{m} kernel", *([f"{m} sd"] * spread_column),
                        f"{m} diff"]
        else:
            headers.append(m)
    if any(c.model_note or c.real_notes for c in result.cells):
        headers.append("note")
    rows: list[list[object]] = []
    for c in result.cells:
        row: list[object] = [value_of(v) for _, v in c.cell.settings]
        for m in result.metrics:
            model = c.model.get(m)
            if result.real:
                mean, spread = c.real_stat(m)
                diff = None if mean is None or model is None else mean - model
                if isinstance(model, int):
                    # a count: whole numbers stay whole (20013, not 20013.000)
                    mean, spread, diff = (int(v) if v is not None and float(v).is_integer()
                                          else v for v in (mean, spread, diff))
                row += [model, mean, *([spread] * spread_column), diff]
            else:
                row.append(model)
        if headers[-1] == "note":
            row.append("; ".join(filter(None, [c.model_note, *dict.fromkeys(c.real_notes)])))
        rows.append(row)
    return headers, rows
