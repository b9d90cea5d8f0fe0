"""The what-if bar: clickable chips for per-side NODELAY / CORK / QUICKACK / profile and
the link delay. Posts `WhatIfBar.Flip`; the screen re-simulates. No simpy, no realnet.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static

from ...model.events import Side
from ...scenario import Scenario
from ..whatif import Knob, WhatIf, delay_text

KEYS: dict[tuple[Side, Knob], str] = {
    (Side.CLIENT, Knob.NODELAY): "d", (Side.CLIENT, Knob.CORK): "c",
    (Side.CLIENT, Knob.QUICKACK): "k", (Side.CLIENT, Knob.PROFILE): "o",
    (Side.SERVER, Knob.NODELAY): "D", (Side.SERVER, Knob.CORK): "C",
    (Side.SERVER, Knob.QUICKACK): "K", (Side.SERVER, Knob.PROFILE): "O",
}
"""Keyboard shortcut of each chip (the screen's BINDINGS use the same keys)."""


class Chip(Static):
    """One clickable toggle."""

    DEFAULT_CSS = """
    Chip { width: auto; padding: 0 1; margin-right: 1; background: $panel; }
    Chip.-on { background: $success 40%; text-style: bold; }
    Chip:hover { background: $accent 40%; }
    """

    def __init__(self, side: Side | None, knob: Knob | None, *, id: str) -> None:
        super().__init__(id=id)
        self.side = side
        self.knob = knob

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.post_message(WhatIfBar.Flip(self.side, self.knob))


class WhatIfBar(Vertical):
    """Two lines: client chips, server chips plus the link delay."""

    DEFAULT_CSS = """
    WhatIfBar { height: auto; padding: 0 1; }
    WhatIfBar Horizontal { height: 1; }
    WhatIfBar .side { width: 8; color: $foreground-muted; }
    """

    class Flip(Message):
        """Flip one knob; ``side`` and ``knob`` are None for the link delay."""

        def __init__(self, side: Side | None, knob: Knob | None) -> None:
            super().__init__()
            self.side = side
            self.knob = knob

    def compose(self) -> ComposeResult:
        for side in Side:
            with Horizontal():
                yield Static(side.value, classes="side")
                for knob in Knob:
                    chip = Chip(side, knob, id=f"chip-{side.value}-{knob.value}")
                    chip.tooltip = f"[{KEYS[(side, knob)]}] toggle {side.value} {knob.value}"
                    yield chip
                if side is Side.SERVER:
                    chip = Chip(None, None, id="chip-delay")
                    chip.tooltip = "[l] cycle the link delay"
                    yield chip

    def show(self, whatif: WhatIf, scenario: Scenario) -> None:
        for side in Side:
            choice = whatif.side(side)
            values = {
                Knob.NODELAY: ("NODELAY", choice.nodelay),
                Knob.CORK: ("CORK", choice.cork),
                Knob.QUICKACK: ("QUICKACK" + {None: " –", False: "=0", True: "=1"}[
                    choice.quickack], choice.quickack is not None),
                Knob.PROFILE: (choice.profile, False),
            }
            for knob, (label, on) in values.items():
                chip = self.query_one(f"#chip-{side.value}-{knob.value}", Chip)
                mark = "" if knob in (Knob.PROFILE, Knob.QUICKACK) else (" ✓" if on else " ✗")
                chip.update(f"{KEYS[(side, knob)]} {label}{mark}")
                chip.set_class(on, "-on")
        self.query_one("#chip-delay", Chip).update(f"l link {delay_text(scenario)}")
