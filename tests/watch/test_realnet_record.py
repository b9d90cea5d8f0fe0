"""Real runs carry the kernel's own decisions (root, BTF, libbpf; skipped elsewhere).

A local real run of lesson 07 (write-write-read, 12 rounds) must come back with the
kernel's decisions as events marked ``by="kernel"``, on the capture's clock: each Nagle
hold between the 6-byte segment it waited behind and the 7-byte segment that left when
the server's delayed ACK arrived. Where watch cannot load, the run goes on and its meta
says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim import scenario
from nagle_sim.model.events import Side
from nagle_sim.runners import run_real

from .test_kernel import _unavailable

ROOT = Path(__file__).resolve().parents[2]
LESSON_07 = ROOT / "lessons" / "07-write-write-read" / "scenario.toml"

pytestmark = [pytest.mark.realnet,
              pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))]


def test_a_real_run_records_the_kernels_decisions_beside_the_capture():
    trace = run_real(scenario.load(LESSON_07))
    meta = trace.meta["kernel_decisions"]
    assert isinstance(meta, dict) and meta["lost"] == 0 and meta["rate_limited"] == 0
    kernel = [e for e in trace.events if e.by == "kernel"]
    assert len(kernel) == meta["events"] > 0
    assert not [e for e in trace.events if e.by == "" and e.kind != "tcp_info"]
    holds = [e for e in kernel if e.kind == "hold"]
    assert holds and all(e.side is Side.CLIENT and e.code == "NAGLE_HOLD" for e in holds)
    # every round after the first: one hold, released by the server's delayed ACK
    assert 9 <= len(holds) <= 11
    fired = [e for e in kernel if e.side is Side.SERVER and e.code == "DELACK_FIRED"
             and e.kind == "timer_fired"]
    assert len(fired) >= len(holds)
    # on the capture's clock: each hold sits between the 6 B segment it waits behind and
    # the 7 B segment it held (sent and captured within a few µs of the decisions)
    client_data = [s for s in trace.segments if s.src is Side.CLIENT and s.length]
    for h in holds:
        before = [s for s in client_data if s.t <= h.t + 100]
        after = [s for s in client_data if s.t > h.t]
        assert before and before[-1].length == 6, h
        assert after and after[0].length == 7 and after[0].t - h.t >= 30_000, h


def test_without_watch_the_run_goes_on_and_says_why(monkeypatch):
    from realnet.watch import loader
    monkeypatch.setattr(loader, "privileges_ok", lambda: False)
    trace = run_real(scenario.loads('[client]\nscript = "write 1"\n[server]\n'
                                    'script = "read 1"\n'))
    why = trace.meta["kernel_decisions"]
    assert isinstance(why, str) and why.startswith("unavailable: watch needs root")
    assert not [e for e in trace.events if e.by == "kernel"]
    assert trace.segments                       # the capture still works


def test_the_switch_turns_recording_off(monkeypatch):
    monkeypatch.setenv("NAGLE_SIM_NO_KERNEL_DECISIONS", "1")
    trace = run_real(scenario.loads('[client]\nscript = "write 1"\n[server]\n'
                                    'script = "read 1"\n'))
    assert "NAGLE_SIM_NO_KERNEL_DECISIONS" in trace.meta["kernel_decisions"]
    assert not [e for e in trace.events if e.by == "kernel"]
