"""A parser for packetdrill's script language (as used by google/packetdrill and the
kernel's tools/testing/selftests/net/packetdrill), written from its documented grammar.

Owns: the tokenizer and the recursive-descent grammar that turn a ``.pkt`` file into a
`Script`. Every syntax problem is a `DrillSyntaxError` whose text is one line,
``FILE:LINE: what is wrong``. Input is bounded: file size, token count, events and
expression nesting. Imports only `nagle_sim.scenario` (its error type); knows nothing of
the model.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from ..scenario import ScenarioError, read_text
from .script import (
    Code,
    Command,
    Ellipsis_,
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

MAX_BYTES = 1 << 20          # a script larger than 1 MiB is not a test script
MAX_TOKENS = 200_000
MAX_DEPTH = 32               # nesting of [ ] and { } in syscall arguments
MAX_SECONDS = 3600           # event times beyond an hour are refused


class DrillSyntaxError(ScenarioError):
    """A script that cannot be parsed; ``str(err)`` is ``FILE:LINE: message`` (bad input,
    like any scenario error: the CLI prints it and exits 2)."""


class DrillUnsupported(DrillSyntaxError):
    """Well-formed packetdrill that is outside a TCP model (UDP, ICMP, encapsulation)."""


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*.*?\*/)
  | (?P<backtick>`(?:\\.|[^`\\])*`)
  | (?P<code>%\{.*?\}%)
  | (?P<option>--[A-Za-z_][A-Za-z0-9_]*(?:=[^\s]*)?)
  | (?P<ellipsis>\.\.\.)
  | (?P<hex>0x[0-9A-Fa-f]+)
  | (?P<num>\d+\.(?!\.)\d*|\.\d+|\d+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[<>()\[\]{},:=+*~|\-.;!&/])
""", re.VERBOSE | re.DOTALL)


class _Tok:
    __slots__ = ("kind", "text", "line", "line_start")

    def __init__(self, kind: str, text: str, line: int, line_start: bool) -> None:
        self.kind = kind
        self.text = text
        self.line = line
        self.line_start = line_start   # first token on its line

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text!r}@{self.line}"


