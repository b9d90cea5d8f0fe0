"""A comparison's verdict in two layers: what the kernels decided, and when.

Owns: `Layers` and `two_layers`. *Decisions* are what a slow host cannot change on its
own: which bytes each segment carried, whether a pure ACK waited for the delayed-ACK
timer or went at once, whether data was held past its write (Nagle, cork, a window),
which timer fired (a retransmission), the outcome and the iterations completed, and the
hosts' configuration. *Timing* is every time against the model, each difference
attributed from the receiver's own capture: to the **host** (a side reacted later to a
segment that had arrived: its application, or its kernel's processing), a **timer**
(the reacting segment was a timer's), or the **path** (the segment's trigger arrived
later: the path or the peer). A run that agrees on decisions but not on timing says so.

Pure: reads a `Comparison`'s rows and both traces. Imports the trace package and the
matching's rows (`nagle_sim.compare.match`); the comparison's `Both` (``run``) imports
this module, never the other way. Must not import simpy, textual, rich or an executor.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.events import Side
from ..trace import OpRecord, SegmentRecord, Trace
from ..trace.summary import DELACK_WAIT_MIN, ack_wait, iterations
from ..trace.units import ms_text
from .match import Match, arrow

if TYPE_CHECKING:
    from .verdict import Comparison

STRUCTURAL_KINDS = frozenset({"merged", "split", "regrouped", "missing", "extra",
                              "retransmit"})
"""Match kinds that are a different segmentation (which segment carried which bytes) or
a segment one kernel sent and the other did not."""
TIMER_CODES = frozenset({"DELACK_FIRED", "PROBE0_RELEASE", "LOSS_PROBE", "RETRANSMIT"})
IMMEDIATE_CODES = frozenset({"QUICKACK_MODE", "FULL_FRAME", "DUPLICATE", "OUT_OF_ORDER",
                             "EVERY_2ND", "PSH_ACK", "FIN_ACK", "HANDSHAKE", "DELACK_DUE"})
"""Model reasons of a pure ACK sent from the receive path itself, at once."""
ACK_NOW_MAX_US = 1_000
"""A real pure ACK that left within this of the data's arrival at its host went at once:
the receive path sends it in the same softirq that the capture timestamps the arrival in
(microseconds, on a slow host too). One that left later waited (a timer, or a call)."""
HOLD_MIN_US = 1_000
"""Data that left this long after the call that wrote its first byte had returned was
held (Nagle, cork, a window): judged the same way in both traces."""
HOST_MIN_US = 500
"""A reaction at least this much slower than the model's is the host's share."""
CALL_OVERHEAD_US = 200
"""A real executor's own time between two calls (tens of µs here; a margin on top)."""
HOST_DELAY_MIN_US = 100
"""A real side that started a call this much later than its previous call (or the data
it read) allowed was held up by its host: the host-timed model run waits as long."""


@dataclass(slots=True)
class Layer:
    """One layer's verdict: its differences (each one line) and what it does not judge."""

    differences: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)
    causes: dict[str, int] = field(default_factory=dict)
    """Timing only: how many differences each cause (host, timer, path, unattributed)
    explains best."""
    basis: str = "the model's run"
    """Which model run the layer was judged against."""
    host_facts: list[str] = field(default_factory=list)
    """Decisions only: the hosts' facts that differ from the model's profile in a way that
    changes decisions (ping-pong threshold, autocorking, HZ), listed when decisions differ."""

    @property
    def agree(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"agree": self.agree, "differences": self.differences,
                "unjudged": self.unjudged, "causes": self.causes, "against": self.basis,
                "host_facts": self.host_facts}


