"""The realnet watchdog (issue 29.10): a process that outlives a run and, once the run's
process has exited however it exited, removes what is named after it. These checks need
no root: the resources are temp files named like a run's; the namespaces themselves are
checked by tests/realnet/test_runner.py and benchmarks/sigkill_cleanup.py (root)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from realnet import cleanup, watchdog

ROOT = Path(__file__).resolve().parents[2]


def test_a_private_loopback_namespace_is_named_as_ours() -> None:
    """A private loopback's namespace (``-l``) was not recognised, so neither a later run
    nor `realnet cleanup` ever removed one whose run was killed."""
    assert cleanup.owner_of("nsim-123-4-l") == 123
    assert cleanup.owner_of("nsim-123-4-c") == 123
    assert cleanup.owner_of("nsim-123-4-x") is None


def test_the_watchdog_removes_a_sigkilled_owners_leftovers_and_exits() -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    left = Path(tempfile.gettempdir()) / f"nsim-{owner.pid}-client-abc123.json"
    left.write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dog = subprocess.Popen([sys.executable, "-m", "realnet.watchdog", "--owner-pid",
                            str(owner.pid)], env=env, stdout=subprocess.PIPE,
                           start_new_session=True)
    try:
        assert dog.stdout is not None and dog.stdout.readline() == b"READY\n"
        time.sleep(0.2)
        assert dog.poll() is None and left.exists()      # nothing while the owner lives
        assert (dog.pid, owner.pid) in watchdog.list_watchdogs()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert dog.wait(10) == 0
        assert not left.exists()
    finally:
        for proc in (owner, dog):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        left.unlink(missing_ok=True)


def test_a_watchdog_started_after_its_owner_died_cleans_up_at_once() -> None:
    owner = subprocess.Popen(["true"])
    owner.wait()
    left = Path(tempfile.gettempdir()) / f"nsim-{owner.pid}-server-abc123.json"
    left.write_text("{}")
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "realnet.watchdog", "--owner-pid",
                               str(owner.pid)], env=env, capture_output=True, timeout=30)
        assert done.returncode == 0 and not left.exists()
    finally:
        left.unlink(missing_ok=True)


def test_ensure_starts_one_watchdog_per_process_in_a_session_of_its_own() -> None:
    code = ("import os, sys; from realnet import watchdog\n"
            "watchdog.ensure(); watchdog.ensure()\n"
            "mine = [w for w, o in watchdog.list_watchdogs() if o == os.getpid()]\n"
            "assert len(mine) == 1, mine\n"
            "assert os.getsid(mine[0]) == mine[0] != os.getsid(0)\n"
            "print(mine[0])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    dog = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while cleanup.pid_alive(dog) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not cleanup.pid_alive(dog), "the watchdog outlived its owner's exit"
