"""Supervision of a real run: how long it may take, and how it ended.

Owns: a script's size without expanding it (`script_size`), the run's time limits
(`run_timeout_s`, `stall_timeout_s`), and `supervise`: waiting for both sides, stopping
every side on an error, a deadlock (every unfinished side blocked, no progress) or the
whole-run limit, with the one-line message the trace keeps (`RunEnd`). Works on anything
with a side's live view (`realnet.side.SideRunner`, the remote server's proxy). Must not
import simpy, textual or rich.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import Read, Repeat, Scenario, Sleep, Statement, Write, Writev
from nagle_sim.scenario.steps import deadlock_message, limit_message
from nagle_sim.trace import Outcome
from realnet.interrupt import check


@dataclass(frozen=True, slots=True)
class ScriptSize:
    """What a script does once its loops are expanded, computed without expanding them."""

    statements: int
    """Statements executed; every loop iteration counts too, so an empty body still costs."""
    write_bytes: int
    sleep_s: float
    reads: int
    depth: int
    """Deepest `repeat` nesting."""


def script_size(body: tuple[Statement, ...]) -> ScriptSize:
    """Size of a script. Iterative (an explicit stack), so any nesting depth is safe."""
    statements = write_bytes = reads = depth = 0
    sleep = 0.0
    stack: list[tuple[tuple[Statement, ...], int, int]] = [(body, 1, 0)]
    while stack:
        stmts, times, level = stack.pop()
        depth = max(depth, level)
        for stmt in stmts:
            if isinstance(stmt, Repeat):
                statements += times * stmt.count
                stack.append((stmt.body, times * stmt.count, level + 1))
                continue
            statements += times
            if isinstance(stmt, Write):
                write_bytes += times * stmt.size
            elif isinstance(stmt, Writev):
                write_bytes += times * sum(stmt.parts)
            elif isinstance(stmt, Sleep):
                sleep += times * stmt.duration / 1e6
            elif isinstance(stmt, Read):
                reads += times
    return ScriptSize(statements, write_bytes, sleep, reads, depth)


OP_COST_S = 0.0003
"""An upper estimate of one statement's own time on a loaded machine (~0.05-0.15 ms)."""


def rtt_s(scenario: Scenario) -> float:
    return (scenario.link.to_server_delay + scenario.link.to_client_delay) / 1e6


def run_timeout_s(scenario: Scenario) -> float:
    """Whole-run limit: 3 × an upper estimate of the run's duration + 10 s.

    The estimate is each side's sleeps plus, per blocking read, one round trip and 250 ms
    (more than any delayed-ACK or probe timer hold), plus `OP_COST_S` per statement, so a
    healthy run never reaches it."""
    rtt = rtt_s(scenario)
    worst = 0.0
    for spec in (scenario.client, scenario.server):
        size = script_size(spec.script)
        worst = max(worst, size.sleep_s + size.reads * (rtt + 0.25)
                    + size.statements * OP_COST_S)
    return 3 * (worst + 2 * rtt) + 10.0


def stall_timeout_s(scenario: Scenario) -> float:
    """No progress for this long while every unfinished side is blocked = deadlock."""
    return 2.0 + 4 * rtt_s(scenario)



@dataclass(slots=True)
class RunEnd:
    """How supervision saw the run end, and the one-line message if not `Outcome.OK`."""

    outcome: Outcome = Outcome.OK
    message: str = ""


def supervise(scenario: Scenario, sides: dict[Side, Any], *, timeout_s: float,
              stall_s: float) -> RunEnd:
    """Wait for both sides; detect errors, deadlocks and the whole-run timeout.

    ``sides`` are `SideRunner`s (or anything with ``finished``, ``blocked``, ``progress``,
    ``waiting_text()``, ``abort()`` and ``log``, e.g. the remote server's proxy). On any
    failure every side is aborted."""
    start = time.monotonic()
    last_progress: tuple[int, ...] = ()
    last_change = start
    while True:
        check()     # a SIGTERM whose exception was lost (realnet.interrupt)
        finished = {side: r.finished for side, r in sides.items()}
        if all(finished.values()):
            break
        errors = [r.log.error for side, r in sides.items() if finished[side] and r.log.error]
        if errors:
            for r in sides.values():
                r.abort()
            return RunEnd(Outcome.ERROR, errors[0])
        now = time.monotonic()
        progress = tuple(r.progress for r in sides.values())
        if progress != last_progress:
            last_progress, last_change = progress, now
        elif (all(finished[side] or r.blocked for side, r in sides.items())
              and now - last_change > stall_s):
            waits: list[tuple[Side, tuple[str, int] | None]] = []
            for side, r in sides.items():
                what, line = r.waiting_text()
                waits.append((side, None if finished[side] or not what else (what, line)))
            for r in sides.values():
                r.abort()
            return RunEnd(Outcome.DEADLOCK, deadlock_message(scenario.source, waits))
        if now - start > timeout_s:
            for r in sides.values():
                r.abort()
            return RunEnd(Outcome.LIMIT, limit_message(
                scenario.source, f"still running after {timeout_s:g} s (the run's time limit)"))
        time.sleep(0.005)
    errors = [r.log.error for r in sides.values() if r.log.error]
    if errors:
        return RunEnd(Outcome.ERROR, errors[0])
    return RunEnd()
