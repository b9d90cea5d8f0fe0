"""Typed vocabulary shared by the model, the simulator, realnet and every view.

Owns: time units, sides, TCP flags, wire segments, trace event kinds and the
`Reason` catalogue that lessons, the ladder and tests quote.
Must not import anything outside the standard library (no simpy, asyncio, textual, rich).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntFlag
from typing import Final, NewType

Micros = NewType("Micros", int)
"""All model time: integer microseconds since the client's SYN left."""


def ms(value: float) -> Micros:
    """Milliseconds to `Micros` (rounded to the nearest microsecond)."""
    return Micros(round(value * 1000))


class Side(Enum):
    CLIENT = "client"
    SERVER = "server"

    @property
    def peer(self) -> Side:
        return Side.SERVER if self is Side.CLIENT else Side.CLIENT


class TcpFlag(IntFlag):
    """Header flags; letters follow tcpdump (S F R P A).

    Hot paths use the plain-int twins FIN, SYN, RST, PSH, ACK below (IntFlag arithmetic is
    slow); a `Segment.flags` is a plain int of these bits."""

    FIN = 0x01
    SYN = 0x02
    RST = 0x04
    PSH = 0x08
    ACK = 0x10

    def letters(self) -> str:
        return flag_letters(int(self))

    @classmethod
    def parse(cls, letters: str) -> TcpFlag:
        return cls(parse_flags(letters))


# Final: compiled code (setup.py, mypyc) inlines them instead of reading module globals
FIN: Final = 0x01
SYN: Final = 0x02
RST: Final = 0x04
PSH: Final = 0x08
ACK: Final = 0x10
_LETTER_ORDER: Final = ((SYN, "S"), (FIN, "F"), (RST, "R"), (PSH, "P"), (ACK, "A"))
_LETTERS: Final = tuple("".join(c for bit, c in _LETTER_ORDER if v & bit) for v in range(32))
_BITS: Final = {c: bit for bit, c in _LETTER_ORDER}


def flag_letters(flags: int) -> str:
    """Flag bits as tcpdump letters in the order S F R P A."""
    return _LETTERS[flags & 31]


def parse_flags(letters: str) -> int:
    value = 0
    for letter in letters:
        if letter not in _BITS:
            raise ValueError(f"unknown TCP flag letter {letter!r}")
        value |= _BITS[letter]
    return value


class Kind(Enum):
    """What a trace event records."""

    HOLD = "hold"                    # queued data was not sent, and why
    ACK_NOW = "ack_now"              # receiver decided to ACK at once
    ACK_DELAYED = "ack_delayed"      # receiver decided to wait
    TIMER_ARMED = "timer_armed"
    TIMER_FIRED = "timer_fired"
    TIMER_CANCELLED = "timer_cancelled"
    MODE = "mode"                    # quick-ACK / ping-pong / ato / cwnd change
    SOCKOPT = "sockopt"              # setsockopt / getsockopt
    STATE = "state"                  # TCP state machine transition


class Timer(Enum):
    DELACK = "delack"     # icsk_delack_timer (tcp_delack_timer_handler)
    PROBE0 = "probe0"     # ICSK_TIME_PROBE0: also what releases CORK / MSG_MORE data
    RTO = "rto"           # ICSK_TIME_RETRANS
    TLP = "tlp"           # ICSK_TIME_LOSS_PROBE (shares the RTO's icsk_pending slot)
    PACING = "pacing"     # tp->pacing_timer (an hrtimer: exact, not on jiffies)
    TSQ = "tsq"           # TX completion of an autocorked packet (tcp_tsq_handler)


