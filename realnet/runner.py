"""Run a scenario over real kernel sockets and record it as a `Trace` (source "realnet").

Owns: executing both sides' scripts with real system calls (``send``, ``send(MSG_MORE)``,
``sendmsg`` for writev, a ``recv`` loop for read, ``setsockopt``/``getsockopt``, sleep,
``close``), choosing loopback or an emulated link, packet capture, TCP_INFO snapshots,
deadlock/timeout handling and cleanup, and turning all of that into a trace.

Each side runs in its own forked process with a *blocking* socket, so a blocked read wakes
as soon as the kernel delivers (~15 µs) and neither side ever waits for the other's Python
code. Threads were tried first: GIL hand-offs (with the capture thread running too) delayed
wake-ups by 0.1-4 ms; one asyncio loop would serialise the sides. `run_real` is synchronous.

This module is the bridge to nagle_sim: it imports only its pure modules (scenario, trace,
model.events). Must not import simpy, textual or rich.
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
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nagle_sim.model.events import Micros, Side
from nagle_sim.scenario import (
    Close,
    GetOpt,
    Read,
    Repeat,
    Scenario,
    ScenarioError,
    SetOpt,
    SideSpec,
    Sleep,
    Statement,
    Write,
    Writev,
    describe,
    flatten,
    outermost_loops,
    real_run_caveats,
)
from nagle_sim.trace import EventRecord, OpRecord, SegmentRecord, Trace
from realnet import sockopts

Progress = Callable[[str], None]

NO_AUTOCORK = {"net.ipv4.tcp_autocorking": "0"}
"""Sysctls of the emulated link's namespaces (see docs/realnet.md, "autocork")."""

TCP_INFO_KIND = "tcp_info"


class RealnetError(ScenarioError):
    """A real run cannot be made here (wrong OS, missing privilege, bad remote...).

    Subclasses `ScenarioError` so the CLI prints the one-line message and exits 2."""


class _Aborted(Exception):
    """The runner stopped this side (deadlock, timeout, the peer failed, Ctrl-C)."""


# ---------------------------------------------------------------- script costs
def _script_cost(body: tuple[Statement, ...], rtt_s: float) -> tuple[float, int]:
    """(total sleep seconds, number of blocking reads) of a script, without expanding it."""
    sleep, reads = 0.0, 0
    for stmt in body:
        if isinstance(stmt, Repeat):
            s, r = _script_cost(stmt.body, rtt_s)
            sleep += s * stmt.count
            reads += r * stmt.count
        elif isinstance(stmt, Sleep):
            sleep += stmt.duration / 1e6
        elif isinstance(stmt, Read):
            reads += 1
    return sleep, reads


def rtt_s(scenario: Scenario) -> float:
    return (scenario.link.to_server_delay + scenario.link.to_client_delay) / 1e6


def run_timeout_s(scenario: Scenario) -> float:
    """Whole-run limit: 3 × an upper estimate of the run's duration + 10 s.

    The estimate is each side's sleeps plus, per blocking read, one round trip and 250 ms
    (more than any delayed-ACK or probe timer hold), so a healthy run never reaches it."""
    rtt = rtt_s(scenario)
    worst = 0.0
    for spec in (scenario.client, scenario.server):
        sleep, reads = _script_cost(spec.script, rtt)
        worst = max(worst, sleep + reads * (rtt + 0.25))
    return 3 * (worst + 2 * rtt) + 10.0


def stall_timeout_s(scenario: Scenario) -> float:
    """No progress for this long while every unfinished side is blocked = deadlock."""
    return 2.0 + 4 * rtt_s(scenario)


# ---------------------------------------------------------------- one side
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

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "arg": self.arg, "start_ns": self.start_ns,
                "end_ns": self.end_ns, "line": self.line, "iter": list(self.iteration),
                "result": self.result, "loop": self.loop}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OpLog:
        return cls(op=str(d["op"]), arg=str(d.get("arg", "")), start_ns=int(d["start_ns"]),
                   end_ns=None if d.get("end_ns") is None else int(d["end_ns"]),
                   line=int(d.get("line", 0)), iteration=tuple(d.get("iter", ())),
                   result=d.get("result"), loop=int(d.get("loop", 0)))


