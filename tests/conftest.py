"""Suite-wide settings. Hypothesis is derandomized everywhere (a fixed seed per test, no
example database), so a run in CI and a run on a laptop try the same inputs: a failure is
reproducible from its test name alone. ``HYPOTHESIS_PROFILE=explore`` widens the search
for a local bug hunt; the suite never depends on it."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "deterministic", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "explore", derandomize=False, deadline=None, max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
