"""`RtGovernor`: the side processes' real-time duty cycle, with the clocks and the
scheduler call replaced (no privilege needed). Issue 8: a side that keeps the CPU busy
must leave SCHED_FIFO after its burst budget, and resume once half of it has refilled;
a side that mostly blocks never rests."""

from __future__ import annotations

import os
import sys

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from realnet import child as core
from realnet.child import RT_BURST_NS, RT_SHARE, RtGovernor


class FakeClocks:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cpu = 0
        self.wall = 0
        self.policy: list[int] = []
        monkeypatch.setattr(core.time, "process_time_ns", lambda: self.cpu)
        monkeypatch.setattr(core.time, "monotonic_ns", lambda: self.wall)
        monkeypatch.setattr(core.os, "sched_setscheduler",
                            lambda _pid, policy, _param: self.policy.append(policy))

    def run(self, cpu_ns: int, wall_ns: int, gov: RtGovernor) -> None:
        self.cpu += cpu_ns
        self.wall += wall_ns
        gov.tick()


def test_busy_side_rests_after_its_burst_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    clocks = FakeClocks(monkeypatch)
    gov = RtGovernor(5)
    gov.start()
    assert clocks.policy == [os.SCHED_FIFO] and gov.on
    step = 100_000                                  # 0.1 ms of CPU per 0.1 ms of wall
    busy_ns = 0
    while gov.on:
        clocks.run(step, step, gov)
        busy_ns += step
    # the bucket drains at (1 - RT_SHARE) of the CPU used: 2 × the burst at 50 %
    assert busy_ns == pytest.approx(RT_BURST_NS / (1 - RT_SHARE), rel=0.02)
    assert clocks.policy[-1] == os.SCHED_OTHER and gov.rests == 1
    rest_ns = 0
    while not gov.on:
        clocks.run(step, step, gov)                 # CPU at normal priority is not charged
        rest_ns += step
    assert rest_ns == pytest.approx(RT_BURST_NS / 2 / RT_SHARE, rel=0.02)
    assert clocks.policy[-1] == os.SCHED_FIFO


def test_side_that_mostly_blocks_never_rests(monkeypatch: pytest.MonkeyPatch) -> None:
    clocks = FakeClocks(monkeypatch)
    gov = RtGovernor(5)
    gov.start()
    for _ in range(100_000):                        # 10 s: 40 µs of CPU per 200 µs
        clocks.run(40_000, 200_000, gov)
    assert gov.on and gov.rests == 0


def test_without_priority_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    clocks = FakeClocks(monkeypatch)
    gov = RtGovernor(0)
    gov.start()
    clocks.run(10**9, 10**9, gov)
    assert clocks.policy == [] and not gov.on
