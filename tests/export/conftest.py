"""Fixtures for the export tests: the S1 write-write-read run and a fake "real" trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nagle_sim import scenario
from nagle_sim.model.events import Micros
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Source, Trace

DATA = Path(__file__).parent / "data"
S1 = DATA / "s1.toml"


@pytest.fixture(scope="session")
def s1() -> Trace:
    return run_sim(scenario.load(S1))


def _realish(t: int) -> Micros:
    """Stretch the handshake and shorten every 40-odd ms stall, as a real kernel would."""
    return Micros(t * 3 + 5 if t < 1000 else t - 2000 + 60)


@pytest.fixture(scope="session")
def real(s1: Trace) -> Trace:
    """A trace shaped like realnet's: other times, no events, no reasons, no arrival."""
    return Trace(source=Source.REALNET, title="S1 (real kernel)", meta={"kernel": "test"},
                 segments=[replace(s, t=_realish(s.t), arrive=None, why="", code="",
                                   seq=s.seq, ack=s.ack + 0)
                           for s in s1.segments[:20]])
