"""Classroom load (prints, never asserts): a class arriving at once at one `nagle-sim serve`.

Two measures, each for every N of ``--sizes`` and every start method of ``--methods``:

**class** (the default): serve is started as a teacher starts it for a room (``--host
0.0.0.0`` with its defaults: nothing about ``--warm``), a teacher page connects at once and
moves the class to lesson 7's question (a vote is open), and N students arrive at the same
moment ``--arrive-after`` seconds after serve answered (0: the moment the link is up, so
nothing is warm yet). Each student loads the page, opens the app's socket as the page's
script does (120×40, with its own browser id), and waits for:

- its **first screen** (the lesson list, or the lead's lesson, drawn in its terminal);
- the **question** (the app follows the teacher to lesson 7 and asks it as a ballot);

then casts a vote by pressing a key, at a moment spread over ``--vote-window`` seconds
once every student has the question. **Vote to teacher** is the time from a student's
key to the teacher page's count including that vote (the k-th key sent matched with the
count reaching k: exact when votes do not overlap, first-in-first-out when they do).

**Memory** is the peak, while the class is connected, of the proportional set size (PSS:
shared pages split between the processes sharing them) summed over serve, the fork
server and every app; the RSS sum (which counts each shared page once per process) is
printed beside it.

**open** (``--measure open``, the earlier benchmark): no teacher; first screen and the
first lesson opened with Enter.

Run: ``python benchmarks/bench_serve.py [--sizes 30 60] [--methods fork exec]
[--arrive-after 0 10] [--measure class open]``. ``fork`` forks each app from the fork
server's template app (already on the lead's screen); ``NAGLE_SIM_FORK_TEMPLATE=0`` in the
environment forks them before their first screen instead, for an A/B of the two. The
**CPU** printed is the steadier number on a shared machine: seconds of CPU used by serve,
the fork server and every app from the arrival until every student had the question.
Goals (issue 24): every first screen ≤ 3 s at 30 and 60, votes seen by the teacher
≤ 1 s, ≤ 3 GiB at 60.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import secrets
import socket
import statistics
import subprocess
import sys
import time

import aiohttp

TOKEN = "bench-class-token"
TEACHER = "bench-teacher-token"
QUESTION = b"Predict ("
FIRST_SCREEN = (b"Pick a lesson", b"client \xe2\x87\x84 server", QUESTION)
"""The lesson list, a lesson, or (an app started while the teacher asks) the question."""
LESSON_OPEN = "client ⇄ server".encode()
LESSON_7 = "07-write-write-read"
GOAL_FIRST_S = 3.0
GOAL_VOTE_S = 1.0
GOAL_MEMORY_GIB = 3.0
INF = float("inf")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        a, b = (int(x) for x in line.split())
        children.setdefault(b, []).append(a)
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def _memory(serve_pid: int) -> tuple[int, int]:
    """(PSS, RSS) in KiB, summed over serve and everything below it."""
    pids = _tree(serve_pid)
    return sum(_pss_kib(p) for p in pids), sum(_status_kib(p, "VmRSS:") for p in pids)


def _cpu_s(serve_pid: int) -> float:
    """CPU seconds (user + system) used so far by serve and every live process below it
    (the fork server, the apps): the cost of the class, whatever else the machine runs."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _tree(serve_pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def _fmt(values: list[float]) -> str:
    done = [v for v in values if v != INF]
    if not done:
        return "none"
    missing = len(values) - len(done)
    return (f"median {statistics.median(done):5.2f} s, max {max(done):5.2f} s"
            + (f" ({missing} never)" if missing else ""))


