"""Predict, then reveal: a finished run cut at a time horizon, so nothing later shows.

While a lesson's question is pending, the app draws the run only up to the question's
``at_ms``: later rows are dropped, and rows, bars and segments that reach past the horizon
lose the parts that speak of the future (a read's result and duration, a hold's length,
a segment's arrival, when an armed timer will fire). Pure functions; must not import
textual, simpy or realnet.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

from ..model.events import Micros
from ..trace import Outcome, SegmentRecord, Trace
from ..trace.rows import Bar, Row, RowKind
from .rows import row_times


def visible_rows(rows: Sequence[Row], horizon: int | None) -> Sequence[Row]:
    """The rows at or before ``horizon``, each told only what was known then."""
    if horizon is None:
        return rows
    cut = bisect.bisect_right(row_times(rows), horizon)
    return [_row_at(r, horizon) for r in rows[:cut]]


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
    """Bars started by ``horizon``; one still running is cut there and loses its length."""
    if horizon is None:
        return bars
    out = []
    for bar in bars:
        if bar.start > horizon:
            continue
        if bar.end > horizon:
            bar = replace(bar, end=Micros(horizon), label=running_label(bar))
        out.append(bar)
    return out


def running_label(bar: Bar) -> str:
    """A bar's label without its (future) length: "delayed ACK running"."""
    if bar.what == "delack":
        return "delayed ACK timer running"
    if bar.what == "probe0":
        return "probe timer running"
    return bar.label.rsplit(" for ", 1)[0] + " (still held)"


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
    return replace(
        trace,
        segments=visible_segments(trace.segments, horizon) or [],
        ops=[op if op.end is not None and op.end <= horizon
             else replace(op, end=None, result=None)
             for op in trace.ops if op.start <= horizon],
        events=[e for e in trace.events if e.t <= horizon],
        outcome=Outcome.OK, message="")
