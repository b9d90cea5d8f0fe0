"""The state one endpoint keeps, grouped as the kernel groups it, and the TCP state table.

Owns: the ``tp->nonagle`` and ``icsk_ack.pending`` bits, the skb record, the four state
groups (send, receive, ACK, congestion: `SendState`, `RecvState`, `AckState`,
`CongestionState`), the TCP states and their transition table (data, in the h11
manner, so docs and lessons can draw the diagram from it), `SockOpt` and `ModelError`.
Holds data only, no rules. Standard library and ``model.events`` / ``model.bbr`` /
``model.cubic`` only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from .bbr import Bbr
from .cubic import CongestionOps
from .events import Micros, Reason, Segment


class Nonagle:
    """tp->nonagle bits (include/net/tcp.h). Plain ints: IntFlag is too slow here."""

    OFF: Final = 1     # TCP_NODELAY
    CORK: Final = 2    # TCP_CORK (or MSG_MORE for one push)
    PUSH: Final = 4    # "cork is overridden for already queued data"


class Chrono:
    """enum tcp_chrono (include/linux/tcp.h): a higher value takes precedence."""

    UNSPEC: Final = 0
    BUSY: Final = 1             # data in flight or queued
    RWND_LIMITED: Final = 2     # stopped by the peer's receive window
    SNDBUF_LIMITED: Final = 3   # the application is stopped by the send buffer


class CaState:
    """icsk_ca_state (enum tcp_ca_state, include/net/tcp.h): the loss-recovery state."""

    OPEN: Final = 0         # nothing odd
    DISORDER: Final = 1     # duplicate ACKs (or SACKs) seen, no loss yet: limited transmit
    CWR: Final = 2          # cwnd reduced by ECN or local congestion (unused here)
    RECOVERY: Final = 3     # fast recovery (RFC 5681/6582 NewReno without SACK), PRR
    LOSS: Final = 4         # after an RTO: everything outstanding marked lost


CA_STATE_NAMES: Final = ("Open", "Disorder", "CWR", "Recovery", "Loss")


class AckPending:
    """icsk_ack.pending bits (include/net/inet_connection_sock.h)."""

    SCHED: Final = 1     # an ACK is owed
    TIMER: Final = 2     # the delayed-ACK timer is running
    PUSHED: Final = 4    # a small (pushed) segment arrived: a read may ACK at once
    PUSHED2: Final = 8   # a second one did
    NOW: Final = 16      # ACK at once (duplicate data)


class SockOpt(Enum):
    """The setsockopt(IPPROTO_TCP, …) options the model implements."""

    NODELAY = "nodelay"
    CORK = "cork"
    QUICKACK = "quickack"


class ModelError(Exception):
    """The application asked for something the socket cannot do in its state."""


class SocketError(ModelError):
    """A socket call failed as the kernel's would, with ``errno`` (its symbolic name:
    "EPIPE", "ECONNRESET", "EAGAIN", …): what a packetdrill script's ``= -1 EPIPE`` checks
    and what a scenario reports."""

    def __init__(self, errno: str, message: str) -> None:
        super().__init__(message)
        self.errno = errno


class Shutdown:
    """sk->sk_shutdown bits (include/net/sock.h)."""

    RCV: Final = 1     # RCV_SHUTDOWN: shutdown(SHUT_RD), close(), a reset
    SEND: Final = 2    # SEND_SHUTDOWN: shutdown(SHUT_WR), close(), a reset
    MASK: Final = 3    # SHUTDOWN_MASK


SHUT_HOW: Final = {"rd": Shutdown.RCV, "wr": Shutdown.SEND, "rdwr": Shutdown.MASK}
"""shutdown()'s ``how`` (SHUT_RD, SHUT_WR, SHUT_RDWR) as sk_shutdown bits (inet_shutdown
maps how + 1)."""

TCP_ERRORS: Final = {
    "EPIPE": "Broken pipe", "ECONNRESET": "Connection reset by peer",
    "ECONNREFUSED": "Connection refused", "ETIMEDOUT": "Connection timed out",
    "ENOTCONN": "Transport endpoint is not connected", "EAGAIN":
    "Resource temporarily unavailable",
}
"""The errors a model socket call can fail with, and strerror's words for them."""


