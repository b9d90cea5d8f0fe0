"""A run's memory is bounded whatever one call asks for (issue 29.1): a student's
``writev`` of 1024 × 10^9 bytes grew the app to gigabytes because the model built the send
queue for the whole write up front. Now a write only takes what the send buffer holds
(tcp_sendmsg_locked blocks on sk_stream_memory_free) and goes on as ACKs free room, so the
queue holds at most a send buffer's worth and the run ends at its record limit.

The run happens in a child process under a 1.5 GB address-space limit (RLIMIT_AS), so a
regression fails this test (MemoryError, or the timeout) instead of the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZES = " ".join(["1000000000"] * 1024)
HUGE = f"""
title = "one writev of 1024 x 10^9 bytes"
[link]
delay_ms = 1
[client]
script = "writev {SIZES}"
[server]
script = "repeat 1024 {{ read 1000000000 }}"
"""

_CHILD = r"""
import sys, tracemalloc
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
tracemalloc.start()
trace = run_sim(loads(sys.stdin.read(), "<huge>"), record_limit=10_000)
peak = tracemalloc.get_traced_memory()[1]
sent = max((s.seq + s.length for s in trace.segments if s.src.value == "client"), default=0)
print(trace.outcome.value, peak, sent)
print(trace.message)
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS (Linux)")
def test_a_huge_writev_stops_at_the_record_limit_in_bounded_memory() -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD], input=HUGE, capture_output=True,
                          text=True, timeout=120, preexec_fn=_limit_memory, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    outcome, peak, last_seq = done.stdout.split("\n")[0].split()
    assert outcome == "limit"
    assert "10,000 records" in done.stdout
    assert int(peak) < 60 << 20, f"peak {int(peak) >> 20} MB traced"
    assert int(last_seq) > 1_000_000       # it did send: the write went on as ACKs came
