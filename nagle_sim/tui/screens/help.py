"""Help: the legend, then every key binding of the app and of the screen underneath.

Generated from the BINDINGS themselves, so it cannot drift. Drawn as styled text in one
Static (Markdown or rich tables took 0.5-2 s to lay out; help must open in < 150 ms).
No simpy, no realnet.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from ..commands import own_bindings
from ..palette import legend_text

INTRO = (
    "The ladder shows client | wire | server with time flowing down. Arrows are segments "
    "(P. 1:7(6) = flags, sequence range, length); bars beside an axis are periods when "
    "that side held something back. Each colour means what it means in the SVG/PNG "
    "exports:\n"
)


def _key(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    names = {"full_stop": ".", "comma": ",", "plus": "+", "equals_sign": "=", "minus": "-",
             "question_mark": "?", "space": "space"}
    return " / ".join(names.get(k, k) for k in binding.key.split(","))


def binding_table(title: str, bindings: list[BindingType]) -> Text:
    """One section of keys as plain styled lines (a rich Table here cost ~0.5 s to lay
    out; help must open in < 150 ms)."""
    text = Text()
    text.append(f"\n{title}\n", style="bold underline")
    for b in bindings:
        if isinstance(b, Binding):
            text.append(f"{_key(b):>12} ", style="bold")
            text.append(f"{b.description:<16}")
            text.append(f" {b.tooltip or ''}\n", style="dim")
    return text


class HelpScreen(Screen[None]):
    """The legend and all bindings, generated from the classes' BINDINGS.

    A full screen, not a modal: drawing the dimmed screen underneath cost most of the
    time help took to open."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close",
                tooltip="Close the help"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center top; }
    HelpScreen > VerticalScroll {
        width: 100%; max-width: 120; height: 100%; border: thick $accent;
        background: $surface; padding: 0 1;
    }
    """

    def __init__(self, underneath: Screen[object] | None) -> None:
        super().__init__()
        self.underneath = underneath

    def compose(self) -> ComposeResult:
        parts: list[Text] = []
        screen = self.underneath
        if screen is not None:
            seen = own_bindings(type(screen))
            if seen:
                parts.append(binding_table(f"This screen ({type(screen).__name__})", seen))
            ladder_bindings = [
                b for b in _ladder_bindings() if isinstance(b, Binding)]
            parts.append(binding_table("Ladder (when focused)", list(ladder_bindings)))
        parts.append(binding_table("Everywhere", list(type(self.app).BINDINGS)))
        self.source = "\n".join(t.plain for t in parts)
        """Plain text of every key table."""
        legend = Text()
        legend.append("Legend\n\n", style="bold")
        legend.append(INTRO)
        legend.append_text(legend_text())
        keys = Text("\n").join(parts)
        keys.append("\nPress ctrl+p for the command palette (every main action is there).",
                    style="italic")
        with VerticalScroll():
            yield Static(legend, id="legend")
            yield Static(keys, id="keys")


def _ladder_bindings() -> list[BindingType]:
    from ..widgets.ladder import Ladder

    return list(Ladder.BINDINGS)
