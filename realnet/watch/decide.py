"""The kernel's records worded as decisions, holds and stalls, in the project's vocabulary.

Owns: turning raw records (realnet.watch.raw) into `Decision`s — each a model `Kind` and
`Reason` (nagle_sim.model.events) with the specifics that decided it — and, per socket,
the `Hold`s (bytes a send left queued, why, what released them) and the `Stall`s (holds of
10 ms or more) named with explain's cause words (``nagle``, ``delayed_ack``, ``cork``,
``msg_more``, ``cwnd``, ``receiver``, ``pacing``, ``link``; docs/watch.md "One
vocabulary" gives the mapping), the side kept waiting, the fix and the state that decided
it. Two watched sockets that are the two ends of one connection are joined, so a client's
hold names the server's delayed-ACK timer that released it.

What is observed and what is inferred is kept apart: a reason read from the kernel's own
state (nonagle, snd_sml, icsk_ack, icsk_pending, the context an ACK left in) is
`observed`; one chosen by elimination (autocork or pacing) says so in its detail.

Standard library and nagle_sim.model.events only (realnet's import contract): explain's
cause words are plain strings here, checked against explain's table by
tests/watch/test_vocabulary.py.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from nagle_sim.model.events import Kind, Reason

from . import raw
from .raw import RawEvent

STALL_MIN_US: Final = 10_000
"""A hold this long is a stall (explain's and summary's threshold)."""
_RECENT: Final = 64
"""Pure ACKs and timer arms kept per socket for joining a hold to the peer's decision."""
MAX_STALLS: Final = 10_000
"""Stalls kept per socket (more are counted in `Conn.stalls_dropped`)."""
MAX_QUICK: Final = 256
"""Quick ACKs kept per socket for the notes (the first ones are the ones that matter)."""
MAX_WIRE: Final = 2_000_000
"""Segments kept for trace files (all sockets together); more are counted in
`Engine.wire_dropped`."""
MAX_CONNS: Final = 10_000
"""Sockets kept; past it closed sockets without stalls are forgotten (a long watch of a
busy server stays bounded; notes about forgotten sockets are lost)."""

SEGMENT: Final = "segment"
"""Kind of a decision about a segment sent (its Reason is the segment's `why`)."""

CAUSE_OF: Final[dict[Reason, str]] = {
    Reason.NAGLE_HOLD: "nagle", Reason.NAGLE_HOLD_CLASSIC: "nagle",
    Reason.CORK_HOLD: "cork", Reason.MORE_HOLD: "msg_more",
    Reason.CWND_HOLD: "cwnd", Reason.RWND_HOLD: "receiver",
    Reason.PACING_HOLD: "pacing", Reason.AUTOCORK_HOLD: "pacing",
    Reason.DELACK_FIRED: "delayed_ack",
}
"""A hold's (or a release's) Reason → explain's cause word (docs/explain.md): the model's
link, `nagle_sim.explain.reasons` (``HOLD_CAUSE``, ``RELEASE_CAUSE``), on every reason both
name (tests/test_architecture.py holds them equal) but one. There autocork is
``NOT_A_CAUSE``: the model's autocork hold is the kernel's (``tcp_should_autocork``), which
waits only until the earlier packet leaves the device queue and its TX completion frees it
(``tcp_wfree`` → the TSQ handler pushes), microseconds. Watch's AUTOCORK_HOLD is inferred
("autocork or pacing": the tracepoints cannot tell the two apart) and becomes a stall only
past ``STALL_MIN_US`` (10 ms); a wait that long is not autocork's own but what keeps the
earlier packet queued — pacing — so the stall is named ``pacing``."""


def _addr(family: int, data: bytes) -> str:
    if family == raw.AF_INET6:
        a = ipaddress.IPv6Address(data[:16])
        return str(a.ipv4_mapped or a) if a.ipv4_mapped else f"[{a}]"
    return str(ipaddress.IPv4Address(data[:4]))


@dataclass(slots=True)
class Decision:
    """One decision of the kernel about one socket."""

    t_us: int
    conn: str
    side: str
    kind: str                  # a model Kind value, or "segment"
    code: str                  # a Reason name ("" when none fits)
    detail: str
    sock: int = 0              # the socket's number in this session (stable; conn's
                               # addresses fill in as the connection forms)
    timer: str | None = None
    deadline_us: int | None = None
    data: dict[str, int] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        member = Reason.__members__.get(self.code)
        return member.value if member is not None else ""

    def text(self) -> str:
        head = f"{self.t_us / 1000:10.3f} ms  {self.side:<6} {self.kind:<12}"
        sentence = self.reason
        if sentence and self.detail:
            return f"{head} {sentence} ({self.detail})"
        return f"{head} {sentence or self.detail}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "decision", "t_ms": round(self.t_us / 1000, 3),
                               "sock": self.sock, "conn": self.conn, "side": self.side,
                               "kind": self.kind,
                               "code": self.code, "reason": self.reason,
                               "detail": self.detail}
        if self.timer is not None:
            out["timer"] = self.timer
        if self.deadline_us is not None:
            out["deadline_ms"] = round(self.deadline_us / 1000, 3)
        if self.data:
            out["data"] = self.data
        return out


