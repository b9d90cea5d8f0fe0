"""A real program captured with tcpdump while `nagle-sim watch -o` records the kernel's
decisions about the same connection (root, BPF): the input of ``explain CAPTURE --kernel
WATCH``.

Owns: `capture_and_watch` — a NODELAY echo server on an ephemeral loopback port, tcpdump
on that port, ``nagle-sim watch --port P --json -o FILE`` (both ends watched) started and
waited for until it is attached, the client program run, then watch stopped with SIGINT
(it detaches and writes its trace) and tcpdump flushed. Used by the real-kernel test
(tests/explain/test_kernel_join.py) and to record the fixtures
(``sudo python -m tests.explain.record_kernel_fixtures``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .realcap import Tcpdump, recv_exact

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).with_name("programs")


def serve(srv: socket.socket, request: int, reply: int, rounds: int) -> threading.Thread:
    """A NODELAY server thread: read ``request`` bytes, answer ``reply``, ``rounds``
    times, then wait for the client to close."""
    def run() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with contextlib.suppress(OSError, EOFError):
                for _ in range(rounds):
                    recv_exact(conn, request)
                    conn.sendall(b"r" * reply)
                conn.recv(1)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _wait_started(proc: subprocess.Popen[str], limit_s: float = 60.0) -> dict[str, object]:
    """The watch's ``start`` line (it is attached once it is printed)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + limit_s
    fd = proc.stdout.fileno()
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            err = proc.stderr.read() if proc.stderr is not None else ""
            raise RuntimeError(f"watch did not start: {err.strip()[-500:]}")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            obj = json.loads(line)
            if obj.get("type") == "start":
                return dict(obj)


def capture_and_watch(tmp: Path, argv: list[str], *, request: int, reply: int,
                      rounds: int, name: str = "run", program_only: bool = False
                      ) -> tuple[Path, Path, str]:
    """Run ``argv HOST PORT ROUNDS`` + its mode (the last item of ``argv``) against the
    echo server while tcpdump and watch record it: (the capture, the watch trace, watch's
    stderr). Watch follows the port (both ends), or with ``program_only`` starts the
    program itself (``nagle-sim watch -o FILE -- PROGRAM``: only the client is watched,
    as when the server is another host's)."""
    pcap, trace = tmp / f"{name}.pcap", tmp / f"{name}.watch.json"
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    command = [*argv[:-1], "127.0.0.1", str(port), str(rounds), argv[-1]]
    watch_cmd = [sys.executable, "-m", "nagle_sim", "watch", "--json", "-o", str(trace)]
    cap = watch = None
    err = ""
    try:
        if program_only:
            cap = Tcpdump(pcap, port)
            server = serve(srv, request, reply, rounds)
            done = subprocess.run([*watch_cmd, "--", *command], cwd=tmp, env=_env(),
                                  capture_output=True, text=True, timeout=180)
            err = done.stderr
            if done.returncode != 0:
                raise RuntimeError(f"watch -- program: exit {done.returncode}: "
                                   f"{err.strip()[-500:]}")
            server.join(20)
        else:
            # --quiet: decisions are not streamed to the pipe, only the start line, the
            # stalls and the counters (the trace file has every decision)
            watch = subprocess.Popen([*watch_cmd, "--quiet", "--port", str(port),
                                      "--duration", "120"],
                                     cwd=tmp, env=_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            _wait_started(watch)
            cap = Tcpdump(pcap, port)
            server = serve(srv, request, reply, rounds)
            subprocess.run(command, check=True, timeout=120)
            server.join(20)
            time.sleep(0.3)          # the last delayed-ACK timers and the close
    finally:
        if cap is not None:
            cap.stop()
        srv.close()
        if watch is not None:
            if watch.poll() is None:
                watch.send_signal(signal.SIGINT)
            try:
                out, err = watch.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                watch.kill()
                out, err = watch.communicate()
                err += "\n(killed: no exit 120 s after SIGINT)"
            err += f"\n(exit {watch.returncode}; stdout ends {out[-300:]!r})"
    if not trace.exists():
        raise RuntimeError(f"watch wrote no trace: {err.strip()[-800:]}")
    return pcap, trace, err
