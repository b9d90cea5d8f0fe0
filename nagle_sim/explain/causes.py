"""Every stall of a connection and its cause, from a fixed vocabulary.

Owns: stall finding (a quiet gap of at least 10 ms at the capture point, while the
connection is open) and naming each one's cause from `CAUSES`, with evidence (segments,
times) and a confidence. Works on any trace that has send and arrival times — a captured
one (`totrace`) or the model's re-run (`rebuild`) — seen from the same capture point, so
the two can be paired. The rules are in docs/explain.md ("How causes are found").
Must not import rich, textual or simpy.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model.config import LINUX
from ..model.events import Micros, Side
from ..trace import SegmentRecord, Trace
from ..trace.summary import STALL_MIN

REACT_US = 2_000
"""A send this soon after an arrival was caused by that arrival (woken, or released)."""

CAUSES: dict[str, str] = {
    "nagle": "Nagle held a small segment while an earlier small one was unACKed",
    "delayed_ack": "the receiver delayed its ACK (delayed-ACK timer)",
    "cork": "TCP_CORK held data until the 200 ms ceiling (probe timer) released it",
    "msg_more": "MSG_MORE held data until the 200 ms ceiling (probe timer) released it",
    "tlp": "a tail loss probe re-sent the last segment (no ACK came)",
    "rto": "the retransmission timer fired (no ACK came)",
    "zero_window": "the receiver's window was zero: the sender waited for it to open",
    "receiver": "the receiver's window was too small for the data queued",
    "cwnd": "the congestion window was full: the sender waited for ACKs",
    "pacing": "the sender paced its segments out",
    "link": "the time was spent crossing the link (round trip)",
    "app": "nothing was queued: an application was idle (or busy)",
}
"""The cause vocabulary, in docs/explain.md order. A stall's causes join with "+"."""

HIGH, MEDIUM, LOW = 0.9, 0.6, 0.3
WINDOW_CAUSES = ("receiver", "zero_window")
"""Causes that say the receiver's window held the sender (never offer NODELAY for them)."""
PROBE_US = LINUX.probe0_min_us
"""The probe timer's floor (TCP_RTO_MIN): what releases corked or MSG_MORE data."""
JIFFY_US = LINUX.tick_us
"""One jiffy (HZ=250)."""
LATE_JIFFIES = 3
"""How late a jiffy timer may run on a busy host (softirq work, a loaded machine): on
this development machine the probe timer fired one jiffy late in 13 of 80 corked
releases when it was quiet, and up to three (223.8 ms) at load average 3-7
(docs/explain.md, "The probe timer's window")."""
EARLY_US = JIFFY_US
"""How much earlier than its jiffy arithmetic a timer can be seen to fire: the jiffy
counter at arming time may lag the clock by up to a tick (measured: a corked C client's
first request left 200.7 ms after it connected, against 204 ms for 51 jiffies)."""
APP_US = 4_000
"""The application's own time between what woke it arriving and its write (the timer is
armed then): a process blocked in read() is woken by the scheduler, which on a loaded
host takes milliseconds."""
WHEEL_LEVEL_START = 63
"""The timer wheel's level 1 begins 63 jiffies ahead (kernel/time/timer.c: LVL_START(1)
= (LVL_SIZE - 1) << 0); each level after it starts 8 times further out."""


def wheel_granularity(delta_j: int) -> int:
    """Jiffies by which the timer wheel rounds up a timer ``delta_j`` jiffies ahead
    (kernel/time/timer.c, calc_wheel_index and calc_index since the 4.8 rework): level 0
    fires on the jiffy after its expiry; a timer 63 jiffies or more ahead sits on level 1
    and fires on the next multiple of 8 jiffies after it, and so on (×8 a level)."""
    gran, start = 1, WHEEL_LEVEL_START
    while delta_j >= start:
        gran *= 8
        start *= 8
    return gran


def _ms(us: int) -> str:
    """µs as milliseconds without a trailing ".0" ("200", "220.5")."""
    return f"{us / 1000:.1f}".removesuffix(".0")


def probe_window(rtt_us: int) -> tuple[int, int]:
    """(earliest, latest) µs after a sender's last activity at which the probe timer that
    releases corked or MSG_MORE data fires, from the kernel's rule: tcp_check_probe_timer
    arms it when a write finds nothing in flight and the data held, for tcp_probe0_base =
    max(RTO, TCP_RTO_MIN) in jiffies (usecs_to_jiffies rounds up), with RTO = SRTT +
    RTTVAR and RTTVAR at least rto_min (after the first sample 2·RTT, so up to 3·RTT on a
    long path). The timer wheel then rounds it up (`wheel_granularity`: a jiffy, or 8
    jiffies at HZ=250 once RTO passes ~252 ms), it may run `LATE_JIFFIES` late, be seen
    `EARLY_US` early, and the application took up to `APP_US` to write.

    Measured on this kernel (6.18, HZ=250; tests/explain/test_real_programs.py and
    docs/explain.md): loopback 200.7-223.8 ms (window 200-224), a 20 ms path
    225.8-231.7 ms (220-244), a 100 ms path 311.7-319.8 ms (300-352)."""
    p = LINUX
    tick = p.tick_us
    floor_j = p.us_to_jiffies(p.probe0_min_us)
    # SRTT is never 0: a round trip too short to measure still makes RTO pass 200 ms
    rtt = max(rtt_us, 1)
    lo_j = max(p.us_to_jiffies(rtt + p.rto_min_us), floor_j)
    hi_j = max(p.us_to_jiffies(rtt + max(p.rto_min_us, 2 * rtt)), floor_j)
    late_j = hi_j + wheel_granularity(hi_j) + LATE_JIFFIES
    return lo_j * tick - EARLY_US, late_j * tick + APP_US


