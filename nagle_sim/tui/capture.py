"""What the app needs to open a capture "like a lesson" (``nagle-sim explain --tui``).

Owns plain data only: `CaptureView` (the captured trace, the rebuilt scenario and its model
run, each stall with its cause, evidence and the model's comparison, and the rebuild's
what-ifs as scenario texts) and `StallNote`. ``nagle_sim.cli.explain`` fills it; the app
shows it (`screens.capture`). Must not import textual, simpy, realnet or nagle_sim.explain
(the explain pipeline runs the simulator; the app gets its results handed over).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trace import Trace
from ..trace.units import ms_text


@dataclass(frozen=True, slots=True, kw_only=True)
class StallNote:
    """One stall found in the capture, in words."""

    start: int
    end: int
    """µs on the ladder's clock: the captured trace's send times (a segment's capture time
    minus its sender's distance from the capture point), the clock every row shows."""
    cause: str
    """From explain's fixed vocabulary, combinations joined with "+" (nagle+delayed_ack)."""
    confidence: float
    text: str
    evidence: tuple[str, ...] = ()
    model_ms: float | None = None
    reproduced: bool | None = None
    """True/False: the model's re-run has / lacks this stall; None: not compared."""
    segment: int | None = None
    """Index in the captured trace of the segment that ended the stall (the one released,
    e.g. the held data sent once the ACK came); its row is where `n` lands."""
    at: int | None = None
    """That segment's time on the ladder's clock (µs); None: no such segment."""
    duration_us: int | None = None
    """The stall's length as measured at the capture point (None: ``end - start``); the
    two clocks can differ by the hosts' distances from the capture point."""

    @property
    def duration_ms(self) -> float:
        us = self.duration_us if self.duration_us is not None else self.end - self.start
        return us / 1000

    def covers(self, t: int) -> bool:
        """``t`` (ladder clock) is inside the stall or on the row that ended it."""
        last = max(self.end, self.at) if self.at is not None else self.end
        return self.start <= t <= last

    def model_line(self) -> str:
        capture = f"capture {self.duration_ms:.1f} ms"
        if self.reproduced is None:
            return f"model: not compared (beyond the model's re-run); {capture}"
        if self.model_ms is None:
            return f"model: no such stall in the re-run; {capture}"
        verdict = "model reproduces it" if self.reproduced else "model differs"
        return f"{verdict}: model {self.model_ms:.1f} ms, {capture}"

    def lines(self, number: int, total: int) -> list[str]:
        """The explanation panel's lines for this stall (the panel scrolls)."""
        head = (f"Stall {number}/{total}: {self.duration_ms:.1f} ms from "
                f"{ms_text(self.start)} to {ms_text(self.end)} ms, cause {self.cause} "
                f"(confidence {self.confidence:.1f})")
        out = [head, self.text, self.model_line()]
        out += [f"evidence: {e}" for e in self.evidence]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureWhatIf:
    """One of the rebuild's what-ifs: a name, the scenario text it runs, its result."""

    name: str
    toml: str
    text: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureView:
    title: str
    """The capture's file name and the connection explained."""
    where: str
    """Where the rebuilt scenario text came from (used in its error messages)."""
    captured: Trace
    toml: str
    """The rebuilt scenario (what ``--scenario`` writes)."""
    model: Trace | None = None
    """The model's run of `toml`, when explain already ran it."""
    stalls: tuple[StallNote, ...] = ()
    whatifs: tuple[CaptureWhatIf, ...] = ()
    notes: tuple[str, ...] = ()
    captured_per_request_ms: float | None = None
