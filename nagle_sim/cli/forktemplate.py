"""The fork server's template app: one `NagleApp` that has started, laid itself out and
followed the class to the teacher's lesson and question, forked for each browser tab.

Forking only after the imports (`forkserver.serve_forks`) left each tab's app to build its
screens itself: 0.35 CPU-s for the lesson list and 1.5 CPU-s for lesson 7 at its question
(measured headless at 120×40 on this machine), and a class of 30 arriving at once queued
behind 45 CPU-s on two cores. Here the template does that once; a forked child has the
screens already built and only repaints them into its own terminal (0.03 CPU-s at the
template's size, about 0.4 CPU-s when it must lay out at another size).

How a running app becomes a tab's app, in the child (`Template._become`):

- the asyncio loop gets its own epoll instance and self-pipe (the ones inherited are
  shared with the template and every other child), and forgets the template's thread
  pool (its threads stay in the template);
- the tab's stdin, stdout, stderr and class channel (received from serve) become
  descriptors 0-3: the template reserves 0-3 for /dev/null from its start, so nothing
  the loop uses sits there;
- the class link speaks on the new channel (`ClassLink.rebind`), keeping what the
  template already followed;
- the driver (`TemplateDriver`, Textual's web driver that stays silent until then) writes
  the terminal set-up, starts its input thread and repaints the screen at the tab's size.

The template forks only when it is quiet: it has followed the view of every request it
was sent, and no worker thread (a simulation) is running, since a thread does not cross
a fork. Owns no policy; imports Textual's web driver and asyncio's selector loop
internals (`_selector`, `_ssock`, `_make_self_pipe`: checked at start, else the fork
server forks before the app as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import json
import os
import selectors
import signal
import socket
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from threading import Event, Thread
from typing import Any

from textual import events, messages
from textual.driver import Driver
from textual.geometry import Size
from textual.worker import WorkerState

from ..classroom.channel import encode
from ..tui.classlink import ClassLink
from ..tui.webdriver import ClassroomWebDriver, WholePackets

TEMPLATE_SIZE = (120, 40)
"""The template's size until tabs say otherwise: it then follows the most common one."""
QUIET_POLL_S = 0.02
CHILD_FDS = 4
PACKET_LIMIT = 4096


def loop_can_be_forked(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this loop has the selector and self-pipe `_become` replaces."""
    return (isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop)
            and all(hasattr(loop, name) for name in ("_selector", "_ssock", "_csock",
                                                     "_make_self_pipe", "_close_self_pipe",
                                                     "_default_executor")))


class TemplateDriver(ClassroomWebDriver):
    """The classroom's web driver (Textual's, each packet written whole: see
    `nagle_sim.tui.webdriver`), silent and without input until `activate` (in a child)."""

    started: Callable[[asyncio.AbstractEventLoop], None] | None = None
    """Called once the app's loop runs (the template hooks the fork server in here)."""

    def __init__(self, app: Any, *, debug: bool = False, mouse: bool = True,
                 size: tuple[int, int] | None = None) -> None:
        # not WebDriver.__init__: its input reader registers fd 0 (here /dev/null, which
        # epoll refuses) with a selector every child would share
        Driver.__init__(self, app, debug=debug, mouse=mouse, size=size or TEMPLATE_SIZE)
        self.stdout = sys.__stdout__
        self.fileno = 1
        self._write = WholePackets(1)  # type: ignore[assignment]  # Textual's: partial
        self.exit_event = Event()
        self._key_thread = Thread(target=self.run_input_thread, name="textual-input")
        self._input_reader: Any = None
        self._deliveries = {}
        self.active = False

    def write(self, data: str) -> None:
        if self.active:
            super().write(data)

    def write_meta(self, data: dict[str, object]) -> None:
        if self.active:
            super().write_meta(data)

    def write_binary_encoded(self, data: tuple[str | bytes, ...]) -> None:
        if self.active:
            super().write_binary_encoded(data)

    def start_application_mode(self) -> None:
        loop = asyncio.get_running_loop()
        size = Size(*(self._size or TEMPLATE_SIZE))
        asyncio.run_coroutine_threadsafe(self._app._post_message(events.Resize(size, size)),
                                         loop=loop)
        # as the web driver starts: blurred until the page says it has focus (restyling
        # every node for it is a child's largest cost if the template has not done it)
        self._app.call_later(self._app.post_message, events.AppBlur())
        if self.started is not None:
            self.started(loop)

    def resize(self, columns: int, rows: int) -> None:
        """Lay the app out at another size (the template following its tabs)."""
        self._size = (columns, rows)
        size = Size(columns, rows)
        self._app.post_message(events.Resize(size, size))

    def activate(self, columns: int, rows: int) -> None:
        """In a forked child, with the tab's descriptors in place: become its driver."""
        from textual.drivers._input_reader import InputReader

        loop = asyncio.get_running_loop()
        app = self._app

        def do_exit() -> None:
            asyncio.run_coroutine_threadsafe(app._post_message(messages.ExitApp()), loop=loop)

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, do_exit)
        self.active = True
        # a lock of this process's own (the template never writes, but a lock must not
        # cross a fork held)
        self._write = WholePackets(1)  # type: ignore[assignment]  # Textual's: partial
        self._write(b"__GANGLION__\n")
        self.write("\x1b[?1049h")  # alternate screen
        self._enable_mouse_support()
        self.write("\x1b[?25l")  # hide the cursor
        self.write("\033[?1003h")
        self._request_terminal_sync_mode_support()
        self._enable_bracketed_paste()
        self._input_reader = InputReader()
        self._key_thread = Thread(target=self.run_input_thread, name="textual-input")
        self._key_thread.start()
        if (columns, rows) != tuple(self._size or ()):
            self.resize(columns, rows)  # lays out anew and paints the whole screen
        else:
            app.screen.refresh()  # the whole screen, into a terminal that has nothing yet

    def stop_application_mode(self) -> None:
        self.exit_event.set()
        if self._input_reader is not None:
            self._input_reader.close()
        self.write_meta({"type": "exit"})


