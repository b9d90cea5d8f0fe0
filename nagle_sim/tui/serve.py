"""`nagle-sim serve`: the teaching app in browsers, safe to open to a class, and the class
as a class (a teacher's page that leads it through peer-instruction polls).

Wraps textual-serve (subclassing its `Server` and `AppService`, not replacing them): every
browser tab gets its own app process in classroom mode, in its own session so it can be
killed as a group. App processes are forked from a fork server that has started the app
once (`nagle_sim.cli.forkserver`; `ForkServer` here), or started as
``python -m nagle_sim tui --classroom`` where forking is not available. On top of
textual-serve this module adds a per-class access token, a session cap with a "class is
full" page, an idle limit, a kill after a grace period for app processes that do not quit
(a busy simulation), the end of every session on Ctrl-C, and the class: its state
(`nagle_sim.classroom.state`, in memory only), a local channel to each app (a socket pair,
`AppChannel`), and the teacher's page and socket behind a secret of their own.

Must not import simpy, realnet or textual.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import shlex
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from ..classroom.channel import FD_ENV as CLASS_FD_ENV
from ..classroom.channel import LINE_LIMIT as CHANNEL_LINE_LIMIT
from ..classroom.channel import VIEW_ENV as CLASS_VIEW_ENV
from ..classroom.channel import app_message, encode
from ..classroom.results import results_csv, results_markdown
from ..classroom.state import (
    PHASES,
    Bucket,
    ClassState,
    LessonInfo,
    QuestionInfo,
    Refused,
    Student,
)
from . import webpages

log = logging.getLogger("nagle-sim.serve")

STDIN_LIMIT = 64 * 1024
"""The most text one browser message may type into an app (a paste): a scenario is a few
KB; 40 MB pasted once took an app 42 s of CPU and 140 MB to digest (issue 29.7). The page
refuses a longer paste itself (`webpages.student_page`); serve refuses what gets past it."""
PASTE_LIMIT = STDIN_LIMIT - 64
"""The page's own limit (characters of the clipboard): under STDIN_LIMIT by the terminal's
bracketed-paste marks, and counted in UTF-16 units, never fewer than Python's."""
TYPED_RATE, TYPED_BURST = 16 * 1024, 2 * STDIN_LIMIT
"""Characters per second one tab may type, with this burst: pastes one after another are
held to it, so no tab can keep its app digesting text (a hand types ~10 a second)."""
NOTICE_EVERY_S = 5.0
"""At most one 'not typed' notice per tab in this time, however many pastes are refused."""

HEADER_TIMEOUT_S = 10.0
"""A connection gets this long to send its first whole request, and may idle this long
between requests (a WebSocket, once open, is not idle: its handler runs)."""

LOOPBACK_NAMES = ("localhost",)
"""Host names (besides loopback IP literals) a loopback-only server answers to."""

WEB_DRIVER = "nagle_sim.tui.webdriver:ClassroomWebDriver"
"""TEXTUAL_DRIVER for every app serve starts (named, not imported: serve imports no
Textual)."""

FORK_FD_ENV = "NAGLE_SIM_FORK_FD"
FORK_CONFIG_ENV = "NAGLE_SIM_FORK_CONFIG"
"""How serve hands the fork server its socket and the classroom policy
(`nagle_sim.cli.forkserver`)."""
FORK_SERVER_START_S = 60.0
"""How long a tab waits for the fork server to be ready, or for one fork, before its app
is started on its own instead."""

APP_NICENESS = 5
"""Student apps run this much nicer than serve: when a class arrives at once their
start-ups take every core, and serve (pages, heartbeats, votes, the teacher's page) must
still get its turn (60 students starting at once on a 2-core machine under load closed
47 of their own sockets: heartbeat pongs not read in time)."""
HEARTBEAT_S = 30.0
"""WebSocket ping interval; a pong has half of it to come back. 15 s left 7.5 s, which a
loaded machine's start-up rush exceeded."""

BROWSER_RATE, BROWSER_BURST = 200.0, 400.0
"""Messages per second one tab may send (keys, pastes, resizes); more are dropped, so a
tab that floods serve cannot take the time of the class."""
CHANNEL_RATE, CHANNEL_BURST = 20.0, 40.0
"""Messages per second one app may send on its class channel (it sends at most 2)."""
CHANNEL_BUFFER_LIMIT = 256 * 1024
"""What serve queues for an app that does not read its channel before closing it."""
TEACHER_EVERY_S = 0.1
"""At most ten snapshots a second to each teacher page, whatever the class does."""
TEACHER_SEND_S = 10.0
TEACHER_MESSAGE_LIMIT = 4096
MAX_TEACHERS = 8
"""Teacher pages open at once (a projector, the teacher's own tab, an assistant)."""


@dataclass(slots=True, kw_only=True)
class ServeOptions:
    """How `nagle-sim serve` runs (command-line options, validated by the CLI)."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    """Required in every URL; None: none needed (only sensible on loopback)."""
    max_sessions: int = 40
    idle_s: float = 20 * 60
    """A session with no key, mouse or resize for this long ends."""
    allow_real: bool = False
    real_timeout_s: float = 20.0
    kill_grace_s: float = 3.0
    """How long an app process gets to quit before it is killed."""
    public_url: str | None = None
    teacher_token: str | None = None
    """The teacher link's own secret (None: a random one); never derived from `token`."""
    start_method: str = "fork"
    """How each tab's app starts: "fork" (from the fork server, where available) or
    "exec" (a new process each)."""
    warm: int = 0
    """App processes started ahead of students (each costs ~1 s of CPU to start and
    ~50 MiB to keep): a class that arrives at once gets its first screens without
    queueing behind each other's start-up."""
    extra_env: dict[str, str] = field(default_factory=dict)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token(nbytes: int = 9) -> str:
    return secrets.token_urlsafe(nbytes)


