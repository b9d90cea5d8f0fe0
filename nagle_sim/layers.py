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

Pure: reads a `Comparison`'s rows and both traces. Imports the trace package only (the
comparison imports this module, never the other way). Must not import simpy, textual,
rich or an executor.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .model.events import Side
from .trace import OpRecord, SegmentRecord, Trace
from .trace.summary import ack_wait, iterations
from .trace.units import ms_text

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
HOST_DELAY_MIN_US = 500
"""A real side that started a call this much later than its previous call (or the data
it read) allowed was held up by its host: the host-timed model run waits as long."""


@dataclass(slots=True)
class Layer:
    """One layer's verdict: its differences (each one line) and what it does not judge."""

    differences: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)
    causes: dict[str, int] = field(default_factory=dict)
    basis: str = "the model's run"
    """Which model run the layer was judged against."""
    """Timing only: how many differences each cause (host, timer, path, unattributed)
    explains best."""

    @property
    def agree(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"agree": self.agree, "differences": self.differences,
                "unjudged": self.unjudged, "causes": self.causes, "against": self.basis}


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


def _arrow(side: Side) -> str:
    return "c→s" if side is Side.CLIENT else "s→c"


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

    def held(self, seg: SegmentRecord) -> int | None:
        """How long after its write returned ``seg`` left (µs), or None if unknown."""
        i = bisect.bisect_right(self.starts[seg.src], seg.seq) - 1
        if i < 0:
            return None
        op = self.calls[seg.src][i][1]
        return None if op.end is None else seg.t - op.end


def _decisions(cmp: Any, sim: Trace, real: Trace, tick_us: int = 4_000) -> Layer:
    layer = Layer()
    out = layer.differences
    if cmp.wire_unknown is not None:
        layer.unjudged.append(f"segments (not captured: {cmp.wire_unknown})")
    sim_writes, real_writes = _Writes(sim), _Writes(real)
    unknown_acks = 0
    for m in cmp.matches:
        where = m.sim_t if m.sim_t is not None else m.real_t
        at = f"{_arrow(m.side)} {m.klass} at {ms_text(where or 0)} ms"
        if m.kind in STRUCTURAL_KINDS and not m.ok:
            out.append(f"{at}: which segment carried what: {m.note}")
            continue
        if not (m.sim and m.real):
            continue
        s, r = m.sim[0], m.real[0]
        if m.klass == "ACK":
            wait, model_wait = ack_wait(real, r), ack_wait(sim, s)
            timer = s.code == "DELACK_FIRED"
            if wait is None:
                unknown_acks += 1
            elif timer and model_wait is not None and model_wait <= tick_us:
                unknown_acks += 1   # ato 0: the next jiffy, which may come at once
            elif (timer and wait < ACK_NOW_MAX_US) or (
                    s.code in IMMEDIATE_CODES and wait >= ACK_NOW_MAX_US):
                out.append(f"{at}: ACK now vs delayed: the model's ACK "
                           + ("waited for its delayed-ACK timer" if timer else
                              f"went at once ({s.why or s.code})")
                           + f"; the kernel's left {ms_text(wait, 1)} ms after the data "
                           "arrived at its host"
                           + (" (at once)" if timer else " (it waited)"))
        elif m.klass == "data" and m.kind in ("match", "timer-late"):
            held_sim, held_real = sim_writes.held(s), real_writes.held(r)
            if held_sim is None or held_real is None:
                continue
            if (held_sim > HOLD_MIN_US) != (held_real > HOLD_MIN_US):
                out.append(f"{at}: hold: the model "
                           + (f"held {s.label()} {ms_text(held_sim, 1)} ms past its write"
                              if held_sim > HOLD_MIN_US else "sent it with its write")
                           + "; the kernel "
                           + (f"held it {ms_text(held_real, 1)} ms"
                              if held_real > HOLD_MIN_US else "sent it with its write"))
    if unknown_acks:
        layer.unjudged.append(f"{unknown_acks} pure ACK(s): ACK-now vs delayed not judged "
                              "(the data's arrival was not captured, or the model's timer "
                              "was due within a jiffy)")
    if sim.outcome != real.outcome:
        out.append(f"outcome: model {sim.outcome}, kernel {real.outcome}")
    it_sim, it_real = iterations(sim), iterations(real)
    if len(it_sim) != len(it_real):
        out.append(f"iterations completed: model {len(it_sim)}, kernel {len(it_real)}")
    out += [f"host configuration: {p}" for p in cmp.problems
            if p.startswith(("client host:", "server host:"))]
    return layer


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


def _timing(cmp: Any, sim: Trace, real: Trace) -> Layer:
    layer = Layer()
    arr_sim, arr_real = _arrivals(sim), _arrivals(real)

    def count(cause: str) -> None:
        layer.causes[cause] = layer.causes.get(cause, 0) + 1

    for m in cmp.matches:
        if m.ok or m.kind in STRUCTURAL_KINDS or not (m.sim and m.real):
            continue
        s, r = m.sim[0], m.real[0]
        where = f"{_arrow(m.side)} {m.klass} at {ms_text(m.sim_t or 0)} ms"
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


def host_delays(real: Trace, sim: Trace | None = None
                ) -> dict[tuple[Side, int, tuple[int, ...], int], int]:
    """How late each real call started beyond what its previous call allowed, where that
    is at least `HOST_DELAY_MIN_US`: the idle time since the previous call returned, plus,
    after a read, how long that read took to return once the data that completed it had
    arrived at its host (the receiver's own capture), and after any other call, how much
    longer it took than the same call in the model ``sim`` (a host throttled in the middle
    of a write). Keyed by (side, line, iteration,
    loop) for the model's ``host_delays`` (`nagle_sim.sim.driver.SimDriver`): the model
    then makes each call when the real host did, so its decisions are judged on the same
    inputs. Sleeps, and the call after one, are left to the measured sleeps."""
    arrivals = _arrivals(real)
    took = {(o.side, o.line, o.iteration, o.loop): o.end - o.start
            for o in (sim.ops if sim is not None else ()) if o.end is not None}
    out: dict[tuple[Side, int, tuple[int, ...], int], int] = {}
    for side in Side:
        ops = sorted((o for o in real.ops if o.side is side and o.line
                      and o.op not in ("connect", "accept")), key=lambda o: o.start)
        times, _ = arrivals[side]
        for prev, op in zip(ops, ops[1:], strict=False):
            if prev.end is None or "sleep" in (prev.op, op.op):
                continue
            lag = op.start - prev.end
            if prev.op == "read":
                i = bisect.bisect_right(times, prev.end) - 1
                if i >= 0:
                    lag += prev.end - max(prev.start, times[i])
            else:
                model = took.get((side, prev.line, prev.iteration, prev.loop))
                if model is not None:
                    lag += max(0, prev.end - prev.start - model)
            lag -= CALL_OVERHEAD_US
            if lag >= HOST_DELAY_MIN_US:
                out[(side, op.line, op.iteration, op.loop)] = lag
    return out


def two_layers(cmp: Any, sim: Trace, real: Trace, decided: tuple[Any, Trace] | None = None
               ) -> Layers:
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
