"""Screens that close themselves, closed once.

Textual's `Screen.dismiss` pops whatever screen is on top of the stack. Two closing keys
typed before the first close has finished (`?` then `q` on help, two Enters on a
question) each ran a dismiss, and the second popped the screen *below* — the student's
lesson vanished, or, with nothing left to pop, the app ended with ScreenStackError (a
classroom key storm did both). Must not import simpy or realnet.
"""

from __future__ import annotations

from typing import Any

from textual.await_complete import AwaitComplete
from textual.command import CommandPalette
from textual.screen import Screen


class ClosesOnce:
    """Mixin (before the Screen class): `dismiss` acts only while this screen is the
    active one; a later call is a no-op."""

    def dismiss(self, result: Any = None) -> AwaitComplete:
        assert isinstance(self, Screen)
        if self.app.screen is not self:
            return AwaitComplete()
        closing: AwaitComplete = super().dismiss(result)  # type: ignore[misc]
        return closing


class OncePalette(ClosesOnce, CommandPalette):
    """Textual's command palette, closed once (it dismisses itself when a command is
    chosen, and an Enter typed meanwhile chose again)."""