# ---------------------------------------------------------------- TCP states (RFC 793)
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


class ConnEvent(Enum):
    """What moves the TCP state machine (the labels of the RFC 793 diagram's arrows)."""

    CONNECT = "connect()"
    CLOSE = "close()"
    SHUTDOWN_WR = "shutdown(SHUT_WR)"
    ABORT = "reset sent or received"
    TIMEOUT = "retransmissions timed out"
    RECV_SYN = "SYN received"
    RECV_SYNACK = "SYN-ACK received"
    RECV_HANDSHAKE_ACK = "ACK of our SYN-ACK received"
    RECV_FIN = "FIN received"
    RECV_FIN_OURS_ACKED = "FIN received, our own FIN already ACKed"
    OUR_FIN_ACKED = "ACK of our FIN received"


_CLOSABLE: Final = (State.CLOSED, State.LISTEN, State.SYN_SENT)

TRANSITIONS: Final[dict[tuple[State, ConnEvent], State]] = {
    (State.CLOSED, ConnEvent.CONNECT): State.SYN_SENT,
    (State.LISTEN, ConnEvent.RECV_SYN): State.SYN_RCVD,
    (State.SYN_SENT, ConnEvent.RECV_SYNACK): State.ESTABLISHED,
    (State.SYN_RCVD, ConnEvent.RECV_HANDSHAKE_ACK): State.ESTABLISHED,
    # closing first (active close)
    (State.ESTABLISHED, ConnEvent.CLOSE): State.FIN_WAIT1,
    (State.FIN_WAIT1, ConnEvent.OUR_FIN_ACKED): State.FIN_WAIT2,
    (State.FIN_WAIT1, ConnEvent.RECV_FIN): State.CLOSING,
    (State.FIN_WAIT1, ConnEvent.RECV_FIN_OURS_ACKED): State.TIME_WAIT,
    (State.FIN_WAIT2, ConnEvent.RECV_FIN): State.TIME_WAIT,
    (State.CLOSING, ConnEvent.OUR_FIN_ACKED): State.TIME_WAIT,
    # closing second (passive close)
    (State.ESTABLISHED, ConnEvent.RECV_FIN): State.CLOSE_WAIT,
    (State.CLOSE_WAIT, ConnEvent.CLOSE): State.LAST_ACK,
    # a half close sends the FIN as close() does (tcp_shutdown → tcp_close_state)
    (State.ESTABLISHED, ConnEvent.SHUTDOWN_WR): State.FIN_WAIT1,
    (State.CLOSE_WAIT, ConnEvent.SHUTDOWN_WR): State.LAST_ACK,
    (State.LAST_ACK, ConnEvent.OUR_FIN_ACKED): State.CLOSED,
    # close() before the connection exists just closes the socket
    **{(s, ConnEvent.CLOSE): State.CLOSED for s in _CLOSABLE},
    # a reset, sent or received, ends the connection from any state
    **{(s, ConnEvent.ABORT): State.CLOSED for s in State},
    # so do retransmissions that time out (tcp_write_err: no reset is sent)
    **{(s, ConnEvent.TIMEOUT): State.CLOSED for s in State},
}
"""(state, event) → next state. A pair not listed means the event changes nothing."""


TCP_RMEM_TO_WIN_SCALE: Final = 8
"""include/net/tcp.h (dfa2f0483360): tp->scaling_ratio is in 1/256 of truesize."""
TCP_MAX_WSCALE: Final = 14
"""RFC 7323: the largest window scale (a tuned profile is held to it)."""


# ---------------------------------------------------------------- the skb
_NOT_SENT: Final = Micros(-1)
_ZERO: Final = Micros(0)


