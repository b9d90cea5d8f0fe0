"""Golden traces: the model's trace of every lesson, lesson what-if and seed scenario is
fixed. A refactor or speed-up must leave every one byte-identical; a deliberate behaviour
change regenerates them (``python -m tests.golden.update``) and says why in its commit."""

from __future__ import annotations

import json

import pytest

from nagle_sim.sim.driver import run_sim

from .cases import HASHES, cases, fingerprint

GOLDEN = json.loads(HASHES.read_text("utf-8"))
CASES = list(cases())


def test_every_case_has_a_golden_trace() -> None:
    """No case is silently unguarded, and no stale entry lingers."""
    assert sorted(c.name for c in CASES) == sorted(GOLDEN)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_trace_matches_golden(case) -> None:
    got = fingerprint(run_sim(case.scenario))
    want = GOLDEN.get(case.name)
    assert got == want, (f"{case.name}: the model's trace changed "
                         f"(regenerate with python -m tests.golden.update if deliberate)")
