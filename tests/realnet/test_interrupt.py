"""realnet.interrupt: a SIGTERM stops a run (or ``python -m realnet``) with exit 130 and its
clean-up done, whichever Python code it lands in. Each case runs in a fresh interpreter
started with ``-m`` (as ``python -m realnet`` is), the SIGTERM sent by the code itself at
the moment under test, so the landing place is exact rather than a timing race.

No root needed: these exercise the handler, not a run (test_runner.py sends SIGTERM to
real runs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet is Linux-only", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import os, signal, sys, time
from realnet.interrupt import EXIT_TERMINATED, sigterm_as_interrupt

def term():
    os.kill(os.getpid(), signal.SIGTERM)

def main():
    try:
        with sigterm_as_interrupt():
            body()
    except KeyboardInterrupt:
        print("caught", flush=True)
        return EXIT_TERMINATED
    print("not interrupted", flush=True)
    return 0
"""


def run_module(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    pkg = tmp_path / "sigterm_case"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(PRELUDE + textwrap.dedent(body)
                                     + "\nsys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.run([sys.executable, "-m", "sigterm_case"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)


def test_a_sigterm_inside_string_exec_code_still_exits_130(tmp_path: Path) -> None:
    """What made CI's SIGTERM test die by SIGINT (-2): the interrupt passed through code run
    by exec() of a string (dataclasses build their methods so, in modules imported mid-run);
    CPython 3.11 then kills a ``-m`` process with SIGINT at exit however it was caught."""
    proc = run_module(tmp_path, """
        def body():
            exec("term()\\nx = 1", {"term": term})
            time.sleep(5)
    """)
    assert (proc.returncode, proc.stdout) == (130, "caught\n"), proc


def test_a_sigterm_swallowed_by_an_at_fork_hook_still_stops_the_body(tmp_path: Path) -> None:
    """A handler that runs inside a callback whose exceptions Python only prints (here an
    at-fork hook, as logging's lock release is) loses its exception; the request is kept
    and raised when the body ends (and at every `check`), not forgotten (exit 0)."""
    proc = run_module(tmp_path, """
        def body():
            os.register_at_fork(after_in_parent=term)
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            print("body went on", flush=True)
    """)
    assert "Exception ignored" in proc.stderr, proc     # the exception was swallowed
    assert (proc.returncode, proc.stdout) == (130, "body went on\ncaught\n"), proc


def test_check_raises_a_lost_sigterm_where_the_run_waits(tmp_path: Path) -> None:
    proc = run_module(tmp_path, """
        from realnet.interrupt import check
        def body():
            os.register_at_fork(after_in_parent=term)
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            check()
            print("after check", flush=True)
    """)
    assert (proc.returncode, proc.stdout) == (130, "caught\n"), proc


def test_a_second_sigterm_does_not_cut_the_clean_up_short(tmp_path: Path) -> None:
    proc = run_module(tmp_path, """
        def body():
            try:
                term()
                time.sleep(5)
            finally:
                term()              # e.g. a service manager repeating its request
                time.sleep(0.05)
                print("cleaned up", flush=True)
    """)
    assert (proc.returncode, proc.stdout) == (130, "cleaned up\ncaught\n"), proc


def test_a_later_run_in_the_same_process_starts_clean() -> None:
    """The app and a classroom serve make many runs in one process: a run interrupted by a
    SIGTERM it caught leaves no request behind for the next, and the previous handler is
    back after each."""
    code = textwrap.dedent("""
        import os, signal, time
        from realnet.interrupt import pending, sigterm_as_interrupt
        before = signal.getsignal(signal.SIGTERM)
        try:
            with sigterm_as_interrupt():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
        except KeyboardInterrupt:
            print("first interrupted", pending())
        assert signal.getsignal(signal.SIGTERM) is before
        with sigterm_as_interrupt():
            time.sleep(0.01)
        print("second ran", pending())
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (
        0, "first interrupted True\nsecond ran False\n"), proc
