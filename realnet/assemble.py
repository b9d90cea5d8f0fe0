"""A real run's trace: captured packets and the sides' records made one `Trace`.

Owns: the meta every real trace starts with (`base_meta`: the scenario's, the kernel, the
hosts' facts, what this machine cannot reproduce), captured packets as segments with send
and arrival times (`Seg`, `segments_from_lo`, `segments_from_tuns`), and `build_trace`:
times relative to the client's SYN, sequence numbers relative to each side's ISN, ops, and
TCP_INFO snapshots as ``tcp_info`` events. Must not import simpy, textual or rich.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

from nagle_sim.model.events import Micros, Side
from nagle_sim.scenario import (
    HANDSHAKE_OPS,
    Scenario,
    clip,
    real_run_caveats,
    trace_meta,
)
from nagle_sim.trace import EventRecord, OpRecord, SegmentRecord, Source, Trace
from realnet.host import Progress
from realnet.records import SideLog
from realnet.supervise import RunEnd

TCP_INFO_KIND = "tcp_info"
"""The ``kind`` of a real trace's TCP_INFO snapshot events."""


def base_meta(scenario: Scenario, *, remote: bool = False) -> dict[str, Any]:
    meta = trace_meta(scenario, kernel=platform.release())
    from realnet import hostfacts  # issue 18: every real trace records its hosts' facts
    meta["host_facts"] = hostfacts.local_facts(scenario)
    notes = real_run_caveats(scenario, remote=remote)
    if notes:
        meta["notes"] = notes
    return meta



@dataclass(slots=True)
class Seg:
    t_ns: int            # perf_counter_ns
    src: Side
    seq: int
    ack: int
    length: int
    flags: str
    window: int
    arrive_ns: int | None = None


def _side_of(p: Any, port: int) -> Side:
    return Side.SERVER if p.sport == port else Side.CLIENT


def segments_from_lo(packets: list[Any], offset_ns: int, port: int) -> list[Seg]:
    """Loopback: every segment once (outgoing copy); it arrives when it is sent."""
    out = []
    for p in packets:
        t = p.t_ns - offset_ns
        out.append(Seg(t, _side_of(p, port), p.seq, p.ack, p.payload_len, p.flags, p.window,
                        arrive_ns=t))
    return out


def segments_from_tuns(packets: dict[Side, list[Any]], offset: dict[Side, int],
                       port: int) -> list[Seg]:
    """Emulated link: a side's outgoing packets on its own TUN give send times; the same
    packets arriving on the peer's TUN (relay injection) give arrival times."""
    out: list[Seg] = []
    arrivals: dict[Side, dict[tuple[Any, ...], list[int]]] = {s: {} for s in Side}
    for side in Side:
        for p in packets.get(side, []):
            if not p.outgoing:
                key = (p.seq, p.ack, p.flags, p.payload_len)
                arrivals[_side_of(p, port)].setdefault(key, []).append(p.t_ns - offset[side])
    for side in Side:
        for p in packets.get(side, []):
            if p.outgoing and _side_of(p, port) is side:
                key = (p.seq, p.ack, p.flags, p.payload_len)
                queue = arrivals[side].get(key)
                arrive = queue.pop(0) if queue else None
                out.append(Seg(p.t_ns - offset[side], side, p.seq, p.ack, p.payload_len,
                                p.flags, p.window, arrive_ns=arrive))
    out.sort(key=lambda s: s.t_ns)
    return out



def trace_origin_ns(logs: dict[Side, SideLog], segs: list[Seg]) -> int:
    """A real trace's time 0 on CLOCK_MONOTONIC (perf_counter_ns): the client's SYN
    leaving, else its first call, else any side's first call."""
    syn = next((s for s in segs if s.src is Side.CLIENT and "S" in s.flags
                and "A" not in s.flags), None)
    client_ops = logs[Side.CLIENT].ops
    if syn is not None:
        return syn.t_ns
    if client_ops:
        return client_ops[0].start_ns
    return min((o.start_ns for log in logs.values() for o in log.ops), default=0)


