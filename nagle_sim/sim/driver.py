"""The discrete-event executor: two model endpoints, a link, two app scripts.

Owns: simulated time (integer µs: simpy and the driver's agenda, below), the link (a
fixed one-way delay per direction and, with `[link] rate`, serialization at that rate
through a drop-tail FIFO of `queue` packets), the application processes and the assembly
of a `Trace`. It is the only module that imports simpy. Must not import asyncio, textual
or rich.

Two queues, one order. simpy holds the kernel's timers: a wake-up for each endpoint
deadline (delayed ACK, retransmission, loss probe, window probe). Everything else that
happens at a moment of its own (a segment arriving, an application waking from a read or
resuming after a call) goes on the driver's agenda, a heap of plain tuples: S3 with
NODELAY has 48 such events per message and fewer than one timer, and a simpy event costs
several interpreted calls (docs/speed.md). Both queues are ordered by (time, the order of
scheduling), with one sequence number across them, so events of the same instant run in
exactly the order one simpy queue ran them before. simpy timeouts cannot be cancelled,
so a timer wake-up may come early or twice; that is harmless because
`Endpoint.on_deadline` does nothing when nothing is due.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import simpy

from ..model.config import StackProfile
from ..model.endpoint import Endpoint, ModelError, SocketError, SockOpt
from ..model.events import (
    REASON_CODE,
    REASON_TEXT,
    SYN,
    Micros,
    Reason,
    Segment,
    Side,
    flag_letters,
)
from ..model.state import TCP_ERRORS, State
from ..scenario import (
    Close,
    GetOpt,
    Read,
    Scenario,
    SetOpt,
    SetTiming,
    SetValue,
    Shutdown,
    Sleep,
    Statement,
    Write,
    Writev,
)
from ..scenario.steps import (
    HANDSHAKE_WAIT,
    Step,
    after_close,
    deadlock_message,
    eof_error,
    eof_result,
    handshake_op,
    limit_message,
    read_wait,
    side_error,
    steps,
    trace_meta,
)
from ..trace import OpRecord, Outcome, SegmentRecord, Source, Trace, TraceStream, event_records
from .link import LinkFaults

DEFAULT_TIME_LIMIT: Final = Micros(3_600_000_000)   # one simulated hour
WIRE_HEADER_BYTES: Final = 52
"""IPv4 (20) + TCP with timestamps (32): what each packet adds to its payload on the wire
(the TUN relay's packets are raw IP, so realnet's rate counts the same bytes)."""
SYN_EXTRA_OPTION_BYTES: Final = 8
"""A Linux SYN or SYN-ACK carries MSS (4), SACK-permitted + timestamps (12) and NOP +
window scale (4): 40 bytes of TCP header, 8 more than a timestamped segment (60-byte
packets, as captured through the rate-limited relay: lessons/22's SYN-ACK left 1.2 ms
later than with 52 bytes at 56 kbit/s)."""
DEFAULT_SEGMENT_LIMIT: Final = 5_000_000
DEFAULT_RECORD_LIMIT: Final = 2_000_000
CLASSROOM_RECORD_LIMIT: Final = 300_000
"""A served app's bound: a run of this many records peaks near 200 MB (docs/tui.md)."""
"""Most records (segments + app calls + model events) one run's trace may hold: bounds a
run's memory (a CLI run at the bound peaks near 400 MB) and wall time, whatever the script,
and keeps its JSON (~180 B a record: ~110 MB) under the trace reader's 128 MiB limit, so
any run's ``--json`` can be read back."""


class RunCancelled(Exception):
    """The caller's ``cancelled()`` said stop (e.g. the app started a newer run)."""


_REASON_WORDS: Final = {r: (REASON_TEXT[r], REASON_CODE[r]) for r in Reason}
"""A segment record's sentence and code, found with one lookup per segment."""
_NO_BOUND: Final = 2**62
"""Later than any simulated time (µs): the main loop's bound for `SimDriver._step`."""
_DELIVER: Final = 0
"""Agenda entry: deliver a segment (then `_START` or `_RESUME` an application)."""
_START: Final = 1
_RESUME: Final = 2
HAND_OVER_RECORDS: Final = 4096
"""A streamed run (``stream``) hands its records over each time this many are held."""
CANCEL_CHECK_STEPS: Final = 4096
"""How many scheduler steps run between two calls of ``cancelled()`` (a few ms)."""


