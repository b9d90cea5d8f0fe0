"""The parent's handle on one side's process: fork it, start it, watch it, collect it.

Owns: `SideRunner` — creating the side's shared state block, log memfd and start pipe,
forking the process that runs `realnet.child.SideProgram`, starting it (`go`), reading
its live state (progress, blocked, what it waits for: the supervisor's deadlock view),
stopping it (`abort`: SIGUSR1, then SIGKILL), and reading its records back once it ended
(`records`, `log`). Must not import simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import SideSpec
from nagle_sim.scenario.steps import HANDSHAKE_WAIT, read_wait
from realnet.child import (
    BLOCKED,
    DONE,
    K_HANDSHAKE,
    K_NONE,
    K_READ,
    STATE,
    SideProgram,
    libc,
)
from realnet.records import LogReader, SideLog


class SideRunner:
    """The parent's handle on one side's process, which executes the side's script on a
    real socket (`realnet.child.SideProgram`).

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
        self._shm = mmap.mmap(-1, STATE.size)
        with contextlib.suppress(OSError):
            libc()      # loaded before the fork (see `libc`)
        self._log_fd = os.memfd_create(f"nsim-{side.value}-log", os.MFD_CLOEXEC)
        self._go_r, self._go_w = os.pipe2(os.O_CLOEXEC)
        self._exited = False

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
                program = SideProgram(
                    self.side, self.spec, self.where, sock=self.sock, address=self.address,
                    listener=self.listener, tcp_info=self.want_tcp_info,
                    rt_priority=self.rt_priority, shm=self._shm, log_fd=self._log_fd)
                program.prepare()
                os.read(self._go_r, 1)
                program.run()
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
        return STATE.unpack_from(self._shm, 0)

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
