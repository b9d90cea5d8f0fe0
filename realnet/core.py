"""What local and remote real runs share: the side processes, supervision, trace assembly.

Owns: executing one side's script with real system calls (``send``, ``send(MSG_MORE)``,
``sendmsg`` for writev, a ``recv`` loop for read, ``setsockopt``/``getsockopt``, sleep,
``close``) in a forked process (`SideRunner`) under a bounded real-time duty cycle
(`RtGovernor`), the side's streamed record format (`LogReader`), script sizes and time
limits, deadlock/timeout supervision, and turning records and captured packets into a trace.

Each side runs in its own forked process with a *blocking* socket, so a blocked read wakes
as soon as the kernel delivers (~15 µs) and neither side ever waits for the other's Python
code. Threads were tried first: GIL hand-offs (with the capture thread running too) delayed
wake-ups by 0.1-4 ms; one asyncio loop would serialise the sides.

Imports from nagle_sim only its pure modules (scenario, trace, model.events) and from
realnet only sockopts; `realnet.runner` and `realnet.remote` import this module, never the
reverse. Must not import simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import mmap
import os
import platform
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nagle_sim.errors import UserError
from nagle_sim.model.events import Micros, Side
from nagle_sim.scenario import (
    Close,
    GetOpt,
    Read,
    Repeat,
    Scenario,
    SetOpt,
    SetTiming,
    SetValue,
    Shutdown,
    SideSpec,
    Sleep,
    Statement,
    Write,
    Writev,
    real_run_caveats,
)
from nagle_sim.script import (
    HANDSHAKE_OPS,
    HANDSHAKE_WAIT,
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
from nagle_sim.trace import EventRecord, OpRecord, Outcome, SegmentRecord, Trace
from realnet import sockopts
from realnet.hostfacts import read_sysctl as _read_sysctl

Progress = Callable[[str], None]

NO_AUTOCORK = {"net.ipv4.tcp_autocorking": "0"}
"""Sysctls of the emulated link's namespaces (see docs/realnet.md, "autocork")."""

TCP_INFO_KIND = "tcp_info"


class RealnetError(UserError):
    """A real run cannot be made here (wrong OS, missing privilege, bad remote...): a
    `nagle_sim.errors.UserError`, so the CLI prints the one-line message and exits 2."""


class _Aborted(Exception):
    """The runner stopped this side (deadlock, timeout, the peer failed, Ctrl-C)."""


# ---------------------------------------------------------------- script size and costs
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


# ---------------------------------------------------------------- one side's records
OP_NAMES = HANDSHAKE_OPS | {"write", "writev", "read", "sleep", "set", "get", "shutdown",
                            "close"}
MAX_ARG_CHARS = 10_000
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

    def end_rec(self) -> dict[str, Any]:
        return {"error": self.error, "done": self.done, "rt_rests": self.rt_rests}


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
            self.ended = True
        else:
            raise ValueError(f"unknown log record {str(kind)[:20]!r}")


class _SideFailure(Exception):
    """A scripted failure with a ready one-line message (EOF on read, op after close)."""


# Live state a side publishes in shared memory for the supervisor (deadlock detection).
_STATE = struct.Struct("=qiiiqq")   # progress, state, kind, line, remaining, total
RUNNING, BLOCKED, SLEEPING, DONE = 0, 1, 2, 3
K_NONE, K_HANDSHAKE, K_READ, K_WRITE = 0, 1, 2, 3
PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29
SIDE_RT_PRIORITY = 5
"""SCHED_FIFO priority of the side processes when allowed (root); 0 = normal scheduling."""

RT_BURST_NS = 10_000_000
"""CPU time a side may use at real-time priority without a pause (a token bucket's size)."""
RT_SHARE = 0.5
"""Share of the wall time a side may use at real-time priority in the long run (the
bucket's refill rate). A side that uses more rests at normal priority until half the
bucket has refilled; a normal task on its CPU then waits at most ~20 ms plus its CFS share. See
docs/realnet.md, "Real-time priority"."""
RT_RESUME_NS = RT_BURST_NS // 2
RT_TICK_NS = 200_000
"""The governor accounts at most this often (the budget is charged in arrears)."""

