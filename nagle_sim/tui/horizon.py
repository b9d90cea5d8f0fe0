"""Predict, then reveal: a finished run cut at a time horizon, so nothing later shows.

While a lesson's question is pending, the app draws the run only up to the question's
``at_ms``: later rows are dropped; holds and delayed-ACK/probe timers still pending at
the horizon are withheld (each row becomes a neutral "? after you answer"; their
bars and context lines are not drawn), since their mere presence answers the question;
other rows and segments that reach past the horizon lose the parts that speak of the
future (a read's result and duration, a segment's arrival, when a retransmission timer
will fire). Pure functions; must not import textual, simpy or realnet.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

from ..model.events import Side
from ..trace import EventRecord, Outcome, SegmentRecord, Trace
from ..trace.rows import Bar, Row, RowKind
from .rows import row_times


def visible_rows(rows: Sequence[Row], horizon: int | None) -> Sequence[Row]:
    """The rows at or before ``horizon``, each told only what was known then; the
    decisions still pending at the horizon (`pending`) are not shown at all."""
    if horizon is None:
        return rows
    cut = bisect.bisect_right(row_times(rows), horizon)
    shown = rows[:cut]
    # a pending decision keeps its line (row i of the cut view is row i of the run: stall
    # jumps and "the first row the answer reveals" index both) but says nothing of itself
    return [_row_at(r, horizon) if not pending(shown, i, horizon) else _withheld(r)
            for i, r in enumerate(shown)]


def _withheld(row: Row) -> Row:
    """A pending decision's row as a grey note that names nothing (no hold, no timer)."""
    return replace(row, kind=RowKind.STATE, label="? after you answer",
                   explain=f"{row.side.value}: something here is shown after the question",
                   code="", event=None)


PENDING_TIMERS = ("delack", "probe0")
"""Timers whose firing is what a lesson's question asks about."""


def pending(rows: Sequence[Row], index: int, horizon: int) -> bool:
    """Row ``index`` is a decision whose outcome lies past the horizon: a hold whose data
    has not left by then, or a delayed-ACK or probe timer still running. Even without
    its length, such a row answers "when does it leave?" (a purple delayed-ACK bar under
    lesson 7's question, "Nagle holds" under lesson 1's), so it waits for the answer."""
    row = rows[index]
    event = row.event
    if event is None:
        return False
    if event.kind == "hold":
        return not any(r.side is row.side and r.segment is not None and r.segment.is_data
                       for r in rows[index + 1:])
    if event.kind == "ack_delayed" or (event.kind == "timer_armed"
                                       and event.timer in PENDING_TIMERS):
        return event.deadline is None or event.deadline > horizon
    return False


_ARMED_NOW = {
    # reasons whose own words give the timer's length
    "PROBE0_ARMED": "nothing in flight but data queued: probe timer armed",
}


def _row_at(row: Row, horizon: int) -> Row:
    op = row.op
    if row.kind is RowKind.OP and op is not None and (op.end is None or op.end > horizon):
        label = f"{op.op} {op.arg}".strip()
        return replace(row, label=f"{label} …",
                       explain=f"{op.side.value} application calls {label} "
                               "(not returned yet)",
                       op=replace(op, end=None, result=None))
    event = row.event
    if event is not None and event.kind in ("ack_delayed", "timer_armed") and (
            event.deadline is None or event.deadline > horizon):
        # "fires in 42.0 ms", "(timer 200 ms)", "at max(RTO, 200 ms) (RTO 210 ms)" all
        # say when the timer will fire: the question is about exactly that
        reason = _ARMED_NOW.get(event.code, event.reason)
        quiet = replace(event, reason=reason, detail="still running", deadline=None)
        return replace(row, explain=f"{event.side.value}: {quiet.text()}", event=quiet)
    seg = row.segment
    if seg is not None and seg.arrive is not None and seg.arrive > horizon:
        return replace(row, segment=replace(seg, arrive=None))
    return row


def visible_bars(bars: list[Bar], horizon: int | None) -> list[Bar]:
    """Bars that ended by ``horizon``; one still running then is the question's answer
    (how long the hold or the timer lasts, and that there is one: see `pending`)."""
    if horizon is None:
        return bars
    return [bar for bar in bars if bar.end <= horizon]




def visible_segments(segments: list[SegmentRecord] | None, horizon: int | None
                     ) -> list[SegmentRecord] | None:
    """Overlay segments (ghost, measured) sent by ``horizon``, arrivals after it removed."""
    if segments is None or horizon is None:
        return segments
    return [s if s.arrive is None or s.arrive <= horizon else replace(s, arrive=None)
            for s in segments if s.t <= horizon]


def trace_until(trace: Trace, horizon: int | None) -> Trace:
    """What an export may contain while a question is pending: the trace cut at
    ``horizon`` (segments in flight lose their arrival, calls not returned their result)."""
    if horizon is None:
        return trace
    last_sent = _last_data_sent(trace, horizon)
    return replace(
        trace,
        segments=visible_segments(trace.segments, horizon) or [],
        ops=[op if op.end is not None and op.end <= horizon
             else replace(op, end=None, result=None)
             for op in trace.ops if op.start <= horizon],
        events=[e for e in trace.events if e.t <= horizon
                and not _pending_event(e, horizon, last_sent)],
        outcome=Outcome.OK, message="")


def _last_data_sent(trace: Trace, horizon: int) -> dict[Side, int]:
    """Per side, when it last sent data by ``horizon`` (-1: not yet)."""
    last = {side: -1 for side in Side}
    for s in trace.segments:
        if s.is_data and s.t <= horizon and s.t > last[s.src]:
            last[s.src] = s.t
    return last


def _pending_event(e: EventRecord, horizon: int, last_sent: dict[Side, int]) -> bool:
    """`pending` for a trace's event: an export made while a question waits shows no
    more than the ladder does (a hold is pending when its side sent no data after it)."""
    if e.kind == "hold":
        return last_sent[e.side] <= e.t
    if e.kind == "ack_delayed" or (e.kind == "timer_armed" and e.timer in PENDING_TIMERS):
        return e.deadline is None or e.deadline > horizon
    return False
