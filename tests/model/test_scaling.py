"""Work grows linearly with the size of a write (issue 9: a 200 MB write took 101 s).

The claim is checked by counting work, never by wall time: the number of source lines the
model executes (a `sys.settrace` line counter limited to ``nagle_sim/model``) for a bulk
write of N bytes and of 4·N bytes. Linear work gives a ratio near 4; summing the whole
send queue on every pacing hold (the old `_queued_bytes`) gave about 10.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import nagle_sim.model
from nagle_sim import scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome

MODEL_DIR = str(Path(nagle_sim.model.__file__).parent)


def model_lines_executed(nbytes: int) -> int:
    """Lines of model code run while one side writes ``nbytes`` and the other reads them."""
    text = (f'[client]\nscript = "write {nbytes}"\n'
            f'[server]\nscript = "read {nbytes}"\n')
    sc = scenario.loads(text, "bulk.toml")
    lines = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(MODEL_DIR) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        trace = run_sim(sc)
    finally:
        sys.settrace(previous)
    assert trace.outcome is Outcome.OK, trace.message
    return lines


def test_a_bulk_write_costs_work_linear_in_its_size() -> None:
    """Lesson-independent guard for `write 200000000` (benchmarks/bench_model.py)."""
    small = model_lines_executed(1_000_000)
    large = model_lines_executed(4_000_000)
    assert large / small < 5, f"4x the bytes cost {large / small:.1f}x the work"
