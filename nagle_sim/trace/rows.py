"""Ladder rows: a trace flattened into the time-ordered lines every ladder view draws.

Owns: which trace items appear on a ladder, in what order, with what label; and the
hold/timer *bars* (periods a side held data or an ACK). Used by the terminal ladder, the
TUI and the SVG export. Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from enum import Enum

from ..model.events import Micros, Side, short
from .document import Trace
from .records import EventRecord, OpRecord, SegmentRecord
from .units import ms_text


class RowKind(Enum):
    SEGMENT = "segment"
    OP = "op"
    HOLD = "hold"
    TIMER = "timer"
    ACK = "ack"
    MODE = "mode"
    OPTION = "option"
    STATE = "state"


@dataclass(frozen=True, slots=True)
class Row:
    t: Micros
    side: Side                       # the side that acts (segment: its sender)
    kind: RowKind
    label: str                       # short, for the ladder
    explain: str                     # a full sentence, for an explanation panel
    code: str = ""                   # Reason name, when the model gave one
    segment: SegmentRecord | None = None
    op: OpRecord | None = None
    event: EventRecord | None = None


@dataclass(frozen=True, slots=True)
class Bar:
    """A period during which one side held something back."""

    side: Side
    start: Micros
    end: Micros
    what: str                        # "hold" (data) | "delack" | "probe0" | "rto"
    label: str


_EVENT_KINDS = {
    "hold": RowKind.HOLD, "timer_armed": RowKind.TIMER, "timer_fired": RowKind.TIMER,
    "timer_cancelled": RowKind.TIMER, "ack_now": RowKind.ACK, "ack_delayed": RowKind.ACK,
    "mode": RowKind.MODE, "sockopt": RowKind.OPTION, "state": RowKind.STATE,
}

DETAIL_LEVELS = ("wire", "normal", "all")

ROUTINE_CODES = frozenset({"BBR_CWND", "PACING_HOLD", "PACING_RELEASE", "CWND_IDLE",
                           "CWND_GROW", "ATO_UPDATE", "FIN_ACK", "QUICK_START"})
"""Bookkeeping no lesson's question turns on (BBR's cwnd updates, pacing, the cwnd restart
after idle, a new connection's quick-ACK budget being granted): "normal" folds them away,
"all" shows them. Running out of quick ACKs (QUICK_SPENT) stays: the lesson *Delayed ACK
basics* is about it."""


def _event_label(e: EventRecord) -> str:
    if e.kind.startswith("timer_"):
        return f"{e.timer} timer {e.kind.split('_', 1)[1]}"
    label = short(e.code) or e.reason.split(":")[0]
    if e.kind == "hold" and e.data.get("length"):
        label += f" {e.data['length']} B"
    return label


def _wanted(e: EventRecord, detail: str) -> bool:
    if detail == "all":
        return True
    if detail == "wire":
        return False
    # "normal": the decisions a lesson talks about
    if e.code in ROUTINE_CODES:
        return False
    if e.kind in ("hold", "mode", "sockopt"):
        return True
    if e.kind in ("timer_armed", "timer_fired"):
        return e.timer in ("delack", "probe0", "tsq") or e.code == "RETRANSMIT"
    return e.kind == "ack_delayed"


RowItem = SegmentRecord | OpRecord | EventRecord
"""What a ladder row shows: one segment, one application call or one model event."""


def row_items(trace: Trace, detail: str = "normal") -> list[tuple[int, RowItem]]:
    """Which trace items become ladder rows, with their times, in ladder order. Nothing is
    worded here (`make_row` does that), so a viewer of a big run can word only the rows
    it shows."""
    items: list[tuple[int, int, RowItem]] = []
    for seg in trace.segments:
        items.append((seg.t, 1, seg))
    for op in trace.ops:
        items.append((op.start, 0, op))
    if detail != "wire":
        said: tuple[int, Side, str] | None = None
        delayed: set[tuple[int, Side, str]] = set()
        for e in trace.events:
            if e.kind not in _EVENT_KINDS or not _wanted(e, detail):
                continue
            if detail == "normal" and e.kind == "timer_armed" and said == (e.t, e.side, e.code):
                continue  # the "delayed ACK" row just said this sentence: one row is enough
            if detail == "normal" and e.kind == "ack_delayed":
                # a burst arriving in one instant re-arms the same timer once per segment
                # pair (an unpaced CUBIC flight): one row per instant says it
                if (e.t, e.side, e.detail) in delayed:
                    said = (e.t, e.side, e.code)
                    continue
                delayed.add((e.t, e.side, e.detail))
            said = (e.t, e.side, e.code) if e.kind == "ack_delayed" else None
            items.append((e.t, 2, e))
    items.sort(key=lambda r: (r[0], r[1]))
    return [(r[0], r[2]) for r in items]


def make_row(item: RowItem) -> Row:
    """The ladder row of one trace item: its label and its explanation."""
    if isinstance(item, SegmentRecord):
        seg = item
        explain = f"{seg.src.value} sends {seg.label()}" + (f" ack {seg.ack}" if seg.length
                                                            else "")
        if seg.why:
            explain += f": {seg.why}"
        return Row(t=seg.t, side=seg.src, kind=RowKind.SEGMENT, label=seg.label(),
                   explain=explain, code=seg.code, segment=seg)
    if isinstance(item, OpRecord):
        op = item
        label = f"{op.op} {op.arg}".strip()
        if op.result is not None:
            label += f" → {op.result}"
        took = "" if op.end is None else f", returned after {ms_text(op.end - op.start)} ms"
        return Row(t=op.start, side=op.side, kind=RowKind.OP, label=label,
                   explain=f"{op.side.value} application calls {label}{took}", op=op)
    e = item
    return Row(t=e.t, side=e.side, kind=_EVENT_KINDS[e.kind], label=_event_label(e),
               explain=f"{e.side.value}: {e.text()}", code=e.code, event=e)


def build_rows(trace: Trace, detail: str = "normal") -> list[Row]:
    """All ladder rows of ``trace`` in time order (segments, ops and chosen events)."""
    return [make_row(item) for _, item in row_items(trace, detail)]


def build_bars(trace: Trace, detail: str = "all") -> list[Bar]:
    """Hold periods (data held by Nagle/cork/…) and delayed-ACK/probe timer periods.

    A hold period is labelled by its teaching cause: the first hold in it that is not
    routine (cwnd full, Nagle, cork, MSG_MORE, autocork, the peer's window) even when a
    routine one (pacing) came first; a period held only for routine reasons is shown only
    at a ``detail`` that shows routine rows ("all")."""
    bars: list[Bar] = []
    armed: dict[tuple[Side, str], EventRecord] = {}
    for e in trace.events:
        if e.kind == "timer_armed" and e.timer in ("delack", "probe0"):
            armed.setdefault((e.side, e.timer), e)
        elif e.kind in ("timer_fired", "timer_cancelled") and e.timer in ("delack", "probe0"):
            start = armed.pop((e.side, e.timer), None)
            if start is not None and e.t > start.t:
                name = "delayed ACK" if e.timer == "delack" else "probe timer"
                bars.append(Bar(side=e.side, start=start.t, end=e.t, what=e.timer,
                                label=f"{name} {ms_text(e.t - start.t, 1)} ms"))
    # A hold lasts until that side next sends data; later holds inside it are the same bar.
    sends = {side: [s.t for s in trace.segments if s.src is side and s.is_data] for side in Side}
    periods: dict[Side, tuple[EventRecord, int, EventRecord | None]] = {}
    """Per side, the open period: its first hold, its end, its first teaching hold."""

    def close(side: Side) -> None:
        first, end, teaching = periods.pop(side)
        shown = teaching if teaching is not None else (first if detail == "all" else None)
        if shown is not None and end > first.t:
            bars.append(Bar(side=side, start=first.t, end=Micros(end), what="hold",
                            label=f"{_event_label(shown)} for {ms_text(end - first.t, 1)} ms"))

    for e in trace.events:
        if e.kind != "hold":
            continue
        open_ = periods.get(e.side)
        if open_ is not None and e.t < open_[1]:
            if open_[2] is None and e.code not in ROUTINE_CODES:
                periods[e.side] = (open_[0], open_[1], e)
            continue
        if open_ is not None:
            close(e.side)
        times = sends[e.side]
        i = bisect.bisect_right(times, e.t)
        end = times[i] if i < len(times) else trace.end
        periods[e.side] = (e, end, None if e.code in ROUTINE_CODES else e)
    for side in list(periods):
        close(side)
    bars.sort(key=lambda b: (b.start, b.end))
    return bars
