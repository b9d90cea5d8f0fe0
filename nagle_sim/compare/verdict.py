"""The comparison of a model run with a real run: every segment, stall and iteration judged.

Owns: `compare` (match, time, pair stalls through the segment that ends them and
iterations by index, list every difference as a problem and every excused one as a note,
say which host facts differ from the model's profile) and its result, `Comparison`
(`StallPair`, `IterationPair`; `verdict`, `to_json`). Pure: no sockets, no simulator, no
terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.config import StackProfile
from ..model.events import Micros, Side
from ..trace import Outcome, SegmentRecord, Trace
from ..trace.summary import STALL_MIN, Stall, iterations, stalls, wire_unknown
from ..trace.units import ms, ms_text
from .hosts import host_differences, offloaded, profiles_of
from .match import (
    Match,
    arrow,
    control_matches,
    data_groups,
    excuse_ack_thinning,
    flags_class,
    stall_key,
    without_kernel_events,
)
from .reasons import ReasonComparison, compare_reasons
from .timing import (
    TIMER_CODES,
    TIMER_LATE_JIFFIES,
    TOLERANCE_FLOOR,
    TOLERANCE_TEXT,
    CallAnchors,
    time_errors,
    tolerance,
)

if TYPE_CHECKING:
    from .layers import Layers


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
    reasons: ReasonComparison | None = None
    """The model's decisions against the kernel's own (`nagle_sim.compare.reasons`): a
    verdict of its own, its differences listed apart from the segments' (``problems``
    stays the segments', ops' and hosts')."""
    layers: Layers | None = None
    """The verdict in two layers, decisions and timing (`nagle_sim.compare.layers`), when
    the comparison was made from runs (`nagle_sim.compare.Both.compare`)."""

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
                "reasons": self.reasons.to_json() if self.reasons is not None else None,
                **({"layers": self.layers.to_json()} if self.layers is not None else {})}

def _pair_stalls(sim: Trace, real: Trace, matches: list[Match],
                 late_ok: dict[Side, Micros] | None = None) -> list[StallPair]:
    """Pair each stall (gap ≥ 10 ms) with its twin in the other trace. A twin may fall just
    under the 10 ms line (9.9 ms against 10.0 ms is the same stall), so candidates are gaps
    down to 10 ms minus the 4 ms tolerance floor, sleeps included; only real mismatches
    are reported."""
    loose = Micros(STALL_MIN - TOLERANCE_FLOOR)
    real_clean = without_kernel_events(real)
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
        ender = stall_key(trace, st)
        seg = mapping.get(id(ender)) if ender is not None else None
        by_end = {id(k): c for c in candidates if (k := stall_key(other, c)) is not None}
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
    ender = stall_key(sim, stall)
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

def resolved_hz(profiles: dict[Side, StackProfile]) -> int:
    """The model's tick rate (the reasons' default where a host's HZ is unknown)."""
    ticks = [p.tick_us for p in profiles.values() if p.tick_us]
    return 1_000_000 // ticks[0] if ticks else 250


def compare(sim: Trace, real: Trace, *,
            profiles: dict[Side, StackProfile] | None = None) -> Comparison:
    """Match every real segment with its simulated twin and judge the timings.

    Data segments pair by byte range per direction (a group closes where both traces share
    a sequence boundary, so "2 B + 28 B vs 30 B" is one explained row); SYN / SYN-ACK / FIN
    / RST pair in order; pure ACKs pair by ACK number. Timing uses packetdrill's tolerance
    on each interval. Stalls pair through the segment that ends them; iterations by index.
    ``profiles``: the model's profile per side (default: looked up by the names in the
    model trace's meta), against which the real hosts' facts are listed.

    In phases: segments matched (`_match_segments`) and timed, then the verdicts of the
    segments, stalls and iterations, then what the runs themselves note.
    """
    unknown = wire_unknown(real)
    # no capture: the model's segments have nothing to be matched against (every one
    # would be "missing"): compare the ops only and say so
    matches = _match_segments(sim, real) if unknown is None else []
    excuse_ack_thinning(matches, sim, real)
    resolved = profiles or profiles_of(sim)
    late = {side: Micros(TIMER_LATE_JIFFIES * p.tick_us) for side, p in resolved.items()}
    time_errors(matches, late, CallAnchors(sim, real))
    matches.sort(key=lambda m: (m.sim_t if m.sim_t is not None else m.real_t or 0,
                                m.real_t or 0))
    problems: list[str] = []
    notes: list[str] = []
    if unknown is not None:
        notes.append(f"the real trace has no captured segments ({unknown}): only ops are "
                     "compared; segments and stalls on the wire are unknown")
    _segment_verdicts(matches, problems, notes)
    stall_pairs = _pair_stalls(sim, real, matches, late) if real.segments else []
    problems += [f"stall: {p.note}" for p in stall_pairs if not p.ok]
    iters = _pair_iterations(sim, real)
    # An iteration spans several events whose (tolerated) errors add up, so with a capture
    # the per-event rule above is the judge and iteration differences are reported as notes;
    # without a capture the iterations are the only evidence and decide.
    _iteration_verdicts(iters, problems if not real.segments else notes)
    if len(iters) and any(it.sim_us is None or it.real_us is None for it in iters):
        problems.append("the model and the kernel completed different numbers of iterations")
    if sim.outcome != real.outcome:
        problems.append(f"outcome: model {sim.outcome} ({sim.message or 'ok'}), real "
                        f"{real.outcome} ({real.message or 'ok'})")
    notes += _run_notes(sim, real)
    host, host_problems = host_differences(real, resolved)
    problems += host_problems
    return Comparison(title=sim.title or real.title, matches=matches, stalls=stall_pairs,
                      iterations=iters, problems=problems, notes=notes,
                      sim_outcome=sim.outcome, real_outcome=real.outcome, host=host,
                      wire_unknown=unknown,
                      reasons=compare_reasons(sim, real, resolved_hz(resolved)))