@dataclass(slots=True)
class Layers:
    decisions: Layer
    timing: Layer

    @property
    def summary(self) -> str:
        """One line: e.g. "decisions agree; timing differs (7: host 6, path 1)"."""
        dec = ("decisions agree" if self.decisions.agree else
               f"decisions DIFFER ({len(self.decisions.differences)})")
        if self.timing.agree:
            return f"{dec}; timing agrees"
        causes = ", ".join(f"{k} {v}" for k, v in sorted(self.timing.causes.items(),
                                                         key=lambda kv: -kv[1]))
        return f"{dec}; timing differs ({len(self.timing.differences)}: {causes})"

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "decisions": self.decisions.to_json(),
                "timing": self.timing.to_json()}


class _Writes:
    """Each side's write calls by the stream bytes they wrote (data starts at seq 1)."""

    def __init__(self, trace: Trace) -> None:
        self.calls: dict[Side, list[tuple[int, OpRecord]]] = {side: [] for side in Side}
        done = {side: 1 for side in Side}
        for op in sorted(trace.ops, key=lambda o: o.start):
            if op.op in ("write", "writev"):
                self.calls[op.side].append((done[op.side], op))
                done[op.side] += sum(int(t) for t in op.arg.split()
                                     if t.isascii() and t.isdigit())
        self.starts = {side: [b for b, _ in calls] for side, calls in self.calls.items()}

    def call(self, seg: SegmentRecord) -> OpRecord | None:
        """The write call that wrote ``seg``'s first byte."""
        i = bisect.bisect_right(self.starts[seg.src], seg.seq) - 1
        return self.calls[seg.src][i][1] if i >= 0 else None

    def held(self, seg: SegmentRecord) -> int | None:
        """How long after its write returned ``seg`` left (µs), or None if unknown."""
        i = bisect.bisect_right(self.starts[seg.src], seg.seq) - 1
        if i < 0:
            return None
        op = self.calls[seg.src][i][1]
        return None if op.end is None else seg.t - op.end


def _decisions(cmp: Comparison, sim: Trace, real: Trace, tick_us: int = 4_000) -> Layer:
    """The decisions layer: each row of ``cmp`` judged (`_Judge`), what was set aside as
    timing counted under 'not judged', then the outcome, the iterations completed and
    the hosts' configuration."""
    layer = Layer()
    if cmp.wire_unknown is not None:
        layer.unjudged.append(f"segments (not captured: {cmp.wire_unknown})")
    judge = _Judge(cmp, sim, real, tick_us)
    out = layer.differences
    out += [d for m in cmp.matches if (d := judge.row(m)) is not None]
    layer.unjudged += _set_aside_notes(judge.aside)
    if sim.outcome != real.outcome:
        out.append(f"outcome: model {sim.outcome}, kernel {real.outcome}")
    it_sim, it_real = iterations(sim), iterations(real)
    if len(it_sim) != len(it_real):
        out.append(f"iterations completed: model {len(it_sim)}, kernel {len(it_real)}")
    out += [f"host configuration: {p}" for p in cmp.problems
            if p.startswith(("client host:", "server host:"))]
    if out:
        layer.host_facts = [h for h in cmp.host if any(
            key in h for key in ("tcp_pingpong_thresh", "tcp_autocorking", "HZ"))]
    return layer


