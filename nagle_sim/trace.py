"""The trace: what one run (simulated or real) did, in one format for every view.

Owns: the `Trace` record types and the `nagle-sim-trace/1` JSON format (docs/trace.md).
Times are integer µs inside, milliseconds (3 decimals) in JSON, counted from the client's
SYN leaving. Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model.events import (
    KIND_NAME,
    REASON_CODE,
    REASON_TEXT,
    TIMER_NAME,
    Micros,
    Side,
    TraceEvent,
)

FORMAT = "nagle-sim-trace/1"


class TraceError(ValueError):
    """A trace file that cannot be read. ``str(err)`` is a one-line message."""


def _ms(us: int | None) -> float | None:
    return None if us is None else round(us / 1000, 3)


def _us(value: Any, where: str) -> Micros:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceError(f"{where}: expected a number of milliseconds, got {value!r}")
    return Micros(round(value * 1000))


@dataclass(slots=True, kw_only=True)
class SegmentRecord:
    t: Micros
    src: Side
    seq: int
    ack: int
    length: int
    flags: str
    window: int = 0
    arrive: Micros | None = None
    why: str = ""
    code: str = ""

    @property
    def dst(self) -> Side:
        return self.src.peer

    def label(self) -> str:
        flags = self.flags.replace("A", ".") or "."
        if self.length:
            return f"{flags} {self.seq}:{self.seq + self.length}({self.length})"
        return f"{flags} ack {self.ack}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_ms": _ms(self.t), "from": self.src.value, "seq": self.seq,
                               "ack": self.ack, "len": self.length, "flags": self.flags,
                               "win": self.window}
        if self.arrive is not None:
            out["arrive_ms"] = _ms(self.arrive)
        if self.why:
            out["why"] = self.why
            out["code"] = self.code
        return out


@dataclass(slots=True, kw_only=True)
class OpRecord:
    side: Side
    op: str
    arg: str
    start: Micros
    end: Micros | None
    line: int = 0
    iteration: tuple[int, ...] = ()
    loop: int = 0
    """Which top-level ``repeat`` the op ran in (its position in the script, 1-based; 0:
    none); tells loops apart."""
    result: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"side": self.side.value, "op": self.op, "arg": self.arg,
                               "start_ms": _ms(self.start), "end_ms": _ms(self.end)}
        if self.line:
            out["line"] = self.line
        if self.iteration:
            out["iter"] = list(self.iteration)
            out["loop"] = self.loop
        if self.result is not None:
            out["result"] = self.result
        return out


@dataclass(slots=True, kw_only=True)
class EventRecord:
    t: Micros
    side: Side
    kind: str
    code: str
    reason: str
    detail: str = ""
    timer: str | None = None
    deadline: Micros | None = None
    data: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_model(cls, e: TraceEvent) -> EventRecord:
        return cls(t=e.at, side=e.side, kind=KIND_NAME[e.kind], code=REASON_CODE[e.reason],
                   reason=REASON_TEXT[e.reason], detail=e.detail,
                   timer=TIMER_NAME[e.timer] if e.timer else None, deadline=e.deadline,
                   data=e.data)

    def text(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_ms": _ms(self.t), "side": self.side.value, "kind": self.kind,
                               "code": self.code, "reason": self.reason}
        if self.detail:
            out["detail"] = self.detail
        if self.timer:
            out["timer"] = self.timer
        if self.deadline is not None:
            out["deadline_ms"] = _ms(self.deadline)
        if self.data:
            out["data"] = self.data
        return out


@dataclass(slots=True, kw_only=True)
class Trace:
    source: str                      # "sim" or "realnet"
    title: str
    segments: list[SegmentRecord] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    outcome: str = "ok"              # "ok", "deadlock", "error", "limit"
    message: str = ""

    @property
    def end(self) -> Micros:
        times = [s.t for s in self.segments] + [o.end or o.start for o in self.ops]
        return Micros(max(times, default=0))

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "source": self.source, "title": self.title,
                "outcome": self.outcome, "message": self.message, "meta": self.meta,
                "segments": [s.to_json() for s in self.segments],
                "ops": [o.to_json() for o in self.ops],
                "events": [e.to_json() for e in self.events]}

    def dumps(self, indent: int | None = None) -> str:
        return json.dumps(self.to_json(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, doc: Any, where: str = "<trace>") -> Trace:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise TraceError(f"{where}: not a {FORMAT} trace")
        try:
            trace = cls(source=str(doc.get("source", "?")), title=str(doc.get("title", "")),
                        meta=dict(doc.get("meta", {})), outcome=str(doc.get("outcome", "ok")),
                        message=str(doc.get("message", "")))
            for i, s in enumerate(doc.get("segments", [])):
                at = f"{where}: segments[{i}]"
                trace.segments.append(SegmentRecord(
                    t=_us(s["t_ms"], at), src=Side(s["from"]), seq=int(s["seq"]),
                    ack=int(s["ack"]), length=int(s["len"]), flags=str(s["flags"]),
                    window=int(s.get("win", 0)),
                    arrive=_us(s["arrive_ms"], at) if s.get("arrive_ms") is not None else None,
                    why=str(s.get("why", "")), code=str(s.get("code", ""))))
            for i, o in enumerate(doc.get("ops", [])):
                at = f"{where}: ops[{i}]"
                trace.ops.append(OpRecord(
                    side=Side(o["side"]), op=str(o["op"]), arg=str(o.get("arg", "")),
                    start=_us(o["start_ms"], at),
                    end=_us(o["end_ms"], at) if o.get("end_ms") is not None else None,
                    line=int(o.get("line", 0)), iteration=tuple(o.get("iter", ())),
                    loop=int(o.get("loop", 0)), result=o.get("result")))
            for i, e in enumerate(doc.get("events", [])):
                at = f"{where}: events[{i}]"
                trace.events.append(EventRecord(
                    t=_us(e["t_ms"], at), side=Side(e["side"]), kind=str(e["kind"]),
                    code=str(e.get("code", "")), reason=str(e.get("reason", "")),
                    detail=str(e.get("detail", "")), timer=e.get("timer"),
                    deadline=_us(e["deadline_ms"], at) if e.get("deadline_ms") is not None
                    else None, data=dict(e.get("data", {}))))
        except (KeyError, ValueError, TypeError) as exc:
            if isinstance(exc, TraceError):
                raise
            raise TraceError(f"{where}: malformed trace: {exc!r}") from None
        return trace

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        p = Path(path)
        try:
            doc = json.loads(p.read_text("utf-8"))
        except FileNotFoundError:
            raise TraceError(f"{p}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"{p}: cannot read: {exc}") from None
        except json.JSONDecodeError as exc:
            raise TraceError(f"{p}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        return cls.from_json(doc, str(p))
