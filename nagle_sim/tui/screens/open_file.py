"""A small modal asking for a scenario file path. No simpy, no realnet."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from .closing import ClosesOnce


class OpenFileScreen(ClosesOnce, ModalScreen[str | None]):
    """Returns the typed path, or None on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="open.cancel", tooltip="Close without opening"),
    ]

    DEFAULT_CSS = """
    OpenFileScreen { align: center middle; }
    OpenFileScreen > Vertical {
        width: 80%; max-width: 100; height: auto; border: thick $accent;
        background: $surface; padding: 1 2;
    }
    """

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Open scenario file (TOML):")
            yield Input(value=self.current, placeholder="path/to/scenario.toml", id="path")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