class _Judge:
    """One comparison's decisions, row by row (`row`: a difference, or None). What it sets
    aside as timing is counted in ``aside`` by kind (`_set_aside_notes` says each)."""

    def __init__(self, cmp: Comparison, sim: Trace, real: Trace, tick_us: int) -> None:
        self.sim, self.real, self.tick_us = sim, real, tick_us
        self.sim_writes, self.real_writes = _Writes(sim), _Writes(real)
        self.late = _late_acks(cmp, sim, real)
        self.slow_reads = _slow_reads(real)
        mss = sim.meta.get("mss") or real.meta.get("mss")
        self.mss = mss if type(mss) is int else None
        self.aside: Counter[str] = Counter()

    def row(self, m: Match) -> str | None:
        where = (m.sim_t if m.sim_t is not None else m.real_t) or 0
        at = f"{arrow(m.side)} {m.klass} at {ms_text(where)} ms"
        # a retransmission only the kernel sent may follow an ACK that came late; one only
        # the model sent (m.real empty: its loss probe re-sent a FIN the kernel did not)
        # has no real twin to ask, and is a difference
        if (m.kind == "retransmit" and not m.ok and m.real
                and _after_late_ack(self.real, m.real[0])):
            self.aside["late_retrans"] += 1
            return None
        if m.kind in STRUCTURAL_KINDS and not m.ok:
            return self._structural(m, at, where)
        if not (m.sim and m.real):
            return None
        s, r = m.sim[0], m.real[0]
        if m.klass == "ACK":
            return self._ack(s, r, at)
        if (m.klass == "data" and m.kind in ("match", "timer-late")
                and (self.mss is None or s.length < self.mss)):
            # Nagle and cork hold only a partial segment; a full one waits for the
            # congestion or receive window, which the timing layer judges
            return self._hold(m, s, r, at)
        return None

    def _structural(self, m: Match, at: str, where: int) -> str | None:
        """A different segmentation, or a segment one run sent and the other did not."""
        if m.klass == "data" and m.real and _follows_late_ack(self.late, m.side, m.real[0].t):
            self.aside["excused"] += 1
            return None
        if m.klass == "ACK" and m.kind in ("missing", "extra"):
            if _near(self.slow_reads[m.side], where, LATE_ACK_WINDOW_US):
                self.aside["ack_on_read"] += 1
                return None
            if _close_race(self.sim, m.side) or _close_race(self.real, m.side):
                self.aside["close_races"] += 1
                return None
        return f"{at}: which segment carried what: {m.note}"

    def _ack(self, s: SegmentRecord, r: SegmentRecord, at: str) -> str | None:
        """ACK now vs delayed, from the receiver's own capture."""
        wait, model_wait = ack_wait(self.real, r), ack_wait(self.sim, s)
        timer = s.code == "DELACK_FIRED"
        if wait is None or (timer and model_wait is not None and model_wait <= self.tick_us):
            # not captured, or ato 0: the next jiffy, which may come at once
            self.aside["unknown_acks"] += 1
            return None
        if s.code in IMMEDIATE_CODES and ACK_NOW_MAX_US <= wait < DELACK_WAIT_MIN:
            self.aside["late_acks"] += 1    # not a timer's wait: its host was slow to send it
            return None
        if (timer and wait < ACK_NOW_MAX_US) or (
                s.code in IMMEDIATE_CODES and wait >= DELACK_WAIT_MIN):
            return (f"{at}: ACK now vs delayed: the model's ACK "
                    + ("waited for its delayed-ACK timer" if timer else
                       f"went at once ({s.why or s.code})")
                    + f"; the kernel's left {ms_text(wait, 1)} ms after the data "
                    "arrived at its host"
                    + (" (at once)" if timer else " (it waited)"))
        return None

    def _hold(self, m: Match, s: SegmentRecord, r: SegmentRecord, at: str) -> str | None:
        """Whether a partial segment was held past its write in one run only."""
        held_sim, held_real = self.sim_writes.held(s), self.real_writes.held(r)
        if held_sim is None or held_real is None \
                or (held_sim > HOLD_MIN_US) == (held_real > HOLD_MIN_US):
            return None
        if held_sim > HOLD_MIN_US and not _app_hold(self.sim, s, self.sim_writes):
            self.aside["window_holds"] += 1     # the model's own hold was a window's
            return None                         # (cwnd, receive window, pacing): timing
        margins = (_ack_margin(self.sim, self.sim_writes, s),
                   _ack_margin(self.real, self.real_writes, r))
        if any(x is not None and abs(x) < RACE_US for x in margins):
            self.aside["races"] += 1
            return None
        if _follows_late_ack(self.late, m.side, r.t):
            self.aside["excused"] += 1
            return None
        return (f"{at}: hold: the model "
                + (f"held {s.label()} {ms_text(held_sim, 1)} ms past its write"
                   if held_sim > HOLD_MIN_US else "sent it with its write")
                + "; the kernel "
                + (f"held it {ms_text(held_real, 1)} ms"
                   if held_real > HOLD_MIN_US else "sent it with its write"))