@dataclass(slots=True)
class Skb:
    """One queued or sent piece of data (at most one MSS; a TSO skb is a run of these)."""

    seq: int
    length: int
    psh: bool = False
    fin: bool = False
    head: bool = False
    """The first piece of a kernel skb (the write queue's skbs grow to size_goal, a sent
    part is split off by tso_fragment): skbs are charged to the send buffer one by one
    (`SendState.skbs`) and a TSO burst never spans two (tcp_mss_split_point)."""
    eor: bool = False
    """TCP_SKB_CB(skb)->eor: the last piece of a MSG_EOR record; nothing is appended to it
    (tcp_skb_can_collapse_to)."""
    lost: bool = False
    """TCPCB_LOST: counted in lost_out (tcp_mark_skb_lost)."""
    rexmit: bool = False
    """TCPCB_SACKED_RETRANS: retransmitted and not yet ACKed, counted in retrans_out."""
    sent_at: Micros = Micros(-1)
    retransmitted: bool = False
    # tcp_rate_skb_sent's snapshot (TCP_SKB_CB(skb)->tx)
    tx_delivered: int = 0
    tx_delivered_mstamp: Micros = Micros(0)
    tx_first_tx: Micros = Micros(0)
    tx_app_limited: bool = False

    # Written out (as @dataclass would): compiled (setup.py), it runs natively; the
    # generated one stays interpreted code there. One skb per write.
    def __init__(self, seq: int, length: int, psh: bool = False, fin: bool = False,
                 head: bool = False, eor: bool = False, lost: bool = False,
                 rexmit: bool = False,
                 sent_at: Micros = _NOT_SENT, retransmitted: bool = False,
                 tx_delivered: int = 0, tx_delivered_mstamp: Micros = _ZERO,
                 tx_first_tx: Micros = _ZERO, tx_app_limited: bool = False) -> None:
        self.seq = seq
        self.length = length
        self.psh = psh
        self.fin = fin
        self.head = head
        self.eor = eor
        self.lost = lost
        self.rexmit = rexmit
        self.sent_at = sent_at
        self.retransmitted = retransmitted
        self.tx_delivered = tx_delivered
        self.tx_delivered_mstamp = tx_delivered_mstamp
        self.tx_first_tx = tx_first_tx
        self.tx_app_limited = tx_app_limited

    @property
    def end(self) -> int:
        return self.seq + self.length + (1 if self.fin else 0)


# ---------------------------------------------------------------- state groups
@dataclass(slots=True, kw_only=True)
class SendState:
    """The sending half of tcp_sock: sequence numbers, the queues, Nagle's flags."""

    nonagle: int = 0
    """tp->nonagle: `Nonagle` bits."""
    snd_una: int = 0
    """Oldest unACKed sequence number."""
    snd_nxt: int = 0
    """Next sequence number to send."""
    write_seq: int = 0
    """End of the data the application has written."""
    pushed_seq: int = 0
    """write_seq at the last PSH (forced_push)."""
    snd_sml: int = 0
    """End of the last sub-MSS segment sent (tcp_minshall_update)."""
    snd_wnd: int = 65535
    """The peer's advertised window."""
    max_window: int = 0
    """The largest window the peer has offered (size_goal, forced_push)."""
    queue: deque[Skb] = field(default_factory=deque)
    """Unsent skbs, send head first (sk_write_queue)."""
    queued_bytes: int = 0
    """Sum of the queue's lengths, kept as it changes (summing it was O(N²), issue 9)."""
    skb_start: int = 0
    """Where the write queue's last kernel skb starts (its len is write_seq - skb_start)."""
    skbs: int = 0
    """Kernel skbs in the write and retransmit queues (each charged its head's truesize)."""
    sndbuf: int = 16384
    """sk->sk_sndbuf (tcp_wmem[1] until tcp_init_buffer_space expands it)."""
    sndbuf_locked: bool = False
    """SOCK_SNDBUF_LOCK: SO_SNDBUF was set, the kernel no longer resizes it."""
    nospace: bool = False
    """SOCK_NOSPACE: a write found the send buffer full and waits for room."""
    write_wakeup: bool = False
    """sk_stream_write_space woke the writer (pulled by the caller)."""
    mss_clamp: int = 0
    """tp->rx_opt.mss_clamp: the peer's MSS option (tcp_sndbuf_expand's per-segment cost)."""
    notsent_lowat: int = 0
    """tp->notsent_lowat (TCP_NOTSENT_LOWAT); 0: the sysctl's value."""
    chrono_type: int = 0
    """tp->chrono_type: `Chrono` (what the sender is limited by now)."""
    chrono_start_j: int = 0
    """Jiffy the current chrono started."""
    chrono_stat: list[int] = field(default_factory=lambda: [0, 0, 0])
    """Jiffies spent busy, rwnd-limited, sndbuf-limited (tp->chrono_stat)."""
    rtx: deque[Skb] = field(default_factory=deque)
    """Sent, unACKed skbs (the retransmit queue)."""
    fin_queued: bool = False
    tlp_high_seq: int = 0
    """snd_nxt when a loss probe went out; 0 when no probe episode is open."""
    lsndtime_j: int = 0
    """Jiffy of the last data sent (ping-pong detection, cwnd restart)."""
    last_hold: Reason | None = None
    """The hold last traced, so a write joining the same hold says nothing new."""
    tx_busy_until: Micros = Micros(-1)
    """When the last sent packet leaves the device queue (autocork, TSQ)."""
    tx_complete_us: int = 0
    """Link property: device-queue residence of a sent packet (0 on loopback)."""
    gso_wire: bool = False
    """Link property: a TSO burst crosses the wire whole (loopback)."""
    rx_loopback: bool = False
    """Link property: received skbs are the sender's own (loopback: a small head plus
    page fragments, coalesced); otherwise each has a kmalloc'ed head (a NIC or TUN)."""


