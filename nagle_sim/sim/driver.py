"""The discrete-event executor: two model endpoints, a fixed-delay link, two app scripts.

Owns: simulated time (simpy, integer µs), the link, the application processes and the
assembly of a `Trace`. It is the only module that imports simpy. Must not import asyncio,
textual or rich. simpy timeouts cannot be cancelled, so timer wake-ups check staleness.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import simpy

from ..model.endpoint import Endpoint, ModelError, SockOpt
from ..model.events import Micros, Segment, Side
from ..scenario import (
    Close,
    GetOpt,
    Read,
    Repeat,
    Scenario,
    SetOpt,
    Sleep,
    Statement,
    Write,
    Writev,
    describe,
)
from ..trace import EventRecord, OpRecord, SegmentRecord, Trace

DEFAULT_TIME_LIMIT = Micros(3_600_000_000)   # one simulated hour
DEFAULT_SEGMENT_LIMIT = 5_000_000


class RunLimit(Exception):
    pass


@dataclass(slots=True)
class _Blocked:
    """What a side's application is waiting for (for deadlock messages)."""

    what: str
    line: int


def _flatten(body: tuple[Statement, ...], path: tuple[int, ...] = ()
             ) -> Iterator[tuple[Statement, tuple[int, ...]]]:
    for stmt in body:
        if isinstance(stmt, Repeat):
            for i in range(stmt.count):
                yield from _flatten(stmt.body, path + (i,))
        else:
            yield stmt, path