def _set_aside_notes(aside: Counter[str]) -> list[str]:
    """One 'not judged' line for each kind of difference the decisions layer counted as
    timing (`_Judge.aside`), in a fixed order."""
    said: dict[str, Callable[[int], str]] = {
        "unknown_acks": lambda n: (
            f"{n} pure ACK(s): ACK-now vs delayed not judged (the data's arrival was not "
            "captured, or the model's timer was due within a jiffy)"),
        "window_holds": lambda n: (
            f"{n} partial segment(s) the model held for its congestion or receive window "
            "(or pacing), not Nagle or cork, and the kernel sent at once: windows follow "
            "the ACKs' timing (timing)"),
        "close_races": lambda n: (
            f"{n} pure ACK(s) around the two FINs, sent in one run only, where a side "
            f"closed within {CLOSE_RACE_US // 1000} ms of its peer's FIN arriving: which "
            "FIN carried the other's ACK is a close-order race (timing)"),
        "ack_on_read": lambda n: (
            f"{n} pure ACK(s) sent in one run and not the other while the receiving "
            "application read late (a read returning at least "
            f"{HOST_DELAY_MIN_US / 1000:g} ms after its data arrived): the ACKs a reader "
            "sends (window updates, ACK on read) follow when it reads (timing)"),
        "races": lambda n: (
            f"{n} segment(s) held in one run and not the other where the write and the ACK "
            f"that lets Nagle send it came within {RACE_US // 1000} ms of each other: a "
            "close-order race (timing)"),
        "excused": lambda n: (
            f"{n} data segment(s) grouped or held differently just after an ACK the peer's "
            "host sent later than the model's peer (its application read late, or it was "
            "slow to process the arrival): the kernel's rule applied to a late input "
            "(timing)"),
        "late_acks": lambda n: (
            f"{n} pure ACK(s) the model sent at once left their host 1 to 36 ms after the "
            "data arrived: not a delayed-ACK timer (that waits 40 ms), a host slow to "
            "process the arrival (its application held the socket, or had not read): "
            "timing, not a decision"),
        "late_retrans": lambda n: (
            f"{n} retransmission(s) of data that had reached the peer, whose ACK its host "
            "sent late: a timer fired on a slow host's late ACK (timing)"),
    }
    return [say(aside[kind]) for kind, say in said.items() if aside[kind]]


RACE_US = 1_000
"""A write and the ACK that lets Nagle send it, within this of each other in either run,
are a close-order race: which came first is timing, whatever the kernel then did."""


def _ack_margin(trace: Trace, writes: _Writes, seg: SegmentRecord) -> int | None:
    """How long before the write of ``seg``'s first byte the ACK of every byte before it
    reached the writer's host (negative: after the write), or None if unknown."""
    call = writes.call(seg)
    if call is None:
        return None
    arrived = [s.arrive for s in trace.segments if s.src is not seg.src and s.ack >= seg.seq
               and s.arrive is not None]
    return None if not arrived else call.start - min(arrived)


LATE_ACK_WINDOW_US = 20_000
"""A data segment decided within this after a late ACK from its peer reached its host is
taken as that late ACK's consequence."""


def _late_acks(cmp: Comparison, sim: Trace, real: Trace) -> dict[Side, list[int]]:
    """Per side, when the real pure ACKs it *received* arrived that had left their sender
    at least `HOST_MIN_US` later after the data than the model's twin did."""
    out: dict[Side, list[int]] = {side: [] for side in Side}
    for m in cmp.matches:
        if m.klass != "ACK" or not (m.sim and m.real) or m.real[0].arrive is None:
            continue
        wait_r, wait_s = ack_wait(real, m.real[0]), ack_wait(sim, m.sim[0])
        if wait_r is not None and wait_s is not None and wait_r - wait_s >= HOST_MIN_US:
            receiver = Side.SERVER if m.side is Side.CLIENT else Side.CLIENT
            out[receiver].append(m.real[0].arrive)
    for times in out.values():
        times.sort()
    return out


