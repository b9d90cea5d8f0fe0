"""Model vs kernel: match a simulated trace against a real one and give a verdict.

Owns: segment matching (direction, sequence range / bytes, flags class), the timing rule
(packetdrill's: |error| ≤ max(4 ms, 12.5 % of the interval since the previous event),
where the error is measured on the interval since the previous matched event so it never
accumulates), stall pairing, per-iteration latency, explanations of every mismatch, and
the comparison's tables. Pure: no sockets, no simulator, no terminal — tests feed it
hand-made traces; running both executors and printing is `nagle_sim.compare_run`'s. Must
not import simpy, textual, rich or realnet (the congestion control a profile asks for is
its `congestion` field, which realnet sets per socket as it is).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from .export.tables import render_markdown
from .model.config import PROFILES, TUNABLE, StackProfile
from .model.events import Micros, Side
from .trace import Outcome, SegmentRecord, Trace, TraceError
from .trace.summary import STALL_MIN, Stall, iterations, stalls, wire_unknown
from .trace.units import ms, ms_text

STOCK_WMEM = [4096, 16384, 4194304]
"""net.ipv4.tcp_wmem as Linux ships it (the model has no send-buffer limit)."""
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


def _arrow(side: Side) -> str:
    return "c→s" if side is Side.CLIENT else "s→c"


def flags_class(seg: SegmentRecord) -> str:
    """What a segment is, for matching: data, SYN, SYN-ACK, FIN, RST or a pure ACK."""
    if "R" in seg.flags:
        return "RST"
    if "S" in seg.flags:
        return "SYN-ACK" if "A" in seg.flags else "SYN"
    if seg.is_data:
        return "data"
    if "F" in seg.flags:
        return "FIN"
    return "ACK"


def _sizes(segs: list[SegmentRecord]) -> str:
    """"2 B + 28 B"; runs of equal sizes are counted: "1448 B × 12 + 88 B"."""
    parts: list[list[int]] = []
    for s in segs:
        if parts and parts[-1][0] == s.length:
            parts[-1][1] += 1
        else:
            parts.append([s.length, 1])
    return " + ".join(f"{n} B × {k}" if k > 2 else " + ".join([f"{n} B"] * k)
                      for n, k in parts)


@dataclass(slots=True)
class Match:
    """One row of the comparison: model segment(s) and their real twin(s)."""

    side: Side
    klass: str
    kind: str
    """match, gso, merged, split, regrouped, missing (model only), extra (real only),
    retransmit (one side only), ack-thinning (a burst ACK only one side sent)."""
    sim: list[SegmentRecord] = field(default_factory=list)
    real: list[SegmentRecord] = field(default_factory=list)
    note: str = ""
    error: int | None = None          # µs, on the interval since the previous matched event
    tol: int | None = None
    ok: bool = True

    @property
    def sim_t(self) -> Micros | None:
        return self.sim[0].t if self.sim else None

    @property
    def real_t(self) -> Micros | None:
        return self.real[0].t if self.real else None

    @property
    def offset(self) -> int | None:
        if self.sim_t is None or self.real_t is None:
            return None
        return self.real_t - self.sim_t

    def label(self, which: str) -> str:
        segs = self.sim if which == "sim" else self.real
        return " + ".join(s.label() for s in segs)

    def to_json(self) -> dict[str, Any]:
        return {"from": self.side.value, "class": self.klass, "kind": self.kind,
                "ok": self.ok, "sim_t_ms": ms(self.sim_t), "real_t_ms": ms(self.real_t),
                "sim": self.label("sim"), "real": self.label("real"),
                "offset_ms": ms(self.offset), "error_ms": ms(self.error),
                "tolerance_ms": ms(self.tol), "note": self.note}


@dataclass(slots=True)
class StallPair:
    sim: Stall | None
    real: Stall | None
    ok: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        def one(s: Stall | None) -> dict[str, Any] | None:
            if s is None:
                return None
            return {"start_ms": s.start / 1000, "duration_ms": s.duration / 1000,
                    "held_by": s.held_by, "ended_by": s.ended_by}
        return {"sim": one(self.sim), "real": one(self.real), "ok": self.ok, "note": self.note}


@dataclass(slots=True)
class IterationPair:
    index: int
    sim_us: int | None
    real_us: int | None
    tol: int
    ok: bool

    @property
    def diff(self) -> int | None:
        if self.sim_us is None or self.real_us is None:
            return None
        return self.real_us - self.sim_us

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "sim_ms": ms(self.sim_us), "real_ms": ms(self.real_us),
                "diff_ms": ms(self.diff), "tolerance_ms": ms(self.tol), "ok": self.ok}


@dataclass(slots=True)
class Comparison:
    title: str
    matches: list[Match]
    stalls: list[StallPair]
    iterations: list[IterationPair]
    problems: list[str]
    notes: list[str]
    sim_outcome: Outcome
    real_outcome: Outcome
    host: list[str] = field(default_factory=list)
    """Every host fact that differs from the model's profile, one line each."""
    wire_unknown: str | None = None
    """Why the real trace has no segments (its capture), when it has none: then only the
    ops (iterations, outcome) were compared and no verdict is about segments."""
    layers: Any = None
    """The verdict in two layers, decisions and timing (`nagle_sim.layers.Layers`), when
    the comparison was made from runs (`compare_run.Both.compare`)."""

    @property
    def agree(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        if self.wire_unknown is not None:
            scope = (f"on ops only: segments were not captured ({self.wire_unknown}), so "
                     "nothing is said about segments or stalls")
            if self.agree:
                return f"AGREE {scope}"
            return f"DISAGREE {scope}: {len(self.problems)} difference(s) in the ops"
        if self.agree:
            return f"AGREE within tolerance ({TOLERANCE_TEXT})"
        return f"DISAGREE: {len(self.problems)} difference(s) beyond tolerance ({TOLERANCE_TEXT})"

    def max_error(self) -> int:
        return max((abs(m.error) for m in self.matches if m.error is not None), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "agree": self.agree, "verdict": self.verdict,
                "segments_compared": self.wire_unknown is None,
                "tolerance": TOLERANCE_TEXT, "problems": self.problems, "notes": self.notes,
                "host": self.host,
                "outcome": {"sim": self.sim_outcome, "real": self.real_outcome},
                "max_error_ms": round(self.max_error() / 1000, 3),
                "matches": [m.to_json() for m in self.matches],
                "stalls": [s.to_json() for s in self.stalls],
                "iterations": [i.to_json() for i in self.iterations],
                **({"layers": self.layers.to_json()} if self.layers is not None else {})}


# ---------------------------------------------------------------- matching
def _data_groups(side: Side, sim: list[SegmentRecord], real: list[SegmentRecord],
                 mss: int | None, gso_possible: bool) -> list[Match]:
    """Align two segmentations of the same byte stream; a group closes when both sides
    reach the same sequence boundary."""
    out: list[Match] = []
    sim_first: list[SegmentRecord] = []
    sim_again: list[SegmentRecord] = []
    high = -1
    for seg in sorted(sim, key=lambda s: s.t):
        if seg.seq + seg.length <= high:
            sim_again.append(seg)   # a model retransmission; its original is compared
            continue
        high = max(high, seg.seq + seg.length)
        sim_first.append(seg)
    real_first: list[SegmentRecord] = []
    high = -1
    for seg in sorted(real, key=lambda s: s.t):
        end = seg.seq + seg.length
        if end <= high:
            # a retransmission both sent (e.g. after a scripted [link] drop) is compared
            # like any segment; one only the kernel sent is a difference
            twin = next((s for s in sim_again if (s.seq, s.length) == (seg.seq, seg.length)),
                        None)
            if twin is not None:
                sim_again.remove(twin)
                out.append(Match(side, "data", "match", sim=[twin], real=[seg]))
            else:
                out.append(Match(side, "data", "retransmit", real=[seg], ok=False, note=(
                    f"the kernel retransmitted {seg.length} B (not in the model)")))
            continue
        high = max(high, end)
        real_first.append(seg)
    a = sorted(sim_first, key=lambda s: s.seq)
    b = sorted(real_first, key=lambda s: s.seq)
    i = j = 0
    while i < len(a) and j < len(b):
        g_sim, g_real = [a[i]], [b[j]]
        i += 1
        j += 1
        end_sim = g_sim[0].seq + g_sim[0].length
        end_real = g_real[0].seq + g_real[0].length
        while end_sim != end_real:
            if end_sim < end_real and i < len(a):
                g_sim.append(a[i])
                end_sim = a[i].seq + a[i].length
                i += 1
            elif end_real < end_sim and j < len(b):
                g_real.append(b[j])
                end_real = b[j].seq + b[j].length
                j += 1
            else:
                break
        out.append(_classify(side, g_sim, g_real, mss, gso_possible))
    for seg in a[i:]:
        out.append(Match(side, "data", "missing", sim=[seg], ok=False,
                         note=f"the model sent {seg.label()}; the kernel never sent these bytes"))
    for seg in b[j:]:
        out.append(Match(side, "data", "extra", real=[seg], ok=False,
                         note=f"the kernel sent {seg.label()}; the model never sent these bytes"))
    return out


def _classify(side: Side, g_sim: list[SegmentRecord], g_real: list[SegmentRecord],
              mss: int | None, gso_possible: bool) -> Match:
    m = Match(side, "data", "match", sim=g_sim, real=g_real)
    if len(g_sim) == 1 and len(g_real) == 1:
        return m
    if len(g_real) == 1 and gso_possible and mss and g_real[0].length > mss:
        m.kind = "gso"
        m.note = (f"GSO super-segment covers {len(g_sim)} model segments "
                  f"({_sizes(g_sim)}; loopback passes it unsplit)")
        return m
    if gso_possible and mss and all(s.length % mss == 0 for s in g_sim[:-1] + g_real[:-1]):
        # Every boundary on the MSS grid: the same bytes in TSO bursts of other sizes
        # (cwnd, pacing and µs ACK races decide them). A Nagle or cork difference would
        # put a boundary off the grid, and that stays a difference.
        m.kind = "gso"
        m.note = (f"TSO bursts grouped differently: real {_sizes(g_real)}, model "
                  f"{_sizes(g_sim)} (loopback; burst sizes follow cwnd and ACK timing)")
        return m
    m.ok = False
    if len(g_real) == 1:
        m.kind = "merged"
        m.note = (f"real sent {g_real[0].length} B where the model sent {_sizes(g_sim)}")
    elif len(g_sim) == 1:
        m.kind = "split"
        m.note = f"real sent {_sizes(g_real)} where the model sent {g_sim[0].length} B"
    else:
        m.kind = "regrouped"
        m.note = f"real sent {_sizes(g_real)} where the model sent {_sizes(g_sim)}"
    return m


def _control(side: Side, klass: str, sim: list[SegmentRecord],
             real: list[SegmentRecord], mss: int = 1448) -> list[Match]:
    """Non-data segments: pure ACKs pair by ACK number (in order), the rest in order."""
    out: list[Match] = []
    if klass == "ACK":
        by_ack: dict[int, list[SegmentRecord]] = {}
        for s in sim:
            by_ack.setdefault(s.ack, []).append(s)
        leftovers: list[SegmentRecord] = []
        for r in real:
            twins = by_ack.get(r.ack)
            if twins:
                out.append(Match(side, klass, "match", sim=[twins.pop(0)], real=[r]))
            else:
                leftovers.append(r)
        missing = sorted((s for rest in by_ack.values() for s in rest), key=lambda s: s.t)
        # An ACK of a number within one segment of a model ACK is the same ACK covering a
        # little more or less (µs races between writer and receiver): pair it, say so.
        # ACKs further apart in sequence are different ACKs; they stay extra / missing.
        # (Sequence, not time: the two executors may run at different speeds.)
        unpaired: list[SegmentRecord] = []
        for r in leftovers:
            near = [s for s in missing if abs(s.ack - r.ack) <= mss]
            if near:
                s = min(near, key=lambda s: (abs(s.ack - r.ack), abs(s.t - r.t)))
                missing.remove(s)
                out.append(Match(side, klass, "ack-number", sim=[s], real=[r],
                                 note=f"the kernel ACKed {r.ack} where the model ACKed "
                                      f"{s.ack}"))
            else:
                unpaired.append(r)
        leftovers = unpaired
        for r in leftovers:
            out.append(Match(side, klass, "extra", real=[r], ok=False,
                             note=f"the kernel sent a pure ACK of {r.ack} the model did not"))
        for s in missing:
            out.append(Match(side, klass, "missing", sim=[s], ok=False,
                             note=f"the model sent a pure ACK of {s.ack} the kernel did not"))
        return out
    if klass == "FIN":   # a FIN sent again (tail loss probe / RTO) is a retransmission
        sim, sim_again = _split_repeats(sim)
        real, real_again = _split_repeats(real)
        for k in range(max(len(sim_again), len(real_again))):
            s_again = sim_again[k] if k < len(sim_again) else None
            r_again = real_again[k] if k < len(real_again) else None
            if s_again is not None and r_again is not None:
                out.append(Match(side, klass, "match", sim=[s_again], real=[r_again],
                                 note="FIN sent again by both (tail loss probe or RTO)"))
            else:
                who = "kernel" if r_again is not None else "model"
                out.append(Match(side, klass, "retransmit", sim=[s_again] if s_again else [],
                                 real=[r_again] if r_again else [], ok=False,
                                 note=f"only the {who} sent its FIN again (tail loss probe "
                                      "or RTO retransmission)"))
    for k in range(max(len(sim), len(real))):
        one_sim = sim[k] if k < len(sim) else None
        one_real = real[k] if k < len(real) else None
        if one_sim is not None and one_real is not None:
            out.append(Match(side, klass, "match", sim=[one_sim], real=[one_real]))
        elif one_sim is not None:
            out.append(Match(side, klass, "missing", sim=[one_sim], ok=False,
                             note=f"the model sent a {klass} ({one_sim.label()}); the kernel "
                                  "did not"))
        elif one_real is not None:
            out.append(Match(side, klass, "extra", real=[one_real], ok=False,
                             note=f"the kernel sent a {klass} ({one_real.label()}); the model "
                                  "did not"))
    return out


def _split_repeats(segs: list[SegmentRecord]) -> tuple[list[SegmentRecord],
                                                        list[SegmentRecord]]:
    """First transmissions, and segments that repeat an earlier one's sequence number."""
    first: list[SegmentRecord] = []
    again: list[SegmentRecord] = []
    for seg in segs:
        (again if any(f.seq == seg.seq for f in first) else first).append(seg)
    return first, again


def _excuse_ack_thinning(matches: list[Match], sim: Trace, real: Trace) -> None:
    """A pure ACK only one side sent, that ended no stall, changed nothing: how often a
    receiver ACKs inside a burst follows how its reads interleave with arrivals (app pace,
    scheduler), and the data timing and stalls are judged on their own. Keep it as a note."""
    enders = {id(seg) for trace in (sim, real) for stall in stalls(_without_kernel_events(
        trace)) if (seg := _stall_key(trace, stall)) is not None}

    arrivals = {(id(trace), side): sorted(d.arrive if d.arrive is not None else d.t
                                          for d in trace.segments if d.src is side and d.is_data)
                for trace in (sim, real) for side in Side}

    def in_burst(ack: SegmentRecord, trace: Trace) -> bool:
        """Data from the peer arrived at most 2 ms before this ACK left."""
        times = arrivals[(id(trace), ack.src.peer)]
        i = bisect.bisect_right(times, ack.t)
        return i > 0 and ack.t - times[i - 1] <= 2000

    for m in matches:
        if m.klass != "ACK" or m.kind not in ("extra", "missing"):
            continue
        segs, trace = (m.real, real) if m.real else (m.sim, sim)
        if segs and all(id(seg) not in enders and in_burst(seg, trace) for seg in segs):
            m.ok = True
            m.kind = "ack-thinning"
            m.note += " (inside a burst; ended no stall)"


CALL_CODES = frozenset({"APP_WRITE", "NODELAY_PUSH", "UNCORK_PUSH", "CLOSE_PUSH",
                        "READ_ACK", "WINDOW_UPDATE", "QUICKACK_OPT"})
"""Model reasons of segments a call sends itself (a write, an uncork, a close, the ACK on
read or at TCP_QUICKACK): only these may be timed from the call (`_CallAnchors`)."""


class _CallAnchors:
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


def _time_errors(matches: list[Match], late_ok: dict[Side, Micros] | None = None,
                 calls: _CallAnchors | None = None) -> None:
    """Error on each interval since the previous matched event that agreed (model time
    order): a late event is reported once, not again by the correctly spaced one after it.
    ``late_ok``: per sender, how much later than the tolerance a segment the model sends
    from a timer may come (`TIMER_LATE_JIFFIES`). An event after such a late timer is
    timed from it (what the timer released came late with it) or from the event before it
    (what the timer did not cause, e.g. ACKs paced by the link), whichever fits better.
    ``calls``: an event that does not fit its previous event may also be timed from its
    sender's last call (`_CallAnchors`)."""
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


def _stall_key(trace: Trace, stall: Stall) -> SegmentRecord | None:
    """The segment that ended a stall (first segment at its end time after its start)."""
    for s in trace.segments:
        if s.t == stall.end and s.t > stall.start:
            return s
    return None


def _pair_stalls(sim: Trace, real: Trace, matches: list[Match],
                 late_ok: dict[Side, Micros] | None = None) -> list[StallPair]:
    """Pair each stall (gap ≥ 10 ms) with its twin in the other trace. A twin may fall just
    under the 10 ms line (9.9 ms against 10.0 ms is the same stall), so candidates are gaps
    down to 10 ms minus the 4 ms tolerance floor, sleeps included; only real mismatches
    are reported."""
    loose = Micros(STALL_MIN - TOLERANCE_FLOOR)
    real_clean = _without_kernel_events(real)
    # Twins may also be gaps a sleep explains: a sleep covering just over half of one
    # run's gap hides it there, while the other run's gap (its sleep a little shorter
    # against a little more time on the wire) counts as a stall.
    sim_stalls, sim_loose = stalls(sim), stalls(sim, loose, asleep=True)
    real_stalls, real_loose = stalls(real_clean), stalls(real_clean, loose, asleep=True)
    twin: dict[int, SegmentRecord] = {}
    back: dict[int, SegmentRecord] = {}
    for m in matches:
        for s in m.sim:
            if m.real:
                twin[id(s)] = m.real[0]
                back[id(m.real[0])] = s
    used_real: set[tuple[int, int]] = set()
    used_sim: set[tuple[int, int]] = set()
    pairs: list[StallPair] = []

    def partner(st: Stall, trace: Trace, mapping: dict[int, SegmentRecord],
                other: Trace, candidates: list[Stall],
                used: set[tuple[int, int]]) -> Stall | None:
        ender = _stall_key(trace, st)
        seg = mapping.get(id(ender)) if ender is not None else None
        by_end = {id(k): c for c in candidates if (k := _stall_key(other, c)) is not None}
        found = by_end.get(id(seg)) if seg is not None else None
        if found is None:   # fall back: the candidate overlapping it most
            overlap = 0
            for cand in candidates:
                o = min(cand.end, st.end) - max(cand.start, st.start)
                if (cand.start, cand.end) not in used and o > overlap:
                    found, overlap = cand, o
        if found is None or (found.start, found.end) in used:
            return None
        return found

    for st in sim_stalls:
        r_st = partner(st, sim, twin, real, real_loose, used_real)
        if r_st is None:
            pairs.append(StallPair(st, None, False,
                                   f"the model stalls {ms_text(st.duration, 1)} ms at "
                                   f"{ms_text(st.start)} ms; the kernel does not"))
            continue
        used_real.add((r_st.start, r_st.end))
        used_sim.add((st.start, st.end))
        pairs.append(_judge_stalls(st, r_st, _timer_slack(sim, st, late_ok)))
    for r_st in real_stalls:
        if (r_st.start, r_st.end) in used_real:
            continue
        s_st = partner(r_st, real, back, sim, sim_loose, used_sim)
        if s_st is None:
            pairs.append(StallPair(None, r_st, False,
                                   f"the kernel stalls {ms_text(r_st.duration, 1)} ms at "
                                   f"{ms_text(r_st.start)} ms ({r_st.ended_by}); "
                                   "the model does not"))
            continue
        used_sim.add((s_st.start, s_st.end))
        pairs.append(_judge_stalls(s_st, r_st, _timer_slack(sim, s_st, late_ok)))
    pairs.sort(key=_pair_start)
    return pairs


def _pair_start(pair: StallPair) -> int:
    stall = pair.sim or pair.real
    return stall.start if stall else 0


def _timer_slack(sim: Trace, stall: Stall, late_ok: dict[Side, Micros] | None) -> int:
    """`TIMER_LATE_JIFFIES` of slack for a stall the model ends with a timer's segment."""
    ender = _stall_key(sim, stall)
    if late_ok is None or ender is None or ender.code not in TIMER_CODES:
        return 0
    return late_ok.get(ender.src, Micros(0))


def _judge_stalls(sim_stall: Stall, real_stall: Stall, late_slack: int = 0) -> StallPair:
    """Durations within tolerance; a stall ended by a timer may also be ``late_slack``
    longer (that timer fired late)."""
    tol = tolerance(sim_stall.duration)
    diff = real_stall.duration - sim_stall.duration
    ok = -tol <= diff <= tol + late_slack
    note = f"{diff / 1000:+.1f} ms" + ("" if ok else f" (beyond ±{ms_text(tol, 1)} ms)")
    if ok and diff > tol:
        note += " (its timer fired late)"
    return StallPair(sim_stall, real_stall, ok, note)


def _without_kernel_events(trace: Trace) -> Trace:
    """Real traces carry TCP_INFO snapshots as events; stall analysis wants model events."""
    return Trace(source=trace.source, title=trace.title, segments=trace.segments,
                 ops=trace.ops, events=[e for e in trace.events if e.kind != "tcp_info"],
                 meta=trace.meta, outcome=trace.outcome, message=trace.message)


def _pair_iterations(sim: Trace, real: Trace) -> list[IterationPair]:
    a = {it.index: it.latency for it in iterations(sim)}
    b = {it.index: it.latency for it in iterations(real)}
    out = []
    for k in sorted(set(a) | set(b)):
        s, r = a.get(k), b.get(k)
        tol = tolerance(s or 0)
        ok = s is not None and r is not None and abs(r - s) <= tol
        out.append(IterationPair(k, s, r, tol, ok))
    return out


def compare(sim: Trace, real: Trace, *,
            profiles: dict[Side, StackProfile] | None = None) -> Comparison:
    """Match every real segment with its simulated twin and judge the timings.

    Data segments pair by byte range per direction (a group closes where both traces share
    a sequence boundary, so "2 B + 28 B vs 30 B" is one explained row); SYN / SYN-ACK / FIN
    / RST pair in order; pure ACKs pair by ACK number. Timing uses packetdrill's tolerance
    on each interval. Stalls pair through the segment that ends them; iterations by index.
    ``profiles``: the model's profile per side (default: looked up by the names in the
    model trace's meta), against which the real hosts' facts are listed.
    """
    mss = sim.meta.get("mss") or real.meta.get("mss")
    gso_possible = real.meta.get("link", "loopback") == "loopback" or _offloaded(real)
    matches: list[Match] = []
    unknown = wire_unknown(real)
    # no capture: the model's segments have nothing to be matched against (every one
    # would be "missing"): compare the ops only and say so
    for side in Side if unknown is None else ():
        by_class: dict[tuple[str, str], list[SegmentRecord]] = {}
        for which, trace in (("sim", sim), ("real", real)):
            for seg in trace.segments:
                if seg.src is side:
                    by_class.setdefault((which, flags_class(seg)), []).append(seg)
        matches += _data_groups(side, by_class.get(("sim", "data"), []),
                                by_class.get(("real", "data"), []),
                                int(mss) if mss else None, gso_possible)
        for klass in ("SYN", "SYN-ACK", "FIN", "RST", "ACK"):
            sim_list = by_class.get(("sim", klass), [])
            real_list = by_class.get(("real", klass), [])
            if sim_list or real_list:
                matches += _control(side, klass, sim_list, real_list,
                                    int(mss) if mss else 1448)
    _excuse_ack_thinning(matches, sim, real)
    resolved = profiles or profiles_of(sim)
    late = {side: Micros(TIMER_LATE_JIFFIES * p.tick_us) for side, p in resolved.items()}
    _time_errors(matches, late, _CallAnchors(sim, real))
    matches.sort(key=lambda m: (m.sim_t if m.sim_t is not None else m.real_t or 0,
                                m.real_t or 0))
    problems: list[str] = []
    notes: list[str] = []
    if unknown is not None:
        notes.append(f"the real trace has no captured segments ({unknown}): only ops are "
                     "compared; segments and stalls on the wire are unknown")
    for m in matches:
        if not m.ok:
            where = m.sim_t if m.sim_t is not None else m.real_t
            problems.append(f"{_arrow(m.side)} {m.klass} at {ms_text(where or 0)} ms: "
                            f"{m.note}")
        elif m.kind in ("gso", "ack-thinning", "timer-late"):
            where = m.real_t if m.real_t is not None else m.sim_t
            notes.append(f"{_arrow(m.side)} at {ms_text(where or 0)} ms: {m.note}")
    stall_pairs = _pair_stalls(sim, real, matches, late) if real.segments else []
    for p in stall_pairs:
        if not p.ok:
            problems.append(f"stall: {p.note}")
    iters = _pair_iterations(sim, real)
    # An iteration spans several events whose (tolerated) errors add up, so with a capture
    # the per-event rule above is the judge and iteration differences are reported as notes;
    # without a capture the iterations are the only evidence and decide.
    bad_iters = [it for it in iters if not it.ok]
    judged = problems if not real.segments else notes
    for it in bad_iters[:5]:
        sim_ms = "—" if it.sim_us is None else f"{ms_text(it.sim_us)} ms"
        real_ms = "—" if it.real_us is None else f"{ms_text(it.real_us)} ms"
        judged.append(f"iteration {it.index}: model {sim_ms}, real {real_ms} "
                      f"(beyond ±{ms_text(it.tol, 1)} ms for the whole iteration)")
    if len(bad_iters) > 5:
        judged.append(f"… and {len(bad_iters) - 5} more iterations beyond that")
    if len(iters) and any(it.sim_us is None or it.real_us is None for it in iters):
        problems.append("the model and the kernel completed different numbers of iterations")
    if sim.outcome != real.outcome:
        problems.append(f"outcome: model {sim.outcome} ({sim.message or 'ok'}), real "
                        f"{real.outcome} ({real.message or 'ok'})")
    retrans = real.meta.get("retransmissions") or {}
    seen = real.meta.get("retransmitted_segments") or {}
    if any(retrans.values()) or seen:
        notes.append("the kernel retransmitted: TCP_INFO total_retrans "
                     + ", ".join(f"{k} {v}" for k, v in retrans.items())
                     + "; seen on the wire " + (", ".join(f"{k} {v}" for k, v in seen.items())
                                                 or "none"))
    for note in real.meta.get("notes", []):
        notes.append(note)
    slept = sim.meta.get("measured_sleeps")
    if isinstance(slept, dict) and slept:
        notes.append("the model slept as long as the kernel run's sleeps took (median per "
                     "statement: " + ", ".join(f"{k} {v}" for k, v in slept.items()) + ")")
    for tie in sim.meta.get("write_ties") or []:
        notes.append(f"followed {tie}")
    if sim.meta.get("jiffy_phase_us") is not None:
        notes.append(f"the model ran at the kernel's measured jiffy phase "
                     f"({sim.meta['jiffy_phase_us']} µs into a tick at t=0; a real run's "
                     "phase is arbitrary)")
    host, host_problems = host_differences(real, resolved)
    problems += host_problems
    return Comparison(title=sim.title or real.title, matches=matches, stalls=stall_pairs,
                      iterations=iters, problems=problems, notes=notes,
                      sim_outcome=sim.outcome, real_outcome=real.outcome, host=host,
                      wire_unknown=unknown)


# ---------------------------------------------------------------- saved traces
MAX_DELAY_US = 60_000_000
"""Longest one-way delay or round trip (µs) a saved trace's clock estimate may carry."""
_FACT_TYPES: dict[str, tuple[type, ...]] = {
    "kernel": (str,), "system": (str,), "hz": (int,), "hz_source": (str,),
    "tcp_pingpong_thresh": (int,), "tcp_autocorking": (int,), "tcp_rmem": (list,),
    "tcp_wmem": (list,), "congestion_default": (str,), "congestion_allowed": (list,),
    "interface": (str,), "offloads": (dict,), "congestion": (dict,),
    "congestion_notes": (dict,)}


def _bad(where: str, key: str, value: Any, want: str) -> TraceError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return TraceError(f"{where}: meta.{key}: expected {want}, got {shown}")


def check_meta(trace: Trace, where: str) -> None:
    """Refuse a saved trace whose meta the comparison reads but cannot use: one
    `TraceError` naming the field (meta is free-form in the trace format, so a hand-edited
    or foreign file must be caught here, not as a traceback in the middle of a compare).
    Checked: ``mss``, ``link``, ``remote``, ``capture``, ``notes``, ``retransmissions``,
    ``retransmitted_segments``, ``host_facts`` (per side, each fact's type),
    ``clock_offset`` (finite µs within `MAX_DELAY_US`), ``measured_sleeps``,
    ``jiffy_phase_us`` and the sides' profile names."""
    meta = trace.meta

    def number(key: str, value: Any, lo: float, hi: float) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not lo <= value <= hi:       # NaN fails both comparisons
            raise _bad(where, key, value, f"a number from {lo:g} to {hi:g}")

    mss = meta.get("mss")
    if mss is not None and (type(mss) is not int or not 1 <= mss <= 65_535):
        raise _bad(where, "mss", mss, "a whole number of bytes from 1 to 65535")
    for key in ("link", "remote", "capture", "client_profile", "server_profile"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise _bad(where, key, meta[key], "text")
    notes = meta.get("notes")
    if notes is not None and not (isinstance(notes, list)
                                  and all(isinstance(n, str) for n in notes)):
        raise _bad(where, "notes", notes, "a list of text")
    for key in ("retransmissions", "retransmitted_segments", "measured_sleeps"):
        value = meta.get(key)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(v, int | str) and not isinstance(v, bool)
                for v in value.values())):
            raise _bad(where, key, value, "an object of counts")
    number("jiffy_phase_us", meta.get("jiffy_phase_us"), 0, 10_000)
    facts = meta.get("host_facts")
    if facts is not None:
        if not isinstance(facts, dict):
            raise _bad(where, "host_facts", facts, "an object per side (client, server)")
        for side, one in facts.items():
            if not isinstance(one, dict):
                raise _bad(where, f"host_facts.{side}", one, "an object of host facts")
            for key, value in one.items():
                want = _FACT_TYPES.get(key)
                if value is None or want is None:
                    continue
                if not isinstance(value, want):
                    raise _bad(where, f"host_facts.{side}.{key}", value,
                               want[0].__name__.replace("str", "text")
                               .replace("dict", "an object").replace("list", "a list"))
                if key == "hz":
                    number(f"host_facts.{side}.hz", value, 1, 100_000)
    clock = meta.get("clock_offset")
    if clock is not None:
        if not isinstance(clock, dict):
            raise _bad(where, "clock_offset", clock, "an object")
        for key, value in clock.items():
            if key == "method":
                continue
            if key in ("used_us", "control_channel_us", "handshake_us"):   # any offset
                number(f"clock_offset.{key}", value, -1e15, 1e15)
            else:                                   # delays: positive, under a minute
                number(f"clock_offset.{key}", value, 0, MAX_DELAY_US)


