"""`nagle-sim serve`: the teaching app in browsers, safe to open to a class.

Wraps textual-serve (subclassing its `Server` and `AppService`, not replacing them): every
browser tab gets its own ``python -m nagle_sim tui --classroom`` process, started in its
own session so it can be killed as a group. On top of textual-serve this module adds a
per-class access token, a session cap with a "class is full" page, an idle limit, a kill
after a grace period for app processes that do not quit (a busy simulation), and the end
of every session on Ctrl-C. Must not import simpy, realnet or textual.
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

from . import webpages

log = logging.getLogger("nagle-sim.serve")

STDIN_LIMIT = 64 * 1024
"""The most text one browser message may type into an app (a paste): a scenario is a few
KB; 40 MB pasted once took an app 42 s of CPU and 140 MB to digest."""

HEADER_TIMEOUT_S = 10.0
"""A connection gets this long to send its first whole request, and may idle this long
between requests (a WebSocket, once open, is not idle: its handler runs)."""

LOOPBACK_NAMES = ("localhost",)
"""Host names (besides loopback IP literals) a loopback-only server answers to."""


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


def new_token() -> str:
    return secrets.token_urlsafe(9)


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


async def spawn_app(argv: Sequence[str], environment: dict[str, str]
                    ) -> asyncio.subprocess.Process:
    """Start one app process: exec, not a shell, so the pid we hold is the app; a new
    session so that a kill reaches anything it started and the terminal's Ctrl-C reaches
    only serve."""
    return await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True)


def _cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


async def _settled(pid: int, limit_s: float = 20.0) -> None:
    """Wait until a new app process has finished starting (its CPU time stops growing);
    where /proc is missing, a fixed pause of about one start-up."""
    deadline = time.monotonic() + limit_s
    last = _cpu_ticks(pid)
    if last is None:
        await asyncio.sleep(1.5)
        return
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        now = _cpu_ticks(pid)
        if now is None or (now == last and now > 0):
            return
        last = now


def kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


class WarmPool:
    """App processes started before anyone asks, handed to the next tab that opens.

    A warm app has drawn its first screen at 80×24 into its stdout pipe; the tab that takes
    it replays that and sends its real size at once. Refilled one process at a time, so
    warming never competes with a class for more than one core."""

    def __init__(self, argv: Sequence[str], environment: dict[str, str], size: int) -> None:
        self.argv = list(argv)
        self.environment = environment
        self.size = size
        self.ready: list[asyncio.subprocess.Process] = []
        self._filling: asyncio.Task[None] | None = None
        self.room: Any = None
        """Callable returning how many more processes the class may still use."""

    def take(self) -> asyncio.subprocess.Process | None:
        while self.ready:
            process = self.ready.pop(0)
            if process.returncode is None:
                self.refill()
                return process
        self.refill()
        return None

    def refill(self) -> None:
        if self.size and (self._filling is None or self._filling.done()):
            self._filling = asyncio.create_task(self._fill())

    async def _fill(self) -> None:
        while len(self.ready) < self.size and (self.room is None or self.room() > 0):
            process = await spawn_app(self.argv, self.environment)
            self.ready.append(process)
            await _settled(process.pid)  # one start-up at a time: warming uses ≤ 1 core

    async def close(self) -> None:
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(BaseException):
                await self._filling
        for process in self.ready:
            kill_group(process)
        for process in self.ready:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 5)
        self.ready.clear()


class ClassroomAppService(AppService):
    """One app process per tab, in its own process group, killed if it will not quit."""

    def __init__(self, argv: Sequence[str], *, kill_grace_s: float, extra_env: dict[str, str],
                 pool: WarmPool | None = None, **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = list(argv)
        self.kill_grace_s = kill_grace_s
        self.extra_env = extra_env
        self.pool = pool
        self.last_activity = time.monotonic()

    async def _open_app_process(self, width: int = 80, height: int = 24
                                ) -> asyncio.subprocess.Process:
        warm = self.pool.take() if self.pool is not None else None
        if warm is not None:
            self._process = process = warm
        else:
            environment = self._build_environment(width=width, height=height)
            environment.update(self.extra_env)
            self._process = process = await spawn_app(self.argv, environment)
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


class ClassroomServer(Server):
    """textual-serve's server with a token, a session cap, idle limits and hard stops."""

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
        environment.update(options.extra_env)
        self.pool = WarmPool(self.argv, environment, min(options.warm, options.max_sessions))
        self.pool.room = lambda: (self.options.max_sessions - len(self.sessions)
                                  - self._pending - len(self.pool.ready))

    # ---------------------------------------------------------------- access
    def _token_ok(self, given: str | None) -> bool:
        want = self.options.token
        if want is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), want.encode())

    def _full(self) -> bool:
        return len(self.sessions) + self._pending >= self.options.max_sessions

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._note_request)
        app.router.add_get("/ws/{token}", self.handle_websocket, name="websocket_token")
        app.router.add_get("/favicon.ico", self.handle_favicon)
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
            title=self.title))
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

    # ---------------------------------------------------------------- sessions
    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self._foreign(request):
            raise web.HTTPForbidden(text="nagle-sim: requests from other sites are refused")
        if not self._token_ok(request.match_info.get("token")):
            raise web.HTTPForbidden(text="nagle-sim: wrong or missing class token")
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=1 << 20)
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
        try:
            width = _size(request.query.get("width"), 80)
            height = _size(request.query.get("height"), 24)
            await websocket.prepare(request)
            service = ClassroomAppService(
                self.argv, kill_grace_s=self.options.kill_grace_s, pool=self.pool,
                extra_env=self.options.extra_env, write_bytes=websocket.send_bytes,
                write_str=websocket.send_str, close=websocket.close,
                download_manager=self.download_manager, debug=self.debug)
            self.sessions[service.app_service_id] = (service, websocket)
            self._pending -= 1
            await service.start(width, height)
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
        not know is never a reason to end a student's session."""
        assert isinstance(app_service, ClassroomAppService)
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            parsed = browser_message(message.data)
            if parsed is None:
                continue
            kind, data = parsed
            if kind == "ping":
                await websocket.send_json(["pong", data])
                continue
            app_service.last_activity = time.monotonic()
            if kind == "stdin":
                await app_service.send_bytes(str(data).encode("utf-8"))
            elif kind == "resize":
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
        await self.pool.close()
        await self.end_all_sessions()
        if self._lock_dir is not None:
            with contextlib.suppress(OSError):
                for name in os.listdir(self._lock_dir):
                    os.unlink(os.path.join(self._lock_dir, name))
                os.rmdir(self._lock_dir)

    async def on_startup(self, app: web.Application) -> None:
        announce(self.options, self.console.file)
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
    if kind == "ping":
        return kind, str(data)[:64] if isinstance(data, str | int) else ""
    if kind == "stdin":
        if not isinstance(data, str) or not data or len(data) > STDIN_LIMIT:
            return None
        return kind, data
    if kind == "resize" and isinstance(data, dict):
        return kind, (_size(data.get("width"), 80), _size(data.get("height"), 24))
    return None


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def announce(options: ServeOptions, out: Any) -> None:
    """Print where the class is, with a QR code of the student URL when opened to a class."""
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

