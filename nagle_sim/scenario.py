"""Scenario files: TOML in, validated frozen dataclasses out.

Owns: the scenario format (docs/scenarios.md), the script language, `--set` overrides and
the one-line error messages for bad input. Both executors (the simulator and realnet)
consume `Scenario`. Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UserError
from .model.config import (
    CONGESTION_CONTROLS,
    HOST_FIELDS,
    NAMESPACE_SYSCTL_FIELDS,
    PER_SOCKET_FIELDS,
    PROFILES,
    TIMING_OPTIONS,
    TUNABLE,
    AckStyle,
    SocketOptions,
    StackProfile,
    timing_option_error,
)
from .model.events import Micros, Side
from .model.state import SockOpt
from .params import ParamError, apply_params


class ScenarioError(UserError, ValueError):
    """Bad scenario input. ``str(err)`` is the one-line message shown to the user."""


# ---------------------------------------------------------------- script statements
@dataclass(frozen=True, slots=True)
class Write:
    line: int
    size: int
    more: bool = False


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


Statement = Write | Writev | Read | Sleep | SetOpt | SetTiming | GetOpt | Repeat | Close

OPTIONS = tuple(opt.value for opt in SockOpt)
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
        return "write", f"{stmt.size}{' more' if stmt.more else ''}"
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
    return "repeat", str(stmt.count)


# ---------------------------------------------------------------- scenario objects
FAULT_KINDS = ("data", "ack", "fin")
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


DECLARED_PATH_TOLERANCE_US = 2_000
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
        the model's link when it is compared with that run (`nagle_sim.compare_run`)."""
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


# ---------------------------------------------------------------- script parsing
_TOKEN = re.compile(r"\s*(?:(?P<brace>[{};])|(?P<word>[^\s{};]+))")
_DURATION = re.compile(r"^(?P<num>[0-9]{1,12}(?:\.[0-9]{1,9})?)(?P<unit>us|ms|s)$")
_UNIT_US = {"us": 1, "ms": 1000, "s": 1_000_000}
MAX_STATEMENTS = 10_000_000
"""A script may run at most this many statements, counting every loop iteration as at
least one (so ``repeat 1000000000 { }`` is refused, not spun). A statement makes a trace
record, so a run's memory is bounded by its record limit (the driver's); this bound is for
iterations that run nothing (``repeat 10000000 { repeat 1 { } }``), which the walker spins
through: 10 million take about 0.9 s compiled and 7.5 s in the pure build, in constant
memory. Ten million leaves room for S3 at 100,000 messages (1.8 million statements)."""
MAX_NESTING = 64
"""``repeat`` blocks nest at most this deep (TOML and JSON values likewise)."""
MAX_FILE_BYTES = 1_048_576
"""A scenario file (or script text) is refused above this size, before any parsing."""
MAX_WRITEV_PARTS = 1024
"""As Linux's IOV_MAX: the most buffers one ``writev`` takes."""
_MAX_SLEEP_US = 10 * 86_400 * 1_000_000   # ten days: far beyond any run's time limit


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0/C1 control characters other than tab and newline."""


def clip(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis) and made one printable line
    (control characters such as newlines shown escaped), for quoting user input in
    one-line messages."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    if cut.isprintable():
        return cut
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in cut)


def shown(value: Any) -> str:
    """``repr(value)`` clipped for a message (huge ints are not even converted)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        try:
            return f"a {len(str(abs(value)))}-digit number"
        except ValueError:     # past sys.get_int_max_str_digits()
            return "a number of thousands of digits"
    if isinstance(value, str):
        return repr(clip(value))
    if isinstance(value, list | dict):
        return "a table" if isinstance(value, dict) else "an array"
    return clip(repr(value))


def _tokenize(text: str, where: str, first_line: int) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    for offset, raw_line in enumerate(text.splitlines()):
        line_no = first_line + offset
        line = raw_line.split("#", 1)[0]
        pos = 0
        while pos < len(line):
            m = _TOKEN.match(line, pos)
            if m is None or m.end() == pos:
                break
            pos = m.end()
            tok = m.group("brace") or m.group("word")
            if tok:
                tokens.append((tok, line_no))
        tokens.append(("\n", line_no))
    return tokens


@dataclass(frozen=True, slots=True)
class _Open:
    """A ``repeat N {`` whose block is being parsed."""

    line: int
    count: int


