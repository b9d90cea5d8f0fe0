"""Every congestion control on every profile, run long enough to reach each of its states
(issue 29.4: the compiled build crashed the first time BBR entered PROBE_BW, and no test
ran BBR that far). CI runs this file against the compiled wheel too (tests/model is in
.ci/run's compiled list), so a state the compiled code cannot enter fails there.

The states are read from the trace: a cwnd change names the phase it happened in
(``cwnd 10 → 11 (slow start)``, ``(cubic avoidance)``, ``(BBR probe_bw)``)."""

from __future__ import annotations

import re

import pytest

from nagle_sim.model import PROFILES
from nagle_sim.model.config import CONGESTION_CONTROLS
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim

EXPECTED = {
    "cubic": {"slow start", "cubic avoidance"},
    "reno": {"slow start", "reno avoidance"},
    # PROBE_RTT comes once the 10 s min-RTT filter expires: the run lasts about 13 s
    "bbr": {"BBR startup", "BBR drain", "BBR probe_bw", "BBR probe_rtt"},
}
_PHASE = re.compile(r"\(((?:BBR )?[a-z_ ]+)\)$")


def bulk(profile: str, congestion: str) -> str:
    """A bulk transfer over a rate-limited link with one loss (so Reno, which has no
    HyStart, leaves slow start), long enough for BBR's 10 s PROBE_RTT."""
    rate, size = ("2mbit", 3_200_000) if congestion == "bbr" else ("10mbit", 600_000)
    return f"""
title = "{congestion} on {profile}"
[link]
delay_ms = 5
rate = "{rate}"
queue = 40
drop = ["to_server data 30"]
[client]
profile = "{profile}"
congestion = "{congestion}"
script = "write {size}"
[server]
profile = "{profile}"
script = "read {size}"
"""


def test_the_table_covers_every_congestion_control() -> None:
    assert set(EXPECTED) == set(CONGESTION_CONTROLS)


@pytest.mark.parametrize("congestion", sorted(EXPECTED))
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_state_is_reached(profile: str, congestion: str) -> None:
    trace = run_sim(loads(bulk(profile, congestion), f"<{congestion} {profile}>"))
    assert trace.outcome.value == "ok", trace.message
    phases = {m.group(1) for e in trace.events if e.side.value == "client"
              for m in [_PHASE.search(e.detail or "")] if m}
    assert EXPECTED[congestion] <= phases, f"not reached: {EXPECTED[congestion] - phases}"