@dataclass(slots=True)
class Hold:
    """Bytes a send left queued, from that send until the last of them left."""

    conn: str
    side: str
    start_us: int
    reason: Reason
    evidence: str
    bytes: int
    state: dict[str, int]
    end_us: int | None = None
    released_by: Reason | None = None
    release_detail: str = ""
    peer: list[Decision] = field(default_factory=list)
    """The peer's decisions that released it (its ACK, the timer behind it)."""

    @property
    def duration_us(self) -> int:
        return (self.end_us if self.end_us is not None else self.start_us) - self.start_us


@dataclass(slots=True)
class Stall:
    """A hold of 10 ms or more, named."""

    conn: str
    side: str                  # the side kept waiting (the one holding data)
    start_us: int
    end_us: int
    causes: list[str]
    text: str
    fix: str
    state: dict[str, int]
    evidence: list[Decision] = field(default_factory=list)

    @property
    def cause(self) -> str:
        return "+".join(self.causes)

    def to_json(self) -> dict[str, Any]:
        return {"type": "stall", "conn": self.conn, "side": self.side,
                "start_ms": round(self.start_us / 1000, 3),
                "duration_ms": round((self.end_us - self.start_us) / 1000, 3),
                "causes": self.causes, "cause": self.cause, "text": self.text,
                "fix": self.fix, "state": self.state,
                "evidence": [d.to_json() for d in self.evidence]}


@dataclass(slots=True, frozen=True)
class WireSeg:
    """A segment a watched socket sent (``out``) or received, as the kernel saw it: at the
    device (net_dev_start_xmit) or on arrival (tcp_probe, established sockets only)."""

    t_us: int
    out: bool
    seq: int
    ack: int
    length: int
    flags: int
    win: int


@dataclass(slots=True)
class Conn:
    """One watched socket."""

    sk: int
    number: int = 0
    family: int = 0
    local: str = "?"
    remote: str = "?"
    sport: int = 0
    dport: int = 0
    owner: int = 0
    comm: str = ""
    role: str = "?"
    hold: Hold | None = None
    hold_count: int = 0
    stalls: list[Stall] = field(default_factory=list)
    stalls_dropped: int = 0
    last_in: RawEvent | None = None
    last_write_fire: RawEvent | None = None
    acks: deque[tuple[RawEvent, Decision]] = field(
        default_factory=lambda: deque(maxlen=_RECENT))
    delack_arms: deque[Decision] = field(default_factory=lambda: deque(maxlen=_RECENT))
    quick_acks: list[Decision] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    """Every decision about this socket, kept only when the engine keeps them (trace
    files, real runs)."""
    wire: list[WireSeg] = field(default_factory=list)
    """Its segments, kept only when the engine keeps the wire (`Engine(wire=True)`)."""
    closed: bool = False
    in_sockopt: Decision | None = None
    """A ping-pong entry seen inside a setsockopt whose option its record will say."""
    probe_seen: bool = False
    """The probe timer now pending was reported armed (its timer_start, or inferred from
    a send's state: `Engine._unseen_probe_arm`)."""

    @property
    def name(self) -> str:
        return f"{self.local}:{self.sport} → {self.remote}:{self.dport}"

    @property
    def side(self) -> str:
        return self.role if self.role != "?" else ""


def _state(e: RawEvent) -> dict[str, int]:
    """The state that decides Nagle, cork and delayed ACKs, as the record has it."""
    return {"queued": e.queued, "in_flight": e.in_flight, "packets_out": e.packets_out,
            "sml_unacked": e.sml_unacked, "nonagle": e.nonagle, "mss": e.mss_cache,
            "cwnd": e.snd_cwnd, "snd_wnd": e.snd_wnd, "quick": e.quick,
            "pingpong": e.pingpong, "ato_j": e.ato, "ack_pending": e.ack_pending,
            "srtt_us": e.srtt_us}


