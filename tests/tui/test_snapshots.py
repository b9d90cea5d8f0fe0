"""Snapshots, grouped by feature, each at 80×24 and 120×40.

Update only after looking at them as PNGs (docs/tui.md: `python -m tests.tui.snapshot_png`
renders every SVG here to PNG).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from nagle_sim.lessons import load_lessons
from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import settle

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])


async def _first_stall(pilot: Pilot[object]) -> None:
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("n")
    await pilot.pause()
    pilot.app.screen.query_one(Ladder).focus()
    await pilot.pause()


@SIZES
def test_lesson_screen_mid_stall(snap_compare: Callable[..., bool],
                                 make_app: Callable[..., NagleApp],
                                 size: tuple[int, int]) -> None:
    """Lesson 01 at its first stall: the Nagle hold and the delayed-ACK bar both show."""
    app = make_app(ask_questions=False)
    assert snap_compare(app, terminal_size=size, run_before=_first_stall)


def test_lesson_list(snap_compare: Callable[..., bool],
                     make_app: Callable[..., NagleApp]) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24))


async def _wrong_answer(pilot: Pilot[object]) -> None:
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("end")
    await pilot.pause()
    await pilot.press("1")
    await pilot.pause()


@SIZES
def test_question_with_feedback(snap_compare: Callable[..., bool],
                                make_app: Callable[..., NagleApp],
                                size: tuple[int, int]) -> None:
    """Issue 12: a wrong answer, the right one and the explanation all readable; the
    ladder behind stops at the question's time."""
    assert snap_compare(make_app(), terminal_size=size, run_before=_wrong_answer)


async def _cwnd_lesson_in_flight(pilot: Pilot[object]) -> None:
    app = pilot.app
    lesson = next(x for x in load_lessons() if x.slug.endswith("nodelay-twenty-writes"))
    await app.push_screen(LessonScreen(lesson))
    await settle(pilot)
    ladder = app.screen.query_one(Ladder)
    target = next(i for i, r in enumerate(ladder.rows) if r.t >= 15_008)
    app.screen.move_to(target)
    await pilot.pause()
    ladder.focus()
    await pilot.pause()


@SIZES
def test_cwnd_lesson_with_segments_in_flight(snap_compare: Callable[..., bool],
                                           size: tuple[int, int]) -> None:
    """Issue 12: ten segments in flight are drawn as send and arrival stubs, not a
    staircase tangle."""
    app = NagleApp(run_sim=run_sim, ask_questions=False)
    assert snap_compare(app, terminal_size=size, run_before=_cwnd_lesson_in_flight)


async def _help(pilot: Pilot[object]) -> None:
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("question_mark")
    await pilot.pause()


@SIZES
def test_legend_in_help(snap_compare: Callable[..., bool],
                        make_app: Callable[..., NagleApp], size: tuple[int, int]) -> None:
    """Issue 12: help opens on the legend (colours as in the exports)."""
    assert snap_compare(make_app(ask_questions=False), terminal_size=size, run_before=_help)


async def _cwnd_lesson_question_pending(pilot: Pilot[object]) -> None:
    app = pilot.app
    lesson = next(x for x in load_lessons() if x.slug.endswith("nodelay-twenty-writes"))
    await app.push_screen(LessonScreen(lesson))
    await settle(pilot)
    ladder = app.screen.query_one(Ladder)
    ladder.cursor = len(ladder.rows) - 1  # the last row before the question's time
    await pilot.pause()
    ladder.focus()
    await pilot.pause()


@SIZES
def test_cwnd_lesson_in_flight_with_the_question_pending(snap_compare: Callable[..., bool],
                                                       size: tuple[int, int]) -> None:
    """Issue 12: at the question's horizon the in-flight segments are send stubs too."""
    app = NagleApp(run_sim=run_sim)
    assert snap_compare(app, terminal_size=size, run_before=_cwnd_lesson_question_pending)