@dataclass(slots=True)
class Evidence:
    index: int          # segment index in the trace
    t: Micros           # capture-point time
    side: Side
    label: str
    note: str
    frame: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_ms": round(self.t / 1000, 3), "from": self.side.value,
                               "segment": self.label, "note": self.note}
        if self.frame:
            out["frame"] = self.frame
        return out

    def text(self) -> str:
        where = f"frame {self.frame}, " if self.frame else ""
        return (f"{where}{self.t / 1000:.3f} ms, {self.side.value} {self.label}: "
                f"{self.note}")


@dataclass(frozen=True, slots=True)
class Alternative:
    """Another reading of a stall the wire cannot rule out, at its own confidence."""

    cause: str
    confidence: float
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "confidence": self.confidence, "text": self.text}


@dataclass(slots=True)
class Stall:
    start: Micros
    end: Micros
    causes: list[str]
    confidence: float
    text: str
    evidence: list[Evidence] = field(default_factory=list)
    waiting: Side | None = None
    key: tuple[str, int] | None = None
    """(side, first byte) of the first data segment sent at or after the stall's end;
    pairs a capture stall with the model's."""
    link_part: Micros = Micros(0)
    model_ms: float | None = None
    reproduced: bool | None = None
    alternatives: list[Alternative] = field(default_factory=list)
    """Other readings the wire leaves open, each less likely than ``causes``."""
    first_frame: int = 0
    """The capture's frame number of the last segment before the quiet gap (0: none)."""
    end_frame: int = 0
    """The frame that ended it (the release)."""
    decided_by: str = "wire"
    """"wire" (the capture's timing) or "kernel" (a watch trace: `apply_kernel_word`)."""

    @property
    def duration(self) -> Micros:
        return Micros(self.end - self.start)

    @property
    def cause(self) -> str:
        return "+".join(self.causes)


class _SideIndex:
    """Per-side prefix tables over sends (by send time) and arrivals (by arrival time)."""

    def __init__(self, segs: list[SegmentRecord], side: Side, mss: int) -> None:
        self.sends = [i for i, s in enumerate(segs) if s.src is side]
        self.send_t = [segs[i].t for i in self.sends]
        high, small, small_end = 0, -1, 0
        self.high: list[int] = []
        self.small: list[int] = []
        self.small_end: list[int] = []
        for i in self.sends:
            s = segs[i]
            end = s.seq + s.length + (1 if "S" in s.flags or "F" in s.flags else 0)
            high = max(high, end)
            if s.length and s.length < mss and s.seq + s.length >= small_end:
                small, small_end = i, s.seq + s.length
            self.high.append(high)
            self.small.append(small)
            self.small_end.append(small_end)
        arr = sorted((s.arrive if s.arrive is not None else s.t, i)
                     for i, s in enumerate(segs) if s.src is not side)
        self.arr_t = [a for a, _ in arr]
        self.arr_i = [i for _, i in arr]
        ack = 0
        self.acked: list[int] = []
        self.win: list[int] = []
        for i in self.arr_i:
            s = segs[i]
            if "A" in s.flags:
                ack = max(ack, s.ack)
            self.acked.append(ack)
            self.win.append(s.window)

    def sent_before(self, t: int, strict: bool = True) -> int:
        """Position in `sends` of the last send before (or at) ``t``; -1 if none."""
        fn = bisect.bisect_left if strict else bisect.bisect_right
        return fn(self.send_t, t) - 1

    def arrived_by(self, t: int) -> int:
        return bisect.bisect_right(self.arr_t, t) - 1


@dataclass(slots=True)
class View:
    """A trace as seen from one capture point."""

    trace: Trace
    seen: list[Micros]
    retransmit: list[bool]
    frames: list[int]
    mss: int
    sack: bool = True
    _finder: _Finder | None = None

    def finder(self) -> _Finder:
        """The per-side indexes over this view, built once."""
        if self._finder is None:
            self._finder = _Finder(self)
        return self._finder


class RetransmitMarker:
    """The one retransmission rule (captures and model re-runs alike): a segment whose
    sequence space ends at or below the highest already sent by its side re-sends bytes;
    a second SYN is a retransmitted SYN."""

    __slots__ = ("high", "syn")

    def __init__(self) -> None:
        self.high = {Side.CLIENT: -1, Side.SERVER: -1}
        self.syn = {Side.CLIENT: False, Side.SERVER: False}

    def __call__(self, side: Side, seq: int, length: int, flags: str) -> bool:
        end = seq + length + (1 if "S" in flags or "F" in flags else 0)
        if "S" in flags:
            again = self.syn[side]
            self.syn[side] = True
        else:
            again = seq < end <= self.high[side]
        self.high[side] = max(self.high[side], end)
        return again


def view_of(trace: Trace, dist: Mapping[Side, int], mss: int, sack: bool = True) -> View:
    """A trace (e.g. the model's) seen from a capture point ``dist[side]`` µs from each
    host; retransmissions are marked the way `totrace` marks them."""
    seen = [Micros(s.t + dist[s.src]) for s in trace.segments]
    marker = RetransmitMarker()
    retrans = [marker(s.src, s.seq, s.length, s.flags) for s in trace.segments]
    return View(trace=trace, seen=seen, retransmit=retrans, frames=[0] * len(seen), mss=mss,
                sack=sack)


