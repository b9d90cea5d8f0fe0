"""Play a packetdrill script against the model: the model is the script's local socket.

Owns the meaning of a script for the model (docs/drill.md): inbound packets become
`Endpoint.receive_segment`, system calls become the endpoint's application inputs,
outbound packets are checked against what the endpoint sent — flags, sequence range,
ACK, window, and time within packetdrill's tolerance (max(tolerance_usecs, tolerance_percent
of the time since the previous event); defaults 4 ms and 12.5 %, as packetdrill's). Time
follows packetdrill's rules: a relative time counts from when the previous event happened,
except that consecutive inbound packets are anchored to each other's script times.

What the model cannot play (UDP/ICMP, ECN, SACK blocks, urgent data, shutdown, poll,
zero-copy, …) ends the run as *unsupported*, with the reason; that is never a pass.

It drives the endpoint only through its public inputs and pulled outputs (house style:
no back doors). Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import ast
import functools
import operator
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..model import (
    PROFILES,
    Endpoint,
    Micros,
    ModelError,
    Segment,
    Side,
    SocketError,
    SocketOptions,
    SockOpt,
)
from ..model.config import StackProfile
from ..model.events import flag_letters, parse_flags
from .clock import ModelClock
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
    TimeKind,
    Word,
)
from .timing import DEFAULT_TOLERANCE_PCT, DEFAULT_TOLERANCE_US, tolerance

ANY_TIME_LIMIT_US = 3_600_000_000     # `*` waits at most an hour of model time
TS_OPTION_BYTES = 12                  # timestamps shrink the payload per segment
OUR_WSCALE = 8                        # what Linux 6.x offers with default tcp_rmem
S32_MAX = (1 << 31) - 1               # packetdrill reads a call's byte count as an s32
MAX_IO_BYTES = 1_000_000_000
"""The most bytes one write or read may move, as a scenario's ``write`` size limit: the
model spends time per segment, so a bigger count would run for many seconds."""


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
    """Outbound packets matched."""
    options_unchecked: int = 0
    """Of those, how many the script wrote with TCP options, which the model does not send
    and so are never checked: a pass says so rather than hide it."""

    def summary(self) -> str:
        """What a pass matched: ``8 outbound packets matched; TCP options not checked on
        3``."""
        text = f"{self.checked} outbound packets matched"
        if self.options_unchecked:
            text += f"; TCP options not checked on {self.options_unchecked}"
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


# ---------------------------------------------------------------- sysctls
# sysctls a script may set (backtick lines) and what they change in the profile
_SYSCTL_TUNE: dict[str, Callable[[str], dict[str, Any]]] = {
    "tcp_autocorking": lambda v: {"autocorking": v.strip() != "0"},
    "tcp_pingpong_thresh": lambda v: {"pingpong_thresh": int(v)},
    "tcp_slow_start_after_idle": lambda v: {"slow_start_after_idle": v.strip() != "0"},
    "tcp_congestion_control": lambda v: {"congestion": v.strip()},
    "tcp_min_tso_segs": lambda v: {"min_tso_segs": max(1, int(v))},
}
_SYSCTL_HARMLESS = {
    "tcp_timestamps", "tcp_sack", "tcp_dsack", "tcp_fack", "tcp_frto", "tcp_reordering",
    "tcp_syn_retries", "tcp_synack_retries", "tcp_ecn_option", "tcp_tso_win_divisor",
    "tcp_pacing_ss_ratio", "tcp_pacing_ca_ratio", "tcp_notsent_lowat",
    "tcp_fastopen", "tcp_fastopen_key", "tcp_syncookies", "tcp_rmem", "tcp_wmem",
    "tcp_early_retrans", "tcp_recovery", "tcp_mtu_probing", "tcp_no_metrics_save",
}
# packetdrill's gtests/net/common/defaults.sh, as far as the model has the knobs
_DEFAULTS_SH = {"congestion": "cubic", "slow_start_after_idle": False}


def _commands_to_tune(text: str, line: int, notes: list[str]) -> dict[str, Any]:
    tune: dict[str, Any] = {}
    for raw in re.split(r"[\n;]", text):
        cmd = raw.strip()
        if not cmd or cmd.startswith("#"):
            continue
        if cmd.endswith("defaults.sh"):
            tune.update(_DEFAULTS_SH)
            notes.append(f"line {line}: {cmd}: the model applies its CUBIC-style slow start "
                         "and no slow start after idle, as defaults.sh sets")
            continue
        if re.match(r"ethtool\s+-K\s+\S+\s", cmd):
            if re.search(r"\b[tg]so\s+off\b", cmd):
                tune["_gso_wire"] = False     # packets leave cut to the MSS
            notes.append(f"line {line}: {cmd}: TSO/GSO on the device follows it")
            continue
        m = (re.fullmatch(r"sysctl\s+(?:-q\s+|-w\s+)*(.*)", cmd)
             or re.fullmatch(r"\S*set_sysctls\.py\s+(.*)", cmd))
        if not m:
            notes.append(f"line {line}: command ignored: {cmd[:60]}")
            continue
        for item in re.findall(r"(?:net\.ipv4\.|/proc/sys/net/ipv4/)(\w+)=(\"[^\"]*\"|\S+)",
                               m.group(1)):
            name, value = item[0], item[1].strip('"')
            if name in _SYSCTL_TUNE:
                try:
                    tune.update(_SYSCTL_TUNE[name](value))
                except ValueError:
                    raise _Stop(Status.UNSUPPORTED, line, f"sysctl {name}={value}: not a "
                                "value the model understands") from None
                if name == "tcp_congestion_control" and value not in ("bbr", "cubic", "reno"):
                    raise _Stop(Status.UNSUPPORTED, line,
                                f"congestion control {value!r} is not modelled")
            elif name in _SYSCTL_HARMLESS:
                notes.append(f"line {line}: sysctl {name} has no effect on the model")
            else:
                raise _Stop(Status.UNSUPPORTED, line, f"sysctl net.ipv4.{name} is not "
                            "modelled")
    return tune


# ---------------------------------------------------------------- %{ }% code
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge}
_BIN: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _eval(node: ast.AST, info: dict[str, int], line: int) -> Any:
    """Evaluate a whitelisted expression: numbers, tcpi_* names, arithmetic, comparisons,
    and/or/not. Anything else is unsupported (scripts are data, never executed)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in info:
            known = ", ".join(sorted(n for n in info if n.startswith("tcpi_")))
            raise _Stop(Status.UNSUPPORTED, line, f"{node.id} is not modelled (known: {known})")
        return info[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_eval(node.left, info, line), _eval(node.right, info, line))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, info, line)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, info, line)
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, info, line) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        left = _eval(node.left, info, line)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, info, line)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    raise _Stop(Status.UNSUPPORTED, line, f"code block: {ast.dump(node)[:60]} is outside the "
                "supported subset (assert over tcpi_* fields)")


