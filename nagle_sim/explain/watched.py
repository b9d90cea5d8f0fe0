"""A capture joined with a watch trace of the same connection: the kernel's own word.

Owns: reading a trace that ``nagle-sim watch -o`` wrote (`load_watch`: its connection,
which ends were watched, the kernel's decisions marked ``by="kernel"`` and the stalls the
watch named), finding the capture's connection it is of (`WatchJoin.choose`, by addresses
and ports; a watch trace of another connection is a one-line error), aligning the two
(`WatchJoin.bind`: each side's sequence numbers and one clock offset, from the segments
both saw), and, for each stall found on the wire, what the kernel decided there
(`WatchJoin.verdict`, the `causes.KernelWord` seam):

- the data that ended the quiet gap left from a hold the watch named a stall — Nagle,
  TCP_CORK, MSG_MORE, the congestion or receive window, the peer's delayed ACK that
  released it — so the stall takes the kernel's causes and sentence, with the decisions
  behind it (the setsockopt that corked, the hold, the probe timer, the peer's
  delayed-ACK timer armed and fired) as evidence;
- the watched sender held nothing during the gap and none of its records were lost: the
  application wrote late (``app``), whatever the timing suggested.

Stalls the watch cannot speak for (the sender was not watched, the data is not in the
watch trace, a hold shorter than the gap) keep the wire's reading. The rules are in
docs/explain.md, "With the kernel's own decisions".
Must not import rich, textual, simpy or realnet: a watch trace is read as any trace is.
"""

from __future__ import annotations

import bisect
import ipaddress
import socket
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.events import Micros, Side
from ..trace import EventRecord, SegmentRecord, Trace, TraceError
from .causes import MEDIUM, KernelVerdict, Stall
from .connections import Connection, Endpoint
from .pcap import CaptureError
from .totrace import Captured

KERNEL = "kernel"
"""The ``by`` of an event the kernel was observed deciding (docs/trace.md)."""
ALIGN_SEGMENTS = 400
"""Data segments per side compared to find the sequence-number shift (bounded work on a
bulk transfer: the first ones decide it)."""
NEAR_US = 1_000
"""How far apart a watch stall's end and the release seen in the capture may be (the two
clocks are aligned to well under this on one host; a jiffy is 4 ms)."""
MAX_EVIDENCE_SCAN = 2_000
"""Decisions of one side looked at for one stall's evidence, at most (a stall of
minutes on a busy socket has many; the first ones after the hold are the ones cited)."""
REACT_US = 5_000
"""Data that left this long after the quiet gap ended did not end it."""
HOLD_CAUSES = frozenset({"nagle", "cork", "msg_more", "pacing", "cwnd", "receiver", "app"})
"""Wire readings about what the sender did or held: the kernel's records decide these."""


class WatchError(CaptureError):
    """A watch trace that cannot be joined (unreadable, not a watch trace, another
    connection); ``str(err)`` is one line naming the file."""


@dataclass(frozen=True, slots=True)
class WatchStall:
    """A stall the watch named (``meta.stalls``): the side that held data, when, why."""

    side: Side
    start: Micros
    end: Micros
    cause: str
    text: str
    fix: str


def _endpoint(text: str, where: str) -> tuple[str, int]:
    """``"127.0.0.1:80"`` or ``"[::1]:80"`` → (normalised address, port)."""
    addr, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise WatchError(f"{where}: meta.connection: {text!r} is not an address:port")
    try:
        ip = ipaddress.ip_address(addr.strip("[]"))
    except ValueError:
        raise WatchError(f"{where}: meta.connection: {addr!r} is not an IP address") from None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port)


def _capture_endpoint(ep: Endpoint) -> tuple[str, int]:
    addr, port = ep
    family = socket.AF_INET6 if len(addr) == 16 else socket.AF_INET
    ip = ipaddress.ip_address(socket.inet_ntop(family, addr))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), port


def _show(ep: tuple[str, int]) -> str:
    addr, port = ep
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not -1e10 < value < 1e10:
        raise WatchError(f"{where}: expected a number of milliseconds, got {value!r}")
    return float(value)