def _slow_reads(real: Trace) -> dict[Side, list[int]]:
    """Per side, when its real reads returned that came back at least `HOST_DELAY_MIN_US`
    (beyond `CALL_OVERHEAD_US`) after the data that completed them had arrived."""
    arrivals = _arrivals(real)
    out: dict[Side, list[int]] = {side: [] for side in Side}
    for op in real.ops:
        if op.op != "read" or op.end is None:
            continue
        times, _ = arrivals[op.side]
        i = bisect.bisect_right(times, op.end) - 1
        if i >= 0 and times[i] >= op.start and \
                op.end - times[i] - CALL_OVERHEAD_US >= HOST_DELAY_MIN_US:
            out[op.side].append(op.end)
    for times in out.values():
        times.sort()
    return out


APP_HOLDS = frozenset({"NAGLE_HOLD", "NAGLE_HOLD_CLASSIC", "CORK_HOLD", "MORE_HOLD",
                       "AUTOCORK_HOLD"})
"""Model holds that are the application's small-segment decisions (Nagle, cork, MSG_MORE,
autocork), as against a window's (cwnd, receive window, pacing)."""


def _app_hold(sim: Trace, seg: SegmentRecord, writes: _Writes) -> bool:
    """Whether the model held ``seg`` by Nagle, cork, MSG_MORE or autocork: a hold event of
    its side with one of `APP_HOLDS` between its write and its send."""
    call = writes.call(seg)
    start = call.start if call is not None else 0
    return any(e.kind == "hold" and e.side is seg.src and e.code in APP_HOLDS
               and start <= e.t <= seg.t for e in sim.events)


CLOSE_RACE_US = 5_000
"""A side whose own FIN left within this of its peer's FIN arriving closed in a race: which
FIN acknowledges the other, and which pure ACKs follow, depends on µs."""


def _close_race(trace: Trace, side: Side) -> bool:
    """Whether ``side`` sent its FIN within `CLOSE_RACE_US` of its peer's FIN arriving."""
    own = next((s.t for s in trace.segments if s.src is side and s.has_fin), None)
    peer = next((s.arrive for s in trace.segments if s.src is not side and s.has_fin
                 and s.arrive is not None), None)
    return own is not None and peer is not None and abs(own - peer) < CLOSE_RACE_US


def _near(times: list[int], t: int, window: int) -> bool:
    i = bisect.bisect_left(times, t - window)
    return i < len(times) and times[i] <= t + window


def _follows_late_ack(late: dict[Side, list[int]], side: Side, t: int) -> bool:
    times = late[side]
    i = bisect.bisect_right(times, t) - 1
    return i >= 0 and t - times[i] <= LATE_ACK_WINDOW_US


def _after_late_ack(real: Trace, seg: SegmentRecord) -> bool:
    """Whether the real retransmission ``seg`` resent bytes that had already reached the
    peer (its capture has them) and whose first acknowledgement left the peer's host at
    least `ACK_NOW_MAX_US` after they arrived: a timer (tail loss probe, RTO) that fired
    because a slow host sent its ACK late, not because the path lost them."""
    end = seg.seq + seg.length
    first = next((s for s in real.segments if s.src is seg.src and s.length
                  and s.seq <= seg.seq < s.seq + s.length and s.t < seg.t), None)
    if first is None or first.arrive is None:
        return False
    ack = next((s for s in real.segments if s.src is not seg.src and s.ack >= end
                and s.t >= first.arrive), None)
    return ack is not None and ack.t - first.arrive >= ACK_NOW_MAX_US


