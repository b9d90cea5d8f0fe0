"""Aligning the model's run with a real one: what is the real run's chance, not a rule.

Owns: what the model borrows from the real run it is compared with, each named in the
comparison's notes — the kernel's jiffy phase (`measured_jiffy_phase`,
`with_jiffy_phase`), the real sleeps' lengths (`with_measured_sleeps`,
`measured_sleep_runs`) and write/segment ties (a write within `WRITE_TIE_US` of a
segment's send lands on either side of it: `first_write_tie`); `aligned_model_run` runs
the model with all of them. The simulator's runner is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..model.config import LINUX
from ..model.events import Micros, Side
from ..scenario import Repeat, Sleep
from ..trace import ModelRunner, Outcome, SegmentRecord, Trace
from ..trace.summary import STALL_MIN
from ..trace.units import ms_text
from .hosts import profiles_of
from .verdict import compare

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


def with_jiffy_phase(scenario: Any, phase: int) -> Any:
    """``scenario`` with both sides' kernels ticking at ``phase`` (one machine, one clock)."""
    sides = {side.value: replace(scenario.side(side), profile=scenario.side(side).profile
                                 .with_overrides(jiffy_phase_us=phase)) for side in Side}
    return replace(scenario, **sides)

PATH_LATENCY_MIN_US = 20
"""An emulated path slower than the model's link by less than this per packet is left
alone (µs)."""

PATH_LATENCY_MAX_US = 2_000
"""At most this much per packet is added: more is no TUN relay's cost but a real host
that was busy, which the comparison should show, not absorb."""


def _handshake_rtts(trace: Trace) -> tuple[int, int] | None:
    """The client's and the server's handshake RTT (µs): SYN to SYN-ACK arriving, and
    SYN-ACK to the third segment arriving, or None when the trace lacks them."""
    syn = synack = third = None
    for s in trace.segments:
        if syn is None and s.src is Side.CLIENT and s.has_syn and not s.has_ack:
            syn = s
        elif synack is None and s.src is Side.SERVER and s.has_syn and s.has_ack:
            synack = s
        elif synack is not None and s.src is Side.CLIENT and not s.has_syn and s.has_ack:
            third = s
            break
    if (syn is None or synack is None or third is None or synack.arrive is None
            or third.arrive is None):
        return None
    return synack.arrive - syn.t, third.arrive - synack.t


def _kernel_handshake_rtts(real: Trace) -> tuple[int, int] | None:
    """The kernels' own RTT after the handshake (TCP_INFO tcpi_rtt: the SYN-ACK's sample
    on the client, read after connect; the third segment's on the server, after
    accept), or None when the run did not read it."""
    got: dict[Side, int] = {}
    for e in real.events:
        if e.kind == "tcp_info" and e.side not in got and e.data.get("rtt", 0) > 0:
            got[e.side] = e.data["rtt"]
    if len(got) < 2:
        return None
    return got[Side.CLIENT], got[Side.SERVER]


def measured_path_latency(real: Trace, sim: Trace) -> int | None:
    """How much longer each packet took on the real emulated path than on the model's
    link (µs), or None.

    The kernels' handshake RTTs (TCP_INFO) include what the scenario's link does not: the
    sending kernel's transmit to the TUN device, the relay reading it and writing it to
    the other device, about 50-120 µs a packet here (TCP_INFO after the handshake read
    997-1048 µs on the server where the 1 Mbit/s link's two packets take 896 µs, 5130 µs
    over 2 ms with 4896 µs). Each RTT is two packets; the mean excess of both sides per
    packet, when it is between `PATH_LATENCY_MIN_US` and `PATH_LATENCY_MAX_US`. A loss
    probe's timeout (2·SRTT + 2 ms, in whole jiffies) near a jiffy boundary takes one
    jiffy more or less with or without it (validate --random seeds 51 and 71)."""
    kernel, model = _kernel_handshake_rtts(real), _handshake_rtts(sim)
    if kernel is None or model is None:
        return None
    excess = (kernel[0] - model[0] + kernel[1] - model[1]) // 4
    return excess if PATH_LATENCY_MIN_US <= excess <= PATH_LATENCY_MAX_US else None


