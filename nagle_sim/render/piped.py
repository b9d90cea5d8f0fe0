"""Tables at their natural width when the output is not a terminal.

Owns one rule every command's tables follow: piped or redirected, rich assumes 80 columns
and folds a wider table into fragments (``S. ack`` / ``1`` on two lines, ``P.`` /
``7:14(7`` / ``)`` on three) that nobody can grep or paste; so the console is widened to
the widest table it is about to print. A terminal keeps its own width. Must not import
textual, simpy or an executor.
"""

from __future__ import annotations

from rich.console import Console, RenderableType

MAX_PIPED_WIDTH = 10_000
"""The widest a piped table is drawn (a bound, never reached by a real table)."""


def fit_piped(console: Console, *renderables: RenderableType) -> None:
    """Widen ``console`` (not a terminal) to the natural width of the widest of
    ``renderables``; never narrows it."""
    if console.is_terminal:
        return
    wide = console.options.update_width(MAX_PIPED_WIDTH)
    need = max((console.measure(r, options=wide).maximum for r in renderables), default=0)
    console.width = max(console.width, min(need, MAX_PIPED_WIDTH))