def _arrivals(trace: Trace) -> dict[Side, tuple[list[int], list[SegmentRecord]]]:
    """Per receiving side, the segments that reached it, by arrival time."""
    out: dict[Side, tuple[list[int], list[SegmentRecord]]] = {}
    for side in Side:
        got = sorted((s for s in trace.segments if s.src is not side and s.arrive is not None),
                     key=lambda s: s.arrive or 0)
        out[side] = ([s.arrive or 0 for s in got], got)
    return out


def _reaction(arrivals: dict[Side, tuple[list[int], list[SegmentRecord]]],
              seg: SegmentRecord) -> int | None:
    """How long after the last segment that reached its host ``seg`` left (µs)."""
    times, _ = arrivals[seg.src]
    i = bisect.bisect_right(times, seg.t) - 1
    return None if i < 0 else seg.t - times[i]


def _read_lag(trace: Trace, arrivals: dict[Side, tuple[list[int], list[SegmentRecord]]],
              lo: int, hi: int) -> int:
    """The hosts' own time in [lo, hi): each read's return after the data that completed
    it arrived, and the idle time between a side's calls."""
    total = 0
    by_side: dict[Side, list[OpRecord]] = {side: [] for side in Side}
    for op in trace.ops:
        if op.end is not None and lo <= op.start < hi:
            by_side[op.side].append(op)
    for side, ops in by_side.items():
        ops.sort(key=lambda o: o.start)
        times, _ = arrivals[side]
        for prev, op in zip(ops, ops[1:], strict=False):
            if prev.end is not None and op.start > prev.end:
                total += op.start - prev.end
        for op in ops:
            if op.op == "read" and op.end is not None:
                i = bisect.bisect_right(times, op.end) - 1
                if i >= 0 and times[i] >= op.start:
                    total += op.end - times[i]
    return total


def _timing(cmp: Comparison, sim: Trace, real: Trace) -> Layer:
    layer = Layer()
    arr_sim, arr_real = _arrivals(sim), _arrivals(real)

    def count(cause: str) -> None:
        layer.causes[cause] = layer.causes.get(cause, 0) + 1

    for m in cmp.matches:
        if m.ok or m.kind in STRUCTURAL_KINDS or not (m.sim and m.real):
            continue
        s, r = m.sim[0], m.real[0]
        where = f"{arrow(m.side)} {m.klass} at {ms_text(m.sim_t or 0)} ms"
        react_s, react_r = _reaction(arr_sim, s), _reaction(arr_real, r)
        extra = None if react_s is None or react_r is None else react_r - react_s
        error = m.error or 0
        if s.code in TIMER_CODES:
            cause = "timer"
            why = (f"its {s.code.lower().replace('_', ' ')} timer: the kernel's segment left "
                   f"{ms_text(react_r or 0, 1)} ms after its host last received, the model's "
                   f"{ms_text(react_s or 0, 1)} ms")
        elif extra is not None and abs(extra) >= HOST_MIN_US and abs(extra) * 2 >= abs(error):
            cause = "host"
            why = (f"the {m.side.value} host reacted {ms_text(abs(extra), 1)} ms "
                   f"{'slower' if extra > 0 else 'faster'} than the model to the segment "
                   "that had just reached it (its application or its kernel's processing)")
        elif extra is not None:
            cause = "path"
            why = (f"the segment it answers reached the {m.side.value} "
                   f"{ms_text(abs(error - extra), 1)} ms {'later' if error > extra else 'sooner'}"
                   " than in the model (the path, or the peer's own timing)")
        else:
            cause, why = "unattributed", "no arrival at its host was captured"
        count(cause)
        layer.differences.append(f"{where}: {m.note} — {cause}: {why}")
    for p in cmp.stalls:
        if p.ok or p.sim is None or p.real is None:
            continue
        cause = ("timer" if p.sim.ended_code in TIMER_CODES else "host")
        count(cause)
        layer.differences.append(f"stall at {ms_text(p.sim.start)} ms ({p.sim.ended_by}): "
                                 f"{p.note} — {cause}")
    for p in cmp.stalls:
        if p.ok or (p.sim is not None and p.real is not None):
            continue
        count("host" if p.real is not None else "unattributed")
        layer.differences.append(f"stall: {p.note}")
    it_sim = {it.index: it for it in iterations(sim)}
    for it in iterations(real):
        twin = it_sim.get(it.index)
        pair = next((p for p in cmp.iterations if p.index == it.index), None)
        if twin is None or pair is None or pair.ok:
            continue
        diff = it.latency - twin.latency
        host = (_read_lag(real, arr_real, it.start, it.end)
                - _read_lag(sim, arr_sim, twin.start, twin.end))
        cause = "host" if host * 2 >= diff > 0 else "path" if diff > 0 else "unattributed"
        count(cause)
        layer.differences.append(
            f"iteration {it.index}: model {ms_text(twin.latency)} ms, kernel "
            f"{ms_text(it.latency)} ms (beyond ±{ms_text(pair.tol, 1)} ms); the hosts' own "
            f"time (reads returning after their data arrived, time between calls) was "
            f"{ms_text(host, 1)} ms longer than the model's — {cause}")
    return layer


