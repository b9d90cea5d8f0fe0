"""Judging a matched row's timing: packetdrill's rule, measured so errors never accumulate.

Owns: the tolerance (|error| ≤ max(4 ms, 12.5 % of the interval since the previous matched
event), timer slack (a segment a kernel timer sends may be `TIMER_LATE_JIFFIES` late on a
loaded machine, never early), and timing from a call's start for the segments a call
sends itself (`CallAnchors`), so one side's aligned timeline is not judged by the other
side's drift.
"""

from __future__ import annotations

import bisect

from ..model.events import Micros, Side
from ..trace import Trace
from ..trace.units import ms_text
from .match import Match

TOLERANCE_FLOOR = Micros(4_000)

TOLERANCE_FRACTION = 0.125

TOLERANCE_TEXT = ("packetdrill's: |error| ≤ max(4 ms, 12.5 % of the interval since the "
                  "previous matched event)")

TIMER_CODES = frozenset({"DELACK_FIRED", "PROBE0_RELEASE", "LOSS_PROBE", "RETRANSMIT"})
"""Model reasons of segments a kernel timer sends (delayed ACK, probe, loss probe, RTO)."""

TIMER_LATE_JIFFIES = 2
"""A loaded machine (a VM above all) fires a timer a jiffy or two late, never early: a
segment the model sends from a timer may be this many of the sender's jiffies late on top
of packetdrill's tolerance, and is then an agreement with a note, not a difference."""

def tolerance(interval: int) -> Micros:
    """Allowed timing error for an event ``interval`` µs after the previous one."""
    return Micros(max(TOLERANCE_FLOOR, round(TOLERANCE_FRACTION * abs(interval))))

CALL_CODES = frozenset({"APP_WRITE", "NODELAY_PUSH", "UNCORK_PUSH", "CLOSE_PUSH",
                        "READ_ACK", "WINDOW_UPDATE", "QUICKACK_OPT"})
"""Model reasons of segments a call sends itself (a write, an uncork, a close, the ACK on
read or at TCP_QUICKACK): only these may be timed from the call (`CallAnchors`)."""

class CallAnchors:
    """Each side's calls in both traces, paired by statement and iteration. A segment the
    call itself sent (`CALL_CODES`, during the call in the model) may be timed from that
    call's start, so a side whose own timeline (its sleeps) is aligned is not judged by
    the other side's drift (a chain of delayed-ACK timers each a jiffy late). A segment a
    timer, an arriving ACK or anything else sent is never timed this way."""

    def __init__(self, sim: Trace, real: Trace) -> None:
        twins: dict[tuple[Side, str, int, tuple[int, ...], int], int] = {}
        for op in real.ops:
            if op.line:
                twins.setdefault((op.side, op.op, op.line, op.iteration, op.loop), op.start)
        self.calls: dict[Side, list[tuple[int, int, int]]] = {side: [] for side in Side}
        for op in sim.ops:
            twin = twins.get((op.side, op.op, op.line, op.iteration, op.loop))
            if op.line and twin is not None and op.end is not None:
                self.calls[op.side].append((op.start, op.end, twin))
        for calls in self.calls.values():
            calls.sort()
        self.starts = {side: [c[0] for c in calls] for side, calls in self.calls.items()}

    def error(self, m: Match) -> tuple[int, Micros] | None:
        """(error, tolerance) of ``m`` timed from the start of the call that sent it (the
    tolerance is the 4 ms floor), or None."""
        assert m.sim_t is not None and m.real_t is not None
        if not m.sim or not all(seg.code in CALL_CODES for seg in m.sim):
            return None
        i = bisect.bisect_right(self.starts[m.side], m.sim_t) - 1
        if i < 0:
            return None
        sim_call, sim_end, real_call = self.calls[m.side][i]
        if m.sim_t > sim_end:
            return None     # sent after the call returned: not the call's own segment
        # the 4 ms floor, never 12.5 % of the call's length: a read that blocked for
        # 400 ms would otherwise excuse its ACK coming 40 ms late (a delayed ACK where the
        # model sends the ACK on read, the very difference to catch)
        return (m.real_t - real_call) - (m.sim_t - sim_call), TOLERANCE_FLOOR

def time_errors(matches: list[Match], late_ok: dict[Side, Micros] | None = None,
                 calls: CallAnchors | None = None) -> None:
    """Error on each interval since the previous matched event that agreed (model time
    order): a late event is reported once, not again by the correctly spaced one after it.
    ``late_ok``: per sender, how much later than the tolerance a segment the model sends
    from a timer may come (`TIMER_LATE_JIFFIES`). An event after such a late timer is
    timed from it (what the timer released came late with it) or from the event before it
    (what the timer did not cause, e.g. ACKs paced by the link), whichever fits better.
    ``calls``: an event that does not fit its previous event may also be timed from its
    sender's last call (`CallAnchors`)."""
    timed = [m for m in matches if m.sim_t is not None and m.real_t is not None]
    timed.sort(key=lambda m: (m.sim_t, m.real_t))
    prev: Match | None = None
    late: Match | None = None

    def error(m: Match, since: Match | None) -> tuple[int, Micros]:
        assert m.sim_t is not None and m.real_t is not None
        if since is None:
            return m.real_t - m.sim_t, tolerance(m.sim_t)
        assert since.sim_t is not None and since.real_t is not None
        interval = m.sim_t - since.sim_t
        return (m.real_t - since.real_t) - interval, tolerance(interval)

    for m in timed:
        m.error, m.tol = error(m, prev)
        if late is not None:
            from_late = error(m, late)
            if abs(from_late[0]) - from_late[1] < abs(m.error) - m.tol:
                m.error, m.tol = from_late
        if calls is not None and abs(m.error) > m.tol:
            from_call = calls.error(m)
            if from_call is not None and abs(from_call[0]) <= from_call[1]:
                m.error, m.tol = from_call
        slack = (late_ok or {}).get(m.side, Micros(0))
        if (slack and m.tol < m.error <= m.tol + slack and m.sim
                and all(seg.code in TIMER_CODES for seg in m.sim)):
            extra = (f"{ms_text(m.error)} ms later than the model: its timer fired late "
                     f"(up to {TIMER_LATE_JIFFIES} jiffies allowed)")
            m.note = f"{m.note}; {extra}" if m.note else extra
            m.kind = "timer-late" if m.kind == "match" else m.kind
            late = m
        elif abs(m.error) > m.tol:
            m.ok = False
            later = "later" if m.error > 0 else "earlier"
            extra = f"{ms_text(abs(m.error))} ms {later} than the model"
            m.note = f"{m.note}; {extra}" if m.note else extra
        else:
            prev, late = m, None   # anchor on events that agreed: one late event is reported once