def _stalls(meta: dict[str, Any], where: str) -> list[WatchStall]:
    raw = meta.get("stalls", [])
    if not isinstance(raw, list):
        raise WatchError(f"{where}: meta.stalls: expected a list")
    out = []
    for i, s in enumerate(raw):
        at = f"{where}: meta.stalls[{i}]"
        if not isinstance(s, dict):
            raise WatchError(f"{at}: expected an object")
        side = s.get("side")
        if side not in ("client", "server"):
            raise WatchError(f"{at}: side {side!r} is neither client nor server")
        start = _number(s.get("start_ms"), f"{at}.start_ms")
        duration = _number(s.get("duration_ms"), f"{at}.duration_ms")
        texts = [s.get(k, "") for k in ("cause", "text", "fix")]
        if not all(isinstance(t, str) for t in texts) or not texts[0]:
            raise WatchError(f"{at}: cause, text and fix must be text (a cause given)")
        out.append(WatchStall(side=Side(side), start=Micros(round(start * 1000)),
                              end=Micros(round((start + duration) * 1000)),
                              cause=texts[0], text=texts[1], fix=texts[2]))
    return out


def load_watch(path: str) -> WatchJoin:
    """Read the watch trace at ``path`` (`Trace.load`'s bounds and checks).

    Raises:
        WatchError: unreadable, not a trace, or not a watch trace (no kernel decisions,
            no connection named).
    """
    where = f"--kernel {path}"
    try:
        trace = Trace.load(path)
    except TraceError as exc:
        raise WatchError(f"--kernel: {exc}") from None
    meta = trace.meta
    if not any(e.by == KERNEL for e in trace.events):
        raise WatchError(f"{where}: not a watch trace (no decision in it is the kernel's: "
                         "record one with nagle-sim watch -o FILE)")
    name = meta.get("connection")
    if not isinstance(name, str) or "→" not in name:
        raise WatchError(f"{where}: the watch trace names no connection (meta.connection)")
    client_text, _arrow, server_text = name.partition("→")
    client, server = _endpoint(client_text, where), _endpoint(server_text, where)
    watched_raw = meta.get("watched", [])
    watched = {Side(w) for w in watched_raw if w in ("client", "server")} \
        if isinstance(watched_raw, list) else set()
    if not watched:
        watched = {e.side for e in trace.events if e.by == KERNEL}
    counters = meta.get("watch_counters", {})
    complete = isinstance(counters, dict) and all(
        counters.get(k, 0) == 0 for k in ("lost", "rate_limited", "wire_dropped"))
    return WatchJoin(path=path, trace=trace, client=client, server=server,
                     watched=watched, stalls=_stalls(meta, where), complete=complete)