HostTiming = dict[tuple[Side, int, tuple[int, ...], int], int]
"""Per statement run, keyed (side, line, iteration, loop): µs."""


def host_delays(real: Trace, sim: Trace | None = None) -> tuple[HostTiming, HostTiming]:
    """How much later than the model's the real hosts made their calls, for the model's
    ``host_delays`` and ``read_lags`` (`nagle_sim.sim.driver.SimDriver`): the model then
    calls when the real host did, so its decisions are judged on the same inputs.

    Returns (start delays, read lags), each entry at least `HOST_DELAY_MIN_US`: a call's
    start delay is the idle time since its side's previous call returned beyond the
    executor's own (`CALL_OVERHEAD_US`), plus, for any call but a read, how much longer it
    took than in the model ``sim`` (a host throttled inside a write: what it sends leaves
    late); the script's implicit close is delayed to the real FIN; a blocking read's lag
    is how long it took to return once the data that completed it had reached its host
    (the receiver's own capture): meanwhile the data sat unread, so the window stayed as
    it was — unless the receiver ACKed that data at once while the read was still out
    (`_read_acked_at_once`): then the read took the data when it came and only its return
    was late, and the lag delays the call after the read instead. (Where that ACK was a
    quick ACK, which the read's timing cannot be told from, the two placements differ only
    in when the model's receive window reopens.) Sleeps, and the call after one, are left
    to the measured sleeps."""
    arrivals = _arrivals(real)
    took = {(o.side, o.line, o.iteration, o.loop): o.end - o.start
            for o in (sim.ops if sim is not None else ()) if o.end is not None}
    starts: HostTiming = {}
    lags: HostTiming = {}
    for side in Side:
        ops = sorted((o for o in real.ops if o.side is side and o.line
                      and o.op not in ("connect", "accept")), key=lambda o: o.start)
        times, got = arrivals[side]
        returned_late: dict[int, int] = {}     # id(read) -> lag after its kernel work
        for op in ops:
            if op.op == "read" and op.end is not None:
                i = bisect.bisect_right(times, op.end) - 1
                # the data that completed it: a pure ACK that came in meanwhile did not
                while i >= 0 and not (got[i].length or got[i].has_fin):
                    i -= 1
                if i >= 0 and times[i] >= op.start:
                    lag = op.end - times[i] - CALL_OVERHEAD_US
                    if lag < HOST_DELAY_MIN_US:
                        continue
                    if _read_acked_at_once(real, side, got[i], op):
                        returned_late[id(op)] = lag
                    else:
                        lags[(side, op.line, op.iteration, op.loop)] = lag
        writes = _Writes(real)
        sent = sorted((s.seq, int(s.t)) for s in real.segments if s.src is side and s.length)
        carry = 0       # a call's slowness after its send: the next call waits for it
        for prev, op in zip([None, *ops], ops, strict=False):
            if op.end is None or op.op == "sleep" or (prev is not None and (
                    prev.end is None or prev.op == "sleep")):
                carry = 0
                continue
            lag = carry + (0 if prev is None or prev.end is None else
                           op.start - prev.end - CALL_OVERHEAD_US)
            if prev is not None:
                lag += returned_late.get(id(prev), 0)
            carry = 0
            if op.op != "read":
                # a call that took longer than the model's: throttled before it sent (what
                # it sends leaves late: the call is made later) or after (the next waits)
                model = took.get((side, op.line, op.iteration, op.loop))
                excess = 0 if model is None else op.end - op.start - model - CALL_OVERHEAD_US
                if excess > 0:
                    before = _sent_within(writes, sent, side, op)
                    pre = min(excess, before) if before is not None else 0
                    lag += pre
                    carry = excess - pre
            if lag >= HOST_DELAY_MIN_US:
                starts[(side, op.line, op.iteration, op.loop)] = lag
        # the implicit close at the script's end: the side's FIN left its host this much
        # after its last call returned (a close made by a statement is a call above)
        fin = next((s.t for s in real.segments if s.src is side and s.has_fin), None)
        last = ops[-1] if ops else None
        if fin is not None and last is not None and last.end is not None \
                and last.op != "close":
            lag = fin - last.end - CALL_OVERHEAD_US
            if lag >= HOST_DELAY_MIN_US:
                starts[(side, -1, (), 0)] = lag
    return starts, lags