class Teacher:
    """The teacher page's socket: keeps the newest ballot count, and when each was seen."""

    def __init__(self) -> None:
        self.counts: list[tuple[float, int]] = []
        self.connected = 0

    async def run(self, port: int, ready: asyncio.Event, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession() as session, session.ws_connect(
                f"ws://127.0.0.1:{port}/teacher/ws?key={TEACHER}", max_msg_size=0) as ws:
            await ws.send_json({"do": "ask", "lesson": LESSON_7, "question": 0})
            while not stop.is_set():
                try:
                    message = await ws.receive(timeout=0.5)
                except TimeoutError:
                    continue
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                data = json.loads(message.data)
                if data.get("t") != "state":
                    continue
                self.connected = data["connected"]
                poll = data.get("poll")
                if poll is not None:
                    ready.set()
                    count = poll["ballots"][0]
                    if not self.counts or self.counts[-1][1] != count:
                        self.counts.append((time.monotonic(), count))


class Room:
    """Students stay connected until the last has voted (or gave up), so the memory
    reading sees the whole class at once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = 0
        self.all_asked = asyncio.Event()
        self.done = 0
        self.all_done = asyncio.Event()

    def question(self) -> None:
        self.asked += 1
        if self.asked >= self.n:
            self.all_asked.set()

    def finished(self) -> None:
        self.done += 1
        if self.done >= self.n:
            self.all_done.set()


async def _drain(ws: aiohttp.ClientWebSocketResponse) -> None:
    with contextlib.suppress(aiohttp.ClientError, OSError):  # the session's end is seen
        async for _ in ws:                                    # by the student's own sends
            pass


async def _student(port: int, started: float, timeout: float, room: Room,
                   vote_at: float, sent: list[float], ended: list[str]) -> tuple[float, float]:
    """One student: (first screen, question) in seconds from `started`; why the session
    ended early, if it did, goes to `ended`."""
    first = asked = INF
    counted_in = voted = False
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/?token={TOKEN}") as page:
                body = await page.text()
            found = re.search(r'data-session-websocket-url="([^"]+)"', body)
            if page.status != 200 or found is None:
                ended.append(f"page {page.status}")
                return first, asked
            url = (found.group(1).replace("0.0.0.0", "127.0.0.1")
                   + f"?width=120&height=40&student={secrets.token_hex(12)}")
            async with session.ws_connect(url, max_msg_size=0) as ws:
                got = b""
                deadline = started + timeout  # for the whole wait, not each message: an
                while asked == INF:            # app that redraws never times a read out
                    message = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
                    if message.type != aiohttp.WSMsgType.BINARY:
                        if message.type != aiohttp.WSMsgType.TEXT:
                            ended.append(f"socket {message.type.name} {message.extra}")
                            return first, asked
                        continue
                    got = (got + message.data)[-200_000:]
                    if first == INF and any(mark in got for mark in FIRST_SCREEN):
                        first = time.monotonic() - started
                    if QUESTION in got:
                        asked = time.monotonic() - started
                # keep reading, as a browser does: aiohttp answers serve's heartbeat pings
                # only inside receive(), and serve closes a socket that stops answering
                drain = asyncio.create_task(_drain(ws))
                await ws.send_json(["name", f"s{secrets.token_hex(2)}"])
                room.question()
                counted_in = True
                await room.all_asked.wait()
                await asyncio.sleep(vote_at)
                sent.append(time.monotonic())
                await ws.send_json(["stdin", "2"])
                room.finished()
                voted = True
                await room.all_done.wait()
                await asyncio.sleep(1.5)  # the last memory readings, everyone in
                drain.cancel()
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        ended.append(type(error).__name__)
    finally:
        if not counted_in:
            room.question()
        if not voted:
            room.finished()
    return first, asked


def _vote_latencies(sent: list[float], counts: list[tuple[float, int]]) -> list[float]:
    """The k-th vote sent against the teacher's count first reaching k."""
    sent = sorted(sent)
    latencies = []
    for k, at in enumerate(sent, start=1):
        seen = next((t for t, c in counts if c >= k), None)
        latencies.append(INF if seen is None else max(0.0, seen - at))
    return latencies


def _start_serve(port: int, n: int, method: str) -> subprocess.Popen[bytes]:
    """serve as a teacher starts it; its console goes to $BENCH_SERVE_LOG (appended) when
    set, else nowhere."""
    where = os.environ.get("BENCH_SERVE_LOG")
    with open(where or os.devnull, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "nagle_sim", "serve", "--host", "0.0.0.0", "--port",
             str(port), "--token", TOKEN, "--teacher-token", TEACHER, "--max-sessions",
             str(max(40, n)), "--start-method", method],
            stdout=log, stderr=subprocess.STDOUT)


