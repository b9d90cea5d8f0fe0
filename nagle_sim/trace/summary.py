"""Numbers a person asks of a run: per-iteration latency, segment counts, stalls and causes.

Owns: the analysis shared by the CLI, the TUI, exports and lesson expectations. Works on
any `Trace` (simulated or real). Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..model.events import Micros, Side, short
from .document import Trace
from .records import EventRecord, OpRecord, SegmentRecord
from .units import ms_text

STALL_MIN = Micros(10_000)
"""A gap with no segment on the wire of at least this long is a stall (compare's rule)."""
DELACK_WAIT_MIN = Micros(36_000)
"""A pure ACK sent at least this long after the oldest data it acknowledges reached its
host waited for the delayed-ACK timer: once a connection has received data, Linux arms
that timer for at least TCP_ATO_MIN (HZ/25 = 40 ms; tcp_event_data_recv never brings
ato below it), and a timer set in the middle of a jiffy fires up to one jiffy (4 ms at
HZ=250) sooner than that after the arrival. (Before any data, ato is 0 and the timer
fires at the next jiffy: a FIN's ACK on a socket that never received data.) A quicker
pure ACK that ends a stall was released by something else (the receiving application's
read, a second full segment)."""


@dataclass(frozen=True, slots=True)
class Iteration:
    index: int
    start: Micros
    end: Micros

    @property
    def latency(self) -> Micros:
        return Micros(self.end - self.start)


@dataclass(frozen=True, slots=True)
class Stall:
    start: Micros
    end: Micros
    held_by: str          # who held what, e.g. "client: Nagle ..."
    ended_by: str         # what ended it, e.g. "server: delayed-ACK timer fired"
    ended_code: str       # Reason name of the releasing segment (or "" for real traces)
    held_code: str = ""   # Reason name of the hold that kept data back ("" if none)

    @property
    def duration(self) -> Micros:
        return Micros(self.end - self.start)

    def text(self) -> str:
        return (f"{ms_text(self.duration, 1)} ms from {ms_text(self.start)} ms — "
                f"{self.held_by} — until {self.ended_by}")


@dataclass(slots=True)
class Summary:
    iterations: list[Iteration] = field(default_factory=list)
    segments: dict[Side, int] = field(default_factory=dict)
    data_segments: dict[Side, int] = field(default_factory=dict)
    pure_acks: dict[Side, int] = field(default_factory=dict)
    bytes_sent: dict[Side, int] = field(default_factory=dict)
    stalls: list[Stall] = field(default_factory=list)
    duration: Micros = Micros(0)


def iterations(trace: Trace, side: Side = Side.CLIENT) -> list[Iteration]:
    """Latency of each pass through ``side``'s first top-level ``repeat`` loop; without
    any loop, the whole script is one iteration. Statements before or after the loop (and
    later loops) do not count."""
    ops = [o for o in trace.ops if o.side is side and o.op not in ("connect", "accept")]
    first = next((i for i, o in enumerate(ops) if o.iteration), None)
    groups: list[list[OpRecord]] = []
    if first is None:
        groups = [ops] if ops else []
    else:
        loop, current = ops[first].loop, -1
        for op in ops[first:]:
            if not op.iteration or op.loop != loop or op.iteration[0] < current:
                break                      # left the loop, or another loop began
            if op.iteration[0] != current:
                current = op.iteration[0]
                groups.append([])
            groups[-1].append(op)
    out = []
    for index, group in enumerate(groups):
        ends = [o.end for o in group if o.end is not None]
        if ends:
            out.append(Iteration(index=index, start=group[0].start, end=Micros(max(ends))))
    return out


class _Index:
    """Time indexes over a trace, built once per analysis."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.event_t = [e.t for e in trace.events]
        self.seg_t = [s.t for s in trace.segments]
        self.sleeps = sorted((o for o in trace.ops if o.op == "sleep"), key=lambda o: o.start)
        self.sleep_t = [o.start for o in self.sleeps]

    def sleeping(self, at: int, until: int) -> bool:
        """True when an application sleep covers most of the gap [at, until): the wire was
        quiet because the program chose to wait, not because TCP held anything."""
        gap = until - at
        # sleeps are sequential on each side, so only the last few starting before
        # `until` can overlap the gap
        i = bisect.bisect_left(self.sleep_t, until)
        for op in self.sleeps[max(0, i - 4):i]:
            end = op.end if op.end is not None else until
            if min(end, until) - max(op.start, at) >= gap / 2:
                return True
        return False

    def in_flight(self, prev: SegmentRecord, nxt: SegmentRecord) -> SegmentRecord | None:
        """The last segment that arrived inside the gap, had it spent most of it in flight."""
        hi = bisect.bisect_right(self.seg_t, prev.t)
        best = None
        for seg in self.trace.segments[max(0, hi - 50):hi]:
            if seg.arrive is not None and prev.t < seg.arrive <= nxt.t and (
                    seg.arrive - seg.t) * 2 >= nxt.t - prev.t:
                best = seg
        return best

    def grown(self, hold: EventRecord) -> str:
        """The hold's detail, saying how much left when it was released if the queue grew
        while held: lesson 1's hold starts on 1 B and ends by sending 31 B, and "1 B
        queued" alone hid that (as the ladder's hold bar says "(31 B when released)").
        The release is the side's next data send after the hold; a burst leaving at one
        instant counts whole."""
        began = int(hold.data.get("length") or 0)
        prefix = f"{began} B queued"
        if not began or not hold.detail.startswith(prefix):
            return hold.detail
        segments = self.trace.segments
        i = bisect.bisect_right(self.seg_t, hold.t)
        release = next((s.t for s in segments[i:] if s.src is hold.side and s.is_data), None)
        if release is None:
            return hold.detail
        released = sum(s.length for s in segments[i:bisect.bisect_right(self.seg_t, release)]
                       if s.src is hold.side and s.is_data and s.t == release)
        if released <= began:
            return hold.detail
        return (f"{prefix} at first, {released} B when released"
                + hold.detail[len(prefix):])

    def hold_during(self, prev: SegmentRecord, nxt: SegmentRecord) -> EventRecord | None:
        """The hold that kept data back across a gap: the last hold before the gap ends
        whose side sent no data between that hold and the gap's start. A hold that began
        inside the gap must cover at least half of it: a write held for the last µs of a
        gap (corked, then uncorked at once) did not make the quiet before it."""
        events, segments = self.trace.events, self.trace.segments
        half = (nxt.t - prev.t) / 2
        i = bisect.bisect_left(self.event_t, nxt.t) - 1
        while i >= 0 and prev.t - events[i].t <= 10_000_000:
            e = events[i]
            if e.kind == "hold" and (e.t <= prev.t or nxt.t - e.t >= half):
                lo = bisect.bisect_right(self.seg_t, e.t)
                hi = bisect.bisect_right(self.seg_t, prev.t)
                if not any(s.src is e.side and s.is_data for s in segments[lo:hi]):
                    return e    # still holding when the gap began
                # released before the gap: an older hold of the other side may still be on
            i -= 1
        return None


WireNamer = Callable[[Trace], dict[tuple[int, int], Any]]
"""Names the stalls of a trace without hold events from the wire alone, keyed by (start,
end); `nagle_sim.explain.causes.wire_causes` is one. Injected by the caller (the CLI), as
explain imports this module."""


def wire_unknown(trace: Trace) -> str | None:
    """Why the wire of ``trace`` is unknown (a real run with no captured segment: its
    capture's description), else None. Such a trace says nothing about segments or stalls,
    so a count of them would be a false 0."""
    if trace.measured and not trace.segments:
        # from a saved file: one printable line, whatever the meta holds
        text = str(trace.meta.get("capture") or "no capture")[:200]
        return "".join(c if c.isprintable() else "?" for c in text)
    return None


def ack_wait(trace: Trace, ack: SegmentRecord) -> Micros | None:
    """How long the host that sent the pure ACK ``ack`` had held the oldest data it is the
    first to acknowledge: from that data's arrival there (the receiver's own capture, or
    the model's arrival) to the ACK's send. A delayed-ACK timer is armed when the first
    unacknowledged segment arrives, so this is how long that timer (if any) ran. None when
    the trace does not say when the data arrived."""
    acked = None
    for seg in trace.segments:
        if seg.t >= ack.t:
            break
        if seg.src is ack.src and seg.has_ack and seg is not ack:
            acked = seg.ack if acked is None else max(acked, seg.ack)
    first = None
    for seg in trace.segments:
        if seg.t > ack.t:
            break
        if seg.src is ack.src or not (seg.is_data or seg.has_fin or seg.has_syn):
            continue
        stop = seg.seq + seg.length + int(seg.has_syn) + int(seg.has_fin)
        if stop <= ack.ack and (acked is None or stop > acked) and seg.arrive is not None:
            first = seg.arrive if first is None else min(first, seg.arrive)
    if first is None or first > ack.t:
        return None
    return Micros(ack.t - first)


def stalls(trace: Trace, minimum: Micros = STALL_MIN, wire: WireNamer | None = None,
           *, asleep: bool = False) -> list[Stall]:
    """Gaps ≥ ``minimum`` between segments not explained by an application sleep. With
    ``wire``, a trace that has no hold events (a real-socket run) has its stalls named
    from the wire, as `nagle-sim explain` names a capture's. ``asleep`` keeps the gaps
    a sleep explains too ("the application slept"): a twin to pair with, when a sleep
    covers just over half of one run's gap and just under half of the other's."""
    out: list[Stall] = []
    segs = trace.segments
    index = _Index(trace)
    named: dict[tuple[int, int], Any] = {}
    if wire is not None and not any(e.kind == "hold" for e in trace.events):
        named = wire(trace)
    for prev, nxt in zip(segs, segs[1:], strict=False):
        gap = nxt.t - prev.t
        if gap < minimum:
            continue
        slept = index.sleeping(prev.t, nxt.t)
        if slept and not asleep:
            continue
        hold = index.hold_during(prev, nxt)
        if slept:
            held = "the application slept"
        elif hold is not None:
            held = f"{hold.side.value}: {short(hold.code) or hold.reason}"
            if hold.detail:
                held += f" ({index.grown(hold)})"
        elif (flight := index.in_flight(prev, nxt)) is not None:
            assert flight.arrive is not None
            held = (f"waiting on the link: {flight.src.value}'s {flight.label()} took "
                    f"{ms_text(flight.arrive - flight.t, 1)} ms to arrive")
        elif (found := named.get((prev.t, nxt.t))) is not None:
            held = f"on the wire: {found.cause} ({found.text})"
        elif trace.events:
            held = "no data waiting to be sent"
        else:
            held = "no segment on the wire"
        if nxt.code:
            ended = f"{nxt.src.value}: {short(nxt.code) or nxt.why} ({nxt.label()})"
        elif nxt.is_pure_ack:
            ended = f"{nxt.src.value}: pure ACK ({nxt.label()})" + _ack_kind(trace, nxt)
        else:
            ended = f"{nxt.src.value}: {nxt.label()}"
        out.append(Stall(start=prev.t, end=nxt.t, held_by=held, ended_by=ended,
                         ended_code=nxt.code,
                         held_code=hold.code if hold is not None and not slept else ""))
    return out


def _ack_kind(trace: Trace, ack: SegmentRecord) -> str:
    """What a real pure ACK that ended a stall was, from when its host got the data: a
    delayed ACK only if it waited for the timer (`DELACK_WAIT_MIN`)."""
    wait = ack_wait(trace, ack)
    if wait is None:
        return (", perhaps a delayed ACK (when the data arrived there is not captured, so "
                "whether it waited for the timer is unknown)")
    if wait >= DELACK_WAIT_MIN:
        return f", a delayed ACK ({ms_text(wait, 1)} ms after the data arrived)"
    return (f", {ms_text(wait, 1)} ms after the data arrived: too soon for the "
            "delayed-ACK timer (≥ 40 ms), released by the receiving host")


def summarize(trace: Trace, wire: WireNamer | None = None) -> Summary:
    s = Summary(iterations=iterations(trace), stalls=stalls(trace, wire=wire),
                duration=trace.end)
    for side in Side:
        mine = [g for g in trace.segments if g.src is side]
        s.segments[side] = len(mine)
        s.data_segments[side] = sum(1 for g in mine if g.is_data)
        s.pure_acks[side] = sum(1 for g in mine if g.is_pure_ack)
        s.bytes_sent[side] = sum(g.length for g in mine)
    return s


@dataclass(frozen=True, slots=True)
class WriteSpan:
    """One application write and the segments that carried its bytes."""

    start: Micros                  # when the write call began
    size: int
    segments: int                  # distinct data segments carrying any of its bytes
    alone: bool
    """Every segment carrying its bytes carried only its bytes, and all of them left — the
    write was not coalesced with another (seed S5's "sent as its own packet"; a write
    larger than the MSS may take several segments and still be alone)."""
    sent_at: Micros | None         # when its last byte first left, None if never


_WRITE_OPS = ("write", "writev")


def write_spans(trace: Trace, side: Side = Side.CLIENT) -> list[WriteSpan]:
    """Each of ``side``'s writes (``write``, ``writev``) with the segments that carried it.
    A retransmission repeats a segment's boundaries, so only first transmissions count."""
    firsts: dict[int, SegmentRecord] = {}
    syn_seq = None
    for s in trace.segments:
        if s.src is not side:
            continue
        if s.has_syn and syn_seq is None:
            syn_seq = s.seq
        if s.is_data and s.seq not in firsts:
            firsts[s.seq] = s
    data = sorted(firsts.values(), key=lambda s: s.seq)
    offset = syn_seq + 1 if syn_seq is not None else (data[0].seq if data else 1)
    out: list[WriteSpan] = []
    j = 0
    for op in trace.ops:
        if op.side is not side or op.op not in _WRITE_OPS:
            continue
        size = sum(int(word) for word in op.arg.split() if word.isdigit())
        lo, hi = offset, offset + size
        offset = hi
        while j < len(data) and data[j].seq + data[j].length <= lo:
            j += 1                      # segments wholly before this write
        carrying: list[SegmentRecord] = []
        k = j
        while k < len(data) and data[k].seq < hi:
            carrying.append(data[k])
            k += 1
        covered = max((s.seq + s.length for s in carrying), default=lo)
        alone = bool(carrying) and covered >= hi and all(
            s.seq >= lo and s.seq + s.length <= hi for s in carrying)
        last = next((s for s in carrying if s.seq + s.length >= hi), None)
        out.append(WriteSpan(start=op.start, size=size, segments=len(carrying), alone=alone,
                             sent_at=None if last is None else last.t))
    return out
