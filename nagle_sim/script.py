"""The script walker both executors share: what a side's script does, in trace words.

Owns: the steps of a script in execution order (statement, op name and argument, line,
loop path and loop number), the op names of the handshake, the one-line messages every
executor writes (end of stream on read, a call after close, deadlock, run limit) and the
trace meta both executors start from. The simulator (`nagle_sim.sim.driver`) and the real
runner (`realnet`) only execute steps; they never name them. Imports only the scenario,
the trace and the model's vocabulary; must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

from .model.events import Side
from .scenario import Scenario, Statement, describe, flatten, outermost_loops


class Step:
    """One statement as executed: where it comes from and how its op record reads."""

    __slots__ = ("stmt", "op", "arg", "line", "iteration", "loop")

    # A plain class, not a NamedTuple: compiled (setup.py), it is built natively; a
    # NamedTuple's constructor stays interpreted code, and a big run builds 200,000 steps.
    def __init__(self, stmt: Statement, op: str, arg: str, line: int,
                 iteration: tuple[int, ...], loop: int) -> None:
        self.stmt = stmt
        self.op = op
        self.arg = arg
        self.line = line
        self.iteration = iteration
        """Indexes of the enclosing ``repeat`` loops, outermost first."""
        self.loop = loop
        """Number of the outermost top-level ``repeat`` (0: none)."""

    def __repr__(self) -> str:
        return (f"Step(op={self.op!r}, arg={self.arg!r}, line={self.line}, "
                f"iteration={self.iteration}, loop={self.loop})")


def steps(script: tuple[Statement, ...]) -> Iterator[Step]:
    """The statements of ``script`` in execution order (loops expanded lazily)."""
    loops = outermost_loops(script)
    # what a statement's records say, worked out once per statement, not once per run of
    # it (a loop runs the same few statements thousands of times)
    described: dict[int, tuple[str, str, int]] = {}
    for stmt, path in flatten(script):
        known = described.get(id(stmt))
        if known is None:
            op, arg = describe(stmt)
            known = described[id(stmt)] = (op, arg, loops[id(stmt)])
        yield Step(stmt, known[0], known[1], stmt.line, path, known[2])


HANDSHAKE_OPS: Final = frozenset({"connect", "accept"})
HANDSHAKE_WAIT: Final = "the handshake"


def handshake_op(side: Side) -> str:
    """The op that opens a side's record: the client connects, the server accepts."""
    return "connect" if side is Side.CLIENT else "accept"


def read_wait(remaining: int, total: int) -> str:
    """What a blocked read waits for (a deadlock message's words)."""
    return f"{remaining} more of {total} bytes"


def eof_result(got: int) -> str:
    """The result of a read that hit the end of the stream."""
    return f"eof after {got} B"


def eof_error(side: Side, size: int, got: int) -> str:
    """Why a read failed at the end of the stream (after the ``where: side `` prefix)."""
    return (f"read {size} hit end of stream after {got} B: the {side.peer.value} closed the "
            "connection")


def after_close(op: str) -> str:
    """Why a call after ``close`` failed (after the ``where: side `` prefix)."""
    return f"{op} after close"


def side_error(source: str, line: int, side: Side, what: str) -> str:
    """A side's failure as one line: ``source:line: side what``."""
    return f"{source}:{line}: {side.value} {what}"


def deadlock_message(source: str, waits: Iterable[tuple[Side, tuple[str, int] | None]]
                     ) -> str:
    """One line naming what each side waits for (``None``: the side finished)."""
    parts = []
    for side, wait in waits:
        if wait is None:
            parts.append(f"{side.value} finished")
            continue
        what, line = wait
        where = f" (line {line})" if line else ""
        parts.append(f"{side.value} waits for {what}{where}")
    return f"{source}: deadlock: {', '.join(parts)}"


def limit_message(source: str, what: str) -> str:
    """A run stopped at one of its bounds (``what``: which one)."""
    return f"{source}: stopped: {what}"


def trace_meta(scenario: Scenario, **host: Any) -> dict[str, Any]:
    """The meta every trace of ``scenario`` starts with; ``host`` facts (e.g. the kernel)
    follow the link's, before the sides' profiles and options."""
    s = scenario
    return {"scenario": s.source, "mss": s.link.mss,
            "to_server_delay_ms": s.link.to_server_delay / 1000,
            "to_client_delay_ms": s.link.to_client_delay / 1000,
            **host,
            **{f"{side.value}_profile": s.side(side).profile.name for side in Side},
            # per-side changes to the profile (`congestion`, `tune`), so that a saved trace
            # names the model it ran, not only the profile it started from
            **{f"{side.value}_tune": dict(s.side(side).tune) for side in Side
               if s.side(side).tune},
            **{f"{side.value}_options": {"nodelay": s.side(side).options.nodelay,
                                         "cork": s.side(side).options.cork}
               for side in Side}}
