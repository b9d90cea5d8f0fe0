"""The driver's two queues (simpy's timers, the agenda of packets and application steps)
run as one: observers scheduled with `SimDriver.call_at` see the run at their time, and a
run with timers interleaved everywhere gives the same trace as one without them."""

from __future__ import annotations

from pathlib import Path

from nagle_sim import scenario
from nagle_sim.model import Side
from nagle_sim.sim.driver import SimDriver, run_sim
from nagle_sim.trace import Outcome

DATA = Path(__file__).parent.parent / "data"


def test_call_at_runs_at_its_time_after_everything_earlier() -> None:
    sc = scenario.load(DATA / "s1_write_write_read.toml")
    plain = run_sim(sc)
    seg_times = {s.t for s in plain.segments}
    # observe between segments (no tie to settle): at each, exactly the earlier segments
    # have been sent
    times = [t + 1 for t in sorted(seg_times) if t + 1 not in seg_times][:12]
    driver = SimDriver(sc)
    seen: list[tuple[int, int, int]] = []
    for t in times:
        driver.call_at(t, lambda t=t: seen.append((t, driver._now(), len(driver.trace.segments))))
    trace = driver.run()
    assert trace.outcome is Outcome.OK
    assert [(t, t, sum(s.t < t for s in plain.segments)) for t in times] == seen


def test_observers_on_every_segment_time_change_nothing() -> None:
    """A timer-queue event at the very time of every segment, scheduled first, ties with
    the agenda's events of that time; the run's trace must not change (no state is
    touched), and each observer runs before the agenda's events of its instant."""
    sc = scenario.load(DATA / "s1_write_write_read.toml")
    plain = run_sim(sc)
    driver = SimDriver(sc)
    seen: list[tuple[int, int]] = []
    later = [seg for seg in plain.segments if seg.t > 0]    # the SYN leaves before any event
    for seg in later:
        driver.call_at(seg.t, lambda t=seg.t: seen.append((t, len(driver.trace.segments))))
    trace = driver.run()
    assert trace.segments == plain.segments
    assert trace.ops == plain.ops
    # scheduled before the run started, each observer comes before that instant's sends
    assert all(count == sum(s.t < t for s in plain.segments) for t, count in seen)
    assert len(seen) == len(later) > 10
    assert {s.src for s in plain.segments} == {Side.CLIENT, Side.SERVER}
