"""The script language: a side's script text in, its statements out.

Owns: the tokenizer and parser of scripts (``write N [more]``, ``writev A B …``, ``read
N``, ``sleep 15ms``, ``set/get OPTION``, ``repeat N { … }``, ``close``; docs/scenarios.md),
durations (`DURATION`, in `UNIT_US`), and the script's bounds: `MAX_STATEMENTS` run (loops
counted), `MAX_NESTING` deep, `MAX_WRITEV_PARTS` per writev, `files.MAX_FILE_BYTES` of text.
The parser keeps ``repeat`` blocks on an explicit stack: no input can recurse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from ..model.config import TIMING_OPTIONS
from ..model.events import Micros
from .errors import ScenarioError, clip
from .files import MAX_FILE_BYTES
from .types import (
    OPTIONS,
    SHUTDOWN_HOWS,
    VALUE_OPTIONS,
    Close,
    GetOpt,
    Read,
    Repeat,
    SetOpt,
    SetTiming,
    SetValue,
    Shutdown,
    Sleep,
    Statement,
    Write,
    Writev,
)

_TOKEN: Final = re.compile(r"\s*(?:(?P<brace>[{};])|(?P<word>[^\s{};]+))")
DURATION: Final = re.compile(r"^(?P<num>[0-9]{1,12}(?:\.[0-9]{1,9})?)(?P<unit>us|ms|s)$")
UNIT_US: Final = {"us": 1, "ms": 1000, "s": 1_000_000}
MAX_STATEMENTS: Final = 10_000_000
"""A script may run at most this many statements, counting every loop iteration as at
least one (so ``repeat 1000000000 { }`` is refused, not spun). A statement makes a trace
record, so a run's memory is bounded by its record limit (the driver's); this bound is for
iterations that run nothing (``repeat 10000000 { repeat 1 { } }``), which the walker spins
through: 10 million take about 0.9 s compiled and 7.5 s in the pure build, in constant
memory. Ten million leaves room for S3 at 100,000 messages (1.8 million statements)."""
MAX_NESTING: Final = 64
"""``repeat`` blocks nest at most this deep (TOML and JSON values likewise)."""
MAX_WRITEV_PARTS: Final = 1024
"""As Linux's IOV_MAX: the most buffers one ``writev`` takes."""
MAX_SIZE: Final = 1_000_000_000
"""The largest whole number a script takes: a write, writev part or read size, a repeat
count (a write of 1 GB)."""
MAX_SLEEP_US: Final = 10 * 86_400 * 1_000_000   # ten days: far beyond any run's time limit
_MAX_BUFFER: Final = 1 << 30
"""`set sndbuf` / `set notsent_lowat` take at most 1 GiB."""



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
            # the line that opened it is where the fix goes (the script's end was named)
            last = self.tokens[-1][1] if self.tokens else 0
            opened = open_blocks[-1][0]
            raise self.error(opened.line, "this 'repeat {' is never closed with '}' (the "
                                          f"script ends at line {last})")
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
            flags = [a.lower() for a in args[1:]]
            if not args or len(flags) > 2 or len(set(flags)) != len(flags) or any(
                    f not in ("more", "eor") for f in flags):
                raise self.error(line, "use 'write N', 'write N more', 'write N eor' or "
                                       "'write N more eor'")
            return Write(line, self.positive_int(args[0], line, "write size"),
                         more="more" in flags, eor="eor" in flags)
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
            if us > MAX_SLEEP_US:
                raise self.error(line, f"sleep {clip(args[0])} is longer than ten days")
            return Sleep(line, Micros(us))
        if verb == "set":
            return self.parse_set(args, line)
        if verb == "get":
            if len(args) != 1 or args[0].lower() not in OPTIONS:
                raise self.error(line, "use 'get nodelay|cork|quickack'")
            return GetOpt(line, args[0].lower())
        if verb == "close":
            if args:
                raise self.error(line, "'close' takes no arguments")
            return Close(line)
        if verb == "shutdown":
            if len(args) != 1 or args[0].lower() not in SHUTDOWN_HOWS:
                raise self.error(line, "use 'shutdown rd', 'shutdown wr' or 'shutdown rdwr'")
            return Shutdown(line, args[0].lower())
        raise self.error(line, f"unknown statement {clip(words[0])!r} (expected write, "
                               "writev, "
                               "read, sleep, set, get, repeat, shutdown or close)")

    def parse_set(self, args: list[str], line: int) -> Statement:
        """``set …``: a timing option (5ms), a sized one (8k, or user_timeout's time) or
        an on/off socket option."""
        if args and args[0].lower() in TIMING_OPTIONS:
            if len(args) != 2:
                raise self.error(line, f"use 'set {args[0].lower()} 5ms' (units us, ms, s)")
            us = self.duration(args[1], line)
            if us > MAX_SLEEP_US:
                raise self.error(line, f"set {args[0].lower()} {clip(args[1])} is too long")
            return SetTiming(line, args[0].lower(), Micros(us))
        if args and args[0].lower() in VALUE_OPTIONS:
            option = args[0].lower()
            if len(args) != 2:
                raise self.error(line, f"use 'set {option} "
                                       f"{'1s' if option == 'user_timeout' else '8k'}'")
            if option == "user_timeout":
                us = self.duration(args[1], line)
                if us > MAX_SLEEP_US:
                    raise self.error(line, f"set user_timeout {clip(args[1])} is too long")
                return SetValue(line, option, -(-us // 1000))
            return SetValue(line, option, self.size(args[1], line, f"set {option}"))
        if len(args) != 2 or args[0].lower() not in OPTIONS:
            raise self.error(line, "use 'set nodelay|cork|quickack on|off', "
                                   "'set delack_max|rto_min|user_timeout 5ms' or "
                                   "'set sndbuf|notsent_lowat 8k'")
        value = args[1].lower()
        if value not in ("on", "off", "1", "0", "true", "false"):
            raise self.error(line, f"bad value {clip(args[1])!r} for set: use on or off")
        return SetOpt(line, args[0].lower(), value in ("on", "1", "true"))

    def size(self, text: str, line: int, what: str) -> int:
        """A byte count such as 8192, 8k or 1m (k = 1024, m = 1048576)."""
        m = re.fullmatch(r"([0-9]{1,10})([km]?)", text.lower())
        if m is None:
            raise self.error(line, f"{what} must be a byte count such as 8192 or 8k, "
                                   f"got {clip(text)!r}")
        value = int(m.group(1)) * {"": 1, "k": 1024, "m": 1 << 20}[m.group(2)]
        if value > _MAX_BUFFER:
            raise self.error(line, f"{what} {clip(text)} is too large (at most 1 GiB)")
        return value

    def duration(self, text: str, line: int) -> int:
        """A duration such as 15ms, 250us or 1.5s, in whole µs."""
        m = DURATION.match(text.lower())
        if m is None:
            raise self.error(line, f"bad duration {clip(text)!r}: use e.g. 15ms, 250us, 1.5s")
        return round(float(m.group("num")) * UNIT_US[m.group("unit")])

    def positive_int(self, text: str, line: int, what: str, allow_zero: bool = False) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise self.error(line, f"{what} must be a whole number, got {clip(text)!r}")
        if len(text.lstrip("+-")) > 12:
            raise self.error(line, f"{what} {text[:16]}… is too large")
        value = int(text)
        if value < 0 or (value == 0 and not allow_zero):
            raise self.error(line, f"{what} must be {'≥ 0' if allow_zero else '> 0'}, "
                                   f"got {value}")
        if value > MAX_SIZE:
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