# ---------------------------------------------------------------- host facts
def _offloaded(real: Trace) -> bool:
    """A remote run over an interface with TSO or GRO: the capture can see bursts of
    several MSS (cut into MSS segments on the wire, or merged on receipt). Software GSO
    alone is split before the capture tap."""
    if real.meta.get("link") != "remote":
        return False
    for facts in (real.meta.get("host_facts") or {}).values():
        offl = facts.get("offloads") if isinstance(facts, dict) else None
        if isinstance(offl, dict) and any(offl.get(k) for k in ("tso", "gro")):
            return True
    return False


_SIDE_CHANGES = TUNABLE | {"congestion"}
"""What a scenario may change of a side's profile (its `tune` table and `congestion` key)."""


def profiles_of(source: Any) -> dict[Side, StackProfile]:
    """The model's profile per side: a scenario's (``source.side(side).profile``, tuned),
    or, for a saved model trace, the profiles named in its meta (``client_profile`` /
    ``server_profile``, changed by ``client_tune`` / ``server_tune``: `congestion` and the
    `tune` table; an unknown name or tune leaves that side out, so it is not compared)."""
    if not isinstance(source, Trace):
        return {side: source.side(side).profile for side in Side}
    out = {}
    for side in Side:
        name = source.meta.get(f"{side.value}_profile")
        if isinstance(name, str) and name in PROFILES:
            out[side] = PROFILES[name]
            tune = source.meta.get(f"{side.value}_tune")
            if isinstance(tune, dict) and tune:
                changes = {k: v for k, v in tune.items()
                           if k in _SIDE_CHANGES and isinstance(v, int | str)}
                if len(changes) != len(tune):
                    del out[side]           # a tune this model does not know: not compared
                    continue
                try:
                    out[side] = out[side].with_overrides(**changes)
                except (TypeError, ValueError):
                    del out[side]
    return out