@dataclass(slots=True)
class InfoLog:
    """A TCP_INFO snapshot taken right after an op (``op_index`` into the side's ops)."""

    t_ns: int
    op_index: int
    data: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"t_ns": self.t_ns, "op": self.op_index, "data": self.data}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InfoLog:
        return cls(t_ns=int(d["t_ns"]), op_index=int(d["op"]),
                   data={str(k): int(v) for k, v in dict(d["data"]).items()})


@dataclass(slots=True)
class SideLog:
    """Everything one side recorded; serialisable for the remote protocol."""

    ops: list[OpLog] = field(default_factory=list)
    infos: list[InfoLog] = field(default_factory=list)
    error: str | None = None
    done: bool = False
    waiting: str | None = None
    waiting_line: int = 0
    port: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"ops": [o.to_json() for o in self.ops],
                "tcp_info": [i.to_json() for i in self.infos], "error": self.error,
                "done": self.done, "waiting": self.waiting, "waiting_line": self.waiting_line,
                "port": self.port}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SideLog:
        return cls(ops=[OpLog.from_json(o) for o in d.get("ops", [])],
                   infos=[InfoLog.from_json(i) for i in d.get("tcp_info", [])],
                   error=d.get("error"), done=bool(d.get("done")),
                   waiting=d.get("waiting"), waiting_line=int(d.get("waiting_line", 0)),
                   port=int(d.get("port", 0)))


class _SideFailure(Exception):
    """A scripted failure with a ready one-line message (EOF on read, op after close)."""


# Live state a side publishes in shared memory for the supervisor (deadlock detection).
_STATE = struct.Struct("=qiiiqq")   # progress, state, kind, line, remaining, total
RUNNING, BLOCKED, SLEEPING, DONE = 0, 1, 2, 3
K_NONE, K_HANDSHAKE, K_READ, K_WRITE = 0, 1, 2, 3
PR_SET_PDEATHSIG = 1
SIDE_RT_PRIORITY = 5
"""SCHED_FIFO priority of the side processes when allowed (root); 0 = normal scheduling."""


def rt_priority_available() -> int:
    """`SIDE_RT_PRIORITY` if this process may use SCHED_FIFO, else 0."""
    if not hasattr(os, "SCHED_FIFO"):
        return 0
    try:
        limit = os.sched_get_priority_max(os.SCHED_FIFO)
    except OSError:
        return 0
    return min(SIDE_RT_PRIORITY, limit) if os.geteuid() == 0 else 0


