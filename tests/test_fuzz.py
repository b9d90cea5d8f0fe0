"""Fuzzing every input path (issue 9): the scenario loader, the script parser, ``--set``,
the trace reader and, for traces that load, every view of them. Each generated input must
either succeed or be refused with a one-line `ScenarioError` / `TraceError` /
`ExportError`; any other exception is a traceback a user would see.

Hypothesis drives a ``random.Random`` that the generators in tests/fuzz_inputs.py share
with benchmarks/fuzz_inputs.py (the long run). The suite-wide profile is derandomized, so
these 1,250 inputs are the same on every run. The per-input deadline (5 s, three orders
of magnitude above a normal parse) turns a hang or a blow-up into a failure.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz_inputs import CHECKS, one_line_or_ok

EXAMPLES_PER_TARGET = 250


@pytest.mark.parametrize(("name", "make", "check"), CHECKS, ids=[c[0] for c in CHECKS])
@settings(max_examples=EXAMPLES_PER_TARGET, deadline=timedelta(seconds=5))
@given(rng=st.randoms(use_true_random=False))
def test_hostile_input_is_accepted_or_refused_in_one_line(name: str, make: object,
                                                           check: object,
                                                           rng: random.Random) -> None:
    """Issue 9: no input reaches the user as a traceback or a multi-line message."""
    text = make(rng)   # type: ignore[operator]
    problem = one_line_or_ok(check, text)  # type: ignore[arg-type]
    assert problem is None, f"{name}: {problem}\ninput: {text[:300]!r}"


def test_the_fuzz_covers_at_least_1000_inputs() -> None:
    assert len(CHECKS) * EXAMPLES_PER_TARGET >= 1000