def version_profile(kernel: object) -> tuple[str, str]:
    """(profile name, note) for a kernel release: ``linux-6.1`` for "6.1.0-13-amd64" when
    the model has that profile, else ``linux`` and a note saying there is none."""
    m = re.match(r"(\d+)\.(\d+)", kernel if isinstance(kernel, str) else "")
    if not m:
        return "linux", f"kernel release {kernel!r} unknown: the model uses profile linux"
    name = f"linux-{m.group(1)}.{m.group(2)}"
    if name in PROFILES:
        return name, f"kernel {kernel}: the model uses its version profile {name}"
    return "linux", (f"kernel {kernel}: the model has no profile {name}, so it uses "
                     "profile linux")


def host_differences(real: Trace, profiles: dict[Side, StackProfile]
                     ) -> tuple[list[str], list[str]]:
    """(every difference between the real hosts' facts and the model's profiles, one line
    each; the ones that make the comparison unfair, as problems).

    A congestion control the host could not set (or a socket that reports another one) is
    a problem: the two senders then follow different rules. Everything else (HZ, the
    ping-pong threshold, autocorking, buffer sizes, the kernel version, offloads) is listed
    so a difference in the matches can be traced to it."""
    lines: list[str] = []
    problems: list[str] = []
    one_host = real.meta.get("link") != "remote"
    facts_by_side = real.meta.get("host_facts")
    if not isinstance(facts_by_side, dict):
        return lines, problems
    emulated = real.meta.get("link") == "emulated"
    applied = real.meta.get("namespace_sysctls")
    for side in Side:
        facts = facts_by_side.get(side.value)
        profile = profiles.get(side)
        if not isinstance(facts, dict) or profile is None:
            continue
        ns = applied.get(side.value) if isinstance(applied, dict) else None
        if isinstance(ns, dict):
            # the host facts are the host's own namespace; the run set these in its own
            # namespace for this side, which is what the kernel under test used
            facts = dict(facts)
            for key, value in ns.items():
                short = str(key).rsplit(".", 1)[-1]
                if short in ("tcp_pingpong_thresh", "tcp_autocorking") and \
                        isinstance(value, str) and value.isdigit() and len(value) < 6:
                    facts[short] = int(value)
        who = f"{side.value} host"
        name = profile.name
        hz = facts.get("hz")
        if isinstance(hz, int) and hz != profile.hz:
            lines.append(f"{who}: HZ {hz}, profile {name} has HZ {profile.hz}: delayed-ACK "
                         "and probe timers are whole jiffies of another length")
        thresh = facts.get("tcp_pingpong_thresh")
        if isinstance(thresh, int) and thresh != profile.pingpong_thresh:
            lines.append(f"{who}: net.ipv4.tcp_pingpong_thresh = {thresh}, profile {name} has "
                         f"{profile.pingpong_thresh}: delayed ACKs start after a different "
                         "number of replies")
        cork = facts.get("tcp_autocorking")
        if isinstance(cork, int) and not emulated and bool(cork) != profile.autocorking:
            lines.append(f"{who}: net.ipv4.tcp_autocorking = {cork}, profile {name} has "
                         f"{int(profile.autocorking)}: small writes merge differently while "
                         "a packet waits in the device queue")
        for key, field_name in (("tcp_rmem", "rcv_buf"),):
            value = facts.get(key)
            model = getattr(profile, field_name, None)
            if isinstance(value, list) and len(value) == 3 and isinstance(value[1], int) \
                    and isinstance(model, int) and value[1] != model:
                lines.append(f"{who}: net.ipv4.{key} default {value[1]} B, profile {name} has "
                             f"{field_name} {model} B: the offered window differs")
        wmem = facts.get("tcp_wmem")
        if isinstance(wmem, list) and len(wmem) == 3 and wmem != STOCK_WMEM:
            lines.append(f"{who}: net.ipv4.tcp_wmem = {' '.join(map(str, wmem))} (the model "
                         "has no send-buffer limit: a write never blocks on it)")
        want = profile.congestion    # what realnet sets per socket (TCP_CONGESTION)
        used = facts.get("congestion", {}).get(side.value) \
            if isinstance(facts.get("congestion"), dict) else None
        why = facts.get("congestion_notes", {}).get(side.value) \
            if isinstance(facts.get("congestion_notes"), dict) else None
        if why or (isinstance(used, str) and used != want):
            problems.append(f"{who}: congestion control {used or 'unknown'} in use where "
                            f"profile {name} models {want}"
                            + (f" ({why})" if why else "")
                            + ": the senders follow different rules")
        kernel = facts.get("kernel")
        m = re.match(r"(\d+)\.(\d+)", kernel) if isinstance(kernel, str) else None
        if m and name.startswith("linux-") and name != f"linux-{m.group(1)}.{m.group(2)}":
            lines.append(f"{who}: kernel {kernel}, the model ran profile {name}")
        offl = facts.get("offloads")
        if isinstance(offl, dict) and real.meta.get("link") == "remote":
            on = [k.upper() for k in ("tso", "gro") if offl.get(k)]
            if on:
                lines.append(f"{who}: {'/'.join(on)} on {facts.get('interface')}: the NIC cuts "
                             "TSO bursts into MSS segments and GRO merges them on receipt, "
                             "so the capture may see several MSS as one (compared by bytes "
                             "on the MSS grid)")
    if one_host:    # a local run: both sides are this host; say each fact once
        seen: list[str] = []
        for line in lines:
            text = line.replace("client host:", "this host:").replace("server host:",
                                                                      "this host:")
            if text not in seen:
                seen.append(text)
        lines = seen
    return lines, problems