class _Parser:
    def __init__(self, tokens: list[tuple[str, int]], where: str) -> None:
        self.tokens = tokens
        self.pos = 0
        self.where = where

    def error(self, line: int, message: str) -> ScenarioError:
        return ScenarioError(f"{self.where}:{line}: {message}")

    def parse_body(self) -> tuple[Statement, ...]:
        """The whole token list as a statement tuple; ``repeat`` blocks are kept on an
        explicit stack (no recursion), at most `MAX_NESTING` deep."""
        open_blocks: list[tuple[_Open, list[Statement]]] = []
        body: list[Statement] = []
        while self.pos < len(self.tokens):
            tok, line = self.tokens[self.pos]
            if tok in ("\n", ";"):
                self.pos += 1
                continue
            if tok == "}":
                if not open_blocks:
                    raise self.error(line, "unexpected '}' with no open 'repeat {'")
                self.pos += 1
                opened, outer = open_blocks.pop()
                outer.append(Repeat(opened.line, opened.count, tuple(body)))
                body = outer
                continue
            stmt = self.parse_statement()
            if isinstance(stmt, _Open):
                if len(open_blocks) >= MAX_NESTING:
                    raise self.error(line, f"'repeat' blocks nest more than {MAX_NESTING} "
                                           "deep")
                open_blocks.append((stmt, body))
                body = []
            else:
                body.append(stmt)
        if open_blocks:
            last = self.tokens[-1][1] if self.tokens else 0
            raise self.error(last, "'repeat {' is never closed with '}'")
        return tuple(body)

    def _words(self) -> tuple[list[str], int]:
        words: list[str] = []
        line = self.tokens[self.pos][1]
        while self.pos < len(self.tokens):
            tok, _ = self.tokens[self.pos]
            if tok in ("\n", ";", "}", "{"):
                break
            words.append(tok)
            self.pos += 1
        return words, line

    def parse_statement(self) -> Statement | _Open:
        words, line = self._words()
        if not words:
            tok = self.tokens[self.pos][0]
            raise self.error(line, f"unexpected {clip(tok)!r}")
        verb, args = words[0].lower(), words[1:]
        if verb == "repeat":
            if len(args) != 1:
                raise self.error(line, "use 'repeat N { ... }'")
            count = self.positive_int(args[0], line, "repeat count", allow_zero=True)
            if self.pos >= len(self.tokens) or self.tokens[self.pos][0] != "{":
                raise self.error(line, "'repeat N' must be followed by '{'")
            self.pos += 1
            return _Open(line, count)
        if self.pos < len(self.tokens) and self.tokens[self.pos][0] == "{":
            raise self.error(line, f"'{{' is only allowed after 'repeat N', not after "
                                   f"{clip(verb)!r}")
        if verb == "write":
            if len(args) == 2 and args[1].lower() == "more":
                return Write(line, self.positive_int(args[0], line, "write size"), more=True)
            if len(args) != 1:
                raise self.error(line, "use 'write N' or 'write N more'")
            return Write(line, self.positive_int(args[0], line, "write size"))
        if verb == "writev":
            if not args:
                raise self.error(line, "use 'writev A B ...' with at least one size")
            if len(args) > MAX_WRITEV_PARTS:
                raise self.error(line, f"writev takes at most {MAX_WRITEV_PARTS} sizes "
                                       f"(IOV_MAX), got {len(args)}")
            return Writev(line, tuple(self.positive_int(a, line, "writev part") for a in args))
        if verb == "read":
            if len(args) != 1:
                raise self.error(line, "use 'read N'")
            return Read(line, self.positive_int(args[0], line, "read size"))
        if verb == "sleep":
            if len(args) != 1:
                raise self.error(line, "use 'sleep 15ms' (units us, ms, s)")
            us = self.duration(args[0], line)
            if us > _MAX_SLEEP_US:
                raise self.error(line, f"sleep {clip(args[0])} is longer than ten days")
            return Sleep(line, Micros(us))
        if verb == "set" and args and args[0].lower() in TIMING_OPTIONS:
            if len(args) != 2:
                raise self.error(line, f"use 'set {args[0].lower()} 5ms' (units us, ms, s)")
            us = self.duration(args[1], line)
            if us > _MAX_SLEEP_US:
                raise self.error(line, f"set {args[0].lower()} {clip(args[1])} is too long")
            return SetTiming(line, args[0].lower(), Micros(us))
        if verb == "set":
            if len(args) != 2 or args[0].lower() not in OPTIONS:
                raise self.error(line, "use 'set nodelay|cork|quickack on|off' or "
                                       "'set delack_max|rto_min 5ms'")
            value = args[1].lower()
            if value not in ("on", "off", "1", "0", "true", "false"):
                raise self.error(line, f"bad value {clip(args[1])!r} for set: use on or off")
            return SetOpt(line, args[0].lower(), value in ("on", "1", "true"))
        if verb == "get":
            if len(args) != 1 or args[0].lower() not in OPTIONS:
                raise self.error(line, "use 'get nodelay|cork|quickack'")
            return GetOpt(line, args[0].lower())
        if verb == "close":
            if args:
                raise self.error(line, "'close' takes no arguments")
            return Close(line)
        raise self.error(line, f"unknown statement {clip(words[0])!r} (expected write, "
                               "writev, "
                               "read, sleep, set, get, repeat or close)")

    def duration(self, text: str, line: int) -> int:
        """A duration such as 15ms, 250us or 1.5s, in whole µs."""
        m = _DURATION.match(text.lower())
        if m is None:
            raise self.error(line, f"bad duration {clip(text)!r}: use e.g. 15ms, 250us, 1.5s")
        return round(float(m.group("num")) * _UNIT_US[m.group("unit")])

    def positive_int(self, text: str, line: int, what: str, allow_zero: bool = False) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise self.error(line, f"{what} must be a whole number, got {clip(text)!r}")
        if len(text.lstrip("+-")) > 12:
            raise self.error(line, f"{what} {text[:16]}… is too large")
        value = int(text)
        if value < 0 or (value == 0 and not allow_zero):
            raise self.error(line, f"{what} must be {'≥ 0' if allow_zero else '> 0'}, "
                                   f"got {value}")
        if value > 1_000_000_000:
            raise self.error(line, f"{what} {value} is too large")
        return value