class Reason(Enum):
    """Why an endpoint acted or held back. The text is what the UI quotes."""

    # sending
    APP_WRITE = "the application wrote data and nothing stops it from leaving"
    FULL_SEGMENT = "a full-sized segment always leaves at once (tcp_push_one)"
    NAGLE_HOLD = ("Nagle: the last small segment sent is still unACKed, so this "
                  "small one waits (Minshall's rule, tcp_nagle_check)")
    NAGLE_HOLD_CLASSIC = "Nagle (RFC 896): data is unACKed, so this small segment waits"
    CORK_HOLD = "TCP_CORK is set: a partial segment waits for more data"
    MORE_HOLD = "MSG_MORE: the application promised more, so this partial segment waits"
    CWND_HOLD = "congestion window full: as many segments in flight as cwnd allows"
    RWND_HOLD = "the peer's receive window is full"
    PACING_HOLD = ("pacing: the next segment may not leave before its departure time "
                   "(BBR pacing, tcp_pacing_check)")
    PACING_RELEASE = "the pacing timer fired: the next paced segment leaves"
    AUTOCORK_HOLD = ("autocork: an earlier packet is still in the device queue, so this "
                     "write is merged until it leaves (tcp_should_autocork)")
    ACK_RELEASE = "an ACK arrived, so queued data may now leave"
    NODELAY_PUSH = "TCP_NODELAY switched on: queued data is pushed out, even if corked"
    UNCORK_PUSH = "TCP_CORK switched off: queued data is pushed"
    PROBE0_RELEASE = ("probe timer fired with nothing in flight: the held segment is sent "
                      "regardless of Nagle/CORK (tcp_write_wakeup)")
    TSQ_RELEASE = "the earlier packet left the device: the autocorked data follows"
    CLOSE_PUSH = "close(): the FIN pushes everything queued, Nagle or not"
    SHUTDOWN_PUSH = ("shutdown(SHUT_WR): the FIN follows everything queued, Nagle or not "
                     "(tcp_shutdown)")
    SNDBUF_HOLD = ("the send buffer is full: the write waits until ACKs free room "
                   "(sk_stream_memory_free)")
    SNDBUF_ROOM = ("ACKs freed a third of the send buffer: the waiting write goes on "
                   "(sk_stream_write_space)")
    RETRANSMIT = "retransmission timer fired: resend the oldest unACKed segment"
    LOSS_PROBE = ("tail loss probe: no ACK within about 2 x SRTT, so send new data (Nagle "
                  "ignored) or the last segment again to draw an ACK (tcp_send_loss_probe)")
    HANDSHAKE = "three-way handshake"
    RESET = "close() with unread data: the kernel resets the connection"
    RESET_NO_SOCKET = ("a segment arrived for a socket that no longer exists, or new data "
                       "for one the application has closed: the kernel answers with a "
                       "reset (tcp_v4_send_reset)")
    WINDOW_PROBE = "zero window: probe the peer"
    WRITE_TIMEOUT = ("retransmissions timed out (TCP_USER_TIMEOUT, or tcp_retries2): the "
                     "connection is dropped without a reset, ETIMEDOUT (tcp_write_err)")
    # receiving
    QUICKACK_MODE = "quick-ACK mode: the receiver ACKs every segment at once"
    FULL_FRAME = "more than one full frame (rcv_mss) is unACKed: ACK at once"
    DELACK_WAIT = "delayed ACK: hold the ACK hoping to piggyback it on a reply"
    DELACK_FIRED = "delayed-ACK timer fired: the ACK goes out alone"
    DELACK_DUE = "the pending delayed-ACK timer was about to fire anyway (within ato/4)"
    READ_ACK = ("the application read and emptied the queue after a small segment "
                "outside ping-pong mode: ACK now (tcp_cleanup_rbuf)")
    WINDOW_UPDATE = "the read freed much buffer space: advertise the bigger window"
    QUICKACK_OPT = "TCP_QUICKACK=1 with an ACK pending: sent now"
    PIGGYBACK = "the ACK rides on an outgoing data segment"
    DUPLICATE = "duplicate or old data arrived: ACK at once"
    OUT_OF_ORDER = ("data arrived beyond a gap: ACK at once so the sender learns of the hole "
                    "(tcp_data_queue_ofo, duplicate ACK)")
    FIN_ACK = "FIN arrived"
    EVERY_2ND = "second unACKed segment: ACK at once (RFC 1122 / TcpAckFrequency)"
    PSH_ACK = "segment carries PSH: this stack ACKs it at once"
    SYNACK_DELAYED = "SYN-ACK arrived while in ping-pong mode: the ACK is delayed"
    # modes and timers
    QUICK_START = "first data: 16 quick ACKs granted (tcp_incr_quickack)"
    QUICK_REFILL = "idle longer than RTO: quick-ACK budget refilled"
    QUICK_SPENT = "quick-ACK budget spent: back to delayed ACKs"
    QUICK_DROPPED = ("the receive buffer is more than half full: quick-ACK mode ends "
                     "(__tcp_select_window)")
    PINGPONG_ENTER = "the application replied within ato of the last data: ping-pong mode"
    PINGPONG_COUNT = "replied within ato: ping-pong count raised"
    PINGPONG_EXIT = "delayed-ACK timer fired in ping-pong mode: leave ping-pong"
    ATO_UPDATE = "ato adapted to the data inter-arrival gap (tcp_event_data_recv)"
    ATO_INFLATE = "delayed ACK missed outside ping-pong: ato doubled"
    PROBE0_ARMED = "nothing in flight but data queued: probe timer armed at max(RTO, 200 ms)"
    RTO_ARMED = "data in flight: retransmission timer armed"
    TIMER_CLEARED = "no longer needed"
    SOCKOPT_SET = "setsockopt"
    SOCKOPT_GET = "getsockopt"
    QUICKACK_OFF = "TCP_QUICKACK=0 puts the socket into ping-pong mode (delayed ACKs)"
    QUICKACK_ON = "TCP_QUICKACK=1 leaves ping-pong mode (not sticky, budget not refilled)"
    CWND_GROW = "slow start: cwnd grows with each ACKed segment"
    BBR_CWND = "BBR sets cwnd from its path model (gain x bandwidth x min RTT, 4 in PROBE_RTT)"
    CWND_IDLE = "idle longer than RTO: cwnd restarts (tcp_slow_start_after_idle)"
    RCVBUF_GROW = ("the reader keeps up: the receive buffer grows so the window can "
                   "(receive-buffer autotuning, tcp_rcv_space_adjust)")
    CWND_PRR = ("fast recovery: cwnd follows Proportional Rate Reduction toward ssthresh "
                "(tcp_cwnd_reduction, RFC 6937)")
    DUPACK = ("a duplicate ACK: a later segment arrived, an earlier one may be lost "
              "(tcp_add_reno_sack)")
    RECOVERY_ENTER = ("three duplicate ACKs: the first unACKed segment is taken as lost; "
                      "fast retransmit and fast recovery (tcp_enter_recovery)")
    RECOVERY_EXIT = "everything outstanding at the loss is ACKed: recovery ends"
    FAST_RETRANSMIT = ("fast retransmit: a segment the duplicate or partial ACKs say is "
                       "lost is sent again (tcp_xmit_retransmit_queue)")
    STATE_CHANGE = "TCP state change"
    APP_CALL = "application call"


