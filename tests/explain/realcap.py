"""Real programs captured with tcpdump, for the realnet explain tests.

Owns: `Tcpdump` (start on an interface, optionally inside a namespace, wait until it is
listening, stop and flush) and small socket programs (write-write-read, cork, idle,
ping-pong) run on threads. Ports are ephemeral (bound to 0) so parallel runs never clash.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path


class Tcpdump:
    """tcpdump (or dumpcap, for pcapng) on one interface, filtered to one port."""

    def __init__(self, path: Path, port: int, iface: str = "lo", *, netns: str | None = None,
                 pcapng: bool = False, snaplen: int = 200, linktype: str | None = None,
                 nano: bool = False) -> None:
        if pcapng:
            argv = ["dumpcap", "-q", "-i", iface, "-s", str(snaplen), "-w", str(path),
                    "-f", f"tcp port {port}"]
            self.ready = b"Capturing on"
        else:
            argv = ["tcpdump", "-i", iface, "-U", "--immediate-mode", "-n", "-s",
                    str(snaplen), "-w", str(path)]
            if linktype:
                argv += ["-y", linktype]
            if nano:
                argv += ["--time-stamp-precision", "nano"]
            argv += ["tcp", "port", str(port)]
            self.ready = b"listening on"
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_listening()

    def _wait_listening(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + 10
        buf = b""
        while self.ready not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"capture did not start: {buf.decode(errors='replace')}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    continue
                buf += chunk
        time.sleep(0.2)   # the socket is bound before the message; let it settle

    def stop(self) -> None:
        # --immediate-mode hands every packet over at once (without it, libpcap keeps
        # them in a ring block that SIGINT can discard)
        time.sleep(0.3)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def listening(host: str = "127.0.0.1", family: int = socket.AF_INET,
              sock: socket.socket | None = None) -> Iterator[socket.socket]:
    srv = sock or socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, 0))
    srv.listen(1)
    try:
        yield srv
    finally:
        srv.close()


def recv_exact(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def serve_echo(srv: socket.socket, request: int, reply: int, rounds: int,
               nodelay: bool = True) -> threading.Thread:
    """A server thread: read ``request`` bytes, answer ``reply`` bytes, ``rounds`` times."""
    def run() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(nodelay))
            for _ in range(rounds):
                recv_exact(conn, request)
                conn.sendall(b"r" * reply)
            with contextlib.suppress(OSError):
                conn.recv(1)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def client(addr: tuple[str, int], body: Callable[[socket.socket], None], *,
           family: int = socket.AF_INET, nodelay: bool = False,
           sock: socket.socket | None = None) -> None:
    s = sock or socket.socket(family, socket.SOCK_STREAM)
    with s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(nodelay))
        s.connect(addr)
        body(s)
