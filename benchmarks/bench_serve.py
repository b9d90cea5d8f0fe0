"""Classroom load (prints, never asserts): N browser sessions against one `nagle-sim serve`.

Each simulated student loads the page with the class token, opens the app's websocket as
the page's script would, waits for the first screen (the lesson list), then presses Enter
and waits for the first lesson's ladder. Reported per N: time to first screen and to the
open lesson (median / max), total and per-session memory (RSS of the app processes, and
of serve itself), and the largest N for which every session saw its first screen within
3 s. By default serve starts N app processes ahead (``--warm N``, as when open to a class)
and the students arrive once they are up; ``--cold`` also measures ``--warm 0``.
Run: ``python benchmarks/bench_serve.py [--sizes 10 30 60] [--cold]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import time

import aiohttp

TOKEN = "bench-class-token"
FIRST_SCREEN = b"Pick a lesson"
LESSON_OPEN = "client ⇄ server".encode()
GOAL_S = 3.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    return [int(a) for a, b in (line.split() for line in out.splitlines()) if int(b) == pid]


class _Class:
    """Students stay connected until every one has its lesson open (or gave up), so the
    memory reading sees the whole class at once."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.all_in = asyncio.Event()

    def arrived(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.all_in.set()


async def _student(port: int, started: float, timeout: float, room: _Class
                   ) -> tuple[float, float]:
    """Seconds from the start to the first screen and to the opened lesson (inf: never)."""
    result = (float("inf"), float("inf"))
    try:
        result = await _session(port, started, timeout, room)
    finally:
        if result[1] == float("inf"):  # gave up: count it in, or the others wait forever
            room.arrived()
    return result


async def _session(port: int, started: float, timeout: float, room: _Class
                   ) -> tuple[float, float]:
    first = opened = float("inf")
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/?token={TOKEN}") as page:
                body = await page.text()
            found = re.search(r'data-session-websocket-url="([^"]+)"', body)
            if page.status != 200 or found is None:
                return first, opened
            async with session.ws_connect(found.group(1) + "?width=120&height=40",
                                          max_msg_size=0) as ws:
                got = b""
                while True:
                    message = await ws.receive(timeout=timeout)
                    if message.type != aiohttp.WSMsgType.BINARY:
                        break
                    got += message.data
                    if first == float("inf") and FIRST_SCREEN in got:
                        first = time.monotonic() - started
                        got = b""
                        await ws.send_json(["stdin", "\r"])
                    elif first != float("inf") and LESSON_OPEN in got:
                        opened = time.monotonic() - started
                        room.arrived()
                        await room.all_in.wait()
                        await asyncio.sleep(1.0)  # one more memory reading, all in
                        break
    except (aiohttp.ClientError, TimeoutError):
        pass
    return first, opened


async def _measure(port: int, serve_pid: int, n: int, timeout: float
                   ) -> tuple[list[tuple[float, float]], int, int]:
    started = time.monotonic()
    room = _Class(n)
    tasks = [asyncio.create_task(_student(port, started, timeout, room)) for _ in range(n)]
    peak_apps = peak_serve = 0
    while not all(t.done() for t in tasks):
        await asyncio.sleep(0.5)
        peak_apps = max(peak_apps, sum(_rss_kib(p) for p in _children(serve_pid)))
        peak_serve = max(peak_serve, _rss_kib(serve_pid))
    return [t.result() for t in tasks], peak_apps, peak_serve


def _cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def _wait_warm(serve_pid: int, n: int, limit_s: float) -> float:
    """Wait until serve has ``n`` app processes and they are idle; seconds it took."""
    started = time.monotonic()
    last = -1
    while time.monotonic() - started < limit_s:
        kids = _children(serve_pid)
        ticks = sum(_cpu_ticks(p) for p in kids)
        if len(kids) >= n and ticks == last:
            break
        last = ticks
        time.sleep(1.0)
    return time.monotonic() - started


def run_one(n: int, timeout: float, warm: bool) -> tuple[bool, str]:
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "nagle_sim", "serve", "--port", str(port), "--token", TOKEN,
         "--max-sessions", str(n), "--warm", str(n if warm else 0)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        warmed = _wait_warm(serve.pid, n, 10.0 * n) if warm else 0.0
        results, apps_kib, serve_kib = asyncio.run(_measure(port, serve.pid, n, timeout))
    finally:
        serve.send_signal(2)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
    firsts = sorted(r[0] for r in results)
    opens = sorted(r[1] for r in results)
    ok = all(f <= GOAL_S for f in firsts)
    missing = sum(1 for f in firsts if f == float("inf"))

    def fmt(values: list[float]) -> str:
        done = [v for v in values if v != float("inf")]
        if not done:
            return "none"
        return f"median {statistics.median(done):5.2f} s, max {max(done):5.2f} s"

    line = (f"N={n:3d} {'warm' if warm else 'cold'}"
            f"{f' (warm-up {warmed:.0f} s)' if warm else ''}  first screen: {fmt(firsts)}"
            f"{f' ({missing} never)' if missing else ''}  |  lesson open: {fmt(opens)}  |  "
            f"memory: apps {apps_kib / 1024:6.0f} MiB ({apps_kib / 1024 / n:5.1f} MiB/session)"
            f", serve {serve_kib / 1024:4.0f} MiB  |  all ≤ {GOAL_S:g} s: {'yes' if ok else 'no'}")
    return ok, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 60])
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="give up on a session after this many seconds")
    parser.add_argument("--cold", action="store_true",
                        help="also measure without processes started ahead (--warm 0)")
    args = parser.parse_args()
    print(f"nagle-sim serve, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
          "all N students connect at the same moment")
    for warm in ([False, True] if args.cold else [True]):
        largest = 0
        for n in args.sizes:
            ok, line = run_one(n, args.timeout, warm)
            print(line, flush=True)
            if ok:
                largest = max(largest, n)
        print(f"{'warm' if warm else 'cold'}: largest N with every first screen within "
              f"{GOAL_S:g} s: {largest if largest else f'none of {args.sizes}'}", flush=True)


if __name__ == "__main__":
    main()
