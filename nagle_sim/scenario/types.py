"""What a scenario is, once loaded: frozen dataclasses both executors consume.

Owns: the script statements (`Write` … `Close`, `Statement`) and the helpers that read a
script without running it (`walk`, `describe`, `outermost_loops`), the link (`Link`,
`LinkFault`), a side (`SideSpec`: profile, options, script) and the `Scenario` itself, and
what a real run on this machine cannot reproduce of one (`real_run_caveats`). Built only
by `nagle_sim.scenario.loader`; imports only the model's vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from ..model.config import (
    HOST_FIELDS,
    NAMESPACE_SYSCTL_FIELDS,
    PER_SOCKET_FIELDS,
    SocketOptions,
    StackProfile,
)
from ..model.events import Micros, Side
from ..model.state import SockOpt


# ---------------------------------------------------------------- script statements
@dataclass(frozen=True, slots=True)
class Write:
    line: int
    size: int
    more: bool = False
    eor: bool = False
    """MSG_EOR: the write ends a record; later writes never join its last skb
    (`tcp_skb_can_collapse_to`)."""


@dataclass(frozen=True, slots=True)
class Writev:
    line: int
    parts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Read:
    line: int
    size: int


@dataclass(frozen=True, slots=True)
class Sleep:
    line: int
    duration: Micros


@dataclass(frozen=True, slots=True)
class SetOpt:
    line: int
    option: str   # "nodelay" | "cork" | "quickack"
    on: bool


@dataclass(frozen=True, slots=True)
class SetTiming:
    """`set delack_max 5ms` / `set rto_min 50ms`: TCP_DELACK_MAX_US / TCP_RTO_MIN_US."""

    line: int
    option: str   # "delack_max" | "rto_min"
    duration: Micros


@dataclass(frozen=True, slots=True)
class GetOpt:
    line: int
    option: str


@dataclass(frozen=True, slots=True)
class Repeat:
    line: int
    count: int
    body: tuple[Statement, ...]


@dataclass(frozen=True, slots=True)
class Close:
    line: int


@dataclass(frozen=True, slots=True)
class Shutdown:
    """`shutdown rd|wr|rdwr`: shutdown(2) with SHUT_RD, SHUT_WR or SHUT_RDWR."""

    line: int
    how: str   # "rd" | "wr" | "rdwr"


@dataclass(frozen=True, slots=True)
class SetValue:
    """`set sndbuf 8k` (SO_SNDBUF, bytes), `set notsent_lowat 16k` (TCP_NOTSENT_LOWAT,
    bytes), `set user_timeout 1s` (TCP_USER_TIMEOUT; ``value`` in whole ms)."""

    line: int
    option: str
    value: int


Statement = (Write | Writev | Read | Sleep | SetOpt | SetTiming | GetOpt | Repeat | Close
             | Shutdown | SetValue)

SHUTDOWN_HOWS: Final = ("rd", "wr", "rdwr")
"""`shutdown` arguments: SHUT_RD, SHUT_WR, SHUT_RDWR."""
VALUE_OPTIONS: Final = ("sndbuf", "notsent_lowat", "user_timeout")
"""`set NAME VALUE` options that take a number: sizes in bytes (``k``/``m`` suffixes are
1024 and 1048576) or, for user_timeout, a duration."""

OPTIONS: Final = tuple(opt.value for opt in SockOpt)
"""Option names a script may set or get: the model's `SockOpt` values."""


def outermost_loops(body: tuple[Statement, ...]) -> dict[int, int]:
    """``id(statement)`` → number of its outermost enclosing top-level ``repeat`` (1 for
    the script's first statement, 2 for the second, …; 0 outside any loop)."""
    out: dict[int, int] = {}
    for number, top in enumerate(body, start=1):
        if not isinstance(top, Repeat):
            out[id(top)] = 0
            continue
        pending = list(top.body)
        while pending:
            stmt = pending.pop()
            if isinstance(stmt, Repeat):
                pending.extend(stmt.body)
            else:
                out[id(stmt)] = number
    return out


def walk(body: tuple[Statement, ...]) -> Iterator[Statement]:
    """Every statement of ``body`` once (loops included, not expanded), without recursion."""
    pending = list(reversed(body))
    while pending:
        stmt = pending.pop()
        yield stmt
        if isinstance(stmt, Repeat):
            pending.extend(reversed(stmt.body))


def describe(stmt: Statement) -> tuple[str, str]:
    """(op name, argument text) as they appear in a trace's ``ops``."""
    if isinstance(stmt, Write):
        return "write", f"{stmt.size}{' more' if stmt.more else ''}{' eor' if stmt.eor else ''}"
    if isinstance(stmt, Writev):
        return "writev", " ".join(map(str, stmt.parts))
    if isinstance(stmt, Read):
        return "read", str(stmt.size)
    if isinstance(stmt, Sleep):
        return "sleep", f"{stmt.duration / 1000:g}ms"
    if isinstance(stmt, SetOpt):
        return "set", f"{stmt.option} {'on' if stmt.on else 'off'}"
    if isinstance(stmt, SetTiming):
        return "set", f"{stmt.option} {stmt.duration / 1000:g}ms"
    if isinstance(stmt, GetOpt):
        return "get", stmt.option
    if isinstance(stmt, Close):
        return "close", ""
    if isinstance(stmt, Shutdown):
        return "shutdown", stmt.how
    if isinstance(stmt, SetValue):
        value = f"{stmt.value}ms" if stmt.option == "user_timeout" else str(stmt.value)
        return "set", f"{stmt.option} {value}"
    return "repeat", str(stmt.count)