SPIN_S = 0.00003
"""The last part of a `sleep` the runner spins instead of sleeping. A SCHED_FIFO task
sleeps with no timer slack (measured here: median 5 µs late, p99 15 µs), and the side
processes set their slack to 1 ns when they run at normal priority, so 30 µs covers
nearly every wake-up; the rare later one delays that sleep only."""

PAYLOAD_BYTES = 1 << 20
"""The one payload buffer a side sends from; larger writes send it repeatedly."""

LOG_BUFFER_BYTES = 1 << 20
"""How much encoded log a side buffers before writing it out to the log memfd."""
FLUSH_RECORDS = 4096
"""Records a side holds (~1.5 KB each) before it encodes and writes them out."""


_LIBC: Any = None


def _libc() -> Any:
    """The C library, loaded in the parent before any fork: a child of a multi-threaded
    process (the serve) should not take the dynamic loader's lock."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def rt_priority_available() -> int:
    """`SIDE_RT_PRIORITY` if this process may use SCHED_FIFO, else 0."""
    if not hasattr(os, "SCHED_FIFO"):
        return 0
    try:
        limit = os.sched_get_priority_max(os.SCHED_FIFO)
    except OSError:
        return 0
    return min(SIDE_RT_PRIORITY, limit) if os.geteuid() == 0 else 0


class RtGovernor:
    """Real-time priority with a bounded duty cycle, for one side process.

    SCHED_FIFO makes a woken reader run at once instead of up to a tick later (CFS), but a
    FIFO task that keeps the CPU starves every normal task on it (the kernel's own
    throttling allows 950 ms per second). So the side holds FIFO only while it executes
    its script, and a token bucket (`RT_BURST_NS`, refilled at `RT_SHARE` of the wall
    time) bounds its CPU there: blocked reads and sleeps use none and refill it; a side
    that keeps the CPU busy (a tight loop of writes, spins) runs at normal priority once
    the bucket is empty, until half of it has refilled."""

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self.on = False
        self.rests = 0
        self._budget = float(RT_BURST_NS)
        self._cpu = 0
        self._wall = 0

    def _set(self, on: bool) -> None:
        try:
            if on:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
            else:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except (OSError, AttributeError):
            self.priority = 0
            return
        self.on = on

    def start(self) -> None:
        if self.priority:
            self._cpu, self._wall = time.process_time_ns(), time.monotonic_ns()
            self._set(True)

    def stop(self) -> None:
        if self.on:
            self._set(False)

    def tick(self) -> None:
        """Between ops and while spinning: charge the CPU used, rest or resume."""
        if not self.priority:
            return
        wall = time.monotonic_ns()
        if wall - self._wall < RT_TICK_NS:
            return      # reading the CPU clock is a system call (~2 µs): not every op
        cpu = time.process_time_ns()
        used = cpu - self._cpu if self.on else 0
        self._budget = min(RT_BURST_NS, self._budget + (wall - self._wall) * RT_SHARE - used)
        self._cpu, self._wall = cpu, wall
        if self.on and self._budget <= 0:
            self._set(False)
            self.rests += 1
        elif not self.on and self._budget >= RT_RESUME_NS:
            self._set(True)


class SideRunner:
    """Executes one side's script on a real socket, in a forked child process.

    Each side gets its own process so neither waits for the other's Python (GIL) and a
    blocked read wakes as soon as the kernel delivers (~15 µs). The client side is given an
    unconnected socket and an address; the server side a listening socket (it accepts one
    connection). The script ends with close(), as in the simulator. Times are
    perf_counter_ns (CLOCK_MONOTONIC, shared by all processes); the trace builder makes
    them relative. The parent sees live progress through a small shared memory block.

    Memory stays bounded however long the script: the child sends every write from one
    payload buffer (`PAYLOAD_BYTES`) and streams its records (`LogReader`) into an
    anonymous memfd as it goes instead of holding them. The memfd has no name in the file
    system, so a killed run leaves no file behind. ``keep_records=False`` (the remote
    server) reads only the end record on exit; `records` then streams the rest.
    """

    def __init__(self, side: Side, spec: SideSpec, where: str, *,
                 sock: socket.socket | None = None, address: tuple[str, int] | None = None,
                 listener: socket.socket | None = None, tcp_info: bool = True,
                 rt_priority: int = 0, keep_records: bool = True) -> None:
        self.side = side
        self.rt_priority = rt_priority
        self.spec = spec
        self.where = where
        self.sock = sock
        self.address = address
        self.listener = listener
        self.want_tcp_info = tcp_info
        self.keep_records = keep_records
        self.log = SideLog()
        self.pid = 0
        self._shm = mmap.mmap(-1, _STATE.size)
        with contextlib.suppress(OSError):
            _libc()
        self._log_fd = os.memfd_create(f"nsim-{side.value}-log", os.MFD_CLOEXEC)
        self._go_r, self._go_w = os.pipe2(os.O_CLOEXEC)
        self._exited = False
        self._aborted = False
        self._buf = bytearray(65536)
        self._payload = memoryview(b"")
        self._closed = False
        self._progress = 0
        # child-only state
        self._rt = RtGovernor(rt_priority)
        self._out: Any = None
        self._info_keys: tuple[str, ...] = ()
        self._n_ops = 0
        self._current: OpLog | None = None
        self._pending: list[Any] = []

    # -- parent side -----------------------------------------------------------
    def start(self, foreign: tuple[socket.socket, ...] = ()) -> None:
        """Fork the child (it waits for `go`); the parent's copies of the sockets are closed
        so that the child's close() really sends the FIN. ``foreign``: the other side's
        sockets, closed in the child for the same reason. Fork before starting any capture
        thread: the child then inherits no thread state."""
        pid = os.fork()
        if pid == 0:   # child
            code = 0
            try:
                for s in foreign:
                    s.close()
                self._close_go()
                self._prepare_child()
                os.read(self._go_r, 1)
                self._child()
            except BaseException:  # pragma: no cover - never return into the parent's code
                code = 70
            finally:
                os._exit(code)
        self.pid = pid
        os.close(self._go_r)
        self._go_r = -1
        for own in (self.sock, self.listener):
            if own is not None:
                own.close()

    def go(self) -> None:
        """Let the child start its script (an EOF, e.g. the parent dying, also releases it,
        but PDEATHSIG then kills it)."""
        self._close_go(write=True)

    def _close_go(self, write: bool = False) -> None:
        """Close the go pipe's write end once: a second close() could hit a descriptor
        number another thread has been given since (a capture's pipe, a socket)."""
        fd, self._go_w = self._go_w, -1
        if fd < 0:
            return
        with contextlib.suppress(OSError):
            if write:
                os.write(fd, b"g")
        os.close(fd)

    def _state(self) -> tuple[int, int, int, int, int, int]:
        return _STATE.unpack_from(self._shm, 0)

    @property
    def progress(self) -> int:
        return self._state()[0]

    @property
    def finished(self) -> bool:
        if self._exited:
            return True
        if not self.pid:
            return True
        pid, _status = os.waitpid(self.pid, os.WNOHANG)
        if pid:
            self._collect()
        return self._exited

    @property
    def blocked(self) -> bool:
        return self._state()[1] == BLOCKED

    def waiting_text(self) -> tuple[str, int]:
        _, state, kind, line, remaining, total = self._state()
        if state in (DONE,) or kind == K_NONE:
            return "", 0
        if kind == K_HANDSHAKE:
            return HANDSHAKE_WAIT, 0
        if kind == K_READ:
            return read_wait(remaining, total), line
        return (f"the {self.side.peer.value} to read (a {total}-byte write fills the send "
                "buffer)"), line

    def abort(self) -> None:
        """Ask the child to stop wherever it blocks (SIGUSR1; SIGKILL if it does not)."""
        if self._exited or not self.pid:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGUSR1)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.finished:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                self._collect()
                return
            time.sleep(0.002)

    def raw_records(self) -> Iterator[bytes]:
        """The child's log records in order, one JSON text each (parent, after the child
        exited). A line cut short by a killed child ends the stream."""
        with open(os.dup(self._log_fd), "rb") as f:
            f.seek(0)
            for line in f:
                if not line.endswith(b"\n"):
                    return
                yield line[:-1]

    def records(self) -> Iterator[Any]:
        for line in self.raw_records():
            yield json.loads(line)

    def _collect(self) -> None:
        self._exited = True
        reader = LogReader()
        try:
            for rec in self.records():
                if self.keep_records or "end" in rec:
                    reader.add(rec)
        except (OSError, ValueError) as exc:
            reader.log.error = f"{self.where}: {self.side.value}: unreadable report: {exc}"
        self.log = reader.log
        if not reader.ended and not self.log.error:
            self.log.error = (f"{self.where}: {self.side.value}: the side's process ended "
                              "without a report (killed?)")

    def cleanup(self) -> None:
        self._close_go()
        if self.pid and not self._exited:
            self.abort()
            self.join(2.0)
        if self._log_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._log_fd)
            self._log_fd = -1

    # -- child side --------------------------------------------------------------
    def _prepare_child(self) -> None:
        """Everything before the clock starts (the child then only waits for `go`)."""
        with contextlib.suppress(Exception):
            libc = _libc()
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            # time.sleep at normal priority wakes up to 50 µs late (the default timer
            # slack); a FIFO task has none. 1 ns keeps the spin short either way.
            libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1))
        signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent handles Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, self._on_abort)
        self._out = open(self._log_fd, "w", encoding="utf-8",  # noqa: SIM115
                         buffering=LOG_BUFFER_BYTES, closefd=False)
        gc.disable()
        self._warm_up()

    def ready(self, timeout: float = 2.0) -> bool:
        """Wait until the child blocks in accept()/connect() or gets further (parent)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            progress, state, kind, *_ = self._state()
            if progress or state == DONE or (state == BLOCKED and kind == K_HANDSHAKE):
                return True
            if self.finished:
                return True
            time.sleep(0.0002)
        return False

    def _child(self) -> None:
        # CFS lets a woken task wait up to a tick (4 ms at HZ=250) behind whatever runs on
        # its CPU; as a (low) real-time task it runs at once. Below the relay's 10.
        self._rt.start()
        try:
            self._main()
        finally:
            self._rt.stop()
            self.log.rt_rests = self._rt.rests
            self._publish(DONE, K_NONE)
            self._flush()
            self._write({"end": self.log.end_rec()})
            self._out.flush()

    def _write(self, rec: dict[str, Any]) -> None:
        self._out.write(json.dumps(rec, separators=(",", ":")))
        self._out.write("\n")

    def _emit_op(self, record: OpLog) -> None:
        self._pending.append(record)
        self._n_ops += 1
        self._current = None
        if len(self._pending) >= FLUSH_RECORDS:
            self._flush()

    def _flush(self) -> None:
        """Encode and write the pending records. Called where the side would wait anyway
        (at the start of a sleep, which then sleeps that much less), every
        `FLUSH_RECORDS` records, and at the end: encoding each record as it happens
        would add ~10 µs to every op."""
        for rec in self._pending:
            if isinstance(rec, OpLog):
                self._write({"op": rec.to_rec()})
            elif isinstance(rec, tuple) and isinstance(rec[0], str):
                self._write({"keys": list(rec)})
            else:
                self._write({"info": [rec[0], rec[1], list(rec[2])]})
        self._pending.clear()

    def _warm_up(self) -> None:
        """Take the first-call costs (copy-on-write page faults after fork, the payload
        allocation, first TCP_INFO, the log's encoder) before the clock starts: ~0.3-1 ms
        otherwise."""
        for n, step in enumerate(steps(self.spec.script)):
            json.dumps(OpLog(step.op, step.arg, self._now(), None, line=step.line,
                             iteration=step.iteration).to_rec())
            if n > 1000:
                break
        self._payload = memoryview(b"x" * max(1, min(_biggest_write(self.spec.script),
                                                      PAYLOAD_BYTES)))
        target = self.sock or self.listener
        if target is not None and self.want_tcp_info:
            json.dumps(list(sockopts.tcp_info(target).values()))
        self._publish(RUNNING, K_NONE)
        gc.collect()
        gc.freeze()

    def _on_abort(self, _signum: int, _frame: Any) -> None:
        self._aborted = True
        for s in (self.sock, self.listener):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _publish(self, state: int, kind: int, line: int = 0, remaining: int = 0,
                 total: int = 0) -> None:
        _STATE.pack_into(self._shm, 0, self._progress, state, kind, line, remaining, total)

    def _main(self) -> None:
        try:
            self._establish()
            self._run_script()
            self.log.done = True
        except _Aborted:
            pass
        except _SideFailure as exc:
            self.log.error = str(exc)
        except OSError as exc:
            if not self._aborted:
                op = self._current
                what = f"{op.op} {op.arg}".strip() if op else "connect"
                line = op.line if op else 0
                if op is not None and op.end_ns is None:
                    op.end_ns = self._now()     # when the call failed (ETIMEDOUT, EPIPE …)
                self.log.error = (f"{self.where}:{line}: {self.side.value} {what} failed: "
                                  f"{exc.strerror or exc}")
        except MemoryError:
            op = self._current
            what = f" ({op.op} {op.arg}, line {op.line})" if op else ""
            self.log.error = (f"{self.where}: {self.side.value}: out of memory{what}: the "
                              "host could not allocate what the script needs")
        except Exception as exc:  # pragma: no cover - a bug; surface it, never hang
            self.log.error = f"{self.where}: {self.side.value}: internal error: {exc!r}"
        finally:
            if self._current is not None:
                self._emit_op(self._current)
            self._close()

    def _now(self) -> int:
        return time.perf_counter_ns()

    def _establish(self) -> None:
        opts = self.spec.options
        if self.side is Side.CLIENT:
            assert self.sock is not None and self.address is not None
            record = self._current = OpLog(handshake_op(self.side), "", self._now(), None)
            self._publish(BLOCKED, K_HANDSHAKE)
            self.sock.connect(self.address)
        else:
            assert self.listener is not None
            record = self._current = OpLog(handshake_op(self.side), "", self._now(), None)
            self._publish(BLOCKED, K_HANDSHAKE)
            conn, _ = self.listener.accept()
            self.sock = conn
            if self._aborted:
                raise _Aborted
            with contextlib.suppress(OSError):
                self.listener.close()
            self.listener = None
            # Accepted sockets inherit TCP_MAXSEG and TCP_NODELAY from the listener; set the
            # scenario's values again anyway (asyncio-style servers turn NODELAY on).
            sockopts.apply_initial(conn, nodelay=opts.nodelay, cork=opts.cork,
                                   quickack=opts.quickack)
        record.end_ns = self._now()
        self._progress += 1
        self._publish(RUNNING, K_NONE)
        self._emit_op(record)
        self._snapshot(self._n_ops - 1)

    def _snapshot(self, op_index: int) -> None:
        if self.want_tcp_info and self.sock is not None and not self._closed:
            data = sockopts.tcp_info(self.sock)
            if data:
                if len(data) != len(self._info_keys):
                    self._info_keys = tuple(data)
                    self._pending.append(self._info_keys)
                self._pending.append((self._now(), op_index, tuple(data.values())))

    def _run_script(self) -> None:
        for step in steps(self.spec.script):
            if self._aborted:
                raise _Aborted
            self._rt.tick()
            stmt = step.stmt
            record = self._current = OpLog(step.op, step.arg, self._now(), None,
                                           line=step.line, iteration=step.iteration,
                                           loop=step.loop)
            if self._closed and not isinstance(stmt, Sleep):
                raise _SideFailure(side_error(self.where, step.line, self.side,
                                              after_close(step.op)))
            self._execute(stmt, record)
            record.end_ns = self._now()
            self._progress += 1
            self._publish(RUNNING, K_NONE)
            self._emit_op(record)
            self._snapshot(self._n_ops - 1)

    def _execute(self, stmt: Statement, record: OpLog) -> None:
        sock = self.sock
        assert sock is not None
        if isinstance(stmt, Write):
            flags = (socket.MSG_MORE if stmt.more else 0) | (socket.MSG_EOR if stmt.eor else 0)
            self._publish(BLOCKED, K_WRITE, stmt.line, stmt.size, stmt.size)
            self._send([stmt.size], flags)
        elif isinstance(stmt, Writev):
            total = sum(stmt.parts)
            self._publish(BLOCKED, K_WRITE, stmt.line, total, total)
            self._send(list(stmt.parts), 0)
        elif isinstance(stmt, Read):
            self._read(stmt, record)
        elif isinstance(stmt, Sleep):
            self._publish(SLEEPING, K_NONE, stmt.line)
            self._sleep(stmt.duration / 1e6)
        elif isinstance(stmt, SetOpt):
            sockopts.set_option(sock, stmt.option, stmt.on)
        elif isinstance(stmt, SetTiming):
            sockopts.set_timing(sock, stmt.option, stmt.duration)
        elif isinstance(stmt, GetOpt):
            record.result = str(sockopts.get_option(sock, stmt.option))
        elif isinstance(stmt, Close):
            self._close()
        elif isinstance(stmt, Shutdown):
            sock.shutdown({"rd": socket.SHUT_RD, "wr": socket.SHUT_WR,
                           "rdwr": socket.SHUT_RDWR}[stmt.how])
        elif isinstance(stmt, SetValue):
            sockopts.set_value(sock, stmt.option, stmt.value)
        if self._aborted:
            raise _Aborted

    def _send(self, parts: list[int], flags: int) -> None:
        """One ``send`` (one part) or ``sendmsg`` (writev) from the shared payload buffer.

        A part larger than the buffer becomes several buffer-sized pieces, and when they
        do not fit one call (at most `_IOV_BATCH` pieces of one buffer each) every call but
        the last adds MSG_MORE: the kernel then holds a partial segment exactly as it
        would inside one big call, so the segments are those of a single system call."""
        assert self.sock is not None
        size = len(self._payload)
        pending: list[memoryview] = []
        queued = 0
        left = sum(parts)
        for part in parts:
            while part:
                n = min(part, size)
                pending.append(self._payload[:n])
                part -= n
                queued += n
                if len(pending) == _IOV_BATCH:
                    left -= queued
                    # a record ends (MSG_EOR) only with the write's last piece
                    self._send_pieces(pending, flags & ~socket.MSG_EOR | socket.MSG_MORE
                                      if left else flags)
                    pending, queued = [], 0
        if pending or not left:
            self._send_pieces(pending, flags)

    def _send_pieces(self, buffers: list[memoryview], flags: int) -> None:
        """One sendmsg()/send() with these buffers; continue only after a partial send."""
        assert self.sock is not None
        if len(buffers) == 1:
            self.sock.sendall(buffers[0], flags)
            return
        while buffers:
            sent = self.sock.sendmsg(buffers, (), flags)
            while buffers and sent >= len(buffers[0]):
                sent -= len(buffers[0])
                buffers.pop(0)
            if buffers and sent:
                buffers[0] = buffers[0][sent:]
            if self._aborted:
                raise _Aborted

    def _read(self, stmt: Read, record: OpLog) -> None:
        assert self.sock is not None
        got = 0
        view = memoryview(self._buf)
        while got < stmt.size:
            self._publish(BLOCKED, K_READ, stmt.line, stmt.size - got, stmt.size)
            n = self.sock.recv_into(view, min(len(view), stmt.size - got))
            if self._aborted:
                raise _Aborted
            if n == 0:
                record.result = eof_result(got)
                record.end_ns = self._now()
                raise _SideFailure(side_error(self.where, stmt.line, self.side,
                                              eof_error(self.side, stmt.size, got)))
            got += n
            self._progress += 1

    def _sleep(self, seconds: float) -> None:
        """Sleep to `SPIN_S` short of the deadline, then spin: time.sleep alone oversleeps
        a little per call, and over many `sleep` statements the real writes would drift
        against the model's (the model's sleeps are exact). The spin counts against the
        real-time budget (`RtGovernor`). SIGUSR1 interrupts it."""
        end = time.perf_counter() + seconds
        if seconds > 0.001 and self._pending:
            self._flush()
        while not self._aborted:
            left = end - time.perf_counter()
            if left <= 0:
                return
            if left > SPIN_S:
                time.sleep(min(left - SPIN_S, 0.1))
            else:
                self._rt.tick()
        raise _Aborted

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in (self.sock, self.listener):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()


def _biggest_write(body: tuple[Statement, ...]) -> int:
    """Largest single write (or writev part) anywhere in a script (iterative walk)."""
    biggest = 0
    stack = [body]
    while stack:
        for stmt in stack.pop():
            if isinstance(stmt, Repeat):
                stack.append(stmt.body)
            elif isinstance(stmt, Write):
                biggest = max(biggest, stmt.size)
            elif isinstance(stmt, Writev):
                biggest = max(biggest, *stmt.parts)
    return biggest


_IOV_BATCH = 512
"""Buffers per sendmsg() call (below IOV_MAX = 1024): at most 512 MiB per call."""


# ---------------------------------------------------------------- supervision
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


# ---------------------------------------------------------------- environment checks
def check_platform() -> None:
    if not sys.platform.startswith("linux"):
        system = platform.system() or sys.platform
        raise RealnetError(f"realnet runs on Linux only (this is {system}): it needs "
                           "TCP_CORK, TCP_QUICKACK, TCP_INFO and AF_PACKET")


def capture_unavailable() -> str | None:
    """Why packet capture cannot work here (None: it can)."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    except PermissionError:
        return "AF_PACKET capture needs CAP_NET_RAW (run as root)"
    except OSError as exc:
        return f"AF_PACKET capture failed: {exc.strerror or exc}"
    s.close()
    return None


def netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing"
    return None


TCP_TIMESTAMP_OPTION = 12
"""Bytes the timestamp option takes from every segment (net.ipv4.tcp_timestamps=1)."""


def maxseg_for(mss: int, fresh_namespace: bool = False) -> int:
    """TCP_MAXSEG that gives ``mss`` bytes of payload per segment.

    The scenario's ``mss`` is the payload size (the model's segment size; Linux's 1448 on
    a 1500-byte MTU). TCP_MAXSEG sets the MSS option, which does not count TCP options, so
    with timestamps on (the default, also in a new namespace) add their 12 bytes."""
    value = "1" if fresh_namespace else _read_sysctl("net.ipv4.tcp_timestamps")
    return mss + (TCP_TIMESTAMP_OPTION if value in (None, "1") else 0)


def base_meta(scenario: Scenario) -> dict[str, Any]:
    meta = trace_meta(scenario, kernel=platform.release())
    from realnet import hostfacts  # issue 18: every real trace records its hosts' facts
    meta["host_facts"] = hostfacts.local_facts(scenario)
    notes = real_run_caveats(scenario)
    if notes:
        meta["notes"] = notes
    return meta


# ---------------------------------------------------------------- packets -> segments
@dataclass(slots=True)
class _Seg:
    t_ns: int            # perf_counter_ns
    src: Side
    seq: int
    ack: int
    length: int
    flags: str
    window: int
    arrive_ns: int | None = None