class _Finder:
    def __init__(self, view: View) -> None:
        self.v = view
        self.segs = view.trace.segments
        self.idx = {side: _SideIndex(self.segs, side, view.mss) for side in Side}

    def ev(self, i: int, note: str) -> Evidence:
        s = self.segs[i]
        return Evidence(index=i, t=self.v.seen[i], side=s.src, label=s.label(), note=note,
                        frame=self.v.frames[i])

    def state(self, side: Side, t: int, *, arrivals_before: bool = False
              ) -> tuple[int, int, int, int, int]:
        """(highest byte sent, highest byte ACKed, end of the last sub-MSS segment, last
        window heard from the peer, index of the last sub-MSS segment) of ``side`` at
        time ``t`` (sends strictly before; arrivals up to ``t``, or strictly before it)."""
        ix = self.idx[side]
        k = ix.sent_before(t)
        high = ix.high[k] if k >= 0 else 0
        small_end = ix.small_end[k] if k >= 0 else 0
        small = ix.small[k] if k >= 0 else -1
        a = (bisect.bisect_left(ix.arr_t, t) - 1) if arrivals_before else ix.arrived_by(t)
        acked = ix.acked[a] if a >= 0 else 0
        win = ix.win[a] if a >= 0 else 65535
        return high, acked, small_end, win, small

    # ------------------------------------------------------------ one stall
    def classify(self, p: int, e: int) -> Stall:
        """The stall between segment ``p`` (the last before a quiet gap) and ``e`` (the
        one that ended it): a reaction to an arrival (the link), else what held e's
        sender for the time it waited itself."""
        stall, own, trig = self._open(p, e)
        if own < STALL_MIN:
            return self._crossed_link(stall, e, own, trig)
        return self._sender_waited(stall, e, own)

    def _open(self, p: int, e: int) -> tuple[Stall, int, int | None]:
        """The stall from ``p`` to ``e`` before its cause is known, with the time e's
        sender waited itself (since its previous send or the last arrival it saw) and
        that arrival's index (None: nothing had arrived)."""
        segs, seen = self.segs, self.v.seen
        es = segs[e]
        ix_snd = self.idx[es.src]
        # the send of E just before e in E's own order (sends at equal times count)
        pos = bisect.bisect_left(ix_snd.sends, e)
        prev_send_t = segs[ix_snd.sends[pos - 1]].t if pos > 0 else None
        a = ix_snd.arrived_by(es.t)
        # a tie in time is resolved by trace order (a reply cannot precede its cause)
        while a >= 0 and ix_snd.arr_i[a] > e and ix_snd.arr_t[a] == es.t:
            a -= 1
        last_arr_t = ix_snd.arr_t[a] if a >= 0 else None
        trig = ix_snd.arr_i[a] if a >= 0 else None
        marks = [t for t in (prev_send_t, last_arr_t) if t is not None]
        own = es.t - max(marks) if marks else 0
        start, end = seen[p], seen[e]
        gap = end - start
        link_part = Micros(max(0, gap - max(own, 0)))
        stall = Stall(start=Micros(start), end=Micros(end), causes=[], confidence=MEDIUM,
                      text="", link_part=link_part, first_frame=self.v.frames[p],
                      end_frame=self.v.frames[e])
        stall.evidence.append(self.ev(p, "the last segment before the quiet gap"))
        return stall, own, trig

    def _crossed_link(self, stall: Stall, e: int, own: int, trig: int | None) -> Stall:
        """e was a reaction to something that arrived just before: the gap is the time
        that something spent on the wire (and what the reaction released, when it did)."""
        es = self.segs[e]
        snd, peer = es.src, es.src.peer
        stall.causes = ["link"]
        stall.confidence = HIGH
        held = self._held_until(stall, e, trig) if trig is not None else ""
        if not es.length and not held:
            found = self._peer_held(e)
            if found is not None:
                first, why, follow, _sure = found
                stall.causes.insert(0, first)
                held = f" (the {peer.value} sent at once when it arrived: {why})"
                stall.evidence.append(self.ev(follow, "sent as soon as that ACK "
                                              "arrived: it had been held"))
        stall.evidence.append(self.ev(e, f"sent {own / 1000:.1f} ms after the {snd.value} "
                                      f"last acted: the wait was the link{held}"))
        stall.waiting = peer      # the peer waited for this answer to cross
        gap = stall.end - stall.start
        stall.text = (f"{gap / 1000:.1f} ms crossing the link: the {snd.value} answered "
                      f"at once{held}")
        if not es.length and not held and self._peer_cut_off(e):
            # whether this ACK released held data (Nagle…) is beyond the capture
            stall.confidence = LOW
            stall.text += (f" (partial: the capture ends before the {peer.value} sent "
                           "again)")
        return self._finish(stall, e)

    def _held_until(self, stall: Stall, e: int, trig: int) -> str:
        """The arrival ``trig`` that e answered, as evidence; and what e's data had
        waited for until it came ("" when nothing: Nagle's ACK or the congestion
        window's, which joins the causes)."""
        es = self.segs[e]
        snd = es.src
        tr = self.segs[trig]
        tr_at = tr.arrive if tr.arrive is not None else tr.t
        stall.evidence.append(self.ev(trig, f"arrived at the {snd.value} "
                                      f"{(es.t - tr_at) / 1000:.2f} ms before it "
                                      "sent the next segment"))
        high, acked, small_end, _w, small = self.state(snd, tr_at, arrivals_before=True)
        if es.length and small_end > acked and small >= 0:
            return " (its data had been held by Nagle until this ACK)"
        if (es.length >= self.v.mss and high - acked >= 2 * self.v.mss
                and "A" in tr.flags and tr.ack > acked):
            stall.causes.insert(0, "cwnd")
            return (f" (its data waited for this ACK: {high - acked} B were in "
                    "flight, the congestion window was full)")
        return ""

    def _sender_waited(self, stall: Stall, e: int, own: int) -> Stall:
        """e's sender itself waited ``own`` µs before sending e: a retransmission, a pure
        ACK, data, or a control segment the application asked for."""
        es = self.segs[e]
        if self.v.retransmit[e]:
            return self._retransmission(stall, e, own)
        if not es.length and "S" not in es.flags and "F" not in es.flags:
            return self._pure_ack(stall, e, own)
        if es.length:
            return self._data(stall, e, own)
        snd = es.src
        ms = own / 1000
        stall.causes = ["app"]
        stall.confidence = MEDIUM
        what = "closed the connection" if "F" in es.flags else "sent a control segment"
        stall.evidence.append(self.ev(e, f"the {snd.value} {what} {ms:.1f} ms after it last "
                                      "acted"))
        stall.waiting = snd.peer
        stall.text = f"the {snd.value} application {what} after {ms:.1f} ms idle"
        return self._finish(stall, e)

    def _retransmission(self, stall: Stall, e: int, own: int) -> Stall:
        es = self.segs[e]
        snd = es.src
        high, acked, *_ = self.state(snd, es.t)
        end = es.seq + es.length + (1 if "S" in es.flags or "F" in es.flags else 0)
        sends = self.idx[snd].sends
        pos = bisect.bisect_left(sends, e)
        earlier = any(self.v.retransmit[i] and self.segs[i].seq < end
                      and self.segs[i].seq + max(self.segs[i].length, 1) > es.seq
                      for i in sends[max(0, pos - 64):pos])
        # the sender re-sent, so it had not seen an ACK for these bytes — even when the
        # capture shows one (lost after the capture point)
        tail = end >= high
        lost_ack = es.seq + es.length <= acked and es.length > 0
        if "S" in es.flags:
            cause, note = "rto", "the SYN was sent again after the handshake timer (1 s)"
            conf = HIGH
        elif tail and not earlier and self.v.sack and own < 1_000_000:
            cause, note = "tlp", "the last unACKed segment re-sent: a tail loss probe"
            conf = MEDIUM if lost_ack else HIGH
        else:
            cause, note = "rto", ("the oldest unACKed segment re-sent: the retransmission "
                                  "timer")
            conf = HIGH if earlier or es.seq <= acked else MEDIUM
        stall.causes = [cause]
        stall.confidence = conf
        if lost_ack:
            note += (" (the capture shows these bytes ACKed: that ACK was lost after the "
                     "capture point)")
        stall.evidence.append(self.ev(e, f"{note}, {own / 1000:.1f} ms after the "
                                      f"{snd.value} last acted"))
        stall.waiting = snd
        what = (f"bytes {es.seq}:{es.seq + es.length} ({es.length} B)" if es.length
                else es.label())    # a segment's label starts with its flags ('.' = ACK)
        stall.text = (f"the {snd.value} got no ACK and re-sent {what} after "
                      f"{own / 1000:.1f} ms "
                      f"({'tail loss probe' if cause == 'tlp' else 'RTO'})")
        return self._finish(stall, e)

    def _peer_held(self, e: int) -> tuple[str, str, int, bool] | None:
        """When the peer of e's sender sent data at once on e's arrival, it had that data
        held: (cause, why, index of that data, sure) — else None."""
        segs = self.segs
        es = segs[e]
        snd, peer = es.src, es.src.peer
        ix_peer = self.idx[peer]
        arrive = es.arrive if es.arrive is not None else es.t
        j = bisect.bisect_left(ix_peer.send_t, arrive)
        while j < len(ix_peer.sends) and ix_peer.sends[j] < e and \
                segs[ix_peer.sends[j]].t == arrive:
            j += 1        # a send in the same µs but before e in trace order is no reaction
        follow = ix_peer.sends[j] if j < len(ix_peer.sends) else None
        if (follow is None or not segs[follow].length or segs[follow].t - arrive > REACT_US
                or self.v.retransmit[follow]):
            return None
        # data reaching the peer in between (a reply) is the likelier cause
        k = ix_peer.arrived_by(segs[follow].t)
        while k >= 0 and ix_peer.arr_t[k] >= arrive:
            i = ix_peer.arr_i[k]
            if i != e and i < follow and segs[i].length:
                return None
            k -= 1
        f = segs[follow]
        high, acked, small_end, win, small = self.state(peer, arrive, arrivals_before=True)
        # the window's right edge (ACK + window) e offered beyond the one before it: a
        # window update releases data without ACKing anything new
        opened = es.ack + es.window > acked + win
        if "A" in es.flags and es.ack <= acked and not opened:
            return None   # e ACKed nothing new and opened no window: it released nothing
        outstanding = high - acked
        if outstanding + f.length > win and opened and \
                f.seq + f.length <= es.ack + es.window:
            # the data did not fit in the window offered before e, and fits in e's: the
            # receiver's window held it, whatever Nagle would have done (checked first)
            cause = "zero_window" if win == 0 else "receiver"
            why = (f"the {snd.value}'s window was zero" if win == 0 else
                   f"{outstanding} B in flight filled the {snd.value}'s {win} B window")
            return cause, why, follow, True
        if small >= 0 and small_end > acked:
            return ("nagle", f"Nagle: {segs[small].length} B sent earlier were still "
                    f"unACKed, so this {f.length} B segment waited", follow, True)
        if outstanding >= 2 * self.v.mss and f.length >= self.v.mss:
            return ("cwnd", f"the congestion window was full ({outstanding} B in flight)",
                    follow, True)
        if "P" not in f.flags and f.length < self.v.mss:
            return ("msg_more", "sent with MSG_MORE (no PSH), it waited for the next push, "
                    "which this ACK triggered", follow, False)
        return ("nagle", "the data was held until this ACK", follow, False)

    def _window_full(self, side: Side, t: int) -> tuple[int, int, int] | None:
        """(bytes in flight, window, next segment's length) when ``side`` was limited by
        the window its peer last offered before ``t``: its next new data, sent as soon as a
        later segment of the peer arrived (so it was queued, not written late), did not
        fit in that window (a full or zero window, or one too small for a segment: the
        sender avoids silly windows). Else None."""
        _high, acked, _se, win, _sm = self.state(side, t, arrivals_before=True)
        ix = self.idx[side]
        k = bisect.bisect_left(ix.send_t, t)
        for i in ix.sends[k:k + 64]:
            s = self.segs[i]
            if not s.length or self.v.retransmit[i]:
                continue
            a = ix.arrived_by(s.t)
            reacted = a >= 0 and ix.arr_t[a] >= t and s.t - ix.arr_t[a] <= REACT_US
            if reacted and s.seq + s.length > acked + win:
                high = ix.high[bisect.bisect_left(ix.sends, i) - 1]
                return max(0, high - acked), win, s.length
            return None
        return None

    def _window_opened(self, stall: Stall, e: int, own: int,
                       found: tuple[str, str, int, bool]) -> Stall:
        """e (a bare ACK or window update) opened the window its peer's data waited for."""
        es = self.segs[e]
        snd, peer = es.src, es.src.peer
        cause, why, follow, _sure = found
        f = self.segs[follow]
        arrive = es.arrive if es.arrive is not None else es.t
        ms = own / 1000
        stall.causes = [cause]
        stall.confidence = HIGH
        stall.evidence.append(self.ev(e, f"ACK {es.ack} with a {es.window} B window after "
                                      f"{ms:.1f} ms: it opened the window"))
        stall.evidence.append(self.ev(follow, f"sent {(f.t - arrive) / 1000:.2f} ms after "
                                      "that ACK arrived: it had waited for the window"))
        stall.waiting = peer
        stall.text = (f"the {peer.value}'s {f.length} B waited {ms:.1f} ms for the "
                      f"{snd.value}'s receive window to open: {why} (its application read "
                      "slowly, or its buffer is small)")
        return self._finish(stall, e)

    def _window_still_shut(self, stall: Stall, e: int, own: int,
                           full: tuple[int, int, int]) -> Stall:
        """e ACKed the peer's data but opened no room: the peer, window-limited, waited on."""
        es = self.segs[e]
        snd, peer = es.src, es.src.peer
        flight, win, size = full
        ms = own / 1000
        # a zero window before, or now (Wireshark's "TCP ZeroWindow" on this ACK)
        stall.causes = ["zero_window" if win == 0 or es.window == 0 else "receiver"]
        stall.confidence = MEDIUM
        offered = ("a zero window" if es.window == 0 else f"a {es.window} B window")
        stall.evidence.append(self.ev(e, f"ACK {es.ack} after {ms:.1f} ms with {offered}: "
                                      f"the {peer.value}'s queued data still had no room"))
        stall.waiting = peer
        stall.text = (f"the {peer.value}'s next {size} B did not fit in the {snd.value}'s "
                      f"{win} B receive window ({flight} B in flight), so it waited; the "
                      f"{snd.value}'s ACK after {ms:.1f} ms offered {offered} (its "
                      "application read slowly, or its buffer is small)")
        return self._finish(stall, e)

    def _peer_cut_off(self, e: int) -> bool:
        """The peer of e's sender sent nothing after e arrived and had not closed: the
        capture ends before anything e released could be seen."""
        segs = self.segs
        es = segs[e]
        ix_peer = self.idx[es.src.peer]
        arrive = es.arrive if es.arrive is not None else es.t
        if ix_peer.sends and ix_peer.send_t[-1] >= arrive:
            return False
        return not any("F" in segs[i].flags or "R" in segs[i].flags
                       for i in ix_peer.sends[-2:])

    def _pure_ack(self, stall: Stall, e: int, own: int) -> Stall:
        """e, a pure ACK its sender waited ``own`` µs to send: a window reopened or
        probed, a window update the peer's data waited for, a delayed ACK (with what it
        released, if anything), or an idle connection."""
        segs = self.segs
        es = segs[e]
        snd = es.src
        ix_snd = self.idx[snd]
        pos = bisect.bisect_left(ix_snd.sends, e)
        prev = segs[ix_snd.sends[pos - 1]] if pos > 0 else None
        if prev is not None and prev.window == 0 and es.window > 0:
            return self._zero_window_reopened(stall, e, own, ix_snd.sends[pos - 1])
        _high, acked, _se, peer_win, _sm = self.state(snd, es.t)
        if peer_win == 0:
            return self._zero_window_probed(stall, e, own, acked)
        found = self._peer_held(e)
        if found is not None and found[0] in WINDOW_CAUSES:
            # an ACK or a bare window update that made room for the peer's queued data
            return self._window_opened(stall, e, own, found)
        if prev is None or es.ack > prev.ack:
            return self._delayed_ack(stall, e, own, found)
        stall.causes = ["app"]
        stall.confidence = LOW
        stall.evidence.append(self.ev(e, f"an ACK with nothing new after {own / 1000:.1f} "
                                      "ms"))
        stall.waiting = None
        stall.text = f"the connection was idle for {own / 1000:.1f} ms"
        return self._finish(stall, e)

    def _zero_window_reopened(self, stall: Stall, e: int, own: int, shut: int) -> Stall:
        """e's sender had advertised a zero window (in segment ``shut``) and e reopens it:
        its application did not read for ``own`` µs."""
        es = self.segs[e]
        snd = es.src
        ms = own / 1000
        stall.causes = ["zero_window"]
        stall.confidence = HIGH
        stall.evidence.append(self.ev(shut, "advertised a zero window"))
        stall.evidence.append(self.ev(e, f"window update to {es.window} B after "
                                      f"{ms:.1f} ms: the {snd.value} application read"))
        stall.waiting = snd.peer
        stall.text = (f"the {snd.value}'s receive window was zero for {ms:.1f} ms: its "
                      "application did not read, so the "
                      f"{snd.peer.value} could not send")
        return self._finish(stall, e)

    def _zero_window_probed(self, stall: Stall, e: int, own: int, acked: int) -> Stall:
        """The peer's window was zero and e probed it."""
        es = self.segs[e]
        snd, peer = es.src, es.src.peer
        ms = own / 1000
        # Linux probes a zero window with a bare ACK one byte below snd_una (the peer
        # must answer it with its window): the sender waited for the window to open
        probe = es.seq == acked - 1
        stall.causes = ["zero_window"]
        stall.confidence = HIGH if probe else MEDIUM
        what = ("a window probe (seq one below the ACKed byte)" if probe
                else "a bare ACK")
        stall.evidence.append(self.ev(e, f"{what} into the {peer.value}'s zero window "
                                      f"after {ms:.1f} ms"))
        stall.waiting = snd
        stall.text = (f"the {peer.value}'s window was zero: the {snd.value} probed after "
                      f"{ms:.1f} ms")
        return self._finish(stall, e)

    def _delayed_ack(self, stall: Stall, e: int, own: int,
                     found: tuple[str, str, int, bool] | None) -> Stall:
        """e ACKed new data after ``own`` µs: a delayed ACK. What it released (``found``:
        the peer's held data), a window that stayed shut, a capture cut off before the
        answer, or nothing waiting (the application had not replied yet)."""
        segs = self.segs
        es = segs[e]
        snd, peer = es.src, es.src.peer
        ms = own / 1000
        if found is not None:
            return self._delayed_ack_released(stall, e, own, found)
        full = self._window_full(peer, es.arrive if es.arrive is not None else es.t)
        if full is not None:
            return self._window_still_shut(stall, e, own, full)
        if self._peer_cut_off(e):
            # the capture ends before the peer could answer this ACK: whether it
            # released held data (Nagle, cork…) is beyond the capture
            stall.causes = ["delayed_ack"]
            stall.confidence = LOW
            stall.evidence.append(self.ev(e, f"a pure ACK {ms:.1f} ms after the data "
                                          "it ACKs arrived: a delayed ACK; the capture "
                                          f"ends before the {peer.value} sent again"))
            stall.waiting = peer
            stall.text = (f"the {snd.value} delayed its ACK {ms:.1f} ms (partial: the "
                          f"capture ends before the {peer.value} sent again, so whether "
                          "data waited for this ACK is not in it)")
            return self._finish(stall, e)
        stall.causes = ["app"]
        stall.confidence = MEDIUM
        stall.evidence.append(self.ev(e, f"a delayed ACK after {ms:.1f} ms; nothing was "
                                      f"waiting for it (the {snd.value} had no reply "
                                      "ready)"))
        stall.waiting = peer
        stall.text = (f"nothing was queued: the {snd.value} application had not answered "
                      f"yet (its delayed ACK went out after {ms:.1f} ms)")
        return self._finish(stall, e)

    def _delayed_ack_released(self, stall: Stall, e: int, own: int,
                              found: tuple[str, str, int, bool]) -> Stall:
        """e, a delayed ACK, released the peer's held data (``found``): the held data's
        cause and the delayed ACK together (sure when the delay is the timer's 40 or
        200 ms and the hold was plain)."""
        segs = self.segs
        es = segs[e]
        snd, peer = es.src, es.src.peer
        ms = own / 1000
        delack_conf = HIGH if 30_000 <= own <= 50_000 or 180_000 <= own <= 220_000 \
            else MEDIUM
        first, why, follow, sure = found
        f = segs[follow]
        arrive = es.arrive if es.arrive is not None else es.t
        if not sure:
            delack_conf = MEDIUM
        stall.causes = [first, "delayed_ack"]
        stall.confidence = delack_conf
        stall.evidence.append(self.ev(e, f"a pure ACK {ms:.1f} ms after the data it "
                                      "ACKs arrived: a delayed ACK"))
        stall.evidence.append(self.ev(follow, f"sent {(f.t - arrive) / 1000:.2f} ms "
                                      "after that ACK arrived: it had been held"))
        stall.waiting = peer
        stall.text = (f"the {peer.value}'s {f.length} B waited {ms:.1f} ms: {why}, "
                      f"and the {snd.value} delayed its ACK")
        return self._finish(stall, e)

    def _data(self, stall: Stall, e: int, own: int) -> Stall:
        """e, new data its sender waited ``own`` µs to send: a zero or small window, the
        probe timer releasing corked or MSG_MORE data, pacing, or a late write."""
        segs = self.segs
        es = segs[e]
        snd, peer = es.src, es.src.peer
        high, acked, _se, win, _sm = self.state(snd, es.t)
        outstanding = max(0, high - acked)
        ms = own / 1000
        if win == 0:
            stall.causes = ["zero_window"]
            stall.confidence = HIGH
            stall.evidence.append(self.ev(e, f"sent into a zero window after {ms:.1f} ms: a "
                                          "window probe"))
            stall.waiting = snd
            stall.text = (f"the {peer.value}'s window was zero: the {snd.value} probed after "
                          f"{ms:.1f} ms")
            return self._finish(stall, e)
        if outstanding and outstanding + es.length > win >= 0 and win < 4 * self.v.mss:
            stall.causes = ["receiver"]
            stall.confidence = MEDIUM
            stall.evidence.append(self.ev(e, f"{outstanding} B in flight against a {win} B "
                                          "window"))
            stall.waiting = snd
            stall.text = f"the {peer.value}'s small receive window held the {snd.value}'s data"
            return self._finish(stall, e)
        rtt = self._rtt()
        probe_lo, probe_hi = probe_window(rtt)
        # the probe timer runs from the write: after the last thing that could have
        # prompted it (an arrival, the sender's own data), not after a pure ACK the
        # sender's kernel sent on its own (a delayed ACK while the data sat corked)
        quiet = self._since_prompt(e)
        probe_time = not outstanding and probe_lo <= quiet <= probe_hi
        held = self._held_before(e) if not outstanding else None
        # the timer runs from the held segment, and is max(RTO, 200 ms): up to the 1 s
        # initial RTO when the round-trip estimate is poor
        held_time = held is not None and PROBE_US - JIFFY_US // 4 <= es.t - segs[held].t \
            <= 1_000_000 + rtt + JIFFY_US
        if probe_time or held_time:
            return self._probe_release(stall, e, own, quiet, held if held_time else None,
                                       probe_time)
        pos = bisect.bisect_left(self.idx[snd].sends, e)
        prev = segs[self.idx[snd].sends[pos - 1]] if pos > 0 else None
        if (outstanding and es.length >= self.v.mss and prev is not None
                and prev.length >= self.v.mss and own < 100_000):
            stall.causes = ["pacing"]
            stall.confidence = LOW
            stall.evidence.append(self.ev(e, f"a full segment {ms:.1f} ms after the previous "
                                          "one with no ACK in between: paced"))
            stall.waiting = peer
            stall.text = f"the {snd.value} paced its full-sized segments {ms:.1f} ms apart"
            return self._finish(stall, e)
        stall.causes = ["app"]
        stall.waiting = peer
        stall.confidence = HIGH if not outstanding else MEDIUM
        stall.evidence.append(self.ev(e, f"new data {ms:.1f} ms after the {snd.value} last "
                                      "acted, with nothing held: the application wrote late"))
        stall.text = f"nothing was queued: the {snd.value} application was idle for {ms:.1f} ms"
        return self._finish(stall, e)

    def _probe_release(self, stall: Stall, e: int, own: int, quiet: int, held: int | None,
                       probe_time: bool) -> Stall:
        """The probe timer released e's data, queued before the gap with nothing in
        flight: e left ``quiet`` µs after its sender last acted (``probe_time``: inside
        the timer's window), and ``held`` is the earlier segment of the same write that
        left without PSH at the timer's distance (None: no such segment)."""
        es = self.segs[e]
        snd, peer = es.src, es.src.peer
        ms = own / 1000
        rtt = self._rtt()
        probe_lo, probe_hi = probe_window(rtt)
        held_time = held is not None
        # tcp_write_wakeup sends the held data with PSH set, so a release without PSH is
        # MSG_MORE's (no push was ever asked for); a pushed one is TCP_CORK or MSG_MORE —
        # the wire cannot tell them apart. Bytes visibly held (the write's first part left
        # without PSH) and a release in the timer's window make it sure; either alone
        # leaves room for another reading.
        cause = "msg_more" if "P" not in es.flags else "cork"
        stall.causes = [cause]
        stall.confidence = HIGH if probe_time and held_time else MEDIUM
        if held is not None:
            stall.evidence.append(self.ev(held, "sent without PSH: the rest of the "
                                          "write stayed queued"))
        window = (f"the probe timer's window {_ms(probe_lo)}–{_ms(probe_hi)} ms")
        qms = quiet / 1000
        stall.evidence.append(self.ev(e, (
            f"sent {qms:.1f} ms after the {snd.value} last acted, with nothing in "
            f"flight: inside {window} (max(RTO, 200 ms) for a {rtt / 1000:.1f} ms round "
            "trip, rounded up by the timer wheel)") if probe_time else (
            f"sent {ms:.1f} ms after the {snd.value} last acted with nothing in flight: "
            "the probe timer's release of held data")))
        stall.waiting = peer
        held_by = ("MSG_MORE" if cause == "msg_more" else "TCP_CORK or MSG_MORE")
        stall.text = (f"the {snd.value}'s {es.length} B were held {qms:.1f} ms by "
                      f"{held_by} until the probe timer (max(RTO, 200 ms)) released "
                      "them")
        if cause == "cork":
            stall.text += (": a cork never cleared after the last write, or MSG_MORE "
                           "on the last write — the wire cannot tell which")
        if probe_time and not held_time:
            # the competing reading: think time that lands in the window by chance
            stall.alternatives.append(Alternative(
                cause="app", confidence=LOW,
                text=(f"an idle application: the {snd.value} wrote {qms:.1f} ms after "
                      f"it last acted, think time that happens to fall in {window}")))
        return self._finish(stall, e)

    def _since_prompt(self, e: int) -> int:
        """µs from the last event that could have prompted the sender of ``e`` to write
        (a segment arriving, or its own data, SYN or FIN leaving) to ``e``: its own pure
        ACKs are the kernel's, not the application's."""
        segs = self.segs
        es = segs[e]
        ix = self.idx[es.src]
        marks = []
        a = ix.arrived_by(es.t)
        while a >= 0 and ix.arr_i[a] > e and ix.arr_t[a] == es.t:
            a -= 1
        if a >= 0:
            marks.append(ix.arr_t[a])
        pos = bisect.bisect_left(ix.sends, e) - 1
        while pos >= 0:
            s = segs[ix.sends[pos]]
            if s.length or "S" in s.flags or "F" in s.flags:
                marks.append(s.t)
                break
            pos -= 1
        return es.t - max(marks) if marks else 0

    def _held_before(self, e: int) -> int | None:
        """The sender's data segment just before ``e`` when it carried no PSH (the write it
        belonged to had more bytes, still queued), else None."""
        segs = self.segs
        ix = self.idx[segs[e].src]
        pos = bisect.bisect_left(ix.sends, e) - 1
        while pos >= 0 and not segs[ix.sends[pos]].length:
            pos -= 1
        if pos < 0 or self.v.retransmit[ix.sends[pos]]:
            return None
        prev = segs[ix.sends[pos]]
        return ix.sends[pos] if "P" not in prev.flags else None

    def _rtt(self) -> int:
        return int(self.v.trace.meta.get("rtt_ms", 0) * 1000) if isinstance(
            self.v.trace.meta.get("rtt_ms", 0), int | float) else 0

    def _finish(self, stall: Stall, e: int) -> Stall:
        # a quiet gap longer than the wait the cause explains spent the rest on the wire
        if stall.link_part >= STALL_MIN and "link" not in stall.causes:
            stall.causes.append("link")
        # the pairing key: the first data segment sent at or after the stall's end
        segs = self.segs
        for i in range(e, min(len(segs), e + 64)):
            if segs[i].length:
                stall.key = (segs[i].src.value, segs[i].seq)
                break
        return stall