class SideRunner:
    """Executes one side's script on a real socket, in a forked child process.

    Each side gets its own process so neither waits for the other's Python (GIL) and a
    blocked read wakes as soon as the kernel delivers (~15 µs). The client side is given an
    unconnected socket and an address; the server side a listening socket (it accepts one
    connection). The script ends with close(), as in the simulator. Times are
    perf_counter_ns (CLOCK_MONOTONIC, shared by all processes); the trace builder makes
    them relative. The parent sees live progress through a small shared memory block and
    gets the full `SideLog` (JSON, via a temporary file) when the child exits.
    """

    def __init__(self, side: Side, spec: SideSpec, where: str, *,
                 sock: socket.socket | None = None, address: tuple[str, int] | None = None,
                 listener: socket.socket | None = None, tcp_info: bool = True,
                 rt_priority: int = 0) -> None:
        self.side = side
        self.rt_priority = rt_priority
        self.spec = spec
        self.where = where
        self.sock = sock
        self.address = address
        self.listener = listener
        self.want_tcp_info = tcp_info
        self.log = SideLog()
        self.pid = 0
        self._shm = mmap.mmap(-1, _STATE.size)
        fd, self._log_path = tempfile.mkstemp(prefix=f"nsim-{os.getpid()}-{side.value}-",
                                              suffix=".json")
        os.close(fd)
        self._go_r, self._go_w = os.pipe2(os.O_CLOEXEC)
        self._exited = False
        self._aborted = False
        self._buf = bytearray(65536)
        self._payload = b""
        self._closed = False
        self._progress = 0

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
                os.close(self._go_w)
                self._prepare_child()
                os.read(self._go_r, 1)
                self._child()
            except BaseException:  # pragma: no cover - never return into the parent's code
                code = 70
            finally:
                os._exit(code)
        self.pid = pid
        os.close(self._go_r)
        for s in (self.sock, self.listener):
            if s is not None:
                s.close()

    def go(self) -> None:
        """Let the child start its script (an EOF, e.g. the parent dying, also releases it,
        but PDEATHSIG then kills it)."""
        with contextlib.suppress(OSError):
            os.write(self._go_w, b"g")
            os.close(self._go_w)

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
            return "the handshake", 0
        if kind == K_READ:
            return f"{remaining} more of {total} bytes", line
        return f"to write {total} bytes (the peer is not reading)", line

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

    def _collect(self) -> None:
        self._exited = True
        try:
            with open(self._log_path, encoding="utf-8") as f:
                text = f.read()
            if text:
                self.log = SideLog.from_json(json.loads(text))
            elif not self.log.error:
                self.log.error = (f"{self.where}: {self.side.value}: the side's process ended "
                                  "without a report (killed?)")
        except (OSError, ValueError) as exc:
            self.log.error = f"{self.where}: {self.side.value}: unreadable report: {exc}"
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self._log_path)

    def cleanup(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._go_w)
        if self.pid and not self._exited:
            self.abort()
            self.join(2.0)
        with contextlib.suppress(OSError):
            os.unlink(self._log_path)

    # -- child side --------------------------------------------------------------
    def _prepare_child(self) -> None:
        """Everything before the clock starts (the child then only waits for `go`)."""
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if self.rt_priority:
            # CFS lets a woken task wait up to a tick (4 ms at HZ=250) behind whatever runs
            # on its CPU; as a (low) real-time task it runs at once. Below the relay's 10.
            with contextlib.suppress(OSError, AttributeError):
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.rt_priority))
        signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent handles Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, self._on_abort)
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
        try:
            self._main()
        finally:
            self._publish(DONE, K_NONE)
            with open(self._log_path, "w", encoding="utf-8") as f:
                json.dump(self.log.to_json(), f)

    def _warm_up(self) -> None:
        """Take the first-call costs (copy-on-write page faults after fork, the payload
        allocation, first TCP_INFO) before the clock starts: ~0.3-1 ms otherwise."""
        biggest = 0
        for n, (stmt, path) in enumerate(flatten(self.spec.script)):
            if isinstance(stmt, Write):
                biggest = max(biggest, stmt.size)
            elif isinstance(stmt, Writev):
                biggest = max(biggest, *stmt.parts)
            OpLog(*describe(stmt), self._now(), None, line=stmt.line, iteration=path)
            if n > 10_000:
                break
        self._data(min(biggest, 64 << 20))
        target = self.sock or self.listener
        if target is not None and self.want_tcp_info:
            sockopts.tcp_info(target)
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
                op = self.log.ops[-1] if self.log.ops else None
                what = f"{op.op} {op.arg}".strip() if op else "connect"
                line = op.line if op else 0
                self.log.error = (f"{self.where}:{line}: {self.side.value} {what} failed: "
                                  f"{exc.strerror or exc}")
        except Exception as exc:  # pragma: no cover - a bug; surface it, never hang
            self.log.error = f"{self.where}: {self.side.value}: internal error: {exc!r}"
        finally:
            self._close()

    def _now(self) -> int:
        return time.perf_counter_ns()

    def _establish(self) -> None:
        opts = self.spec.options
        if self.side is Side.CLIENT:
            assert self.sock is not None and self.address is not None
            record = OpLog("connect", "", self._now(), None)
            self.log.ops.append(record)
            self._publish(BLOCKED, K_HANDSHAKE)
            self.sock.connect(self.address)
        else:
            assert self.listener is not None
            record = OpLog("accept", "", self._now(), None)
            self.log.ops.append(record)
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
        self._snapshot(len(self.log.ops) - 1)

    def _snapshot(self, op_index: int) -> None:
        if self.want_tcp_info and self.sock is not None and not self._closed:
            data = sockopts.tcp_info(self.sock)
            if data:
                self.log.infos.append(InfoLog(self._now(), op_index, data))

    def _run_script(self) -> None:
        loops = outermost_loops(self.spec.script)
        for stmt, path in flatten(self.spec.script):
            if self._aborted:
                raise _Aborted
            op, arg = describe(stmt)
            record = OpLog(op, arg, self._now(), None, line=stmt.line, iteration=path,
                           loop=loops[id(stmt)])
            self.log.ops.append(record)
            if self._closed and not isinstance(stmt, Sleep):
                raise _SideFailure(f"{self.where}:{stmt.line}: {self.side.value} "
                                   f"{op} after close")
            self._execute(stmt, record)
            record.end_ns = self._now()
            self._progress += 1
            self._publish(RUNNING, K_NONE)
            self._snapshot(len(self.log.ops) - 1)

    def _execute(self, stmt: Statement, record: OpLog) -> None:
        sock = self.sock
        assert sock is not None
        if isinstance(stmt, Write):
            flags = socket.MSG_MORE if stmt.more else 0
            self._publish(BLOCKED, K_WRITE, stmt.line, stmt.size, stmt.size)
            sock.sendall(self._data(stmt.size), flags)
        elif isinstance(stmt, Writev):
            total = sum(stmt.parts)
            self._publish(BLOCKED, K_WRITE, stmt.line, total, total)
            self._sendmsg([self._data(n) for n in stmt.parts])
        elif isinstance(stmt, Read):
            self._read(stmt, record)
        elif isinstance(stmt, Sleep):
            self._publish(SLEEPING, K_NONE, stmt.line)
            self._sleep(stmt.duration / 1e6)
        elif isinstance(stmt, SetOpt):
            sockopts.set_option(sock, stmt.option, stmt.on)
        elif isinstance(stmt, GetOpt):
            record.result = str(sockopts.get_option(sock, stmt.option))
        elif isinstance(stmt, Close):
            self._close()
        if self._aborted:
            raise _Aborted

    def _data(self, size: int) -> memoryview:
        if len(self._payload) < size:
            self._payload = b"x" * size
        return memoryview(self._payload)[:size]

    def _sendmsg(self, buffers: list[memoryview]) -> None:
        """One sendmsg() with several buffers (writev); continue only after a partial send."""
        assert self.sock is not None
        while buffers:
            sent = self.sock.sendmsg(buffers)
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
                record.result = f"eof after {got} B"
                record.end_ns = self._now()
                raise _SideFailure(
                    f"{self.where}:{stmt.line}: {self.side.value} read {stmt.size} hit end of "
                    f"stream after {got} B: the {self.side.peer.value} closed the connection")
            got += n
            self._progress += 1

    def _sleep(self, seconds: float) -> None:
        """Sleep to 0.2 ms short of the deadline, then spin: time.sleep alone oversleeps by
        tens of µs per call, and over many `sleep` statements the real writes would drift
        against the model's (the model's sleeps are exact). SIGUSR1 interrupts it."""
        end = time.perf_counter() + seconds
        while not self._aborted:
            left = end - time.perf_counter()
            if left <= 0:
                return
            if left > SPIN_S:
                time.sleep(min(left - SPIN_S, 0.1))
        raise _Aborted

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in (self.sock, self.listener):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()


