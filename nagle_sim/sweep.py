"""Experiment grids: one scenario, run for every combination of a few varied settings,
reduced to a table of metrics (the seeds' headline results are such tables).

Owns: the ``--vary`` grammar, grid expansion, the documented metric set (docs/sweep.md),
the result types and how they are summarised (mean and spread over ``--repeat`` real
runs, model beside kernel). Running a grid is `nagle_sim.sweep_run`'s (it imports the
simulator); this module does not, so the app can validate a lesson's sweep and draw its
table with an injected runner. Drawing lives in `nagle_sim.export.plot` and the CLI.
Must not import textual, simpy, realnet or `nagle_sim.sim`.
"""

from __future__ import annotations

import itertools
import math
import statistics
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .errors import UserError
from .model.events import Side
from .scenario import Scenario, ScenarioError, loads
from .summary import iterations, stalls, wire_unknown, write_spans
from .trace import Outcome, Trace

MAX_CELLS = 10_000
"""A grid larger than this is refused before anything runs (it is almost surely a typo)."""
MAX_REPEAT = 1_000


class SweepError(UserError, ValueError):
    """A sweep that cannot run as asked; ``str(err)`` is one line."""


# ---------------------------------------------------------------- the grid
@dataclass(frozen=True, slots=True)
class Axis:
    """One varied setting: a ``--set`` key (``client.nodelay``) or a scenario parameter
    (``sleep``), and its values as text."""

    key: str
    values: tuple[str, ...]


def parse_vary(text: str) -> Axis:
    """``KEY=V1,V2,…`` → `Axis`. Values are TOML where they parse (``true``, ``10``,
    ``'linux'``), plain strings otherwise, exactly as ``--set`` reads them."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepError(f"--vary {text!r}: use KEY=V1,V2,…, e.g. client.nodelay=false,true")
    if not all(part.strip() for part in key.split(".")):
        raise SweepError(f"--vary {text!r}: bad key {key!r}")
    values = tuple(v.strip() for v in rest.split(","))
    if not values or any(not v for v in values):
        raise SweepError(f"--vary {text!r}: empty value in the list")
    if len(set(values)) != len(values):
        raise SweepError(f"--vary {text!r}: a value is listed twice")
    return Axis(key, values)


@dataclass(frozen=True, slots=True)
class Cell:
    """One point of the grid: (key, value text) for every axis, in axis order."""

    settings: tuple[tuple[str, str], ...]

    @property
    def overrides(self) -> list[str]:
        """``--set`` items; a key without a dot is a scenario parameter (``params.KEY``)."""
        return [f"{k if '.' in k else 'params.' + k}={v}" for k, v in self.settings]

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings)


def grid(axes: Sequence[Axis]) -> list[Cell]:
    """Every combination of the axes' values; the last axis varies fastest."""
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise SweepError(f"--vary {twice}: the same key is varied twice; give its values "
                         "once (KEY=V1,V2,…)")
    size = math.prod(len(a.values) for a in axes)
    if size > MAX_CELLS:
        raise SweepError(f"--vary: the grid has {size:,} cells; at most {MAX_CELLS:,}")
    return [Cell(tuple(zip(keys, combo, strict=True)))
            for combo in itertools.product(*(a.values for a in axes))]


