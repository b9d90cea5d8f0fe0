"""Experiment grids: one scenario, run for every combination of a few varied settings,
reduced to a table of metrics (the seeds' headline results are such tables).

- `grid`: the ``--vary`` grammar, the cells, each cell's scenario built and checked;
- `metrics`: the documented metric set (docs/sweep.md), read from any trace;
- `results`: the results, mean and spread over ``--repeat`` real runs, and the table;
- `run`: running a grid with the runners it is given (simulated cells in parallel worker
  processes, real ones one at a time); imported by the command line, not by this package
  (its worker pool is not the app's).

The app validates and draws a lesson's sweep with `grid`, `metrics` and `results` and its
own injected runner. Drawing is `nagle_sim.render.sweep`'s (terminal) and
`nagle_sim.export.plot`'s. Must not import textual, simpy, realnet or an executor.
"""

from .grid import MAX_CELLS, Axis, Cell, SweepError, build_cells, grid, parse_vary, value_of
from .metrics import DEFAULT_METRICS, METRICS, Metric, measure, parse_metrics, writes_alone
from .results import MAX_REPEAT, CellResult, SweepResult, fmt, note_of, table

__all__ = ["Axis", "Cell", "CellResult", "DEFAULT_METRICS", "MAX_CELLS", "MAX_REPEAT",
           "METRICS", "Metric", "SweepError", "SweepResult", "build_cells", "fmt", "grid",
           "measure", "note_of", "parse_metrics", "parse_vary", "table", "value_of",
           "writes_alone"]