@dataclass
class Request:
    ident: int
    fds: list[int]
    columns: int
    rows: int
    view: dict[str, Any] | None


def _class_view(raw: str) -> dict[str, Any] | None:
    try:
        view = json.loads(raw) if raw else None
    except ValueError:
        return None
    return view if isinstance(view, dict) and view.get("t") == "class" else None


class Template:
    """The template app and the fork server's loop around it (run inside the app's loop)."""

    def __init__(self, control: socket.socket, make_app: Callable[[Any], Any]) -> None:
        self.control = control
        self.peer, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.peer.setblocking(False)
        self.link = ClassLink(theirs)
        self.app = make_app(self.link)
        self.app.driver_class = TemplateDriver
        TemplateDriver.started = self._started
        self.pending: list[Request] = []
        self.children: set[int] = set()
        self.fed: dict[str, Any] | None = None
        """The view the template was last told to follow (None: the lesson list)."""
        self.sizes: Counter[tuple[int, int]] = Counter()
        self.forked: Request | None = None
        """In a forked child: the request it serves."""
        self._retry: asyncio.TimerHandle | None = None
        self._resetting = False

    # ------------------------------------------------------------ the template
    def run(self) -> int:
        """Run the template until serve goes; in a child, run the tab's app. Returns the
        exit code (the caller ends a child with it)."""
        code = 0
        try:
            result = self.app.run()
            code = result if isinstance(result, int) else 0
        finally:
            if self.forked is None:
                self._end_children()
        return code

    def _end_children(self) -> None:
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
        self.children.clear()

    def _tell(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.control.send(json.dumps(message).encode())

    def _started(self, loop: asyncio.AbstractEventLoop) -> None:
        if not loop_can_be_forked(loop):
            print("nagle-sim fork server: this asyncio loop cannot be forked",
                  file=sys.stderr)
            self.app.exit(1)
            return
        loop.add_reader(self.control.fileno(), self._on_control)
        loop.add_reader(self.peer.fileno(), self._drain_peer)
        loop.add_signal_handler(signal.SIGCHLD, self._reap)
        self._tell({"ready": True})

    def _drain_peer(self) -> None:
        """What the template's link reports (where it is) goes nowhere."""
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self.peer.recv(65536):
                pass

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self._tell({"exit": pid, "code": os.waitstatus_to_exitcode(status)})

    def _on_control(self) -> None:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.control, PACKET_LIMIT, CHILD_FDS)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        if not data:  # serve is gone (even killed): so are this process and its children
            self._end_children()
            os._exit(0)
        try:
            request = json.loads(data)
            item = Request(int(request["id"]), list(fds), int(request["columns"]),
                           int(request["rows"]), _class_view(str(request.get("view") or "")))
            if len(fds) != CHILD_FDS or not (0 < item.columns <= 1000 and
                                             0 < item.rows <= 1000):
                raise ValueError("descriptors or size")
        except (ValueError, KeyError, TypeError):
            for fd in fds:
                os.close(fd)
            return
        self.sizes[(item.columns, item.rows)] += 1
        self._follow(item.view)
        self.pending.append(item)
        self._try_fork()

    def _follow(self, view: dict[str, Any] | None) -> None:
        """Have the template show what an app started now would show."""
        if view is not None:
            view = {**view, "name": "", "poll": view.get("poll") and {
                **view["poll"], "mine": [None, None]}}
            view = json.loads(json.dumps(view))
        if view == self.fed:
            return
        self.fed = view
        if view is None or (view.get("lead") is None and view.get("poll") is None):
            self.fed = None
            if self.link.applied is not None:
                self._resetting = True
                asyncio.get_running_loop().create_task(self._reset())
            return
        with contextlib.suppress(OSError):
            self.peer.sendall(encode(view))

    async def _reset(self) -> None:
        """Back to the lesson list (the teacher freed the class)."""
        try:
            app, link = self.app, self.link
            link.view = link.applied = None
            await link._close_ballot()
            while len(app.screen_stack) > 2:
                await app.pop_screen()
        except Exception as error:  # the template stays usable: a child follows itself
            self.app.log.warning(f"template: could not go back to the list: {error!r}")
        finally:
            self._resetting = False
            self._try_fork()

    def _quiet(self) -> bool:
        if self._resetting or self.link.applied != self.fed:
            return False
        if any(worker.state in (WorkerState.PENDING, WorkerState.RUNNING)
               for worker in self.app.workers):
            return False  # a thread (a simulation) would not be in the child
        if any(getattr(screen, "class_pending", None) is not None
               for screen in self.app.screen_stack):
            return False  # a lesson's run arrived, its question not asked yet
        ballot = self.link.ballot
        if ballot is not None and (ballot.screen is None or not ballot.screen.is_attached):
            return False
        return self._settled()

    def _settled(self) -> bool:
        """Nothing left for the app to do (as Textual's pilot waits for): no message
        waiting in any node, no layout or repaint pending on the screen."""
        app = self.app
        screen = app.screen
        if screen._layout_required or screen._dirty_widgets or screen._repaint_required:
            return False
        nodes = [app, *app.screen_stack, *screen.walk_children(with_self=False)]
        return all(node._message_queue.empty() for node in nodes)

    def _try_fork(self) -> None:
        self._retry = None
        if not self.pending:
            return
        loop = asyncio.get_running_loop()
        if not self._quiet():
            if self._retry is None:
                self._retry = loop.call_later(QUIET_POLL_S, self._try_fork)
            return
        gc.freeze()  # what the template built is shared read-only: never scanned again
        while self.pending:
            item = self.pending.pop(0)
            pid = os.fork()
            if pid == 0:
                self._become(item, loop)
                return
            self.children.add(pid)
            for fd in item.fds:
                os.close(fd)
            self._tell({"id": item.ident, "pid": pid})
        columns, rows = self.sizes.most_common(1)[0][0]
        driver = self.app._driver
        if isinstance(driver, TemplateDriver) and (columns, rows) != driver._size:
            driver.resize(columns, rows)

    # ------------------------------------------------------------ in a child
    def _become(self, item: Request, loop: asyncio.AbstractEventLoop) -> None:
        """In the forked child (inside the loop's callback): become the tab's app."""
        self.forked = item
        try:
            os.setsid()
            # asyncio keeps the running loop with the pid that started it, and a forked
            # child would be told no loop runs (Textual asks for it everywhere)
            asyncio.events._set_running_loop(loop)
            _own_loop(loop)  # first: a reader removed from the shared epoll is the template's
            loop.remove_reader(self.control.fileno())
            loop.remove_reader(self.peer.fileno())
            loop.remove_signal_handler(signal.SIGCHLD)
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGTERM, signal.SIGPIPE):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for other in self.pending:  # other tabs' descriptors are not this app's
                for fd in other.fds:
                    os.close(fd)
            self.pending.clear()
            self.control.close()
            self.peer.close()
            self.children.clear()
            for target, fd in enumerate(item.fds):  # 0-3 hold /dev/null (main)
                os.dup2(fd, target)
                os.close(fd)
            os.set_inheritable(3, False)
            self.link.rebind(socket.socket(fileno=3), item.view)
            driver = self.app._driver
            assert isinstance(driver, TemplateDriver)
            driver.activate(item.columns, item.rows)
        except BaseException as error:  # the tab sees its session end; serve one line
            with contextlib.suppress(Exception):
                os.write(2, f"nagle-sim: the app failed to start: {error!r}\n".encode())
            os._exit(1)


def _own_loop(loop: Any) -> None:
    """Give the forked child's loop an epoll instance and self-pipe of its own (the
    inherited ones are shared with the template and its other children)."""
    old: selectors.BaseSelector = loop._selector
    new = type(old)()
    for key in list(old.get_map().values()):
        new.register(key.fileobj, key.events, key.data)
    loop._selector = new
    old.close()  # this process's descriptor of the shared epoll instance only
    loop._close_self_pipe()
    loop._make_self_pipe()
    loop._default_executor = None  # its threads stayed in the template


def reserve_low_fds(control: socket.socket) -> socket.socket:
    """Hold descriptors 0-3 with /dev/null, so nothing the template opens gets one of the
    numbers a child puts its tab's descriptors at; returns `control` off those numbers."""
    if control.fileno() <= 3:
        old = control.fileno()
        moved = socket.socket(fileno=fcntl.fcntl(old, fcntl.F_DUPFD_CLOEXEC, 4))
        control.detach()
        os.close(old)
        control = moved
    null = os.open(os.devnull, os.O_RDWR)
    for fd in range(4):
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            os.dup2(null, fd, inheritable=False)
    if null > 3:
        os.close(null)
    return control
