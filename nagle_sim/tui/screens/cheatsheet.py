"""The course's cheat sheet inside the app (f4, or the palette): `CheatSheetScreen`.

Owns only the screen; the text is ``lessons/cheatsheet.md`` (`nagle_sim.lessons.cheat_sheet`),
the same source `nagle-sim handout` prints. No simpy, no realnet.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Markdown

from .closing import ClosesOnce


class CheatSheetScreen(ClosesOnce, Screen[None]):
    """The cheat sheet, scrollable; Esc, q or f4 closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f4", "dismiss", "Close", id="cheatsheet.close",
                tooltip="Close the cheat sheet"),
    ]

    DEFAULT_CSS = """
    CheatSheetScreen > VerticalScroll { padding: 0 1; }
    CheatSheetScreen Markdown { margin: 0; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(self.text, id="cheatsheet")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()
