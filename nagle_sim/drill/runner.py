"""Play a packetdrill script against the model: the model is the script's local socket.

Owns the meaning of a script for the model (docs/drill.md): inbound packets become
`Endpoint.receive_segment`, system calls become the endpoint's application inputs,
outbound packets are checked against what the endpoint sent as packetdrill checks a
kernel's (run_packet.c): consecutive packets are merged until they hold the bytes the
line expects, unless ``--strict-segments``; then the payload length, flags, sequence,
ACK, window, TCP options and time within packetdrill's tolerance (max(tolerance_usecs,
tolerance_percent of the time since the previous event); defaults 4 ms and 12.5 %). Time
follows packetdrill's rules: a relative time counts from when the previous event
happened, except that consecutive inbound packets are anchored to each other's script
times. Code blocks run when the script has ended, over snapshots taken at their lines.

What the model cannot play (UDP/ICMP, ECN, SACK blocks, urgent data, poll, zero-copy,
MD5, Fast Open, a sysctl or command whose effect it lacks …) ends the run as
*unsupported*, with the reason; that is never a pass. A pass lists what the script set
that the model accepted without its effect.

It drives the endpoint only through its public inputs and pulled outputs (house style:
no back doors). Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import ast
import dataclasses
import errno
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..model import PROFILES, Endpoint, Micros, ModelError, Segment, Side, SocketOptions, SockOpt
from ..model.config import StackProfile
from ..model.events import RST, flag_letters, parse_flags
from . import code as code_blocks
from . import commands, options
from .clock import ModelClock
from .options import Negotiated, OptionConfig, PeerSyn
from .script import (
    Code,
    Command,
    Event,
    EventTime,
    Expr,
    Int,
    List,
    Packet,
    Script,
    Str,
    Struct,
    Syscall,
    TcpOption,
    TimeKind,
    Word,
)
from .timing import DEFAULT_TOLERANCE_PCT, DEFAULT_TOLERANCE_US, tolerance

ANY_TIME_LIMIT_US = 3_600_000_000     # `*` waits at most an hour of model time
S32_MAX = (1 << 31) - 1               # packetdrill reads a call's byte count as an s32
MAX_IO_BYTES = 1_000_000_000
"""The most bytes one write or read may move, as a scenario's ``write`` size limit: the
model spends time per segment, so a bigger count would run for many seconds."""
NETNS_CORE_RMEM_MAX = 4_194_304
"""net.core.rmem_max on this machine (global): tcp_select_initial_window takes the larger of
it and tcp_rmem[2] (a new network namespace copies the host's tcp_rmem, as the profile's
`StackProfile.rcv_buf_max` has it)."""


class Status(Enum):
    PASS = "pass"
    FAIL = "fail"
    UNSUPPORTED = "unsupported"
    ERROR = "error"        # the script could not be read


@dataclass(slots=True)
class DrillResult:
    path: str
    status: Status
    message: str = ""
    line: int = 0
    notes: list[str] = field(default_factory=list)
    checked: int = 0
    """Outbound packets (script lines) matched."""
    segments: int = 0
    """The model's segments they were matched with (more when packets were merged)."""
    caveats: list[str] = field(default_factory=list)
    """What the script set that the model accepted without its effect: a pass names them
    rather than hide them."""

    def summary(self) -> str:
        """What a pass matched: ``8 outbound packets matched (from 12 model segments);
        not modelled: send buffer tcp_wmem 262144``."""
        text = f"{self.checked} outbound packets matched"
        if self.segments > self.checked:
            text += f" (from {self.segments} model segments)"
        if self.caveats:
            text += "; not modelled: " + ", ".join(dict.fromkeys(self.caveats))
        return text

    def one_line(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        if self.status is Status.PASS:
            return f"{self.path}: pass ({self.summary()})"
        return f"{where}: {self.status.value}: {self.message}"


class _Stop(Exception):
    def __init__(self, status: Status, line: int, message: str) -> None:
        super().__init__(message)
        self.status, self.line, self.message = status, line, message


def _secs(us: int) -> str:
    return f"{us / 1e6:.6f}".rstrip("0").rstrip(".") + " s" if us else "0 s"


# ---------------------------------------------------------------- script header
_HEADER_NOTED = {"bind_port", "connect_port", "local_ip", "remote_ip", "gateway_ip",
                 "netmask_ip", "send_omit_free", "speed", "mss", "define", "verbose",
                 "debug", "init_scripts", "code_command", "code_format", "dry_run"}
"""packetdrill options that change nothing the model plays (addresses, ports, memory
handling, how code is run)."""


def _header_unsupported(name: str, value: str) -> str | None:
    """Why a script header option puts the script outside the model, if it does."""
    if name == "ip_version" and value == "ipv6":
        return "IPv6 (the model's MSS and headers are IPv4's)"
    if name == "mtu" and value != "1500":
        return f"an MTU of {value} (the model's MSS is tun0's 1500-byte MTU's)"
    if name == "non_fatal":
        return "--non_fatal (packetdrill would carry on past failures)"
    if name == "code_sockopt" and value != "TCP_INFO":
        return f"code blocks over {value} (only TCP_INFO is modelled)"
    if name in ("wire_client", "wire_server", "is_anyip", "so_filename", "tcp_ts_ecr_scaled"):
        return f"--{name}"
    return None


# ---------------------------------------------------------------- helpers
def _flags_of(packet: Packet) -> int:
    letters = packet.flags.replace(".", "A")
    if any(ch in letters for ch in "EWU"):
        raise ValueError("ECN and URG flags are not modelled")
    return parse_flags(letters) if letters else 0


def _option(packet: Packet, kind: str) -> tuple[int, ...] | None:
    for opt in packet.options or ():
        if opt.kind == kind:
            return opt.values
    return None


def _ts(opts: tuple[TcpOption, ...]) -> int | None:
    return next((o.values[0] for o in opts if o.kind == "TS"), None)


_MERGE_FLAGS = ~(parse_flags("F") | parse_flags("P"))
"""verify_packet_fragments compares every flag but FIN, PSH (and CWR, never sent here)."""


def _fragment_mismatch(prev: Segment, cur: Segment, sniffed: int, expected: int,
                       wscale: int) -> str | None:
    """Why ``cur`` cannot be merged after ``prev`` (run_packet.c verify_packet_fragments,
    its headers compared non-strictly), or None: the same flags but FIN and PSH, the next
    sequence number, the same ACK and window; and, unless it is the last piece, the same
    length as the one before."""
    if prev.flags & _MERGE_FLAGS != cur.flags & _MERGE_FLAGS:
        return (f"flags {flag_letters(cur.flags).replace('A', '.')} after "
                f"{flag_letters(prev.flags).replace('A', '.')}")
    if cur.seq != prev.seq + prev.length:
        return f"seq {cur.seq} does not continue {prev.seq + prev.length}"
    if cur.ack != prev.ack:
        return f"ack {cur.ack} after ack {prev.ack}"
    if cur.window >> wscale != prev.window >> wscale:     # the window field, as sent
        return f"win {cur.window >> wscale} after win {prev.window >> wscale}"
    if cur.length < expected - sniffed and cur.length != prev.length:
        return (f"a {cur.length}-byte piece after a {prev.length}-byte one before the "
                "last piece")
    return None


def _words(expr: Expr) -> tuple[str, ...]:
    return expr.names if isinstance(expr, Word) else ()


def _int(expr: Expr) -> int | None:
    if isinstance(expr, Int):
        return expr.value
    if isinstance(expr, List) and len(expr.items) == 1 and isinstance(expr.items[0], Int):
        return expr.items[0].value
    return None


def _iov_bytes(expr: Expr) -> int | None:
    """Total length of an iovec list ``[{..., 40}, {..., 60}]``."""
    if not isinstance(expr, List):
        return None
    total = 0
    for item in expr.items:
        if not isinstance(item, Struct) or not item.fields:
            return None
        n = _int(item.fields[-1][1])
        if n is None:
            return None
        total += n
    return total


def _io_size(call: Syscall) -> tuple[int | None, tuple[str, ...]]:
    """(bytes, MSG_* flags) of a read or write call, from the argument that holds them in
    each call's signature: the count of read/write/send/recv(from)/sendto, the iovec sum
    of readv/writev (whose third argument is the iovec count) and of recvmsg/sendmsg
    (whose third argument is the flags)."""
    name, args = call.name, call.args
    if name in ("writev", "readv"):
        return (_iov_bytes(args[1]) if len(args) > 1 else None), ()
    if name in ("sendmsg", "recvmsg"):
        msg = args[1] if len(args) > 1 else None
        iov = next((v for k, v in msg.fields if k == "msg_iov"), None) if isinstance(
            msg, Struct) else None
        return (_iov_bytes(iov) if iov is not None else None), (
            _words(args[2]) if len(args) > 2 else ())
    size = _int(args[2]) if len(args) > 2 else None
    return size, (_words(args[3]) if len(args) > 3 and name not in ("write", "read") else ())


def _check_count(line: int, name: str, size: int) -> None:
    """A byte count packetdrill could pass (a non-negative s32) that the model can play in
    bounded time (at most `MAX_IO_BYTES`)."""
    if not 0 <= size <= S32_MAX:
        raise _Stop(Status.ERROR, line, f"{name}(): byte count {size} is not between 0 and "
                    f"{S32_MAX:,} (packetdrill passes it as a 32-bit int)")
    if size > MAX_IO_BYTES:
        raise _Stop(Status.UNSUPPORTED, line, f"{name}() of {size:,} bytes: the model plays "
                    f"at most {MAX_IO_BYTES:,} bytes per call")


# include/net/tcp_states.h's numbers, by the model's state names
_TCP_STATES = {"ESTABLISHED": 1, "SYN_SENT": 2, "SYN_RCVD": 3, "FIN_WAIT1": 4, "FIN_WAIT2": 5,
               "TIME_WAIT": 6, "CLOSED": 7, "CLOSE_WAIT": 8, "LAST_ACK": 9, "LISTEN": 10,
               "CLOSING": 11}
_NOT_TCP_INFO = {"state", "quick", "pingpong", "pacing_rate"}
"""`TcpInfo` fields that are not tcp_info's own (or need converting): every other field
``x`` is offered to code blocks as ``tcpi_x``, in the kernel's units."""
_TCP_OPTS = {f"TCP_{opt.name}": opt for opt in SockOpt}   # the model's option vocabulary
_IGNORED_SOCKET_OPTS = {"SO_REUSEADDR", "SO_REUSEPORT", "SO_SNDBUF", "SO_RCVBUF",
                        "SO_KEEPALIVE"}
_SEND_CALLS = {"write", "send", "sendto", "sendmsg", "writev"}
_RECV_CALLS = {"read", "recv", "recvfrom", "recvmsg", "readv"}
_UNSUPPORTED_CALLS = {
    "shutdown": "shutdown() is not modelled (close() is)",
    "poll": "poll() is not modelled", "epoll_create": "epoll is not modelled",
    "epoll_ctl": "epoll is not modelled", "epoll_wait": "epoll is not modelled",
    "ioctl": "ioctl() is not modelled", "sendfile": "sendfile() is not modelled",
    "splice": "splice() is not modelled", "open": "files are not modelled",
}


@dataclass(slots=True)
class _Pending:
    """A blocking read(), accept() or connect() that has started and not returned yet."""

    event: Event
    call: Syscall
    size: int
    want: int | None
    start: int
    """When it started (script time, µs): its return's tolerance counts from here."""
    end: int | None
    """When the script expects it to return (µs), if it says."""


class _Runner:
    def __init__(self, script: Script, profile: StackProfile, tolerance_us: int | None,
                 tolerance_pct: float | None, strict_segments: bool) -> None:
        self.script = script
        self.notes: list[str] = []
        self.caveats: list[str] = []
        opts = script.options
        try:
            self.tol_us = (tolerance_us if tolerance_us is not None
                           else int(opts.get("tolerance_usecs", DEFAULT_TOLERANCE_US)))
            self.tol_pct = (tolerance_pct if tolerance_pct is not None
                            else float(opts.get("tolerance_percent", DEFAULT_TOLERANCE_PCT)))
            self.ts_tick_us = int(opts.get("tcp_ts_tick_usecs", "0") or 0)
        except ValueError:
            raise _Stop(Status.ERROR, 0, "--tolerance_usecs, --tolerance_percent and "
                        "--tcp_ts_tick_usecs in the script must be numbers") from None
        self.strict = strict_segments or "strict_segments" in opts
        for name, value in opts.items():
            why = _header_unsupported(name, value)
            if why is not None:
                raise _Stop(Status.UNSUPPORTED, 0, f"script option {why} is not modelled")
            if name in _HEADER_NOTED or name == "ip_version":
                self.notes.append(f"script option --{name} changes nothing the model plays")
            elif name not in ("tolerance_usecs", "tolerance_percent", "tcp_ts_tick_usecs",
                              "strict_segments", "mtu", "code_sockopt"):
                self.notes.append(f"script option --{name} ignored")
        effect = commands.Effect()
        for cmd in script.init_commands:
            self._commands(cmd.text, 0, effect)
        self.notes.extend(effect.notes)
        self.caveats.extend(effect.caveats)
        run = effect.runner
        self.gso_wire = bool(run.get("gso_wire", True))
        self.opt_cfg = OptionConfig(
            timestamps=run.get("timestamps", True), sack=run.get("sack", True),
            window_scaling=run.get("window_scaling", True),
            # the profile's own scale unless the script sets the buffers it comes from
            wscale=(commands.wscale(run, profile.rcv_buf_max, NETNS_CORE_RMEM_MAX)
                    if "rmem_max" in run or "core_rmem_max" in run else profile.rcv_wscale))
        self.peer_syn = self._prescan_peer_syn()
        self.nego = Negotiated.of(self.opt_cfg, self.peer_syn)
        tune = dict(effect.tune)
        # the window scale the socket offers, 0 when the peer's SYN offers none
        # (tcp_select_initial_window, tcp_openreq_init_rwin)
        tune["rcv_wscale"] = (self.nego.wscale if self.peer_syn is not None
                              else self.opt_cfg.wscale)
        if self.peer_syn is not None and not self.nego.sack:
            # tcp_schedule_loss_probe: no tail loss probe without SACK (tcp_is_sack)
            tune["tail_loss_probe"] = False
        self.profile = profile.with_overrides(**tune)
        self.ep: Endpoint | None = None
        self.side = Side.SERVER
        self.options = SocketOptions()
        self.mss_cap: int | None = None
        self.clock = ModelClock(after_timer=self._complete_read)
        self.prev: tuple[Event, int] | None = None   # previous event and its script time
        self.fds: dict[int, str] = {}                # fd -> "listen" | "conn" | "socket"
        self.nonblocking: set[int] = set()
        self.pending: _Pending | None = None
        self.checked = 0
        self.segments = 0
        self.ts_offset: int | None = None            # script TS val - the model's
        self.last_peer_ts: int | None = None
        self.sock_error: str | None = None           # what getsockopt(SO_ERROR) returns
        self.code_runs: list[tuple[int, ast.Module, dict[str, int]]] = []

    def _commands(self, text: str, line: int, effect: commands.Effect) -> None:
        where = f"line {line}" if line else "header"
        try:
            commands.apply(text, where, effect)
        except commands.CommandUnsupported as exc:
            raise _Stop(Status.UNSUPPORTED, line, str(exc)) from None
        except commands.CommandError as exc:
            raise _Stop(Status.ERROR, line, str(exc)) from None

    # ------------------------------------------------------------ the model
    def _prescan_peer_syn(self) -> PeerSyn | None:
        """What the peer's SYN (a server's) or SYN-ACK (a client's) offers: the first
        inbound packet with SYN decides the connection's options, MSS and window scale."""
        for ev in self.script.events:
            a = ev.action
            if isinstance(a, Packet) and a.inbound and "S" in a.flags:
                return PeerSyn.of(a)
        return None

    def _mss(self) -> int:
        """The payload MSS the model will use (tcp_sync_mss): the route's 1460 clamped by
        the peer's MSS option (536 without one) and TCP_MAXSEG, less the timestamps
        option when both sides agreed on it (Linux then sends it on every segment)."""
        peer = self.peer_syn
        clamp = min(options.ROUTE_ADVMSS, peer.mss if peer is not None and peer.mss else 536)
        if self.mss_cap:
            clamp = min(clamp, self.mss_cap)
        if self.nego.timestamps:
            clamp -= options.TS_OPTION_BYTES
        return max(clamp, 88)

    def _endpoint(self, line: int) -> Endpoint:
        if self.ep is None:
            raise _Stop(Status.FAIL, line, "no connection yet (a packet or call before "
                        "connect/listen)")
        return self.ep

    def _create(self, side: Side) -> Endpoint:
        self.side = side
        self.ep = Endpoint(side, self.profile, self.options, self._mss())
        # packetdrill reads packets from a TUN device with TSO on: a TSO skb reaches it
        # whole, as the kernel built it (one packet per skb) — unless the script turned
        # TSO/GSO off with ethtool
        self.ep.set_gso_wire(self.gso_wire)
        self.clock.ep = self.ep
        return self.ep

    @property
    def now(self) -> int:
        return self.clock.now

    @now.setter
    def now(self, value: int) -> None:
        self.clock.now = value

    @property
    def out(self) -> deque[tuple[int, Segment]]:
        """What the model sent and no outbound line has matched yet."""
        return self.clock.sent

    def _advance(self, until: int) -> None:
        """Move model time to ``until``, firing timers due on the way (a blocked read may
        return after each)."""
        self.clock.advance(until)

    def _input(self, line: int, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except ModelError as exc:
            raise _Stop(Status.FAIL, line, f"the model refused: {exc}") from None
        self.clock.collect()
        return result

    # ------------------------------------------------------------ time
    def _times(self, ev: Event) -> tuple[int, int | None, int, int]:
        """(script time, end of its range or None, tolerance, offset of relative times)
        as packetdrill computes them."""
        t = ev.time
        offset = 0
        if t.kind in (TimeKind.ABSOLUTE, TimeKind.ABSOLUTE_RANGE):
            start, end = t.start_us, t.end_us
        else:
            anchored = (self.prev is not None and isinstance(ev.action, Packet)
                        and ev.action.inbound and isinstance(self.prev[0].action, Packet)
                        and self.prev[0].action.inbound)
            offset = self.prev[1] if anchored and self.prev else self.now
            start = offset + t.start_us
            end = offset + t.end_us if t.end_us is not None else None
        return start, end, self._tolerance(start, self.prev[1] if self.prev else None), offset

    def _tolerance(self, at: int, since: int | None) -> int:
        return tolerance(at, since, tolerance_us=self.tol_us, tolerance_pct=self.tol_pct)

    # ------------------------------------------------------------ events
    def _check_header(self) -> None:
        """What packetdrill's get_next_event refuses before playing: no events at all, a
        first event not at time 0."""
        events = self.script.events
        if not events:
            raise _Stop(Status.ERROR, 0, "the script has no events")
        first = events[0]
        if first.time.start_us != 0:
            raise _Stop(Status.ERROR, first.line, "the first event must be at time 0")

    def run(self) -> None:
        self._check_header()
        for ev in self.script.events:
            if (self.prev is not None and _absolute(ev) and _absolute(self.prev[0])
                    and ev.time.start_us < self.prev[1]):
                raise _Stop(Status.ERROR, ev.line, f"time goes backward in the script, from "
                            f"{_secs(self.prev[1])} to {_secs(ev.time.start_us)}")
            start, end, tol, offset = self._times(ev)
            action = ev.action
            if isinstance(action, Packet) and not action.inbound:
                self._outbound(ev, action, start, end, tol)
            else:
                if self.prev is not None and self.now > start + tol:
                    # packetdrill's check_event_time: the events before this one ended
                    # after its time had passed
                    raise _Stop(Status.FAIL, ev.line, f"timing: expected {_what(action)} at "
                                f"{_secs(start)}, but it happened at {_secs(self.now)} "
                                f"(tolerance {_secs(tol)}): the events before it ran late")
                self._advance(start)
                if isinstance(action, Packet):
                    self._inbound(ev, action)
                elif isinstance(action, Syscall):
                    self._syscall(ev, action, offset)
                elif isinstance(action, Command):
                    effect = commands.Effect()
                    self._commands(action.text, ev.line, effect)
                    if effect:
                        raise _Stop(Status.UNSUPPORTED, ev.line, "a setting that changes the "
                                    "model in the middle of a script")
                    self.notes.extend(effect.notes)
                    self.caveats.extend(effect.caveats)
                else:
                    self._code(ev.line, action)
            self._complete_read()
            self.prev = (ev, start)
        if self.pending is not None:
            raise _Stop(Status.FAIL, self.pending.event.line,
                        f"{self.pending.call.name}() never returned: no data arrived")
        self._run_code_blocks()

    # ------------------------------------------------------------ %{ }% code
    def _code(self, line: int, block: Code) -> None:
        """Parse a block now (a malformed one is bad input wherever it is) and keep it with
        a tcp_info snapshot, as packetdrill does; they run when the script has ended."""
        try:
            tree = code_blocks.parse(block.text)
        except code_blocks.CodeError as exc:
            raise _Stop(Status.ERROR, line, str(exc)) from None
        except code_blocks.CodeUnsupported as exc:
            raise _Stop(Status.UNSUPPORTED, line, str(exc)) from None
        snapshot = self._tcp_info() if self.ep is not None else {}
        self.code_runs.append((line, tree, snapshot))

    def _run_code_blocks(self) -> None:
        known = frozenset(self._tcp_info()) if self.ep is not None else frozenset()
        interp = code_blocks.Interpreter.new(known)
        for line, tree, snapshot in self.code_runs:
            def printed(text: str, line: int = line) -> None:
                self.notes.append(f"line {line}: print: {text[:200]}")
            try:
                interp.run(tree, snapshot, printed)
            except code_blocks.CodeUnsupported as exc:
                raise _Stop(Status.UNSUPPORTED, line, str(exc)) from None
            except code_blocks.CodeError as exc:
                raise _Stop(Status.ERROR, line, str(exc)) from None
            except code_blocks.CodeFailed as exc:
                raise _Stop(Status.FAIL, line, str(exc)) from None

    def _tcp_info(self) -> dict[str, int]:
        """The ``tcpi_*`` values a code block sees, from `Endpoint.tcp_info`, in the
        kernel's units (µs for times) and TCP state numbers (include/net/tcp_states.h):
        every `TcpInfo` field but the model's own (quick, pingpong)."""
        assert self.ep is not None
        info = self.ep.tcp_info()
        values = {f"tcpi_{name}": value for name, value in (
            (f, getattr(info, f)) for f in getattr(info, "__dataclass_fields__", {}))
            if name not in _NOT_TCP_INFO and isinstance(value, int)}
        values["tcpi_state"] = _TCP_STATES[info.state.value]
        values["tcpi_advmss"] = self._opt_cfg().advmss     # the MSS our SYN advertised
        # what the SYNs agreed (tcp_get_info: tcpi_options from rx_opt, once connected)
        agreed = info.state.value not in ("CLOSED", "LISTEN", "SYN_SENT", "SYN_RCVD")
        nego = self.nego if agreed else Negotiated(False, False, 0, 0)
        ws = agreed and self.peer_syn is not None and self.peer_syn.wscale is not None \
            and self.opt_cfg.window_scaling
        values["tcpi_options"] = ((code_blocks.CONSTANTS["TCPI_OPT_TIMESTAMPS"]
                                   if nego.timestamps else 0)
                                  | (code_blocks.CONSTANTS["TCPI_OPT_SACK"] if nego.sack else 0)
                                  | (code_blocks.CONSTANTS["TCPI_OPT_WSCALE"] if ws else 0))
        values["tcpi_snd_wscale"] = nego.peer_wscale
        values["tcpi_rcv_wscale"] = nego.wscale
        values["tcpi_pacing_rate"] = int(info.pacing_rate)
        return values

    # ------------------------------------------------------------ packets
    def _inbound(self, ev: Event, p: Packet) -> None:
        if p.other:
            raise _Stop(Status.UNSUPPORTED, ev.line, f"{p.other[0]} is not modelled")
        why = options.unsupported_inbound(p)
        if why is not None:
            raise _Stop(Status.UNSUPPORTED, ev.line, why)
        try:
            flags = _flags_of(p)
        except ValueError as exc:
            raise _Stop(Status.UNSUPPORTED, ev.line, str(exc)) from None
        if "S" in p.flags and p.length:
            raise _Stop(Status.UNSUPPORTED, ev.line, "data on a SYN (TCP Fast Open) is not "
                        "modelled")
        ts = _option(p, "TS")
        if ts is not None and self.nego.timestamps:
            # PAWS (RFC 7323, tcp_paws_discard): the kernel drops a segment whose
            # timestamp went backwards; the model keeps no timestamps
            if self.last_peer_ts is not None and "S" not in p.flags and (
                    (ts[0] - self.last_peer_ts) & 0xFFFFFFFF) >= 1 << 31:
                raise _Stop(Status.UNSUPPORTED, ev.line, "a timestamp older than the last "
                            "one (PAWS) is not modelled")
            self.last_peer_ts = ts[0]        # what our segments echo (ts_recent)
        if "S" in p.flags and self.ep is None:
            self._create(Side.SERVER)
        ep = self._endpoint(ev.line)
        window = p.window if p.window is not None else 65535
        if "S" not in p.flags:
            window <<= self.nego.peer_wscale
        state = ep.state
        seg = Segment(src=self.side.peer, seq=p.seq, ack=p.ack or 0, length=p.length,
                      flags=flags, window=window, sent_at=self.now)  # type: ignore[arg-type]
        self._input(ev.line, lambda: ep.receive_segment(Micros(self.now), seg))
        if flags & RST and ep.state.value == "CLOSED" and state.value != "CLOSED":
            # tcp_reset: the error a reset leaves on the socket
            self.sock_error = {"SYN_SENT": "ECONNREFUSED", "CLOSE_WAIT": "EPIPE"}.get(
                state.value, "ECONNRESET")

    def _opt_cfg(self) -> OptionConfig:
        """What the socket offers, its MSS clamped by TCP_MAXSEG (tcp_mss_clamp)."""
        if self.mss_cap and self.mss_cap < self.opt_cfg.advmss:
            return dataclasses.replace(self.opt_cfg, advmss=self.mss_cap)
        return self.opt_cfg

    def _model_options(self, at: int, seg: Segment) -> tuple[TcpOption, ...]:
        """The options Linux would put on this model segment (see `options`)."""
        ts_val = at // 1000            # tcp_time_stamp_ms: a millisecond clock
        if seg.flags & RST and seg.why.name == "RESET_NO_SOCKET":
            return ()                  # tcp_v4_send_reset: no options
        if "S" in flag_letters(seg.flags):
            return options.syn_options(self._opt_cfg(), None if self.side is Side.CLIENT
                                       else self.peer_syn, ts_val, self.last_peer_ts or 0)
        return options.established_options(self.nego, ts_val, self.last_peer_ts or 0)

    def _next_segment(self, ev: Event, p: Packet, start: int, wait_us: int | None,
                      got: list[tuple[int, Segment]]) -> tuple[int, Segment]:
        """The model's next segment, waiting (firing timers) as packetdrill's
        sniff_outbound_live_packet does: ``wait_us`` from when it starts to look (from the
        previous fragment, for a merged packet's later ones), or an hour for ``*``."""
        since = got[-1][0] if got else self.now
        latest = since + (ANY_TIME_LIMIT_US if wait_us is None else wait_us)
        while not self.out:
            ep = self.ep
            d = ep.next_deadline() if ep is not None else None
            if d is None or d > latest:
                break
            self._advance(d)
        if not self.out:
            sent = ""
            if got:
                sent = "; the model sent " + ", ".join(
                    f"{s.summary()} at {_secs(t)}" for t, s in got) + ", then"
            raise _Stop(Status.FAIL, ev.line, f"expected {_expect_text(p)} at "
                        f"{_secs(start)}{sent or ', but'} the model sent nothing by "
                        f"{_secs(latest)} (timed out waiting for a packet)")
        return self.out.popleft()

    def _outbound(self, ev: Event, p: Packet, start: int, end: int | None, tol: int) -> None:
        if p.other:
            raise _Stop(Status.UNSUPPORTED, ev.line, f"{p.other[0]} is not modelled")
        why = options.unsupported_outbound(p)
        if why is not None:
            raise _Stop(Status.UNSUPPORTED, ev.line, why)
        anytime = ev.time.kind is TimeKind.ANY
        # sniff_outbound_live_packet waits the whole seconds from the previous event's
        # script time to this one's (its range's end), plus 2 s
        since = self.prev[1] if self.prev is not None else 0
        wait_us = None if anytime else ((max(start, end or start) - since) // 1_000_000
                                        + 2) * 1_000_000
        # run_packet.c do_outbound_script_packet: sniff packets until they hold the bytes
        # the line expects (one only with --strict_segments); each after the first must
        # continue the one before it (verify_packet_fragments)
        got: list[tuple[int, Segment]] = []
        total = 0
        while True:
            at, seg = self._next_segment(ev, p, start, wait_us, got)
            if got:
                why = _fragment_mismatch(got[-1][1], seg, total, p.length,
                                         self.nego.wscale)
                if why is not None:
                    sent = ", ".join(f"{s.summary()}" for _, s in [*got, (at, seg)])
                    raise _Stop(Status.FAIL, ev.line, f"expected {_expect_text(p)}; the "
                                f"model's {sent} cannot be merged into it: {why}")
            got.append((at, seg))
            total += seg.length
            if total >= p.length or self.strict:
                break
        # the merged packet: the first one's sequence number, the last one's flags, ACK,
        # window and time (packet.c aggregate_packets)
        first, (at, last) = got[0][1], got[-1]
        merged = Segment(src=last.src, seq=first.seq, ack=last.ack, length=total,
                         flags=last.flags, window=last.window, sent_at=last.sent_at,
                         why=last.why)
        sent = (f"{merged.summary()} at {_secs(at)}" if len(got) == 1 else
                f"{merged.summary()} at {_secs(at)} (merged from {len(got)} segments)")
        if total != p.length:
            raise _Stop(Status.FAIL, ev.line, f"payload expected {p.length} bytes, the "
                        f"model sent {total} ({sent})")
        problems = []
        want_flags = p.flags.replace(".", "A")
        if sorted(want_flags) != sorted(flag_letters(merged.flags)):
            problems.append(f"flags expected {p.flags or '-'}, got "
                            f"{flag_letters(merged.flags).replace('A', '.') or '-'}")
        if merged.seq != p.seq:
            problems.append(f"seq expected {p.seq}, got {merged.seq}")
        if p.ack is not None and merged.ack != p.ack:
            problems.append(f"ack expected {p.ack}, got {merged.ack}")
        if p.window is not None:
            shift = 0 if "S" in p.flags else self.nego.wscale
            if merged.window >> shift != p.window:
                problems.append(f"win expected {p.window}, got {merged.window >> shift}")
        if problems:
            raise _Stop(Status.FAIL, ev.line, f"{'; '.join(problems)} (the model sent {sent})")
        if p.options is not None and not self.profile.name.startswith("linux"):
            # the option layout worked out here is Linux's (tcp_options_write)
            self.caveats.append(f"TCP options (profile {self.profile.name})")
        elif p.options is not None:
            actual = self._model_options(at, last)
            ts_want, ts_got = _option(p, "TS"), _ts(actual)
            if self.ts_offset is None and ts_want is not None and ts_got is not None:
                self.ts_offset = ts_want[0] - ts_got     # packetdrill maps the first one
            bad = options.check(p.options, actual, ts_tick_us=self.ts_tick_us,
                                ts_tolerance_us=self._ts_tolerance(start),
                                ts_offset=self.ts_offset)
            if bad is not None:
                raise _Stop(Status.FAIL, ev.line, f"{bad} (the model sent {sent})")
        if not anytime and not (start - tol <= at <= (end or start) + tol):
            window = (f"{_secs(start)}~{_secs(end)}" if end is not None else _secs(start))
            raise _Stop(Status.FAIL, ev.line, f"timing: expected {_expect_text(p)} at "
                        f"{window} (tolerance {_secs(tol)}), the model sent {sent}")
        self.checked += 1
        self.segments += len(got)
        self.now = max(self.now, at)

    def _ts_tolerance(self, at: int) -> int:
        """verify_outbound_tcp_option: a timestamp's tolerance counts from the script's
        start, not from the previous event."""
        return max(self.tol_us, int(self.tol_pct / 100.0 * at))

    # ------------------------------------------------------------ system calls
    def _syscall(self, ev: Event, call: Syscall, offset: int) -> None:
        name, args, line = call.name, call.args, ev.line
        if name in _UNSUPPORTED_CALLS:
            raise _Stop(Status.UNSUPPORTED, line, _UNSUPPORTED_CALLS[name])
        expected = _int(call.result)
        if call.errno is not None and name not in _RECV_CALLS | {"connect"}:
            raise _Stop(Status.UNSUPPORTED, line, f"{name}() failing with {call.errno} is "
                        "not modelled")
        fd = _int(args[0]) if args else None
        if name == "socket":
            if "SOCK_STREAM" not in (_words(args[1]) if len(args) > 1 else ()):
                raise _Stop(Status.UNSUPPORTED, line, "only SOCK_STREAM sockets are modelled")
            if expected is not None:
                self.fds[expected] = "socket"
        elif name in ("bind", "listen"):
            if name == "listen" and fd is not None:
                self.fds[fd] = "listen"
                self._create(Side.SERVER)
        elif name == "fcntl":
            if len(args) > 2 and "O_NONBLOCK" in _words(args[2]) and fd is not None:
                self.nonblocking.add(fd)
        elif name == "setsockopt":
            self._setsockopt(line, args, fd)
        elif name == "getsockopt":
            self._getsockopt(line, args, fd)
        elif name == "connect":
            ep = self._create(Side.CLIENT)
            if fd is not None:
                self.fds[fd] = "conn"
            self._input(line, lambda: ep.connect(Micros(self.now)))
            if call.end_time is not None or (fd not in self.nonblocking
                                             and call.errno is None):
                # a blocking connect returns once established (without '...': would block)
                self._block(ev, call, 0, expected, offset, blocking=True)
        elif name == "accept":
            if expected is not None:
                self.fds[expected] = "conn"
            self._block(ev, call, 0, expected, offset, blocking=fd not in self.nonblocking)
        elif name in _SEND_CALLS:
            self._send(line, call, fd)
        elif name in _RECV_CALLS:
            self._recv(ev, call, fd, offset)
        elif name == "close":
            if fd is not None and self.fds.get(fd) == "conn":
                ep = self._endpoint(line)
                self._input(line, lambda: ep.app_close(Micros(self.now)))
        else:
            raise _Stop(Status.UNSUPPORTED, line, f"{name}() is not modelled")

    def _setsockopt(self, line: int, args: tuple[Expr, ...], fd: int | None) -> None:
        if len(args) < 4:
            raise _Stop(Status.ERROR, line, "setsockopt needs (fd, level, name, value, len)")
        level, name = _words(args[1]), _words(args[2])
        opt = name[0] if name else "?"
        if level and level[0] == "SOL_SOCKET":
            if opt not in _IGNORED_SOCKET_OPTS:
                raise _Stop(Status.UNSUPPORTED, line, f"socket option {opt} is not modelled")
            self.notes.append(f"line {line}: {opt} has no effect on the model")
            if opt in ("SO_SNDBUF", "SO_RCVBUF"):      # buffers the model does not bound
                self.caveats.append(opt)
            return
        if opt == "TCP_MAXSEG":
            value = _int(args[3])
            ep = self.ep
            if value is None or ep is not None and ep.state.value not in ("CLOSED", "LISTEN"):
                raise _Stop(Status.UNSUPPORTED, line, "TCP_MAXSEG after connecting")
            self.mss_cap = value
            if ep is not None:
                # a listener's MSS clamp applies to the connections it accepts: the
                # model's endpoint takes its MSS when made, so make it again
                self._create(self.side)
            return
        if opt == "TCP_CONGESTION":
            cc = args[3].value if isinstance(args[3], Str) else ""
            if cc not in ("bbr", "cubic", "reno"):
                raise _Stop(Status.UNSUPPORTED, line, f"congestion control {cc!r}")
            if self.ep is not None:
                raise _Stop(Status.UNSUPPORTED, line, "TCP_CONGESTION after the endpoint "
                            "exists")
            self.profile = self.profile.with_overrides(congestion=cc)
            return
        if opt not in _TCP_OPTS:
            raise _Stop(Status.UNSUPPORTED, line, f"TCP option {opt} is not modelled")
        value = _int(args[3])
        if value is None:
            raise _Stop(Status.ERROR, line, f"{opt}: expected a value like [1]")
        sockopt = _TCP_OPTS[opt]
        self._require(line, sockopt)
        ep = self.ep
        conn = fd is not None and self.fds.get(fd) == "conn"
        if ep is None or (not conn and not ep.established):
            # before connect/accept: the listening or new socket's initial options
            self.options = SocketOptions(
                nodelay=bool(value) if sockopt is SockOpt.NODELAY else self.options.nodelay,
                cork=bool(value) if sockopt is SockOpt.CORK else self.options.cork,
                quickack=(bool(value) if sockopt is SockOpt.QUICKACK
                          else self.options.quickack))
            if ep is None:
                return
        self._input(line, lambda: ep.set_option(Micros(self.now), sockopt, bool(value)))

    def _require(self, line: int, opt: SockOpt) -> None:
        """A socket option the chosen profile's stack lacks (Windows has no TCP_CORK) makes
        the script unsupported there: that is not a behaviour the model got wrong."""
        lacks = ((opt is SockOpt.CORK and not self.profile.supports_cork)
                 or (opt is SockOpt.QUICKACK and not self.profile.supports_quickack))
        if lacks:
            raise _Stop(Status.UNSUPPORTED, line, f"profile {self.profile.name} has no "
                        f"TCP_{opt.name}")

    def _getsockopt(self, line: int, args: tuple[Expr, ...], fd: int | None) -> None:
        opt = _words(args[2])[0] if len(args) > 2 and _words(args[2]) else "?"
        if opt == "SO_ERROR":
            self._so_error(line, args)
            return
        if opt == "TCP_MAXSEG":
            self._maxseg(line, args, fd)
            return
        if opt not in _TCP_OPTS:
            raise _Stop(Status.UNSUPPORTED, line, f"getsockopt {opt} is not modelled")
        self._require(line, _TCP_OPTS[opt])
        want = _int(args[3]) if len(args) > 3 else None
        got = self._endpoint(line).get_option(_TCP_OPTS[opt])
        if want is not None and got != want:
            raise _Stop(Status.FAIL, line, f"getsockopt {opt}: expected [{want}], the model "
                        f"returned [{got}]")

    def _maxseg(self, line: int, args: tuple[Expr, ...], fd: int | None) -> None:
        """getsockopt(TCP_MAXSEG) (do_tcp_getsockopt): a connection's MSS as it sends
        (mss_cache); before connecting, or on the listener, TCP_MAXSEG's own value if set,
        else TCP_MSS_DEFAULT (536)."""
        ep = self.ep
        if ep is not None and self.fds.get(fd if fd is not None else -1) != "listen" \
                and ep.state.value not in ("CLOSED", "LISTEN"):
            got = ep.tcp_info().snd_mss
        else:
            got = self.mss_cap or 536
        want = _int(args[3]) if len(args) > 3 else None
        if want is not None and got != want:
            raise _Stop(Status.FAIL, line, f"getsockopt TCP_MAXSEG: expected [{want}], the "
                        f"model returned [{got}]")

    def _so_error(self, line: int, args: tuple[Expr, ...]) -> None:
        """getsockopt(SO_ERROR) (sock_getsockopt: sock_error): the error a reset left on
        the socket (tcp_reset: ECONNREFUSED in SYN_SENT, EPIPE in CLOSE_WAIT, else
        ECONNRESET), or 0; reading it clears it. packetdrill compares the numbers (Linux's
        errno values), however the script writes them."""
        want = args[3] if len(args) > 3 else None
        got, self.sock_error = self.sock_error, None
        if isinstance(want, List) and len(want.items) == 1 and isinstance(want.items[0], Word):
            name = want.items[0].names[0]
            expected = getattr(errno, name, None) if name.startswith("E") else None
            if expected is None:
                raise _Stop(Status.ERROR, line, f"getsockopt SO_ERROR: {name} is not an "
                            "errno name")
        elif (n := _int(want) if want is not None else None) is not None:
            expected = n
        else:
            return                                   # [...]: not checked
        number = getattr(errno, got) if got else 0
        if expected != number:
            shown = errno.errorcode.get(expected, str(expected)) if expected else "0"
            raise _Stop(Status.FAIL, line, f"getsockopt SO_ERROR: expected [{shown}], the "
                        f"model's socket has [{got or 0}]")

    def _send(self, line: int, call: Syscall, fd: int | None) -> None:
        name = call.name
        size, flags = _io_size(call)
        if size is None:
            raise _Stop(Status.ERROR, line, f"{name}(): cannot tell how many bytes")
        _check_count(line, name, size)
        for flag in flags:
            if flag not in ("MSG_MORE", "MSG_DONTWAIT", "MSG_NOSIGNAL", "0"):
                raise _Stop(Status.UNSUPPORTED, line, f"{name}() flag {flag} is not modelled")
        expected = _int(call.result)
        if expected is not None and expected != size:
            raise _Stop(Status.UNSUPPORTED, line, f"{name}() returning {expected} of {size} "
                        "bytes: the model's send buffer never fills")
        if "MSG_MORE" in flags and not self.profile.supports_cork:
            raise _Stop(Status.UNSUPPORTED, line, f"profile {self.profile.name} has no "
                        "MSG_MORE")
        ep = self._endpoint(line)
        if size:
            more = "MSG_MORE" in flags
            self._input(line, lambda: ep.app_write(Micros(self.now), size, more=more))

    def _recv(self, ev: Event, call: Syscall, fd: int | None, offset: int) -> None:
        size, flags = _io_size(call)
        if size is None:
            raise _Stop(Status.ERROR, ev.line, f"{call.name}(): cannot tell the buffer size")
        _check_count(ev.line, call.name, size)
        for flag in flags:     # MSG_PEEK, MSG_WAITALL … would change what a read returns
            if flag not in ("MSG_DONTWAIT", "0"):
                raise _Stop(Status.UNSUPPORTED, ev.line, f"{call.name}() flag {flag} is not "
                            "modelled")
        want = _int(call.result)
        ep = self._endpoint(ev.line)
        if call.errno == "EAGAIN":
            got = self._input(ev.line, lambda: ep.app_read(Micros(self.now), size))
            if got or ep.eof:
                raise _Stop(Status.FAIL, ev.line, f"{call.name}() expected EAGAIN, the model "
                            f"returned {got}")
            return
        if call.errno is not None:
            raise _Stop(Status.UNSUPPORTED, ev.line, f"{call.name}() failing with "
                        f"{call.errno} is not modelled")
        self._block(ev, call, size, want, offset,
                    blocking=fd not in self.nonblocking and "MSG_DONTWAIT" not in flags)

    def _block(self, ev: Event, call: Syscall, size: int, want: int | None, offset: int,
               blocking: bool) -> None:
        """Start a read() or accept(); it returns now or, if blocking, once it can."""
        if self.pending is not None:
            raise _Stop(Status.UNSUPPORTED, ev.line, "two blocking calls at once")
        relative = ev.time.kind in (TimeKind.RELATIVE, TimeKind.RELATIVE_RANGE)
        start = ev.time.start_us + (offset if relative else 0)
        end = None
        if call.end_time is not None:
            end = call.end_time.start_us + (offset if relative else 0)
        self.pending = _Pending(ev, call, size, want, start, end)
        self._complete_read(blocking=blocking)
        if self.pending is not None and call.end_time is None:
            # packetdrill makes a call written without '...' on its main thread, the one
            # that injects packets: it would wait there for ever
            what = "connection" if call.name in ("accept", "connect") else "data"
            raise _Stop(Status.FAIL, ev.line, f"{call.name}() would block (no {what} yet): "
                        "a blocking call needs an end time, as in '+0...0.1 "
                        f"{call.name}(…)'")

    def _complete_read(self, blocking: bool = True) -> None:
        """Finish a pending call once it can return (data or EOF for a read, an
        established connection for accept); a non-blocking call returns at once."""
        p = self.pending
        if p is None or self.ep is None:
            return
        ep = self.ep
        if p.call.name in ("accept", "connect"):
            if not ep.established:
                if blocking:
                    return
                raise _Stop(Status.FAIL, p.event.line, f"{p.call.name}() expected a "
                            "connection, the model's handshake is not complete")
            got: int | None = p.want
        else:
            got = self._input(p.event.line, lambda: ep.app_read(Micros(self.now), p.size))
            if got == 0 and not ep.eof and blocking and p.want != 0:
                return                              # nothing yet: keep waiting
            if p.want is not None and got != p.want:
                raise _Stop(Status.FAIL, p.event.line, f"{p.call.name}() expected {p.want}, "
                            f"the model returned {got}")
        self.pending = None
        if p.end is not None:
            tol = self._tolerance(p.end, p.start)
            if abs(self.now - p.end) > tol:
                raise _Stop(Status.FAIL, p.event.line, f"{p.call.name}() returned at "
                            f"{_secs(self.now)}, expected at {_secs(p.end)} (tolerance "
                            f"{_secs(tol)})")


def _absolute(ev: Event) -> bool:
    return ev.time.kind in (TimeKind.ABSOLUTE, TimeKind.ABSOLUTE_RANGE)


def _what(action: object) -> str:
    """How packetdrill's event_description names an event in a timing error."""
    if isinstance(action, Packet):
        return "inbound packet" if action.inbound else "outbound packet"
    if isinstance(action, Syscall):
        return f"{action.name}() start"
    return "command" if isinstance(action, Command) else "code block"


def _expect_text(p: Packet) -> str:
    ack = f" ack {p.ack}" if p.ack is not None else ""
    return f"{p.flags or '-'} {p.seq}:{p.end_seq}({p.length}){ack}"


def run_script(script: Script, *, profile: str | StackProfile = "linux",
               tolerance_us: int | None = None, tolerance_pct: float | None = None,
               strict_segments: bool = False) -> DrillResult:
    """Play ``script`` with the model as its local socket. ``strict_segments``: each
    outbound line is one model segment, never several merged (packetdrill's
    ``--strict_segments``; a script's own ``--strict_segments`` line does the same)."""
    prof = PROFILES[profile] if isinstance(profile, str) else profile
    runner: _Runner | None = None
    try:
        runner = _Runner(script, prof, tolerance_us, tolerance_pct, strict_segments)
        runner.run()
    except _Stop as stop:
        if runner is None:
            return DrillResult(script.path, stop.status, stop.message, stop.line)
        return DrillResult(script.path, stop.status, stop.message, stop.line, runner.notes,
                           runner.checked, runner.segments, runner.caveats)
    return DrillResult(script.path, Status.PASS, notes=runner.notes, checked=runner.checked,
                       segments=runner.segments, caveats=runner.caveats)


__all__ = ["DrillResult", "Status", "run_script", "EventTime"]