# ---------------------------------------------------------------- supervision
@dataclass(slots=True)
class Outcome:
    outcome: str = "ok"
    message: str = ""


def supervise(scenario: Scenario, sides: dict[Side, Any], *, timeout_s: float,
              stall_s: float) -> Outcome:
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
            return Outcome("error", errors[0])
        now = time.monotonic()
        progress = tuple(r.progress for r in sides.values())
        if progress != last_progress:
            last_progress, last_change = progress, now
        elif (all(finished[side] or r.blocked for side, r in sides.items())
              and now - last_change > stall_s):
            parts = []
            for side, r in sides.items():
                what, line = r.waiting_text()
                if finished[side] or not what:
                    parts.append(f"{side.value} finished")
                else:
                    where = f" (line {line})" if line else ""
                    parts.append(f"{side.value} waits for {what}{where}")
            for r in sides.values():
                r.abort()
            return Outcome("deadlock", f"{scenario.source}: deadlock: {', '.join(parts)}")
        if now - start > timeout_s:
            for r in sides.values():
                r.abort()
            return Outcome("limit", f"{scenario.source}: stopped: still running after "
                                    f"{timeout_s:g} s (the run's time limit)")
        time.sleep(0.005)
    errors = [r.log.error for r in sides.values() if r.log.error]
    if errors:
        return Outcome("error", errors[0])
    return Outcome()


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


