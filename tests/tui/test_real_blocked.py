"""Without CAP_NET_RAW, real-socket runs say why up front and run nothing (issue 12).

The CLI runs in a subprocess whose capability bounding set is emptied (setpriv), so even
as root it cannot open an AF_PACKET socket: today's empty capture "looks valid"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[2] / "lessons" / "07-write-write-read" / \
    "scenario.toml"


def _unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: cannot drop CAP_NET_RAW for the test")
    return ["setpriv", "--bounding-set=-all"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_unprivileged(), sys.executable, "-m", "nagle_sim", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="realnet is Linux-only")
@pytest.mark.parametrize("command", [["realnet", "run"], ["compare"]])
def test_without_capture_rights_the_cli_says_why_in_one_line_and_exits_2(
        command: list[str]) -> None:
    done = _run(*command, str(SCENARIO))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "CAP_NET_RAW" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "DISAGREE" not in done.stdout
    assert "segments" not in done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="realnet is Linux-only")
def test_without_capture_rights_the_app_gets_no_runner_and_a_reason() -> None:
    code = ("from nagle_sim.runners import real_runner, real_unavailable;"
            "print(real_runner() is None, '|', real_unavailable())")
    done = subprocess.run([*_unprivileged(), sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True |") and "CAP_NET_RAW" in done.stdout