def with_path_latency(scenario: Any, extra_us: int) -> Any:
    """``scenario`` with every packet ``extra_us`` slower on its way (both sides' host
    latency, which the model adds to the link's delay)."""
    sides = {side.value: replace(scenario.side(side), profile=scenario.side(side).profile
                                 .with_overrides(host_latency_us=scenario.side(side).profile
                                                 .host_latency_us + extra_us))
             for side in Side}
    return replace(scenario, **sides)


def aligned_model_run(scenario: Any, real: Trace, run_sim: ModelRunner) -> Trace:
    """The model at the real run's jiffy phase (local runs) and with its measured sleeps:
    each ``sleep`` statement as long as the real ones took (median), or, where that
    median would still drift from the real run over the loop, each run of it as long as
    its real twin (``run_sim``'s ``sleeps``); over a local emulated link, with each
    packet as much slower as the real path was (`measured_path_latency`)."""
    scenario, slept = with_measured_sleeps(scenario, real)
    runs = measured_sleep_runs(real)
    phase = measured_jiffy_phase(real, scenario.client.profile.hz)
    extra: dict[str, Any] = {"sleeps": runs} if runs else {}
    local = not real.meta.get("remote")
    if phase is not None and local:
        scenario = with_jiffy_phase(scenario, phase)
    sim: Trace = run_sim(scenario, **extra)
    latency = (measured_path_latency(real, sim)
               if local and scenario.link.emulated and sim.outcome is Outcome.OK else None)
    if latency is not None:
        scenario = with_path_latency(scenario, latency)
        sim = run_sim(scenario, **extra)
    sim = _follow_write_ties(scenario, real, run_sim, sim, dict(runs))
    if phase is not None and local:
        sim.meta["jiffy_phase_us"] = phase
    if latency is not None:
        sim.meta["path_latency_us"] = latency
    for side, line in runs:
        key = f"{side.value}:{line}"
        slept[key] = slept.get(key, "as measured") + " (each run as long as the kernel's)"
    if slept:
        sim.meta["measured_sleeps"] = slept
    return sim

def _follow_write_ties(scenario: Any, real: Trace, run_sim: ModelRunner, sim: Trace,
                       runs: dict[tuple[Side, int], list[int]]) -> Trace:
    """While the runs disagree and the first place they split the bytes differently is a
    write that fell within `WRITE_TIE_US` of a segment's send on the kernel's side and the
    other side in the model (`first_write_tie`), run the model again with that write moved
    to the kernel's side: the sleep before it is made that much longer or shorter. The
    model still decides everything after; a split that is no tie stays a difference.
    Each tie followed is named in the trace's meta (``write_ties``), and so in the
    comparison's notes."""

    profiles = profiles_of(scenario)
    followed: list[str] = []
    seen: set[tuple[Side, int, bool]] = set()
    for _ in range(WRITE_TIE_ROUNDS):
        # the cheap test first: most runs split their bytes alike, and a full comparison
        # of a big run is not free
        tie = first_write_tie(sim, real)
        if tie is None or compare(sim, real, profiles=profiles).agree:
            break
        # A second tie on the same statement in the same direction is a pattern (the
        # model's timing off in one direction), not chance: left as a difference.
        pattern = (tie.side, tie.line, tie.shift > 0)
        if pattern in seen:
            break
        seen.add(pattern)
        moved = _moved_sleep(sim, tie.side, tie.line, tie.iteration, tie.loop, tie.shift)
        if moved is None:
            break
        key, spans = moved
        runs[key] = spans
        followed.append(tie.describe())
        sim = run_sim(scenario, sleeps=runs)
    if followed:
        sim.meta["write_ties"] = followed
    return sim

def _moved_sleep(sim: Trace, side: Side, line: int, iteration: tuple[int, ...], loop: int,
                 shift: int) -> tuple[tuple[Side, int], list[int]] | None:
    """Every run of the sleep statement just before the given write (as long as each took
    in ``sim``), the one before the write made ``shift`` µs longer; None when no sleep comes
    right before it or it cannot be that much shorter."""
    ops = [op for op in sim.ops if op.side is side]
    at = next((i for i, op in enumerate(ops) if op.op in ("write", "writev")
               and (op.line, op.iteration, op.loop) == (line, iteration, loop)), None)
    if not at or ops[at - 1].op != "sleep" or not ops[at - 1].line:
        return None
    sleep = ops[at - 1]
    same = [op for op in ops if op.op == "sleep" and op.line == sleep.line]
    spans = [op.end - op.start for op in same if op.end is not None]
    if len(spans) != len(same):
        return None
    index = next(i for i, op in enumerate(same) if op is sleep)
    if spans[index] + shift < 0:
        return None
    spans[index] += shift
    return (side, sleep.line), spans