def lan_address() -> str:
    """This machine's address on its default route (no packet is sent: a UDP 'connect'
    only picks the route); loopback when there is no network."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere real
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def public_base(options: ServeOptions) -> str:
    """The URL students type (without the token)."""
    if options.public_url:
        return options.public_url.rstrip("/")
    host = options.host
    if host in ("0.0.0.0", "::", ""):
        host = lan_address()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{options.port}"


def student_url(options: ServeOptions) -> str:
    base = public_base(options)
    return f"{base}/?token={options.token}" if options.token else f"{base}/"


def app_argv(options: ServeOptions, real_lock: Path | None) -> list[str]:
    """The per-tab command: the app in classroom mode (no file system, no writes)."""
    argv = [sys.executable, "-m", "nagle_sim", "tui", "--classroom"]
    if options.allow_real:
        argv += ["--allow-real", "--real-timeout", f"{options.real_timeout_s:g}"]
        if real_lock is not None:
            argv += ["--real-lock", str(real_lock)]
    return argv


@dataclass(slots=True)
class AppProcess:
    """One started app: its process, and serve's end of its class channel."""

    process: Any
    """An `asyncio.subprocess.Process`, or a `ForkedProcess` (the same interface)."""
    channel: socket.socket
    lead: str = "-"
    """What the app was started to open first (`ClassroomServer.start_view`'s key)."""


async def spawn_app(argv: Sequence[str], environment: dict[str, str],
                    pass_fds: Sequence[int] = ()) -> asyncio.subprocess.Process:
    """Start one app process: exec, not a shell, so the pid we hold is the app; a new
    session so that a kill reaches anything it started and the terminal's Ctrl-C reaches
    only serve."""
    return await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True,
        pass_fds=tuple(pass_fds))


class ExecStarter:
    """Starts each app as its own ``python -m nagle_sim tui --classroom`` (about a second
    of CPU and 47 MB each): where there is no fork server."""

    method = "exec"

    def __init__(self, argv: Sequence[str], environment: dict[str, str]) -> None:
        self.argv = list(argv)
        self.environment = environment

    async def start(self, width: int, height: int, view: str = "") -> AppProcess:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            environment = {**self.environment, "COLUMNS": str(width), "ROWS": str(height),
                           CLASS_FD_ENV: str(theirs.fileno()), CLASS_VIEW_ENV: view}
            process = await spawn_app(self.argv, environment, pass_fds=[theirs.fileno()])
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, process.pid,
                               os.getpriority(os.PRIO_PROCESS, 0) + APP_NICENESS)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return AppProcess(process, ours)

    async def close(self) -> None:
        pass


class ForkedProcess:
    """An app forked by the fork server, as serve sees it: the interface of
    `asyncio.subprocess.Process` that textual-serve and this module use (pipes as
    streams, pid, returncode, wait). Its exit is told by the fork server (it is that
    server's child, not serve's)."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._ended = asyncio.Event()

    def ended(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._ended.set()
            with contextlib.suppress(Exception):
                self.stdin.close()

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 16)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(fd, "rb", buffering=0))
    return reader


async def _pipe_writer(fd: int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(fd, "wb", buffering=0))
    return asyncio.StreamWriter(transport, protocol, None, loop)


class ForkServer:
    """serve's side of the fork server (`nagle_sim.cli.forkserver`): one process that has
    imported the app and loaded the lessons, forking an app per tab. Measured on this
    2-core machine (benchmarks/bench_serve.py): a forked app shares most of its memory
    with the server and starts in a fraction of the CPU time of a new process."""

    method = "fork"

    def __init__(self, environment: dict[str, str], config: dict[str, Any]) -> None:
        self.environment = environment
        self.config = config
        self.control: socket.socket | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self.failed: str | None = None
        self._waiting: dict[int, asyncio.Future[int]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._next = 0
        self._reader: asyncio.Task[None] | None = None

    @staticmethod
    def available() -> bool:
        return (sys.platform.startswith("linux") and hasattr(os, "fork")
                and hasattr(socket, "send_fds") and hasattr(socket, "SOCK_SEQPACKET"))

    async def launch(self) -> None:
        """Start the fork server (it prepares in the background; `start` waits for it)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment = {**self.environment, FORK_FD_ENV: str(theirs.fileno()),
                       FORK_CONFIG_ENV: json.dumps(self.config)}
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "nagle_sim.cli.forkserver",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                env=environment, pass_fds=[theirs.fileno()], start_new_session=True)
        except OSError as error:
            ours.close()
            self._fail(f"cannot start the fork server: {error}")
            return
        finally:
            theirs.close()
        ours.setblocking(False)
        self.control = ours
        self._reader = asyncio.create_task(self._read())

    def _fail(self, why: str) -> None:
        if self.failed is None:
            self.failed = why
            log.warning("%s; each app starts on its own instead", why)
        self.ready.set()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(OSError(why))
        self._waiting.clear()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.control is not None
        try:
            while True:
                data = await loop.sock_recv(self.control, 4096)
                if not data:
                    break
                try:
                    message = json.loads(data)
                except ValueError:
                    continue
                if message.get("ready"):
                    self.ready.set()
                elif "exit" in message:
                    child = self._children.pop(int(message["exit"]), None)
                    if child is not None:
                        child.ended(int(message.get("code", -1)))
                elif "id" in message:
                    future = self._waiting.pop(int(message["id"]), None)
                    if future is not None and not future.done():
                        future.set_result(int(message["pid"]))
        except (OSError, ValueError, TypeError):
            pass
        # the fork server is gone: its children were killed with it (or are orphans
        # whose pipes serve still holds): each session ends as its app's pipe closes
        for child in self._children.values():
            kill_group(child)
            child.ended(-signal.SIGKILL)
        self._children.clear()
        self._fail("the fork server ended")

    async def start(self, width: int, height: int, view: str = "") -> AppProcess:
        if not self.ready.is_set():
            await asyncio.wait_for(self.ready.wait(), FORK_SERVER_START_S)
        if self.failed is not None or self.control is None:
            raise OSError(self.failed or "no fork server")
        loop = asyncio.get_running_loop()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        mine = [stdin_w, stdout_r, stderr_r]
        given = [stdin_r, stdout_w, stderr_w, theirs.fileno()]
        self._next += 1
        ident = self._next
        future: asyncio.Future[int] = loop.create_future()
        self._waiting[ident] = future
        try:
            request = json.dumps({"id": ident, "columns": width, "rows": height,
                                  "view": view if len(view) < 3000 else ""}).encode()
            while True:
                try:
                    socket.send_fds(self.control, [request], given)
                    break
                except BlockingIOError:
                    await asyncio.sleep(0.01)
            pid = await asyncio.wait_for(future, FORK_SERVER_START_S)
        except BaseException:
            self._waiting.pop(ident, None)
            for fd in mine:
                os.close(fd)
            ours.close()
            raise
        finally:
            for fd in given[:3]:
                os.close(fd)
            theirs.close()
        process = ForkedProcess(pid, await _pipe_writer(stdin_w),
                                await _pipe_reader(stdout_r), await _pipe_reader(stderr_r))
        self._children[pid] = process
        return AppProcess(process, ours)

    async def close(self) -> None:
        """End the fork server; it kills any child it still has."""
        if self._reader is not None:
            self._reader.cancel()
        if self.control is not None:
            self.control.close()
        for child in list(self._children.values()):
            kill_group(child)
        if self.process is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.process.wait(), 10)
            if self.process.returncode is None:
                kill_group(self.process)