def _wait_up(port: int, limit_s: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return time.monotonic() - started
        time.sleep(0.05)
    raise SystemExit(f"serve did not listen within {limit_s} s")


def _stop(serve: subprocess.Popen[bytes]) -> None:
    serve.send_signal(2)
    try:
        serve.wait(timeout=60)
    except subprocess.TimeoutExpired:
        serve.kill()
        serve.wait()


async def _class(port: int, serve_pid: int, n: int, timeout: float, arrive_after: float,
                 vote_window: float, seed: int) -> dict[str, object]:
    teacher = Teacher()
    ready, stop = asyncio.Event(), asyncio.Event()
    teacher_task = asyncio.create_task(teacher.run(port, ready, stop))
    await asyncio.wait_for(ready.wait(), 60)
    await asyncio.sleep(arrive_after)
    rng = random.Random(seed)
    room = Room(n)
    sent: list[float] = []
    started = time.monotonic()
    ended: list[str] = []
    tasks = [asyncio.create_task(_student(port, started, timeout, room,
                                          rng.uniform(0, vote_window), sent, ended))
             for _ in range(n)]
    peak_pss = peak_rss = 0
    # readings of /proc take long on a loaded machine: in a thread, or they would stall
    # this loop and with it every student's timing and the teacher's counts
    cpu_before = await asyncio.to_thread(_cpu_s, serve_pid)
    cpu_arrival = -1.0
    while not all(t.done() for t in tasks):
        await asyncio.sleep(0.5)
        if cpu_arrival < 0 and room.all_asked.is_set():
            cpu_arrival = await asyncio.to_thread(_cpu_s, serve_pid) - cpu_before
        pss, rss = await asyncio.to_thread(_memory, serve_pid)
        peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
    results = [t.result() for t in tasks]
    await asyncio.sleep(0.5)
    stop.set()
    await teacher_task
    return {"first": [r[0] for r in results], "asked": [r[1] for r in results],
            "votes": _vote_latencies(sent, teacher.counts), "pss": peak_pss, "rss": peak_rss,
            "counted": teacher.counts[-1][1] if teacher.counts else 0,
            "cpu": cpu_arrival, "ended": ended}


def run_class(n: int, method: str, arrive_after: float, timeout: float, vote_window: float
              ) -> str:
    port = _free_port()
    load_before = os.getloadavg()[0]
    serve = _start_serve(port, n, method)
    try:
        up = _wait_up(port)
        got = asyncio.run(_class(port, serve.pid, n, timeout, arrive_after, vote_window, n))
    finally:
        _stop(serve)
    firsts = got["first"]
    votes = got["votes"]
    assert isinstance(firsts, list) and isinstance(votes, list)
    pss, rss = got["pss"], got["rss"]
    assert isinstance(pss, int) and isinstance(rss, int)
    cpu = got["cpu"]
    cpu_text = (f"{cpu:.1f} s" if isinstance(cpu, float) and cpu >= 0
                else "n/a (apps ended before every student had it)")
    ok = (all(f <= GOAL_FIRST_S for f in firsts) and all(v <= GOAL_VOTE_S for v in votes)
          and pss / 2**20 <= GOAL_MEMORY_GIB)
    return (f"N={n:3d} {method:4s} arrive {arrive_after:4.1f} s after serve listened "
            f"(up in {up:.1f} s) | first screen: {_fmt(firsts)} | question: "
            f"{_fmt(got['asked'])} | vote→teacher: {_fmt(votes)} ({got['counted']}/{n} "
            f"counted) | memory: PSS {pss / 1024:5.0f} MiB (RSS sum {rss / 1024:5.0f} MiB)"
            f" | CPU of the arrival (serve + apps, until every student had the question)"
            f" {cpu_text}"
            f" | load (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
            f" | goals met: {'yes' if ok else 'no'}"
            + (f" | sessions lost: {got['ended']}" if got["ended"] else ""))


async def _open_student(port: int, started: float, timeout: float) -> tuple[float, float]:
    first = opened = INF
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/?token={TOKEN}") as page:
                body = await page.text()
            found = re.search(r'data-session-websocket-url="([^"]+)"', body)
            if page.status != 200 or found is None:
                return first, opened
            url = found.group(1).replace("0.0.0.0", "127.0.0.1") + "?width=120&height=40"
            async with session.ws_connect(url, max_msg_size=0) as ws:
                got = b""
                while True:
                    message = await ws.receive(timeout=timeout)
                    if message.type != aiohttp.WSMsgType.BINARY:
                        break
                    got += message.data
                    if first == INF and FIRST_SCREEN[0] in got:
                        first = time.monotonic() - started
                        got = b""
                        await ws.send_json(["stdin", "\r"])
                    elif first != INF and LESSON_OPEN in got:
                        opened = time.monotonic() - started
                        break
    except (aiohttp.ClientError, TimeoutError):
        pass
    return first, opened


def run_open(n: int, method: str, arrive_after: float, timeout: float) -> str:
    port = _free_port()
    serve = _start_serve(port, n, method)
    try:
        _wait_up(port)
        time.sleep(arrive_after)

        async def everyone() -> list[tuple[float, float]]:
            started = time.monotonic()
            return await asyncio.gather(*(_open_student(port, started, timeout)
                                          for _ in range(n)))

        results = asyncio.run(everyone())
    finally:
        _stop(serve)
    return (f"N={n:3d} {method:4s} arrive {arrive_after:4.1f} s after | first screen: "
            f"{_fmt([r[0] for r in results])} | lesson open: {_fmt([r[1] for r in results])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 60])
    parser.add_argument("--methods", nargs="+", choices=("fork", "exec"), default=["fork"])
    parser.add_argument("--arrive-after", type=float, nargs="+", default=[0.0],
                        help="seconds after serve listens before the class arrives")
    parser.add_argument("--measure", nargs="+", choices=("class", "open"), default=["class"])
    parser.add_argument("--vote-window", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=90.0,
                        help="give up on a session after this many seconds")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"nagle-sim serve, {os.cpu_count()} CPUs, load {load:.1f} at start, Python "
          f"{sys.version.split()[0]}; all N students connect at the same moment", flush=True)
    for measure in args.measure:
        for method in args.methods:
            for after in args.arrive_after:
                for n in args.sizes:
                    line = (run_class(n, method, after, args.timeout, args.vote_window)
                            if measure == "class" else run_open(n, method, after, args.timeout))
                    print(f"{measure}: {line}", flush=True)


if __name__ == "__main__":
    main()