def _match_segments(sim: Trace, real: Trace) -> list[Match]:
    """Every segment of both runs in a `Match`, per direction and kind of segment."""
    mss = sim.meta.get("mss") or real.meta.get("mss")
    gso_possible = real.meta.get("link", "loopback") == "loopback" or offloaded(real)
    matches: list[Match] = []
    for side in Side:
        by_class: dict[tuple[str, str], list[SegmentRecord]] = {}
        for which, trace in (("sim", sim), ("real", real)):
            for seg in trace.segments:
                if seg.src is side:
                    by_class.setdefault((which, flags_class(seg)), []).append(seg)
        matches += data_groups(side, by_class.get(("sim", "data"), []),
                                by_class.get(("real", "data"), []),
                                int(mss) if mss else None, gso_possible)
        for klass in ("SYN", "SYN-ACK", "FIN", "RST", "ACK"):
            sim_list = by_class.get(("sim", klass), [])
            real_list = by_class.get(("real", klass), [])
            if sim_list or real_list:
                matches += control_matches(side, klass, sim_list, real_list,
                                    int(mss) if mss else 1448)
    return matches


def _segment_verdicts(matches: list[Match], problems: list[str], notes: list[str]) -> None:
    """A segment beyond tolerance is a problem; an excused one (GSO, ACK thinning, a late
    timer) a note."""
    for m in matches:
        if not m.ok:
            where = m.sim_t if m.sim_t is not None else m.real_t
            problems.append(f"{arrow(m.side)} {m.klass} at {ms_text(where or 0)} ms: "
                            f"{m.note}")
        elif m.kind in ("gso", "ack-thinning", "timer-late"):
            where = m.real_t if m.real_t is not None else m.sim_t
            notes.append(f"{arrow(m.side)} at {ms_text(where or 0)} ms: {m.note}")


def _iteration_verdicts(iters: list[IterationPair], judged: list[str]) -> None:
    """The first five iterations beyond tolerance, and how many more, into ``judged``."""
    bad_iters = [it for it in iters if not it.ok]
    for it in bad_iters[:5]:
        sim_ms = "—" if it.sim_us is None else f"{ms_text(it.sim_us)} ms"
        real_ms = "—" if it.real_us is None else f"{ms_text(it.real_us)} ms"
        judged.append(f"iteration {it.index}: model {sim_ms}, real {real_ms} "
                      f"(beyond ±{ms_text(it.tol, 1)} ms for the whole iteration)")
    if len(bad_iters) > 5:
        judged.append(f"… and {len(bad_iters) - 5} more iterations beyond that")


def _run_notes(sim: Trace, real: Trace) -> list[str]:
    """What the runs record about themselves: the kernel's retransmissions, the real run's
    notes, and what the model borrowed from the real run (sleeps, ties, jiffy phase)."""
    notes: list[str] = []
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
    if sim.meta.get("path_latency_us") is not None:
        notes.append(f"the model's packets took {sim.meta['path_latency_us']} µs longer, as "
                     "the kernels' handshake RTTs (TCP_INFO) show the emulated path's did "
                     "(the TUN devices and the relay)")
    return notes