# ---------------------------------------------------------------- scenario objects
FAULT_KINDS: Final = ("data", "ack", "fin")
"""What a `[link] drop` / `hold` entry counts: segments carrying data, pure ACKs (no data,
SYN, FIN or RST), or segments with FIN. A data segment with FIN counts as both."""


@dataclass(frozen=True, slots=True)
class LinkFault:
    """One `[link] drop` or `hold` entry: segments ``first`` to ``last`` (counted from 1
    per direction and kind, in the order they enter the link, retransmissions included)
    of ``kind`` towards ``towards`` are lost (``extra`` None) or arrive ``extra`` µs
    later than they otherwise would, after the segments sent behind them."""

    towards: Side
    kind: str
    first: int
    last: int
    extra: Micros | None = None

    def spec(self) -> str:
        """The entry as written (the relay's `--fault` argument, docs)."""
        n = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        tail = "" if self.extra is None else f" {self.extra}us"
        return f"to_{self.towards.value} {self.kind} {n}{tail}"


DECLARED_PATH_TOLERANCE_US: Final = 2_000
"""A scenario's link delays are a real path's when they add up to its measured round trip
within max(this, 25 %) (`Link.describes_path`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    to_server_delay: Micros = Micros(0)
    to_client_delay: Micros = Micros(0)
    mss: int = 1448
    tx_complete: Micros = Micros(0)
    """How long a sent packet occupies the device queue (autocork window); 0 on loopback."""
    gso: bool = True
    """TSO skbs cross the link whole (loopback) rather than cut into MSS segments."""
    rate_bps: int = 0
    """Bandwidth in bits per second, each direction (0: unlimited): every packet takes
    its wire size (payload + IP and TCP headers) × 8 / rate to cross, one at a time."""
    queue: int = 1000
    """Drop-tail FIFO limit: packets the link holds (waiting or being sent) per direction;
    one more arriving is dropped. Only with a rate."""
    quickack: bool = False
    """Route metric `quickack 1` on both hosts' routes (RTAX_QUICKACK): every ACK at once."""
    faults: tuple[LinkFault, ...] = ()
    """`drop` then `hold` entries; a segment both dropped and held is dropped."""

    def delay(self, towards: Side) -> Micros:
        return self.to_server_delay if towards is Side.SERVER else self.to_client_delay

    def describes_path(self, rtt_us: float) -> bool:
        """Whether these delays describe a real path whose round trip measured ``rtt_us``:
        they add up to it within max(`DECLARED_PATH_TOLERANCE_US`, 25 %). One rule for a
        remote run's clock estimate (which then takes the declared asymmetry out) and for
        the model's link when it is compared with that run (`nagle_sim.compare.run`)."""
        declared = self.to_server_delay + self.to_client_delay
        return declared > 0 and abs(rtt_us - declared) <= max(DECLARED_PATH_TOLERANCE_US,
                                                               0.25 * declared)

    @property
    def emulated(self) -> bool:
        """A delay, a rate or scripted faults: realnet runs the scenario over TUN devices
        and its relay; otherwise over 127.0.0.1 (the model's loopback rules apply)."""
        return bool(self.to_server_delay or self.to_client_delay or self.rate_bps
                    or self.faults)


@dataclass(frozen=True, slots=True, kw_only=True)
class SideSpec:
    profile: StackProfile
    options: SocketOptions
    script: tuple[Statement, ...]
    script_line: int = 0
    tune: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    title: str
    description: str
    link: Link
    client: SideSpec
    server: SideSpec
    source: str = "<string>"
    expect: tuple[Any, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)

    def side(self, side: Side) -> SideSpec:
        return self.client if side is Side.CLIENT else self.server



def real_run_caveats(scenario: Scenario, *, remote: bool = False) -> list[str]:
    """What a real run on this machine's Linux kernel (``remote``: this host and a
    serve's, over a real path) cannot reproduce of ``scenario``: another OS profile, or
    tuned kernel internals. Host timings, what realnet sets per socket (the congestion
    control) and per namespace (tcp_pingpong_thresh) are fine. Empty when the two
    executors are comparable."""
    notes = []
    for side in Side:
        spec = scenario.side(side)
        if spec.profile.name != "linux":
            notes.append(f"{side.value} profile {spec.profile.name!r} is simulated only: a "
                         + ("remote run uses the hosts' Linux kernels" if remote else
                            "real run uses this machine's Linux 6.x kernel"))
        kernel = sorted(set(spec.tune) - HOST_FIELDS - PER_SOCKET_FIELDS
                        - NAMESPACE_SYSCTL_FIELDS.keys())
        if kernel:
            notes.append(f"{side.value} tunes kernel internals ({', '.join(kernel)}) that a "
                         "real run cannot change")
    if scenario.link.tx_complete > 0 and remote:
        # a remote run's device queues are the hosts' real interfaces': how long a packet
        # stays queued there (the autocork window) is theirs, not the scenario's, and
        # nothing in a trace says how long it was, so the model cannot be set to it
        notes.append("the link models a device queue (tx_complete_us) of its own; on a "
                     "remote run each host's real interface has its own, whose transmit "
                     "completion times nothing records, so whether autocorking holds a "
                     "write is the hosts' interfaces' and not comparable with the model")
    elif scenario.link.tx_complete > 0:
        # realnet's loopback and TUN devices report a packet sent as soon as it is queued,
        # so the device-queue shadow that autocorking looks at (tcp_should_autocork) never
        # lasts long enough to hold a write: the kernel's merging is not reproducible here
        notes.append("the link models a device queue (tx_complete_us) that this machine's "
                     "loopback and TUN links do not have: their packets leave the queue at "
                     "once, so autocorking has nothing to wait for")
    return notes
