"""A superseded simulation stops: toggling what-ifs on a long scenario must not leave runs
going in the background (a classroom tab would pile them up), and quitting is prompt."""

from __future__ import annotations

import threading

from nagle_sim.scenario import Scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace
from nagle_sim.tui.runners import run_cancellable


def test_a_cancelled_run_stops_early() -> None:
    from nagle_sim import scenario

    sc = scenario.loads("[client]\nscript = 'repeat 200000 { write 1; read 1 }'\n"
                        "[server]\nscript = 'repeat 200000 { read 1; write 1 }'", "long.toml")
    stop = threading.Event()
    stop.set()
    try:
        run_cancellable(run_sim, sc, stop.is_set)
    except Exception as exc:            # RunCancelled: the app drops it silently
        assert type(exc).__name__ == "RunCancelled"
    else:
        raise AssertionError("the run went on although cancelled")


def test_a_runner_without_cancel_support_just_runs() -> None:
    from nagle_sim import scenario

    sc = scenario.loads("[client]\nscript='write 1'\n[server]\nscript='read 1'", "t.toml")
    made = Trace(source="fake", title="t")
    seen: list[Scenario] = []

    def fake(scenario: Scenario) -> Trace:
        seen.append(scenario)
        return made

    assert run_cancellable(fake, sc, lambda: True) is made and seen == [sc]