# ---------------------------------------------------------------- tables
def match_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    headers = ["dir", "class", "model t (ms)", "model", "real t (ms)", "real",
               "error (ms)", "tol (ms)", "ok", "note"]

    def cell(v: int | None) -> str:
        return "" if v is None else ms_text(v)
    rows = [[_arrow(m.side), m.klass, cell(m.sim_t), m.label("sim"), cell(m.real_t),
             m.label("real"), cell(m.error), cell(m.tol), "✓" if m.ok else "✗", m.note]
            for m in cmp.matches]
    return headers, rows


def iteration_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    def cell(v: int | None) -> str:
        return "—" if v is None else ms_text(v)
    return (["iteration", "model (ms)", "real (ms)", "difference (ms)", "ok"],
            [[str(it.index), cell(it.sim_us), cell(it.real_us), cell(it.diff),
              "✓" if it.ok else "✗"] for it in cmp.iterations])


def stall_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    rows = []
    for p in cmp.stalls:
        s, r = p.sim, p.real
        rows.append([ms_text(s.start) if s else "—",
                     ms_text(s.duration, 1) if s else "—",
                     s.held_by if s else "",
                     ms_text(r.start) if r else "—",
                     ms_text(r.duration, 1) if r else "—",
                     r.ended_by if r else "", "✓" if p.ok else "✗", p.note])
    return (["model at (ms)", "model (ms)", "model's cause", "real at (ms)", "real (ms)",
             "real ended by", "ok", "note"], rows)


