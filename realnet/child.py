"""One side's program, in the forked process that runs it: the script as system calls.

Owns: executing one side's script on a real socket (``send``, ``send(MSG_MORE)``,
``sendmsg`` for writev, a ``recv`` loop for read, ``setsockopt``/``getsockopt``, sleep,
``close``) as `SideProgram`, under a bounded real-time duty cycle (`RtGovernor`); the
state block it publishes for the parent (`STATE`: progress, blocked on what, which line);
streaming its records (`realnet.records`) into the log the parent reads. The parent's
handle on the process is `realnet.side.SideRunner`, which forks and starts this.

Each side runs in its own forked process with a *blocking* socket, so a blocked read wakes
as soon as the kernel delivers (~15 µs) and neither side ever waits for the other's Python
code. Threads were tried first: GIL hand-offs (with the capture thread running too) delayed
wake-ups by 0.1-4 ms; one asyncio loop would serialise the sides. Must not import simpy,
textual or rich.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import mmap
import os
import signal
import socket
import struct
import time
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import (
    Close,
    GetOpt,
    Read,
    Repeat,
    SetOpt,
    SetTiming,
    SetValue,
    Shutdown,
    SideSpec,
    Sleep,
    Statement,
    Write,
    Writev,
    clip,
)
from nagle_sim.scenario.steps import (
    after_close,
    eof_error,
    eof_result,
    handshake_op,
    side_error,
    steps,
)
from realnet import sockopts
from realnet.records import OpLog, SideLog


class _Aborted(Exception):
    """The runner stopped this side (deadlock, timeout, the peer failed, Ctrl-C)."""


class _SideFailure(Exception):
    """A scripted failure with a ready one-line message (EOF on read, op after close)."""


# Live state a side publishes in shared memory for the supervisor (deadlock detection).
STATE = struct.Struct("=qiiiqq")   # progress, state, kind, line, remaining, total
RUNNING, BLOCKED, SLEEPING, DONE = 0, 1, 2, 3
K_NONE, K_HANDSHAKE, K_READ, K_WRITE = 0, 1, 2, 3
PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29

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


def libc() -> Any:
    """The C library, loaded in the parent before any fork: a child of a multi-threaded
    process (the serve) should not take the dynamic loader's lock."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


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
        self.refused = False
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
            self.refused = self.refused or (on and self.priority > 0)
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


class SideProgram:
    """What one side's forked process runs: everything the parent set up before the fork
    (the socket, or the listener and the peer's address; the shared state block; the log
    memfd), then the script, one statement at a time, its records streamed to the log."""

    def __init__(self, side: Side, spec: SideSpec, where: str, *,
                 sock: socket.socket | None, address: tuple[str, int] | None,
                 listener: socket.socket | None, tcp_info: bool, rt_priority: int,
                 shm: mmap.mmap, log_fd: int) -> None:
        self.side = side
        self.spec = spec
        self.where = where
        self.sock = sock
        self.address = address
        self.listener = listener
        self.want_tcp_info = tcp_info
        self.log = SideLog()
        self._shm = shm
        self._log_fd = log_fd
        self._aborted = False
        self._buf = bytearray(65536)
        self._payload = memoryview(b"")
        self._closed = False
        self._progress = 0
        self._rt = RtGovernor(rt_priority)
        self._out: Any = None
        self._info_keys: tuple[str, ...] = ()
        self._n_ops = 0
        self._current: OpLog | None = None
        self._pending: list[Any] = []

    def prepare(self) -> None:
        """Everything before the clock starts (the child then only waits for `go`)."""
        with contextlib.suppress(Exception):
            c = libc()
            c.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            # time.sleep at normal priority wakes up to 50 µs late (the default timer
            # slack); a FIFO task has none. 1 ns keeps the spin short either way.
            c.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1))
        signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent handles Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, self._on_abort)
        self._out = open(self._log_fd, "w", encoding="utf-8",  # noqa: SIM115
                         buffering=LOG_BUFFER_BYTES, closefd=False)
        gc.disable()
        self._warm_up()

    def run(self) -> None:
        """The script, then the end record: what the side process does once it is let go."""
        # CFS lets a woken task wait up to a tick (4 ms at HZ=250) behind whatever runs on
        # its CPU; as a (low) real-time task it runs at once. Below the relay's 10.
        self._rt.start()
        try:
            self._main()
        finally:
            self._rt.stop()
            self.log.rt_rests = self._rt.rests
            self.log.rt_refused = self._rt.refused
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
        STATE.pack_into(self._shm, 0, self._progress, state, kind, line, remaining, total)

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
                # a writev's argument runs to 11,264 characters: cut for the message
                what = f"{op.op} {clip(op.arg)}".strip() if op else "connect"
                line = op.line if op else 0
                if op is not None and op.end_ns is None:
                    op.end_ns = self._now()     # when the call failed (ETIMEDOUT, EPIPE …)
                self.log.error = (f"{self.where}:{line}: {self.side.value} {what} failed: "
                                  f"{exc.strerror or exc}")
        except MemoryError:
            op = self._current
            what = f" ({op.op} {clip(op.arg)}, line {op.line})" if op else ""
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