@dataclass(slots=True, kw_only=True)
class Segment:
    """One TCP segment on the wire. seq/ack are relative to each side's ISN (0).

    Treated as a value: nothing changes a segment once built (`dataclasses.replace`
    makes a changed copy). Not ``frozen``: a frozen dataclass sets each field through
    ``object.__setattr__``, a generic call that cost about 5 % of a big run."""

    src: Side
    seq: int
    ack: int
    length: int
    flags: int
    """Bits of FIN, SYN, RST, PSH, ACK (see `TcpFlag`)."""
    window: int = 65535
    sent_at: Micros = Micros(0)
    why: Reason = Reason.APP_WRITE
    tsval: int = -1
    """The timestamp option's TSval (ms, the sender's tcp_time_stamp); -1: no option."""
    tsecr: int = -1
    """Its TSecr: the TSval the sender last stored from us (ts_recent)."""

    # Written out (as @dataclass would) so that the compiled build (setup.py, mypyc) runs
    # it as native code: the generated __init__ stays interpreted there (~3 µs a segment).
    def __init__(self, *, src: Side, seq: int, ack: int, length: int, flags: int,
                 window: int = 65535, sent_at: Micros = Micros(0),
                 why: Reason = Reason.APP_WRITE, tsval: int = -1, tsecr: int = -1) -> None:
        self.src = src
        self.seq = seq
        self.ack = ack
        self.length = length
        self.flags = flags
        self.window = window
        self.sent_at = sent_at
        self.why = why
        self.tsval = tsval
        self.tsecr = tsecr

    @property
    def end_seq(self) -> int:
        """Sequence space consumed: data plus one for SYN and for FIN."""
        return self.seq + self.length + (1 if self.flags & SYN else 0) + (
            1 if self.flags & FIN else 0)

    def summary(self) -> str:
        """One-line label in tcpdump style, used by the ladder and assertion messages."""
        flags = flag_letters(self.flags).replace("A", ".") or "."
        if self.length:
            return f"{flags} {self.seq}:{self.seq + self.length}({self.length}) ack {self.ack}"
        return f"{flags} seq {self.seq} ack {self.ack}"


@dataclass(slots=True, kw_only=True)
class TraceEvent:
    """One decision of an endpoint, with the reason the UI quotes. A value, like
    `Segment` (and not ``frozen`` for the same reason)."""

    at: Micros
    side: Side
    kind: Kind
    reason: Reason
    detail: str = ""
    timer: Timer | None = None
    deadline: Micros | None = None
    data: dict[str, int] = field(default_factory=dict)

    def __init__(self, *, at: Micros, side: Side, kind: Kind, reason: Reason, detail: str = "",
                 timer: Timer | None = None, deadline: Micros | None = None,
                 data: dict[str, int] | None = None) -> None:
        self.at = at
        self.side = side
        self.kind = kind
        self.reason = reason
        self.detail = detail
        self.timer = timer
        self.deadline = deadline
        self.data = {} if data is None else data

    def text(self) -> str:
        """Human sentence: reason, then specifics."""
        return f"{self.reason.value} ({self.detail})" if self.detail else self.reason.value


# Enum.__hash__ is written in Python (hash of the name); these enums key hot dicts, so use
# identity hashing, which is C-level and equally valid within one process.
for _enum in (Side, Kind, Timer, Reason):
    _enum.__hash__ = object.__hash__  # type: ignore[method-assign]

