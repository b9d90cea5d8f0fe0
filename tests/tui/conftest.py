"""Fixtures for TUI tests: fixture lessons, a sim runner, and no blinking or animation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from textual import constants
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from nagle_sim.lessons import Lesson, load_lessons
from nagle_sim.scenario import Scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace
from nagle_sim.tui.app import NagleApp

FIXTURES = Path(__file__).parent / "fixtures"
LESSONS = FIXTURES / "lessons"


@pytest.fixture(autouse=True)
def _steady_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove flakiness: no cursor blink, no animations (harlequin's idea)."""
    monkeypatch.setattr(constants, "TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setattr(Input, "_restart_blink", lambda self: None)
    monkeypatch.setattr(TextArea, "_restart_blink", lambda self: None)


@pytest.fixture
def lessons() -> list[Lesson]:
    return load_lessons(LESSONS)


@pytest.fixture
def sim() -> Callable[[Scenario], Trace]:
    return run_sim


@pytest.fixture
def make_app(lessons: list[Lesson], sim: Callable[[Scenario], Trace]
             ) -> Callable[..., NagleApp]:
    def make(**kwargs: object) -> NagleApp:
        kwargs.setdefault("run_sim", sim)
        kwargs.setdefault("lessons", lessons)
        return NagleApp(**kwargs)  # type: ignore[arg-type]
    return make


async def settle(pilot: Pilot[object]) -> None:
    """Wait for simulation workers and the messages they post."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


class SlowRunner:
    """A simulator that runs until it is told to stop: ``started`` is set when it is
    called, ``stopped`` once its ``cancelled`` said yes (then it raises, as a cancelled
    run does)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()

    def __call__(self, scenario: Scenario, cancelled: Callable[[], bool]) -> Trace:
        self.started.set()
        while not cancelled():
            threading.Event().wait(0.01)
        self.stopped.set()
        raise RuntimeError("cancelled")