def parse_script(text: str, where: str = "<script>", first_line: int = 1
                 ) -> tuple[Statement, ...]:
    """Parse a script; errors name ``where:line``. Refuses text over `MAX_FILE_BYTES`,
    nesting over `MAX_NESTING` and scripts running over `MAX_STATEMENTS` statements."""
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(f"{where}:{first_line}: script is {len(text):,} characters "
                            f"(limit {MAX_FILE_BYTES:,})")
    parser = _Parser(_tokenize(text, where, first_line), where)
    body = parser.parse_body()
    ops = count_ops(body)
    if ops > MAX_STATEMENTS:
        raise ScenarioError(f"{where}:{first_line}: script runs more than "
                            f"{MAX_STATEMENTS:,} statements and loop iterations "
                            f"(limit {MAX_STATEMENTS:,}; an empty iteration counts as one)")
    return body


def count_ops(body: tuple[Statement, ...], limit: int = MAX_STATEMENTS) -> int:
    """How many statements ``body`` runs, a loop iteration counting as at least one (so
    empty loops cost their iterations). Stops counting, and returns a number above
    ``limit``, once the count passes ``limit``. Iterative."""
    # A frame: [statements, next index, running total]
    frames: list[list[Any]] = [[body, 0, 0]]
    while True:
        frame = frames[-1]
        stmts, i = frame[0], frame[1]
        if i < len(stmts):
            stmt = stmts[i]
            if isinstance(stmt, Repeat) and stmt.count:
                frames.append([stmt.body, 0, 0])
                continue
            frame[1] = i + 1
            if not isinstance(stmt, Repeat):
                frame[2] += 1
            updated = frame
        else:
            frames.pop()
            if not frames:
                return int(frame[2])
            updated = frames[-1]
            loop = updated[0][updated[1]]
            updated[1] += 1
            updated[2] += loop.count * max(1, frame[2])
        if updated[2] > limit:
            return int(updated[2])   # the whole script runs at least this many


# ---------------------------------------------------------------- TOML loading
_TUNE_MIN = {"syscall_us": 0, "tx_segment_us": 0, "host_latency_us": 0, "wakeup_us": 0,
             "jiffy_phase_us": -1, "timeout_min_j": 0, "tso_rtt_log": 0}
"""Smallest value of a tunable number (1 unless listed: sizes, rates and counts of 0 make
no sense and would divide by zero)."""

_TOP_KEYS = {"title", "description", "link", "client", "server", "expect", "lesson"}
_LINK_KEYS = {"delay_ms", "to_server_delay_ms", "to_client_delay_ms", "mss", "tx_complete_us",
              "gso", "rate", "queue", "quickack", "drop", "hold"}