class _Passing(Exception):
    """A `ModelError` of an event run by `SimDriver._catch_up`, on its way past the
    application whose call loop ran it (whose `_run` would otherwise blame its call)."""

    def __init__(self, error: ModelError) -> None:
        super().__init__(str(error))
        self.error = error


class RunLimit(Exception):
    """The run hit its simulated-time or segment bound."""


class _Blocked:
    """What a side's application is waiting for (for deadlock messages): the handshake
    (``total`` 0), ``remaining`` more bytes of a read of ``total``, or room in the send
    buffer for ``remaining`` more bytes of a write (``writing``). Worded only when a
    deadlock message needs it: a big run blocks on reads hundreds of thousands of times."""

    __slots__ = ("line", "remaining", "total", "writing")

    def __init__(self, line: int, remaining: int = 0, total: int = 0,
                 writing: bool = False) -> None:
        self.line = line
        self.remaining = remaining
        self.total = total
        self.writing = writing

    def what(self) -> str:
        if self.writing:
            return (f"send-buffer room for the last {self.remaining:,} B of a "
                    f"{self.total:,}-byte write")
        return read_wait(self.remaining, self.total) if self.total else HANDSHAKE_WAIT


@dataclass(slots=True)
class _App:
    """One side's application: its place in the script and its virtual clock."""

    side: Side
    ops: Iterator[Step]
    vnow: int = 0
    started: bool = False
    closed: bool = False
    done: bool = False
    reading: Read | None = None
    writing: int = 0
    """Bytes of a blocking write still to copy (its statement is ``record``'s)."""
    write_more: bool = False
    write_eor: bool = False
    record: OpRecord | None = None
    got: int = 0
    blocked: _Blocked | None = None
    waiting: Step | None = None
    """A statement whose host delay (`SimDriver`'s ``host_delays``) has been waited out."""


class _Host:
    """One side of the run as the driver's per-event code needs it: its endpoint,
    application, stack profile, the one-way delay of its packets towards the peer and the
    deadlines it has a wake-up pending for. Held in attributes, not in dicts keyed by
    `Side`: compiled, an attribute is a pointer read and a dict lookup a generic call."""

    __slots__ = ("app", "delay", "ep", "peer", "profile", "side", "wakes")

    def __init__(self, side: Side, ep: Endpoint, app: _App, profile: StackProfile,
                 delay: int) -> None:
        self.side = side
        self.ep = ep
        self.app = app
        self.profile = profile
        self.delay = delay
        self.wakes: list[int] = []
        """Deadlines with a wake-up pending, latest first: one is added only when it comes
        before all of them, and they fire in time order, so the last is the next to fire."""
        self.peer: _Host = self


