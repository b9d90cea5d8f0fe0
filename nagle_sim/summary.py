"""Numbers a person asks of a run: per-iteration latency, segment counts, stalls and causes.

Owns: the analysis shared by the CLI, the TUI, exports and lesson expectations. Works on
any `Trace` (simulated or real). Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model.events import Micros, Side
from .trace import EventRecord, OpRecord, SegmentRecord, Trace

STALL_MIN = Micros(10_000)
"""A gap with no segment on the wire of at least this long is a stall (compare's rule)."""


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

    @property
    def duration(self) -> Micros:
        return Micros(self.end - self.start)

    def text(self) -> str:
        return (f"{self.duration / 1000:.1f} ms at {self.start / 1000:.3f} ms: "
                f"{self.held_by}; ended when {self.ended_by}")


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
    """Latency of each pass through ``side``'s outermost ``repeat`` (or the whole script)."""
    groups: dict[int, list[OpRecord]] = {}
    for op in trace.ops:
        if op.side is side and op.op not in ("connect", "accept"):
            groups.setdefault(op.iteration[0] if op.iteration else -1, []).append(op)
    out = []
    for index in sorted(groups):
        ops = groups[index]
        ends = [o.end for o in ops if o.end is not None]
        if not ends:
            continue
        out.append(Iteration(index=max(index, 0), start=ops[0].start, end=Micros(max(ends))))
    return out


def _sleeping(ops: list[OpRecord], at: int, until: int) -> bool:
    """True when every side that is active in [at, until) is sleeping (not a stall)."""
    for op in ops:
        if op.op == "sleep" and op.start <= at and (op.end or until) >= until - 1:
            return True
    return False


def _last_hold(events: list[EventRecord], before: int, after: int) -> EventRecord | None:
    found = None
    for e in events:
        if e.t > before:
            break
        if e.kind == "hold" and e.t >= after:
            found = e
    return found


def _cause_of(seg: SegmentRecord) -> str:
    if seg.code:
        return f"{seg.src.value} sent {seg.label()}: {seg.why}"
    kind = "pure ACK" if not seg.length and "A" in seg.flags else seg.label()
    return f"{seg.src.value} sent {kind}"


def stalls(trace: Trace, minimum: Micros = STALL_MIN) -> list[Stall]:
    """Gaps ≥ ``minimum`` between segments not explained by an application sleep."""
    out: list[Stall] = []
    segs = trace.segments
    for prev, nxt in zip(segs, segs[1:], strict=False):
        gap = nxt.t - prev.t
        if gap < minimum or _sleeping(trace.ops, prev.t, nxt.t):
            continue
        hold = _last_hold(trace.events, prev.t, prev.t - 1_000_000)
        if hold is not None:
            held = f"{hold.side.value} held data: {hold.text()}"
        elif trace.events:
            held = "nothing was sent"
        else:
            held = "no segment on the wire (real trace: reasons not recorded)"
        if not trace.events and not nxt.length and "A" in nxt.flags and nxt.src is not prev.src:
            ended = f"{nxt.src.value} sent a pure ACK (a delayed ACK, inferred)"
        else:
            ended = _cause_of(nxt)
        out.append(Stall(start=prev.t, end=nxt.t, held_by=held, ended_by=ended,
                         ended_code=nxt.code))
    return out


def summarize(trace: Trace) -> Summary:
    s = Summary(iterations=iterations(trace), stalls=stalls(trace), duration=trace.end)
    for side in Side:
        mine = [g for g in trace.segments if g.src is side]
        s.segments[side] = len(mine)
        s.data_segments[side] = sum(1 for g in mine if g.length)
        s.pure_acks[side] = sum(1 for g in mine if not g.length and g.flags in ("A",))
        s.bytes_sent[side] = sum(g.length for g in mine)
    return s
