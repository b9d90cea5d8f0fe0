"""Running a sweep: simulated cells in parallel over the cores, real cells one at a time.

Owns `run_sweep` and its worker processes; the grid, metrics and tables are
`nagle_sim.sweep`'s. Both executors arrive as runners (`nagle_sim.runners`): the model's
is handed to each worker process, so it must be a module-level function (it is pickled by
name). Must not import textual or an executor.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence

from .scenario import loads
from .sweep import (
    MAX_REPEAT,
    Axis,
    CellResult,
    SweepError,
    SweepResult,
    build_cells,
    measure,
    note_of,
)
from .trace import Runner


def _run_model_cell(runner: Runner, text: str, where: str, overrides: list[str],
                    metrics: tuple[str, ...]) -> tuple[dict[str, float | None], str]:
    """Worker: build one cell's scenario and run the model on it."""
    trace = runner(loads(text, where, overrides))
    return measure(trace, metrics), note_of(trace)


def _run_cell_args(args: tuple[Runner, str, str, list[str], tuple[str, ...]]
                   ) -> tuple[dict[str, float | None], str]:
    return _run_model_cell(*args)


MAX_JOBS_PER_CORE = 4
"""``--jobs`` above this many processes per core is refused."""


def run_sweep(text: str, where: str, axes: Sequence[Axis], metrics: Sequence[str], *,
              model_runner: Runner, jobs: int | None = None, real: bool = False,
              repeat: int = 1, real_runner: Runner | None = None,
              base: Sequence[str] = (),
              on_cell: Callable[[int, int], None] | None = None) -> SweepResult:
    """Run every cell: the model always (in parallel over ``jobs`` processes), the real
    kernel too when ``real`` (``repeat`` times per cell, one run at a time).

    Args:
        text, where: the scenario file's text and name.
        axes: the varied keys; an empty list is a one-cell sweep.
        metrics: metric names (`METRICS`).
        model_runner: the simulator's runner (`nagle_sim.runners.simulate`): a
            module-level function, as it is sent to the worker processes by name.
        jobs: worker processes for simulated cells (default: the machine's cores).
        real, repeat, real_runner: real runs; ``real_runner`` runs one scenario on the
            kernel (`nagle_sim.runners.real`; tests fake it).
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

    cores = os.cpu_count() or 1
    if jobs is not None and jobs > MAX_JOBS_PER_CORE * cores:
        # more processes than this would only fight for the cores (and each costs ~50 MB)
        raise SweepError(f"--jobs {jobs}: at most {MAX_JOBS_PER_CORE * cores} on this "
                         f"machine ({cores} cores)")
    jobs = max(1, min(jobs or cores, len(cells)))
    if jobs == 1:
        for res in results:
            res.model, res.model_note = _run_model_cell(
                model_runner, text, where, [*base, *res.cell.overrides], metrics)
            tick()
    else:
        # multiprocessing.Pool (not concurrent.futures): leaving its `with` block, also on
        # Ctrl-C, terminates the workers at once instead of waiting for queued cells
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            jobs_args = [(model_runner, text, where, [*base, *res.cell.overrides], metrics)
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
                if note := note_of(trace):
                    res.real_notes.append(note)
                tick()
    return SweepResult(source=where, axes=tuple(axes), metrics=metrics, cells=results,
                       real=real, repeat=repeat if real else 0)


__all__ = ["run_sweep"]