@dataclass(slots=True, kw_only=True)
class RecvState:
    """The receiving half of tcp_sock: what arrived, what the application has read."""

    rcv_nxt: int = 0
    rcv_wup: int = 0
    """rcv_nxt when the window was last advertised (rcv_nxt - rcv_wup: unACKed bytes)."""
    copied: int = 0
    """Bytes the application has read."""
    unread: int = 0
    """Bytes queued for the application."""
    peer_fin: bool = False
    rcv_wnd: int
    """The window last advertised (bytes; tp->rcv_wnd)."""
    window_clamp: int
    """The largest window we may offer (tp->window_clamp)."""
    rcv_ssthresh: int = 0
    """tp->rcv_ssthresh: the window's slow-start cap, grown by tcp_grow_window."""
    scaling_ratio: int = 128
    """tp->scaling_ratio (1/256): how much of the buffer's truesize is payload."""
    rmem: deque[list[int]] = field(default_factory=deque)
    """Unread skbs as [bytes left, truesize]: a skb's truesize is charged until it is
    read to the end (sk_rmem_alloc)."""
    rmem_alloc: int = 0
    """Sum of the queued skbs' truesize (sk_rmem_alloc)."""
    ofo: dict[int, Segment] = field(default_factory=dict)
    """Out-of-order segments by sequence number (tp->out_of_order_queue)."""
    rcv_mss: int
    """icsk_ack.rcv_mss: the receiver's guess of the peer's MSS."""
    last_seg_size: int = 0
    unacked_segs: int = 0
    pred_flags: bool = False
    """tp->pred_flags != 0: header prediction (tcp_rcv_established's fast path) is on."""
    rcvbuf: int = 0
    """sk->sk_rcvbuf: tcp_rmem[1] at first, raised by receive-buffer autotuning."""
    mstamp: Micros = Micros(0)
    """tp->tcp_mstamp as the receive path sees it: when the last segment arrived."""
    rtt8: int = 0
    """tp->rcv_rtt_est.rtt_us: the receiver's RTT estimate (µs × 8)."""
    rtt_seq: int = 0
    rtt_time: Micros = Micros(0)
    """tp->rcv_rtt_est.seq / .time: a window's worth of data is timed (no timestamps)."""
    ts_on: bool = False
    """Both SYNs carried the timestamp option (tp->rx_opt.tstamp_ok)."""
    ts_recent: int = 0
    """tp->rx_opt.ts_recent: the peer's TSval our segments echo."""
    rtt_last_tsecr: int = -1
    """tp->rcv_rtt_last_tsecr: the echo last used for a receive RTT sample (-1 at first:
    the model's TSval starts at 0, the kernel's at a random offset)."""
    rcvq_space: int = 0
    rcvq_seq: int = 0
    rcvq_time: Micros = Micros(0)
    """tp->rcvq_space: bytes copied in the last measured RTT, and where/when it began."""
    """CLASSIC receivers: segments received since the last ACK."""