_FAULT = re.compile(r"^to_(?P<dir>server|client)\s+(?P<kind>[a-z]+)\s+(?P<first>[0-9]{1,7})"
                    r"(?:\s*-\s*(?P<last>[0-9]{1,7}))?(?:\s+(?P<extra>\S+))?$")
MAX_LINK_FAULTS = 64
MAX_HOLD_US = 60_000_000
_RATE = re.compile(r"^(?P<num>[0-9]{1,9}(?:\.[0-9]{1,6})?)\s*(?P<unit>bit|kbit|mbit|gbit)$")
_RATE_UNIT = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}
MAX_LINK_QUEUE = 100_000
_SIDE_KEYS = {"profile", "congestion", "nodelay", "cork", "quickack", "script", "tune"}


def _line_of_key(text: str, table: str, key: str) -> int:
    """Best-effort line number of ``key`` inside ``[table]`` (tomllib gives none)."""
    lines = text.splitlines()
    in_table = table == ""
    for i, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if stripped.startswith("["):
            in_table = stripped.strip("[] ").split("]")[0].strip() == table
            continue
        if in_table and re.match(rf"{re.escape(key)}\s*=", stripped):
            return i
        if table and re.match(rf"{re.escape(table)}\.{re.escape(key)}\s*=", stripped):
            return i
    return 0


