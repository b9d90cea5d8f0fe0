"""Help: the legend, then every key binding of the app and of the screen underneath.

Generated from the BINDINGS themselves, so it cannot drift. Drawn as styled text in one
Static (Markdown or rich tables took 0.5-2 s to lay out; help must open in < 150 ms).
No simpy, no realnet.
"""

from __future__ import annotations

import textwrap
from typing import Any, ClassVar

from rich.text import Text
from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from ..palette import legend_text
from .closing import ClosesOnce

INTRO = (
    "The ladder shows client | wire | server with time flowing down. Arrows are segments "
    "(P. 1:7(6) = flags, sequence range, length); bars beside an axis are periods when "
    "that side held something back. Each colour means what it means in the SVG/PNG "
    "exports:\n"
)


def key_label(binding: Binding) -> str:
    """How a binding's key reads: its key_display, else its keys spelled out."""
    if binding.key_display:
        return binding.key_display
    names = {"full_stop": ".", "comma": ",", "plus": "+", "equals_sign": "=", "minus": "-",
             "question_mark": "?", "space": "space"}
    return " / ".join(names.get(k, k) for k in binding.key.split(","))


def binding_table(title: str, bindings: list[BindingType], width: int = 116) -> Text:
    """One section of keys as plain styled lines (a rich Table here cost ~0.5 s to lay
    out; help must open in < 150 ms). Tooltips wrap under themselves, not under the key."""
    text = Text()
    text.append(f"\n{title}\n", style="bold underline")
    indent = 12 + 1 + 16 + 1
    wrap = max(20, width - indent)
    for b in bindings:
        if isinstance(b, Binding):
            text.append(f"{key_label(b):>12} ", style="bold")
            text.append(f"{b.description:<16}")
            lines = textwrap.wrap(b.tooltip or "", wrap) or [""]
            text.append(" " + ("\n" + " " * indent).join(lines) + "\n", style="dim")
    return text


def screen_bindings(screen: Screen[Any]) -> list[Binding]:
    """The screen's own key bindings (its classes' BINDINGS), one per action (a subclass's
    binding replaces its base's: lesson screens rebind d), only those the screen offers
    now (``check_action``: a lesson with two what-ifs has no What-if 3…9)."""
    chosen: dict[str, Binding] = {}
    order: list[str] = []
    for cls in type(screen).__mro__:  # most derived first
        own = cls.__dict__.get("BINDINGS")
        if not own or not cls.__module__.startswith("nagle_sim"):
            continue
        for b in own:
            if not isinstance(b, Binding) or b.action in chosen:
                continue
            _ns, name, params = parse(b.action)
            if screen.check_action(name, params) is False:
                continue
            chosen[b.action] = b
            order.append(b.action)
    # base classes first, as the footer reads
    return sorted((chosen[a] for a in order), key=lambda b: _rank(screen, b))


def _rank(screen: Screen[Any], binding: Binding) -> int:
    for depth, cls in enumerate(reversed(type(screen).__mro__)):
        if binding in (cls.__dict__.get("BINDINGS") or ()):
            return depth
    return 0


class HelpScreen(ClosesOnce, Screen[None]):
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
        self.source = ""
        """Plain text of every key table."""
        self._legend = _legend()
        self._keys = Text()
        self._shown_for: tuple[object, ...] | None = None

    def show_for(self, underneath: Screen[object] | None) -> None:
        """Describe ``underneath``'s keys. The app keeps one installed help screen and calls
        this before each opening: rebuilding its widgets cost most of the time help took
        to open, so only the key text is replaced, and only when it changed."""
        self.underneath = underneath
        self._build()
        if self.is_mounted:
            self.query_one("#keys", Static).update(self._keys)

    def _build(self) -> None:
        screen = self.underneath
        width = min(120, self.app.size.width) - 6  # border and padding
        offered = tuple(screen_bindings(screen)) if screen is not None else ()
        key = (type(screen), offered, width)
        if key == self._shown_for:
            return
        self._shown_for = key
        parts: list[Text] = []
        if screen is not None:
            if offered:
                parts.append(binding_table(f"This screen ({type(screen).__name__})",
                                           list(offered), width))
            ladder_bindings = [
                b for b in _ladder_bindings() if isinstance(b, Binding)]
            parts.append(binding_table("Ladder (when focused)", list(ladder_bindings), width))
        parts.append(binding_table("Everywhere", list(type(self.app).BINDINGS), width))
        self.source = "\n".join(t.plain for t in parts)
        keys = Text("\n").join(parts)
        keys.append("\nPress ctrl+p for the command palette (every main action is there).",
                    style="italic")
        self._keys = keys

    def compose(self) -> ComposeResult:
        self._build()
        with VerticalScroll():
            yield Static(self._legend, id="legend")
            yield Static(self._keys, id="keys")

    def on_screen_resume(self) -> None:
        self.query_one(VerticalScroll).scroll_home(animate=False)


def _legend() -> Text:
    legend = Text()
    legend.append("Legend\n\n", style="bold")
    legend.append(INTRO)
    legend.append_text(legend_text())
    return legend


def _ladder_bindings() -> list[BindingType]:
    from ..widgets.ladder import Ladder

    return list(Ladder.BINDINGS)