def _tokenize(text: str, where: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, line, fresh = 0, 1, True
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            snippet = text[pos:pos + 10].split("\n")[0]
            raise DrillSyntaxError(f"{where}:{line}: unexpected text {snippet!r}")
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "nl":
            fresh = True
        elif kind not in ("ws", "lcomment", "bcomment"):
            out.append(_Tok(kind, value, line, fresh))
            fresh = False
            if len(out) > MAX_TOKENS:
                raise DrillSyntaxError(f"{where}:{line}: more than {MAX_TOKENS:,} tokens")
        line += value.count("\n")
        if kind in ("backtick", "code") and "\n" in value:
            fresh = False      # what follows the closing mark shares its line
        elif kind == "bcomment" and "\n" in value:
            fresh = True       # a comment over several lines ends a line
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[_Tok], where: str) -> None:
        self.toks = tokens
        self.i = 0
        self.where = where

    # ------------------------------------------------------------ plumbing
    def error(self, message: str, tok: _Tok | None = None) -> DrillSyntaxError:
        tok = tok or self.peek() or (self.toks[-1] if self.toks else None)
        line = tok.line if tok else 1
        return DrillSyntaxError(f"{self.where}:{line}: {message}")

    def peek(self, ahead: int = 0) -> _Tok | None:
        j = self.i + ahead
        return self.toks[j] if j < len(self.toks) else None

    def at(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok.kind in ("punct", "word", "ellipsis") and tok.text == text

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of script")
        self.i += 1
        return tok

    def expect(self, text: str, what: str = "") -> _Tok:
        tok = self.peek()
        if tok is None or tok.text != text:
            found = "the end of the script" if tok is None else repr(tok.text)
            raise self.error(f"expected {what or repr(text)}, found {found}", tok)
        self.i += 1
        return tok

    def integer(self, what: str) -> int:
        if self.peek() is None:
            raise self.error(f"expected {what}, found the end of the script")
        tok = self.take()
        if tok.kind == "hex":
            return int(tok.text, 16)
        if tok.kind != "num" or not tok.text.isdigit() or len(tok.text) > 19:
            raise self.error(f"expected {what} (a whole number), found {tok.text!r}", tok)
        return int(tok.text)

    # ------------------------------------------------------------ script
    def script(self, path: str) -> Script:
        options: dict[str, str] = {}
        while (tok := self.peek()) is not None and tok.kind == "option":
            name, _, value = tok.text[2:].partition("=")
            options[name] = value
            self.i += 1
        init: list[Command] = []
        events: list[Event] = []
        while (tok := self.peek()) is not None:
            if tok.kind == "backtick" and not events:
                init.append(Command(tok.text[1:-1].strip()))
                self.i += 1
                continue
            if tok.kind == "backtick" and self.peek(1) is None:
                self.i += 1            # a cleanup command at the very end
                continue
            events.append(self.event())
        return Script(path=path, options=options, init_commands=tuple(init),
                      events=tuple(events))

    def event(self) -> Event:
        first = self.peek()
        assert first is not None
        if not first.line_start:
            raise self.error(f"an event must start a line with its time, found "
                             f"{first.text!r}", first)
        when = self.event_time()
        tok = self.peek()
        if tok is None:
            raise self.error("an event time without an event", first)
        if self.at("<") or self.at(">"):
            action: Packet | Syscall | Command | Code = self.packet()
        elif tok.kind == "backtick":
            self.i += 1
            action = Command(tok.text[1:-1].strip())
        elif tok.kind == "code":
            self.i += 1
            action = Code(tok.text[2:-2])
        else:
            end = None
            if tok.kind == "ellipsis":
                self.i += 1
                nxt = self.peek()
                if nxt is None or nxt.kind != "num":
                    # packetdrill's grammar: ELLIPSIS time, a plain number of seconds
                    raise self.error(f"expected a time in seconds after '...', found "
                                     f"{'nothing' if nxt is None else repr(nxt.text)}", nxt)
                end = EventTime(TimeKind.ABSOLUTE, self.seconds())
            action = self.syscall(end)
        loose = when.kind in (TimeKind.ANY, TimeKind.ABSOLUTE_RANGE, TimeKind.RELATIVE_RANGE)
        if loose and not (isinstance(action, Packet) and not action.inbound):
            raise self.error("'*' and time ranges are for outbound packets only", first)
        nxt = self.peek()
        if nxt is not None and not nxt.line_start:
            raise self.error(f"unexpected {nxt.text!r} after the event", nxt)
        return Event(line=first.line, time=when, action=action)

    def seconds(self) -> int:
        tok = self.take()
        if tok.kind != "num":
            raise self.error(f"expected a time in seconds, found {tok.text!r}", tok)
        try:
            value = Decimal(tok.text)
        except InvalidOperation:
            raise self.error(f"bad time {tok.text!r}", tok) from None
        if value > MAX_SECONDS:
            raise self.error(f"time {tok.text} s is beyond {MAX_SECONDS} s", tok)
        return int(value * 1_000_000)

    def event_time(self) -> EventTime:
        if self.at("*"):
            self.i += 1
            return EventTime(TimeKind.ANY)
        if self.at("+"):
            self.i += 1
            start = self.seconds()
            if self.at("~"):
                self.i += 1
                self.expect("+", "'+' (a relative range is +a~+b)")
                end = self.seconds()
                if end < start:
                    raise self.error("time range is backwards")
                return EventTime(TimeKind.RELATIVE_RANGE, start, end)
            return EventTime(TimeKind.RELATIVE, start)
        tok = self.peek()
        if tok is None or tok.kind != "num":
            raise self.error(f"expected an event time (0.1, +0.1, * or a~b), found "
                             f"{'nothing' if tok is None else repr(tok.text)}", tok)
        start = self.seconds()
        if self.at("~"):
            self.i += 1
            end = self.seconds()
            if end < start:
                raise self.error("time range is backwards")
            return EventTime(TimeKind.ABSOLUTE_RANGE, start, end)
        return EventTime(TimeKind.ABSOLUTE, start)

    # ------------------------------------------------------------ packets
    def packet(self) -> Packet:
        inbound = self.take().text == "<"
        other: list[str] = []
        if self.at("(") or self.at("["):
            close = ")" if self.take().text == "(" else "]"
            words = []
            while not self.at(close):
                words.append(self.take().text)
            self.i += 1
            other.append("IP header fields " + " ".join(words))
        flags = ""
        tok = self.peek()
        if tok is not None and tok.kind == "word" and tok.text.upper() in ("UDP", "ICMP"):
            raise DrillUnsupported(f"{self.where}:{tok.line}: {tok.text} packets are outside "
                                   "a TCP model")
        if tok is not None and tok.kind == "word" and tok.text == "encap":
            raise DrillUnsupported(f"{self.where}:{tok.line}: encapsulated packets are "
                                   "outside a TCP model")
        if tok is not None and tok.kind == "word":
            if not re.fullmatch(r"[SFRPEWUA]+", tok.text):
                raise self.error(f"unknown TCP flags {tok.text!r}", tok)
            flags = tok.text
            self.i += 1
            if self.at("."):
                flags += "."
                self.i += 1
        elif self.at("."):
            flags = "."
            self.i += 1
        elif self.at("-"):
            self.i += 1
        else:
            raise self.error("expected TCP flags (S, S., P., F., ., R, - …)", tok)
        seq = self.integer("a sequence number")
        self.expect(":", "':' in start:end(length)")
        end = self.integer("an end sequence number")
        self.expect("(", "'(' in start:end(length)")
        length = self.integer("a payload length")
        self.expect(")")
        if end != seq + length or seq >= 1 << 32 or length > 0xFFFF:
            raise self.error(f"inconsistent sequence numbers {seq}:{end}({length})")
        ack = window = None
        while (tok := self.peek()) is not None and not tok.line_start and tok.kind == "word":
            if tok.text == "ack":
                self.i += 1
                ack = self.integer("an ACK number")
            elif tok.text == "win":
                self.i += 1
                window = self.integer("a window")
            elif tok.text == "urg":
                self.i += 1
                other.append(f"urgent pointer {self.integer('an urgent pointer')}")
            else:
                raise self.error(f"unexpected {tok.text!r} in a packet", tok)
        options: tuple[TcpOption, ...] | None = ()
        if (tok := self.peek()) is not None and not tok.line_start and tok.text == "<":
            self.i += 1
            if self.at("..."):
                self.i += 1
                options = None
            else:
                options = self.tcp_options()
            self.expect(">", "'>' closing the TCP options")
        return Packet(inbound=inbound, flags=flags, seq=seq, end_seq=end, length=length,
                      ack=ack, window=window, options=options, other=tuple(other))

    def tcp_options(self) -> tuple[TcpOption, ...]:
        out: list[TcpOption] = []
        while True:
            tok = self.take()
            name = tok.text
            if name in ("nop", "eol", "sackOK"):
                out.append(TcpOption(name))
            elif name in ("mss", "wscale"):
                out.append(TcpOption(name, (self.integer(f"the {name} value"),)))
            elif name == "TS":
                self.expect("val")
                val = self.integer("a timestamp value")
                self.expect("ecr")
                out.append(TcpOption("TS", (val, self.integer("a timestamp echo"))))
            elif name == "sack":
                blocks: list[int] = []
                while (t := self.peek()) is not None and t.kind == "num":
                    blocks.append(self.integer("a SACK block start"))
                    self.expect(":")
                    blocks.append(self.integer("a SACK block end"))
                out.append(TcpOption("sack", tuple(blocks)))
            elif tok.kind == "word":
                # fast open, md5, experimental options: kept by name, not modelled
                values = []
                while not (self.at(",") or self.at(">")):
                    values.append(self.take().text)
                out.append(TcpOption(name + (" " + " ".join(values) if values else "")))
            else:
                raise self.error(f"unexpected {name!r} in TCP options", tok)
            if self.at(","):
                self.i += 1
                continue
            return tuple(out)

    # ------------------------------------------------------------ system calls
    def syscall(self, end: EventTime | None) -> Syscall:
        tok = self.take()
        if tok.kind != "word":
            raise self.error(f"expected a packet (< or >), a system call, a `command` or "
                             f"%{{ code }}%, found {tok.text!r}", tok)
        name = tok.text
        self.expect("(", f"'(' after {name}")
        args: list[Expr] = []
        if not self.at(")"):
            args.append(self.expr(0))
            while self.at(","):
                self.i += 1
                args.append(self.expr(0))
        self.expect(")", f"')' closing {name}(…)")
        self.expect("=", f"'= result' after {name}(…)")
        result = self.expr(0)
        errno = None
        if (t := self.peek()) is not None and not t.line_start and re.fullmatch(
                r"E[A-Z0-9]+", t.text):
            errno = t.text
            self.i += 1
        if (t := self.peek()) is not None and not t.line_start and t.text == "(":
            self.skip_note()
        return Syscall(name=name, args=tuple(args), result=result, errno=errno, end_time=end)

    def skip_note(self) -> None:
        """``(Operation now in progress)`` after an errno: free text, balanced parens."""
        depth = 0
        while (t := self.peek()) is not None:
            self.i += 1
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                if depth == 0:
                    return
        raise self.error("unclosed '(' in a note")

    def expr(self, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise self.error(f"arguments nested deeper than {MAX_DEPTH}")
        tok = self.take()
        if tok.kind == "ellipsis":
            return Ellipsis_()
        if tok.text == "-" and (n := self.peek()) is not None and n.kind in ("num", "hex"):
            return Int(-self.integer("a number"))
        if tok.kind == "hex":
            return Int(int(tok.text, 16))
        if tok.kind == "num":
            if not tok.text.isdigit() or len(tok.text) > 19:
                raise self.error(f"expected a whole number, found {tok.text!r}", tok)
            return Int(int(tok.text))
        if tok.kind == "string":
            return Str(tok.text[1:-1])
        if tok.kind == "word":
            if self.at("("):                   # htons(8080), inet_addr("…"): not checked
                self.i += 1
                depth_here = 1
                while depth_here:
                    t = self.take()
                    depth_here += {"(": 1, ")": -1}.get(t.text, 0)
                return Word((tok.text + "(…)",))
            names = [tok.text]
            while self.at("|"):
                self.i += 1
                t = self.take()
                if t.kind not in ("word", "num", "hex"):
                    raise self.error(f"expected a flag after '|', found {t.text!r}", t)
                names.append(t.text)
            return Word(tuple(names))
        if tok.text == "[":
            items: list[Expr] = []
            if not self.at("]"):
                items.append(self.expr(depth + 1))
                while self.at(","):
                    self.i += 1
                    items.append(self.expr(depth + 1))
            self.expect("]", "']' closing a list")
            return List(tuple(items))
        if tok.text == "{":
            fields: list[tuple[str, Expr]] = []
            while not self.at("}"):
                fields.append(self.field(depth + 1))
                if self.at(","):
                    self.i += 1
                elif not self.at("}"):
                    raise self.error("expected ',' or '}' in a structure")
            self.i += 1
            return Struct(tuple(fields))
        raise self.error(f"unexpected {tok.text!r} in an argument", tok)

    def field(self, depth: int) -> tuple[str, Expr]:
        tok = self.peek()
        if tok is not None and tok.kind == "word" and (self.at("=", 1) or self.at("(", 1)):
            # name=value, or name(count)=value as in msg_iov(1)=[…]
            j = 1
            if self.at("(", 1):
                j = 2
                while (t := self.peek(j)) is not None and t.text != ")":
                    j += 1
                j += 1
            if self.at("=", j):
                name = tok.text
                self.i += j + 1
                return name, self.expr(depth)
        return "", self.expr(depth)


def parse(text: str, where: str = "<script>") -> Script:
    """Parse packetdrill script text; raise `DrillSyntaxError` (one line) if it is not one."""
    if len(text) > MAX_BYTES:
        raise DrillSyntaxError(f"{where}: larger than {MAX_BYTES // 1024} KiB; not a script")
    return _Parser(_tokenize(text, where), where).script(where)


def load(path: str | Path) -> Script:
    """Read and parse a ``.pkt`` file: only a regular file (a FIFO with no writer would
    hang), at most `MAX_BYTES`, UTF-8 — read as scenario files are."""
    try:
        text = read_text(path, MAX_BYTES, what="a packetdrill script")
    except ScenarioError as exc:
        raise DrillSyntaxError(str(exc)) from None
    return parse(text, str(path))
