"""One side's records, as a side process streams them and the parent reads them back.

Owns: `OpLog` (one executed statement), `InfoLog` (a TCP_INFO snapshot after an op),
`SideLog` (everything one side recorded) and `LogReader`, which turns the record stream
back into a `SideLog` checking every record: the same records travel over the remote
protocol, from another host, so nothing is trusted. Must not import simpy, textual or rich.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nagle_sim.scenario.script import MAX_SIZE, MAX_WRITEV_PARTS
from nagle_sim.scenario.steps import HANDSHAKE_OPS

OP_NAMES = HANDSHAKE_OPS | {"write", "writev", "read", "sleep", "set", "get", "shutdown",
                            "close"}
MAX_ARG_CHARS = MAX_WRITEV_PARTS * (len(str(MAX_SIZE)) + 1)
"""The longest op argument the loader lets a script have: a writev of `MAX_WRITEV_PARTS`
sizes of `MAX_SIZE`, space-separated (11,264 characters). A fixed 10,000 refused a writev
the loader accepts and the model runs (issue 29.9)."""
MAX_LOOP_DEPTH = 64


def _int_field(value: Any, what: str) -> int:
    if type(value) is not int:       # bool is an int subclass; refuse it too
        raise ValueError(f"{what} is not an integer")
    return value


@dataclass(slots=True)
class OpLog:
    """One executed statement, times in perf_counter_ns (absolute, this process)."""

    op: str
    arg: str
    start_ns: int
    end_ns: int | None
    line: int = 0
    iteration: tuple[int, ...] = ()
    result: str | None = None
    loop: int = 0

    def to_rec(self) -> list[Any]:
        """The compact record streamed by a side (and over the remote protocol)."""
        return [self.op, self.arg, self.start_ns, self.end_ns, self.line,
                list(self.iteration), self.result, self.loop]

    @classmethod
    def from_rec(cls, rec: Any) -> OpLog:
        """Parse a record; any malformed field raises ValueError (it may come off the net)."""
        if not isinstance(rec, list) or len(rec) != 8:
            raise ValueError("an op record is not a list of 8 fields")
        op, arg, start, end, line, iteration, result, loop = rec
        if not isinstance(op, str) or op not in OP_NAMES:
            raise ValueError(f"unknown op {str(op)[:20]!r}")
        if not isinstance(arg, str) or len(arg) > MAX_ARG_CHARS:
            raise ValueError("an op argument is not a short string")
        if not isinstance(iteration, list) or len(iteration) > MAX_LOOP_DEPTH:
            raise ValueError("an op's loop path is not a short list")
        if result is not None and (not isinstance(result, str) or len(result) > MAX_ARG_CHARS):
            raise ValueError("an op result is not a short string")
        return cls(op=op, arg=arg, start_ns=_int_field(start, "start_ns"),
                   end_ns=None if end is None else _int_field(end, "end_ns"),
                   line=_int_field(line, "line"),
                   iteration=tuple(_int_field(i, "iteration") for i in iteration),
                   result=result, loop=_int_field(loop, "loop"))


@dataclass(slots=True)
class InfoLog:
    """A TCP_INFO snapshot taken right after an op (``op_index`` into the side's ops)."""

    t_ns: int
    op_index: int
    data: dict[str, int]

    def to_rec(self, keys: tuple[str, ...]) -> list[Any]:
        return [self.t_ns, self.op_index, [self.data[k] for k in keys]]

    @classmethod
    def from_rec(cls, rec: Any, keys: tuple[str, ...]) -> InfoLog:
        if not isinstance(rec, list) or len(rec) != 3 or not isinstance(rec[2], list) \
                or len(rec[2]) != len(keys):
            raise ValueError("a TCP_INFO record does not match its field names")
        return cls(t_ns=_int_field(rec[0], "t_ns"), op_index=_int_field(rec[1], "op"),
                   data={k: _int_field(v, k) for k, v in zip(keys, rec[2], strict=True)})


@dataclass(slots=True)
class SideLog:
    """Everything one side recorded."""

    ops: list[OpLog] = field(default_factory=list)
    infos: list[InfoLog] = field(default_factory=list)
    error: str | None = None
    done: bool = False

    rt_rests: int = 0
    """How often the side's real-time budget ran out (`RtGovernor`)."""

    rt_refused: bool = False
    """The side asked for SCHED_FIFO and the kernel refused it (e.g. a cgroup without
    real-time runtime): it ran at normal priority throughout."""

    def end_rec(self) -> dict[str, Any]:
        return {"error": self.error, "done": self.done, "rt_rests": self.rt_rests,
                "rt_refused": self.rt_refused}


class LogReader:
    """Turns a side's record stream back into a `SideLog`, checking every record.

    Records are JSON values, one per line: ``{"op": [...]}`` (`OpLog.to_rec`),
    ``{"keys": [...]}`` (TCP_INFO field names, once), ``{"info": [...]}`` and, last,
    ``{"end": {"error": ..., "done": ...}}``. The same records travel over the remote
    protocol, so the reader bounds what it accepts (``max_ops``)."""

    def __init__(self, max_ops: int | None = None) -> None:
        self.log = SideLog()
        self.keys: tuple[str, ...] = ()
        self.ended = False
        self.max_ops = max_ops

    def add(self, rec: Any) -> None:
        if not isinstance(rec, dict) or len(rec) != 1:
            raise ValueError("a log record is not a one-key object")
        (kind, value), = rec.items()
        if self.ended:
            raise ValueError("a log record after the end record")
        if kind == "op":
            if self.max_ops is not None and len(self.log.ops) >= self.max_ops:
                raise ValueError(f"more than {self.max_ops} op records")
            self.log.ops.append(OpLog.from_rec(value))
        elif kind == "info":
            if self.max_ops is not None and len(self.log.infos) > self.max_ops:
                raise ValueError(f"more than {self.max_ops} TCP_INFO records")
            self.log.infos.append(InfoLog.from_rec(value, self.keys))
        elif kind == "keys":
            if not isinstance(value, list) or len(value) > 100 or \
                    not all(isinstance(k, str) and len(k) < 40 for k in value):
                raise ValueError("TCP_INFO field names are not a short list of names")
            self.keys = tuple(value)
        elif kind == "end":
            if not isinstance(value, dict):
                raise ValueError("the end record is not an object")
            error = value.get("error")
            if error is not None and not isinstance(error, str):
                raise ValueError("the end record's error is not a string")
            self.log.error = None if error is None else error[:2000]
            self.log.done = value.get("done") is True
            rests = value.get("rt_rests", 0)
            self.log.rt_rests = rests if type(rests) is int else 0
            self.log.rt_refused = value.get("rt_refused") is True
            self.ended = True
        else:
            raise ValueError(f"unknown log record {str(kind)[:20]!r}")
