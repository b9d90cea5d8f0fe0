"""watch's cost on the worst case it meets: a NODELAY write-read loop over loopback.

    sudo python -m benchmarks.bench_watch [--round-trips 100000] [--pairs 3] [--trace]

A client and a server process ping-pong 32 bytes with TCP_NODELAY (every call a syscall,
every message a segment, nothing held: watch's hooks run on every send, receive, segment
and timer, and emit only the decisions: delayed ACKs armed in ping-pong mode, the timers
that fire). Runs alternate without and with ``python -m realnet.watch -- …`` (interleaved,
so machine noise hits both alike); each run times its own loop (watch's start-up, about
0.4-0.7 s of loading and attaching, is outside the timed part). Prints the medians, the
ratios of wall time and of the loop processes' CPU time (goal: at most 1.5; under other
load the CPU ratio is the one to judge), watch's own CPU time, and its counters (goal: 0
lost, 0 rate-limited). ``--trace`` watches with ``nagle-sim watch -o`` instead: every
segment of the watched sockets is a record too (a trace file's wire), the dearest way
to watch.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

LOOP = textwrap.dedent('''
    import os, socket, sys, time
    n = int(sys.argv[1])
    ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
    port = ls.getsockname()[1]
    msg = b"x" * 32
    def read(s, k):
        got = 0
        while got < k:
            b = s.recv(k - got)
            if not b:
                raise SystemExit("closed")
            got += len(b)
    pid = os.fork()
    if pid == 0:
        s, _ = ls.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            read(s, 32); s.send(msg)
        s.close(); os._exit(0)
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(100):                      # warm-up, untimed
        c.send(msg); read(c, 32)
    t0 = time.perf_counter()
    for _ in range(n - 100):
        c.send(msg); read(c, 32)
    loop_s = time.perf_counter() - t0
    c.close(); os.waitpid(pid, 0)
    import resource
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    print(f"loop_s {loop_s:.6f} cpu_s {cpu:.6f}", flush=True)
''')


def run_once(script: Path, n: int, watched: bool, trace: bool = False
             ) -> tuple[float, float, float, dict[str, int]]:
    """(loop wall s, loop CPU s, watch's own CPU s, watch's counters)"""
    cmd = [sys.executable, str(script), str(n)]
    if watched and trace:
        cmd = [sys.executable, "-m", "nagle_sim", "watch", "--json", "--quiet", "-o",
               str(script.with_name("trace.json")), "--", *cmd]
    elif watched:
        cmd = [sys.executable, "-m", "realnet.watch", "--json", "--quiet", "--", *cmd]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parents[1], check=False)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    all_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if done.returncode:
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr[-500:]}")
    loop_s, cpu_s, counters = None, 0.0, {}
    for line in done.stdout.splitlines():
        if line.startswith("loop_s "):
            parts = line.split()
            loop_s, cpu_s = float(parts[1]), float(parts[3])
        elif line.startswith("{"):
            doc = json.loads(line)
            if doc.get("type") == "counters":
                counters = {k: v for k, v in doc.items() if k != "type"}
    if loop_s is None:
        raise SystemExit(f"no timing in the output: {done.stdout[-500:]}")
    return loop_s, cpu_s, max(0.0, all_cpu - cpu_s), counters


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--round-trips", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--trace", action="store_true",
                    help="watch with nagle-sim watch -o (every segment a record)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_watch needs root (BPF)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "loop.py"
        script.write_text(LOOP)
        base: list[tuple[float, float]] = []
        watched: list[tuple[float, float]] = []
        own: list[float] = []
        counters: list[dict[str, int]] = []
        for i in range(args.pairs):
            for w in ((False, True) if i % 2 == 0 else (True, False)):
                t, cpu, watch_cpu, c = run_once(script, args.round_trips, w, args.trace)
                (watched if w else base).append((t, cpu))
                if w:
                    counters.append(c)
                    own.append(watch_cpu)
                print(f"pair {i + 1}: {'watched' if w else 'plain  '} loop {t:.3f} s wall, "
                      f"{cpu:.3f} s CPU" + (f"; watch itself {watch_cpu:.3f} s CPU, "
                                            f"counters {c}" if w else ""), flush=True)
    n = args.round_trips - 100
    wall_b = statistics.median(t for t, _ in base)
    wall_w = statistics.median(t for t, _ in watched)
    cpu_b = statistics.median(c for _, c in base)
    cpu_w = statistics.median(c for _, c in watched)
    lost = sum(c.get("lost", 0) + c.get("rate_limited", 0) for c in counters)
    emitted = statistics.median(c.get("emitted", 0) for c in counters)
    print(f"{n} round trips, medians of {args.pairs}: wall plain {wall_b:.3f} s "
          f"({wall_b / n * 1e6:.1f} µs each), watched {wall_w:.3f} s: ratio "
          f"{wall_w / wall_b:.2f}; CPU of the loop's two processes plain {cpu_b:.3f} s, "
          f"watched {cpu_w:.3f} s: ratio {cpu_w / cpu_b:.2f} (goal ≤ 1.5); watch's own "
          f"CPU {statistics.median(own):.3f} s (start-up included); records per run "
          f"{emitted:.0f}, lost or rate-limited {lost} (goal 0)")
    print("(wall time on a shared 2-core machine follows its load: the CPU ratio is the "
          "cost the hooks add to the program, the wall ratio what the program felt)")
    return 0 if cpu_w / cpu_b <= 1.5 and lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