class SimDriver:
    """Runs one scenario on a simpy clock and returns its `Trace`.

    The applications are interpreters driven by callbacks, not simpy processes: a run of
    socket calls that nothing else can interleave with (no event is due before the call
    returns) executes at once on the app's own virtual clock, and a resumption is put on
    the agenda only when something else could happen first. The simulated times are exactly
    those of a one-event-per-call execution; this just skips empty scheduler rounds.
    """

    def __init__(self, scenario: Scenario, *, time_limit: Micros = DEFAULT_TIME_LIMIT,
                 segment_limit: int = DEFAULT_SEGMENT_LIMIT,
                 record_limit: int = DEFAULT_RECORD_LIMIT,
                 cancelled: Callable[[], bool] | None = None,
                 sleeps: dict[tuple[Side, int], list[int]] | None = None,
                 host_delays: dict[tuple[Side, int, tuple[int, ...], int], int] | None = None,
                 read_lags: dict[tuple[Side, int, tuple[int, ...], int], int] | None = None,
                 stream: TraceStream | None = None) -> None:
        self.scenario = scenario
        self._stream = stream
        """Where finished records go while the run goes on (``run --json``): the trace
        then holds only the records since the last hand-over (`_hand_over`)."""
        self._handed = 0
        """Records handed to ``stream`` so far (they count towards ``record_limit``)."""
        self._hand_at = HAND_OVER_RECORDS if stream is not None else _NO_BOUND
        """Hand records over once the trace holds this many."""
        # compare's aligned run: each run of a sleep statement as long as the real one
        self._sleeps = {key: iter(runs) for key, runs in (sleeps or {}).items()}
        # compare's host-timed run (the decisions layer): a statement, by (side, line,
        # iteration, loop), starts this many µs later, as it did on a slow real host
        self._host_delays = dict(host_delays or {})
        # ... and a blocked read, woken by data, returns this much later than the model's
        # wake-up (a slow host's reader drains its buffer late: the window stays closed)
        self._read_lags = dict(read_lags or {})
        self.cancelled = cancelled
        self.env = simpy.Environment()
        # simpy's method, looked up once (compiled, each ``env.x()`` looks the name up)
        self._timeout = self.env.timeout
        self._push = heapq.heappush     # bound once: a module attribute is looked up per use
        self._pop = heapq.heappop
        self._simpy_step = self.env.step
        self._steps = 0
        # (not named ``_inline``: mypyc's C name for it would be the keyword ``__inline``)
        self._catching = False
        """An application's call loop is running events itself (see `_catch_up`), up to
        the time ``_catch_end`` it resumes at."""
        self._catch_end = 0
        self.catch_up = True
        """False: an application that must wait always puts its resumption on the agenda
        (`_catch_up` is only faster; tests/sim/test_driver_queues.py compares the two)."""
        self._agenda: list[tuple[int, int, int, _Host, Segment | None]] = []
        """(time, sequence, what, host, segment): packets and application steps."""
        self._timers: list[tuple[int, int]] = []
        """(time, sequence) of each wake-up in simpy's queue, in simpy's own order (its
        events of one time run in scheduling order, as the sequence numbers rise)."""
        self._seq = 0
        self._simpy_t = 0
        """simpy's clock: the time of its last event (the agenda runs ahead of it)."""
        self.time_limit = time_limit
        self.segment_limit = segment_limit
        self.record_limit = record_limit
        self.ep = {side: Endpoint(side, scenario.side(side).profile,
                                  scenario.side(side).options, scenario.link.mss)
                   for side in Side}
        for ep in self.ep.values():
            ep.set_tx_complete(scenario.link.tx_complete)
            ep.set_gso_wire(scenario.link.gso)
        self.trace = Trace(source=Source.SIM, title=scenario.title, meta=trace_meta(scenario))
        self.apps = {side: _App(side, steps(scenario.side(side).script)) for side in Side}
        self._hosts = {side: _Host(side, self.ep[side], self.apps[side],
                                   scenario.side(side).profile,
                                   scenario.link.delay(side.peer)
                                   + scenario.side(side).profile.host_latency_us)
                       for side in Side}
        client, server = self._hosts[Side.CLIENT], self._hosts[Side.SERVER]
        client.peer, server.peer = server, client
        self._error: str | None = None
        self._t = 0
        """``env.now`` while an event runs (see `_now`)."""
        self._segments = 0
        link = scenario.link
        self._loopback = not link.emulated
        """No delay, rate or faults: realnet runs the scenario over 127.0.0.1."""
        # the link's transmitter per direction: when it is next free, and when each
        # packet it holds (waiting or being sent) leaves it
        self._link_free = {side: 0.0 for side in Side}
        self._link_held: dict[Side, list[float]] = {side: [] for side in Side}
        self._drops = 0
        self._faults = LinkFaults(scenario.link.faults) if scenario.link.faults else None
        self._rated = bool(link.rate_bps)

    # ---------------------------------------------------------------- plumbing
    def _schedule(self, when: int, what: int, host: _Host, seg: Segment | None = None) -> None:
        """Put ``what`` (`_DELIVER` ``seg`` to ``host``, `_START` or `_RESUME` its
        application) on the agenda at absolute simulated time ``when``."""
        self._seq += 1
        self._push(self._agenda, (max(when, self._t), self._seq, what, host, seg))

    def call_at(self, when: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` at absolute simulated time ``when``, as a simpy timeout (the
        endpoints' timer wake-ups, and observers such as a test reading TCP_INFO)."""
        when = max(when, self._t)
        self._seq += 1
        self._push(self._timers, (when, self._seq))
        event = self._timeout(when - self._simpy_t)
        event.callbacks.append(lambda _ev: callback())

    def _step(self, until: int, until_seq: int) -> bool:
        """Run the next event of either queue (the earlier head; of one time, the one
        scheduled first) if it comes before (``until``, ``until_seq``) in that order;
        False when none does."""
        agenda, timers = self._agenda, self._timers
        if agenda and (not timers or _first(agenda[0], timers[0])):
            head = agenda[0]
            if head[0] > until or (head[0] == until and head[1] > until_seq):
                return False
            due, _, what, host, seg = self._pop(agenda)
            if due > self.time_limit:
                raise RunLimit(f"still running after {self.time_limit / 1e6:g} simulated s")
            self._t = due
            if what == _DELIVER:
                assert seg is not None
                self._deliver(host, seg)
            elif what == _RESUME:
                self._resume(host)
            else:
                self._start(host)
        elif timers:
            timer = timers[0]
            if timer[0] > until or (timer[0] == until and timer[1] > until_seq):
                return False
            due = self._pop(timers)[0]
            if due > self.time_limit:
                raise RunLimit(f"still running after {self.time_limit / 1e6:g} simulated s")
            self._t = self._simpy_t = due
            self._simpy_step()
        else:
            return False
        self._steps += 1
        if (self.cancelled is not None and self._steps % CANCEL_CHECK_STEPS == 0
                and self.cancelled()):
            # a superseded run must not go on burning CPU and memory (a busy classroom
            # tab, a quitting app): stop between two events
            raise RunCancelled(f"{self.scenario.source}: cancelled")
        return True

    def _catch_up(self, end: int) -> None:
        """Run, from inside an application's call loop, every event that comes before the
        moment ``end`` its next call starts, exactly as if it had put a resumption on the
        agenda at ``end`` and returned: the same events in the same order, without the
        resumption's heap entry (S3 with NODELAY yields after every write: a third of its
        agenda). Only the outermost call loop does this; an application woken meanwhile
        that must wait schedules its resumption as usual, so nothing runs past ``end``."""
        self._seq += 1
        until_seq = self._seq
        self._catching, self._catch_end = True, end
        try:
            while not self._error and self._step(end, until_seq):
                pass
        except ModelError as exc:
            # not this application's call failing: out past its `_run`, as from the loop
            raise _Passing(exc) from exc
        finally:
            self._catching = False
        self._t = end

    def _due_by(self, when: int) -> bool:
        """Whether an event of either queue falls due at or before ``when`` (counting the
        resumption a `_catch_up` in progress stands for)."""
        agenda, timers = self._agenda, self._timers
        return (bool(agenda and agenda[0][0] <= when) or bool(timers and timers[0][0] <= when)
                or (self._catching and self._catch_end <= when))

    def _pump(self, host: _Host, now: int) -> int:
        """Flush one endpoint after any input: ship segments, log events, re-arm wake-up."""
        ep = host.ep
        segments = ep.segments_to_send()
        for seg in segments:
            self._ship(host, seg, now)
        events = ep.drain_events()
        if events:
            self.trace.events.extend(event_records(events))
            self._check_records()
        deadline = ep.next_deadline()
        pending = host.wakes
        # A wake is needed only when the deadline comes before every pending one: a wake
        # that turns out early finds nothing due (on_deadline is idempotent) and re-arms.
        # Loss-probe and RTO deadlines move later on every ACK, so this saves most events.
        if deadline is not None and (not pending or deadline < pending[-1]):
            pending.append(deadline)
            self.call_at(deadline, lambda: self._on_wake(host, deadline))
        return len(segments)

    def _ship(self, host: _Host, seg: Segment, now: int) -> None:
        self._segments += 1
        if self._segments > self.segment_limit:
            raise RunLimit(f"more than {self.segment_limit:,} segments")
        side = host.side
        held = self._faults.fate(host.peer.side, seg) if self._faults else 0   # None: lost
        arrive: int | None = None if held is None else now + host.delay
        if held is not None and self._rated:
            arrive = self._serialize(side, seg, now)
        if arrive is not None and held:
            arrive += held
        why, code = _REASON_WORDS[seg.why]
        self.trace.segments.append(SegmentRecord(
            t=Micros(now), src=side, seq=seg.seq, ack=seg.ack, length=seg.length,
            flags=flag_letters(seg.flags), window=seg.window,
            arrive=None if arrive is None else Micros(arrive),
            why=why, code=code))
        if arrive is not None:
            self._schedule(arrive, _DELIVER, host.peer, seg)

    def _serialize(self, side: Side, seg: Segment, now: int) -> int | None:
        """A rate-limited link: the packet waits for the packets ahead of it, then takes
        its wire size × 8 / rate to leave; a full queue drops it (drop-tail). Returns when
        it arrives (whole µs, rounded up), or None when dropped. A GSO burst (loopback
        wire) is its MSS packets back to back."""
        link = self.scenario.link
        held = [t for t in self._link_held[side] if t > now]
        packets = max(1, -(-seg.length // link.mss))
        if len(held) + packets > link.queue:
            self._link_held[side] = held
            self._drops += 1
            self.trace.meta["link_drops"] = self._drops
            return None
        wire = seg.length + WIRE_HEADER_BYTES * packets
        if seg.flags & SYN:
            wire += SYN_EXTRA_OPTION_BYTES
        end = max(float(now), self._link_free[side]) + wire * 8e6 / link.rate_bps
        self._link_free[side] = end
        held.extend([end] * packets)
        self._link_held[side] = held
        return -(-int(end * 1000) // 1000) + self._hosts[side].delay

    def _now(self) -> Micros:
        """simpy's clock as model time (every delay scheduled here is an int µs): the time
        of the event being run, which `_execute` reads from simpy before each step (simpy's
        ``now`` is a Python property, and this is read for every segment)."""
        return Micros(self._t)

    def _check_records(self) -> None:
        trace = self.trace
        held = len(trace.events) + len(trace.segments) + len(trace.ops)
        if held + self._handed > self.record_limit:
            raise RunLimit(f"the trace grew past {self.record_limit:,} records (segments, "
                           "calls and model events)")
        if held >= self._hand_at:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the stream every record the trace holds, except the calls from the first
        one still going on (its end, or a read's result, is yet to come; after it in the
        list may be calls of the other side that already ended, kept to keep the order)."""
        stream, trace = self._stream, self.trace
        assert stream is not None
        ops = trace.ops
        done = 0
        for op in ops:
            if op.end is None:
                break
            done += 1
        stream.segments(trace.segments)
        stream.ops(ops[:done])
        stream.events(trace.events)
        self._handed += len(trace.segments) + done + len(trace.events)
        trace.segments.clear()
        del ops[:done]
        trace.events.clear()
        # a call that stays open (a read that waits long) keeps what follows it: hand over
        # again only once as many new records have come, not at every check
        self._hand_at = len(ops) + HAND_OVER_RECORDS

    def _deliver(self, to: _Host, seg: Segment) -> None:
        ep = to.ep
        now = self._now()
        was_established = ep.established
        ep.receive_segment(now, seg)
        self._pump(to, now)
        app = to.app
        if ep.established and not was_established and not app.started:
            app.started = True
            self._schedule(now + to.profile.wakeup_us, _START, to)
        else:
            self._wake_blocked(to, now)

    def _wake_blocked(self, host: _Host, now: int) -> None:
        """Resume a blocked call that can go on: a read with data, end of stream or an
        error to report; a write with send-buffer room (sk_stream_write_space), or whose
        connection is gone (the call then fails with the error)."""
        app, ep = host.app, host.ep
        if app.blocked is not None and (app.reading is not None and ep.readable or (
                app.writing and (ep.take_write_wakeup() or ep.state is State.CLOSED))):
            app.blocked = None
            wake = host.profile.wakeup_us
            record, reading = app.record, app.reading
            if self._read_lags and record is not None and reading is not None and (
                    ep.peer_fin or ep.unread >= reading.size - app.got):
                # compare's host-timed run: the wake-up that completes the read, as late
                # as the real reader returned after the data that completed it arrived
                wake += self._read_lags.pop(
                    (host.side, record.line, record.iteration, record.loop), 0)
            self._schedule(now + wake, _RESUME, host)

    def _on_wake(self, host: _Host, deadline: int) -> None:
        pending = host.wakes
        assert pending[-1] == deadline, "wake-ups fire in time order (see _Host.wakes)"
        pending.pop()
        now = self._now()
        host.ep.on_deadline(now)
        self._pump(host, now)
        if host.app.started:
            # a timer can end the connection (TCP_USER_TIMEOUT, tcp_retries2: tcp_write_err)
            # with a call blocked on it: the call returns with the error
            self._wake_blocked(host, now)

    # ---------------------------------------------------------------- applications
    def _start(self, host: _Host) -> None:
        app = host.app
        app.vnow = self._now()
        self.trace.ops.append(OpRecord(
            side=host.side, op=handshake_op(host.side), arg="",
            start=Micros(0), end=Micros(app.vnow)))
        self._run(host)

    def _resume(self, host: _Host) -> None:
        host.app.vnow = self._now()
        self._run(host)

    def _run(self, host: _Host) -> None:
        """Execute statements until one must wait for another event; see the class doc."""
        if self._error:
            return
        app = host.app
        try:
            self._run_ops(host)
        except SocketError as failed:   # the call failed as the kernel's would (errno)
            line = app.record.line if app.record else 0
            op = app.record.op if app.record else "call"
            self._fail(side_error(self.scenario.source, line, app.side,
                                  f"{op} failed: {failed.errno} "
                                  f"({TCP_ERRORS.get(failed.errno, failed.errno)}): {failed}"))
        # (its own name: compiled, one name bound by both handlers is typed as the first's
        # class, and a ModelError bound to it was a TypeError traceback: issue 32)
        except ModelError as exc:
            line = app.record.line if app.record else 0
            self._fail(side_error(self.scenario.source, line, app.side, str(exc)))

    def _run_ops(self, host: _Host) -> None:
        app, side, ep, profile = host.app, host.side, host.ep, host.profile
        while True:
            if app.writing:
                nxt = ep.snd_nxt
                sent = self._write_step(host)
                if app.writing:
                    return
                end = app.vnow + profile.syscall_us + profile.tx_segment_us * sent
                if self._loopback and ep.snd_nxt != nxt and ep.notsent_bytes:
                    end = max(end, self._loopback_reaction(host, app.vnow))
            elif app.reading is not None:
                if not self._read_step(host):
                    return
                end = app.vnow + profile.syscall_us
            else:
                step: Step | None = app.waiting
                if step is not None:
                    app.waiting = None
                else:
                    try:
                        step = next(app.ops)
                    except StopIteration:   # not next(ops, None): compiled, a generic call
                        step = None
                    if self._host_delays and self._host_late(host, step):
                        if self._due_by(app.vnow):
                            self._schedule(app.vnow, _RESUME, host)
                            return
                        continue
                if step is None:
                    if not app.closed:
                        app.closed = True
                        ep.app_close(Micros(app.vnow))
                        self._pump(host, app.vnow)
                    app.done = True
                    return
                stmt = step.stmt
                record = app.record = OpRecord(side=side, op=step.op, arg=step.arg,
                                               start=Micros(app.vnow), end=None,
                                               line=step.line, iteration=step.iteration,
                                               loop=step.loop)
                self.trace.ops.append(record)
                self._check_records()
                if app.closed and not isinstance(stmt, Sleep):
                    raise ModelError(after_close(step.op))
                if isinstance(stmt, Read):
                    app.reading, app.got = stmt, 0
                    continue
                if isinstance(stmt, Sleep):
                    runs = self._sleeps.get((side, step.line))
                    end = app.vnow + next(runs, stmt.duration) if runs else (
                        app.vnow + stmt.duration)
                else:
                    nxt = ep.snd_nxt
                    sent = self._call(host, stmt, record)
                    if app.writing:     # the send buffer filled: the write blocks
                        app.blocked = _Blocked(step.line, app.writing,
                                               _write_size(stmt), writing=True)
                        return
                    end = app.vnow + profile.syscall_us + profile.tx_segment_us * sent
                    if self._loopback and ep.snd_nxt != nxt and ep.notsent_bytes:
                        end = max(end, self._loopback_reaction(host, app.vnow))
            assert app.record is not None
            app.record.end = Micros(end)
            app.vnow = end
            if end > self.time_limit:
                raise RunLimit(f"still running after {self.time_limit / 1e6:g} simulated s")
            if self._due_by(end):
                if self._catching or not self.catch_up:
                    self._schedule(end, _RESUME, host)
                    return
                self._catch_up(end)
                if self._error:
                    return

    def _host_late(self, host: _Host, step: Step | None) -> bool:
        """compare's host-timed run: whether the real host was late to ``step`` (None: the
        script's implicit close, as late as the real host's FIN). If so the app's clock
        has moved on by as much and ``step`` waits in ``app.waiting`` to run then."""
        app = host.app
        if step is None:
            if app.closed:
                return False
            key: tuple[Side, int, tuple[int, ...], int] = (host.side, -1, (), 0)
        else:
            key = (host.side, step.line, step.iteration, step.loop)
        lag = self._host_delays.pop(key, 0)
        if lag <= 0:
            return False
        app.waiting = step
        app.vnow += lag
        return True

    def _loopback_reaction(self, host: _Host, now: int) -> int:
        """When a call that sent data on loopback, and left more held (Nagle, cork, cwnd),
        returns at the earliest: once the peer's reaction to that data is back, so that an
        ACK it brings releases the held data before the application's next call.

        On loopback the receiver's input path runs inside the sender's call (loopback_xmit
        → netif_rx, the softirq at local_bh_enable; an ACK that comes while the sender
        owns the socket waits in its backlog for release_sock). An immediate ACK is back
        within the model's call cost anyway; a reader blocked on the socket is woken, and
        its ACK came back 26-64 µs after the data here while that write took 80-120 µs and
        the next call started 30-40 µs later (examples/fuzz/seed-18.toml: 2896 B, ACK, 104 B, then
        the next 1000 B held 44 ms by Nagle). The model's calls cost a few µs and its
        reader wakes in `wakeup_us`, so the call is stretched to 1 µs past that reader's
        ACK (events of one instant run in the order they were scheduled). Calls that leave
        nothing held are not stretched: the cost constants stay what the lessons teach."""
        peer = host.peer
        if peer.app.blocked is None or peer.app.reading is None or not peer.ep.established:
            return now
        return now + host.delay + peer.profile.wakeup_us + peer.delay + 1

    def _call(self, host: _Host, stmt: Statement, record: OpRecord) -> int:
        """A non-blocking socket call; returns how many segments it transmitted."""
        app, ep, now = host.app, host.ep, Micros(host.app.vnow)
        if isinstance(stmt, Write):
            # (two isinstance checks: `Write | Writev` builds a union type on every call)
            app.writing = stmt.size - ep.app_write(now, stmt.size, more=stmt.more,
                                                   eor=stmt.eor)
            app.write_more = stmt.more
            app.write_eor = stmt.eor
        elif isinstance(stmt, Writev):
            size = sum(stmt.parts)
            app.writing = size - ep.app_write(now, size)
            app.write_more = False
            app.write_eor = False
        elif isinstance(stmt, SetOpt):
            ep.set_option(now, SockOpt(stmt.option), stmt.on)
        elif isinstance(stmt, SetTiming):
            ep.set_timing_option(now, stmt.option, stmt.duration)
        elif isinstance(stmt, GetOpt):
            record.result = str(ep.get_option(SockOpt(stmt.option)))
        elif isinstance(stmt, Close):
            app.closed = True
            ep.app_close(now)
        elif isinstance(stmt, Shutdown):
            ep.shutdown(now, stmt.how)
        elif isinstance(stmt, SetValue):
            if stmt.option == "sndbuf":
                ep.set_sndbuf(stmt.value)
            elif stmt.option == "notsent_lowat":
                ep.set_notsent_lowat(stmt.value)
            else:
                ep.set_user_timeout(stmt.value)
        return self._pump(host, now)

    def _write_step(self, host: _Host) -> int:
        """A blocking write woken by send-buffer room goes on (the same call); returns the
        segments it transmitted. ``app.writing`` stays non-zero if it must wait again."""
        app, ep = host.app, host.ep
        app.writing -= ep.app_write(Micros(app.vnow), app.writing, more=app.write_more,
                                    eor=app.write_eor,
                                    resume=True)
        sent = self._pump(host, app.vnow)
        if app.writing:
            assert app.record is not None
            app.blocked = _Blocked(app.record.line, app.writing, 0, writing=True)
        return sent

    def _read_step(self, host: _Host) -> bool:
        """Copy what is queued; True when the read is complete, False when it must block."""
        app, ep = host.app, host.ep
        stmt = app.reading
        assert stmt is not None and app.record is not None
        try:
            app.got += ep.app_read(Micros(app.vnow), stmt.size - app.got)
        except SocketError as exc:      # a reset: the read fails with its error
            self._pump(host, app.vnow)
            app.record.result = eof_result(app.got)
            why = ("the retransmissions went unanswered (TCP_USER_TIMEOUT or tcp_retries2)"
                   if exc.errno == "ETIMEDOUT" else
                   f"the {app.side.peer.value} reset the connection")
            raise ModelError(f"read {stmt.size} failed after {app.got} B: {exc.errno} "
                             f"({TCP_ERRORS.get(exc.errno, exc.errno)}): {why}") from None
        self._pump(host, app.vnow)
        if app.got >= stmt.size:
            app.reading = None
            return True
        if ep.eof or not (ep.established or ep.state.value.startswith("FIN_WAIT")):
            app.record.result = eof_result(app.got)
            raise ModelError(eof_error(app.side, stmt.size, app.got))
        app.blocked = _Blocked(stmt.line, stmt.size - app.got, stmt.size)
        return False

    def _fail(self, message: str) -> None:
        if self._error is None:
            self._error = message

    # ---------------------------------------------------------------- run
    def run(self) -> Trace:
        # A run allocates hundreds of thousands of long-lived records; the cyclic GC would
        # rescan them all again and again (quadratic-looking slowdowns), and they are freed
        # by reference counting anyway.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._execute()
        finally:
            if enabled:
                gc.enable()

    def _execute(self) -> Trace:
        for app in self.apps.values():
            app.blocked = _Blocked(0)
        self.ep[Side.CLIENT].connect(Micros(0))
        self._pump(self._hosts[Side.CLIENT], 0)
        try:
            while not self._error and self._step(_NO_BOUND, 0):
                pass
        except _Passing as passing:
            raise passing.error from None
        except RunLimit as exc:
            self.trace.outcome = Outcome.LIMIT
            self.trace.message = limit_message(self.scenario.source, str(exc))
            return self.trace
        if self._error:
            self.trace.outcome = Outcome.ERROR
            self.trace.message = self._error
        elif not all(app.done for app in self.apps.values()):
            self.trace.outcome = Outcome.DEADLOCK
            self.trace.message = deadlock_message(self.scenario.source, (
                (side, None if app.done else
                 (app.blocked.what(), app.blocked.line) if app.blocked else ("nothing", 0))
                for side, app in self.apps.items()))
        return self.trace


def _write_size(stmt: Statement) -> int:
    """The bytes of a write or gather write (writev's sizes summed)."""
    if isinstance(stmt, Writev):
        return sum(stmt.parts)
    assert isinstance(stmt, Write)
    return stmt.size


def _first(entry: tuple[int, int, int, _Host, Segment | None], timer: tuple[int, int]) -> bool:
    """Whether an agenda entry comes before a timer: earlier, or as early and scheduled
    first (simpy's own order for events of one time)."""
    return entry[0] < timer[0] or (entry[0] == timer[0] and entry[1] < timer[1])


def run_sim(scenario: Scenario, **limits: Any) -> Trace:
    """Simulate ``scenario`` and return its trace. ``cancelled``, if given, is asked every
    few thousand events and stops the run with `RunCancelled` when it returns True.
    ``stream``, a `TraceStream`, takes the records as the run goes on: the trace returned
    then holds only the last ones, and ``stream.finish(trace, out)`` writes the whole."""
    return SimDriver(scenario, **limits).run()