def comparison_markdown(cmp: Comparison) -> str:
    parts = [f"# Model vs kernel: {cmp.title}\n", f"**Verdict:** {cmp.verdict}\n"]
    if cmp.layers is not None:
        parts.append(f"**In two layers:** {cmp.layers.summary}\n")
        for name, layer in (("Decisions", cmp.layers.decisions),
                            ("Timing", cmp.layers.timing)):
            if layer.differences:
                parts.append(f"## {name}: differences\n\n"
                             + "".join(f"- {d}\n" for d in layer.differences))
    if cmp.problems:
        parts.append("## Differences\n\n" + "".join(f"- {p}\n" for p in cmp.problems))
    if cmp.host:
        parts.append("## Host vs model profile\n\n" + "".join(f"- {h}\n" for h in cmp.host))
    if cmp.notes:
        parts.append("## Notes\n\n" + "".join(f"- {n}\n" for n in cmp.notes))
    parts.append("## Per-iteration latency\n\n" + render_markdown(*iteration_rows(cmp)))
    if cmp.stalls:
        parts.append("## Stalls ≥ 10 ms\n\n" + render_markdown(*stall_rows(cmp)))
    if cmp.wire_unknown is not None:
        parts.append(f"## Segments\n\nunknown: not captured ({cmp.wire_unknown})\n")
    else:
        parts.append("## Segments\n\n" + render_markdown(*match_rows(cmp)))
    return "\n".join(parts)