class FallbackStarter:
    """The fork server while it works, else a new process per app (`ExecStarter`)."""

    def __init__(self, fork: ForkServer | None, exec_: ExecStarter) -> None:
        self.fork = fork
        self.exec = exec_

    @property
    def method(self) -> str:
        return "fork" if self.fork is not None and self.fork.failed is None else "exec"

    async def launch(self) -> None:
        if self.fork is not None:
            await self.fork.launch()

    async def start(self, width: int, height: int, view: str = "") -> AppProcess:
        if self.fork is not None and self.fork.failed is None:
            try:
                return await self.fork.start(width, height, view)
            except (OSError, TimeoutError) as error:
                self.fork._fail(f"the fork server failed ({error})")
        return await self.exec.start(width, height, view)

    async def close(self) -> None:
        if self.fork is not None:
            await self.fork.close()


def _cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


async def _settled(pid: int, limit_s: float = 20.0, every_s: float = 0.1) -> None:
    """Wait until a new app process has finished starting (its CPU time stops growing);
    where /proc is missing, a fixed pause of about one start-up."""
    deadline = time.monotonic() + limit_s
    last = _cpu_ticks(pid)
    if last is None:
        await asyncio.sleep(1.5)
        return
    while time.monotonic() < deadline:
        await asyncio.sleep(every_s)
        now = _cpu_ticks(pid)
        if now is None or (now == last and now > 0):
            return
        last = now


def kill_group(process: Any) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


class WarmPool:
    """App processes started before anyone asks, handed to the next tab that opens.

    A warm app has drawn its first screen at 80×24 into its stdout pipe; the tab that takes
    it replays that and sends its real size at once. Each starts with the class as the
    teacher leads it then (the lead's lesson and question already on its screen); when
    the teacher moves the class on, the warm apps are replaced one by one with apps
    started on the new lead. Refilled one process at a time, so warming never competes
    with a class for more than one core."""

    def __init__(self, starter: Any, size: int) -> None:
        self.starter = starter
        self.size = size
        self.ready: list[AppProcess] = []
        self._filling: asyncio.Task[None] | None = None
        self.room: Any = None
        """Callable returning how many more processes the class may still use."""
        self.lead: Any = lambda: ("", "")
        """Callable returning (key, view JSON) to start apps with: the key names what an
        app opens first, so only a new lesson or question makes a warm app stale."""

    def take(self) -> AppProcess | None:
        while self.ready:
            started = self.ready.pop(0)
            if started.process.returncode is None:
                self.refill()
                return started
            started.channel.close()
        self.refill()
        return None

    def refill(self) -> None:
        if self.size and (self._filling is None or self._filling.done()):
            self._filling = asyncio.create_task(self._fill())

    def _stale(self) -> AppProcess | None:
        key = self.lead()[0]
        return next((started for started in self.ready if started.lead != key), None)

    async def _fill(self) -> None:
        while True:
            stale = None
            if len(self.ready) >= self.size or (self.room is not None and self.room() <= 0):
                stale = self._stale()
                if stale is None:
                    return
            key, view = self.lead()
            try:
                started = await self.starter.start(80, 24, view)
            except (OSError, TimeoutError) as error:
                log.warning("could not start an app ahead of the class: %s", error)
                return
            started.lead = key
            if stale is not None and stale in self.ready:  # replaced by one on the lead
                self.ready.remove(stale)
                kill_group(stale.process)
                stale.channel.close()
            self.ready.append(started)
            await _settled(started.process.pid)  # one start-up at a time: ≤ 1 core

    async def close(self) -> None:
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(BaseException):
                await self._filling
        for started in self.ready:
            kill_group(started.process)
            started.channel.close()
        for started in self.ready:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(started.process.wait(), 5)
        self.ready.clear()


class ClassroomAppService(AppService):
    """One app process per tab, in its own process group, killed if it will not quit."""

    def __init__(self, starter: Any, *, kill_grace_s: float,
                 pool: WarmPool | None = None, view: str = "", **kwargs: Any) -> None:
        super().__init__("nagle-sim tui --classroom", **kwargs)
        self.starter = starter
        self.view = view
        """The class view a new app starts with (the lead's lesson first)."""
        self.kill_grace_s = kill_grace_s
        self.pool = pool
        self.last_activity = time.monotonic()
        self.channel: socket.socket | None = None
        """serve's end of this app's class channel (taken by `AppChannel`)."""
        self.student: Student | None = None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        warm = self.pool.take() if self.pool is not None else None
        started = (warm if warm is not None
                   else await self.starter.start(width, height, self.view))
        self._process = process = started.process
        self.channel = started.channel
        assert process.stdin is not None
        self._stdin = process.stdin
        if warm is not None:
            # drawn at 80×24 before anyone asked; the app takes the tab's size (NagleApp
            # .on_ready applies it even when it arrives while the app is still starting)
            await self.set_terminal_size(width, height)
        return process

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def kill(self) -> None:
        """SIGKILL the app's process group (idempotent)."""
        if self._process is not None:
            kill_group(self._process)

    async def stop(self) -> None:
        """Ask the app to quit; kill it after the grace period (textual-serve's own stop
        waits forever for an app whose event loop is busy)."""
        task = self._task
        if task is None:
            self.kill()
            return
        self._task = None
        with contextlib.suppress(Exception):
            await self._download_manager.cancel_app_downloads(
                app_service_id=self.app_service_id)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.send_meta({"type": "quit"}), self.kill_grace_s)
        try:
            await asyncio.wait_for(asyncio.shield(task), self.kill_grace_s)
        except TimeoutError:
            log.warning("app process %s did not quit; killing it", self.pid)
        self.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, self.kill_grace_s)
        process = self._process
        if process is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), self.kill_grace_s)