@dataclass(slots=True, kw_only=True)
class AckState:
    """icsk_ack: the delayed-ACK engine (Linux receivers)."""

    pending: int = 0
    """`AckPending` bits."""
    ato_j: int = 0
    """ACK timeout (jiffies), adapted to the data's inter-arrival gap."""
    lrcvtime_j: int = 0
    """Jiffy the last data arrived."""
    quick: int = 0
    """Quick ACKs left in the budget."""
    pingpong: int = 0
    """Ping-pong count (interactive mode when >= the profile's threshold)."""
    timeout_j: int = 0
    """Jiffy the running delayed-ACK timer is due."""


@dataclass(slots=True, kw_only=True)
class CongestionState:
    """Congestion window, RTT/RTO estimates, delivery-rate sampling and pacing."""

    cwnd: int
    ssthresh: int = 0x7FFFFFFF
    """TCP_INFINITE_SSTHRESH until a loss (or HyStart) sets it; TCP_INFO reports it as is
    (measured: tcpi_snd_ssthresh 2147483647 on a fresh connection)."""
    ca_state: int = 0
    """icsk_ca_state: `CaState`."""
    sacked_out: int = 0
    """Duplicate ACKs counted as segments that left the network (tcp_add_reno_sack: the
    peer sends no SACK blocks here)."""
    lost_out: int = 0
    """Segments marked lost (tcp_mark_skb_lost)."""
    retrans_out: int = 0
    """Retransmitted segments not yet ACKed."""
    high_seq: int = 0
    """snd_nxt when recovery or loss began: recovery ends once it is ACKed."""
    prior_cwnd: int = 0
    """cwnd when recovery began (PRR's denominator)."""
    prr_delivered: int = 0
    prr_out: int = 0
    """Proportional rate reduction (RFC 6937): segments delivered and sent in recovery."""
    reordering: int = 3
    """tp->reordering: duplicate ACKs that mean a loss (net.ipv4.tcp_reordering)."""
    srtt_us: int = 0
    mdev_us: int = 0
    """4 × the mean deviation, as tp->mdev_us keeps it."""
    rttvar_us: int = 0
    mdev_max_us: int = 0
    rtt_seq: int = 0
    """tcp_rtt_estimator's per-RTT bookkeeping: rttvar decays toward the largest mdev of
    the last window (floored at rto_min) once per RTT."""
    rto_us: int
    backoff: int = 0
    retransmits: int = 0
    """icsk_retransmits: RTO retransmissions since new data was last ACKed."""
    retrans_stamp: Micros = Micros(0)
    """tp->retrans_stamp: when the first retransmission of this episode left (0: none);
    retransmission timeouts count from it."""
    user_timeout_us: int = 0
    """icsk_user_timeout (TCP_USER_TIMEOUT, ms in the kernel); 0: off."""
    probes_tstamp: Micros = Micros(-1)
    """icsk_probes_tstamp: when the first zero-window probe of this spell was due."""
    min_rtt_us: int = 0
    # delivery-rate sampling (tcp_rate.c)
    delivered: int = 0
    delivered_mstamp: Micros = Micros(0)
    first_tx_mstamp: Micros = Micros(0)
    app_limited: int = 0
    data_segs_out: int = 0
    # cwnd validation (tcp_cwnd_validate): is the sender using its window?
    is_cwnd_limited: bool = False
    max_packets_out: int = 0
    cwnd_usage_seq: int = 0
    ca: CongestionOps | None = None
    """CUBIC or Reno (None with BBR)."""
    # BBR and pacing (EDT, tcp_wstamp_ns)
    bbr: Bbr | None = None
    pacing_rate: float = 0.0
    """Bytes per second; 0: not pacing."""
    wstamp: float = 0.0
    """Earliest departure time of the next paced segment (µs)."""