def _read_acked_at_once(real: Trace, side: Side, data: SegmentRecord, read: OpRecord) -> bool:
    """Whether ``side`` ACKed the data that completed ``read`` at once (a pure ACK within
    `ACK_NOW_MAX_US` of its arrival) while the read had not yet returned. The read's work
    in the kernel then ran when the data came (that is when a read sends its ACK,
    tcp_cleanup_rbuf) and the lag was its return to the program, after it: a host
    throttled between the system call and the program (measured on a CPU-quota'd serve,
    docs/realnet.md). The host-timed model then reads at once and delays the next call."""
    if data.arrive is None or read.end is None or not (data.length or data.has_fin):
        return False
    end = data.seq + data.length + (1 if data.has_fin else 0)
    return any(s.src is side and not s.length and s.ack is not None and s.ack >= end
               and data.arrive <= s.t < min(read.end, data.arrive + ACK_NOW_MAX_US)
               for s in real.segments)


def _sent_within(writes: _Writes, sent: list[tuple[int, int]], side: Side,
                 op: OpRecord) -> int | None:
    """How long into the write call ``op`` its first byte left its host (µs), when it left
    during the call; None otherwise (not a write, or held past it)."""
    if op.op not in ("write", "writev") or op.end is None:
        return None
    first = next((b for b, call in writes.calls[side] if call is op), None)
    if first is None:
        return None
    i = bisect.bisect_right(sent, (first, 1 << 62)) - 1
    while i >= 0 and sent[i][1] > op.end:
        i -= 1
    if i < 0 or not op.start <= sent[i][1] <= op.end:
        return None
    return max(0, sent[i][1] - op.start - CALL_OVERHEAD_US)


def two_layers(cmp: Comparison, sim: Trace, real: Trace,
               decided: tuple[Comparison, Trace] | None = None) -> Layers:
    """The decisions and the timing of a comparison (``cmp``, a `nagle_sim.compare.
    Comparison` of ``sim`` against ``real``), judged apart. ``decided``: the comparison
    and trace of the host-timed model run (`host_delays`), whose decisions are judged
    instead: a slow host's late calls are inputs, not decisions."""
    dcmp, dsim = decided if decided is not None else (cmp, sim)
    layers = Layers(_decisions(dcmp, dsim, real), _timing(cmp, sim, real))
    if decided is not None:
        layers.decisions.basis = ("the model run with each call as late as the real host "
                                  "made it (host-timed)")
    return layers
