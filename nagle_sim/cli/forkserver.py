"""The classroom's fork server: one process that has started the app once, and forks a
copy of itself for each browser tab.

Starting a tab's app from scratch (a new Python, importing Textual, the app and the
simulator, loading the lessons) costs about a second of CPU and 47 MB; a class that
arrives at once queued behind 30 of those. This process pays that once: it imports
everything, loads the lessons, freezes the collector's view of those objects
(`gc.freeze`, so a child's collections never touch, and so never copy, the pages they
live on), and then forks. A child shares those pages with it copy-on-write and only
builds its own app and screen.

serve (`nagle_sim.tui.serve.ForkServer`) starts this module with one end of a
``SOCK_SEQPACKET`` socket pair (descriptor in ``NAGLE_SIM_FORK_FD``) and the classroom
policy as JSON (``NAGLE_SIM_FORK_CONFIG``). Messages, one JSON object per packet:

- serve → here: ``{"id": n, "columns": w, "rows": h, "view": "…"}`` with four
  descriptors attached (SCM_RIGHTS): the child's stdin, stdout, stderr and its class
  channel; ``view`` is the class as the teacher leads it (JSON, may be empty), so the
  app opens the lead's lesson first;
- here → serve: ``{"ready": true}`` once prepared, ``{"id": n, "pid": p}`` per fork,
  ``{"exit": p, "code": c}`` when a child ends (negative: killed by that signal).

The child starts its own session (so serve can kill its process group), takes the
descriptors as 0, 1, 2 and 3, and runs the app as ``nagle-sim tui --classroom`` would.
When serve goes away (the socket closes, even on SIGKILL) this process kills every child
it started and exits. Owns no policy of its own; imports the app and the runners (as the
CLI does), so it lives here, not in `nagle_sim.tui`.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

FD_ENV = "NAGLE_SIM_FORK_FD"
CONFIG_ENV = "NAGLE_SIM_FORK_CONFIG"
TEMPLATE_ENV = "NAGLE_SIM_FORK_TEMPLATE"
"""``0``: fork each app from the prepared process and let it build its own screens (the
way before `forktemplate`; benchmarks compare the two)."""
CHILD_FDS = 4
PACKET_LIMIT = 4096


def prepare(config: dict[str, Any]) -> Callable[[], int]:
    """Everything a tab's app needs that does not depend on the tab, done once; returns
    the function a child runs (`make_app` builds the app itself, for the template)."""
    make_app = prepare_app(config)

    def run_one() -> int:
        result = make_app(None).run()
        return result if isinstance(result, int) else 0

    return run_one


def prepare_app(config: dict[str, Any]) -> Callable[[Any], Any]:
    """Imports, lessons, runners and policy, done once; returns a function that builds one
    tab's `NagleApp` (with the given class link, or the one serve handed this process)."""
    from pathlib import Path

    # imported by the app only when it runs: import them here, once for every child
    import textual.drivers.web_driver  # noqa: F401
    from textual.drivers import _input_reader  # noqa: F401

    from .. import runners
    from ..lessons import load_lessons
    from ..tui.app import NagleApp
    from ..tui.classlink import ClassLink
    from ..tui.classroom import Classroom, queued_runner

    blocker = runners.real_unavailable() or ""
    run_real = runners.real_runner() if not blocker else None
    lock = config.get("real_lock")
    classroom = Classroom(allow_real=bool(config.get("allow_real")),
                          real_timeout_s=float(config.get("real_timeout_s", 20.0)),
                          real_lock=Path(lock) if lock else None)
    if run_real is not None and classroom.allow_real:
        run_real = queued_runner(run_real, classroom)
    run_sim = runners.classroom_simulator()
    lessons = load_lessons()
    niceness = int(config.get("nice", 0))

    def make_app(link: Any) -> Any:
        if niceness > 0:  # below serve: the class's hub answers first under a start-up rush
            with contextlib.suppress(OSError):
                os.nice(niceness)
        return NagleApp(run_sim=run_sim, run_real=run_real, classroom=classroom,
                        real_blocker=blocker, lessons=lessons,
                        class_link=link if link is not None else ClassLink.from_environment())

    return make_app


def _child(run_one: Callable[[], int], fds: list[int], columns: int, rows: int,
           view: str, keep_closed: list[int]) -> None:
    """In the forked child: become the tab's app process. Never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in keep_closed:
            with contextlib.suppress(OSError):
                os.close(fd)
        # out of the way first (a received descriptor may have a target's number), then
        # into place; nothing else of this process stays open in the app
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 16) for fd in fds]
        for target, fd in enumerate(moved):
            os.dup2(fd, target)
        os.closerange(CHILD_FDS, 1 << 20)
        os.set_inheritable(3, False)
        os.environ["COLUMNS"] = str(columns)
        os.environ["ROWS"] = str(rows)
        os.environ["NAGLE_SIM_CLASS_FD"] = "3"
        os.environ["NAGLE_SIM_CLASS_VIEW"] = view  # the teacher's lead at this start
        code = run_one()
    except BaseException as error:  # the tab sees its session end; serve's console one line
        with contextlib.suppress(Exception):
            os.write(2, f"nagle-sim: the app failed: {error!r}\n".encode())
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(code)


def serve_forks(control: socket.socket, run_one: Callable[[], int]) -> None:
    """Fork a child per request until serve closes the socket; then end every child."""
    children: set[int] = set()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the pipe

    def tell(message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            control.send(json.dumps(message).encode())

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            tell({"exit": pid, "code": code})

    tell({"ready": True})
    try:
        while True:
            try:
                readable, _, _ = select.select([control.fileno(), wake_r], [], [])
            except InterruptedError:
                continue
            if wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                reap()
            if control.fileno() not in readable:
                continue
            try:
                data, fds, _flags, _addr = socket.recv_fds(control, PACKET_LIMIT, CHILD_FDS)
            except InterruptedError:
                continue
            if not data:
                break  # serve is gone
            try:
                request = json.loads(data)
                ident = int(request["id"])
                columns, rows = int(request["columns"]), int(request["rows"])
                view = str(request.get("view") or "")
                if len(fds) != CHILD_FDS:
                    raise ValueError("descriptors missing")
            except (ValueError, KeyError, TypeError):
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                _child(run_one, fds, columns, rows, view, [control.fileno(), wake_r, wake_w])
            children.add(pid)
            for fd in fds:
                os.close(fd)
            tell({"id": ident, "pid": pid})
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for pid in list(children):
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def main() -> int:
    try:
        control = socket.socket(fileno=int(os.environ.pop(FD_ENV)))
        config = json.loads(os.environ.pop(CONFIG_ENV, "{}"))
    except (KeyError, ValueError, OSError) as error:
        print(f"nagle-sim fork server: started without its socket ({error})", file=sys.stderr)
        return 2
    control.set_inheritable(False)
    template = os.environ.pop(TEMPLATE_ENV, "1") != "0"
    try:
        make_app = prepare_app(config)
    except Exception as error:  # serve falls back to starting each app on its own
        print(f"nagle-sim fork server: cannot prepare the app: {error!r}", file=sys.stderr)
        return 1
    # everything so far is shared with every child, read-only: never scan it again
    gc.collect()
    gc.freeze()
    if not template:
        def run_one() -> int:
            result = make_app(None).run()
            return result if isinstance(result, int) else 0

        serve_forks(control, run_one)
        return 0
    from .forktemplate import Template, reserve_low_fds
    server = Template(reserve_low_fds(control), make_app)
    code = server.run()
    if server.forked is not None:  # a tab's app, forked from the template, has ended
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