@dataclass(slots=True)
class WatchJoin:
    """A watch trace, joined to the capture's connection it records."""

    path: str
    trace: Trace
    client: tuple[str, int]
    server: tuple[str, int]
    watched: set[Side]
    stalls: list[WatchStall]
    complete: bool
    """No record was lost, rate-limited or dropped: the absence of a hold means none."""
    flip: bool = False
    """The capture calls the watch's client its server (no handshake decided it)."""
    shift: dict[Side, int] = field(default_factory=dict)
    """Capture sequence number − watch sequence number, per capture side."""
    offset: int | None = None
    """Capture-point time − watch time, µs (None: the two could not be aligned)."""
    matched: int = 0
    """Segments both saw (what the alignment rests on)."""
    notes: list[str] = field(default_factory=list)
    _captured: Captured | None = None
    _placed: dict[tuple[int, str], tuple[int, Side]] = field(default_factory=dict)
    """Each evidence line the verdicts gave: (watch time, watch side) it was decided at."""
    _seqs: dict[Side, list[int]] = field(default_factory=dict)
    _segs: dict[Side, dict[int, SegmentRecord]] = field(default_factory=dict)
    _events: dict[Side, list[EventRecord]] = field(default_factory=dict)
    _event_t: dict[Side, list[int]] = field(default_factory=dict)
    _corks: dict[Side, list[EventRecord]] = field(default_factory=dict)
    _cork_t: dict[Side, list[int]] = field(default_factory=dict)
    _named: dict[Side, list[WatchStall]] = field(default_factory=dict)
    _named_t: dict[Side, list[int]] = field(default_factory=dict)
    _doubt: dict[int, float] = field(default_factory=dict)
    """Stalls (by start) whose delayed ACK the watch inferred from timing (the peer was
    not watched): the confidence they keep."""

    # ----------------------------------------------------------------- the connection
    def describe(self) -> str:
        return f"{_show(self.client)} → {_show(self.server)}"

    def is_of(self, c: Connection) -> bool | None:
        """True: ``c`` is the watched connection; None: it is, with client and server
        the other way round; False: another connection."""
        cl, sv = _capture_endpoint(c.client), _capture_endpoint(c.server)
        if (cl, sv) == (self.client, self.server):
            return True
        if (sv, cl) == (self.client, self.server):
            return None
        return False

    def choose(self, conns: list[Connection], chosen: Connection | None,
               capture: str) -> Connection:
        """The capture's connection this watch trace records: ``chosen`` (--conn, --port)
        checked, or found among ``conns``.

        Raises:
            WatchError: the watch trace is of another connection.
        """
        cands = [chosen] if chosen is not None else conns
        for c in cands:
            hit = self.is_of(c)
            if hit is not False:
                self.flip = hit is None
                return c
        if chosen is not None:
            raise WatchError(
                f"--kernel {self.path}: the watch trace is of {self.describe()}, not of "
                f"connection {chosen.number} of {capture} ({chosen.label()})")
        listed = ", ".join(c.label() for c in conns[:3]) + (" …" if len(conns) > 3 else "")
        raise WatchError(
            f"--kernel {self.path}: the watch trace is of {self.describe()}; no connection "
            f"of {capture} is ({len(conns)} connection(s): {listed or 'none'})")

    def side(self, capture_side: Side) -> Side:
        """The watch's name for a side of the capture."""
        return capture_side.peer if self.flip else capture_side

    # ----------------------------------------------------------------- the alignment
    def bind(self, captured: Captured) -> None:
        """Align the watch trace with the captured connection: each side's sequence
        shift (the most common difference between equal-length data segments), then the
        clock offset (the median difference of capture-point and watch times over the
        segments both saw, sent by a watched end)."""
        self._captured = captured
        self._index()
        cap = captured.trace.segments
        for side in Side:
            mine = [s for s in cap if s.src is side and s.length][:ALIGN_SEGMENTS]
            theirs = [s for s in self.trace.segments
                      if s.src is self.side(side) and s.length][:ALIGN_SEGMENTS]
            by_len: dict[int, list[int]] = {}
            for s in theirs:
                by_len.setdefault(s.length, []).append(s.seq)
            votes: Counter[int] = Counter()
            for s in mine:
                for seq in by_len.get(s.length, ()):
                    votes[s.seq - seq] += 1
            if votes:
                best = max(votes.values())
                # a tie prefers no shift (both relative to the SYN), then the smallest
                self.shift[side] = min((d for d, n in votes.items() if n == best),
                                       key=lambda d: (d != 0, abs(d)))
        index = {(self.side(s.src), s.seq, s.length): s for s in self.trace.segments
                 if s.length and s.src in self.watched}
        diffs = []
        for i, s in enumerate(cap):
            if not s.length or s.src not in self.shift or captured.retransmit[i]:
                continue
            w = index.get((self.side(s.src), s.seq - self.shift[s.src], s.length))
            if w is not None:
                diffs.append(captured.seen[i] - w.t)
        self.matched = len(diffs)
        if diffs:
            self.offset = int(statistics.median(diffs))
        else:
            self.notes.append(f"the watch trace {Path(self.path).name} shares no data "
                              "segment with the capture: its decisions could not be placed "
                              "on the capture's clock, so the wire's readings stand")

    def _index(self) -> None:
        """Per watch side: its data segments by sequence number (the first to carry each),
        its kernel decisions by time, its named stalls by start — so each verdict costs
        a few binary searches, whatever the size of the watch trace."""
        for side in Side:
            segs: dict[int, SegmentRecord] = {}
            for w in self.trace.segments:
                if w.src is side and w.length and w.seq not in segs:
                    segs[w.seq] = w
            self._seqs[side] = sorted(segs)
            self._segs[side] = segs
            events = sorted((e for e in self.trace.events
                             if e.by == KERNEL and e.side is side), key=lambda e: e.t)
            self._events[side] = events
            self._event_t[side] = [e.t for e in events]
            corks = [e for e in events if e.kind == "sockopt" and "TCP_CORK" in e.detail]
            self._corks[side] = corks
            self._cork_t[side] = [e.t for e in corks]
            named = sorted((st for st in self.stalls if st.side is side),
                           key=lambda st: st.start)
            self._named[side] = named
            self._named_t[side] = [st.start for st in named]

    def _during(self, side: Side, lo: int, hi: int) -> list[EventRecord]:
        """The kernel's decisions on watch side ``side`` from ``lo`` to ``hi`` (µs)."""
        times = self._event_t.get(side, [])
        i, j = bisect.bisect_left(times, lo), bisect.bisect_right(times, hi)
        return self._events[side][i:min(j, i + MAX_EVIDENCE_SCAN)]

    def summary(self) -> list[str]:
        """The report's notes on the join: what was watched, what the alignment rests
        on, and what the watch could not see."""
        ends = " and ".join(s.value for s in Side if self.side(s) in self.watched)
        out = [f"joined with the watch trace {Path(self.path).name} ({self.describe()}, "
               f"the kernel's decisions of the {ends or 'no side'}"
               + (f"; aligned on {self.matched} segment(s) both saw)" if self.matched
                  else ")")]
        if self.flip:
            out.append("the capture took the watch's server for the client (no handshake "
                       "in it): the kernel's sentences name the sides as the watch did")
        unwatched = [s.value for s in Side if self.side(s) not in self.watched]
        if unwatched:
            out.append(f"the {unwatched[0]} was not watched: stalls where it held the data "
                       "keep the wire's reading")
        if not self.complete:
            out.append("the watch lost, rate-limited or dropped records (meta.watch_counters):"
                       " a stall is decided by the kernel only where it named a hold")
        return out + self.notes

    def _watch_seg(self, side: Side, seq: int) -> SegmentRecord | None:
        """The watch's record of the capture side ``side``'s data at ``seq``."""
        if side not in self.shift:
            return None
        want, wside = seq - self.shift[side], self.side(side)
        seqs = self._seqs.get(wside, [])
        i = bisect.bisect_right(seqs, want) - 1
        if i < 0:
            return None
        w = self._segs[wside][seqs[i]]
        return w if w.seq <= want < w.seq + w.length else None

    def _put(self, stall: Stall, line: str, t: int, side: Side) -> str:
        """``line``, remembered as the kernel's decision for ``stall`` at watch time ``t``
        on ``side`` (`place` puts it there)."""
        self._placed[(stall.start, line)] = (t, side)
        return line

    def _line(self, e: EventRecord) -> str:
        text = e.reason or e.code
        return f"{e.kind} {e.code} — {text}" + \
            (f" ({e.detail})" if e.detail else "")

    # ----------------------------------------------------------------- the verdict
    def verdict(self, stall: Stall, trace: Trace) -> KernelVerdict | None:
        """What the kernel decided for ``stall`` (see the module's docstring), or None
        when its records do not speak for it."""
        if self.offset is None or stall.key is None:
            return None
        holder = Side(stall.key[0])
        wside = self.side(holder)
        if wside not in self.watched:
            return None         # its sender's decisions were not watched
        w = self._watch_seg(holder, stall.key[1])
        start, end = stall.start - self.offset, stall.end - self.offset
        if w is None or w.t > end + REACT_US:
            return None
        # the data that ended the gap left from the hold: sent after the hold began (a
        # segment before it, e.g. a write's first part, was not held)
        starts = self._named_t.get(wside, [])
        last = bisect.bisect_right(starts, w.t)
        named = [s for s in self._named[wside][max(0, last - 4):last]
                 if s.start <= w.t <= s.end + NEAR_US]
        if named:
            ws = min(named, key=lambda s: abs(s.end - w.t))
            if "delayed_ack" in ws.cause.split("+") and wside.peer not in self.watched:
                # the hold and its release are the kernel's; that the peer delayed the
                # ACK is the watch's reading of its timing (30-220 ms), as the wire's is
                self._doubt[stall.start] = stall.confidence \
                    if "delayed_ack" in stall.causes else MEDIUM
            return self._held(stall, ws, w)
        if not self.complete or not set(stall.causes) & HOLD_CAUSES:
            return None
        during = self._during(wside, start - NEAR_US, end)
        holds = [e for e in during if e.kind == "hold"]
        if holds or len(during) >= MAX_EVIDENCE_SCAN or w.code not in ("", "APP_WRITE"):
            # held, but not for the whole gap (no stall of its own): the wire's timing
            # says more about this gap than the kernel's records
            return None
        return KernelVerdict(
            causes=("app",),
            text=(f"nothing was queued: the kernel held none of the {holder.value}'s data "
                  f"from {stall.start / 1000:.3f} to {stall.end / 1000:.3f} ms (no hold "
                  f"recorded); its application wrote the {w.length} B when they left"),
            evidence=(self._put(stall, f"{w.length} B sent by the application's write, "
                                "nothing held before it", w.t, wside),))

    def _held(self, stall: Stall, ws: WatchStall, w: SegmentRecord) -> KernelVerdict:
        """The verdict for a stall the watch named: its causes and words, the decisions
        behind it as evidence (the holder's from the hold to the release, the peer's
        delayed-ACK timer in between, and the setsockopt that corked)."""
        causes = [c for c in ws.cause.split("+") if c]
        if "link" in stall.causes and "link" not in causes:
            causes.append("link")        # time on the path, which the wire measured
        begin = min(ws.start, stall.start - (self.offset or 0)) - NEAR_US
        mine = self._during(ws.side, begin, w.t)
        hold = next((e for e in mine if e.kind == "hold"), None)
        picked: list[EventRecord] = []
        if hold is not None:
            # the setsockopt(TCP_CORK) in force when it held: the last one before
            k = bisect.bisect_right(self._cork_t.get(ws.side, []), hold.t) - 1
            if k >= 0:
                picked.append(self._corks[ws.side][k])
        picked += [e for e in mine if (e.kind == "hold" and e is hold)
                   or e.kind == "timer_armed"
                   or (e.kind == "timer_fired" and e.code != "TIMER_CLEARED")]
        picked += [e for e in self._during(ws.side.peer, begin, w.t)
                   if e.kind in ("ack_delayed", "timer_fired") and e.code.startswith("DELACK")]
        picked.sort(key=lambda e: e.t)
        lines = [self._put(stall, self._line(e), e.t, e.side) for e in picked[:10]]
        last = self._put(stall, f"{w.length} B released ({w.code or 'sent'}: "
                         f"{w.why or 'by a write'})", w.t, ws.side)
        return KernelVerdict(causes=tuple(causes), text=f"the kernel: {ws.text}",
                             evidence=(*lines, last))

    def place(self, stalls: list[Stall]) -> None:
        """Put the evidence `apply_kernel_word` added (stamped at each stall's end) at
        the times and sides the kernel decided it, on the capture's clock."""
        for st in stalls:
            if st.decided_by != KERNEL:
                continue
            for ev in st.evidence:
                at = self._placed.get((st.start, ev.note)) if ev.index < 0 else None
                if at is not None:
                    ev.t = Micros(at[0] + (self.offset or 0))
                    ev.side = at[1].peer if self.flip else at[1]
            st.evidence.sort(key=lambda ev: (ev.t, ev.index < 0))
            if st.start in self._doubt:
                st.confidence = self._doubt[st.start]