MAX_CODE_CHARS = 4096
"""A code block longer than this is refused before it is parsed (upstream blocks are a few
lines of asserts)."""
MAX_CODE_DEPTH = 64
"""The deepest expression tree a code block may have: `_eval` recurses once per level."""


def _depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests, measured without recursion (a 2000-term product is a tree
    2000 deep, and a recursive walk over it would overflow Python's stack)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_CODE_DEPTH:          # deeper than the limit: no need to look on
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _run_code(code: Code, line: int, get_info: Callable[[], dict[str, int]]) -> None:
    text = code.text.strip()
    if len(text) > MAX_CODE_CHARS:
        raise _Stop(Status.ERROR, line, f"code block of {len(text):,} characters (limit "
                    f"{MAX_CODE_CHARS:,})")
    try:
        tree = ast.parse(text or "pass")
    except SyntaxError as exc:
        raise _Stop(Status.ERROR, line, f"code block: {exc.msg}") from None
    except (RecursionError, MemoryError):    # thousands of nested operators
        raise _Stop(Status.ERROR, line, "code block: nested too deeply to parse") from None
    if _depth(tree) > MAX_CODE_DEPTH:
        raise _Stop(Status.ERROR, line, f"code block: expressions nested more than "
                    f"{MAX_CODE_DEPTH} deep")
    asserts = [stmt for stmt in tree.body if not isinstance(stmt, ast.Pass)]
    if not all(isinstance(stmt, ast.Assert) for stmt in asserts):
        raise _Stop(Status.UNSUPPORTED, line, "code block: only assert statements over "
                    "tcpi_* fields are supported")
    info = get_info() if asserts else {}
    for stmt in asserts:
        assert isinstance(stmt, ast.Assert)
        try:
            ok = _eval(stmt.test, info, line)
        except (ArithmeticError, RecursionError, MemoryError) as exc:
            # division by zero, float overflow: the script's arithmetic, not the model's
            raise _Stop(Status.ERROR, line, f"code block: {ast.unparse(stmt.test)[:80]}: "
                        f"{type(exc).__name__}: {exc}") from None
        if not ok:
            shown = ", ".join(f"{name}={info[name]}" for name in sorted(
                {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}))
            raise _Stop(Status.FAIL, line, f"assertion failed: {ast.unparse(stmt.test)} "
                        f"({shown})")


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


# include/net/tcp_states.h, by the model's state names
_TCP_STATES = {"ESTABLISHED": 1, "SYN_SENT": 2, "SYN_RCVD": 3, "FIN_WAIT1": 4, "FIN_WAIT2": 5,
               "TIME_WAIT": 6, "CLOSED": 7, "CLOSE_WAIT": 8, "LAST_ACK": 9, "LISTEN": 10,
               "CLOSING": 11}
_TCP_OPTS = {f"TCP_{opt.name}": opt for opt in SockOpt}   # the model's option vocabulary
_IGNORED_SOCKET_OPTS = {"SO_REUSEADDR", "SO_REUSEPORT", "SO_RCVBUF", "SO_KEEPALIVE"}
_SEND_CALLS = {"write", "send", "sendto", "sendmsg", "writev"}
_RECV_CALLS = {"read", "recv", "recvfrom", "recvmsg", "readv"}
_SHUT_HOW = {"SHUT_RD": "rd", "SHUT_WR": "wr", "SHUT_RDWR": "rdwr"}
_ERRNO = {"EAGAIN": 11, "EPIPE": 32, "ECONNRESET": 104, "ENOTCONN": 107, "ETIMEDOUT": 110,
          "ECONNREFUSED": 111}
"""Linux's numbers for the errors a model call reports (getsockopt(SO_ERROR) reads them)."""
_UNSUPPORTED_CALLS = {
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
    left: int = 0
    """A blocking write: bytes still to copy once the send buffer has room."""
    more: bool = False


class _Runner:
    def __init__(self, script: Script, profile: StackProfile, tolerance_us: int | None,
                 tolerance_pct: float | None) -> None:
        self.script = script
        self.notes: list[str] = []
        opts = script.options
        try:
            self.tol_us = (tolerance_us if tolerance_us is not None
                           else int(opts.get("tolerance_usecs", DEFAULT_TOLERANCE_US)))
            self.tol_pct = (tolerance_pct if tolerance_pct is not None
                            else float(opts.get("tolerance_percent", DEFAULT_TOLERANCE_PCT)))
        except ValueError:
            raise _Stop(Status.ERROR, 0, "--tolerance_usecs / --tolerance_percent in the "
                        "script must be numbers") from None
        for name in opts:
            if name not in ("tolerance_usecs", "tolerance_percent", "ip_version", "mss",
                            "bind_port", "connect_port"):
                self.notes.append(f"script option --{name} ignored")
        tune: dict[str, Any] = {}
        for cmd in script.init_commands:
            tune.update(_commands_to_tune(cmd.text, 0, self.notes))
        self.gso_wire = bool(tune.pop("_gso_wire", True))
        self.profile = profile.with_overrides(**tune) if tune else profile
        self.ep: Endpoint | None = None
        self.side = Side.SERVER
        self.options = SocketOptions()
        self.mss_cap: int | None = None
        self.peer_wscale = 0
        self.clock = ModelClock(after_timer=self._complete_read)
        self.prev: tuple[Event, int] | None = None   # previous event and its script time
        self.fds: dict[int, str] = {}                # fd -> "listen" | "conn" | "socket"
        self.nonblocking: set[int] = set()
        self.pending: _Pending | None = None
        self.checked = 0
        self.options_unchecked = 0
        self._peer_mss = self._prescan_mss()

    # ------------------------------------------------------------ the model
    def _prescan_mss(self) -> int:
        """The payload MSS the model will use: the peer's SYN(-ACK) mss option, less the
        timestamps option when that SYN carries one (Linux then sends it on every segment)."""
        for ev in self.script.events:
            a = ev.action
            if isinstance(a, Packet) and a.inbound and "S" in a.flags:
                mss = _option(a, "mss")
                value = mss[0] if mss else 536
                if _option(a, "TS") is not None:
                    value -= TS_OPTION_BYTES
                return max(value, 88)
        return 1448

    def _endpoint(self, line: int) -> Endpoint:
        if self.ep is None:
            raise _Stop(Status.FAIL, line, "no connection yet (a packet or call before "
                        "connect/listen)")
        return self.ep

    def _create(self, side: Side) -> Endpoint:
        self.side = side
        mss = min(self._peer_mss, self.mss_cap) if self.mss_cap else self._peer_mss
        profile = self.profile
        if not self._peer_sack_ok():
            # tcp_schedule_loss_probe requires tcp_is_sack(tp): no SACK, no loss probes
            profile = profile.with_overrides(tail_loss_probe=False)
        # our own MSS (MTU 1500 on packetdrill's TUN), less the timestamps if used
        advmss = 1460 - (TS_OPTION_BYTES if self._prescan_ts() else 0)
        self.ep = Endpoint(side, profile, self.options, mss, max(advmss, mss))
        # packetdrill sees packets on a TUN device with TSO on: a TSO burst is one packet
        # (1:10001(10000)), as the kernel hands it to the device — unless the script
        # turned TSO/GSO off with ethtool
        self.ep.set_gso_wire(self.gso_wire)
        self.ep.set_rx_loopback(False)      # injected through TUN: kmalloc'ed heads
        self.ep.set_mss_clamp(self._peer_mss_option())
        self.clock.ep = self.ep
        return self.ep

    def _prescan_ts(self) -> bool:
        """Whether the peer's SYN carries timestamps (then both sides use them)."""
        for ev in self.script.events:
            a = ev.action
            if isinstance(a, Packet) and a.inbound and "S" in a.flags:
                return _option(a, "TS") is not None
        return False

    def _peer_sack_ok(self) -> bool:
        """Whether the peer's SYN offers SACK (sackOK): then the connection uses it."""
        for ev in self.script.events:
            a = ev.action
            if isinstance(a, Packet) and a.inbound and "S" in a.flags:
                return _option(a, "sackOK") is not None
        return True

    def _peer_mss_option(self) -> int:
        """The mss option of the peer's SYN (536 without one): tp->rx_opt.mss_clamp."""
        for ev in self.script.events:
            a = ev.action
            if isinstance(a, Packet) and a.inbound and "S" in a.flags:
                mss = _option(a, "mss")
                return mss[0] if mss else 536
        return 1460

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
        except SocketError as exc:
            self.clock.collect()
            raise _Stop(Status.FAIL, line, f"the model's call failed with {exc.errno} "
                        f"({exc})") from None
        except ModelError as exc:
            raise _Stop(Status.FAIL, line, f"the model refused: {exc}") from None
        self.clock.collect()
        return result

    def _call(self, line: int, call: Syscall, fn: Callable[[], Any]) -> Any:
        """One call whose failure the script may expect (``= -1 EPIPE``): its result, or
        None when it failed with the errno the script names."""
        try:
            result = fn()
        except SocketError as exc:
            self.clock.collect()
            if call.errno != exc.errno:
                want = f"-1 {call.errno}" if call.errno else "success"
                raise _Stop(Status.FAIL, line, f"{call.name}() expected {want}, the model "
                            f"failed with {exc.errno} ({exc})") from None
            return None
        except ModelError as exc:
            raise _Stop(Status.FAIL, line, f"the model refused: {exc}") from None
        self.clock.collect()
        if call.errno is not None:
            raise _Stop(Status.FAIL, line, f"{call.name}() expected -1 {call.errno}, the "
                        f"model returned {result if result is not None else 0}")
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
                    tune = _commands_to_tune(action.text, ev.line, self.notes)
                    if tune:
                        raise _Stop(Status.UNSUPPORTED, ev.line, "a sysctl that changes the "
                                    "model in the middle of a script")
                else:
                    _run_code(action, ev.line, functools.partial(self._tcp_info, ev.line))
            self._complete_read()
            self.prev = (ev, start)
        if self.pending is not None:
            raise _Stop(Status.FAIL, self.pending.event.line,
                        f"{self.pending.call.name}() never returned: no data arrived")

    def _tcp_info(self, line: int) -> dict[str, int]:
        """The ``tcpi_*`` names a code block may use, from `Endpoint.tcp_info`, with the
        kernel's units (µs for times) and TCP state numbers (include/net/tcp_states.h)."""
        info = self._endpoint(line).tcp_info(Micros(self.now))
        names = {f"TCP_{state}": number for state, number in _TCP_STATES.items()}
        names["TCP_CLOSE"] = _TCP_STATES["CLOSED"]     # the kernel's name for it
        return {**names, "tcpi_state": _TCP_STATES[info.state.value],
                "tcpi_snd_cwnd": info.snd_cwnd, "tcpi_snd_ssthresh": info.snd_ssthresh,
                "tcpi_snd_mss": info.snd_mss, "tcpi_rcv_mss": info.rcv_mss,
                "tcpi_unacked": info.unacked, "tcpi_rtt": info.rtt, "tcpi_rto": info.rto,
                "tcpi_ato": info.ato, "tcpi_pacing_rate": int(info.pacing_rate),
                "tcpi_busy_time": info.busy_time, "tcpi_rwnd_limited": info.rwnd_limited,
                "tcpi_sndbuf_limited": info.sndbuf_limited,
                "tcpi_last_data_recv": info.last_data_recv,
                "tcpi_last_data_sent": info.last_data_sent,
                "tcpi_notsent_bytes": info.notsent_bytes, "tcpi_rcv_space": info.rcv_space,
                "tcpi_rcv_ssthresh": info.rcv_ssthresh, "tcpi_rcv_rtt": info.rcv_rtt}

    def _inbound(self, ev: Event, p: Packet) -> None:
        if p.other:
            raise _Stop(Status.UNSUPPORTED, ev.line, f"{p.other[0]} is not modelled")
        if _option(p, "sack"):
            raise _Stop(Status.UNSUPPORTED, ev.line, "SACK blocks (loss recovery) are not "
                        "modelled")
        try:
            flags = _flags_of(p)
        except ValueError as exc:
            raise _Stop(Status.UNSUPPORTED, ev.line, str(exc)) from None
        if "S" in p.flags:
            ws = _option(p, "wscale")
            self.peer_wscale = ws[0] if ws else 0
            if self.ep is None:
                self._create(Side.SERVER)
        ep = self._endpoint(ev.line)
        window = p.window if p.window is not None else 65535
        if "S" not in p.flags:
            window <<= self.peer_wscale
        seg = Segment(src=self.side.peer, seq=p.seq, ack=p.ack or 0, length=p.length,
                      flags=flags, window=window, sent_at=self.now)  # type: ignore[arg-type]
        self._input(ev.line, lambda: ep.receive_segment(Micros(self.now), seg))

    def _outbound(self, ev: Event, p: Packet, start: int, end: int | None, tol: int) -> None:
        anytime = ev.time.kind is TimeKind.ANY
        latest = self.now + ANY_TIME_LIMIT_US if anytime else (end or start) + tol
        while not self.out:
            ep = self.ep
            d = ep.next_deadline() if ep is not None else None
            if d is None or d > latest:
                break
            self._advance(d)
        if not self.out:
            raise _Stop(Status.FAIL, ev.line, f"expected {_expect_text(p)} at "
                        f"{_secs(start)}, but the model sent nothing by {_secs(latest)}")
        at, seg = self.out.popleft()
        sent = f"{seg.summary()} at {_secs(at)}"
        if not anytime and not (start - tol <= at <= (end or start) + tol):
            window = (f"{_secs(start)}~{_secs(end)}" if end is not None else _secs(start))
            raise _Stop(Status.FAIL, ev.line, f"timing: expected {_expect_text(p)} at "
                        f"{window} (tolerance {_secs(tol)}), the model sent {sent}")
        problems = []
        want_flags = p.flags.replace(".", "A")
        if sorted(want_flags) != sorted(flag_letters(seg.flags)):
            problems.append(f"flags expected {p.flags or '-'}, got "
                            f"{flag_letters(seg.flags).replace('A', '.') or '-'}")
        if seg.seq != p.seq:
            problems.append(f"seq expected {p.seq}, got {seg.seq}")
        if seg.length != p.length:
            problems.append(f"length expected {p.length}, got {seg.length}")
        if p.ack is not None and seg.ack != p.ack:
            problems.append(f"ack expected {p.ack}, got {seg.ack}")
        if p.window is not None:
            shift = 0 if "S" in p.flags else (OUR_WSCALE if self.peer_wscale else 0)
            if seg.window >> shift != p.window:
                problems.append(f"win expected {p.window}, got {seg.window >> shift}")
        if problems:
            raise _Stop(Status.FAIL, ev.line, f"{'; '.join(problems)} (the model sent {sent})")
        if p.options:
            self.notes.append(f"line {ev.line}: TCP options are not checked")
            self.options_unchecked += 1
        self.checked += 1
        self.now = max(self.now, at)

    # ------------------------------------------------------------ system calls
    def _syscall(self, ev: Event, call: Syscall, offset: int) -> None:
        name, args, line = call.name, call.args, ev.line
        if name in _UNSUPPORTED_CALLS:
            raise _Stop(Status.UNSUPPORTED, line, _UNSUPPORTED_CALLS[name])
        expected = _int(call.result)
        if call.errno is not None and name not in _RECV_CALLS | _SEND_CALLS | {
                "connect", "shutdown"}:
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
            if len(args) > 2 and "F_SETFL" in _words(args[1]) and fd is not None:
                if "O_NONBLOCK" in _words(args[2]):
                    self.nonblocking.add(fd)
                else:                       # F_SETFL without it: blocking again
                    self.nonblocking.discard(fd)
        elif name == "setsockopt":
            self._setsockopt(line, args, fd)
        elif name == "getsockopt":
            self._getsockopt(line, args)
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
            self._send(ev, call, fd, offset)
        elif name in _RECV_CALLS:
            self._recv(ev, call, fd, offset)
        elif name == "close":
            if fd is not None and self.fds.get(fd) == "conn":
                ep = self._endpoint(line)
                self._input(line, lambda: ep.app_close(Micros(self.now)))
        elif name == "shutdown":
            how = _words(args[1]) if len(args) > 1 else ()
            if not how or how[0] not in _SHUT_HOW:
                raise _Stop(Status.ERROR, line, "shutdown(fd, how): how must be SHUT_RD, "
                            "SHUT_WR or SHUT_RDWR")
            ep = self._endpoint(line)
            self._call(line, call, lambda: ep.shutdown(Micros(self.now), _SHUT_HOW[how[0]]))
        else:
            raise _Stop(Status.UNSUPPORTED, line, f"{name}() is not modelled")

    def _setsockopt(self, line: int, args: tuple[Expr, ...], fd: int | None) -> None:
        if len(args) < 4:
            raise _Stop(Status.ERROR, line, "setsockopt needs (fd, level, name, value, len)")
        level, name = _words(args[1]), _words(args[2])
        opt = name[0] if name else "?"
        if level and level[0] == "SOL_SOCKET" and opt == "SO_SNDBUF":
            value = _int(args[3])
            if value is None:
                raise _Stop(Status.ERROR, line, "SO_SNDBUF: expected a value like [10000]")
            if self.ep is None:
                raise _Stop(Status.UNSUPPORTED, line, "SO_SNDBUF before the endpoint exists")
            self.ep.set_sndbuf(value)
            return
        if opt == "TCP_USER_TIMEOUT":
            uto = _int(args[3])
            if uto is None or self.ep is None:
                raise _Stop(Status.UNSUPPORTED, line, "TCP_USER_TIMEOUT before the endpoint "
                            "exists, or without a value")
            timed = self.ep
            self._input(line, lambda: timed.set_user_timeout(uto))
            return
        if opt == "TCP_NOTSENT_LOWAT":
            value = _int(args[3])
            if value is None or self.ep is None:
                raise _Stop(Status.UNSUPPORTED, line, "TCP_NOTSENT_LOWAT before the endpoint "
                            "exists, or without a value")
            self.ep.set_notsent_lowat(value)
            return
        if level and level[0] == "SOL_SOCKET":
            if opt not in _IGNORED_SOCKET_OPTS:
                raise _Stop(Status.UNSUPPORTED, line, f"socket option {opt} is not modelled")
            self.notes.append(f"line {line}: {opt} has no effect on the model")
            return
        if opt == "TCP_MAXSEG":
            value = _int(args[3])
            if value is None or self.ep is not None and self.ep.established:
                raise _Stop(Status.UNSUPPORTED, line, "TCP_MAXSEG after connecting")
            self.mss_cap = value
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

    def _getsockopt(self, line: int, args: tuple[Expr, ...]) -> None:
        opt = _words(args[2])[0] if len(args) > 2 and _words(args[2]) else "?"
        if opt in ("SO_SNDBUF", "SO_ERROR"):
            want = _int(args[3]) if len(args) > 3 else None
            ep = self._endpoint(line)
            want = _int(args[3]) if len(args) > 3 else None
            if opt == "SO_ERROR" and want is None and len(args) > 3 and isinstance(
                    args[3], List) and args[3].items and _words(args[3].items[0]):
                want = _ERRNO.get(_words(args[3].items[0])[0], -1)   # [ETIMEDOUT]
            got = ep.sndbuf if opt == "SO_SNDBUF" else _ERRNO.get(ep.take_error(), 0)
            if want is not None and got != want:
                raise _Stop(Status.FAIL, line, f"getsockopt {opt}: expected [{want}], the "
                            f"model returned [{got}]")
            return
        if opt not in _TCP_OPTS:
            raise _Stop(Status.UNSUPPORTED, line, f"getsockopt {opt} is not modelled")
        self._require(line, _TCP_OPTS[opt])
        want = _int(args[3]) if len(args) > 3 else None
        got = self._endpoint(line).get_option(_TCP_OPTS[opt])
        if want is not None and got != want:
            raise _Stop(Status.FAIL, line, f"getsockopt {opt}: expected [{want}], the model "
                        f"returned [{got}]")

    def _send(self, ev: Event, call: Syscall, fd: int | None, offset: int) -> None:
        line = ev.line
        name = call.name
        size, flags = _io_size(call)
        if size is None:
            raise _Stop(Status.ERROR, line, f"{name}(): cannot tell how many bytes")
        _check_count(line, name, size)
        for flag in flags:
            if flag not in ("MSG_MORE", "MSG_EOR", "MSG_DONTWAIT", "MSG_NOSIGNAL", "0"):
                raise _Stop(Status.UNSUPPORTED, line, f"{name}() flag {flag} is not modelled")
        expected = _int(call.result)
        if "MSG_MORE" in flags and not self.profile.supports_cork:
            raise _Stop(Status.UNSUPPORTED, line, f"profile {self.profile.name} has no "
                        "MSG_MORE")
        ep = self._endpoint(line)
        if not size:
            return
        more, eor = "MSG_MORE" in flags, "MSG_EOR" in flags
        blocking = fd not in self.nonblocking and "MSG_DONTWAIT" not in flags
        if blocking and call.errno is None:
            # a blocking write returns once every byte is in the send buffer
            copied = self._input(line, lambda: ep.app_write(Micros(self.now), size,
                                                            more=more, eor=eor))
            self._block(ev, call, 0, expected, offset, blocking=True, left=size - copied,
                        more=more)
            return
        got = self._call(line, call, lambda: _nonblocking_write(ep, Micros(self.now), size,
                                                                more, eor))
        if got is not None and expected is not None and got != expected:
            raise _Stop(Status.FAIL, line, f"{name}() expected {expected}, the model "
                        f"returned {got}")

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
            # an error the read reports at once (a reset: ECONNRESET)
            self._call(ev.line, call, lambda: ep.app_read(Micros(self.now), size))
            return
        self._block(ev, call, size, want, offset,
                    blocking=fd not in self.nonblocking and "MSG_DONTWAIT" not in flags)

    def _block(self, ev: Event, call: Syscall, size: int, want: int | None, offset: int,
               blocking: bool, left: int = 0, more: bool = False) -> None:
        """Start a read() or accept(); it returns now or, if blocking, once it can."""
        if self.pending is not None:
            raise _Stop(Status.UNSUPPORTED, ev.line, "two blocking calls at once")
        relative = ev.time.kind in (TimeKind.RELATIVE, TimeKind.RELATIVE_RANGE)
        start = ev.time.start_us + (offset if relative else 0)
        end = None
        if call.end_time is not None:
            end = call.end_time.start_us + (offset if relative else 0)
        self.pending = _Pending(ev, call, size, want, start, end, left, more)
        self._complete_read(blocking=blocking)
        if self.pending is not None and call.end_time is None:
            # packetdrill makes a call written without '...' on its main thread, the one
            # that injects packets: it would wait there for ever
            what = ("connection" if call.name in ("accept", "connect") else
                    "room in the send buffer" if call.name in _SEND_CALLS else "data")
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
        if p.call.name in _SEND_CALLS:
            if p.left and ep.take_write_wakeup():
                p.left -= self._input(p.event.line, lambda: ep.app_write(
                    Micros(self.now), p.left, more=p.more, resume=True))
            if p.left:
                return
            got: int | None = p.want
        elif p.call.name in ("accept", "connect"):
            if not ep.established:
                if blocking:
                    return
                raise _Stop(Status.FAIL, p.event.line, f"{p.call.name}() expected a "
                            "connection, the model's handshake is not complete")
            got = p.want
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


def _nonblocking_write(ep: Endpoint, now: Micros, size: int, more: bool, eor: bool) -> int:
    """A write that must not block: what fits in the send buffer, or EAGAIN if nothing."""
    copied = ep.app_write(now, size, more=more, eor=eor)
    if not copied:
        raise SocketError("EAGAIN", "the send buffer is full")
    return copied


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
               tolerance_us: int | None = None,
               tolerance_pct: float | None = None) -> DrillResult:
    """Play ``script`` with the model as its local socket."""
    prof = PROFILES[profile] if isinstance(profile, str) else profile
    runner: _Runner | None = None
    try:
        runner = _Runner(script, prof, tolerance_us, tolerance_pct)
        runner.run()
    except _Stop as stop:
        return DrillResult(script.path, stop.status, stop.message, stop.line,
                           runner.notes if runner else [], runner.checked if runner else 0,
                           runner.options_unchecked if runner else 0)
    return DrillResult(script.path, Status.PASS, notes=runner.notes, checked=runner.checked,
                       options_unchecked=runner.options_unchecked)


__all__ = ["DrillResult", "Status", "run_script", "EventTime"]