def _side_of(p: Any, port: int) -> Side:
    return Side.SERVER if p.sport == port else Side.CLIENT


def segments_from_lo(packets: list[Any], offset_ns: int, port: int) -> list[_Seg]:
    """Loopback: every segment once (outgoing copy); it arrives when it is sent."""
    out = []
    for p in packets:
        t = p.t_ns - offset_ns
        out.append(_Seg(t, _side_of(p, port), p.seq, p.ack, p.payload_len, p.flags, p.window,
                        arrive_ns=t))
    return out


def segments_from_tuns(packets: dict[Side, list[Any]], offset: dict[Side, int],
                       port: int) -> list[_Seg]:
    """Emulated link: a side's outgoing packets on its own TUN give send times; the same
    packets arriving on the peer's TUN (relay injection) give arrival times."""
    out: list[_Seg] = []
    arrivals: dict[Side, dict[tuple[Any, ...], list[int]]] = {s: {} for s in Side}
    for side in Side:
        for p in packets.get(side, []):
            if not p.outgoing:
                key = (p.seq, p.ack, p.flags, p.payload_len)
                arrivals[_side_of(p, port)].setdefault(key, []).append(p.t_ns - offset[side])
    for side in Side:
        for p in packets.get(side, []):
            if p.outgoing and _side_of(p, port) is side:
                key = (p.seq, p.ack, p.flags, p.payload_len)
                queue = arrivals[side].get(key)
                arrive = queue.pop(0) if queue else None
                out.append(_Seg(p.t_ns - offset[side], side, p.seq, p.ack, p.payload_len,
                                p.flags, p.window, arrive_ns=arrive))
    out.sort(key=lambda s: s.t_ns)
    return out


