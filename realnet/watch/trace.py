"""Watched connections as traces: the kernel's own decisions on a ladder.

Owns: turning the decision engine's sockets (`realnet.watch.decide.Conn`) into the
project's `Trace` — one per connection, both ends when both were watched — for
``nagle-sim watch -o`` (`connection_traces`), and the kernel's decisions about one
connection as trace events marked ``by="kernel"`` (`kernel_events`), which real runs add
beside their capture. A decision keeps its model `Kind` and `Reason` code (one vocabulary:
docs/watch.md); times are µs from the client's SYN, as in every trace.

What a watched socket cannot show is said in the trace's meta, not guessed: a server's
SYN-ACK leaves from a request socket that is not watched yet, and a segment arriving at an
unwatched peer is seen only when the watched end sent it.

Standard library, the trace package and the model's vocabulary only (realnet's import
contract).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from nagle_sim.model.events import Micros, Side
from nagle_sim.trace import EventRecord, SegmentRecord, Trace

from . import raw
from .decide import SEGMENT, Conn, Decision, Engine, Stall, WireSeg

KERNEL: Final = "kernel"
"""The ``by`` of an event the kernel was observed deciding (docs/trace.md)."""

_FLAG_LETTERS: Final = ((raw.TH_SYN, "S"), (raw.TH_FIN, "F"), (raw.TH_RST, "R"),
                        (raw.TH_PSH, "P"), (raw.TH_ACK, "A"))


def flag_text(flags: int) -> str:
    """TCP flags as a trace writes them (``S F R P A``, in that order)."""
    return "".join(letter for bit, letter in _FLAG_LETTERS if flags & bit)


def side_of(c: Conn) -> Side:
    """The side a watched socket plays: the server accepted it, the client connected."""
    return Side.SERVER if c.role == "server" else Side.CLIENT


def kernel_events(conns: dict[Side, Conn], t0_us: int,
                  decisions: Iterable[Decision] | None = None) -> list[EventRecord]:
    """The kernel's decisions about the sockets in ``conns`` as trace events, times from
    ``t0_us`` (on the engine's clock). ``decisions``: these instead of the ones each
    `Conn` kept."""
    by_number = {c.number: side for side, c in conns.items()}
    if decisions is None:
        source: list[Decision] = [d for c in conns.values() for d in c.decisions]
    else:
        source = [d for d in decisions if d.sock in by_number]
    out: list[EventRecord] = []
    for d in source:
        side = by_number[d.sock]
        data = dict(d.data)
        if d.kind == "hold":
            data["length"] = data.get("queued", 0)     # the ladder's "hold N B" label
        out.append(EventRecord(
            t=Micros(max(0, d.t_us - t0_us)), side=side, kind=d.kind, code=d.code,
            reason=d.reason, detail=d.detail, timer=d.timer,
            deadline=None if d.deadline_us is None else Micros(max(0, d.deadline_us - t0_us)),
            data=data, by=KERNEL))
    out.sort(key=lambda e: e.t)
    return out


def _first(wire: Sequence[WireSeg], pred: Any) -> WireSeg | None:
    return next((w for w in wire if pred(w)), None)


def _isns(client: Conn | None, server: Conn | None) -> tuple[int | None, int | None, bool]:
    """Each side's initial sequence number, and whether both were seen exactly (from the
    client's SYN and the handshake's last ACK) rather than taken from the first segment
    seen."""
    c_out = [w for w in client.wire if w.out] if client is not None else []
    s_out = [w for w in server.wire if w.out] if server is not None else []
    c_in = [w for w in client.wire if not w.out] if client is not None else []
    s_in = [w for w in server.wire if not w.out] if server is not None else []
    syn = _first(c_out, lambda w: w.flags & raw.TH_SYN and not w.flags & raw.TH_ACK)
    exact = syn is not None
    isn_c = syn.seq if syn is not None else None
    isn_s = None
    syn_ack = _first(s_out, lambda w: w.flags & raw.TH_SYN and w.flags & raw.TH_ACK)
    if syn_ack is not None:
        isn_s = syn_ack.seq
    elif syn is not None:
        hs = _first(c_out, lambda w: w.flags & raw.TH_ACK and not w.flags & raw.TH_SYN)
        if hs is not None:
            isn_s = (hs.ack - 1) & 0xFFFFFFFF
    if isn_c is None:
        first = _first(c_out or s_in, lambda w: True)
        isn_c = (first.seq - 1) & 0xFFFFFFFF if first is not None else None
        exact = False
    if isn_s is None:
        first = _first(s_out or c_in, lambda w: True)
        isn_s = (first.seq - 1) & 0xFFFFFFFF if first is not None else None
        exact = False
    return isn_c, isn_s, exact


def pairs(engine: Engine) -> list[dict[Side, Conn]]:
    """The watched connections: both ends joined when both were watched, in the order
    they were first seen. Listening sockets and sockets that never connected are left
    out."""
    out: list[dict[Side, Conn]] = []
    done: set[int] = set()
    for c in engine.all_conns:
        if c.number in done or not (c.sport and c.dport):
            continue
        done.add(c.number)
        pair = {side_of(c): c}
        peer = engine.peer(c)
        if peer is not None and peer.number not in done and side_of(peer) not in pair:
            done.add(peer.number)
            pair[side_of(peer)] = peer
        out.append(pair)
    return out


def _segments(pair: dict[Side, Conn], t0_us: int, isn: dict[Side, int | None],
              why: dict[tuple[int, int], Decision]) -> list[SegmentRecord]:
    out: list[SegmentRecord] = []
    for side in Side:
        c = pair.get(side)
        if c is not None:
            wires = [(w, side) for w in c.wire if w.out]
        else:
            peer = pair.get(side.peer)
            # the peer is not watched: its segments as the watched end received them
            wires = [(w, side) for w in peer.wire if not w.out] if peer is not None else []
        mine, theirs = isn.get(side), isn.get(side.peer)
        for w, src in wires:
            d = why.get((c.number, w.t_us)) if c is not None else None
            flags = flag_text(w.flags)
            out.append(SegmentRecord(
                t=Micros(max(0, w.t_us - t0_us)), src=src,
                seq=(w.seq - mine) & 0xFFFFFFFF if mine is not None else w.seq,
                ack=((w.ack - theirs) & 0xFFFFFFFF if theirs is not None else w.ack)
                if "A" in flags else 0,
                length=w.length, flags=flags, window=w.win,
                why=d.reason if d is not None else "", code=d.code if d is not None else ""))
    out.sort(key=lambda s: s.t)
    return out


def connection_traces(engine: Engine, *, host: dict[str, Any],
                      stalls: Sequence[Stall] = (), notes: Sequence[str] = (),
                      counters: dict[str, int] | None = None,
                      command: Sequence[str] | None = None) -> list[Trace]:
    """One trace per watched connection: its segments as the kernel sent them (the
    engine must have kept the wire) and every decision of its ends, ``by="kernel"``."""
    traces: list[Trace] = []
    for pair in pairs(engine):
        client, server = pair.get(Side.CLIENT), pair.get(Side.SERVER)
        isn_c, isn_s, exact = _isns(client, server)
        isn = {Side.CLIENT: isn_c, Side.SERVER: isn_s}
        syn = _first([w for w in client.wire if w.out] if client is not None else [],
                     lambda w: w.flags & raw.TH_SYN and not w.flags & raw.TH_ACK)
        times = [w.t_us for c in pair.values() for w in c.wire] + \
                [d.t_us for c in pair.values() for d in c.decisions]
        t0 = syn.t_us if syn is not None else min(times, default=0)
        why = {(c.number, d.t_us): d for c in pair.values() for d in c.decisions
               if d.kind in (SEGMENT, "ack_now") and d.code}
        ends = {side.value: f"{c.local}:{c.sport}" for side, c in pair.items()}
        one = next(iter(pair.values()))
        name = one.name if side_of(one) is Side.CLIENT else \
            f"{one.remote}:{one.dport} → {one.local}:{one.sport}"
        conn_names = {c.name for c in pair.values()}
        meta: dict[str, Any] = {
            "recorded_by": "nagle-sim watch (the kernel's decisions, docs/watch.md)",
            "kernel": host.get("kernel", ""), "hz": host.get("hz", 0),
            "connection": name, "watched": sorted(ends),
            "processes": sorted({c.comm for c in pair.values() if c.comm}),
            "stalls": [{"side": s.side, "start_ms": round((s.start_us - t0) / 1000, 3),
                        "duration_ms": round((s.end_us - s.start_us) / 1000, 3),
                        "cause": s.cause, "text": s.text, "fix": s.fix}
                       for s in stalls if s.conn in conn_names],
            "notes": [n for n in notes if any(cn in n for cn in conn_names)],
        }
        if command:
            meta["command"] = " ".join(command)
        if counters is not None:
            meta["watch_counters"] = {**counters, "wire_dropped": engine.wire_dropped}
        caveats = []
        if server is not None:
            caveats.append("the server's SYN-ACK leaves from a request socket, before the "
                           "connection is watched: it is not on this ladder")
        if len(pair) == 1:
            caveats.append(f"only the {next(iter(pair)).value} was watched: the "
                           f"{next(iter(pair)).peer.value}'s segments are shown when they "
                           "arrived, and its decisions are not known")
        if not exact:
            caveats.append("sequence numbers are relative to the first segment seen, not "
                           "to the SYN (the watch began after the connection did)")
        meta["caveats"] = caveats
        trace = Trace(source="realnet", title=f"watch: {name}", meta=meta,
                      segments=_segments(pair, t0, isn, why),
                      events=kernel_events(pair, t0))
        traces.append(trace)
    return traces