class AppChannel:
    """serve's end of one app's class channel (`nagle_sim.classroom.channel`): what the
    app says is about this channel's student only; a line too long, or a channel that
    stops reading what serve sends, ends the channel (the app works on alone), and
    reports beyond a rate are dropped, so one tab cannot stall the class."""

    def __init__(self, server: ClassroomServer, sock: socket.socket, student: Student) -> None:
        self.server = server
        self.sock = sock
        self.student = student
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None
        self.bucket = Bucket(CHANNEL_RATE, CHANNEL_BURST, time.monotonic)
        self.closed = False

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            self.sock.setblocking(False)
            reader, self.writer = await asyncio.open_connection(sock=self.sock,
                                                                limit=CHANNEL_LINE_LIMIT + 2)
            self.server.channels.add(self)
            self.send(self.server.classroom.student_view(self.student))
            while not self.closed:
                line = await reader.readline()
                if not line.endswith(b"\n"):
                    break
                if not self.bucket.take():
                    continue
                message = app_message(line)
                if message is not None:
                    self._handle(message)
        except (OSError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            self.close()

    def _handle(self, message: dict[str, Any]) -> None:
        state = self.server.classroom
        if message["t"] == "at":
            state.report(self.student, {k: message[k] for k in ("screen", "lesson", "step",
                                                                 "steps")})
        elif message["t"] == "vote":
            try:
                round_ = state.vote(self.student, message["poll"], message["round"],
                                    message["choice"])
            except Refused as why:
                self.send({"t": "ballot", "poll": message["poll"], "round": message["round"],
                           "ok": False, "why": str(why)})
                return
            self.send({"t": "ballot", "poll": message["poll"], "round": round_ + 1,
                       "ok": True})

    def send(self, message: dict[str, Any]) -> None:
        writer = self.writer
        if writer is None or self.closed:
            return
        if writer.transport.get_write_buffer_size() > CHANNEL_BUFFER_LIMIT:
            log.info("a student's app stopped reading its class channel: closing it")
            self.close()
            return
        writer.write(encode(message))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.server.channels.discard(self)
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()
        else:
            self.sock.close()


class TeacherFeed:
    """One teacher's socket: always the newest snapshot, never a queue of old ones, and
    a slow or stuck teacher tab delays only itself."""

    def __init__(self, websocket: web.WebSocketResponse) -> None:
        self.websocket = websocket
        self.latest: str | None = None
        self.wake = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    def offer(self, text: str) -> None:
        self.latest = text
        self.wake.set()

    async def _run(self) -> None:
        with contextlib.suppress(Exception):
            while not self.websocket.closed:
                await self.wake.wait()
                self.wake.clear()
                text, self.latest = self.latest, None
                if text is not None:
                    await asyncio.wait_for(self.websocket.send_str(text), TEACHER_SEND_S)
        with contextlib.suppress(Exception):
            await self.websocket.close()


class ClassroomServer(Server):
    """textual-serve's server with a token, a session cap, idle limits and hard stops,
    and the class: its state, a channel to each app, and the teacher's page."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self._lock_dir: str | None = None
        real_lock = None
        if options.allow_real:
            self._lock_dir = tempfile.mkdtemp(prefix="nagle-sim-serve-")
            real_lock = Path(self._lock_dir) / "real.lock"
            real_lock.touch()
        self.argv = app_argv(options, real_lock)
        super().__init__(shlex.join(self.argv), host=options.host, port=options.port,
                         title="nagle-sim", public_url=public_base(options))
        self.sessions: dict[str, tuple[ClassroomAppService, web.WebSocketResponse]] = {}
        self._answered: set[Any] = set()
        """Connections that have sent a whole request (aiohttp RequestHandlers)."""
        self._pending = 0
        environment = AppService._build_environment(
            cast(AppService, SimpleNamespace(debug=False)), width=80, height=24)
        # Textual's web driver, writing each packet whole (`nagle_sim.tui.webdriver`: its
        # own interleaved a repaint into an export's chunk under load)
        environment["TEXTUAL_DRIVER"] = WEB_DRIVER
        environment.update(options.extra_env)
        self.environment = environment
        config = {"allow_real": options.allow_real, "real_timeout_s": options.real_timeout_s,
                  "nice": APP_NICENESS,
                  "real_lock": str(real_lock) if real_lock is not None else None}
        fork = (ForkServer(environment, config)
                if options.start_method == "fork" and ForkServer.available() else None)
        self.starter: Any = FallbackStarter(fork, ExecStarter(self.argv, environment))
        self.pool = WarmPool(self.starter, min(options.warm, options.max_sessions))
        self.pool.room = lambda: (self.options.max_sessions - len(self.sessions)
                                  - self._pending - len(self.pool.ready))
        self.teacher_token = options.teacher_token or new_token(16)
        self.classroom = ClassState(lesson_catalogue())
        self.classroom.on_change = self._class_changed
        self.pool.lead = self.start_view
        self.channels: set[AppChannel] = set()
        self.teachers: set[TeacherFeed] = set()
        self._teacher_dirty = asyncio.Event()
        self._students_dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start_view(self) -> tuple[str, str]:
        """What a new app starts with: a key naming what it opens first (the lead's lesson
        and question), and the class as any student sees it. Only the lesson and question
        are in the key: a phase change reaches a started app over its channel, and
        replacing every warm app at each of the teacher's clicks cost a core all lesson."""
        state = self.classroom
        if state.lead is None:
            return "", ""
        poll = state.poll
        key = f"{state.lead}#{poll.number if poll is not None else ''}"
        return key, json.dumps(state.student_view(None))

    def use_command(self, argv: Sequence[str]) -> None:
        """Start every app with `argv` (tests' stand-in programs), not the fork server."""
        self.argv = list(argv)
        self.starter = ExecStarter(self.argv, self.environment)
        self.pool.starter = self.starter

    # ---------------------------------------------------------------- access
    def _token_ok(self, given: str | None) -> bool:
        want = self.options.token
        if want is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), want.encode())

    def _full(self) -> bool:
        return len(self.sessions) + self._pending >= self.options.max_sessions

    def _teacher_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(),
                                                         self.teacher_token.encode())

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._note_request)
        app.router.add_get("/ws/{token}", self.handle_websocket, name="websocket_token")
        app.router.add_get("/favicon.ico", self.handle_favicon)
        app.router.add_get("/teacher", self.handle_teacher)
        app.router.add_get("/teacher/ws", self.handle_teacher_socket)
        app.router.add_get("/teacher/results.{kind:csv|md}", self.handle_results)
        app.router.add_get("/teacher/{name:teacher\\.(?:js|css)}", self.handle_teacher_file)
        return app

    @web.middleware
    async def _note_request(self, request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                            ) -> web.StreamResponse:
        """Marks the connection as one that sent a whole request (`close_slow_requests`)."""
        self._answered.add(request.protocol)
        return await handler(request)

    def _loopback_name(self, name: str) -> bool:
        return (name in LOOPBACK_NAMES or name == self.options.host.lower()
                or is_loopback(name))

    def _foreign(self, request: web.Request) -> bool:
        """A request another web site's page made (a cross-site WebSocket: browsers send
        its Origin), or one that reached a loopback-only server under a foreign host name
        (DNS rebinding). Either could start sessions without the teacher knowing."""
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
            return True
        if is_loopback(self.options.host):
            name = (urlsplit(f"//{request.host}").hostname or "").lower()
            return not self._loopback_name(name)
        return False

    def _refusal(self, request: web.Request) -> web.Response | None:
        """The page for a request that may not have the class (None: it may)."""
        if self._foreign(request):
            names = (["localhost", "127.0.0.1", "::1"] if is_loopback(self.options.host)
                     else [self.options.host])
            return _html(403, webpages.foreign_page(names))
        given = request.query.get("token")
        if not self._token_ok(given):
            return _html(403, webpages.wrong_token_page() if given
                         else webpages.no_token_page())
        return None

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        if self._full():
            return _html(503, webpages.full_page(self.options.max_sessions))
        font_size = _size(request.query.get("fontsize"), 16, low=8, high=48)
        response = _html(200, webpages.student_page(
            ws_url=self._ws_url(request, self.options.token or ""), font_size=font_size,
            title=self.title, paste_limit=PASTE_LIMIT))
        response.headers["Content-Security-Policy"] = webpages.PAGE_CSP
        return response

    async def handle_favicon(self, request: web.Request) -> web.StreamResponse:
        # pages carry their icon inline; a browser that asks anyway gets an empty answer
        return web.Response(status=204)

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's download, under a policy that runs no script whatever the
        file holds (an export page only shows a picture and links)."""
        key = request.match_info["key"]
        try:
            meta = await self.download_manager.get_download_metadata(key)
        except KeyError:
            return web.Response(status=404, text="nagle-sim: no such download (it is "
                                "offered once, to the tab that asked for it)")
        content_type = meta.mime_type + (f"; charset={meta.encoding}" if meta.encoding
                                         else "")
        disposition = "inline" if meta.open_method == "browser" else "attachment"
        name = "".join(c for c in meta.file_name if c.isalnum() or c in "._- ")[:120]
        response = web.StreamResponse(headers={
            "Content-Type": content_type,
            "Content-Disposition": f'{disposition}; filename="{name or "download"}"',
            "Content-Security-Policy": webpages.DOWNLOAD_CSP,
            "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer"})
        await response.prepare(request)
        async for chunk in self.download_manager.download(key):
            await response.write(chunk)
        await response.write_eof()
        return response

    def _ws_url(self, request: web.Request, token: str) -> str:
        """The socket the page connects to, under the name the page itself was opened
        with (a teacher checking the class link as 127.0.0.1 and a student on the LAN
        address both reach it); --public-url (a proxy in front) wins."""
        path = f"/ws/{token}" if token else "/ws"
        if self.options.public_url:
            base = self.public_url
            scheme = "wss:" if base.startswith("https") else "ws:"
            return scheme + base.split(":", 1)[1] + path
        scheme = "wss" if request.secure else "ws"
        return f"{scheme}://{request.host}{path}"

    # ---------------------------------------------------------------- the teacher
    def teacher_url(self) -> str:
        return f"{public_base(self.options)}/teacher?key={self.teacher_token}"

    def _teacher_refusal(self, request: web.Request) -> web.Response | None:
        if self._foreign(request):
            return _html(403, webpages.foreign_page([self.options.host]))
        if not self._teacher_ok(request.query.get("key")):
            return _html(403, webpages.not_teacher_page())
        return None

    async def handle_teacher(self, request: web.Request) -> web.StreamResponse:
        """The teacher's page: only with the teacher's own key (never the class token)."""
        refused = self._teacher_refusal(request)
        if refused is not None:
            return refused
        response = _html(200, webpages.teacher_page())
        response.headers["Content-Security-Policy"] = webpages.TEACHER_CSP
        return response

    async def handle_teacher_file(self, request: web.Request) -> web.StreamResponse:
        """The teacher page's script and style (no secret in them: they act only through
        the socket, which needs the key)."""
        name = request.match_info["name"]
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        response = web.Response(text=webpages.teacher_file(name), content_type=kind)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    async def handle_results(self, request: web.Request) -> web.StreamResponse:
        """The session's results, as a file the teacher's browser saves (nothing is kept
        on the server's disk). Nicknames only when asked for (``names=1``)."""
        refused = self._teacher_refusal(request)
        if refused is not None:
            return refused
        names = request.query.get("names") == "1"
        kind = request.match_info["kind"]
        state = self.classroom
        if kind == "csv":
            text = results_csv(state.polls, state.students, names=names)
            mime = "text/csv"
        else:
            text = results_markdown(state.polls, state.students, names=names)
            mime = "text/markdown"
        stamp = time.strftime("%Y%m%d-%H%M")
        file_name = f"nagle-sim-results-{stamp}{'-names' if names else ''}.{kind}"
        return web.Response(text=text, content_type=mime, charset="utf-8", headers={
            "Content-Disposition": f'attachment; filename="{file_name}"',
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": webpages.DOWNLOAD_CSP,
            "Referrer-Policy": "no-referrer"})

    async def handle_teacher_socket(self, request: web.Request) -> web.WebSocketResponse:
        if self._foreign(request):
            raise web.HTTPForbidden(text="nagle-sim: requests from other sites are refused")
        if not self._teacher_ok(request.query.get("key")):
            raise web.HTTPForbidden(text="nagle-sim: this is not the teacher's key")
        websocket = web.WebSocketResponse(heartbeat=HEARTBEAT_S,
                                          max_msg_size=TEACHER_MESSAGE_LIMIT)
        if not websocket.can_prepare(request).ok:
            raise web.HTTPUpgradeRequired(headers={"Upgrade": "websocket"},
                                          text="nagle-sim: the teacher page's socket")
        await websocket.prepare(request)
        if len(self.teachers) >= MAX_TEACHERS:
            await websocket.close(code=1013, message=b"too many teacher pages are open")
            return websocket
        feed = TeacherFeed(websocket)
        self.teachers.add(feed)
        try:
            await websocket.send_str(json.dumps(self._teacher_hello()))
            feed.offer(json.dumps(self.classroom.teacher_view()))
            async for message in websocket:
                if message.type != WSMsgType.TEXT:
                    continue
                error = self.teacher_command(message.data)
                if error:
                    feed.offer(json.dumps({"t": "error", "why": error}))
                    feed.offer(json.dumps(self.classroom.teacher_view()))
        except Exception as error:  # the teacher's page may reconnect; the class goes on
            log.warning("teacher page: %s", error)
        finally:
            self.teachers.discard(feed)
            feed.task.cancel()
        return websocket

    def _teacher_hello(self) -> dict[str, Any]:
        """What the teacher's page needs once: the lessons and the class link."""
        link = student_url(self.options)
        return {"t": "hello", "classLink": link, "qr": _qr_data_uri(link),
                "lessons": [{"slug": lesson.slug, "title": lesson.title,
                             "questions": [{"prompt": q.prompt, "choices": list(q.choices)}
                                           for q in lesson.questions]}
                            for lesson in self.classroom.lessons.values()]}

    def teacher_command(self, text: str) -> str:
        """Carry out one command of the teacher's page; '' or why it was refused. Only
        the teacher's socket (its key checked) calls this."""
        command = teacher_command(text)
        if command is None:
            return "not a command this server knows"
        state = self.classroom
        try:
            match command["do"]:
                case "open":
                    state.open_lesson(command["lesson"])
                case "ask":
                    state.ask(command["lesson"], command["question"])
                case "phase":
                    state.set_phase(command["phase"])
                case "next":
                    state.next_phase()
                case "free":
                    state.free()
        except Refused as why:
            return str(why)
        return ""

    def _class_changed(self, students: bool) -> None:
        self._teacher_dirty.set()
        if students:
            self._students_dirty.set()

    async def _tell_teachers(self) -> None:
        """Every change, to every teacher page: at most one snapshot per
        `TEACHER_EVERY_S`, so a burst of votes is one update, not sixty."""
        while True:
            await self._teacher_dirty.wait()
            self._teacher_dirty.clear()
            if self.teachers:
                text = json.dumps(self.classroom.teacher_view())
                for feed in list(self.teachers):
                    feed.offer(text)
            await asyncio.sleep(TEACHER_EVERY_S)

    async def _tell_students(self) -> None:
        """A change of lead or phase, to every student's app (each its own view)."""
        while True:
            await self._students_dirty.wait()
            self._students_dirty.clear()
            for channel in list(self.channels):
                channel.send(self.classroom.student_view(channel.student))
            self.pool.refill()  # warm apps on an old lead are replaced, one at a time
            await asyncio.sleep(0)

    # ---------------------------------------------------------------- sessions
    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self._foreign(request):
            raise web.HTTPForbidden(text="nagle-sim: requests from other sites are refused")
        if not self._token_ok(request.match_info.get("token")):
            raise web.HTTPForbidden(text="nagle-sim: wrong or missing class token")
        websocket = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=1 << 20)
        if not websocket.can_prepare(request).ok:
            # a plain GET of the socket's address (a link followed, a scanner)
            raise web.HTTPUpgradeRequired(headers={"Upgrade": "websocket"},
                                          text="nagle-sim: this address is the app's "
                                          "WebSocket; open the class link instead")
        if self._full():
            await websocket.prepare(request)
            await websocket.close(code=1013, message=b"the class is full")
            return websocket
        self._pending += 1
        service: ClassroomAppService | None = None
        student = self.classroom.join(request.query.get("student"))
        channel: AppChannel | None = None
        try:
            width = _size(request.query.get("width"), 80)
            height = _size(request.query.get("height"), 24)
            await websocket.prepare(request)
            service = ClassroomAppService(
                self.starter, kill_grace_s=self.options.kill_grace_s, pool=self.pool,
                view=self.start_view()[1],
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str, close=websocket.close,
                download_manager=self.download_manager, debug=self.debug)
            service.student = student
            self.sessions[service.app_service_id] = (service, websocket)
            self._pending -= 1
            await service.start(width, height)
            if service.channel is not None:
                if student is not None:
                    channel = AppChannel(self, service.channel, student)
                    channel.start()
                else:
                    service.channel.close()
            idle = asyncio.create_task(self._end_when_idle(service, websocket))
            try:
                await self._process_messages(websocket, service)
            finally:
                idle.cancel()
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # one tab's failure must not end the class
            log.warning("session ended: %s", error)
        finally:
            if channel is not None:
                channel.close()
            if student is not None:
                self.classroom.leave(student)
            if service is None:
                self._pending -= 1
            else:
                self.sessions.pop(service.app_service_id, None)
                await service.stop()
            if not websocket.closed:
                with contextlib.suppress(Exception):
                    await websocket.close()
        return websocket

    async def _process_messages(self, websocket: web.WebSocketResponse,
                                app_service: AppService) -> None:
        """The browser's messages, as textual-serve's page sends them (its textual.js:
        ``["stdin", text]``, ``["resize", {width, height}]``, ``["ping", stamp]``, and the
        one-element ``["focus"]`` and ``["blur"]``), noting activity for the idle limit
        (pings are not activity). Anything else is ignored: a message this server does
        not know is never a reason to end a student's session. Typed text is bounded per
        message (`STDIN_LIMIT`) and per second (`TYPED_RATE`): what is over is dropped
        with one notice to the page, and does not count as activity."""
        assert isinstance(app_service, ClassroomAppService)
        bucket = Bucket(BROWSER_RATE, BROWSER_BURST, time.monotonic)
        typed = Bucket(TYPED_RATE, TYPED_BURST, time.monotonic)
        told = -NOTICE_EVERY_S
        async for message in websocket:
            if message.type != WSMsgType.TEXT or not bucket.take():
                continue  # beyond the rate a tab's messages are dropped, not queued
            parsed = browser_message(message.data)
            if parsed is None:
                continue
            kind, data = parsed
            if kind == "name":
                if app_service.student is not None:
                    with contextlib.suppress(Refused):
                        self.classroom.rename(app_service.student, data)
                continue
            if kind == "ping":
                await websocket.send_json(["pong", data])
                continue
            if kind == "stdin":
                text = str(data)
                if len(text) > STDIN_LIMIT or not typed.take(len(text)):
                    # refused: not typed, and not activity (the idle limit runs on); the
                    # student is told once, in the page (its script shows the notice)
                    now = time.monotonic()
                    if now - told >= NOTICE_EVERY_S:
                        told = now
                        await websocket.send_json(["notice", refused_text(len(text))])
                    continue
                app_service.last_activity = time.monotonic()
                await app_service.send_bytes(text.encode("utf-8"))
                continue
            app_service.last_activity = time.monotonic()
            if kind == "resize":
                assert isinstance(data, tuple)
                await app_service.set_terminal_size(*data)
            elif kind == "blur":
                await app_service.blur()
            elif kind == "focus":
                await app_service.focus()

    async def _end_when_idle(self, service: ClassroomAppService,
                             websocket: web.WebSocketResponse) -> None:
        limit = self.options.idle_s
        while True:
            left = service.last_activity + limit - time.monotonic()
            if left <= 0:
                log.info("session %s idle for %gs: ending it", service.pid, limit)
                await service.stop()
                await websocket.close(code=1000, message=b"idle for too long")
                return
            await asyncio.sleep(min(left, 30.0))

    async def end_all_sessions(self) -> None:
        sessions = list(self.sessions.values())
        self.sessions.clear()
        for service, _ in sessions:
            service.kill()  # Ctrl-C on serve: no grace, every app ends now
        await asyncio.gather(*(service.stop() for service, _ in sessions),
                             return_exceptions=True)
        await asyncio.gather(*(ws.close(code=1001, message=b"the class has ended")
                               for _, ws in sessions), return_exceptions=True)

    async def on_shutdown(self, app: web.Application) -> None:
        for task in self._tasks:
            task.cancel()
        for feed in list(self.teachers):
            feed.task.cancel()
            with contextlib.suppress(Exception):
                await feed.websocket.close(code=1001, message=b"the class has ended")
        await self.pool.close()
        await self.end_all_sessions()
        await self.starter.close()
        if self._lock_dir is not None:
            with contextlib.suppress(OSError):
                for name in os.listdir(self._lock_dir):
                    os.unlink(os.path.join(self._lock_dir, name))
                os.rmdir(self._lock_dir)

    async def on_startup(self, app: web.Application) -> None:
        if hasattr(self.starter, "launch"):
            await self.starter.launch()
        self._tasks.append(asyncio.create_task(self._tell_teachers()))
        self._tasks.append(asyncio.create_task(self._tell_students()))
        announce(self.options, self.console.file, self.teacher_url())
        self.pool.refill()

    def initialize_logging(self) -> None:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        for handler in logging.getLogger().handlers:
            handler.addFilter(one_line_records)

    def serve(self, debug: bool = False) -> None:
        """Serve until Ctrl-C or SIGTERM (textual-serve's own loop, plus what a server open
        to a room needs from aiohttp: see `_serve`)."""
        self.debug = debug
        self.initialize_logging()
        raise_file_limit()
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        """aiohttp's runner with a guard it lacks: a connection that has not sent a whole
        request within `HEADER_TIMEOUT_S` is closed (aiohttp keeps a half-sent request's
        socket open indefinitely: 1,100 of them held their sockets for 30 s and more),
        and as many open files as the system allows, so such a flood cannot use up the
        descriptors students need."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        with contextlib.suppress(NotImplementedError):
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
        app = await self._make_app()
        runner = web.AppRunner(app, handle_signals=False, keepalive_timeout=HEADER_TIMEOUT_S)
        await runner.setup()  # on_startup: the announcement, the warm pool
        guard: asyncio.Task[None] | None = None
        try:
            await web.TCPSite(runner, self.host, self.port).start()
            assert runner.server is not None
            guard = asyncio.create_task(close_slow_requests(runner.server, self._answered))
            await stop.wait()
        finally:
            if guard is not None:
                guard.cancel()
            await runner.cleanup()  # on_shutdown: every session ends


async def close_slow_requests(server: Any, answered: set[Any], *,
                              timeout_s: float = HEADER_TIMEOUT_S, every_s: float = 1.0) -> None:
    """Close each connection of `server` (an aiohttp web.Server) that has not sent a whole
    request `timeout_s` after it was first seen. A connection that has (`answered`) is
    aiohttp's to time out between requests (keepalive_timeout)."""
    seen: dict[Any, float] = {}
    clock = asyncio.get_running_loop().time
    while True:
        await asyncio.sleep(every_s)
        now = clock()
        open_now = list(server.connections)
        answered.intersection_update(open_now)
        seen = {handler: seen.get(handler, now) for handler in open_now
                if handler not in answered}
        for handler, since in seen.items():
            if now - since >= timeout_s:
                handler.force_close()