SLEEP_DRIFT_MIN_US = 50
"""A sleep statement whose real runs took this much longer or shorter in all (the median
difference times how often it ran) is given its measured length in the model."""

CALL_GAP_MAX_US = 1000
"""The longest idle time between two of a side's calls, or the longest call, counted as
the executor's own overhead (tens of µs on this VM); a longer one is a call that blocked
or one the trace does not hold."""

_NON_BLOCKING = frozenset({"write", "writev", "set", "get"})

def _measured_sleeps(real: Trace) -> dict[tuple[Side, int], list[int]]:
    """Per (side, line) of a ``sleep``, how long each of its real runs held the side up
    beyond what the model charges: the sleep, the executor's idle time just before and
    after it, and how much longer than ``syscall_us`` the non-blocking call before it took
    (the model's calls follow back to back, a real executor's ~40 µs apart)."""

    measured: dict[tuple[Side, int], list[int]] = {}
    for side in Side:
        ops = [op for op in real.ops if op.side is side]
        for i, op in enumerate(ops):
            if op.op != "sleep" or op.end is None or not op.line:
                continue
            took = op.end - op.start
            prev = ops[i - 1] if i else None
            if (prev is not None and prev.end is not None
                    and 0 <= op.start - prev.end <= CALL_GAP_MAX_US):
                took += op.start - prev.end
                call = prev.end - prev.start
                if prev.op in _NON_BLOCKING and 0 <= call <= CALL_GAP_MAX_US:
                    took += max(0, call - LINUX.syscall_us)
            after = ops[i + 1].start if i + 1 < len(ops) else None
            if after is not None and 0 <= after - op.end <= CALL_GAP_MAX_US:
                took += after - op.end
            measured.setdefault((side, op.line), []).append(took)
    return measured

def measured_sleep_runs(real: Trace) -> dict[tuple[Side, int], list[int]]:
    """The sleeps whose every run the model should follow: those where the median run
    length, repeated, would drift `SLEEP_DRIFT_MIN_US` or more from the real run's total
    (why-nagle-exists: 100 × ``write 1; sleep 2ms`` took 2.06-2.24 ms a run, and the bytes
    Nagle bundles depend on where each write falls against the returning ACK)."""
    out = {}
    for key, spans in _measured_sleeps(real).items():
        median = sorted(spans)[len(spans) // 2]
        if abs(sum(spans) - median * len(spans)) >= SLEEP_DRIFT_MIN_US:
            out[key] = spans
    return out

def with_measured_sleeps(scenario: Any, real: Trace) -> tuple[Any, dict[str, str]]:
    """``scenario`` with each ``sleep`` statement as long as the real run's sleeps of that
    statement took (median, per side and line, `_measured_sleeps`), where the drift adds
    up to `SLEEP_DRIFT_MIN_US` or more over the statement's runs. A real sleep ends a
    little late, more so under load (~0.5 ms per iteration seen on this VM), and the model's
    sleeps are exact: without this, a long loop of sleeps drifts apart and one late write
    fails the comparison.
    Returns (scenario, "side:line" -> "declared → measured" for those changed)."""


    measured = _measured_sleeps(real)
    changed: dict[str, str] = {}

    def walk(side: Side, body: tuple[Any, ...]) -> tuple[Any, ...]:
        out = []
        for stmt in body:
            if isinstance(stmt, Repeat):
                stmt = replace(stmt, body=walk(side, stmt.body))
            elif isinstance(stmt, Sleep) and (side, stmt.line) in measured:
                values = sorted(measured[(side, stmt.line)])
                median = values[len(values) // 2]
                if abs(median - stmt.duration) * len(values) >= SLEEP_DRIFT_MIN_US:
                    changed[f"{side.value}:{stmt.line}"] = (f"{stmt.duration} µs → "
                                                           f"{median} µs")
                    stmt = replace(stmt, duration=Micros(median))
            out.append(stmt)
        return tuple(out)

    sides = {}
    for side in Side:
        spec = scenario.side(side)
        script = walk(side, spec.script)
        if script != spec.script:
            sides[side.value] = replace(spec, script=script)
    return (replace(scenario, **sides) if sides else scenario), changed
