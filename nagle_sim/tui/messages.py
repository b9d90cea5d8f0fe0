"""App-wide messages (widget-specific ones are nested in their widgets).

Must not import simpy or realnet.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ..trace import Trace
from .result import RunResult


@dataclass
class SimFinished(Message):
    """A simulation finished off the UI thread."""

    result: RunResult
    compare: bool
    """True when this re-run came from a what-if toggle (show the difference)."""
    generation: int = 0
    """Which request this answers (`RunScreen.simulate` counts them): a stale one is dropped."""


@dataclass
class SimFailed(Message):
    """Loading or simulating failed; ``error`` is the one-line message the CLI prints."""

    error: str
    generation: int = 0


@dataclass
class RealRunFinished(Message):
    """A run on real sockets finished; overlay its segments."""

    trace: Trace


@dataclass
class RealRunFailed(Message):
    error: str