REASON_TEXT: Final[dict[Reason, str]] = {r: r.value for r in Reason}
REASON_CODE: Final[dict[Reason, str]] = {r: r.name for r in Reason}
KIND_NAME: Final[dict[Kind, str]] = {k: k.value for k in Kind}
TIMER_NAME: Final[dict[Timer, str]] = {t: t.value for t in Timer}

SHORT: Final[dict[Reason, str]] = {
    Reason.APP_WRITE: "sent on write", Reason.FULL_SEGMENT: "full segment",
    Reason.NAGLE_HOLD: "Nagle holds", Reason.NAGLE_HOLD_CLASSIC: "Nagle holds",
    Reason.CORK_HOLD: "corked", Reason.MORE_HOLD: "MSG_MORE holds",
    Reason.CWND_HOLD: "cwnd full", Reason.RWND_HOLD: "peer window full",
    Reason.AUTOCORK_HOLD: "autocorked", Reason.ACK_RELEASE: "released by ACK",
    Reason.PACING_HOLD: "paced", Reason.PACING_RELEASE: "pacing release",
    Reason.NODELAY_PUSH: "NODELAY push", Reason.UNCORK_PUSH: "uncork push",
    Reason.PROBE0_RELEASE: "probe timer release", Reason.TSQ_RELEASE: "after TX completion",
    Reason.CLOSE_PUSH: "close", Reason.SHUTDOWN_PUSH: "shutdown",
    Reason.SNDBUF_HOLD: "send buffer full", Reason.SNDBUF_ROOM: "send buffer room",
    Reason.RETRANSMIT: "retransmit", Reason.HANDSHAKE: "handshake",
    Reason.LOSS_PROBE: "tail loss probe",
    Reason.RESET: "reset", Reason.WINDOW_PROBE: "window probe",
    Reason.WRITE_TIMEOUT: "timed out",
    Reason.RESET_NO_SOCKET: "reset: no socket", Reason.OUT_OF_ORDER: "out of order",
    Reason.QUICKACK_MODE: "quick ACK", Reason.FULL_FRAME: "> 1 MSS unACKed",
    Reason.DELACK_WAIT: "delayed ACK", Reason.DELACK_FIRED: "delayed ACK fired",
    Reason.DELACK_DUE: "ACK due", Reason.READ_ACK: "ACK on read",
    Reason.WINDOW_UPDATE: "window update", Reason.QUICKACK_OPT: "QUICKACK=1 ACK",
    Reason.PIGGYBACK: "piggybacked", Reason.DUPLICATE: "duplicate", Reason.FIN_ACK: "FIN",
    Reason.EVERY_2ND: "every 2nd segment", Reason.PSH_ACK: "PSH ACKed",
    Reason.SYNACK_DELAYED: "SYN-ACK ACK delayed", Reason.QUICK_START: "16 quick ACKs",
    Reason.QUICK_REFILL: "quick ACKs refilled", Reason.QUICK_SPENT: "quick ACKs spent",
    Reason.QUICK_DROPPED: "quick ACKs dropped",
    Reason.PINGPONG_ENTER: "→ ping-pong", Reason.PINGPONG_COUNT: "ping-pong count",
    Reason.PINGPONG_EXIT: "ping-pong ends", Reason.ATO_UPDATE: "ato adapts",
    Reason.ATO_INFLATE: "ato doubled", Reason.PROBE0_ARMED: "probe timer armed",
    Reason.RTO_ARMED: "RTO armed", Reason.TIMER_CLEARED: "timer cleared",
    Reason.SOCKOPT_SET: "setsockopt", Reason.SOCKOPT_GET: "getsockopt",
    Reason.QUICKACK_OFF: "QUICKACK=0: ping-pong", Reason.QUICKACK_ON: "QUICKACK=1",
    Reason.CWND_GROW: "cwnd grows", Reason.CWND_IDLE: "cwnd restart",
    Reason.CWND_PRR: "cwnd (PRR)", Reason.RCVBUF_GROW: "rcvbuf grows",
    Reason.DUPACK: "duplicate ACK",
    Reason.RECOVERY_ENTER: "fast recovery", Reason.RECOVERY_EXIT: "recovery ends",
    Reason.FAST_RETRANSMIT: "fast retransmit",
    Reason.BBR_CWND: "BBR cwnd",
    Reason.STATE_CHANGE: "state", Reason.APP_CALL: "app call",
}
"""A few words per reason, for ladder labels; `Reason.value` is the full sentence."""


def short(code: str) -> str:
    """Short label of a Reason given by name ("" if unknown, e.g. a real trace)."""
    member = Reason.__members__.get(code)
    return SHORT[member] if member is not None else ""
