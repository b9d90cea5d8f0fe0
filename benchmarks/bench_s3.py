"""S3 at full size: 10,000 messages of 15 two-byte writes, in each of the three modes.

Prints wall time and simulated events per second (target: each mode ≤ 1.0 s wall on the
project's 2-core machine). Not a test: timing goals live here, not in tests/.
Run: python benchmarks/bench_s3.py [messages]
"""

from __future__ import annotations

import sys
import time

from nagle_sim import scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome

MODES = {
    "default": "repeat {n} {{ repeat 15 {{ write 2 }}; read 2 }}",
    "nodelay": "repeat {n} {{ repeat 15 {{ write 2 }}; read 2 }}",
    "cork": "repeat {n} {{ set cork on; repeat 15 {{ write 2 }}; set cork off; read 2 }}",
}


def main(messages: int = 10_000) -> None:
    print(f"S3, {messages:,} messages per mode")
    print(f"{'mode':<8} {'wall s':>8} {'events':>9} {'segments':>9} {'events/s':>10} "
          f"{'ms/message (simulated)':>24}")
    for mode, script in MODES.items():
        text = (f'[client]\nnodelay = {str(mode == "nodelay").lower()}\n'
                f'script = "{script.format(n=messages)}"\n'
                f'[server]\nscript = "repeat {messages} {{ read 30; write 2 }}"\n')
        sc = scenario.loads(text, f"bench-{mode}")
        start = time.perf_counter()
        trace = run_sim(sc)
        wall = time.perf_counter() - start
        assert trace.outcome is Outcome.OK, trace.message
        events = len(trace.events) + len(trace.segments) + len(trace.ops)
        per_msg = trace.end / 1000 / messages
        print(f"{mode:<8} {wall:>8.2f} {events:>9,} {len(trace.segments):>9,} "
              f"{events / wall:>10,.0f} {per_msg:>24.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
