"""The compiled build gives the pure build's traces (issue 29.4).

Run against the compiled wheel (.ci/run's compiled list includes tests/sim), this plays
the golden cases, a seeded random set (`nagle_sim.scenario.generator`, as ``validate --random``
makes them) and a bulk transfer per congestion control, in this process (compiled) and in
a child interpreter that imports the checkout's pure sources, and compares the traces'
fingerprints one by one. In the pure build there is nothing to compare against: the test
says so and skips (CI runs it compiled)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nagle_sim.sim.driver
from nagle_sim.scenario import loads
from nagle_sim.scenario.generator import random_scenario

from ..golden.cases import cases, fingerprint
from ..model.test_cc_states import bulk

ROOT = Path(__file__).resolve().parents[2]
RANDOM_SEEDS = range(40)
COMPILED = (nagle_sim.sim.driver.__file__ or "").endswith(".so")

_PLAY = r"""
import json, sys
from nagle_sim.scenario.generator import random_scenario
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
from tests.golden.cases import cases, fingerprint
from tests.model.test_cc_states import bulk
want = json.loads(sys.argv[1])
out = {}
for case in cases():
    if case.name in want["golden"]:
        out[case.name] = fingerprint(run_sim(case.scenario))
for seed in want["seeds"]:
    out[f"random {seed}"] = fingerprint(run_sim(loads(random_scenario(seed).text,
                                                      f"<random {seed}>")))
for cc in want["bulk"]:
    out[f"bulk {cc}"] = fingerprint(run_sim(loads(bulk("linux", cc), f"<{cc}>")))
print(json.dumps(out))
"""


def play_pure(golden: list[str]) -> dict[str, str]:
    """Fingerprints of every case, computed in a child interpreter that imports the
    checkout's sources (pure Python: the checkout holds no compiled modules)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    want = {"golden": golden, "seeds": list(RANDOM_SEEDS), "bulk": ["cubic", "reno", "bbr"]}
    done = subprocess.run([sys.executable, "-c", _PLAY, json.dumps(want)],
                          capture_output=True, text=True, env=env, cwd=str(ROOT),
                          timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


@pytest.mark.skipif(not COMPILED, reason="pure build: the compiled comparison runs in .ci/run "
                    "against the compiled wheel")
def test_compiled_traces_equal_pure_traces() -> None:
    golden = {c.name: c for c in cases()}
    compiled = {name: fingerprint(nagle_sim.sim.driver.run_sim(case.scenario))
                for name, case in golden.items()}
    pure = play_pure(sorted(golden))
    for seed in RANDOM_SEEDS:
        compiled[f"random {seed}"] = fingerprint(nagle_sim.sim.driver.run_sim(
            loads(random_scenario(seed).text, f"<random {seed}>")))
    for cc in ("cubic", "reno", "bbr"):
        compiled[f"bulk {cc}"] = fingerprint(nagle_sim.sim.driver.run_sim(
            loads(bulk("linux", cc), f"<{cc}>")))
    assert sorted(pure) == sorted(compiled)
    differ = [name for name in compiled if compiled[name] != pure[name]]
    assert not differ, f"compiled and pure traces differ: {differ}"


def test_the_child_plays_the_pure_sources() -> None:
    """The helper imports the checkout and returns every case asked for."""
    result = play_pure([])
    assert sorted(result) == sorted([f"random {s}" for s in RANDOM_SEEDS]
                                    + ["bulk cubic", "bulk reno", "bulk bbr"])
