"""Experiment grids: one scenario, run for every combination of a few varied settings,
reduced to a table of metrics (the seeds' headline results are such tables).

Owns: the ``--vary`` grammar, grid expansion, the documented metric set (docs/sweep.md)
and how a sweep is run (simulated cells in parallel over the cores, real cells one at a
time) and summarised (mean and spread over ``--repeat`` real runs, model beside kernel).
It returns plain data; drawing lives in `nagle_sim.export.plot` callers and the CLI.
Must not import textual or simpy (the model runs through `nagle_sim.sim.driver` only in
worker functions), and imports realnet only when a real run is asked for.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import statistics
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .model.events import Side
from .scenario import Scenario, ScenarioError, loads
from .summary import iterations, stalls, write_spans
from .trace import Outcome, Trace

MAX_CELLS = 10_000
"""A grid larger than this is refused before anything runs (it is almost surely a typo)."""
MAX_REPEAT = 1_000


class SweepError(ScenarioError):
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
        raise SweepError("--vary: the same key is varied twice")
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
           lambda t: sum(1 for s in t.segments if s.src is Side.CLIENT)),
    Metric("segments_server", "segments the server sent",
           lambda t: sum(1 for s in t.segments if s.src is Side.SERVER)),
    Metric("data_segments_client", "client segments that carried data",
           lambda t: _data_segments(t, Side.CLIENT)),
    Metric("writes_alone_pct", "share of client writes whose bytes left in segments of "
           "their own, not coalesced with another write (%), as S5 counted",
           _writes_alone_pct),
    Metric("stalls", "gaps of 10 ms or more with nothing on the wire that no application "
           "sleep explains", lambda t: len(_stall_list(t))),
    Metric("stall_ms", "the stalls' total length (ms)", lambda t: sum(_stall_list(t))),
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
        deviation (0 for a single run); None where no run produced the metric."""
        values = [v for run in self.real if (v := run.get(metric)) is not None]
        if not values:
            return None, None
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        return statistics.fmean(values), spread


@dataclass(slots=True)
class SweepResult:
    source: str
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...]
    cells: list[CellResult]
    real: bool = False
    repeat: int = 0


def _note(trace: Trace) -> str:
    return "" if trace.outcome is Outcome.OK else f"{trace.outcome}: {trace.message}"


def _run_model_cell(text: str, where: str, overrides: list[str],
                    metrics: tuple[str, ...]) -> tuple[dict[str, float | None], str]:
    """Worker: build one cell's scenario and run the model on it."""
    from .sim.driver import run_sim

    trace = run_sim(loads(text, where, overrides))
    return measure(trace, metrics), _note(trace)


def _run_cell_args(args: tuple[str, str, list[str], tuple[str, ...]]
                   ) -> tuple[dict[str, float | None], str]:
    return _run_model_cell(*args)


def build_cells(text: str, where: str, axes: Sequence[Axis], base: Sequence[str] = ()
                ) -> list[tuple[Cell, Scenario]]:
    """Every cell with its scenario (``base`` overrides first, then the cell's), all
    validated before anything runs."""
    out = []
    for cell in grid(axes):
        try:
            out.append((cell, loads(text, where, [*base, *cell.overrides])))
        except ScenarioError as exc:
            where_in = f" (in the cell {cell.label()})" if cell.settings else ""
            raise SweepError(f"{exc}{where_in}") from None
    return out


def run_sweep(text: str, where: str, axes: Sequence[Axis], metrics: Sequence[str], *,
              jobs: int | None = None, real: bool = False, repeat: int = 1,
              real_runner: Callable[[Scenario], Trace] | None = None,
              base: Sequence[str] = (),
              on_cell: Callable[[int, int], None] | None = None) -> SweepResult:
    """Run every cell: the model always (in parallel over ``jobs`` processes), the real
    kernel too when ``real`` (``repeat`` times per cell, one run at a time).

    Args:
        text, where: the scenario file's text and name.
        axes: the varied keys; an empty list is a one-cell sweep.
        metrics: metric names (`METRICS`).
        jobs: worker processes for simulated cells (default: the machine's cores).
        real, repeat, real_runner: real runs; ``real_runner`` is realnet's ``run_real``
            (injected so tests can fake it).
        base: ``--set`` overrides applied to every cell (``params.NAME=V`` for --param).
        on_cell: called with (cells done, cells in all) after each run finishes.
    Raises:
        SweepError: a bad axis, metric or cell scenario (before anything runs).
    """
    metrics = tuple(metrics)
    if not 1 <= repeat <= MAX_REPEAT:
        raise SweepError(f"--repeat {repeat}: must be 1 to {MAX_REPEAT}")
    cells = build_cells(text, where, axes, base)
    results = [CellResult(cell, {}) for cell, _ in cells]
    total = len(cells) * (1 + (repeat if real else 0))
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if on_cell:
            on_cell(done, total)

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(cells)))
    if jobs == 1:
        for res in results:
            res.model, res.model_note = _run_model_cell(
                text, where, [*base, *res.cell.overrides], metrics)
            tick()
    else:
        # multiprocessing.Pool (not concurrent.futures): leaving its `with` block, also on
        # Ctrl-C, terminates the workers at once instead of waiting for queued cells
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            jobs_args = [(text, where, [*base, *res.cell.overrides], metrics)
                         for res in results]
            for res, outcome in zip(results, pool.imap(_run_cell_args, jobs_args),
                                    strict=True):
                res.model, res.model_note = outcome
                tick()
    if real:
        if real_runner is None:
            raise SweepError("a real sweep needs a real runner")
        for res, (_cell, sc) in zip(results, cells, strict=True):
            for _ in range(repeat):
                trace = real_runner(sc)
                res.real.append(measure(trace, metrics))
                if note := _note(trace):
                    res.real_notes.append(note)
                tick()
    return SweepResult(source=where, axes=tuple(axes), metrics=metrics, cells=results,
                       real=real, repeat=repeat if real else 0)


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
    runs: model, the kernel's mean, its sample standard deviation and the difference
    kernel − model)."""
    headers = [a.key for a in result.axes]
    for m in result.metrics:
        if result.real:
            headers += [f"{m} model", f"{m} kernel", f"{m} sd", f"{m} diff"]
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
                row += [model, mean, spread, diff]
            else:
                row.append(model)
        if headers[-1] == "note":
            row.append("; ".join(filter(None, [c.model_note, *dict.fromkeys(c.real_notes)])))
        rows.append(row)
    return headers, rows


__all__ = ["Axis", "Cell", "CellResult", "DEFAULT_METRICS", "METRICS", "Metric",
           "SweepError", "SweepResult", "build_cells", "fmt", "grid", "measure",
           "parse_metrics", "parse_vary", "run_sweep", "table", "value_of", "writes_alone"]
