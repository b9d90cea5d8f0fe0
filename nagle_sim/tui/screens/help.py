"""Help: every key binding of the app and of the screen underneath, with its tooltip.

Generated from the BINDINGS themselves, so it cannot drift. No simpy, no realnet.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown, Static

from ..palette import legend_text

INTRO = """\
The ladder shows **client | wire | server** with time flowing down. Arrows are segments
(`P. 1:7(6)` = flags, sequence range, length); bars beside an axis are periods when that
side held something back. Each colour means what it means in the SVG/PNG exports:
"""


def _key(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    names = {"full_stop": ".", "comma": ",", "plus": "+", "equals_sign": "=", "minus": "-",
             "question_mark": "?", "space": "space"}
    return " / ".join(names.get(k, k) for k in binding.key.split(","))


def binding_table(title: str, bindings: list[BindingType]) -> str:
    lines = [f"## {title}", "", "| key | action | what it does |", "|---|---|---|"]
    for b in bindings:
        if not isinstance(b, Binding):
            continue
        tip = (b.tooltip or "").replace("|", "\\|")
        lines.append(f"| `{_key(b)}` | {b.description} | {tip} |")
    return "\n".join(lines) + "\n"


class HelpScreen(ModalScreen[None]):
    """All bindings, generated from the classes' BINDINGS."""

    BINDINGS: list[BindingType] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close",
                tooltip="Close the help"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 95%; max-width: 120; height: 90%; border: thick $accent;
        background: $surface; padding: 0 1;
    }
    """

    def __init__(self, underneath: Screen[object] | None) -> None:
        super().__init__()
        self.underneath = underneath

    def compose(self) -> ComposeResult:
        parts: list[str] = ["# nagle-sim keys"]
        screen = self.underneath
        if screen is not None:
            seen: list[BindingType] = []
            for cls in reversed(type(screen).__mro__):
                own = cls.__dict__.get("BINDINGS")
                if own and cls.__module__.startswith("nagle_sim"):
                    seen.extend(own)
            if seen:
                parts.append(binding_table(f"This screen ({type(screen).__name__})", seen))
            ladder_bindings = [
                b for b in _ladder_bindings() if isinstance(b, Binding)]
            parts.append(binding_table("Ladder (when focused)", list(ladder_bindings)))
        parts.append(binding_table("Everywhere", list(type(self.app).BINDINGS)))
        parts.append("Press **ctrl+p** for the command palette (every main action is there).")
        with VerticalScroll():
            yield Markdown("# Legend\n\n" + INTRO, id="legend-intro")
            yield Static(legend_text(), id="legend")
            yield Markdown("\n".join(parts), id="keys")


def _ladder_bindings() -> list[BindingType]:
    from ..widgets.ladder import Ladder

    return list(Ladder.BINDINGS)
