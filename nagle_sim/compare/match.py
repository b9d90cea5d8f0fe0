"""Matching a model run's segments with a real run's: which real segment is which model one.

Owns: what a segment is for matching (`flags_class`: data, SYN, SYN-ACK, FIN, RST, pure
ACK), a row of the comparison (`Match`), and the pairing per direction: data segments by
byte range (a group closes where both traces share a sequence boundary, so "2 B + 28 B vs
30 B" is one explained row; GSO/TSO bursts on the MSS grid are the same bytes), SYN /
SYN-ACK / FIN / RST in order, pure ACKs by ACK number; a pure ACK only one side sent inside
a burst is excused (`excuse_ack_thinning`). Pure: tests feed it hand-made traces.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from ..model.events import Micros, Side
from ..trace import SegmentRecord, Trace
from ..trace.summary import Stall, stalls
from ..trace.units import ms


def arrow(side: Side) -> str:
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

def data_groups(side: Side, sim: list[SegmentRecord], real: list[SegmentRecord],
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

def control_matches(side: Side, klass: str, sim: list[SegmentRecord],
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

def stall_key(trace: Trace, stall: Stall) -> SegmentRecord | None:
    """The segment that ended a stall (first segment at its end time after its start)."""
    for s in trace.segments:
        if s.t == stall.end and s.t > stall.start:
            return s
    return None

def without_kernel_events(trace: Trace) -> Trace:
    """Real traces carry TCP_INFO snapshots and the kernel's own decisions (``by``
    "kernel", recorded by watch) as events; stall and segment analysis read the wire as
    before (the reasons are compared on their own: `nagle_sim.compare.reasons`)."""
    return Trace(source=trace.source, title=trace.title, segments=trace.segments,
                 ops=trace.ops, events=[e for e in trace.events
                                        if e.kind != "tcp_info" and e.by != "kernel"],
                 meta=trace.meta, outcome=trace.outcome, message=trace.message)

def excuse_ack_thinning(matches: list[Match], sim: Trace, real: Trace) -> None:
    """A pure ACK only one side sent, that ended no stall, changed nothing: how often a
    receiver ACKs inside a burst follows how its reads interleave with arrivals (app pace,
    scheduler), and the data timing and stalls are judged on their own. Keep it as a note."""
    enders = {id(seg) for trace in (sim, real) for stall in stalls(without_kernel_events(
        trace)) if (seg := stall_key(trace, stall)) is not None}

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
