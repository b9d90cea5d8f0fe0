"""The explanation panel: why the selected ladder row happened, in plain words.

A focusable scroll area (tab to it, then arrows / page keys; shift+↑/↓ from the ladder), so
long context never gets cut. No simpy, no realnet.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...trace.rows import Row
from ...trace.units import ms_text


class ExplainPanel(VerticalScroll, can_focus=True):
    """Shows the selected row's sentence plus context lines (bars, stall, measured Δ)."""

    DEFAULT_CSS = """
    ExplainPanel {
        height: 7;
        padding: 0 1;
        background: $boost;
        border-top: solid $primary;
        scrollbar-size-vertical: 1;
        &:focus { background-tint: $foreground 5%; }
    }
    ExplainPanel > #explain-body { width: 1fr; height: auto; min-height: 100%; }
    """

    def compose(self) -> ComposeResult:
        yield Static("No trace yet.", id="explain-body")

    @property
    def body(self) -> Static:
        return self.query_one("#explain-body", Static)

    def explain(self, row: Row | None, index: int, total: int, context: list[str]) -> None:
        if row is None:
            self.body.update("No trace yet.")
            return
        text = Text()
        text.append(f"{ms_text(row.t)} ms", style="bold")
        text.append(f"  {row.side.value}  {row.kind.value}  ({index + 1}/{total})\n",
                    style="dim")
        text.append(row.explain[:1].upper() + row.explain[1:])
        for line in context:
            text.append("\n")
            text.append(line, style="italic")
        body = self.body
        # A layout pass costs twice the rest of a step (the whole screen is arranged again,
        # twice, and the scrollbars repainted): ask for one only when the body's height
        # changes, which is what Static's ``layout`` flag is for. The body fills the
        # panel (min-height), so texts that fit keep one height.
        body.update(text, layout=False)
        width = body.content_size.width
        view = self.scrollable_content_region.size
        if not width or max(body.get_content_height(view, self.screen.size, width),
                            view.height) != body.outer_size.height:
            body.refresh(layout=True)
        if self.scroll_y:
            self.scroll_home(animate=False)
