"""Classroom mode: textual-serve answers HTTP on a free localhost port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from nagle_sim.tui.serve import serve_command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_runs_nagle_sim_without_arguments() -> None:
    assert serve_command().endswith("-m nagle_sim")


def test_serve_answers_http_with_the_app_page() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nagle_sim.tui.serve", "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as rsp:
                    assert rsp.status == 200
                    body = rsp.read().decode("utf-8", "replace")
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if proc.poll() is not None:
                    break
                time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert "nagle-sim" in body
        assert "textual" in body.lower()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
