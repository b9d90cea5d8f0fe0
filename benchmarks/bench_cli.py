"""A/B timing of whole ``nagle-sim`` processes: interleaved runs, medians (issue 32).

Runs ``python -P -m nagle_sim ARGS...`` with each interpreter given (a venv of one build,
another of the other), alternating, ``--rounds`` times, and prints for each its median
and range of process CPU seconds (user + system, from ``wait4``) and wall seconds, and its
peak RSS (MB: the largest ``ru_maxrss``, which does not depend on the machine's load).
Interleaving keeps a loaded machine from favouring whichever build ran first; the CPU
medians still move with load, the peak RSS does not. Each run's output goes to a file;
``--same`` checks that every run printed the same bytes.

Examples (docs/speed.md):

    python benchmarks/bench_cli.py --python /tmp/a/bin/python --python /tmp/b/bin/python \\
        --rounds 15 -- run tests/data/s1_write_write_read.toml --json      # start-up
    python benchmarks/bench_cli.py --python /tmp/a/bin/python --python /tmp/b/bin/python \\
        --rounds 3 --same -- run s3_nodelay_10000.toml --json               # memory

Not a test: timing goals live in benchmarks/, not in tests/.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

_LAUNCHER = """
import os, subprocess, sys, time
with open(sys.argv[1], "wb") as sink:
    start = time.perf_counter()
    proc = subprocess.Popen(sys.argv[2:], stdout=sink, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), time.perf_counter() - start,
      usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
"""
"""Runs the command from a small process of its own: a child's peak RSS includes the
memory of the process it was forked from (benchmarks/bench_s3.py says why)."""


def one(python: str, args: list[str], out: str) -> tuple[int, float, float, float]:
    """(exit code, wall s, CPU s, peak RSS MB) of one ``python -P -m nagle_sim args``."""
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, out, python, "-P", "-m",
                           "nagle_sim", *args], check=True, capture_output=True, text=True)
    code, wall, cpu, peak = done.stdout.split()
    return int(code), float(wall), float(cpu), int(peak) / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", action="append", required=True,
                   help="an interpreter whose nagle_sim to run (give two or more)")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--same", action="store_true",
                   help="check that every run printed the same bytes")
    p.add_argument("args", nargs="+", help="nagle-sim's arguments (after --)")
    opts = p.parse_args()
    results: dict[str, list[tuple[int, float, float, float]]] = {py: [] for py in opts.python}
    digests: set[str] = set()
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "out")
        for r in range(opts.rounds):
            order = opts.python if r % 2 == 0 else opts.python[::-1]
            for py in order:
                results[py].append(one(py, opts.args, out))
                if opts.same:
                    with open(out, "rb") as f:
                        digests.add(hashlib.sha256(f.read()).hexdigest())
    print(f"nagle-sim {' '.join(opts.args)}: {opts.rounds} interleaved rounds, "
          f"load {os.getloadavg()[0]:.1f} at the end ({time.strftime('%H:%M')})")
    for py, runs in results.items():
        codes = sorted({r[0] for r in runs})
        walls, cpus = [r[1] for r in runs], [r[2] for r in runs]
        print(f"  {py}: exit {codes}, CPU median {statistics.median(cpus):.3f} s "
              f"({min(cpus):.3f}-{max(cpus):.3f}), wall median "
              f"{statistics.median(walls):.3f} s, peak RSS {max(r[3] for r in runs):.0f} MB")
    if opts.same:
        print("  output: " + ("identical in every run" if len(digests) == 1
                              else f"{len(digests)} different outputs"))
        return 0 if len(digests) == 1 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
