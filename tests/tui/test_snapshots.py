"""Snapshots of the lesson screen mid-stall (update only after looking at the SVGs)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import settle


async def _first_stall(pilot: Pilot[object]) -> None:
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("n")
    await pilot.pause()
    pilot.app.screen.query_one(Ladder).focus()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_lesson_screen_mid_stall(snap_compare: Callable[..., bool],
                                 make_app: Callable[..., NagleApp],
                                 size: tuple[int, int]) -> None:
    """Lesson 01 at its first stall: the Nagle hold and the delayed-ACK bar both show."""
    app = make_app(ask_questions=False)
    assert snap_compare(app, terminal_size=size, run_before=_first_stall)


def test_lesson_list(snap_compare: Callable[..., bool],
                     make_app: Callable[..., NagleApp]) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24))