def _read_sysctl(key: str) -> str | None:
    try:
        with open(os.path.join("/proc/sys", *key.split(".")), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


# ---------------------------------------------------------------- the run
def run_real(scenario: Scenario, *, remote: str | None = None,
             progress: Progress | None = None, timeout_s: float | None = None) -> Trace:
    """Run ``scenario`` over real kernel sockets and return its trace.

    Loopback when both link delays are 0, else an `EmulatedLink` (root). With ``remote``
    ("HOST:PORT" of a ``nagle-sim realnet serve``) the server side runs there.

    Args:
        scenario: the scenario; its ``mss`` is applied with TCP_MAXSEG on both sides.
        remote: run the server side on a remote serve process.
        progress: called with one-line status messages (what is captured, what is missing).
        timeout_s: whole-run limit (default `run_timeout_s`).

    Returns:
        A `Trace` with ``source="realnet"``: ops with real start/end, captured segments
        (seq/ack relative to each side's ISN), TCP_INFO snapshots as ``tcp_info`` events.

    Raises:
        RealnetError: not Linux, delays without root, a remote that cannot be used.
    """
    check_platform()
    say = progress or (lambda _msg: None)
    if remote:
        from realnet.remote import run_remote
        return run_remote(scenario, remote, progress=say, timeout_s=timeout_s)
    emulated = bool(scenario.link.to_server_delay or scenario.link.to_client_delay)
    if emulated:
        missing = netns_unavailable()
        if missing:
            raise RealnetError(f"{scenario.source}: the link delays need an emulated link, and "
                               f"{missing}; run as root or set the link delays to 0")
    return _LocalRun(scenario, say, emulated, timeout_s).run()


class _LocalRun:
    def __init__(self, scenario: Scenario, say: Progress, emulated: bool,
                 timeout_s: float | None) -> None:
        self.scenario = scenario
        self.say = say
        self.emulated = emulated
        self.timeout_s = timeout_s if timeout_s is not None else run_timeout_s(scenario)
        self.meta: dict[str, Any] = base_meta(scenario)

    def run(self) -> Trace:
        from realnet.capture import Capture

        sc = self.scenario
        with contextlib.ExitStack() as stack:
            captures: list[tuple[Side, Any]] = []
            if self.emulated:
                from realnet.netns import EmulatedLink

                mtu = max(1500, min(65535, maxseg_for(sc.link.mss, True) + 40))
                # A packet stays charged to its socket until the relay reads it from the
                # TUN queue, which autocork sees as a busy device queue. Keep autocork only
                # when the scenario models such a queue (tx_complete_us); otherwise it would
                # merge writes the model (a queue-less link) sends one by one.
                autocork = sc.link.tx_complete > 0
                self.say(f"realnet: emulated link, {sc.link.to_server_delay / 1000:g} ms to "
                         f"server / {sc.link.to_client_delay / 1000:g} ms to client, autocorking "
                         + ("on (the scenario models a device queue)" if autocork
                            else "off in both namespaces"))
                link = stack.enter_context(EmulatedLink(
                    sc.link.to_server_delay, sc.link.to_client_delay, mtu=mtu,
                    sysctls=None if autocork else NO_AUTOCORK))
                listener = link.socket_in("server")
                client = link.socket_in("client")
                server_addr = link.server_addr
                self.meta.update(link="emulated", link_mtu=mtu,
                                 tcp_autocorking=1 if autocork else 0)
                if link.relay_pid:
                    self.meta["relay_pid"] = link.relay_pid
            else:
                listener = socket.socket()
                client = socket.socket()
                server_addr = "127.0.0.1"
                self.meta.update(link="loopback",
                                 tcp_autocorking=_int(_read_sysctl("net.ipv4.tcp_autocorking")))
            stack.callback(listener.close)
            stack.callback(client.close)
            for s in (listener, client):
                sockopts.set_maxseg(s, maxseg_for(sc.link.mss, self.emulated))
            listener.bind((server_addr, 0))
            listener.listen(1)
            port = listener.getsockname()[1]
            # The model's congestion control (BBR on this machine, or CUBIC-like when a
            # profile says bbr = false) is set per socket so both executors agree.
            notes = [sockopts.apply_initial(
                listener, nodelay=sc.server.options.nodelay, cork=False,
                quickack=sc.server.options.quickack,
                congestion=sockopts.congestion_for(sc.server.profile.bbr))]
            notes.append(sockopts.apply_initial(
                client, nodelay=sc.client.options.nodelay, cork=sc.client.options.cork,
                quickack=sc.client.options.quickack,
                congestion=sockopts.congestion_for(sc.client.profile.bbr)))
            self.meta["congestion_control"] = {
                side.value: sockopts.congestion_for(sc.side(side).profile.bbr) for side in Side}
            for note in filter(None, notes):
                self.say(f"realnet: {note}")
                self.meta.setdefault("notes", []).append(note)

            rt = rt_priority_available()
            self.meta["sched"] = f"SCHED_FIFO {rt}" if rt else "normal (not root)"
            sides = {
                Side.SERVER: SideRunner(Side.SERVER, sc.server, sc.source, listener=listener,
                                        rt_priority=rt),
                Side.CLIENT: SideRunner(Side.CLIENT, sc.client, sc.source, sock=client,
                                        address=(server_addr, port), rt_priority=rt),
            }
            for r in sides.values():
                stack.callback(r.cleanup)
            sides[Side.SERVER].start(foreign=(client,))
            sides[Side.CLIENT].start(foreign=(listener,))
            why_not = capture_unavailable()
            if why_not:
                self.meta["capture"] = f"unavailable: {why_not}"
                self.say(f"realnet: no packet capture ({why_not}): recording application "
                         "timings and TCP_INFO only")
            elif self.emulated:
                for side in Side:
                    cap = Capture(link.ifname, netns=link.ns(side.value), filter_ports={port},
                                  outgoing_only=False)
                    captures.append((side, cap))
                self.meta["capture"] = (f"AF_PACKET on {link.ifname} in each namespace "
                                        "(send and arrival times)")
            else:
                captures.append((Side.CLIENT, Capture("lo", filter_ports={port})))
                self.meta["capture"] = "AF_PACKET on lo (outgoing copies, port-filtered)"
                self.meta["gso"] = ("loopback passes GSO super-segments unsplit: a captured "
                                    "segment may carry several MSS; compare bytes")
            for _, cap in captures:
                cap.start()
                stack.callback(_stop_quietly, cap)

            # The server is in accept() before the client connects, as in the simulator.
            sides[Side.SERVER].go()
            sides[Side.SERVER].ready()
            time.sleep(0.001)
            sides[Side.CLIENT].go()
            outcome = supervise(sc, sides, timeout_s=self.timeout_s,
                                stall_s=stall_timeout_s(sc))
            for r in sides.values():
                r.join(5.0)
            # Let the last FIN / ACK cross the link before the captures stop.
            time.sleep(rtt_s(sc) + (0.03 if self.emulated else 0.01))
            packets = {side: cap.stop() for side, cap in captures}
            for side, cap in captures:
                if cap.stats is not None and cap.stats.kernel_drops:
                    self.meta.setdefault("capture_drops", {})[side.value] = cap.stats.kernel_drops
            offset = {side: cap.clock_offset_ns for side, cap in captures}
        logs = {side: r.log for side, r in sides.items()}
        if self.emulated and packets:
            segs = segments_from_tuns(packets, offset, port)
        elif packets:
            segs = segments_from_lo(packets[Side.CLIENT], offset[Side.CLIENT], port)
        else:
            segs = []
        trace = build_trace(sc, logs, segs, self.meta, outcome)
        report_retransmissions(trace, self.say)
        return trace


SPIN_S = 0.0002
"""The last part of a `sleep` the runner spins instead of sleeping (precision over CPU)."""

TCP_TIMESTAMP_OPTION = 12
"""Bytes the timestamp option takes from every segment (net.ipv4.tcp_timestamps=1)."""


def maxseg_for(mss: int, fresh_namespace: bool = False) -> int:
    """TCP_MAXSEG that gives ``mss`` bytes of payload per segment.

    The scenario's ``mss`` is the payload size (the model's segment size; Linux's 1448 on
    a 1500-byte MTU). TCP_MAXSEG sets the MSS option, which does not count TCP options, so
    with timestamps on (the default, also in a new namespace) add their 12 bytes."""
    value = "1" if fresh_namespace else _read_sysctl("net.ipv4.tcp_timestamps")
    return mss + (TCP_TIMESTAMP_OPTION if value in (None, "1") else 0)


def _stop_quietly(cap: Any) -> None:
    with contextlib.suppress(Exception):
        cap.stop()


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def base_meta(scenario: Scenario) -> dict[str, Any]:
    s = scenario
    meta: dict[str, Any] = {
        "scenario": s.source, "mss": s.link.mss,
        "to_server_delay_ms": s.link.to_server_delay / 1000,
        "to_client_delay_ms": s.link.to_client_delay / 1000,
        "kernel": platform.release(),
        **{f"{side.value}_profile": s.side(side).profile.name for side in Side},
        **{f"{side.value}_options": {"nodelay": s.side(side).options.nodelay,
                                     "cork": s.side(side).options.cork}
           for side in Side},
    }
    notes = real_run_caveats(s)
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
                meta: dict[str, Any], outcome: Outcome) -> Trace:
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
            start = Micros(0) if o.op in ("connect", "accept") else rel(o.start_ns)
            ops.append(OpRecord(side=side, op=o.op, arg=o.arg, start=start or Micros(0),
                                end=rel(o.end_ns), line=o.line, iteration=o.iteration,
                                loop=o.loop, result=o.result))
        for info in log.infos:
            op = log.ops[info.op_index] if 0 <= info.op_index < len(log.ops) else None
            after = f"{op.op} {op.arg}".strip() if op else "?"
            trace.events.append(EventRecord(
                t=rel(info.t_ns) or Micros(0), side=side, kind=TCP_INFO_KIND, code="TCP_INFO",
                reason="kernel TCP_INFO snapshot", detail=f"after {after}", data=info.data))
    ops.sort(key=lambda o: (o.start, o.op not in ("connect", "accept")))
    trace.ops = ops
    trace.events.sort(key=lambda e: e.t)
    retrans = {}
    for side, log in logs.items():
        if log.infos:
            retrans[side.value] = log.infos[-1].data.get("total_retrans", 0)
    meta["retransmissions"] = retrans
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
