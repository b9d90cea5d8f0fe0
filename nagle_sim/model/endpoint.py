"""A sans-I/O TCP endpoint that decides, as Linux does, when small segments and ACKs leave.

Owns: the public face of one side of a connection: its inputs, its pulled outputs and
the dispatch of due timers. The rules live in small modules, one function per kernel
function, over a `Sock` (the state). Must not import I/O, clocks or UI libraries:
standard library only.

Theory of operation
-------------------
Every input takes ``now`` (`Micros`, integer µs): ``connect``, ``app_write``,
``app_read``, ``set_option``, ``app_close``, ``receive_segment``, ``on_deadline``.
Outputs are pulled: ``segments_to_send()`` drains what the endpoint transmitted,
``drain_events()`` its decisions (each with a `Reason`), ``next_deadline()`` the earliest
armed timer, ``tcp_info()`` a snapshot of its state (as getsockopt(TCP_INFO) gives).
``on_deadline(now)`` fires every timer due at or before ``now`` and does nothing
otherwise, so a stale wake-up is harmless. Nothing here reads a clock.

Where each rule lives (docs/model.md has the full map, kernel function → function):

- ``send``        the send path. tcp_sendmsg_locked → tcp_push → __tcp_push_pending_frames
  → tcp_write_xmit: data fills the tail skb; a skb that reaches size_goal (half the
  peer's window, at most 64 KB) is pushed at once; at the end of the call the tail is
  pushed with ``nonagle`` (TCP_NAGLE_CORK for MSG_MORE), so a write's last piece always
  has PSH. Only the tail skb is subject to **the Nagle rule** (`send.tcp_nagle_check`,
  Minshall's variant) and CORK. Queued data is kept in MSS-sized pieces; TSO skbs are
  built from them at send time (`send.tcp_mss_split_point`: tcp_cwnd_test,
  tcp_tso_autosize, size_goal). A burst crosses the wire whole on loopback, cut into MSS
  segments (PSH on the last) elsewhere.
- ``timers``      the timer table and the arming of RTO, tail loss probe and the
  zero-window probe. When a push finds nothing in flight and sends nothing, the probe
  timer is armed at max(RTO, 200 ms): tcp(7)'s "200 ms CORK ceiling", and what releases
  MSG_MORE data.
- ``recv``        the receive path: tcp_event_data_recv (ato adaptation, quick-ACK
  budget), **the delayed-ACK decision** `recv.tcp_ack_snd_check`, tcp_send_delayed_ack
  (deadline in jiffies), tcp_delack_timer_handler (ping-pong exit), __tcp_cleanup_rbuf
  (ACK on read), TCP_QUICKACK. ato, lrcvtime and the timers are in jiffies, and a timer
  due at jiffy J fires at the start of J+1: a 40 ms delayed ACK takes 40–44 ms at HZ=250.
  Non-Linux profiles (``AckStyle.CLASSIC``) use RFC 1122 instead: ACK every Nth segment
  or when a fixed timer expires.
- ``output``      transmission: segments, the advertised window, piggybacking
  (tcp_event_ack_sent) and ping-pong entry (tcp_event_data_sent).
- ``rate``        RTT/RTO, cwnd (slow start, restart after idle), delivery-rate samples,
  pacing; ``bbr`` is BBR.
- ``connection``  handshake, segment input (tcp_rcv_state_process, tcp_ack), close; the
  TCP states and their transition table are in ``state``.
- ``state`` / ``sock``  the state groups (send, receive, ACK, congestion) and `Sock`.

SIMPLIFICATION: no tcp_tso_should_defer (TSO deferral waiting for a bigger cwnd opening).
SIMPLIFICATION: the link never loses or reorders; out-of-order data (from packetdrill
scripts) is held and duplicate-ACKed, but no SACK blocks are sent or read.
SIMPLIFICATION: TCP Small Queues are not modelled.
The send buffer is: a write copies what fits (``app_write`` returns the count) and a
blocking caller waits for `Endpoint.take_write_wakeup`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from . import connection, recv, send
from .config import (
    TIMING_OPTION_FIELDS,
    TIMING_OPTIONS,
    SocketOptions,
    StackProfile,
    timing_option_error,
)
from .events import Kind, Micros, Reason, Segment, Side, Timer, TraceEvent
from .rate import chrono_stats_us
from .sock import Sock
from .state import SHUT_HOW, ModelError, Nonagle, Shutdown, SocketError, SockOpt, State
from .timers import FIRED

__all__ = ["SHUT_HOW", "Endpoint", "ModelError", "SockOpt", "SocketError", "State", "TcpInfo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TcpInfo:
    """A snapshot of the endpoint, named after getsockopt(TCP_INFO) / ``ss -i`` fields
    (``quick`` and ``pingpong`` are the icsk_ack fields /proc/net/tcp shows)."""

    state: State
    snd_cwnd: int
    """Congestion window (segments)."""
    snd_ssthresh: int
    """Slow-start threshold (segments; the kernel's "infinite" 0x7fffffff before a loss)."""
    snd_mss: int
    """The MSS the sender cuts data into (payload bytes)."""
    unacked: int
    """Segments in flight (tcpi_unacked, packets_out)."""
    rtt: int
    """Smoothed RTT (µs); 0 before the first sample."""
    rto: int
    """Retransmission timeout (µs)."""
    ato: int
    """Delayed-ACK timeout (µs; tcpi_ato, kept in jiffies by the kernel)."""
    rcv_mss: int
    """The receiver's estimate of the peer's MSS."""
    quick: int
    """Quick ACKs left in the budget."""
    pingpong: int
    """The ping-pong count; interactive (delayed-ACK) mode once it reaches the threshold."""
    pacing_rate: float
    """Bytes per second; 0 when not pacing."""
    busy_time: int = 0
    """µs the sender had data queued or in flight (tcpi_busy_time: the three chronos of
    tcp_chrono_start/stop summed, counted in jiffies)."""
    rwnd_limited: int = 0
    """µs of that stopped by the peer's receive window (tcpi_rwnd_limited)."""
    sndbuf_limited: int = 0
    """µs the application waited for send-buffer room with nothing else queued
    (tcpi_sndbuf_limited)."""
    last_data_recv: int = 0
    """ms since data last arrived (tcpi_last_data_recv, from icsk_ack.lrcvtime)."""
    last_data_sent: int = 0
    """ms since data was last sent (tcpi_last_data_sent, from lsndtime)."""
    notsent_bytes: int = 0
    """Bytes written and not yet sent (tcpi_notsent_bytes)."""
    rcv_space: int = 0
    """Bytes the reader took in the last measured RTT (tcpi_rcv_space: rcvq_space.space)."""
    rcv_ssthresh: int = 0
    """The offered window's current cap (tcpi_rcv_ssthresh)."""
    rcv_rtt: int = 0
    """The receiver's RTT estimate, µs (tcpi_rcv_rtt)."""


_TIMER_HANDLERS: Final[dict[Timer, Callable[[Sock, Micros], None]]] = {
    Timer.DELACK: recv.tcp_delack_timer_handler,
    Timer.PROBE0: send.tcp_probe_timer,
    Timer.RTO: send.tcp_retransmit_timer,
    Timer.TLP: send.tcp_send_loss_probe,
}
"""Timers whose handler is a kernel function of its own; PACING and TSQ just push."""

_SETSOCKOPT_WORDS: Final = {opt: (f"TCP_{opt.name} = 0", f"TCP_{opt.name} = 1")
                            for opt in SockOpt}
"""What a setsockopt event says, off and on, worked out once: an enum's ``name`` is a
Python-level property, looked up by name at every use even from compiled code."""


class Endpoint:
    """One side of a TCP connection (see the module docstring)."""

    def __init__(self, side: Side, profile: StackProfile, options: SocketOptions,
                 mss: int, advmss: int = 0) -> None:
        """Args:
            side: which side this is (the client connects, the server listens).
            profile: the stack's rules and constants.
            options: socket options set before connect/accept.
            mss: the segment size both directions use.
            advmss: the MSS this host announces, if larger (0: ``mss``); it sizes the
                SYN's window and the receive-buffer autotuning's first estimate.
        """
        self._sk = Sock(side, profile, options, mss, advmss)

    # ---------------------------------------------------------------- pulls
    def segments_to_send(self) -> list[Segment]:
        """Segments transmitted since the last call, in order. A non-empty list is the
        caller's; an empty one may be the endpoint's own: read it, do not keep or fill it."""
        sk = self._sk
        out = sk.out
        if out:     # an empty list is handed back as it is: most pulls find nothing
            sk.out = []
        return out

    def drain_events(self) -> list[TraceEvent]:
        """Decisions taken since the last call, in order (a list as `segments_to_send`'s)."""
        sk = self._sk
        events = sk.events
        if events:
            sk.events = []
        return events

    def next_deadline(self) -> Micros | None:
        """When the earliest armed timer is due (None: no timer armed)."""
        # a loop, not min(), over plain ints (an Optional is boxed and compared generically
        # when compiled): called after every input
        earliest, armed = 0, False
        for at in self._sk.timers.values():
            if not armed or at < earliest:
                earliest, armed = at, True
        return Micros(earliest) if armed else None

    def deadline(self, timer: Timer) -> Micros | None:
        """When ``timer`` is due, None when it is not armed."""
        return self._sk.timers.get(timer)

    def tcp_info(self, now: Micros | None = None) -> TcpInfo:
        """A snapshot of the connection's state (see `TcpInfo`); the times since an
        event and the chronos need ``now`` (without it they read as of time 0)."""
        sk = self._sk
        cc = sk.cc
        at = Micros(0) if now is None else now
        busy, rwnd, sndbuf = chrono_stats_us(sk, at)
        now_j = sk.jiffies(at)
        ms_per_j = sk.profile.tick_us // 1000
        # tcp_time_wait hands the connection to a timewait mini-socket and closes the full
        # one (tcp_done): getsockopt(TCP_INFO) on it says TCP_CLOSE (measured here)
        state = State.CLOSED if sk.state is State.TIME_WAIT else sk.state
        return TcpInfo(state=state, snd_cwnd=cc.cwnd,
                       snd_ssthresh=cc.ssthresh, snd_mss=sk.mss,
                       unacked=sk.packets_out,
                       rtt=cc.srtt_us, rto=cc.rto_us,
                       ato=sk.ack.ato_j * sk.profile.tick_us, rcv_mss=sk.rcv.rcv_mss,
                       quick=sk.ack.quick, pingpong=sk.ack.pingpong,
                       pacing_rate=cc.pacing_rate, busy_time=busy, rwnd_limited=rwnd,
                       sndbuf_limited=sndbuf,
                       last_data_recv=max(0, now_j - sk.ack.lrcvtime_j) * ms_per_j,
                       last_data_sent=max(0, now_j - sk.snd.lsndtime_j) * ms_per_j,
                       notsent_bytes=sk.snd.write_seq - sk.snd.snd_nxt,
                       rcv_space=sk.rcv.rcvq_space, rcv_ssthresh=sk.rcv.rcv_ssthresh,
                       rcv_rtt=sk.rcv.rtt8 >> 3)

    @property
    def side(self) -> Side:
        return self._sk.side

    @property
    def state(self) -> State:
        return self._sk.state

    @property
    def established(self) -> bool:
        """ESTABLISHED or CLOSE_WAIT: the application may write."""
        return self._sk.established

    @property
    def in_pingpong(self) -> bool:
        """inet_csk_in_pingpong_mode: the ping-pong count reached the threshold."""
        return self._sk.in_pingpong

    @property
    def unread(self) -> int:
        """Bytes received and not yet read by the application."""
        return self._sk.rcv.unread

    @property
    def peer_fin(self) -> bool:
        """The peer closed its side (its FIN arrived)."""
        return self._sk.rcv.peer_fin

    @property
    def readable(self) -> bool:
        """A read would not block: data queued, end of stream, or an error to report."""
        sk = self._sk
        return bool(sk.rcv.unread) or sk.rcv.peer_fin or bool(sk.shutdown & Shutdown.RCV) \
            or bool(sk.err)

    def poll_events(self) -> frozenset[str]:
        """tcp_poll's mask, by the names poll(2) gives its bits: POLLHUP with both directions
        shut or the socket closed; POLLIN, POLLRDNORM and POLLRDHUP once the peer's FIN (or
        SHUT_RD) ends the stream; POLLIN and POLLRDNORM with data queued; POLLOUT and
        POLLWRNORM when connected and __sk_stream_is_writeable(sk, 1) — at most two thirds
        of the send buffer in use (sk_stream_wspace ≥ sk_stream_min_wspace) and fewer than
        half of TCP_NOTSENT_LOWAT's bytes unsent (tcp_stream_memory_free with wake = 1) —
        or after shutdown(SHUT_WR); POLLERR with an error pending."""
        sk = self._sk
        mask: set[str] = set()
        if sk.shutdown == Shutdown.MASK or sk.state is State.CLOSED:
            mask.add("POLLHUP")
        if sk.shutdown & Shutdown.RCV or sk.rcv.peer_fin:
            mask.update(("POLLIN", "POLLRDNORM", "POLLRDHUP"))
        if sk.state not in (State.SYN_SENT, State.SYN_RCVD, State.LISTEN, State.CLOSED):
            if sk.rcv.unread:
                mask.update(("POLLIN", "POLLRDNORM"))
            queued = send.sk_wmem_queued(sk)
            if sk.shutdown & Shutdown.SEND or (
                    sk.snd.sndbuf - queued >= queued >> 1
                    and send.tcp_stream_memory_free(sk, 1)):
                mask.update(("POLLOUT", "POLLWRNORM"))
        if sk.err:
            mask.add("POLLERR")
        return frozenset(mask)

    @property
    def snd_nxt(self) -> int:
        """The next sequence number to send (grows with each data segment and the FIN)."""
        return self._sk.snd.snd_nxt

    @property
    def notsent_bytes(self) -> int:
        """Bytes written and not yet sent (tcpi_notsent_bytes): held by Nagle, cork, the
        congestion or the peer's window."""
        snd = self._sk.snd
        return snd.write_seq - snd.snd_nxt

    @property
    def eof(self) -> bool:
        """Nothing is queued and none will come: the peer's FIN, shutdown(SHUT_RD), a reset
        (a read then returns 0, or the reset's error once)."""
        sk = self._sk
        return sk.rcv.unread == 0 and (sk.rcv.peer_fin or bool(sk.shutdown & Shutdown.RCV))

    # ---------------------------------------------------------------- link properties
    def set_tx_complete(self, us: int) -> None:
        """Link property: how long a sent packet stays in the device queue (autocork)."""
        self._sk.snd.tx_complete_us = us

    def set_gso_wire(self, on: bool) -> None:
        """Link property: loopback hands a TSO skb to the peer whole (one super-segment);
        other links see it cut into MSS segments. Loopback also hands the receiver the
        sender's own skbs (`set_rx_loopback`, set with it)."""
        self._sk.snd.gso_wire = on
        self._sk.snd.rx_loopback = on

    def set_rx_loopback(self, on: bool) -> None:
        """Link property: received skbs are the sender's own (loopback) rather than
        kmalloc'ed by a device (a NIC or TUN: packetdrill injects through one)."""
        self._sk.snd.rx_loopback = on

    # ---------------------------------------------------------------- inputs
    def connect(self, now: Micros) -> None:
        """Active open: send SYN (isn 0).

        Raises:
            ModelError: the socket is not closed.
        """
        connection.tcp_connect(self._sk, now)

    def app_write(self, now: Micros, nbytes: int, more: bool = False, eor: bool = False,
                  resume: bool = False) -> int:
        """One send() call of ``nbytes`` (``more``: MSG_MORE; ``eor``: MSG_EOR).

        Returns:
            The bytes copied into the send buffer: fewer than ``nbytes`` when it filled.
            A blocking caller waits for `take_write_wakeup` and calls again with what is
            left and ``resume=True`` (the same call going on); a non-blocking one returns
            the count, or EAGAIN when it is 0.

        Raises:
            SocketError: EPIPE after shutdown(SHUT_WR) or on a closed socket, or the
                pending error of a reset.
            ModelError: a bad size, MSG_MORE without support.
        """
        return send.tcp_sendmsg(self._sk, now, nbytes, more, eor, resume)

    def take_error(self) -> str:
        """getsockopt(SO_ERROR): the pending error's errno name ("" none), now cleared."""
        return self._sk.sock_error("")

    def take_write_wakeup(self) -> bool:
        """Whether a writer waiting for send-buffer room was woken since the last call
        (sk_stream_write_space; at most 2/3 of the buffer in use)."""
        snd = self._sk.snd
        woke, snd.write_wakeup = snd.write_wakeup, False
        return woke

    @property
    def sndbuf(self) -> int:
        """sk_sndbuf: what getsockopt(SO_SNDBUF) reads."""
        return self._sk.snd.sndbuf

    def set_sndbuf(self, value: int) -> None:
        """setsockopt(SO_SNDBUF, value): doubled, capped, and no longer autotuned."""
        send.sock_set_sndbuf(self._sk, value)

    @property
    def notsent_lowat(self) -> int:
        """tp->notsent_lowat: what getsockopt(TCP_NOTSENT_LOWAT) reads (0: not set)."""
        return self._sk.snd.notsent_lowat

    def set_notsent_lowat(self, value: int) -> None:
        """setsockopt(TCP_NOTSENT_LOWAT, value): writes stop while this many bytes are
        not yet sent (0: back to net.ipv4.tcp_notsent_lowat)."""
        self._sk.snd.notsent_lowat = value

    def set_user_timeout(self, ms: int) -> None:
        """setsockopt(TCP_USER_TIMEOUT, ms): give up after this long without an ACK of
        retransmitted data, or of zero-window probes (0: tcp_retries2's ~15 minutes).

        Raises:
            ModelError: a negative value (the kernel's EINVAL)."""
        if ms < 0:
            raise ModelError("TCP_USER_TIMEOUT must not be negative")
        self._sk.cc.user_timeout_us = ms * 1000

    def set_mss_clamp(self, value: int) -> None:
        """The MSS option the peer's SYN carried (tcp_sndbuf_expand sizes segments by it;
        default: the payload MSS plus the timestamp option, as between Linux hosts)."""
        self._sk.snd.mss_clamp = value

    def app_read(self, now: Micros, max_bytes: int) -> int:
        """One recv() call: copy up to ``max_bytes`` of what is queued.

        Returns:
            The number of bytes copied (0 when nothing is queued).
        """
        return recv.tcp_recvmsg(self._sk, now, max_bytes)

    def set_option(self, now: Micros, opt: SockOpt, on: bool) -> None:
        """setsockopt(IPPROTO_TCP, …) as in do_tcp_setsockopt.

        Raises:
            ModelError: the profile's stack has no such option.
        """
        sk = self._sk
        sk.event(now, Kind.SOCKOPT, Reason.SOCKOPT_SET, _SETSOCKOPT_WORDS[opt][int(on)])
        if opt is SockOpt.CORK and not sk.profile.supports_cork:
            raise ModelError(f"profile {sk.profile.name} has no TCP_CORK")
        if opt is SockOpt.QUICKACK and not sk.profile.supports_quickack:
            raise ModelError(f"profile {sk.profile.name} has no TCP_QUICKACK")
        if opt is SockOpt.NODELAY:
            send.tcp_sock_set_nodelay(sk, now, on)
        elif opt is SockOpt.CORK:
            send.tcp_sock_set_cork(sk, now, on)
        else:
            recv.tcp_sock_set_quickack(sk, now, on)

    def set_timing_option(self, now: Micros, option: str, us: int) -> None:
        """TCP_RTO_MIN_US / TCP_DELACK_MAX_US (do_tcp_setsockopt, 6.15+): this socket's
        icsk_rto_min / icsk_delack_max, kept in whole jiffies as the kernel keeps them.

        Raises:
            ModelError: the kernel would refuse it (no such option, or out of range).
        """
        sk = self._sk
        sk.event(now, Kind.SOCKOPT, Reason.SOCKOPT_SET, f"{TIMING_OPTIONS[option]} = {us}")
        why = timing_option_error(sk.profile, option, us)
        if why:
            raise ModelError(why)
        jiffy_us = sk.profile.us_to_jiffies(us) * sk.profile.tick_us
        sk.profile = sk.profile.with_overrides(**{TIMING_OPTION_FIELDS[option]: jiffy_us})

    def get_option(self, opt: SockOpt) -> int:
        """getsockopt: TCP_QUICKACK reads !pingpong, whatever the quick-ACK budget is."""
        sk = self._sk
        if opt is SockOpt.NODELAY:
            return int(bool(sk.snd.nonagle & Nonagle.OFF))
        if opt is SockOpt.CORK:
            return int(bool(sk.snd.nonagle & Nonagle.CORK))
        return int(not sk.in_pingpong)

    def app_close(self, now: Micros) -> None:
        """close(): a FIN after the queued data, or a reset if data is left unread."""
        connection.tcp_close(self._sk, now)

    def shutdown(self, now: Micros, how: str) -> None:
        """shutdown(fd, SHUT_RD / SHUT_WR / SHUT_RDWR): ``how`` is "rd", "wr" or "rdwr".

        Raises:
            SocketError: ENOTCONN on a socket that is not connected.
        """
        connection.tcp_shutdown(self._sk, now, SHUT_HOW[how])

    def receive_segment(self, now: Micros, seg: Segment) -> None:
        """A segment from the peer arrives."""
        connection.tcp_rcv_state_process(self._sk, now, seg)

    def on_deadline(self, now: Micros) -> None:
        """Fire every timer due at or before ``now``; nothing if none is due."""
        sk = self._sk
        timers = sk.timers
        for timer in sorted((t for t, at in timers.items() if at <= now),
                            key=lambda t: timers[t]):
            if not sk.disarm(timer):
                continue  # an earlier handler in this loop cancelled it
            sk.event(now, Kind.TIMER_FIRED, FIRED[timer], timer=timer)
            handler = _TIMER_HANDLERS.get(timer)
            if handler is not None:
                handler(sk, now)
            else:       # PACING, TSQ: the hrtimer / TX completion pushes the queue
                send.tcp_push_pending_frames(sk, now, sk.snd.nonagle, FIRED[timer])
