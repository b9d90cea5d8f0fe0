"""What the app offers its screens: the injected executors and how to run them.

Must not import simpy or realnet: runners arrive as plain callables (`nagle_sim.trace.Runner`,
made by `nagle_sim.runners`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..lessons import Lesson
from ..scenario import Scenario
from ..trace import Runner, Trace
from .classroom import Classroom

if TYPE_CHECKING:
    from .classlink import ClassLink

__all__ = ["AppServices", "Runner", "run_cancellable"]


def run_cancellable(runner: Runner, scenario: Scenario, cancelled: Callable[[], bool]) -> Trace:
    """Run ``scenario``, letting a runner that supports it (``run_sim(..., cancelled=)``)
    stop early once ``cancelled()`` is true: a superseded run or a quitting app must not
    keep a thread busy for minutes. Other runners (test fakes) just run."""
    try:
        params = list(inspect.signature(runner).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.name == "cancelled" or p.kind is p.VAR_KEYWORD for p in params):
        return runner(scenario, cancelled=cancelled)  # type: ignore[call-arg]
    return runner(scenario)


class AppServices(Protocol):
    """What screens need from `NagleApp` (kept as a protocol to avoid an import cycle)."""

    run_sim: Runner
    run_real: Runner | None
    real_blocker: str
    classroom: Classroom | None
    ask_questions: bool
    projector: bool
    scores: dict[str, tuple[int, int]]
    """Per lesson slug: (right answers, questions), shown in the lesson list."""
    class_link: ClassLink | None
    """A served app's link to its class and teacher (None: working alone)."""

    def lesson_list(self) -> tuple[list[Lesson], str]:
        """The lessons, and a one-line error if loading them failed."""
        ...
