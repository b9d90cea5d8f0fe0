"""Benchmark: explain a 100,000-segment capture (goal: at most 10 s).

The capture is the model's write-write-read run (every request after the first stalls on
Nagle + delayed ACK) written as an Ethernet pcap seen from the client; `explain_file` then
reads, splits, converts, names every stall, rebuilds the scenario, re-runs the model and
answers the what-ifs — everything `nagle-sim explain` does except printing.

    python benchmarks/bench_explain.py [SEGMENTS]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nagle_sim.explain import explain_file  # noqa: E402
from nagle_sim.scenario import loads  # noqa: E402
from nagle_sim.sim.driver import run_sim  # noqa: E402
from tests.explain.captures import write_capture  # noqa: E402


def scenario_text(rounds: int) -> str:
    return f"""title = "bench"
[client]
script = "repeat {rounds} {{ write 6; write 7; read 13 }}"
[server]
script = "repeat {rounds} {{ read 13; write 13 }}"
"""


def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    t0 = time.perf_counter()
    probe = run_sim(loads(scenario_text(100), "bench"))
    per_round = (len(probe.segments) - 10) / 100
    rounds = int(target / per_round) + 1
    trace = run_sim(loads(scenario_text(rounds), "bench"), time_limit=10**13,
                    segment_limit=10 * target)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_capture(trace, Path(tmp) / "bench.pcap", at="client")
        made = time.perf_counter() - t0
        size = path.stat().st_size
        t1 = time.perf_counter()
        cpu1 = time.process_time()
        ex = explain_file(str(path), runner=run_sim)
        took = time.perf_counter() - t1
        cpu = time.process_time() - cpu1
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"capture: {len(trace.segments):,} segments, {size / 1e6:.1f} MB "
          f"(generated in {made:.1f} s)")
    print(f"explain: {took:.2f} s wall ({cpu:.2f} s CPU), peak RSS of the process "
          f"{peak / 1e6:.0f} MB, "
          f"{len(ex.stalls):,} stalls "
          f"({sum(1 for s in ex.stalls if s.cause == 'nagle+delayed_ack'):,} nagle+delayed_ack, "
          f"{sum(1 for s in ex.stalls if s.reproduced):,} reproduced by the model)")
    print(f"goal ≤ 10 s: {'met' if took <= 10 else 'NOT met'}")


if __name__ == "__main__":
    main()