def build_trace(scenario: Scenario, logs: dict[Side, SideLog], segs: list[Seg],
                meta: dict[str, Any], outcome: RunEnd) -> Trace:
    """Relative times (µs from the client's SYN), relative seq/ack, ops, TCP_INFO events."""
    t0 = trace_origin_ns(logs, segs)

    def rel(ns: int | None) -> Micros | None:
        return None if ns is None else Micros(max(0, round((ns - t0) / 1000)))

    isn: dict[Side, int] = {}
    for s in segs:
        if "S" in s.flags and s.src not in isn:
            isn[s.src] = s.seq
    trace = Trace(source=Source.REALNET, title=scenario.title, meta=meta,
                  outcome=outcome.outcome, message=outcome.message)
    for s in segs:
        mine, theirs = isn.get(s.src, 0), isn.get(s.src.peer, 0)
        trace.segments.append(SegmentRecord(
            t=rel(s.t_ns) or Micros(0), src=s.src, seq=(s.seq - mine) % 2**32,
            ack=(s.ack - theirs) % 2**32 if "A" in s.flags else 0, length=s.length,
            flags=s.flags, window=s.window, arrive=rel(s.arrive_ns)))
    ops: list[OpRecord] = []
    for side, log in logs.items():
        for o in log.ops:
            start = Micros(0) if o.op in HANDSHAKE_OPS else rel(o.start_ns)
            ops.append(OpRecord(side=side, op=o.op, arg=o.arg, start=start or Micros(0),
                                end=rel(o.end_ns), line=o.line, iteration=o.iteration,
                                loop=o.loop, result=o.result))
        for info in log.infos:
            op = log.ops[info.op_index] if 0 <= info.op_index < len(log.ops) else None
            after = f"{op.op} {clip(op.arg)}".strip() if op else "?"
            trace.events.append(EventRecord(
                t=rel(info.t_ns) or Micros(0), side=side, kind=TCP_INFO_KIND, code="TCP_INFO",
                reason="kernel TCP_INFO snapshot", detail=f"after {after}", data=info.data))
    ops.sort(key=lambda o: (o.start, o.op not in HANDSHAKE_OPS))
    trace.ops = ops
    trace.events.sort(key=lambda e: e.t)
    retrans = {}
    for side, log in logs.items():
        if log.infos:
            retrans[side.value] = log.infos[-1].data.get("total_retrans", 0)
    meta["retransmissions"] = retrans
    rests = {side.value: log.rt_rests for side, log in logs.items() if log.rt_rests}
    if rests:
        meta["rt_rests"] = rests
    refused = [side.value for side, log in logs.items() if log.rt_refused]
    if refused:
        meta["sched_refused"] = refused
        meta.setdefault("notes", []).append(
            f"SCHED_FIFO was refused to the {' and '.join(refused)} side (a cgroup without "
            "real-time runtime?): it ran at normal priority, so its wake-ups may wait a tick")
    # TCP_INFO cannot be read after close(); the capture sees later ones (e.g. a FIN's TLP).
    seen: dict[str, int] = {}
    for side in Side:
        high, count = -1, 0
        for seg in trace.segments:
            if seg.src is side and (seg.length or "F" in seg.flags):
                end = seg.seq + seg.length + (1 if "F" in seg.flags else 0)
                if end <= high:
                    count += 1
                high = max(high, end)
        if count:
            seen[side.value] = count
    if seen:
        meta["retransmitted_segments"] = seen
    return trace


def report_retransmissions(trace: Trace, say: Progress) -> None:
    retrans = trace.meta.get("retransmissions", {})
    seen = trace.meta.get("retransmitted_segments", {})
    if any(retrans.values()) or seen:
        counts = {k: max(retrans.get(k, 0), seen.get(k, 0)) for k in {*retrans, *seen}}
        say("realnet: the kernel retransmitted ("
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v)
            + " segments, TCP_INFO total_retrans or seen on the wire)")
