"""A process that outlives realnet's runs and removes what a killed one leaves behind.

Owns: `ensure` (start, once per process that creates namespaces, a watchdog for that
process) and the watchdog's `main`: wait until the owner exits, however it exits (SIGKILL
included, when no ``finally`` or ``atexit`` runs), then remove the namespaces, relays and
temp files named after it (`realnet.cleanup.remove_owned`) and exit.

Why a process: a run's namespaces are bind mounts under /run/netns, so they outlive every
process of the run; before this, a SIGKILLed run's namespaces stayed until the next run or
``nagle-sim realnet cleanup`` (issue 29.10: a class machine that never runs again kept
them). The watchdog is started before the first namespace is created, in a session of its
own (a signal to the run's process group, e.g. Ctrl-C or ``kill -9 -PGID``, does not reach
it), and waits on a pidfd (``pidfd_open(2)``: readable once the owner has exited, zombie
or not). It holds nothing of the run, so it can never keep a namespace or device alive.
One per owner process, however many runs that process makes (the app, a classroom
serve); it costs one small idle interpreter while its owner lives.

Must not import textual, rich, simpy, nagle_sim or `realnet.netns` (it imports us).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from realnet import cleanup

MODULE = "realnet.watchdog"
READY_TIMEOUT_S = 10.0
_lock = threading.Lock()
_started_for = 0
_process: subprocess.Popen[bytes] | None = None
"""Kept so that the Popen object is never collected (and never waited for) while we live."""


def ensure() -> None:
    """Start this process's watchdog unless it runs already. Call before creating the
    first namespace: a watchdog that starts after its owner died cleans up at once."""
    global _started_for, _process
    pid = os.getpid()
    with _lock:
        if _started_for == pid:          # a fork()ed child gets its own
            return
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        _process = proc = subprocess.Popen(
            # -S: no site (the editable install's finder, .pth files): the watchdog
            # needs the standard library and realnet (on PYTHONPATH) only, and starts in
            # tens of ms rather than hundreds
            [sys.executable, "-S", "-m", MODULE, "--owner-pid", str(pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd="/", env=env)
        _started_for = pid
        # Wait until it watches (READY: its pidfd is open), so that a namespace made from
        # here on is never left to a watchdog still starting while its owner is killed.
        # A watchdog that never says so is no reason to refuse the run: close() and the
        # next run's clean-up remain.
        assert proc.stdout is not None
        with proc.stdout:
            if select.select([proc.stdout], [], [], READY_TIMEOUT_S)[0]:
                proc.stdout.readline()


def list_watchdogs() -> list[tuple[int, int]]:
    """(watchdog pid, owner pid) of every live watchdog (by its argv), for tests."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if MODULE in argv and "--owner-pid" in argv:
            i = argv.index("--owner-pid")
            if i + 1 < len(argv) and argv[i + 1].isdigit():
                found.append((int(entry), int(argv[i + 1])))
    return found


def _ready() -> None:
    with contextlib.suppress(OSError):
        os.write(1, b"READY\n")
        os.close(1)


def wait_for_exit(pid: int) -> None:
    """Say READY on stdout once watching, then return once process ``pid`` has exited (a
    zombie counts as exited)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):     # no pidfd (Linux < 5.3): poll
        _ready()
        while cleanup.pid_alive(pid):
            time.sleep(0.1)
        return
    _ready()
    try:
        # readable once the owner has exited (not pid_alive: the pid may be reused)
        while not select.select([fd], [], [])[0]:
            pass
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--owner-pid", type=int, required=True)
    args = parser.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    wait_for_exit(args.owner_pid)
    try:
        cleanup.remove_owned(args.owner_pid)
    except (OSError, ValueError):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