def value_of(text: str) -> object:
    """A grid value as data (for CSV and plots): TOML if it parses, else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


# ---------------------------------------------------------------- metrics
@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    doc: str
    compute: Callable[[Trace], float | None]


def _latencies(trace: Trace) -> list[float]:
    return [it.latency / 1000 for it in iterations(trace, Side.CLIENT)]


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: every reported value happened)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _data_segments(trace: Trace, side: Side) -> int:
    return sum(1 for s in trace.segments if s.src is side and s.length)


def writes_alone(trace: Trace, side: Side = Side.CLIENT) -> tuple[int, int]:
    """(writes that left as their own segments, writes), by `summary.write_spans`'s rule:
    no segment carrying any of a write's bytes also carried another write's."""
    spans = write_spans(trace, side)
    return sum(1 for w in spans if w.alone), len(spans)


def _writes_alone_pct(trace: Trace) -> float | None:
    alone, total = writes_alone(trace)
    return 100 * alone / total if total else None


def _stall_list(trace: Trace) -> list[float]:
    return [s.duration / 1000 for s in stalls(trace)]


def _on_wire(compute: Callable[[Trace], float | None]) -> Callable[[Trace], float | None]:
    """A metric read from the segments: unknown (None, shown "–") for a real run that
    captured none, never a false 0."""
    def metric(trace: Trace) -> float | None:
        return None if wire_unknown(trace) is not None else compute(trace)
    return metric


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("latency_p50_ms", "median per-iteration latency of the client's first loop (ms)",
           lambda t: _percentile(_latencies(t), 50)),
    Metric("latency_p99_ms", "99th percentile (nearest rank) of the client's per-iteration "
           "latency (ms)", lambda t: _percentile(_latencies(t), 99)),
    Metric("latency_mean_ms", "mean per-iteration latency of the client's first loop (ms)",
           lambda t: _mean(_latencies(t))),
    Metric("duration_ms", "time from the client's SYN to the last segment or call (ms)",
           lambda t: t.end / 1000),
    Metric("segments_client", "segments the client sent (handshake, data, ACKs, FIN)",
           _on_wire(lambda t: sum(1 for s in t.segments if s.src is Side.CLIENT))),
    Metric("segments_server", "segments the server sent",
           _on_wire(lambda t: sum(1 for s in t.segments if s.src is Side.SERVER))),
    Metric("data_segments_client", "client segments that carried data",
           _on_wire(lambda t: _data_segments(t, Side.CLIENT))),
    Metric("writes_alone_pct", "share of client writes whose bytes left in segments of "
           "their own, not coalesced with another write (%), as S5 counted",
           _on_wire(_writes_alone_pct)),
    Metric("stalls", "gaps of 10 ms or more with nothing on the wire that no application "
           "sleep explains", _on_wire(lambda t: len(_stall_list(t)))),
    Metric("stall_ms", "the stalls' total length (ms)",
           _on_wire(lambda t: float(sum(_stall_list(t))))),
)}

DEFAULT_METRICS = ("latency_p50_ms", "segments_client", "stalls")


def parse_metrics(names: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for raw in names:
        for name in (n.strip() for n in raw.split(",")):
            if name not in METRICS:
                raise SweepError(f"--metric {name!r}: unknown metric (known: "
                                 f"{', '.join(METRICS)})")
            if name not in out:
                out.append(name)
    return tuple(out) or DEFAULT_METRICS


def measure(trace: Trace, metrics: Sequence[str]) -> dict[str, float | None]:
    return {name: METRICS[name].compute(trace) for name in metrics}


# ---------------------------------------------------------------- running
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


def build_cells(text: str, where: str, axes: Sequence[Axis], base: Sequence[str] = ()
                ) -> list[tuple[Cell, Scenario]]:
    """Every cell with its scenario (``base`` overrides first, then the cell's), all
    validated before anything runs."""
    out = []
    for cell in grid(axes):
        try:
            out.append((cell, loads(text, where, [*base, *cell.overrides])))
        except ScenarioError as exc:
            if base and not out:
                # the first cell failed: when the fixed settings fail on their own, the
                # error is theirs, not the cell's
                try:
                    loads(text, where, list(base))
                except ScenarioError as base_exc:
                    raise SweepError(_blame(str(base_exc), text, where, base)) from None
            where_in = f" (in the cell {cell.label()})" if cell.settings else ""
            raise SweepError(f"{_as_vary(str(exc), cell)}{where_in}") from None
    return out


def _blame(message: str, text: str, where: str, base: Sequence[str]) -> str:
    """``message`` with the --set / --param that causes it on its own, where one does."""
    for item in base:
        try:
            loads(text, where, [item])
        except ScenarioError:
            key, _, value = item.partition("=")
            option = (f"--param {key.removeprefix('params.')}={value}"
                      if key.startswith("params.") else f"--set {item}")
            return f"{message} (given by {option})"
    return message


def _as_vary(message: str, cell: Cell) -> str:
    """A cell's settings reach the scenario as --param / --set overrides; an error about
    one of them names the option the user gave: --vary."""
    for key, _ in cell.settings:
        for said in (f"--param {key}:", f"--set {key}:", f"--set {key!r}:"):
            if message.startswith(said):
                return f"--vary {key}:" + message[len(said):]
    return message

# ---------------------------------------------------------------- tables
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


__all__ = ["Axis", "Cell", "CellResult", "DEFAULT_METRICS", "METRICS", "Metric",
           "SweepError", "SweepResult", "build_cells", "fmt", "grid", "measure", "note_of",
           "parse_metrics", "parse_vary", "table", "value_of", "writes_alone"]