# ---------------------------------------------------------------- trace assembly
def build_trace(scenario: Scenario, logs: dict[Side, SideLog], segs: list[_Seg],
                meta: dict[str, Any], outcome: RunEnd) -> Trace:
    """Relative times (µs from the client's SYN), relative seq/ack, ops, TCP_INFO events."""
    syn = next((s for s in segs if s.src is Side.CLIENT and "S" in s.flags
                and "A" not in s.flags), None)
    client_ops = logs[Side.CLIENT].ops
    if syn is not None:
        t0 = syn.t_ns
    elif client_ops:
        t0 = client_ops[0].start_ns
    else:
        t0 = min((o.start_ns for log in logs.values() for o in log.ops), default=0)

    def rel(ns: int | None) -> Micros | None:
        return None if ns is None else Micros(max(0, round((ns - t0) / 1000)))

    isn: dict[Side, int] = {}
    for s in segs:
        if "S" in s.flags and s.src not in isn:
            isn[s.src] = s.seq
    trace = Trace(source="realnet", title=scenario.title, meta=meta,
                  outcome=outcome.outcome, message=outcome.message)
    for s in segs:
        mine, theirs = isn.get(s.src, 0), isn.get(s.src.peer, 0)
        trace.segments.append(SegmentRecord(
            t=rel(s.t_ns) or Micros(0), src=s.src, seq=(s.seq - mine) % 2**32,
            ack=(s.ack - theirs) % 2**32 if "A" in s.flags else 0, length=s.length,
            flags=s.flags, window=s.window, arrive=rel(s.arrive_ns)))
    ops: list[OpRecord] = []
    for side, log in logs.items():
        for o in log.ops:
            start = Micros(0) if o.op in HANDSHAKE_OPS else rel(o.start_ns)
            ops.append(OpRecord(side=side, op=o.op, arg=o.arg, start=start or Micros(0),
                                end=rel(o.end_ns), line=o.line, iteration=o.iteration,
                                loop=o.loop, result=o.result))
        for info in log.infos:
            op = log.ops[info.op_index] if 0 <= info.op_index < len(log.ops) else None
            after = f"{op.op} {op.arg}".strip() if op else "?"
            trace.events.append(EventRecord(
                t=rel(info.t_ns) or Micros(0), side=side, kind=TCP_INFO_KIND, code="TCP_INFO",
                reason="kernel TCP_INFO snapshot", detail=f"after {after}", data=info.data))
    ops.sort(key=lambda o: (o.start, o.op not in HANDSHAKE_OPS))
    trace.ops = ops
    trace.events.sort(key=lambda e: e.t)
    retrans = {}
    for side, log in logs.items():
        if log.infos:
            retrans[side.value] = log.infos[-1].data.get("total_retrans", 0)
    meta["retransmissions"] = retrans
    rests = {side.value: log.rt_rests for side, log in logs.items() if log.rt_rests}
    if rests:
        meta["rt_rests"] = rests
    # TCP_INFO cannot be read after close(); the capture sees later ones (e.g. a FIN's TLP).
    seen: dict[str, int] = {}
    for side in Side:
        high, count = -1, 0
        for seg in trace.segments:
            if seg.src is side and (seg.length or "F" in seg.flags):
                end = seg.seq + seg.length + (1 if "F" in seg.flags else 0)
                if end <= high:
                    count += 1
                high = max(high, end)
        if count:
            seen[side.value] = count
    if seen:
        meta["retransmitted_segments"] = seen
    return trace


def report_retransmissions(trace: Trace, say: Progress) -> None:
    retrans = trace.meta.get("retransmissions", {})
    seen = trace.meta.get("retransmitted_segments", {})
    if any(retrans.values()) or seen:
        counts = {k: max(retrans.get(k, 0), seen.get(k, 0)) for k in {*retrans, *seen}}
        say("realnet: the kernel retransmitted ("
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v)
            + " segments, TCP_INFO total_retrans or seen on the wire)")
