"""A parsed packetdrill script: times, packets, system calls, commands and code blocks.

Owns the syntax tree that `parser` builds and `runner` plays. Plain frozen data, standard
library only; nothing here knows about the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class TimeKind(Enum):
    ABSOLUTE = "absolute"          # 0.100
    RELATIVE = "relative"          # +0.1
    ANY = "any"                    # *   (outbound packets only)
    ABSOLUTE_RANGE = "abs-range"   # 0.2~0.25
    RELATIVE_RANGE = "rel-range"   # +0.2~+0.25


@dataclass(frozen=True, slots=True)
class EventTime:
    kind: TimeKind
    start_us: int = 0
    end_us: int | None = None      # ranges only


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True)
class Ellipsis_:
    """``...``: any value (an argument packetdrill fills in, or a result not checked)."""


@dataclass(frozen=True, slots=True)
class Int:
    value: int


@dataclass(frozen=True, slots=True)
class Word:
    """A symbolic constant (``SOL_TCP``, ``MSG_MORE``) or several joined by ``|``."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Str:
    value: str


@dataclass(frozen=True, slots=True)
class List:
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Struct:
    """``{a=1, b=[...]}``; a field without ``name=`` has name "" (``{..., 40}``)."""

    fields: tuple[tuple[str, Expr], ...]


Expr = Ellipsis_ | Int | Word | Str | List | Struct


# ---------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class TcpOption:
    kind: str                      # "mss", "wscale", "sackOK", "nop", "TS", "sack", "eol", …
    values: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Packet:
    inbound: bool
    flags: str                     # TCP flag letters as written: "S.", "P.", "F.", ".", "R"
    seq: int
    end_seq: int
    length: int
    ack: int | None = None
    window: int | None = None
    options: tuple[TcpOption, ...] | None = ()
    """None when written ``<...>`` (options not checked)."""
    other: tuple[str, ...] = ()
    """Words the model cannot honour (ECN marks, urg, encapsulation): make it unsupported."""


@dataclass(frozen=True, slots=True)
class Syscall:
    name: str
    args: tuple[Expr, ...]
    result: Expr
    errno: str | None = None
    end_time: EventTime | None = None
    """For a blocking call written ``+0...0.1 read(…)``: when it is expected to return."""


@dataclass(frozen=True, slots=True)
class Command:
    """A backtick shell command (``sysctl …`` lines are understood, others ignored)."""

    text: str


@dataclass(frozen=True, slots=True)
class Code:
    """A ``%{ … }%`` block: Python assertions over ``tcpi_*`` fields."""

    text: str


Action = Packet | Syscall | Command | Code


@dataclass(frozen=True, slots=True)
class Event:
    line: int
    time: EventTime
    action: Action


@dataclass(frozen=True, slots=True)
class Script:
    path: str
    options: dict[str, str] = field(default_factory=dict)
    init_commands: tuple[Command, ...] = ()
    events: tuple[Event, ...] = ()
