"""One watch session: load, optionally start the program to watch, read until it ends.

Owns: the loop that polls the ring buffer and feeds the decision engine, starting
``-- COMMAND`` so that it is watched from its first system call (watch's own process is
put in the watched set just before the fork and taken out right after: the kernel's
sched_process_fork hook adds the child itself), signals (Ctrl-C and SIGTERM end the
session, stop a started program and detach everything; exit status 130 / 143), and the
record of raw events for fixtures. The front end (``python -m realnet.watch`` now,
``nagle-sim watch`` later) only prints what this returns.

Must not import rich, textual or simpy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, Any

from . import raw
from .decide import Decision, Engine, Stall
from .loader import Config, Report, Watcher, WatchError

_POLL_MS = 50
_TAIL_S = 0.1
"""After the watched program exits: how long to keep reading (timers already armed)."""


class Stopped(Exception):
    """A signal ended the session (signal number in args[0])."""


@dataclass(slots=True)
class Result:
    report: Report
    decisions: list[Decision] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    records: list[bytes] = field(default_factory=list)
    returncode: int | None = None
    signal: int | None = None
    host: dict[str, Any] = field(default_factory=dict)
    engine: Engine | None = None
    """The decision engine with its sockets (their wire and decisions when kept)."""


def run(config: Config, command: Sequence[str] | None = None, *,
        on_decision: Callable[[Decision], None] | None = None,
        duration_s: float | None = None, keep_records: bool = False,
        keep_decisions: bool = True, max_records: int = 1_000_000,
        record_to: IO[str] | None = None,
        on_start: Callable[[Report], None] | None = None,
        keep_per_socket: bool = False,
        on_started: Callable[[int], None] | None = None,
        on_stall: Callable[[Stall], None] | None = None) -> Result:
    """Watch until the command exits, ``duration_s`` passes, or a signal comes.

    ``keep_records`` keeps up to ``max_records`` raw records in memory (tests);
    ``record_to`` streams them to a fixture file as they come (bounded memory);
    ``keep_per_socket`` keeps each socket's decisions and, with ``config.segments``, its
    segments (trace files: `realnet.watch.trace`); ``on_started`` is called with the
    started program's pid; ``on_stall`` with each stall as soon as it ends."""
    _check_command(command)
    feed = _Feed(max_records=max_records if keep_records else 0, record_to=record_to,
                 keep_decisions=keep_decisions, on_decision=on_decision, on_stall=on_stall)
    if command is not None:
        config.pids = (*config.pids, os.getpid())
    watcher = Watcher(config, feed)
    old_handlers: dict[int, Any] = {}

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signum)

    proc: subprocess.Popen[bytes] | None = None
    result = Result(report=watcher.report)
    try:
        old_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, stop)
        rep = watcher.start()
        hz = rep.hz or 250
        feed.engine = Engine(hz=hz, t0_ns=time.monotonic_ns(), wire=config.segments,
                             keep=keep_per_socket)
        result.host = {"hz": hz, "kernel": os.uname().release}
        if record_to is not None:
            raw.write_fixture(record_to, result.host, ())
        if on_start is not None:
            on_start(rep)
        if command is not None:
            proc = _start_program(watcher, command, on_started)
        _read(watcher, proc, duration_s, result)
    except KeyboardInterrupt:
        result.signal = signal.SIGINT
    except Stopped as exc:
        result.signal = int(exc.args[0])
    finally:
        _detach(watcher, result, old_handlers, proc)
    if feed.engine is not None:
        eng = feed.engine
        result.stalls = eng.stalls()
        result.notes = eng.notes()
        result.engine = eng
    result.decisions = feed.decisions
    result.records = feed.records
    return result


def _check_command(command: Sequence[str] | None) -> None:
    """Refuse an empty or unknown ``-- COMMAND`` before anything is loaded: a typo costs
    no BPF load and says one thing."""
    if command is not None and not command:
        raise WatchError("-- COMMAND: nothing to run after --")
    if command is not None and shutil.which(command[0]) is None:
        raise WatchError(f"cannot start {command[0]}: no such program (or not executable)")


@dataclass(slots=True)
class _Feed:
    """What the watcher calls with each raw record: kept (up to ``max_records``) or
    written to the fixture file, then fed to the decision engine, whose decisions and
    finished stalls go to the callbacks as they come."""

    max_records: int
    record_to: IO[str] | None
    keep_decisions: bool
    on_decision: Callable[[Decision], None] | None
    on_stall: Callable[[Stall], None] | None
    engine: Engine | None = None
    """Set once the watcher has started (its report gives HZ)."""
    records: list[bytes] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    def __call__(self, blob: bytes) -> None:
        if len(self.records) < self.max_records:
            self.records.append(blob)
        if self.record_to is not None:
            self.record_to.write(blob.hex() + "\n")
        eng = self.engine
        assert eng is not None, "a record before the watcher started"
        for d in eng.feed(raw.RawEvent.decode(blob)):
            if self.keep_decisions:
                self.decisions.append(d)
            if self.on_decision is not None:
                self.on_decision(d)
        if eng.fresh_stalls:
            fresh, eng.fresh_stalls = eng.fresh_stalls, []
            if self.on_stall is not None:
                for s in fresh:
                    self.on_stall(s)


def _start_program(watcher: Watcher, command: Sequence[str],
                   on_started: Callable[[int], None] | None) -> subprocess.Popen[bytes]:
    """Start ``command``, watched from its first system call: watch's own process was in
    the watched set for the fork (the kernel's fork hook adds the child) and leaves it
    now."""
    try:
        proc = subprocess.Popen(list(command))
    except OSError as exc:
        raise WatchError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
    finally:
        watcher.remove_tgid(os.getpid())
    watcher.add_tgid(proc.pid)    # in case it forked before the hook saw it
    if on_started is not None:
        on_started(proc.pid)
    return proc


def _read(watcher: Watcher, proc: subprocess.Popen[bytes] | None, duration_s: float | None,
          result: Result) -> None:
    """Poll the ring buffer until the started program exits (its status into ``result``;
    then `_TAIL_S` more, for timers already armed) or ``duration_s`` passes; then drain
    it."""
    deadline = time.monotonic() + duration_s if duration_s is not None else None
    while True:
        watcher.poll(_POLL_MS)
        if proc is not None and proc.poll() is not None:
            end = time.monotonic() + _TAIL_S
            while time.monotonic() < end:
                watcher.poll(_POLL_MS)
            result.returncode = proc.returncode
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
    watcher.drain()


def _detach(watcher: Watcher, result: Result, old_handlers: dict[int, Any],
            proc: subprocess.Popen[bytes] | None) -> None:
    """However the session ended: read what is still waiting (unless a signal ended it),
    count, detach everything, restore the signal handlers and stop a started program
    that still runs (SIGTERM, then SIGKILL after 2 s)."""
    try:
        if watcher.obj is not None:
            if result.signal is None:
                # records still waiting (a stop by signal does not wait for them)
                with contextlib.suppress(KeyboardInterrupt, Stopped):
                    watcher.drain()
            result.counters = watcher.counters()
    finally:
        watcher.close()
        for signum, handler in old_handlers.items():
            signal.signal(signum, handler)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            result.returncode = proc.returncode