WRITE_TIE_US = 1_000
"""A write and a segment sent from an arriving ACK this close together may come in either
order: the model's ACK arrives up to a few hundred µs off the real one (the relay, the
real calls' costs), so which bundle the write joins is the kernel's call, not a rule."""
WRITE_TIE_ROUNDS = 4
"""At most this many ties are followed in one comparison."""


@dataclass(frozen=True, slots=True)
class WriteTie:
    """A write that the kernel and the model put on opposite sides of a segment's send:
    the first place their data segments split the byte stream differently."""

    side: Side
    line: int
    iteration: tuple[int, ...]
    loop: int
    sim_offset: int
    """The model's write start minus its segment's send time (µs; negative: before)."""
    real_offset: int
    """The same in the kernel's run."""
    at: Micros
    """When the kernel sent the segment."""

    @property
    def shift(self) -> int:
        """How much later (µs; negative: earlier) the model's write must start to fall on
        the kernel's side of the send."""
        if self.real_offset >= 0:
            return 1 - self.sim_offset
        return -1 - self.sim_offset

    def describe(self) -> str:
        where = f"{self.side.value} line {self.line}"
        if self.iteration:
            where += f", iteration {'.'.join(map(str, self.iteration))}"
        def when(off: int) -> str:
            return f"{abs(off)} µs {'after' if off >= 0 else 'before'}"
        return (f"a write/segment tie at {ms_text(self.at)} ms: the {where} write came "
                f"{when(self.real_offset)} the kernel's segment and {when(self.sim_offset)} "
                f"the model's; the model's write was moved {abs(self.shift)} µs "
                f"{'later' if self.shift > 0 else 'earlier'}, to the kernel's side (a tie: "
                f"within {WRITE_TIE_US / 1000:g} ms)")