class SimDriver:
    """Runs one scenario on a simpy clock and returns its `Trace`."""

    def __init__(self, scenario: Scenario, *, time_limit: Micros = DEFAULT_TIME_LIMIT,
                 segment_limit: int = DEFAULT_SEGMENT_LIMIT) -> None:
        self.scenario = scenario
        self.env = simpy.Environment()
        self.time_limit = time_limit
        self.segment_limit = segment_limit
        self.ep = {side: Endpoint(side, scenario.side(side).profile,
                                  scenario.side(side).options, scenario.link.mss)
                   for side in Side}
        for ep in self.ep.values():
            ep.set_tx_complete(scenario.link.tx_complete)
        self.trace = Trace(source="sim", title=scenario.title, meta=self._meta())
        self._armed: dict[Side, int | None] = dict.fromkeys(Side)
        self._readable: dict[Side, simpy.Event | None] = dict.fromkeys(Side)
        self._established: dict[Side, simpy.Event] = {s: self.env.event() for s in Side}
        self._blocked: dict[Side, _Blocked | None] = dict.fromkeys(Side)
        self._done: dict[Side, bool] = dict.fromkeys(Side, False)
        self._error: str | None = None
        self._segments = 0

    def _meta(self) -> dict[str, Any]:
        s = self.scenario
        return {"scenario": s.source, "mss": s.link.mss,
                "to_server_delay_ms": s.link.to_server_delay / 1000,
                "to_client_delay_ms": s.link.to_client_delay / 1000,
                **{f"{side.value}_profile": s.side(side).profile.name for side in Side},
                **{f"{side.value}_options": {"nodelay": s.side(side).options.nodelay,
                                             "cork": s.side(side).options.cork}
                   for side in Side}}

    # ---------------------------------------------------------------- plumbing
    def _pump(self, side: Side) -> int:
        """Flush one endpoint after any input: ship segments, log events, re-arm wake-up."""
        ep = self.ep[side]
        now = self.env.now
        segments = ep.segments_to_send()
        for seg in segments:
            self._ship(side, seg, now)
        for event in ep.drain_events():
            self.trace.events.append(EventRecord.from_model(event))
        deadline = ep.next_deadline()
        if deadline is not None and deadline != self._armed[side]:
            self._armed[side] = deadline
            wake = self.env.timeout(max(0, deadline - now))
            wake.callbacks.append(lambda _ev, s=side, d=deadline: self._on_wake(s, d))
        return len(segments)

    def _ship(self, side: Side, seg: Segment, now: int) -> None:
        self._segments += 1
        if self._segments > self.segment_limit:
            raise RunLimit(f"more than {self.segment_limit:,} segments")
        delay = (self.scenario.link.delay(side.peer)
                 + self.scenario.side(side).profile.host_latency_us)
        self.trace.segments.append(SegmentRecord(
            t=Micros(now), src=side, seq=seg.seq, ack=seg.ack, length=seg.length,
            flags=seg.flags.letters(), window=seg.window, arrive=Micros(now + delay),
            why=seg.why.value, code=seg.why.name))
        arrival = self.env.timeout(delay)
        arrival.callbacks.append(lambda _ev, s=side.peer, g=seg: self._deliver(s, g))

    def _deliver(self, to: Side, seg: Segment) -> None:
        ep = self.ep[to]
        was_established = ep.established
        ep.receive_segment(self.env.now, seg)
        self._pump(to)
        if ep.established and not was_established and not self._established[to].triggered:
            self._established[to].succeed()
        waiting = self._readable[to]
        if waiting is not None and (ep.unread or ep.peer_fin) and not waiting.triggered:
            waiting.succeed()

    def _on_wake(self, side: Side, deadline: int) -> None:
        if self._armed[side] != deadline:
            return  # superseded: simpy timeouts cannot be cancelled
        self._armed[side] = None
        self.ep[side].on_deadline(self.env.now)
        self._pump(side)

    # ---------------------------------------------------------------- applications
    def _app(self, side: Side) -> Generator[simpy.Event, Any, None]:
        env, ep = self.env, self.ep[side]
        profile = self.scenario.side(side).profile
        start = env.now
        if side is Side.CLIENT:
            ep.connect(env.now)
            self._pump(side)
        self._blocked[side] = _Blocked("the handshake", 0)
        yield self._established[side]
        yield env.timeout(profile.wakeup_us)
        self._blocked[side] = None
        self.trace.ops.append(OpRecord(
            side=side, op="connect" if side is Side.CLIENT else "accept", arg="",
            start=Micros(start), end=Micros(env.now)))
        closed = False
        for stmt, path in _flatten(self.scenario.side(side).script):
            op, arg = describe(stmt)
            record = OpRecord(side=side, op=op, arg=arg, start=Micros(env.now), end=None,
                              line=stmt.line, iteration=path)
            self.trace.ops.append(record)
            try:
                if closed and not isinstance(stmt, Sleep):
                    raise ModelError(f"{op} after close")
                if isinstance(stmt, Read):
                    yield from self._read(side, stmt, record)
                elif isinstance(stmt, Sleep):
                    yield env.timeout(stmt.duration)
                else:
                    sent = self._call(side, stmt, record)
                    closed = closed or isinstance(stmt, Close)
                    yield env.timeout(profile.syscall_us + profile.tx_segment_us * sent)
            except ModelError as exc:
                self._fail(f"{self.scenario.source}:{stmt.line}: {side.value} {exc}")
                return
            record.end = Micros(env.now)
            if self._error:
                return
        if not closed:
            ep.app_close(env.now)
            self._pump(side)
        self._done[side] = True

    def _call(self, side: Side, stmt: Statement, record: OpRecord) -> int:
        """A non-blocking socket call; returns how many segments it transmitted."""
        ep, now = self.ep[side], self.env.now
        if isinstance(stmt, Write):
            ep.app_write(now, stmt.size, more=stmt.more)
        elif isinstance(stmt, Writev):
            ep.app_write(now, sum(stmt.parts))
        elif isinstance(stmt, SetOpt):
            ep.set_option(now, SockOpt(stmt.option), stmt.on)
        elif isinstance(stmt, GetOpt):
            record.result = str(ep.get_option(SockOpt(stmt.option)))
        elif isinstance(stmt, Close):
            ep.app_close(now)
        return self._pump(side)

    def _read(self, side: Side, stmt: Read, record: OpRecord
              ) -> Generator[simpy.Event, Any, None]:
        env, ep = self.env, self.ep[side]
        profile = self.scenario.side(side).profile
        got = 0
        while True:
            got += ep.app_read(env.now, stmt.size - got)
            self._pump(side)
            if got >= stmt.size:
                yield env.timeout(profile.syscall_us)
                return
            if ep.eof or not (ep.established or ep.state.value.startswith("FIN_WAIT")):
                record.result = f"eof after {got} B"
                raise ModelError(f"read {stmt.size} hit end of stream after {got} B: "
                                 f"the {side.peer.value} closed the connection")
            self._blocked[side] = _Blocked(f"{stmt.size - got} more of {stmt.size} bytes",
                                           stmt.line)
            event = self._readable[side] = env.event()
            yield event
            self._readable[side] = None
            self._blocked[side] = None
            yield env.timeout(profile.wakeup_us)

    def _fail(self, message: str) -> None:
        if self._error is None:
            self._error = message

    # ---------------------------------------------------------------- run
    def run(self) -> Trace:
        for side in Side:
            self.env.process(self._app(side))
        try:
            while self.env.peek() != float("inf"):
                if self.env.peek() > self.time_limit:
                    raise RunLimit(f"still running after {self.time_limit / 1e6:g} simulated s")
                self.env.step()
                if self._error:
                    break
        except RunLimit as exc:
            self.trace.outcome = "limit"
            self.trace.message = f"{self.scenario.source}: stopped: {exc}"
            return self.trace
        if self._error:
            self.trace.outcome = "error"
            self.trace.message = self._error
        elif not all(self._done.values()):
            parts = []
            for side in Side:
                if self._done[side]:
                    parts.append(f"{side.value} finished")
                    continue
                blocked = self._blocked[side]
                what = blocked.what if blocked else "nothing"
                where = f" (line {blocked.line})" if blocked and blocked.line else ""
                parts.append(f"{side.value} waits for {what}{where}")
            self.trace.outcome = "deadlock"
            self.trace.message = f"{self.scenario.source}: deadlock: {', '.join(parts)}"
        return self.trace


def run_sim(scenario: Scenario, **limits: Any) -> Trace:
    """Simulate ``scenario`` and return its trace."""
    return SimDriver(scenario, **limits).run()


Runner = Callable[[Scenario], Trace]