class Engine:
    """Feed records in order (`feed`); read decisions as they come and the per-socket
    holds and stalls at any time (`stalls`, `notes`)."""

    def __init__(self, hz: int = 250, t0_ns: int | None = None, *, wire: bool = False,
                 keep: bool = False) -> None:
        """``wire``: the records include every segment (`Config.segments`), kept per
        socket for a trace file; ``keep``: keep every decision per socket
        (`Conn.decisions`)."""
        if not 10 <= hz <= 10_000:
            raise ValueError(f"HZ {hz}: not a kernel tick rate")
        self.hz = hz
        self.t0_ns = t0_ns
        self.wire = wire
        self.keep = keep
        self.wire_kept = 0
        self.wire_dropped = 0
        self.fresh_stalls: list[Stall] = []
        """Stalls named since the caller last emptied this list (a live view shows them
        as they end; `stalls` has them all)."""
        self.conns: dict[int, Conn] = {}
        self.by_tuple: dict[tuple[str, int, str, int], Conn] = {}
        self.all_conns: list[Conn] = []
        self.records = 0
        self._numbered = 0

    # -- time ------------------------------------------------------------------------------
    def us(self, e: RawEvent) -> int:
        if self.t0_ns is None:
            self.t0_ns = e.ts_ns
        return (e.ts_ns - self.t0_ns) // 1000

    def j_us(self, jiffies: int) -> int:
        return jiffies * 1_000_000 // self.hz

    def j_ms(self, jiffies: int) -> str:
        return f"{jiffies * 1000 / self.hz:.0f} ms"

    # -- sockets -----------------------------------------------------------------------------
    def _conn(self, e: RawEvent) -> Conn:
        c = self.conns.get(e.sk)
        if c is None or c.closed:
            self._numbered += 1
            c = Conn(sk=e.sk, number=self._numbered)
            self.conns[e.sk] = c
            self.all_conns.append(c)
            if len(self.all_conns) > MAX_CONNS:
                self._prune()
        return c

    def _prune(self) -> None:
        keep: list[Conn] = []
        for c in self.all_conns:
            if c.closed and not c.stalls:
                key = (c.local, c.sport, c.remote, c.dport)
                if self.by_tuple.get(key) is c:
                    del self.by_tuple[key]
                if self.conns.get(c.sk) is c:
                    del self.conns[c.sk]
            else:
                keep.append(c)
        self.all_conns = keep

    def _addresses(self, c: Conn, e: RawEvent) -> None:
        # a closing socket has given its port back (inet_put_port): keep the old name
        if not e.family or (c.sport and not e.sport):
            return
        c.family = e.family
        c.local, c.remote = _addr(e.family, e.saddr), _addr(e.family, e.daddr)
        c.sport, c.dport = e.sport, e.dport
        if c.sport and c.dport:
            self.by_tuple[(c.local, c.sport, c.remote, c.dport)] = c

    def peer(self, c: Conn) -> Conn | None:
        p = self.by_tuple.get((c.remote, c.dport, c.local, c.sport))
        return p if p is not None and p is not c else None

    # -- the records ---------------------------------------------------------------------------
    def feed(self, e: RawEvent) -> list[Decision]:
        self.records += 1
        handler = _HANDLERS.get(e.type)
        if handler is None:
            return []
        out = handler(self, e)
        if e.icsk_pending != raw.ICSK_TIME_PROBE0 or e.type == raw.OUT and e.len:
            # no probe pending, or data leaving (the RTO or loss probe replaces it): the
            # next PROBE0 pending is a new arm
            known = self.conns.get(e.sk)
            if known is not None:
                known.probe_seen = False
        if self.keep and out:
            c = self.conns.get(e.sk)
            if c is not None:
                c.decisions.extend(out)
        return out

    def _keep_wire(self, c: Conn, e: RawEvent, out: bool) -> None:
        if self.wire_kept >= MAX_WIRE:
            self.wire_dropped += 1
            return
        self.wire_kept += 1
        c.wire.append(WireSeg(self.us(e), out, e.seq, e.ack, e.len, e.tcpflags, e.win))

    def _decision(self, c: Conn, e: RawEvent, kind: Kind | str, reason: Reason | None,
                  detail: str, timer: str | None = None, deadline_us: int | None = None,
                  data: dict[str, int] | None = None) -> Decision:
        return Decision(t_us=self.us(e), conn=c.name, side=c.side, sock=c.number,
                        kind=kind.value if isinstance(kind, Kind) else kind,
                        code=reason.name if reason is not None else "", detail=detail,
                        timer=timer, deadline_us=deadline_us,
                        data=data if data is not None else _state(e))

    def _on_sock(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        self._addresses(c, e)
        c.owner = e.a
        c.comm = e.command
        if e.state == raw.TCP_SYN_SENT:
            c.role = "client"
        return []

    def _on_state(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        self._addresses(c, e)
        old, new = e.a, e.b
        if new == raw.TCP_SYN_SENT:
            c.role = "client"
        elif new == raw.TCP_SYN_RECV or (old == raw.TCP_SYN_RECV and c.role == "?"):
            c.role = "server"
        name = raw.TCP_STATES
        words = f"{name[old] if old < len(name) else old} → {name[new] if new < len(name) else new}"
        d = self._decision(c, e, Kind.STATE, Reason.STATE_CHANGE, words)
        if new == raw.TCP_CLOSE:
            self._close(c, e)
        return [d]

    def _close(self, c: Conn, e: RawEvent) -> None:
        if c.hold is not None:
            c.hold.end_us = self.us(e)
            c.hold.released_by = Reason.CLOSE_PUSH
            self._finish_hold(c, c.hold)
        c.closed = True

    def _hold_reason(self, e: RawEvent) -> tuple[Reason, str, bool]:
        """Why a send left bytes queued: (reason, evidence, observed)."""
        q, mss = e.queued, e.mss_cache or 1
        partial = q < mss
        if e.b & raw.MSG_MORE and partial:
            return Reason.MORE_HOLD, f"the send carried MSG_MORE; {q} B queued", True
        if e.nonagle & raw.TCP_NAGLE_CORK and partial:
            return Reason.CORK_HOLD, f"TCP_CORK is set (nonagle {e.nonagle}); {q} B queued", True
        if e.packets_out >= e.snd_cwnd > 0:
            return (Reason.CWND_HOLD, f"{e.packets_out} packets in flight = cwnd "
                    f"{e.snd_cwnd}; {q} B queued", True)
        if e.snd_wnd and e.in_flight + min(q, mss) > e.snd_wnd:
            return (Reason.RWND_HOLD, f"{e.in_flight} B in flight, peer window "
                    f"{e.snd_wnd} B; {q} B queued", True)
        if partial and not e.nonagle & raw.TCP_NAGLE_OFF and e.packets_out and \
                e.minshall_unacked:
            return (Reason.NAGLE_HOLD, f"{q} B queued; an earlier small segment is "
                    f"unACKed: snd_sml − snd_una = {e.sml_unacked} B, {e.packets_out} "
                    f"packet(s) in flight", True)
        if partial:
            return (Reason.AUTOCORK_HOLD, f"{q} B queued with none of Nagle, cork, "
                    "MSG_MORE, cwnd or the window holding it (inferred: autocork or "
                    "pacing)", False)
        return (Reason.PACING_HOLD, f"{q} B queued (inferred: pacing or TSO deferral)",
                False)

    def _unseen_probe_arm(self, c: Conn, e: RawEvent) -> list[Decision]:
        """A probe timer the send armed without a timer_start record: its state has
        icsk_pending = PROBE0, but no arm was seen since the socket's last other state.
        tcp_check_probe_timer arms it with mod_timer, and __mod_timer returns before the
        tracepoint when the timer is still queued for the same expiry or wheel bucket —
        the loss-probe/RTO timer armed when the previous message left, which clearing
        (inet_csk_clear_xmit_timer) leaves queued. Its delay is tcp_probe0_base:
        max(icsk_rto, TCP_RTO_MIN)."""
        if e.icsk_pending != raw.ICSK_TIME_PROBE0 or c.probe_seen or not e.queued:
            return []
        c.probe_seen = True
        when = max(e.rto_j, -(-self.hz // 5))          # TCP_RTO_MIN = HZ / 5, rounded up
        detail = (f"{when} jiffies ({self.j_ms(when)}, RTO {self.j_ms(e.rto_j)}); "
                  f"{e.queued} B queued, {e.packets_out} packet(s) in flight; seen pending "
                  "in the send's state (mod_timer found the write timer still queued for "
                  "that expiry or its wheel bucket: no timer_start)")
        return [self._decision(c, e, Kind.TIMER_ARMED, Reason.PROBE0_ARMED, detail,
                               timer="probe0", deadline_us=self.us(e) + self.j_us(when))]

    def _on_send(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        armed = self._unseen_probe_arm(c, e)
        if armed:
            return armed + self._on_send_queue(c, e)
        return self._on_send_queue(c, e)

    def _on_send_queue(self, c: Conn, e: RawEvent) -> list[Decision]:
        if not e.queued:
            if c.hold is not None:
                # its last byte left unseen (a path the segment hook did not report)
                c.hold.end_us = self.us(e)
                c.hold.released_by = Reason.APP_WRITE
                c.hold.release_detail = "everything queued had left by this send"
                self._finish_hold(c, c.hold)
                c.hold = None
                c.last_in = None
            return []
        if c.hold is not None:
            c.hold.bytes = max(c.hold.bytes, e.queued)
            return []
        reason, evidence, _observed = self._hold_reason(e)
        st = _state(e)
        c.hold = Hold(conn=c.name, side=c.side, start_us=self.us(e), reason=reason,
                      evidence=evidence, bytes=e.queued, state=st)
        c.last_in = None
        return [self._decision(c, e, Kind.HOLD, reason, evidence, data=st)]

    def _on_in(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        if self.wire:
            self._keep_wire(c, e, False)
        # only an ACK of new data that arrives while data is held may release it (the
        # program reports nothing else unless it records the wire)
        if c.hold is not None and e.tcpflags & raw.TH_ACK and \
                0 < (e.ack - e.snd_una) & 0xFFFFFFFF < 1 << 31:
            c.last_in = e
        return []

    def _release(self, c: Conn, e: RawEvent) -> tuple[Reason, str]:
        if e.tcpflags & raw.TH_FIN:
            return Reason.CLOSE_PUSH, "the FIN carries it"
        if e.ctx == raw.CTX_WRITE_TIMER:
            fire = c.last_write_fire
            kind = fire.icsk_pending if fire is not None else 0
            if kind == raw.ICSK_TIME_LOSS_PROBE:
                return Reason.LOSS_PROBE, "tail loss probe timer"
            if kind == raw.ICSK_TIME_RETRANS:
                return Reason.RETRANSMIT, "retransmission timer"
            return Reason.PROBE0_RELEASE, "probe timer (ICSK_TIME_PROBE0) fired"
        if e.ctx == raw.CTX_SETSOCKOPT:
            opt, val = e.b & 0xFFFFFFFF, e.b >> 32
            if opt == raw.TCP_NODELAY and val:
                return Reason.NODELAY_PUSH, "setsockopt(TCP_NODELAY, 1)"
            if opt == raw.TCP_CORK and not val:
                return Reason.UNCORK_PUSH, "setsockopt(TCP_CORK, 0)"
            return Reason.SOCKOPT_SET, f"inside setsockopt({_OPT.get(opt, opt)}, {val})"
        if c.last_in is not None:
            i = c.last_in
            acked = (i.ack - i.snd_una) & 0xFFFFFFFF
            return Reason.ACK_RELEASE, f"the ACK of {acked} B arrived"
        if e.len >= e.mss_cache > 0:
            return Reason.FULL_SEGMENT, "a later write filled a segment"
        return Reason.APP_WRITE, "sent by a later call of the application"

    def _on_out(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        out: list[Decision] = []
        flags = e.tcpflags
        if self.wire:
            self._keep_wire(c, e, True)
            if e.len and c.hold is None and not flags & (raw.TH_SYN | raw.TH_FIN | raw.TH_RST) \
                    and e.ctx not in _DECIDING_CONTEXTS:
                return out      # data nothing held, sent by a write or an ACK: no decision
        if e.len and c.hold is not None:
            why, how = self._release(c, e)
            h = c.hold
            d = self._decision(c, e, SEGMENT, why,
                               f"{e.len} B after {(self.us(e) - h.start_us) / 1000:.1f} ms "
                               f"held: {how}")
            out.append(d)
            if (e.seq + e.len - e.write_seq) & 0xFFFFFFFF == 0:
                h.end_us = self.us(e)
                h.released_by = why
                h.release_detail = how
                self._finish_hold(c, h)
                c.hold = None
                c.last_in = None
            return out
        if flags & (raw.TH_SYN | raw.TH_RST) or (flags & raw.TH_FIN and not e.len):
            return out
        if e.len:
            why, how = self._release(c, e)
            out.append(self._decision(c, e, SEGMENT, why, f"{e.len} B: {how}"))
            return out
        # a pure ACK: which decision sent it
        # e.a: the ACK field of the socket's previous segment; 0 before its first one
        # (a server's SYN-ACK leaves from the request socket, not this one)
        known = e.a != 0
        acked = (e.ack - e.a) & 0xFFFFFFFF if known else 0
        shown = f"{acked} B" if known else "the data"
        rcv_mss = e.rcv_mss or e.mss_cache or 1
        reason: Reason | None
        if not known and c.role == "client":
            reason, kind, detail = Reason.HANDSHAKE, Kind.ACK_NOW, "the handshake's last ACK"
        elif e.ctx == raw.CTX_DELACK_TIMER:
            reason, kind = Reason.DELACK_FIRED, Kind.ACK_NOW
            detail = f"ACKs {shown}"
        elif e.ctx == raw.CTX_SETSOCKOPT:
            opt, val = e.b & 0xFFFFFFFF, e.b >> 32
            reason = Reason.QUICKACK_OPT if opt == raw.TCP_QUICKACK and val else \
                Reason.SOCKOPT_SET
            kind, detail = Kind.ACK_NOW, f"ACKs {shown} inside setsockopt"
        elif e.ctx == raw.CTX_READ:
            reason, kind = Reason.READ_ACK, Kind.ACK_NOW
            detail = f"ACKs {shown}; ping-pong {e.pingpong}"
        elif known and acked == 1 and e.state != raw.TCP_ESTABLISHED:
            reason, kind, detail = Reason.FIN_ACK, Kind.ACK_NOW, "ACKs the peer's FIN"
        elif known and acked == 0:
            reason, kind, detail = Reason.WINDOW_UPDATE, Kind.ACK_NOW, \
                f"window {e.win} (nothing new to ACK)"
        elif acked > rcv_mss:
            reason, kind = Reason.FULL_FRAME, Kind.ACK_NOW
            detail = f"ACKs {acked} B, more than rcv_mss {rcv_mss} B"
        elif not e.pingpong:
            # the credit was spent by this very ACK (tcp_event_ack_sent runs before the
            # device sees it): the record shows what is left
            reason, kind = Reason.QUICKACK_MODE, Kind.ACK_NOW
            detail = (f"ACKs {shown}; quick-ACK credit left {e.quick}, ping-pong "
                      f"{e.pingpong}")
        else:
            reason, kind, detail = None, Kind.ACK_NOW, (
                f"ACKs {shown} at once in ping-pong mode (quick {e.quick}): out of order, "
                "a deferred timer or the segments queued while the application held the "
                "socket")
        d = self._decision(c, e, kind, reason, detail)
        c.acks.append((e, d))
        if reason is Reason.QUICKACK_MODE and len(c.quick_acks) < MAX_QUICK:
            c.quick_acks.append(d)
        return [d]

    def _on_timer_arm(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        delta = (e.a - e.jiffies) if e.a >= e.jiffies else 0
        deadline = self.us(e) + self.j_us(delta)
        if e.timer == raw.CTX_DELACK_TIMER:
            detail = (f"ato {self.j_ms(e.ato)} ({e.ato} jiffies), ping-pong {e.pingpong}, "
                      f"quick-ACK credit {e.quick}; fires in {self.j_ms(delta)} "
                      f"({delta} jiffies)")
            d = self._decision(c, e, Kind.ACK_DELAYED, Reason.DELACK_WAIT, detail,
                               timer="delack", deadline_us=deadline)
            c.delack_arms.append(d)
            return [d]
        detail = (f"{delta} jiffies ({self.j_ms(delta)}, RTO {self.j_ms(e.rto_j)}); "
                  f"{e.queued} B queued, {e.packets_out} packet(s) in flight")
        c.probe_seen = True
        return [self._decision(c, e, Kind.TIMER_ARMED, Reason.PROBE0_ARMED, detail,
                               timer="probe0", deadline_us=deadline)]

    def _on_timer_fire(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        late = e.jiffies - e.a if e.jiffies >= e.a else 0
        if e.timer == raw.CTX_DELACK_TIMER:
            if e.ack_pending & raw.ICSK_ACK_TIMER:
                detail = f"{late} jiffies after its deadline; ato {self.j_ms(e.ato)}"
                return [self._decision(c, e, Kind.TIMER_FIRED, Reason.DELACK_FIRED, detail,
                                       timer="delack")]
            return [self._decision(c, e, Kind.TIMER_FIRED, Reason.TIMER_CLEARED,
                                   "delayed-ACK timer fired with no ACK pending (it had "
                                   "left with data)", timer="delack")]
        c.last_write_fire = e
        kind = e.icsk_pending
        if not kind:
            return [self._decision(c, e, Kind.TIMER_FIRED, Reason.TIMER_CLEARED,
                                   "the write timer fired with nothing pending",
                                   timer="rto")]
        if kind == raw.ICSK_TIME_PROBE0:
            return [self._decision(c, e, Kind.TIMER_FIRED, Reason.PROBE0_RELEASE,
                                   f"{e.queued} B queued, {e.packets_out} in flight",
                                   timer="probe0")]
        timer, reason = (("tlp", Reason.LOSS_PROBE) if kind == raw.ICSK_TIME_LOSS_PROBE
                         else ("rto", Reason.RETRANSMIT))
        return [self._decision(c, e, Kind.TIMER_FIRED, reason, f"icsk_pending {kind}",
                               timer=timer)]

    def _on_mode(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        oq, opp, oato = e.a & 0xFF, (e.a >> 8) & 0xFF, (e.a >> 16) & 0xFF
        out: list[Decision] = []
        if e.quick != oq:
            if e.quick > oq:
                reason = Reason.QUICK_START if oq == 0 else Reason.QUICK_REFILL
            elif e.quick == 0:
                reason = Reason.QUICK_SPENT
            else:
                reason = None      # one quick ACK spent: its ack_now line says what is left
            if reason is not None:
                out.append(self._decision(c, e, Kind.MODE, reason,
                                          f"quick-ACK credit {oq} → {e.quick}"))
        if e.pingpong != opp:
            if e.pingpong == 0:
                # inet_csk_exit_pingpong_mode: the delayed-ACK timer (tcp_delack_timer_
                # handler), TCP_QUICKACK=1, or tcp_enter_quickack_mode on arrival
                reason = {raw.CTX_DELACK_TIMER: Reason.PINGPONG_EXIT,
                          raw.CTX_SETSOCKOPT: Reason.QUICKACK_ON}.get(e.ctx)
            elif opp == 0 and e.ctx == raw.CTX_SETSOCKOPT:
                reason = Reason.QUICKACK_OFF     # TCP_QUICKACK=0: inet_csk_enter_pingpong_mode
            elif opp == 0 and e.state == raw.TCP_CLOSE_WAIT:
                reason = Reason.FIN_ACK          # tcp_fin enters ping-pong on the peer's FIN
            elif opp == 0:
                reason = Reason.PINGPONG_ENTER
            else:
                reason = Reason.PINGPONG_COUNT
            words = f"ping-pong {opp} → {e.pingpong}"
            if reason is None:
                words += " (quick-ACK mode entered on an arriving segment)"
            d = self._decision(c, e, Kind.MODE, reason, words)
            if reason is Reason.QUICKACK_OFF:
                c.in_sockopt = d         # which option it was: the setsockopt's own record
            out.append(d)
        if e.ato != oato:
            # tcp_delack_timer_handler doubles ato (up to the RTO) when the timer fires
            # outside ping-pong: an increase seen in the timer's own run is that; any
            # other change is tcp_event_data_recv's estimate or a reset to ATO_MIN
            reason = Reason.ATO_INFLATE if e.ato > oato and \
                e.ctx == raw.CTX_DELACK_TIMER and oato else Reason.ATO_UPDATE
            out.append(self._decision(c, e, Kind.MODE, reason,
                                      f"ato {self.j_ms(oato)} → {self.j_ms(e.ato)} "
                                      f"({oato} → {e.ato} jiffies)"))
        return out

    def _on_sockopt(self, e: RawEvent) -> list[Decision]:
        c = self._conn(e)
        opt, val, ret = e.a & 0xFFFFFFFF, e.a >> 32, e.b
        ret = ret - (1 << 64) if ret >= 1 << 63 else ret
        name = _OPT.get(opt, str(opt))
        result = "" if ret == 0 else f" → error {ret}"
        reason = Reason.SOCKOPT_SET
        if opt == raw.TCP_QUICKACK:
            reason = Reason.QUICKACK_ON if val else Reason.QUICKACK_OFF
        entered, c.in_sockopt = c.in_sockopt, None
        if entered is not None and opt != raw.TCP_QUICKACK:
            # ping-pong entered inside another option's setsockopt: data it pushed (an
            # uncork, NODELAY) left within ato of the last data received
            # (tcp_event_data_sent), not TCP_QUICKACK = 0. The decision is renamed where
            # it is kept (traces, comparisons); a live view has already shown it.
            entered.code = Reason.PINGPONG_ENTER.name
            entered.detail += f" (data sent inside setsockopt({name}))"
        return [self._decision(c, e, Kind.SOCKOPT, reason, f"{name} = {val}{result}")]

    # -- holds and stalls ----------------------------------------------------------------------
    def _finish_hold(self, c: Conn, h: Hold) -> None:
        c.hold_count += 1
        peer = self.peer(c)
        if h.released_by is Reason.ACK_RELEASE and peer is not None and c.last_in is not None:
            ack = c.last_in.ack
            for ev, d in reversed(peer.acks):
                if ev.ack == ack:
                    h.peer.append(d)
                    if d.code == Reason.DELACK_FIRED.name:
                        arm = next((a for a in reversed(peer.delack_arms)
                                    if a.t_us <= d.t_us), None)
                        if arm is not None:
                            h.peer.insert(0, arm)
                    break
        if h.duration_us >= STALL_MIN_US:
            if len(c.stalls) < MAX_STALLS:
                stall = self._name_stall(c, h, peer)
                c.stalls.append(stall)
                if len(self.fresh_stalls) < MAX_STALLS:
                    self.fresh_stalls.append(stall)
            else:
                c.stalls_dropped += 1

    def _name_stall(self, c: Conn, h: Hold, peer: Conn | None) -> Stall:
        ms = h.duration_us / 1000
        causes = [CAUSE_OF.get(h.reason, "app")]
        peer_side = peer.side if peer is not None else "peer"
        held = f"{h.bytes} B held {ms:.1f} ms by {_HOLD_WORDS.get(h.reason, h.reason.name)}"
        released = "released by " + (_RELEASE_WORDS.get(h.released_by, "the application")
                                     if h.released_by is not None else "the application")
        if h.released_by is Reason.ACK_RELEASE:
            fired = next((d for d in h.peer if d.code == Reason.DELACK_FIRED.name), None)
            arm = next((d for d in h.peer if d.code == Reason.DELACK_WAIT.name), None)
            if fired is not None:
                causes.append("delayed_ack")
                released = (f"released by the {peer_side}'s ACK ({fired.detail}), sent when "
                            "its delayed-ACK timer fired")
                if arm is not None:
                    released += (f" {(fired.t_us - arm.t_us) / 1000:.1f} ms after it was "
                                 f"armed ({arm.detail})")
            elif h.peer:
                d = h.peer[-1]
                released = f"released by the {peer_side}'s ACK: {d.reason or d.detail}"
                causes.append("link")
            elif peer is None:
                rel = h.release_detail
                released = (f"released when {rel[4:] if rel.startswith('the ') else rel} "
                            f"(the {peer_side} is not watched: if it delayed that ACK, "
                            "its timer is not seen here)")
                if 30_000 <= h.duration_us <= 220_000:
                    causes.append("delayed_ack")
        fix = _FIX.get(causes[0], "")
        if causes == ["nagle", "delayed_ack"]:
            fix = (f"TCP_NODELAY on the {c.side} (or write each request with one call); "
                   f"or TCP_QUICKACK on the {peer_side} after each read")
        text = f"the {c.side}'s {held}: {h.evidence}; {released}"
        evidence = [d for d in h.peer]
        return Stall(conn=c.name, side=c.side, start_us=h.start_us,
                     end_us=h.start_us + h.duration_us, causes=causes, text=text,
                     fix=fix.format(side=c.side, peer=peer_side), state=h.state,
                     evidence=evidence)

    def stalls(self) -> list[Stall]:
        return sorted((s for c in self.all_conns for s in c.stalls), key=lambda s: s.start_us)

    def notes(self) -> list[str]:
        """Why small writes did *not* stall: the peer's quick ACKs before its first
        delayed one, per connection (what a capture cannot show)."""
        out: list[str] = []
        for c in self.all_conns:
            peer = self.peer(c)
            if peer is None or not peer.quick_acks or not c.hold_count:
                continue
            first = min((s.start_us for s in c.stalls), default=None)
            before = [d for d in peer.quick_acks if first is None or d.t_us < first]
            if not before:
                continue
            credits = [d.data.get("quick", 0) for d in before]
            arm = next((a for a in peer.delack_arms), None)
            until = "its first stall" if first is not None else "the end"
            line = (f"{c.side} {c.name}: before {until}"
                    f" the {peer.side} ACKed at once {len(before)} time(s) in quick-ACK mode "
                    f"(credit left {credits[0]} → {credits[-1]}, ping-pong 0), so a small "
                    f"write of the {c.side} found nothing unACKed and Nagle did not hold")
            if arm is not None:
                line += (f"; the {peer.side} first delayed an ACK at {arm.t_us / 1000:.3f} ms "
                         f"({arm.detail})")
            out.append(line)
        return out


_DECIDING_CONTEXTS: Final = frozenset({raw.CTX_DELACK_TIMER, raw.CTX_WRITE_TIMER,
                                       raw.CTX_SETSOCKOPT})
"""Contexts whose data segments the program reports even when nothing was held."""
_OPT: Final = {raw.TCP_NODELAY: "TCP_NODELAY", raw.TCP_CORK: "TCP_CORK",
               raw.TCP_QUICKACK: "TCP_QUICKACK"}
_HOLD_WORDS: Final = {Reason.NAGLE_HOLD: "Nagle", Reason.CORK_HOLD: "TCP_CORK",
                      Reason.MORE_HOLD: "MSG_MORE", Reason.CWND_HOLD: "the congestion window",
                      Reason.RWND_HOLD: "the peer's receive window",
                      Reason.AUTOCORK_HOLD: "autocork or pacing (inferred)",
                      Reason.PACING_HOLD: "pacing (inferred)"}
_RELEASE_WORDS: Final = {Reason.PROBE0_RELEASE: "the probe timer (max(RTO, 200 ms))",
                         Reason.NODELAY_PUSH: "setting TCP_NODELAY",
                         Reason.UNCORK_PUSH: "clearing TCP_CORK",
                         Reason.CLOSE_PUSH: "close() (the FIN pushed it)",
                         Reason.FULL_SEGMENT: "a later write that filled a segment",
                         Reason.APP_WRITE: "a later call of the application",
                         Reason.LOSS_PROBE: "the tail loss probe",
                         Reason.RETRANSMIT: "the retransmission timer",
                         Reason.ACK_RELEASE: "an ACK"}
_FIX: Final = {
    "nagle": "TCP_NODELAY on the {side}, or write each message with one call",
    "cork": "clear TCP_CORK on the {side} after the last write of a message",
    "msg_more": "drop MSG_MORE from the {side}'s last send of a message",
    "cwnd": "nothing to set: the congestion window (more data in flight than it allows)",
    "receiver": "the {peer} must read faster (or use a bigger receive buffer)",
    "pacing": "nothing to set: pacing or autocork (net.ipv4.tcp_autocorking)",
    "app": "",
}

_HANDLERS: Final = {
    raw.SOCK: Engine._on_sock, raw.STATE: Engine._on_state, raw.SEND: Engine._on_send,
    raw.IN: Engine._on_in, raw.OUT: Engine._on_out,
    raw.TIMER_ARM: Engine._on_timer_arm, raw.TIMER_FIRE: Engine._on_timer_fire,
    raw.MODE: Engine._on_mode, raw.SOCKOPT: Engine._on_sockopt,
}