def one_line_records(record: logging.LogRecord) -> bool:
    """A logging filter: no traceback on the teacher's console. aiohttp logs a malformed
    request (two Host headers, say) with its parser's traceback; the operator needs one
    line saying what was refused."""
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        detail = " ".join(str(error).split())
        record.msg = f"{record.getMessage()}: refused ({type(error).__name__}: {detail})"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
    return True


def raise_file_limit() -> None:
    """Open files up to the hard limit (each student is a socket and three pipes)."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            wanted = 1 << 16 if hard == resource.RLIM_INFINITY else hard
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))


def _size(value: object, default: int, *, low: int = 10, high: int = 500) -> int:
    """A terminal dimension from the browser, clamped (a tab cannot ask for 10⁹ columns)."""
    try:
        number = int(str(value)[:12])
    except ValueError:
        return default
    return max(low, min(number, high))


def _html(status: int, text: str) -> web.Response:
    response = web.Response(status=status, text=text, content_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


BrowserMessage = tuple[str, "str | tuple[int, int] | None"]


def browser_message(text: str) -> BrowserMessage | None:
    """One message from the page, checked: its kind and its data (a ping's stamp, the
    typed text, the (width, height) asked for), or None for anything the page's client
    does not send — which the caller ignores."""
    try:
        envelope = json.loads(text)
    except ValueError:  # json's own errors, and RecursionError's kin are ValueErrors too
        return None
    except RecursionError:
        return None
    if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
        return None
    kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
    if kind in ("focus", "blur"):
        return kind, None
    if kind == "name":  # our page's nickname box (cleaned by the class state)
        return (kind, data[:200]) if isinstance(data, str) else None
    if kind == "ping":
        return kind, str(data)[:64] if isinstance(data, str | int) else ""
    if kind == "stdin":  # its length is checked by the caller, which tells the student
        if not isinstance(data, str) or not data:
            return None
        return kind, data
    if kind == "resize" and isinstance(data, dict):
        return kind, (_size(data.get("width"), 80), _size(data.get("height"), 24))
    return None


def refused_text(length: int) -> str:
    """The notice a student's page shows when typed text is refused (`length` characters
    in one message)."""
    if length > STDIN_LIMIT:
        size = (f"{length / 2**20:.1f} MB" if length >= 2**20 else f"{length // 1024} KB")
        return (f"Not pasted: that text is {size}, and the app takes at most "
                f"{STDIN_LIMIT // 1024} KB at once. Nothing of it was typed.")
    return ("Not typed: too much text in a short time (a paste after paste). Wait a few "
            "seconds, then paste again.")


def teacher_command(text: str) -> dict[str, Any] | None:
    """One message of the teacher's page, checked (None: not a command)."""
    if len(text) > TEACHER_MESSAGE_LIMIT:
        return None
    try:
        command = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(command, dict):
        return None
    do, lesson = command.get("do"), command.get("lesson")
    if do in ("next", "free"):
        return {"do": do}
    if do == "phase" and command.get("phase") in PHASES:
        return {"do": do, "phase": command["phase"]}
    if do in ("open", "ask") and isinstance(lesson, str) and len(lesson) <= 100:
        if do == "open":
            return {"do": do, "lesson": lesson}
        question = command.get("question")
        if isinstance(question, int) and not isinstance(question, bool):
            return {"do": do, "lesson": lesson, "question": question}
    return None


