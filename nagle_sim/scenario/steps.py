"""The script walker both executors share: what a side's script does, in trace words.

Owns: the steps of a script in execution order (statement, op name and argument, line,
loop path and loop number), the op names of the handshake, the one-line messages every
executor writes (end of stream on read, a call after close, deadlock, run limit) and the
trace meta both executors start from. The simulator (`nagle_sim.sim.driver`) and the real
runner (`realnet`) only execute steps; they never name them. Imports only the scenario's
types and the model's vocabulary; must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

from ..model.events import Side
from .types import Repeat, Scenario, Statement, describe, outermost_loops


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


class _Planned:
    """A statement of a loop body with its record's words, worked out once per statement,
    not once per run of it (a loop runs the same few statements thousands of times)."""

    __slots__ = ("stmt", "op", "arg", "line", "loop", "body", "count")

    def __init__(self, stmt: Statement, loop: int, live: set[int]) -> None:
        self.stmt = stmt
        self.op, self.arg = describe(stmt)
        self.line = stmt.line
        self.loop = loop
        self.body: tuple[Statement, ...] | None = None
        """None for a statement to run; for a loop, its body, or () for a loop that runs
        no statement at any depth (see `_live_loops`), which is passed over whole."""
        self.count = 0
        if isinstance(stmt, Repeat):
            runs = id(stmt) in live
            self.body = stmt.body if runs else ()
            self.count = stmt.count if runs else 0


class _Pass:
    """One loop being walked by `steps` (the script itself is a loop run once)."""

    __slots__ = ("plan", "next", "path", "iteration", "count", "outer")

    def __init__(self, plan: list[_Planned], count: int, outer: tuple[int, ...],
                 path: tuple[int, ...]) -> None:
        self.plan = plan
        self.next = 0                   # index of the next statement in this pass
        self.path = path                # the iteration path of this pass
        self.iteration = 0
        self.count = count
        self.outer = outer              # the enclosing loops' path


def _live_loops(script: tuple[Statement, ...]) -> set[int]:
    """``id()`` of each ``repeat`` of ``script`` that runs at least one statement: a count
    above 0 and, in its body, a statement or a loop that does. One pass, no recursion."""
    loops: list[Repeat] = []        # every loop, each before the loops inside it
    pending = list(script)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, Repeat):
            loops.append(stmt)
            pending.extend(stmt.body)
    live: set[int] = set()
    for loop in reversed(loops):    # inner loops first
        if loop.count and any(not isinstance(s, Repeat) or id(s) in live for s in loop.body):
            live.add(id(loop))
    return live


def steps(script: tuple[Statement, ...]) -> Iterator[Step]:
    """The statements of ``script`` in execution order, loops expanded lazily, each with
    its iteration path (the indexes of the enclosing ``repeat`` loops, outermost first).
    Both executors run scripts through this. Iterative (an explicit stack), so nesting
    depth costs no Python recursion. A loop that runs no statement at any depth (``repeat
    10000000 { repeat 1 { } }``) is passed over whole, not spun: iterating it would do
    nothing, inside one ``next()`` that no cancellation could interrupt (its iterations
    still count against the parse-time `MAX_STATEMENTS`)."""
    loops = outermost_loops(script)
    live = _live_loops(script)
    plans: dict[int, list[_Planned]] = {}

    def plan(body: tuple[Statement, ...]) -> list[_Planned]:
        known = plans.get(id(body))
        if known is None:
            known = plans[id(body)] = [_Planned(stmt, loops.get(id(stmt), 0), live)
                                       for stmt in body]
        return known

    frames = [_Pass(plan(script), 1, (), ())]
    while frames:
        frame = frames[-1]
        i = frame.next
        if i < len(frame.plan):
            frame.next = i + 1
            planned = frame.plan[i]
            body = planned.body
            if body is None:
                yield Step(planned.stmt, planned.op, planned.arg, planned.line, frame.path,
                           planned.loop)
            elif planned.count and body:
                frames.append(_Pass(plan(body), planned.count, frame.path, frame.path + (0,)))
        elif frame.iteration + 1 < frame.count:
            frame.next, frame.iteration = 0, frame.iteration + 1
            frame.path = frame.outer + (frame.iteration,)
        else:
            frames.pop()


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
