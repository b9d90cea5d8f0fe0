"""A sweep's table in the terminal (``nagle-sim sweep`` without ``--markdown``).

Owns: how `nagle_sim.sweep.results.table` is drawn with rich: numbers right-aligned, one
metric named once in the title when only one was asked for, and the whole table at its
natural width when the output is not a terminal (rich would otherwise fold a wide table at
80 columns into fragments nobody can paste into a slide). Must not import textual, simpy
or an executor.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..sweep import SweepResult, fmt, table
from .piped import fit_piped


def print_sweep(result: SweepResult, console: Console) -> None:
    """Print ``result``'s table on ``console``."""
    headers, rows = table(result)
    title = f"sweep of {result.source}"
    if result.real and len(result.metrics) == 1:
        # one metric: name it once in the title, keep the four columns narrow
        metric = result.metrics[0]
        title += (f": {metric}, model vs kernel (" + (
            f"mean of {result.repeat} runs, sample sd, " if result.repeat > 1 else "one run, ")
            + "diff = kernel − model)")
        headers = [h.removeprefix(f"{metric} ") for h in headers]
    t = Table(title=escape(title), title_justify="left")
    for i, h in enumerate(headers):
        numeric = i >= len(result.axes) and h != "note"
        t.add_column(escape(h), justify="right" if numeric else "left",
                     overflow="fold")
    for row in rows:
        t.add_row(*(escape(fmt(v) if isinstance(v, int | float) and not isinstance(v, bool)
                           else "–" if v is None else str(v).lower()
                           if isinstance(v, bool) else str(v)) for v in row))
    fit_piped(console, t)
    console.print(t)