def wire_causes(trace: Trace) -> dict[tuple[int, int], Stall]:
    """The stalls of a trace that has no hold events (a real-socket run), named from the
    wire alone as explain names a capture's: keyed by (start, end) send times, as
    `nagle_sim.trace.summary.stalls` sees its gaps (the trace's own timeline, distance 0)."""
    mss = int(trace.meta.get("mss", 1448) or 1448) if isinstance(
        trace.meta.get("mss", 1448), int) else 1448
    view = view_of(trace, {Side.CLIENT: 0, Side.SERVER: 0}, mss)
    return {(s.start, s.end): s for s in find_stalls(view)}


class _Capped(list[Stall]):
    """A list of stalls whose confidence is capped as they are added."""

    def __init__(self, cap: float) -> None:
        super().__init__()
        self.cap = cap

    def append(self, stall: Stall) -> None:
        stall.confidence = min(stall.confidence, self.cap)
        super().append(stall)


def find_stalls(view: View, minimum: Micros = STALL_MIN, limit: int = 100_000) -> list[Stall]:
    """Every quiet gap ≥ ``minimum`` at the capture point while the connection is open,
    classified. ``limit`` bounds the work on hostile captures."""
    segs = view.trace.segments
    order = sorted(range(len(segs)), key=view.seen.__getitem__)   # stable: ties keep order
    finder = view.finder()
    out: list[Stall] = []
    # facts a handshake would have given but were inferred (a capture that starts
    # mid-connection: `totrace`) bound how sure any verdict can be
    cap = view.trace.meta.get("confidence_cap")
    if isinstance(cap, int | float) and not isinstance(cap, bool):
        out = _Capped(float(cap))
    fins: set[Side] = set()
    for a, b in zip(order, order[1:], strict=False):
        sa = segs[a]
        if "F" in sa.flags:
            fins.add(sa.src)
        if "R" in sa.flags or len(fins) == 2:
            break
        if view.seen[b] - view.seen[a] >= minimum:
            stall = finder.classify(a, b)
            # rows in the order the capture has them (frame numbers; the model's trace
            # has none: its time order), whatever order the rules cited them in
            stall.evidence.sort(key=lambda ev: (ev.frame, ev.t, ev.index))
            out.append(stall)
            if len(out) >= limit:
                break
    return out