def lesson_catalogue() -> list[LessonInfo]:
    """The shipped lessons as the class state needs them (none, with a warning, if they
    cannot be read: the teacher's page then offers nothing to lead)."""
    from ..lessons import load_lessons
    try:
        lessons = load_lessons()
    except Exception as error:
        log.warning("the teacher's page has no lessons: %s", error)
        return []
    return [LessonInfo(slug=lesson.slug,
                       title=(f"{lesson.number}. {lesson.title}" if lesson.number is not None
                              else lesson.title),
                       questions=tuple(QuestionInfo(q.prompt, q.choices, q.answer)
                                       for q in lesson.questions))
            for lesson in lessons]


def _qr_data_uri(text: str) -> str:
    """A QR code of the class link for the teacher's page (students scan the projector)."""
    try:
        import segno
        return str(segno.make(text, error="m").svg_data_uri(scale=6, border=2))
    except Exception:  # pragma: no cover - segno is a dependency
        return ""


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def announce(options: ServeOptions, out: Any, teacher: str | None = None) -> None:
    """Print where the class is, with a QR code of the student URL when opened to a class,
    and the teacher's own link."""
    url = student_url(options)
    lines = [f"nagle-sim classroom: {url}"]
    if is_loopback(options.host):
        lines.append("  only this machine can connect (use --host 0.0.0.0 to open it to a "
                     "class)")
    else:
        lines.append("  give students this URL (the token is the class's key)")
    lines.append(f"  at most {options.max_sessions} sessions; idle ones end after "
                 f"{options.idle_s / 60:g} min; real-socket runs "
                 + ("allowed, one at a time" if options.allow_real else "off"))
    if options.warm:
        lines.append(f"  starting {min(options.warm, options.max_sessions)} app processes "
                     "ahead of the students (--warm)")
    if running_as_root() and not options.allow_real:
        lines.append("  warning: serve runs as root, so every student's app process does "
                     "too; run it as an ordinary user (root is only needed for "
                     "--allow-real)")
    if teacher is not None:
        lines.append(f"teacher's page: {teacher}")
        lines.append("  keep this one to yourself: it leads the class and sees its votes")
    lines.append("  Ctrl-C ends the class (every session)")
    out.write("\n".join(lines) + "\n")
    if not is_loopback(options.host):
        try:
            import segno
        except ImportError:  # pragma: no cover - segno is a dependency
            return
        segno.make(url, error="l").terminal(out=out, compact=True)
    out.flush()


def serve(options: ServeOptions) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM end every session)."""
    ClassroomServer(options).serve()