def _new_data(trace: Trace, side: Side) -> list[SegmentRecord]:
    """``side``'s data segments that carry new bytes, in the order they left."""
    out, high = [], 0
    for seg in trace.segments:
        if seg.src is side and seg.is_data and seg.seq >= high:
            out.append(seg)
            high = seg.seq + seg.length
    return out


def first_write_tie(sim: Trace, real: Trace) -> WriteTie | None:
    """Of each side's first place where the two runs split its bytes into segments
    differently, the earliest (kernel time) that is a tie: a write within `WRITE_TIE_US`
    of the send, on opposite sides of it. None when neither is; a side whose first split
    is a real difference keeps it (the comparison still reports it)."""
    ties = []
    for side in Side:
        for a, b in zip(_new_data(sim, side), _new_data(real, side), strict=False):
            if (a.seq, a.length) == (b.seq, b.length):
                continue
            if a.seq == b.seq:
                tie = _tie_at(sim, real, side, a, b)
                if tie is not None:
                    ties.append(tie)
            break
    return min(ties, key=lambda t: t.at, default=None)


def _tie_at(sim: Trace, real: Trace, side: Side, a: SegmentRecord,
            b: SegmentRecord) -> WriteTie | None:
    writes = [op for op in real.ops if op.side is side and op.op in ("write", "writev")
              and abs(op.start - b.t) <= WRITE_TIE_US]
    if not writes:
        return None
    w_real = min(writes, key=lambda op: abs(op.start - b.t))
    twins = [op for op in sim.ops if op.side is side and op.op == w_real.op
             and (op.line, op.iteration, op.loop) == (w_real.line, w_real.iteration,
                                                      w_real.loop)]
    if len(twins) != 1 or not w_real.line:
        return None
    real_off, sim_off = w_real.start - b.t, twins[0].start - a.t
    # The kernel's segment is the shorter one when its write came after the send, and by
    # exactly that write's bytes: anything else is a different split, not this tie.
    if (b.length < a.length) != (real_off >= 0) or (sim_off >= 0) == (real_off >= 0):
        return None
    if abs(a.length - b.length) != _write_bytes(w_real.arg):
        return None
    if abs(sim_off) > WRITE_TIE_US:
        return None
    return WriteTie(side=side, line=w_real.line, iteration=w_real.iteration,
                    loop=w_real.loop, sim_offset=sim_off, real_offset=real_off, at=b.t)


def _write_bytes(arg: str) -> int:
    """The bytes a write or writev op's argument names ("1000", "1000 more", "10 20")."""
    return sum(int(tok) for tok in arg.split() if tok.isascii() and tok.isdigit())


def measured_jiffy_phase(real: Trace, hz: int) -> int | None:
    """Where the real run's kernel ticks fell (µs into a tick at t=0), or None.

    Timer-driven segments (a pure ACK that ends a quiet gap of 10 ms or more: a delayed
    ACK, a probe) leave at the start of a jiffy, so ``-t mod tick`` is the phase. The
    phase of a real run is arbitrary — like a seed, not a rule — so the model is run with
    the measured one when the two are compared."""
    tick = 1_000_000 // hz
    segs = real.segments
    phases = [(-nxt.t) % tick for prev, nxt in zip(segs, segs[1:], strict=False)
              if nxt.t - prev.t >= STALL_MIN and nxt.is_pure_ack]
    if not phases:
        return None
    # circular median: the phase the most timer ACKs agree with (within 0.5 ms)
    return max(phases, key=lambda p: sum(min((p - q) % tick, (q - p) % tick) <= 500
                                         for q in phases))
