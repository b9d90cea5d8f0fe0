"""A sans-I/O TCP endpoint that decides, as Linux does, when small segments and ACKs leave.

Owns: one side's TCP state (send queue, Nagle/CORK/NODELAY, congestion window, receive
queue, delayed-ACK engine, timers as deadlines) and the trace of its decisions.
Must not import I/O, clocks or UI libraries: standard library only.

Theory of operation
-------------------
Every input takes ``now`` (integer µs): ``connect``, ``app_write``, ``app_read``,
``set_option``, ``app_close``, ``receive_segment``, ``on_deadline``. Outputs are pulled:
``segments_to_send()`` drains what the endpoint transmitted, ``drain_events()`` its
decisions, ``next_deadline()`` the earliest armed timer. ``on_deadline(now)`` fires every
timer due at or before ``now`` and does nothing otherwise, so a stale wake-up is harmless.

The send side follows tcp_sendmsg_locked → tcp_push → __tcp_push_pending_frames →
tcp_write_xmit: data fills the tail skb; once a skb reaches size_goal (half the peer's
window, at most 64 KB) it is pushed at once; at the end of the call the tail is pushed
with ``nonagle`` (TCP_NAGLE_CORK for MSG_MORE), so a write's last piece always has PSH.
Only the tail skb is subject to Nagle/CORK. When a push finds nothing in flight and sends
nothing, the zero-window probe timer is armed at max(RTO, 200 ms): that is the "200 ms
CORK ceiling" of tcp(7), and what releases MSG_MORE data.

The receive side follows tcp_event_data_recv (ato adaptation, quick-ACK budget),
__tcp_ack_snd_check (ACK now or delay), tcp_send_delayed_ack (deadline in jiffies),
tcp_delack_timer_handler (ping-pong exit) and __tcp_cleanup_rbuf (ACK on read). All of
ato, lrcvtime and the timers are in jiffies, and a timer due at jiffy J fires at the start
of J+1, which is why a 40 ms delayed ACK takes 40–44 ms at HZ=250.

Non-Linux profiles (``AckStyle.CLASSIC``) use the RFC 1122 rule instead: ACK every Nth
segment or when a fixed timer expires.

Queued data is kept in MSS-sized pieces; tcp_write_xmit's TSO skbs are built from them at
send time (`_burst`: tcp_cwnd_test, tcp_tso_autosize, tcp_mss_split_point), and a burst
crosses the wire whole on loopback or cut into MSS segments, PSH on its last, elsewhere.
SIMPLIFICATION: no tcp_tso_should_defer (TSO deferral waiting for a bigger cwnd opening).
SIMPLIFICATION: the link never loses or reorders; out-of-order queues and SACK are absent.
SIMPLIFICATION: tcp_grow_window's ``quick |= 1`` and TCP Small Queues are not modelled.
SIMPLIFICATION: the send buffer is unbounded (writes never block).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

from .bbr import Bbr, RateSample
from .config import AckStyle, NagleStyle, SocketOptions, StackProfile
from .events import ACK, FIN, PSH, RST, SYN, Kind, Micros, Reason, Segment, Side, Timer, TraceEvent


class Nonagle:
    """tp->nonagle bits (include/net/tcp.h). Plain ints: IntFlag is too slow here."""

    OFF = 1     # TCP_NODELAY
    CORK = 2    # TCP_CORK (or MSG_MORE for one push)
    PUSH = 4    # "cork is overridden for already queued data"


class AckPending:
    """icsk_ack.pending bits (include/net/inet_connection_sock.h)."""

    SCHED = 1
    TIMER = 2
    PUSHED = 4
    PUSHED2 = 8
    NOW = 16


class State(Enum):
    CLOSED = "CLOSED"
    LISTEN = "LISTEN"
    SYN_SENT = "SYN_SENT"
    SYN_RCVD = "SYN_RCVD"
    ESTABLISHED = "ESTABLISHED"
    FIN_WAIT1 = "FIN_WAIT1"
    FIN_WAIT2 = "FIN_WAIT2"
    CLOSE_WAIT = "CLOSE_WAIT"
    CLOSING = "CLOSING"
    LAST_ACK = "LAST_ACK"
    TIME_WAIT = "TIME_WAIT"


class SockOpt(Enum):
    NODELAY = "nodelay"
    CORK = "cork"
    QUICKACK = "quickack"


class ModelError(Exception):
    """The application asked for something the socket cannot do in its state."""


@dataclass(slots=True)
class _Skb:
    seq: int
    length: int
    psh: bool = False
    fin: bool = False
    sent_at: int = -1
    retransmitted: bool = False
    # tcp_rate_skb_sent's snapshot (TCP_SKB_CB(skb)->tx)
    tx_delivered: int = 0
    tx_delivered_mstamp: int = 0
    tx_first_tx: int = 0
    tx_app_limited: bool = False

    @property
    def end(self) -> int:
        return self.seq + self.length + (1 if self.fin else 0)


_SYN_ACK = SYN | ACK
_TCP_HDR = 32  # 20-byte header + 12-byte timestamp option, as Linux sends by default
_TCP_MIN_MSS = 88


class Endpoint:
    """One side of a TCP connection (see the module docstring)."""

    def __init__(self, side: Side, profile: StackProfile, options: SocketOptions,
                 mss: int) -> None:
        self.side = side
        self.profile = profile
        self.mss = mss
        self.state = State.CLOSED if side is Side.CLIENT else State.LISTEN
        self._events: list[TraceEvent] = []
        self._out: list[Segment] = []
        self.timers: dict[Timer, Micros] = {}
        self._phase = profile.jiffy_phase_us % profile.tick_us if profile.jiffy_phase_us >= 0 \
            else profile.tick_us // 2

        # send side (tcp_sock)
        self.nonagle = 0
        if options.nodelay:
            self.nonagle |= Nonagle.OFF
        if options.cork:
            self.nonagle |= Nonagle.CORK
        self.snd_una = 0
        self.snd_nxt = 0
        self.write_seq = 0
        self.pushed_seq = 0
        self.snd_sml = 0
        self.snd_wnd = 65535
        self.max_window = 0
        self.queue: deque[_Skb] = deque()   # unsent skbs, send head first
        self.queued_bytes = 0               # sum of the queue's lengths, kept as it changes
        self.rtx: deque[_Skb] = deque()     # sent, unACKed
        self.cwnd = profile.init_cwnd
        self.ssthresh = 1 << 30
        self.lsndtime_j = 0
        self.srtt_us = 0
        self.mdev_us = 0
        self.rto_us = profile.rto_initial_us
        self.backoff = 0
        self.fin_queued = False
        self._tx_busy_until = -1
        self._last_hold: Reason | None = None
        self.tlp_high_seq = 0
        self.in_loss = False     # icsk_ca_state == TCP_CA_Loss after an RTO
        # delivery-rate sampling (tcp_rate.c) and pacing (EDT, tcp_wstamp_ns)
        self.delivered = 0
        self.delivered_mstamp = 0
        self.first_tx_mstamp = 0
        self.app_limited = 0
        self.min_rtt_us = 0
        self.data_segs_out = 0
        self.bbr: Bbr | None = None
        self.pacing_rate = 0.0   # bytes per second; 0: not pacing
        self.wstamp = 0.0        # earliest departure time of the next paced segment (µs)
        self.gso_wire = False    # a TSO burst leaves as one super-segment (loopback)

        # receive side
        self.rcv_nxt = 0
        self.rcv_wup = 0
        self.copied = 0          # bytes the application has read
        self.unread = 0          # bytes queued for the application
        self.peer_fin = False
        self.rcv_wnd = profile.rcv_wnd
        self.window_clamp = profile.rcv_buf
        self.ack_pending = 0
        self.ato_j = 0
        self.lrcvtime_j = 0
        self.quick = 0
        self.pingpong = 0
        self.rcv_mss = min(profile.initial_rcv_mss, mss)
        self.last_seg_size = 0
        self.delack_timeout_j = 0
        self.unacked_segs = 0    # CLASSIC receivers
        if options.quickack is False:
            self.pingpong = profile.pingpong_thresh

    # ------------------------------------------------------------------ pulls
    def segments_to_send(self) -> list[Segment]:
        """Segments transmitted since the last call, in order."""
        out, self._out = self._out, []
        return out

    def drain_events(self) -> list[TraceEvent]:
        events, self._events = self._events, []
        return events

    def next_deadline(self) -> Micros | None:
        return min(self.timers.values()) if self.timers else None

    @property
    def in_pingpong(self) -> bool:
        """inet_csk_in_pingpong_mode: pingpong count reached the threshold."""
        return self.pingpong >= self.profile.pingpong_thresh

    @property
    def in_quickack_mode(self) -> bool:
        """tcp_in_quickack_mode: budget left and not in ping-pong."""
        return self.quick > 0 and not self.in_pingpong

    @property
    def packets_out(self) -> int:
        return len(self.rtx)

    @property
    def established(self) -> bool:
        return self.state in (State.ESTABLISHED, State.CLOSE_WAIT)

    @property
    def eof(self) -> bool:
        return self.peer_fin and self.unread == 0

    # ------------------------------------------------------------------ helpers
    def _event(self, now: int, kind: Kind, reason: Reason, detail: str = "",
               timer: Timer | None = None, deadline: int | None = None,
               **data: int) -> None:
        self._events.append(TraceEvent(
            at=Micros(now), side=self.side, kind=kind, reason=reason, detail=detail,
            timer=timer, deadline=None if deadline is None else Micros(deadline), data=data))

    def _jiffies(self, now: int) -> int:
        return (now + self._phase) // self.profile.tick_us

    def _jiffy_timer_at(self, now: int, expires_j: int) -> int:
        """When a timer_list due at jiffy ``expires_j`` runs (timer wheel rounds up)."""
        fire_j = expires_j + (1 if self.profile.timer_wheel_round_up else 0)
        fire_j = max(fire_j, self._jiffies(now) + 1)
        return fire_j * self.profile.tick_us - self._phase

    def _rto_at(self, now: int) -> int:
        """inet_csk_reset_xmit_timer(ICSK_TIME_RETRANS): RTO (rounded up to jiffies, backed
        off, capped at TCP_RTO_MAX) is a timer_list, so it fires on a tick like the rest."""
        rto_j = min(self._rto_j << self.backoff,
                    self.profile.us_to_jiffies(self.profile.rto_max_us))
        return self._jiffy_timer_at(now, self._jiffies(now) + rto_j)

    def _arm(self, now: int, timer: Timer, at: int, reason: Reason, detail: str = "") -> None:
        self.timers[timer] = Micros(at)
        self._event(now, Kind.TIMER_ARMED, reason, detail, timer=timer, deadline=at)

    def _cancel(self, now: int, timer: Timer, reason: Reason = Reason.TIMER_CLEARED) -> None:
        if self.timers.pop(timer, None) is not None:
            self._event(now, Kind.TIMER_CANCELLED, reason, timer=timer)

    def _set_state(self, now: int, state: State) -> None:
        if state is not self.state:
            self._event(now, Kind.STATE, Reason.STATE_CHANGE,
                        f"{self.state.value} → {state.value}")
            self.state = state

    @property
    def _rto_j(self) -> int:
        return self.profile.us_to_jiffies(self.rto_us)

    # ------------------------------------------------------------------ transmit
    def _transmit(self, now: int, flags: int, seq: int, length: int,
                  why: Reason) -> Segment:
        """__tcp_transmit_skb for a segment without data (SYN, ACK, FIN-less control): every
        segment carrying ACK is also an ACK (piggyback). Data goes via `_transmit_data`."""
        if self.established or self.state not in (State.SYN_SENT, State.LISTEN):
            flags |= ACK
        seg = self._wire(now, flags, seq, length, why)
        if flags & ACK:
            self._event_ack_sent(now, data_segments=0)
        return seg

    def _wire(self, now: int, flags: int, seq: int, length: int, why: Reason) -> Segment:
        seg = Segment(src=self.side, seq=seq, ack=self.rcv_nxt if flags & ACK else 0,
                      length=length, flags=flags, window=self._advertised_window(),
                      sent_at=Micros(now), why=why)
        self._out.append(seg)
        return seg

    def _transmit_data(self, now: int, skbs: list[_Skb], why: Reason) -> None:
        """__tcp_transmit_skb for one TSO skb made of consecutive MSS pieces. Since
        051ba67447de a multi-segment skb carries PSH; software GSO (a TUN or real NIC path)
        keeps it on the last segment only, loopback passes the skb on whole."""
        for skb in skbs:
            self._rate_skb_sent(now, skb)
        n, last = len(skbs), skbs[-1]
        tail_flags = (PSH if n > 1 or last.psh else 0) | (FIN if last.fin else 0) | ACK
        if self.gso_wire or n == 1:
            self._wire(now, tail_flags, skbs[0].seq, sum(k.length for k in skbs), why)
        else:
            for skb in skbs[:-1]:
                self._wire(now, ACK, skb.seq, skb.length, why)
            self._wire(now, tail_flags, last.seq, last.length, why)
        nbytes = sum(k.length for k in skbs)
        self._event_ack_sent(now, data_segments=n)
        if nbytes:                           # a bare FIN is not data to these hooks
            self._event_data_sent(now)
        self._after_data_sent(now, nbytes, n if nbytes else 0)

    def _advertised_window(self) -> int:
        free = max(0, self.profile.rcv_buf - self.unread)
        self.rcv_wnd = min(self.profile.rcv_wnd, free)
        self.rcv_wup = self.rcv_nxt
        return self.rcv_wnd

    def _event_ack_sent(self, now: int, data_segments: int) -> None:
        """tcp_event_ack_sent → tcp_dec_quickack_mode + clear the DACK timer."""
        if self.profile.ack_style is AckStyle.CLASSIC:
            self.unacked_segs = 0
        if self.quick:
            if self.profile.quickack_dec_only_if_scheduled:
                pkts = 1 if self.ack_pending & AckPending.SCHED else 0
            else:
                pkts = max(1, data_segments)
            if pkts >= self.quick:
                self.quick = 0
                self.ato_j = self.profile.delack_min_j
                self._event(now, Kind.MODE, Reason.QUICK_SPENT, "quick = 0, ato = ATO_MIN",
                            quick=0)
            else:
                self.quick -= pkts
        self.ack_pending = 0
        self._cancel(now, Timer.DELACK, Reason.PIGGYBACK)

    def _event_data_sent(self, now: int) -> None:
        """tcp_event_data_sent: a reply within ato of the last data raises ping-pong."""
        if not self.rtx and self.bbr is not None:     # CA_EVENT_TX_START
            self.bbr.on_transmit_start(bool(self.app_limited))
        now_j = self._jiffies(now)
        if self.profile.ack_style is AckStyle.LINUX and self.ato_j and (
                now_j - self.lrcvtime_j) < self.ato_j:
            fresh = not self.profile.pingpong_needs_new_data or self.lsndtime_j < self.lrcvtime_j
            if fresh and self.pingpong < 255:
                was = self.in_pingpong
                self.pingpong += 1
                if self.in_pingpong and not was:
                    self._event(now, Kind.MODE, Reason.PINGPONG_ENTER,
                                f"{(now_j - self.lrcvtime_j) * self.profile.tick_us // 1000} ms"
                                f" after data, ato {self._ato_ms()} ms", pingpong=1)
                elif not was:
                    self._event(now, Kind.MODE, Reason.PINGPONG_COUNT,
                                f"count {self.pingpong} of {self.profile.pingpong_thresh}",
                                pingpong=0)
        self.lsndtime_j = now_j

    def _ato_ms(self) -> str:
        return f"{self.ato_j * self.profile.tick_us / 1000:g}"

    # ------------------------------------------------------------------ handshake
    def connect(self, now: int) -> None:
        """Active open: send SYN (isn 0)."""
        if self.state is not State.CLOSED:
            raise ModelError("connect on a socket that is not closed")
        self._set_state(now, State.SYN_SENT)
        self.snd_nxt = self.write_seq = self.pushed_seq = 1
        self._syn_sent_at = now
        self._transmit(now, SYN, 0, 0, Reason.HANDSHAKE)
        self._arm(now, Timer.RTO, self._rto_at(now), Reason.RTO_ARMED, "SYN")

    # ------------------------------------------------------------------ application
    def app_write(self, now: int, nbytes: int, more: bool = False) -> None:
        """tcp_sendmsg_locked: queue ``nbytes`` as one send() call."""
        if nbytes <= 0:
            raise ModelError("write size must be positive")
        if not self.established:
            raise ModelError(f"write on a socket in state {self.state.value}")
        if more and not self.profile.supports_cork:
            raise ModelError(f"profile {self.profile.name} has no MSG_MORE")
        self._rate_check_app_limited(now)
        left = nbytes
        if self.queue and not self.queue[-1].fin:
            self.queue[-1].psh = False   # "if (!copied) ... &= ~TCPHDR_PSH": it grows again
        size_goal = self._size_goal()
        while left:
            tail = self.queue[-1] if self.queue else None
            if tail is None or tail.length >= self.mss or tail.fin:
                self._skb_entail(now)
                tail = self.queue[-1]
            take = min(left, self.mss - tail.length)
            tail.length += take
            self.queued_bytes += take
            self.write_seq += take
            left -= take
            if not left:
                break           # the last chunk always goes through tcp_push (PSH), even full
            if tail.length < self.mss or self.write_seq - self.snd_nxt < size_goal:
                continue        # the kernel's skb is full only at size_goal
            # A full skb: tcp_push_one, or a forced push of everything
            if self._forced_push():
                self._mark_push(tail)
                self._push_pending(now, Nonagle.PUSH, Reason.FULL_SEGMENT)
            elif self.write_seq - self.snd_nxt <= size_goal:     # skb == tcp_send_head
                self._write_xmit(now, Nonagle.PUSH, Reason.FULL_SEGMENT, push_one=True)
        self._tcp_push(now, more)

    def _skb_entail(self, now: int) -> None:
        """tcp_skb_entail: a new skb clears the one-shot TCP_NAGLE_PUSH override."""
        self.nonagle &= ~Nonagle.PUSH
        if (self.profile.slow_start_after_idle and not self.rtx and self.srtt_us
                and self._jiffies(now) - self.lsndtime_j > self._rto_j
                and self.cwnd > self.profile.init_cwnd):
            idle_rtos = (self._jiffies(now) - self.lsndtime_j) // max(1, self._rto_j)
            new = max(self.profile.init_cwnd, self.cwnd >> idle_rtos)
            self._event(now, Kind.MODE, Reason.CWND_IDLE, f"cwnd {self.cwnd} → {new}",
                        cwnd=new)
            self.cwnd = new
        self.queue.append(_Skb(seq=self.write_seq, length=0))

    def _forced_push(self) -> bool:
        """forced_push: more than half the peer's largest window written since the last PSH."""
        return self.write_seq > self.pushed_seq + (self.max_window >> 1)

    def _mark_push(self, skb: _Skb) -> None:
        skb.psh = True
        self.pushed_seq = self.write_seq

    def _tcp_push(self, now: int, more: bool) -> None:
        """tcp_push at the end of sendmsg."""
        if not self.queue:
            return
        tail = self.queue[-1]
        if not more or self._forced_push():
            self._mark_push(tail)
        if self._should_autocork(now, tail):
            self._hold(now, Reason.AUTOCORK_HOLD, f"{self._queued_bytes()} B queued")
            if Timer.TSQ not in self.timers:
                self._arm(now, Timer.TSQ, self._tx_busy_until, Reason.AUTOCORK_HOLD,
                          "TX completion of the previous packet")
            return
        nonagle = Nonagle.CORK if more else self.nonagle
        self._push_pending(now, nonagle, Reason.APP_WRITE, more=more)

    def _should_autocork(self, now: int, tail: _Skb) -> bool:
        """tcp_should_autocork: an earlier data packet is still in the device queue."""
        return (self.profile.autocorking and tail.length < self.mss and bool(self.rtx)
                and self._tx_busy_until > now)

    def _queued_bytes(self) -> int:
        return self.queued_bytes

    def _push_pending(self, now: int, nonagle: int, why: Reason,
                      more: bool = False) -> None:
        """__tcp_push_pending_frames: write, and arm the probe timer if stuck with nothing
        in flight (tcp_check_probe_timer)."""
        if not self.queue:
            return
        if self._write_xmit(now, nonagle, why, more=more):
            self._check_probe_timer(now)

    def _write_xmit(self, now: int, nonagle: int, why: Reason, push_one: bool = False,
                    more: bool = False, loss_probe: bool = False) -> bool:
        """tcp_write_xmit. Returns True if nothing is in flight and data stays queued."""
        sent = 0
        while self.queue:
            skb = self.queue[0]
            if self._pacing_blocked(now):
                break
            fin_only = skb.fin and skb.length == 0
            if self.packets_out >= self.cwnd and not fin_only:
                if self._last_hold is not Reason.CWND_HOLD:
                    self._hold(now, Reason.CWND_HOLD, f"cwnd {self.cwnd}, in flight "
                               f"{self.packets_out}")
                break
            if skb.seq + skb.length > self.snd_una + self.snd_wnd:
                self._hold(now, Reason.RWND_HOLD, f"window {self.snd_wnd}")
                break
            effective = nonagle if len(self.queue) == 1 else Nonagle.PUSH
            hold = self._nagle_hold_reason(skb, effective, more)
            if hold is not None:
                if hold is not self._last_hold:
                    self._hold(now, hold, self._hold_detail(hold))
                break
            self._send_burst(now, self._burst(skb, nonagle, more), why)
            sent += 1
            if push_one:
                break
        if sent and not loss_probe:
            self._schedule_loss_probe(now, advancing_rto=False)
        return not self.rtx and bool(self.queue)

    def _nagle_hold_reason(self, skb: _Skb, nonagle: int, more: bool) -> Reason | None:
        """tcp_nagle_test / tcp_nagle_check; None means the skb may go."""
        if nonagle & Nonagle.PUSH or skb.fin:
            return None
        if skb.length >= self.mss:
            return None
        if nonagle & Nonagle.CORK:
            return Reason.MORE_HOLD if more else Reason.CORK_HOLD
        if nonagle or not self.rtx:
            return None
        if self.profile.nagle_style is NagleStyle.RFC896:
            return Reason.NAGLE_HOLD_CLASSIC
        # tcp_minshall_check: the last sub-MSS segment sent is still unACKed
        if self.snd_sml > self.snd_una and self.snd_sml <= self.snd_nxt:
            return Reason.NAGLE_HOLD
        return None

    def _hold_detail(self, reason: Reason) -> str:
        queued = self._queued_bytes()
        if reason is Reason.NAGLE_HOLD:
            return f"{queued} B queued; small segment ending at {self.snd_sml} unACKed"
        return f"{queued} B queued"

    def _hold(self, now: int, reason: Reason, detail: str) -> None:
        """Trace a hold once per reason: later writes joining the same hold say nothing new."""
        if reason is self._last_hold:
            return
        self._last_hold = reason
        self._event(now, Kind.HOLD, reason, detail, length=self._queued_bytes())

    def _send_burst(self, now: int, burst: list[_Skb], why: Reason) -> None:
        for skb in burst:
            self.queue.popleft()
            self.queued_bytes -= skb.length
        prior = self.packets_out
        self._last_hold = None
        self._transmit_data(now, burst, why)
        self.rtx.extend(burst)
        last = burst[-1]
        self.snd_nxt = max(self.snd_nxt, last.end)
        if last.length < self.mss:
            self.snd_sml = last.end   # tcp_minshall_update: len < pcount * mss
        if prior == 0 or Timer.TLP in self.timers:   # tcp_event_new_data_sent
            self._rearm_rto(now)

    def _burst(self, head: _Skb, nonagle: int, more: bool) -> list[_Skb]:
        """The TSO skb tcp_write_xmit builds from the queue head: full segments up to
        min(cwnd/2, free cwnd) (tcp_cwnd_test), tcp_tso_autosize's goal and size_goal; a
        partial tail joins only if Nagle/cork would let it go (tcp_mss_split_point)."""
        burst = [head]
        if head.length < self.mss or head.fin:
            return burst
        quota = min(max(self.cwnd >> 1, 1), self.cwnd - self.packets_out)
        limit = min(quota, self._tso_segs(), self._size_goal() // self.mss)
        i = 1
        while len(burst) < limit and i < len(self.queue):
            nxt = self.queue[i]
            if nxt.seq + nxt.length > self.snd_una + self.snd_wnd:
                break
            if nxt.length < self.mss or nxt.fin:
                effective = nonagle if i == len(self.queue) - 1 else Nonagle.PUSH
                hold = self._nagle_hold_reason(nxt, effective, more)
                if (hold is None and self.profile.nagle_style is NagleStyle.RFC896
                        and not effective and not nxt.fin):
                    hold = Reason.NAGLE_HOLD_CLASSIC   # the burst's own data will be unACKed
                if hold is None:
                    burst.append(nxt)
                break
            burst.append(nxt)
            i += 1
        return burst

    def _size_goal(self) -> int:
        """tcp_xmit_size_goal: an skb grows to half the peer's largest window, at most a
        64 KB GSO packet, in whole segments (TCP always builds GSO skbs now)."""
        half = self.max_window >> 1 if self.max_window > 536 else self.max_window
        goal = min(65536 - 1 - 320, max(half, 36))
        return max(goal // self.mss, 1) * self.mss

    def _tso_segs(self) -> int:
        """tcp_tso_autosize: about 1 ms of data at the pacing rate per TSO skb, at least 2
        (BBR: bbr_tso_segs_goal; otherwise the rate of tcp_update_pacing_rate)."""
        if self.bbr is not None:
            return self.bbr.tso_segs_goal()
        if self.srtt_us:
            ratio = 2.0 if self.cwnd < self.ssthresh / 2 else 1.2
            rate = self.mss * max(self.cwnd, self.packets_out) * 1e6 / self.srtt_us * ratio
        else:
            rate = float(1 << 40)   # sk_pacing_rate starts unlimited
        budget = min(int(rate) >> 10, 65536 - 1 - 320)
        return max(budget // self.mss, 2)

    _tx_complete_us = 0
    """Device-queue residence of a sent packet (link property; 0 on loopback)."""

    def set_tx_complete(self, us: int) -> None:
        self._tx_complete_us = us

    def set_gso_wire(self, on: bool) -> None:
        """Link property: loopback hands a TSO skb to the peer whole (one super-segment);
        other links see it cut into MSS segments."""
        self.gso_wire = on

    def _rearm_rto(self, now: int) -> None:
        """tcp_rearm_rto: RTO replaces the probe timer (one icsk_pending slot). Re-arming
        on every ACK is routine, so only the probe-timer cancellation is traced."""
        self._cancel(now, Timer.PROBE0)
        self.timers.pop(Timer.TLP, None)
        if self.rtx:
            self.timers[Timer.RTO] = Micros(self._rto_at(now))
        else:
            self.timers.pop(Timer.RTO, None)

    def _schedule_loss_probe(self, now: int, advancing_rto: bool) -> bool:
        """tcp_schedule_loss_probe: probe after 2·SRTT (+ TCP_RTO_MIN with one packet out,
        + TCP_TIMEOUT_MIN otherwise), but no later than the RTO would fire. Re-armed after
        every send and every ACK, so it is not traced; only a probe that fires is."""
        p = self.profile
        if not p.tail_loss_probe or not self.rtx or self.in_loss:
            return False
        if self.srtt_us:
            timeout_j = p.us_to_jiffies(2 * self.srtt_us) + (
                p.us_to_jiffies(p.rto_min_us) if len(self.rtx) == 1 else p.timeout_min_j)
        else:
            timeout_j = p.us_to_jiffies(p.rto_initial_us)
        if advancing_rto:
            rto_delta = self._rto_j * p.tick_us
        else:   # tcp_rto_delta_us: RTO measured from the oldest unACKed segment's send
            rto_delta = self.rtx[0].sent_at + self._rto_j * p.tick_us - now
        if rto_delta > 0:
            timeout_j = min(timeout_j, p.us_to_jiffies(rto_delta))
        self.timers.pop(Timer.RTO, None)
        self.timers[Timer.TLP] = Micros(self._jiffy_timer_at(now, self._jiffies(now) + timeout_j))
        return True

    def _check_probe_timer(self, now: int) -> None:
        """tcp_check_probe_timer: arm at tcp_probe0_base = max(RTO, TCP_RTO_MIN)."""
        if self.rtx or Timer.PROBE0 in self.timers or Timer.RTO in self.timers \
                or Timer.TLP in self.timers:
            return
        base_j = max(self._rto_j, self.profile.us_to_jiffies(self.profile.rto_min_us))
        at = self._jiffy_timer_at(now, self._jiffies(now) + (base_j << self.backoff))
        self._arm(now, Timer.PROBE0, at, Reason.PROBE0_ARMED,
                  f"RTO {self.rto_us / 1000:g} ms")

    def app_read(self, now: int, max_bytes: int) -> int:
        """tcp_recvmsg: copy what is queued (up to ``max_bytes``), then tcp_cleanup_rbuf."""
        copied = min(self.unread, max_bytes)
        self.unread -= copied
        self.copied += copied
        self._cleanup_rbuf(now, copied)
        return copied

    def _cleanup_rbuf(self, now: int, copied: int, why: Reason = Reason.READ_ACK) -> None:
        """__tcp_cleanup_rbuf: the ACK a read (or TCP_QUICKACK=1) can trigger."""
        if self.profile.ack_style is not AckStyle.LINUX or (
                not self.established and self.state not in (State.FIN_WAIT1, State.FIN_WAIT2)):
            return
        if self.ack_pending & AckPending.SCHED:
            if self.rcv_nxt - self.rcv_wup > self.rcv_mss:
                self._send_ack(now, Reason.FULL_FRAME)
                return
            pushed = bool(self.ack_pending & AckPending.PUSHED2) or (
                bool(self.ack_pending & AckPending.PUSHED) and not self.in_pingpong)
            if copied > 0 and pushed and self.unread == 0:
                self._send_ack(now, why)
                return
        if copied > 0 and not self.peer_fin:
            window_now = max(0, self.rcv_wup + self.rcv_wnd - self.rcv_nxt)
            if 2 * window_now <= self.window_clamp:
                new_window = min(self.profile.rcv_wnd, self.profile.rcv_buf - self.unread)
                if new_window and new_window >= 2 * window_now:
                    self._send_ack(now, Reason.WINDOW_UPDATE)

    def set_option(self, now: int, opt: SockOpt, on: bool) -> None:
        """setsockopt(IPPROTO_TCP, ...) as in do_tcp_setsockopt."""
        self._event(now, Kind.SOCKOPT, Reason.SOCKOPT_SET,
                    f"TCP_{opt.name} = {int(on)}")
        if opt is SockOpt.CORK and not self.profile.supports_cork:
            raise ModelError(f"profile {self.profile.name} has no TCP_CORK")
        if opt is SockOpt.QUICKACK and not self.profile.supports_quickack:
            raise ModelError(f"profile {self.profile.name} has no TCP_QUICKACK")
        if opt is SockOpt.NODELAY:
            if on:  # __tcp_sock_set_nodelay
                self.nonagle |= Nonagle.OFF | Nonagle.PUSH
                self._push_pending(now, self.nonagle, Reason.NODELAY_PUSH)
            else:
                self.nonagle &= ~Nonagle.OFF
        elif opt is SockOpt.CORK:
            if on:  # __tcp_sock_set_cork
                self.nonagle |= Nonagle.CORK
            else:
                self.nonagle &= ~Nonagle.CORK
                if self.nonagle & Nonagle.OFF:
                    self.nonagle |= Nonagle.PUSH
                self._push_pending(now, self.nonagle, Reason.UNCORK_PUSH)
        else:
            self._set_quickack(now, on)

    def _set_quickack(self, now: int, on: bool) -> None:
        """__tcp_sock_set_quickack: 0 enters ping-pong; 1 leaves it and may ACK now. The
        quick-ACK budget is not refilled and nothing is sticky (tcp(7))."""
        if not on:
            if not self.in_pingpong:
                self._event(now, Kind.MODE, Reason.QUICKACK_OFF, "ping-pong on", pingpong=1)
            self.pingpong = max(self.pingpong, self.profile.pingpong_thresh)
            return
        if self.in_pingpong:
            self._event(now, Kind.MODE, Reason.QUICKACK_ON, "ping-pong off", pingpong=0)
        self.pingpong = 0
        if self.established and self.ack_pending & AckPending.SCHED:
            self.ack_pending |= AckPending.PUSHED
            self._cleanup_rbuf(now, 1, Reason.QUICKACK_OPT)

    def get_option(self, opt: SockOpt) -> int:
        """getsockopt: TCP_QUICKACK reads !pingpong, whatever the quick-ACK budget is."""
        if opt is SockOpt.NODELAY:
            return int(bool(self.nonagle & Nonagle.OFF))
        if opt is SockOpt.CORK:
            return int(bool(self.nonagle & Nonagle.CORK))
        return int(not self.in_pingpong)

    def app_close(self, now: int) -> None:
        """tcp_close: unread data means RST; otherwise queue a FIN and push it (tcp_send_fin)."""
        if self.state in (State.CLOSED, State.LISTEN, State.SYN_SENT):
            self._set_state(now, State.CLOSED)
            return
        if self.unread > 0:
            self._transmit(now, RST, self.snd_nxt, 0, Reason.RESET)
            self.timers.clear()
            self._set_state(now, State.CLOSED)
            return
        if self.state is State.ESTABLISHED:
            self._set_state(now, State.FIN_WAIT1)
        elif self.state is State.CLOSE_WAIT:
            self._set_state(now, State.LAST_ACK)
        else:
            return
        tail = self.queue[-1] if self.queue else None
        if tail is not None and not tail.fin:
            tail.fin = True
        else:
            self.queue.append(_Skb(seq=self.write_seq, length=0, fin=True))
        self.write_seq += 1
        self.fin_queued = True
        self._push_pending(now, Nonagle.OFF, Reason.CLOSE_PUSH)

    # ------------------------------------------------------------------ input
    def receive_segment(self, now: int, seg: Segment) -> None:
        """tcp_v4_rcv → tcp_rcv_state_process / tcp_rcv_established."""
        if seg.flags & RST:
            self.timers.clear()
            self.peer_fin = True
            self._set_state(now, State.CLOSED)
            return
        if self.state is State.LISTEN:
            if seg.flags & SYN:
                self.rcv_nxt = seg.seq + 1
                self.snd_wnd = seg.window
                self.snd_nxt = self.write_seq = self.pushed_seq = 1
                self._set_state(now, State.SYN_RCVD)
                self._synack_at = now
                self._transmit(now, _SYN_ACK, 0, 0, Reason.HANDSHAKE)
                self._arm(now, Timer.RTO, self._rto_at(now), Reason.RTO_ARMED, "SYN-ACK")
            return
        if self.state is State.SYN_SENT:
            if seg.flags & _SYN_ACK == _SYN_ACK and seg.ack == 1:
                self._synsent_established(now, seg)
            return
        if self.state is State.SYN_RCVD:
            if seg.flags & ACK and seg.ack >= 1:
                self.snd_una = 1
                self._rtt_sample(now, now - self._synack_at)
                self.lrcvtime_j = self._jiffies(now)
                self._cancel(now, Timer.RTO)
                self._set_state(now, State.ESTABLISHED)
                self._init_congestion_control(now)
                self.snd_wnd = seg.window
                self.max_window = max(self.max_window, seg.window)
            else:
                return
        if self.state is State.CLOSED:
            return
        self._rcv_established(now, seg)

    def _synsent_established(self, now: int, seg: Segment) -> None:
        """tcp_rcv_synsent_state_process: ACK the SYN-ACK now, or delay it in ping-pong."""
        self.snd_una = 1
        self.rcv_nxt = seg.seq + 1
        self.snd_wnd = seg.window
        self.max_window = max(self.max_window, seg.window)
        self._rtt_sample(now, now - self._syn_sent_at)
        self._cancel(now, Timer.RTO)
        self.lrcvtime_j = self._jiffies(now)
        self._set_state(now, State.ESTABLISHED)
        self._init_congestion_control(now)
        if self.in_pingpong and self.profile.ack_style is AckStyle.LINUX:
            self.ack_pending |= AckPending.SCHED
            self._enter_quickack_mode(now, self.profile.max_quickacks, exit_pingpong=False)
            at = self._jiffy_timer_at(now, self._jiffies(now) + self.profile.delack_max_j)
            self.ack_pending |= AckPending.TIMER
            self.delack_timeout_j = self._jiffies(now) + self.profile.delack_max_j
            self._event(now, Kind.ACK_DELAYED, Reason.SYNACK_DELAYED)
            self._arm(now, Timer.DELACK, at, Reason.SYNACK_DELAYED, "TCP_DELACK_MAX")
        else:
            self._transmit(now, ACK, self.snd_nxt, 0, Reason.HANDSHAKE)

    def _rcv_established(self, now: int, seg: Segment) -> None:
        """tcp_rcv_established: tcp_ack, tcp_data_queue, tcp_data_snd_check, ack check."""
        prior_packets = self.packets_out
        if seg.flags & ACK:
            self._process_ack(now, seg, prior_packets)
        has_data = seg.length > 0 or bool(seg.flags & FIN)
        if has_data:
            self._data_queue(now, seg)
        if seg.flags & ACK and self.queue:
            # tcp_data_snd_check pushes with tp->nonagle, never with MSG_MORE's cork
            self._push_pending(now, self.nonagle, Reason.ACK_RELEASE)
        if self.ack_pending & AckPending.SCHED and self.state is not State.CLOSED:
            if self.profile.ack_style is AckStyle.LINUX:
                self._ack_snd_check(now)
            else:
                self._classic_ack_check(now, seg)

    def _process_ack(self, now: int, seg: Segment, prior_packets: int) -> None:
        """tcp_ack: advance snd_una, sample RTT, grow cwnd, rearm RTO, update window."""
        self.snd_wnd = seg.window
        self.max_window = max(self.max_window, seg.window)
        if seg.ack > self.snd_una and seg.ack <= self.snd_nxt:
            acked_skbs: list[_Skb] = []
            while self.rtx and self.rtx[0].end <= seg.ack:
                acked_skbs.append(self.rtx.popleft())
            first = acked_skbs[0] if acked_skbs else None
            self.snd_una = seg.ack
            if first is not None and not first.retransmitted:
                self._rtt_sample(now, now - first.sent_at)   # seq_rtt_us: oldest ACKed
            self.backoff = 0
            self._congestion_control(now, acked_skbs, prior_packets)
            if self.tlp_high_seq and seg.ack >= self.tlp_high_seq:
                self.tlp_high_seq = 0          # the probe's episode is over
            if not self.rtx:
                self.in_loss = False
            if not self._schedule_loss_probe(now, advancing_rto=True):   # tcp_set_xmit_timer
                self._rearm_rto(now)
            if self.fin_queued and self.snd_una == self.write_seq:
                if self.state is State.FIN_WAIT1:
                    self._set_state(now, State.FIN_WAIT2)
                elif self.state is State.CLOSING:
                    self._set_state(now, State.TIME_WAIT)
                elif self.state is State.LAST_ACK:
                    self._set_state(now, State.CLOSED)
                    self.timers.clear()
        elif prior_packets == 0 and self.queue:
            # tcp_ack_probe: a usable window clears the probe timer; the following
            # tcp_data_snd_check re-arms it from now if the data is still held.
            head = self.queue[0]
            if head.seq + head.length <= self.snd_una + self.snd_wnd:
                self.backoff = 0
                self._cancel(now, Timer.PROBE0, Reason.ACK_RELEASE)
        elif seg.ack == self.snd_una and prior_packets and self.bbr is not None:
            # tcp_ack: with nothing in flight it goes to no_queue, skipping tcp_cong_control
            self._congestion_control(now, [], prior_packets)

    # ------------------------------------------------------------------ rate & pacing
    def _init_congestion_control(self, now: int) -> None:
        """tcp_init_congestion_control → bbr_init (pacing from the handshake RTT)."""
        if self.profile.bbr:
            self.bbr = Bbr(self.mss, now, self.srtt_us, self.cwnd, self.min_rtt_us)
            self.pacing_rate = self.bbr.pacing_rate

    def _rate_check_app_limited(self, now: int) -> None:
        """tcp_rate_check_app_limited: less than a segment queued, nothing in the device
        queue, cwnd not full: later rate samples describe the application, not the path."""
        if (self.write_seq - self.snd_nxt < self.mss and self._tx_busy_until <= now
                and self.packets_out < self.cwnd):
            self.app_limited = (self.delivered + self.packets_out) or 1

    def _rate_skb_sent(self, now: int, skb: _Skb) -> None:
        """tcp_rate_skb_sent: snapshot delivery state in the segment as it leaves."""
        if not self.rtx:
            self.first_tx_mstamp = self.delivered_mstamp = now
        skb.tx_first_tx = self.first_tx_mstamp
        skb.tx_delivered_mstamp = self.delivered_mstamp
        skb.tx_delivered = self.delivered
        skb.tx_app_limited = bool(self.app_limited)
        skb.sent_at = now

    def _after_data_sent(self, now: int, nbytes: int, nsegs: int) -> None:
        """tcp_update_skb_after_send: once 10 data segments have left, each TSO skb pushes
        the next departure time back by its length at the pacing rate; time the socket sat
        idle is credit for up to half of that."""
        self.data_segs_out += nsegs
        self._tx_busy_until = now + self._tx_complete_us
        prior = self.wstamp
        self.wstamp = max(self.wstamp, float(now))
        if self.pacing_rate and self.data_segs_out >= 10:
            length_us = nbytes * 1_000_000 / self.pacing_rate
            self.wstamp += length_us - min(length_us / 2, self.wstamp - prior)

    def _pacing_blocked(self, now: int) -> bool:
        """tcp_pacing_check: hold the next segment until its departure time (hrtimer)."""
        if not self.pacing_rate or self.wstamp <= now:
            return False
        if Timer.PACING not in self.timers:
            self.timers[Timer.PACING] = Micros(int(-(-self.wstamp // 1)))
        if self._last_hold is not Reason.PACING_HOLD:
            self._hold(now, Reason.PACING_HOLD,
                       f"{self._queued_bytes()} B queued; next departure at "
                       f"{self.wstamp / 1000:.3f} ms ({self.pacing_rate / 1e6:.2f} MB/s)")
        return True

    def _congestion_control(self, now: int, acked_skbs: list[_Skb],
                            prior_packets: int) -> None:
        """tcp_rate_gen + tcp_cong_control: a delivery-rate sample for BBR, or slow start."""
        acked = len(acked_skbs)
        self.delivered += acked
        rs = RateSample(acked=acked, prior_in_flight=prior_packets)
        newest = (acked_skbs[-1] if len(acked_skbs) < 2
                  else max(acked_skbs, key=lambda k: (k.sent_at, k.end))) if acked_skbs else None
        prior_mstamp = 0
        send_us = -1
        if newest is not None and newest.tx_delivered_mstamp:
            rs.prior_delivered = newest.tx_delivered
            prior_mstamp = newest.tx_delivered_mstamp
            rs.is_app_limited = newest.tx_app_limited
            self.first_tx_mstamp = newest.sent_at
            send_us = newest.sent_at - newest.tx_first_tx
            if not newest.retransmitted:
                rs.rtt_us = now - newest.sent_at
                self.min_rtt_us = (rs.rtt_us if not self.min_rtt_us
                                   else min(self.min_rtt_us, rs.rtt_us))
        if self.app_limited and self.delivered > self.app_limited:
            self.app_limited = 0
        if acked:
            self.delivered_mstamp = now
        if prior_mstamp:
            rs.delivered = self.delivered - rs.prior_delivered
            rs.interval_us = max(send_us, now - prior_mstamp)
            if rs.interval_us < self.min_rtt_us:
                rs.interval_us = -1
        rs.is_ack_delayed = acked == 1
        if self.bbr is None:
            if acked:
                self._grow_cwnd(now, acked, prior_packets)
            return
        cwnd, mark = self.bbr.on_ack(now, rs, self.delivered, self.cwnd, self.packets_out,
                                     self.srtt_us)
        if mark:
            self.app_limited = (self.delivered + self.packets_out) or 1
        if cwnd != self.cwnd:
            self._event(now, Kind.MODE, Reason.BBR_CWND,
                        f"cwnd {self.cwnd} → {cwnd} (BBR {self.bbr.mode.value})", cwnd=cwnd)
            self.cwnd = cwnd
        self.pacing_rate = self.bbr.pacing_rate

    def _grow_cwnd(self, now: int, acked: int, prior_packets: int) -> None:
        """tcp_slow_start, only while cwnd-limited (tcp_is_cwnd_limited)."""
        if self.cwnd < self.ssthresh and 2 * prior_packets > self.cwnd:
            new = self.cwnd + acked
            self._event(now, Kind.MODE, Reason.CWND_GROW, f"cwnd {self.cwnd} → {new}",
                        cwnd=new)
            self.cwnd = new

    def _rtt_sample(self, now: int, m: int) -> None:
        """tcp_rtt_estimator + __tcp_set_rto: rto = srtt + max(4·mdev, rto_min)."""
        m = max(m, 1)
        if self.srtt_us == 0:
            self.srtt_us = m
            self.mdev_us = m // 2
        else:
            err = m - self.srtt_us
            self.srtt_us += err // 8
            self.mdev_us += (abs(err) - self.mdev_us) // 4
        rttvar = max(4 * self.mdev_us, self.profile.rto_min_us)
        self.rto_us = min(self.srtt_us + rttvar, self.profile.rto_max_us)

    def _data_queue(self, now: int, seg: Segment) -> None:
        """tcp_data_queue for in-order data; duplicates get an immediate ACK."""
        if seg.seq != self.rcv_nxt:
            if seg.seq + seg.length <= self.rcv_nxt:
                if self.profile.ack_style is AckStyle.LINUX:
                    self._enter_quickack_mode(now, self.profile.max_quickacks)
                self.ack_pending |= AckPending.SCHED | AckPending.NOW
                self._send_ack(now, Reason.DUPLICATE)
            return
        if seg.length:
            self.rcv_nxt += seg.length
            self.unread += seg.length
            if self.profile.ack_style is AckStyle.LINUX:
                self._event_data_recv(now, seg)
            else:
                self.ack_pending |= AckPending.SCHED
                self.unacked_segs += max(1, -(-seg.length // self.mss))
        if seg.flags & FIN:
            self._tcp_fin(now)

    def _tcp_fin(self, now: int) -> None:
        """tcp_fin: schedule an ACK; ESTABLISHED → CLOSE_WAIT enters ping-pong."""
        self.rcv_nxt += 1
        self.peer_fin = True
        self.ack_pending |= AckPending.SCHED
        self._event(now, Kind.MODE, Reason.FIN_ACK, "peer closed its side")
        if self.state is State.ESTABLISHED:
            self._set_state(now, State.CLOSE_WAIT)
            self.pingpong = max(self.pingpong, self.profile.pingpong_thresh)
        elif self.state is State.FIN_WAIT1:
            self._send_ack(now, Reason.FIN_ACK)
            self._set_state(now, State.CLOSING if self.snd_una < self.write_seq
                            else State.TIME_WAIT)
        elif self.state is State.FIN_WAIT2:
            self._send_ack(now, Reason.FIN_ACK)
            self._set_state(now, State.TIME_WAIT)
            self.timers.clear()

    def _event_data_recv(self, now: int, seg: Segment) -> None:
        """tcp_event_data_recv: schedule an ACK, measure rcv_mss, adapt ato (jiffies)."""
        self.ack_pending |= AckPending.SCHED
        self._measure_rcv_mss(seg)
        now_j = self._jiffies(now)
        ato_min = self.profile.delack_min_j
        if not self.ato_j:
            self._incr_quickack(now, self.profile.max_quickacks, Reason.QUICK_START)
            self.ato_j = ato_min
        else:
            m = now_j - self.lrcvtime_j
            old = self.ato_j
            if m <= ato_min // 2:
                self.ato_j = (self.ato_j >> 1) + ato_min // 2
            elif m < self.ato_j:
                self.ato_j = min((self.ato_j >> 1) + m, self._rto_j)
            elif m > self._rto_j:
                self._incr_quickack(now, self.profile.max_quickacks, Reason.QUICK_REFILL)
            if self.ato_j != old:
                self._event(now, Kind.MODE, Reason.ATO_UPDATE,
                            f"gap {m} jiffies: ato {old} → {self.ato_j} jiffies",
                            ato=self.ato_j)
        self.lrcvtime_j = now_j

    def _measure_rcv_mss(self, seg: Segment) -> None:
        """tcp_measure_rcv_mss: learn the peer's MSS; small segments set PUSHED/PUSHED2."""
        lss = self.last_seg_size
        self.last_seg_size = 0
        length = seg.length
        if length >= self.rcv_mss:
            self.rcv_mss = min(length, self.mss)
            # 4720852ed9af: an exact-MSS segment with PSH; a GSO super-segment is skipped
            if self.profile.pushed_on_full_psh and seg.flags & PSH and length <= self.mss:
                self.ack_pending |= AckPending.PUSHED
            return
        with_hdr = length + _TCP_HDR
        remnant = seg.flags & (FIN | SYN | PSH)
        if with_hdr >= self.profile.initial_rcv_mss + 20 or (
                with_hdr >= _TCP_MIN_MSS + 20 and not remnant):
            self.last_seg_size = length
            if length == lss:
                self.rcv_mss = length
                return
        if self.ack_pending & AckPending.PUSHED:
            self.ack_pending |= AckPending.PUSHED2
        self.ack_pending |= AckPending.PUSHED

    def _incr_quickack(self, now: int, max_quickacks: int, reason: Reason) -> None:
        """tcp_incr_quickack: budget = min(max, rcv_wnd / (2·rcv_mss)), never lowered."""
        quickacks = self.rcv_wnd // (2 * self.rcv_mss) or 2
        quickacks = min(quickacks, max_quickacks)
        if quickacks > self.quick:
            self.quick = quickacks
            self._event(now, Kind.MODE, reason, f"quick = {quickacks}", quick=quickacks)

    def _enter_quickack_mode(self, now: int, max_quickacks: int,
                             exit_pingpong: bool = True) -> None:
        """tcp_enter_quickack_mode: refill, leave ping-pong, ato = ATO_MIN."""
        self._incr_quickack(now, max_quickacks, Reason.QUICK_REFILL)
        if exit_pingpong:
            self.pingpong = 0
        self.ato_j = self.profile.delack_min_j

    def _ack_snd_check(self, now: int) -> None:
        """__tcp_ack_snd_check: ACK at once, or hand over to the delayed-ACK timer."""
        if self.rcv_nxt - self.rcv_wup > self.rcv_mss and self._window_would_grow():
            self._send_ack(now, Reason.FULL_FRAME,
                           f"{self.rcv_nxt - self.rcv_wup} B unACKed > rcv_mss {self.rcv_mss}")
        elif self.in_quickack_mode:
            self._send_ack(now, Reason.QUICKACK_MODE, f"{self.quick} quick ACKs left")
        elif self.ack_pending & AckPending.NOW:
            self._send_ack(now, Reason.DUPLICATE)
        else:
            self._send_delayed_ack(now)

    def _window_would_grow(self) -> bool:
        """__tcp_select_window() >= tp->rcv_wnd: the window we could offer now is at least
        the one last advertised (true while the buffer has room)."""
        return min(self.profile.rcv_wnd, self.profile.rcv_buf - self.unread) >= self.rcv_wnd

    def _send_delayed_ack(self, now: int) -> None:
        """tcp_send_delayed_ack: deadline jiffies + ato (capped), keeping an earlier one."""
        p = self.profile
        ato = self.ato_j
        if ato > p.delack_min_j:
            max_ato = p.hz // 2
            if self.in_pingpong or self.ack_pending & AckPending.PUSHED:
                max_ato = p.delack_max_j
            if self.srtt_us:
                rtt = max(p.us_to_jiffies(self.srtt_us), p.delack_min_j)
                max_ato = min(max_ato, rtt)
            ato = min(ato, max_ato)
        ato = min(ato, p.delack_max_j)
        now_j = self._jiffies(now)
        timeout_j = now_j + ato
        if self.ack_pending & AckPending.TIMER:
            if self.delack_timeout_j <= now_j + (ato >> 2):
                self._send_ack(now, Reason.DELACK_DUE)
                return
            timeout_j = min(timeout_j, self.delack_timeout_j)
        self.ack_pending |= AckPending.SCHED | AckPending.TIMER
        self.delack_timeout_j = timeout_j
        at = self._jiffy_timer_at(now, timeout_j)
        if self.timers.get(Timer.DELACK) == at:
            return  # already waiting for this deadline: nothing new to say
        mode = "ping-pong" if self.in_pingpong else "no quick ACKs left"
        detail = f"ato {ato * p.tick_us // 1000} ms, {mode}; fires in {(at - now) / 1000:.1f} ms"
        self._event(now, Kind.ACK_DELAYED, Reason.DELACK_WAIT, detail, ato=ato)
        self._arm(now, Timer.DELACK, at, Reason.DELACK_WAIT, detail)

    def _classic_ack_check(self, now: int, seg: Segment) -> None:
        """RFC 1122 §4.2.3.2: ACK every Nth segment, PSH at once on XNU, else a timer."""
        p = self.profile
        if self.ack_pending & AckPending.NOW:
            return
        if self.unacked_segs >= p.classic_ack_every:
            self._send_ack(now, Reason.EVERY_2ND, f"{self.unacked_segs} segments unACKed")
        elif p.classic_ack_psh_at_once and seg.flags & PSH:
            self._send_ack(now, Reason.PSH_ACK)
        elif seg.flags & FIN and not seg.length:
            self._send_ack(now, Reason.FIN_ACK)
        elif Timer.DELACK not in self.timers:
            at = now + p.classic_delack_us
            detail = f"timer {p.classic_delack_us // 1000} ms"
            self._event(now, Kind.ACK_DELAYED, Reason.DELACK_WAIT, detail)
            self._arm(now, Timer.DELACK, at, Reason.DELACK_WAIT, detail)

    def _send_ack(self, now: int, reason: Reason, detail: str = "") -> None:
        """tcp_send_ack: a pure ACK; tcp_event_ack_sent clears the scheduled state."""
        self._event(now, Kind.ACK_NOW, reason, detail)
        self._transmit(now, ACK, self.snd_nxt, 0, reason)

    # ------------------------------------------------------------------ timers
    _FIRED = {Timer.DELACK: Reason.DELACK_FIRED, Timer.PROBE0: Reason.PROBE0_RELEASE,
              Timer.RTO: Reason.RETRANSMIT, Timer.TSQ: Reason.TSQ_RELEASE,
              Timer.TLP: Reason.LOSS_PROBE, Timer.PACING: Reason.PACING_RELEASE}

    def on_deadline(self, now: int) -> None:
        """Fire every timer due at or before ``now``; nothing if none is due."""
        for timer in sorted((t for t, at in self.timers.items() if at <= now),
                            key=lambda t: self.timers[t]):
            if self.timers.pop(timer, None) is None:
                continue  # an earlier handler in this loop cancelled it
            self._event(now, Kind.TIMER_FIRED, self._FIRED[timer], timer=timer)
            if timer is Timer.DELACK:
                self._delack_timer(now)
            elif timer is Timer.PROBE0:
                self._probe_timer(now)
            elif timer is Timer.RTO:
                self._rto_timer(now)
            elif timer is Timer.TLP:
                self._loss_probe(now)
            elif timer is Timer.PACING:
                self._push_pending(now, self.nonagle, Reason.PACING_RELEASE)
            else:
                self._push_pending(now, self.nonagle, Reason.TSQ_RELEASE)

    def _delack_timer(self, now: int) -> None:
        """tcp_delack_timer_handler: outside ping-pong inflate ato; in it, leave ping-pong."""
        if self.profile.ack_style is AckStyle.CLASSIC:
            if self.ack_pending & AckPending.SCHED:
                self._send_ack(now, Reason.DELACK_FIRED)
            return
        if not self.ack_pending & AckPending.TIMER:
            return
        self.ack_pending &= ~AckPending.TIMER
        if not self.ack_pending & AckPending.SCHED:
            return
        if not self.in_pingpong:
            old = self.ato_j
            self.ato_j = min(self.ato_j << 1, self._rto_j, self.profile.delack_max_j)
            if self.ato_j != old:
                self._event(now, Kind.MODE, Reason.ATO_INFLATE,
                            f"ato {old} → {self.ato_j} jiffies", ato=self.ato_j)
        else:
            self.pingpong = 0
            self.ato_j = self.profile.delack_min_j
            self._event(now, Kind.MODE, Reason.PINGPONG_EXIT, "ato = ATO_MIN", pingpong=0)
        self._send_ack(now, Reason.DELACK_FIRED)

    def _probe_timer(self, now: int) -> None:
        """tcp_probe_timer → tcp_send_probe0 → tcp_write_wakeup: send the head, PSH set,
        regardless of Nagle and CORK; no Minshall update."""
        if self.rtx or not self.queue:
            return
        head = self.queue[0]
        if head.seq + min(head.length, 1) > self.snd_una + self.snd_wnd:
            self._transmit(now, ACK, self.snd_una - 1, 0, Reason.WINDOW_PROBE)
            self.backoff = min(self.backoff + 1, 6)
            self._check_probe_timer(now)
            return
        head.psh = True
        self._last_hold = None
        self.queue.popleft()
        self.queued_bytes -= head.length
        self._transmit_data(now, [head], Reason.PROBE0_RELEASE)
        self.rtx.append(head)
        self.snd_nxt = max(self.snd_nxt, head.end)
        self._rearm_rto(now)

    def _loss_probe(self, now: int) -> None:
        """tcp_send_loss_probe: one probe per tail-loss episode. New data goes first, with
        Nagle off (TCP_NAGLE_OFF); otherwise the last sent segment is sent again."""
        if not self.tlp_high_seq:
            head = self.queue[0] if self.queue else None
            if head is not None and head.seq + head.length <= self.snd_una + self.snd_wnd:
                before = self.packets_out
                self._write_xmit(now, Nonagle.OFF, Reason.LOSS_PROBE, push_one=True,
                                 loss_probe=True)
                if self.packets_out > before:
                    self.tlp_high_seq = self.snd_nxt
            elif self.rtx:
                last = self.rtx[-1]
                last.retransmitted = True
                self._transmit_data(now, [last], Reason.LOSS_PROBE)
                self.tlp_high_seq = self.snd_nxt
        self._rearm_rto(now)

    def _rto_timer(self, now: int) -> None:
        """tcp_retransmit_timer: resend the oldest unACKed segment, back off, cwnd 1."""
        if self.state is State.SYN_SENT:
            self.backoff += 1
            self._transmit(now, SYN, 0, 0, Reason.RETRANSMIT)
            self._arm(now, Timer.RTO, self._rto_at(now), Reason.RTO_ARMED)
            return
        if self.state is State.SYN_RCVD:
            self.backoff += 1
            self._transmit(now, _SYN_ACK, 0, 0, Reason.RETRANSMIT)
            self._arm(now, Timer.RTO, self._rto_at(now), Reason.RTO_ARMED)
            return
        if not self.rtx:
            return
        skb = self.rtx[0]
        skb.retransmitted = True
        self.in_loss = True
        self.ssthresh = max(self.packets_out // 2, 2)
        self.cwnd = 1
        self._transmit_data(now, [skb], Reason.RETRANSMIT)
        self.backoff = min(self.backoff + 1, 15)
        self._arm(now, Timer.RTO, self._rto_at(now), Reason.RTO_ARMED)
