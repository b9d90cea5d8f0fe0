"""The explanation panel: why the selected ladder row happened, in plain words.

No simpy, no realnet.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...render.rows import Row


class ExplainPanel(Static):
    """Shows the selected row's sentence plus context lines (bars, stall, measured Δ)."""

    DEFAULT_CSS = """
    ExplainPanel {
        height: 7;
        padding: 0 1;
        background: $boost;
        border-top: solid $primary;
    }
    """

    def explain(self, row: Row | None, index: int, total: int, context: list[str]) -> None:
        if row is None:
            self.update("No trace yet.")
            return
        text = Text()
        text.append(f"{row.t / 1000:.3f} ms", style="bold")
        text.append(f"  {row.side.value}  {row.kind.value}  ({index + 1}/{total})\n",
                    style="dim")
        text.append(row.explain[:1].upper() + row.explain[1:])
        for line in context:
            text.append("\n")
            text.append(line, style="italic")
        self.update(text)
