"""The driver's two queues (simpy's timers, the agenda of packets and application steps)
run as one: observers scheduled with `SimDriver.call_at` see the run at their time, and a
run with timers interleaved everywhere gives the same trace as one without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim import scenario
from nagle_sim.model import Side
from nagle_sim.model.endpoint import Endpoint, ModelError
from nagle_sim.scenario.generator import random_scenario
from nagle_sim.sim.driver import SimDriver, run_sim
from nagle_sim.trace import Outcome

DATA = Path(__file__).parent.parent / "data"
ROOT = Path(__file__).parent.parent.parent
LESSONS, EXAMPLES = ROOT / "lessons", ROOT / "examples"


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


def _same_run(sc: scenario.Scenario) -> None:
    """The run with `SimDriver.catch_up` (an application's call loop runs the events due
    before its next call itself) and without it (every wait a resumption on the agenda)
    give the same trace, record for record."""
    fast = SimDriver(sc).run()
    slow_driver = SimDriver(sc)
    slow_driver.catch_up = False
    slow = slow_driver.run()
    assert (fast.outcome, fast.message) == (slow.outcome, slow.message), sc.source
    assert fast.segments == slow.segments, sc.source
    assert fast.ops == slow.ops, sc.source
    assert fast.events == slow.events, sc.source


@pytest.mark.parametrize("seed", range(0, 120, 3))
def test_catching_up_changes_no_random_scenario(seed: int) -> None:
    _same_run(scenario.loads(random_scenario(seed).text, f"random-{seed}.toml"))


@pytest.mark.parametrize("path", sorted([*DATA.glob("*.toml"), *LESSONS.glob("*/scenario.toml"),
                                         *EXAMPLES.glob("**/*.toml")]), ids=str)
def test_catching_up_changes_no_seed_lesson_or_example(path: Path) -> None:
    _same_run(scenario.load(path))


def test_a_model_error_of_an_event_run_while_catching_up_is_not_the_callers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A delivery that trips the model (a bug: `Sock.transition` refuses the pair) leaves
    the run as a `ModelError`, whether the main loop or an application's catch-up ran it;
    it must not become the waiting application's call error."""
    sc = scenario.loads("[client]\nnodelay = true\nscript = 'repeat 20 { write 2 }; read 2'\n"
                        "[server]\nscript = 'read 40; write 2'\n", "x.toml")
    calls = []
    real = Endpoint.receive_segment

    def flaky(self: Endpoint, now: int, seg: object) -> None:
        calls.append(now)
        if len(calls) == 12:
            raise ModelError("a model bug")
        real(self, now, seg)   # type: ignore[arg-type]

    monkeypatch.setattr(Endpoint, "receive_segment", flaky)
    for catch_up in (True, False):
        calls.clear()
        driver = SimDriver(sc)
        driver.catch_up = catch_up
        with pytest.raises(ModelError, match="a model bug"):
            driver.run()