# ---------------------------------------------------------------- the kernel's word
@dataclass(frozen=True, slots=True)
class KernelVerdict:
    """What the kernel decided for one stall (from a `watch` trace of the connection):
    its causes in explain's vocabulary, the sentence, and the decisions behind it."""

    causes: tuple[str, ...]
    text: str
    evidence: tuple[str, ...] = ()


class KernelWord(Protocol):
    """The seam for a watch trace given with the capture: for a stall found on the wire,
    what the kernel itself decided there (None when it recorded nothing for it). When
    given, the kernel's word decides (`apply_kernel_word`); reading a watch trace into
    one of these is watch's side of the seam."""

    def verdict(self, stall: Stall, trace: Trace) -> KernelVerdict | None: ...


def apply_kernel_word(stalls: list[Stall], trace: Trace, word: KernelWord) -> int:
    """Let the kernel decide: each stall it has a verdict for takes the kernel's causes
    and sentence (confidence 1.0, ``decided_by`` "kernel"); when the wire read it
    otherwise, the wire's reading becomes an alternative. Returns how many it decided."""
    decided = 0
    for st in stalls:
        v = word.verdict(st, trace)
        if v is None:
            continue
        decided += 1
        if list(v.causes) != st.causes:
            st.alternatives = [Alternative(cause=st.cause, confidence=st.confidence,
                                           text=f"the wire's reading: {st.text}")]
        else:
            st.alternatives = []
        st.causes = list(v.causes)
        st.text = v.text
        st.confidence = 1.0
        st.decided_by = "kernel"
        st.evidence.extend(Evidence(index=-1, t=st.end, side=st.waiting or Side.CLIENT,
                                    label="kernel", note=line) for line in v.evidence)
    return decided