class _Loader:
    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where

    def fail(self, table: str, key: str, message: str) -> ScenarioError:
        line = _line_of_key(self.text, table, key) if key else 0
        dotted = f"{table}.{key}" if table and key else (key or table)
        loc = f"{self.where}:{line}" if line else self.where
        return ScenarioError(f"{loc}: {dotted}: {message}")

    def tune_fail(self, side: str, key: str, message: str) -> ScenarioError:
        """`fail` for a side's tune key, also when the table is inline (``tune = { … }``
        on the side's `tune` line)."""
        line = (_line_of_key(self.text, f"{side}.tune", key)
                or _line_of_key(self.text, side, "tune"))
        loc = f"{self.where}:{line}" if line else self.where
        return ScenarioError(f"{loc}: {side}.tune.{key}: {message}")

    def number(self, table: str, data: dict[str, Any], key: str, default: float,
               minimum: float = 0.0) -> float:
        value: Any = data.get(key, default)
        # type(), not isinstance: mypy would narrow to `float` (it absorbs int), and the
        # compiled build would then unbox a 400-digit int as a C double
        if type(value) not in (int, float):
            raise self.fail(table, key, f"expected a number, got {shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(table, key, f"expected a finite number, got {shown(value)}")
        if abs(value) > 10**12:    # compared as int: a 400-digit int overflows a float
            raise self.fail(table, key, f"expected a number of at most 10^12, got "
                                        f"{shown(value)}")
        if value < minimum:
            raise self.fail(table, key, f"must be ≥ {minimum:g}, got {value}")
        return float(value)

    def boolean(self, table: str, data: dict[str, Any], key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(table, key, f"expected true or false, got {shown(value)}")
        return value

    def unknown(self, table: str, data: dict[str, Any], allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                raise self.fail(table, clip(str(key)),
                                f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def link(self, data: Any) -> Link:
        if not isinstance(data, dict):
            raise self.fail("", "link", "must be a table")
        self.unknown("link", data, _LINK_KEYS)
        both = self.number("link", data, "delay_ms", 0.0)
        to_server = self.number("link", data, "to_server_delay_ms", both)
        to_client = self.number("link", data, "to_client_delay_ms", both)
        for key, value in (("delay_ms", both), ("to_server_delay_ms", to_server),
                           ("to_client_delay_ms", to_client)):
            if value > 600_000:
                raise self.fail("link", key, f"{value} ms is more than 10 minutes")
        mss = self.number("link", data, "mss", 1448, minimum=88)
        if mss != int(mss) or mss > 65495:
            raise self.fail("link", "mss", f"must be a whole number from 88 to 65495, got {mss}")
        tx = self.number("link", data, "tx_complete_us", 0)
        # Zero delay means loopback, which passes GSO packets whole; a delayed (or
        # rate-limited) link is emulated through TUN devices, which cut them into MSS
        # segments.
        rate = self.rate(data.get("rate", "0bit"))
        faults = self.faults(data, "drop") + self.faults(data, "hold")
        gso = self.boolean("link", data, "gso", not (to_server or to_client or rate or faults))
        queue = self.number("link", data, "queue", 1000, minimum=1)
        if queue != int(queue) or queue > MAX_LINK_QUEUE:
            raise self.fail("link", "queue", f"must be a whole number of packets from 1 to "
                                             f"{MAX_LINK_QUEUE:,}, got {shown(data['queue'])}")
        if "queue" in data and not rate:
            raise self.fail("link", "queue", "a queue limit needs a rate (e.g. rate = \"1mbit\")")
        quickack = self.boolean("link", data, "quickack", False)
        return Link(to_server_delay=Micros(round(to_server * 1000)),
                    to_client_delay=Micros(round(to_client * 1000)), mss=int(mss),
                    tx_complete=Micros(round(tx)), gso=gso, rate_bps=rate, queue=int(queue),
                    quickack=quickack, faults=faults)

    def faults(self, data: dict[str, Any], key: str) -> tuple[LinkFault, ...]:
        """`drop = ["to_server data 3"]` / `hold = ["to_client data 2-3 5ms"]`."""
        entries = data.get(key, [])
        example = "\"to_server data 3\"" if key == "drop" else "\"to_client data 2 5ms\""
        if not isinstance(entries, list) or len(entries) > MAX_LINK_FAULTS:
            raise self.fail("link", key, f"expected a list of at most {MAX_LINK_FAULTS} "
                                         f"entries such as {example}, got {shown(entries)}")
        out = []
        for entry in entries:
            m = _FAULT.match(entry.strip()) if isinstance(entry, str) else None
            why = ""
            if m is None:
                why = ("expected \"to_server|to_client data|ack|fin N\" or N-M"
                       + (" and a delay" if key == "hold" else "") + f", e.g. {example}")
            elif m.group("kind") not in FAULT_KINDS:
                why = f"unknown kind {m.group('kind')!r} (known: {', '.join(FAULT_KINDS)})"
            if m is None or why:
                raise self.fail("link", key, f"{shown(entry)}: {why}")
            first = int(m.group("first"))
            last = int(m.group("last") or first)
            if not 1 <= first <= last:
                raise self.fail("link", key, f"{shown(entry)}: segments are counted from 1, "
                                             "and a range N-M needs N ≤ M")
            extra = None
            if key == "hold":
                dur = _DURATION.match(m.group("extra") or "")
                if dur is None:
                    raise self.fail("link", key, f"{shown(entry)}: a hold needs how long, "
                                                 f"e.g. {example}")
                extra = round(float(dur.group("num")) * _UNIT_US[dur.group("unit")])
                if not 0 < extra <= MAX_HOLD_US:
                    raise self.fail("link", key, f"{shown(entry)}: a hold must be more than 0 "
                                                 "and at most 60 s")
            elif m.group("extra"):
                raise self.fail("link", key, f"{shown(entry)}: a drop takes no delay")
            out.append(LinkFault(Side(m.group("dir")), m.group("kind"), first, last,
                                 None if extra is None else Micros(extra)))
        return tuple(out)

    def rate(self, value: Any) -> int:
        """A link rate: "1mbit", "256kbit", "10 gbit" or a number of bits per second."""
        if isinstance(value, int) and not isinstance(value, bool):
            bps = value
        elif isinstance(value, str) and (m := _RATE.match(value.strip().lower())):
            bps = round(float(m.group("num")) * _RATE_UNIT[m.group("unit")])
        else:
            raise self.fail("link", "rate", f"expected a rate such as \"1mbit\", \"256kbit\" "
                                            f"or bits per second, got {shown(value)}")
        if bps and not 1000 <= bps <= 100_000_000_000:
            raise self.fail("link", "rate", f"must be from 1kbit to 100gbit, got {shown(value)}")
        return bps

    def side(self, name: str, data: Any) -> SideSpec:
        if not isinstance(data, dict):
            raise self.fail("", name, "must be a table")
        self.unknown(name, data, _SIDE_KEYS)
        profile_name = data.get("profile", "linux")
        if not isinstance(profile_name, str) or profile_name not in PROFILES:
            raise self.fail(name, "profile", f"unknown profile {shown(profile_name)} "
                                             f"(known: {', '.join(PROFILES)})")
        profile = PROFILES[profile_name]
        tune = data.get("tune", {})
        if not isinstance(tune, dict):
            raise self.fail(name, "tune", "must be a table of profile fields")
        changes: dict[str, Any] = {}
        for key, value in tune.items():
            if key not in TUNABLE:
                raise self.fail(f"{name}.tune", clip(str(key)),
                                "not a tunable profile field (see docs/scenarios.md)")
            current = getattr(profile, key)
            if isinstance(current, bool):
                if not isinstance(value, bool):
                    raise self.fail(f"{name}.tune", key,
                                    f"expected true or false, got {shown(value)}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(f"{name}.tune", key,
                                f"expected a whole number, got {shown(value)}")
            elif not _TUNE_MIN.get(key, 1) <= value <= 10**12:
                raise self.fail(f"{name}.tune", key, f"must be from {_TUNE_MIN.get(key, 1)} to "
                                f"10^12, got {shown(value)}")
            if key == "hz" and not 1 <= value <= 1_000_000:
                raise self.fail(f"{name}.tune", key, "HZ must be between 1 and 1000000")
            if key in ("max_quickacks", "pingpong_thresh") and not 1 <= value <= 255:
                raise self.fail(f"{name}.tune", key, "must be between 1 and 255")
            if key == "pingpong_thresh" and not profile.pingpong_sysctl:
                raise self.tune_fail(name, key, f"profile {profile.name!r} has no "
                                     "net.ipv4.tcp_pingpong_thresh: the sysctl came with "
                                     "562b1fdf061b (October 2023, Linux 6.7); before it the "
                                     f"threshold is fixed at {profile.pingpong_thresh}")
            changes[key] = value
        congestion = data.get("congestion", profile.congestion)
        if congestion not in CONGESTION_CONTROLS:
            raise self.fail(name, "congestion", f"unknown congestion control "
                            f"{shown(congestion)} (known: {', '.join(CONGESTION_CONTROLS)})")
        if congestion != profile.congestion:
            changes["congestion"] = congestion
        if changes:
            profile = profile.with_overrides(**changes)
        nodelay = self.boolean(name, data, "nodelay", False)
        cork = self.boolean(name, data, "cork", False)
        quickack = data.get("quickack")
        if quickack == "default":        # lets `--set side.quickack=default` unset it
            quickack = None
        if quickack is not None and not isinstance(quickack, bool):
            raise self.fail(name, "quickack", f"expected true, false or \"default\", "
                                              f"got {shown(quickack)}")
        if cork and not profile.supports_cork:
            raise self.fail(name, "cork", f"profile {profile.name!r} has no TCP_CORK")
        if quickack is not None and not profile.supports_quickack:
            raise self.fail(name, "quickack", f"profile {profile.name!r} has no TCP_QUICKACK")
        script_text = data.get("script", "")
        if not isinstance(script_text, str):
            raise self.fail(name, "script", "must be a string")
        first = _line_of_key(self.text, name, "script")
        if first and re.search(r"script\s*=\s*(\"\"\"|''')\s*$",
                               self.text.splitlines()[first - 1]):
            first += 1
        script = parse_script(script_text, self.where, first or 1)
        self._check_profile_support(name, profile, script)
        self._check_close(name, script)
        return SideSpec(profile=profile, options=SocketOptions(
            nodelay=nodelay, cork=cork, quickack=quickack), script=script,
            script_line=first, tune=changes)

    def _check_close(self, name: str, body: tuple[Statement, ...]) -> None:
        """Only `sleep` may follow `close` (in execution order, loops included). A loop
        body runs a second time, already closed, when its first pass closes the socket;
        further passes add nothing. Iterative, like `nagle_sim.script.steps`."""
        closed = False
        # A frame: [statements, next index, closed on entry, pass (1 or 2)]; the loop a
        # frame belongs to is the statement at its parent's index.
        frames: list[list[Any]] = [[body, 0, False, 1]]
        while frames:
            frame = frames[-1]
            stmts, i = frame[0], frame[1]
            if i == len(stmts):
                frames.pop()
                if not frames:
                    return
                parent = frames[-1]
                loop = parent[0][parent[1]]
                if frame[3] == 1 and loop.count > 1 and closed and not frame[2]:
                    frames.append([loop.body, 0, True, 2])
                else:
                    parent[1] += 1
                continue
            stmt = stmts[i]
            if isinstance(stmt, Repeat):
                if stmt.count:
                    frames.append([stmt.body, 0, closed, 1])
                    continue
            elif closed and not isinstance(stmt, Sleep):
                raise ScenarioError(f"{self.where}:{stmt.line}: {name}: "
                                    f"'{describe(stmt)[0]}' after 'close'")
            elif isinstance(stmt, Close):
                closed = True
            frame[1] = i + 1

    def _check_profile_support(self, name: str, profile: StackProfile,
                               script: tuple[Statement, ...]) -> None:
        for stmt in walk(script):
            if isinstance(stmt, SetOpt | GetOpt):
                if stmt.option == "cork" and not profile.supports_cork:
                    raise ScenarioError(f"{self.where}:{stmt.line}: {name} profile "
                                        f"{profile.name!r} has no TCP_CORK")
                if stmt.option == "quickack" and not profile.supports_quickack:
                    raise ScenarioError(f"{self.where}:{stmt.line}: {name} profile "
                                        f"{profile.name!r} has no TCP_QUICKACK")
            elif isinstance(stmt, SetTiming):
                why = timing_option_error(profile, stmt.option, stmt.duration)
                if why:
                    raise ScenarioError(f"{self.where}:{stmt.line}: {name}: {why}")
            elif isinstance(stmt, Write) and stmt.more and not profile.supports_cork:
                raise ScenarioError(f"{self.where}:{stmt.line}: {name} profile "
                                    f"{profile.name!r} has no MSG_MORE")


def _apply_overrides(doc: dict[str, Any], overrides: list[str], where: str) -> None:
    for item in overrides:
        said = f"--set {clip(item)!r}"
        if "=" not in item:
            raise ScenarioError(f"{said}: use KEY=VALUE, e.g. client.nodelay=true")
        if len(item) > MAX_FILE_BYTES:
            raise ScenarioError(f"{said}: {len(item):,} characters (limit {MAX_FILE_BYTES:,})")
        key, _, value_text = item.partition("=")
        path = key.strip().split(".")
        if not all(path):
            raise ScenarioError(f"{said}: bad key {clip(key)!r}")
        if len(path) > MAX_NESTING:
            raise ScenarioError(f"{said}: key nests more than {MAX_NESTING} tables deep")
        try:
            value = _parse_toml(f"v = {value_text.strip()}", said)["v"]
        except ScenarioError:
            value = value_text.strip()    # not a TOML value: take the text as a string
        node = doc
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ScenarioError(f"{said}: {clip(part)!r} is not a table")
            node = child
        node[path[-1]] = value


def _parse_toml(text: str, where: str) -> dict[str, Any]:
    """tomllib's document, or a one-line `ScenarioError` for anything it refuses (bad
    syntax, an integer over Python's 4300-digit limit, nesting too deep to parse) or for
    values nested deeper than `MAX_NESTING`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            msg = msg[: m.start()].strip()
            raise ScenarioError(f"{where}:{m.group(1)}: invalid TOML: {msg} "
                                f"(column {m.group(2)})") from None
        raise ScenarioError(f"{where}: invalid TOML: {msg}") from None
    except ValueError as exc:    # int() past sys.get_int_max_str_digits()
        raise ScenarioError(f"{where}: invalid TOML: {clip(str(exc), 80)}") from None
    except RecursionError:
        raise ScenarioError(f"{where}: invalid TOML: values nest more than "
                            f"{MAX_NESTING} deep") from None
    if nesting_depth(doc) > MAX_NESTING:
        raise ScenarioError(f"{where}: invalid TOML: values nest more than "
                            f"{MAX_NESTING} deep")
    return doc


def nesting_depth(value: Any, stop: int = MAX_NESTING) -> int:
    """How deep lists and dicts nest in ``value`` (a scalar is 0), counted without
    recursion; stops looking once past ``stop``."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth + 1)
            if deepest > stop:
                return deepest
            pending.extend((child, depth + 1) for child in node
                           if isinstance(child, list | dict))
    return deepest


def loads(text: str, where: str = "<string>", overrides: list[str] | None = None) -> Scenario:
    """Parse scenario TOML text; raise `ScenarioError` with a one-line message. Text over
    `MAX_FILE_BYTES` is refused before parsing."""
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(f"{where}: {len(text):,} characters is too big for a scenario "
                            f"(limit {MAX_FILE_BYTES:,})")
    doc = _parse_toml(text, where)
    # [params] as the file declares it: --param/--set params.… must name one of these
    declared = doc.get("params")
    declared = dict(declared) if isinstance(declared, dict) else declared
    if overrides:
        _apply_overrides(doc, overrides, where)
    try:
        apply_params(doc, text, where, declared)
    except ParamError as exc:
        raise ScenarioError(str(exc)) from None
    loader = _Loader(text, where)
    loader.unknown("", doc, _TOP_KEYS)
    title = doc.get("title", Path(where).stem if where != "<string>" else "untitled")
    if not isinstance(title, str):
        raise loader.fail("", "title", "must be a string")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise loader.fail("", "description", "must be a string")
    for key, value in (("title", title), ("description", description)):
        if bad := _CONTROL.search(value):
            # an escape sequence would reach the terminal and break SVG exports
            raise loader.fail("", key, f"holds the control character {repr(bad.group())[1:-1]}")
    expect = doc.get("expect", [])
    if isinstance(expect, dict):
        expect = [expect]
    if not isinstance(expect, list):
        raise loader.fail("", "expect", "must be a list of claims")
    link = loader.link(doc.get("link", {}))
    client = loader.side("client", doc.get("client", {}))
    server = loader.side("server", doc.get("server", {}))
    if link.quickack:
        for name, spec in (("client", client), ("server", server)):
            if spec.profile.ack_style is not AckStyle.LINUX:
                # RTAX_QUICKACK is a Linux route metric; a classic receiver has no such knob
                raise loader.fail("link", "quickack", f"a Linux route metric: the {name}'s "
                                  f"profile {spec.profile.name!r} has no route quick-ACK")
        # the route metric is the kernel's, whatever the profile: both hosts get it
        client, server = (dataclasses.replace(
            spec, profile=spec.profile.with_overrides(route_quickack=True))
            for spec in (client, server))
    return Scenario(
        title=title, description=description, link=link, client=client, server=server,
        source=where, expect=tuple(expect), raw=doc)


def load(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Load a scenario file; every failure is a `ScenarioError` naming the file."""
    return loads(read_text(path), str(path), overrides)


def read_text(path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "a scenario file"
              ) -> str:
    """A text file's contents (a scenario; ``what`` names the kind in errors): unreadable,
    non-regular (a FIFO would block), oversized or non-UTF-8 files raise a one-line
    `ScenarioError` before anything is parsed."""
    p = Path(path)
    try:
        raw = read_regular_file(p, limit)
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{p}: is a directory, not {what}") from None
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except FileTooBig as exc:
        raise ScenarioError(f"{p}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    return text


class FileTooBig(Exception):
    """`read_regular_file` refused a file; ``str(err)`` says why, without the path."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes. Opens
    without blocking (a FIFO with no writer would hang a plain open) and reads at most
    ``limit + 1`` bytes, so a huge or growing file costs no more than the limit.

    Raises:
        OSError: the file cannot be opened or read (FileNotFoundError, IsADirectoryError…).
        FileTooBig: it is not a regular file, or is bigger than ``limit``.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(info.st_mode):
            raise FileTooBig("not a regular file (a FIFO, device or socket is refused)")
        if info.st_size > limit:
            raise FileTooBig(f"{info.st_size:,} bytes is too big (limit {limit:,})")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooBig(f"more than {limit:,} bytes is too big (limit {limit:,})")
        return b"".join(chunks)
    finally:
        os.close(fd)


def real_run_caveats(scenario: Scenario) -> list[str]:
    """What a real run on this machine's Linux kernel cannot reproduce of ``scenario``:
    another OS profile, or tuned kernel internals. Host timings, what realnet sets per
    socket (the congestion control) and per namespace (tcp_pingpong_thresh) are fine.
    Empty when the two executors are comparable."""
    notes = []
    for side in Side:
        spec = scenario.side(side)
        if spec.profile.name != "linux":
            notes.append(f"{side.value} profile {spec.profile.name!r} is simulated only: a "
                         "real run uses this machine's Linux 6.x kernel")
        kernel = sorted(set(spec.tune) - HOST_FIELDS - PER_SOCKET_FIELDS
                        - NAMESPACE_SYSCTL_FIELDS.keys())
        if kernel:
            notes.append(f"{side.value} tunes kernel internals ({', '.join(kernel)}) that a "
                         "real run cannot change")
    if scenario.link.tx_complete > 0:
        # realnet's loopback and TUN devices report a packet sent as soon as it is queued,
        # so the device-queue shadow that autocorking looks at (tcp_should_autocork) never
        # lasts long enough to hold a write: the kernel's merging is not reproducible here
        notes.append("the link models a device queue (tx_complete_us) that this machine's "
                     "loopback and TUN links do not have: their packets leave the queue at "
                     "once, so autocorking has nothing to wait for")
    return notes
