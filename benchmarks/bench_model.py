"""Bulk writes through the model: wall time of one `write N` read by the peer.

Issue 9: `write 200000000` took 101 s because every pacing hold summed the whole send
queue; the model now keeps a running byte count, so the cost is linear in the size.
Prints numbers only; the linear-work claim itself is tested in tests/model/test_scaling.py.
Run: python benchmarks/bench_model.py [bytes ...]
"""

from __future__ import annotations

import sys
import time

from nagle_sim import scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome


def main(sizes: list[int]) -> None:
    print(f"{'write bytes':>12} {'wall s':>8} {'segments':>9} {'simulated ms':>13}")
    for n in sizes:
        text = f'[client]\nscript = "write {n}"\n[server]\nscript = "read {n}"\n'
        sc = scenario.loads(text, f"bench-write-{n}")
        start = time.perf_counter()
        trace = run_sim(sc)
        wall = time.perf_counter() - start
        assert trace.outcome is Outcome.OK, trace.message
        print(f"{n:>12,} {wall:>8.2f} {len(trace.segments):>9,} {trace.end / 1000:>13.1f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2_000_000, 20_000_000, 200_000_000])
