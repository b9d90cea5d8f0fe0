"""packetdrill's timing rule (run.c's verify_time), the one definition the drill runner and
the model's hand-driven tests (tests/model/harness.py) share.

An event expected at script time E, whose previous event was at script time L, may happen
anywhere in [E - T, E + T] with T = max(tolerance_usecs, tolerance_percent % of E - L); a
blocking call's return is measured the same way with L its own start. Standard library
only; knows nothing of scripts or the model.
"""

from __future__ import annotations

DEFAULT_TOLERANCE_US = 4000
DEFAULT_TOLERANCE_PCT = 12.5


def tolerance(expected_us: int, last_us: int | None, *,
              tolerance_us: int = DEFAULT_TOLERANCE_US,
              tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> int:
    """The tolerance (µs) for an event at ``expected_us`` whose previous event was at
    ``last_us`` (None for the first event: then the fixed part only). packetdrill scales
    the interval in floating point and truncates, as here."""
    if last_us is None:
        return tolerance_us
    return max(tolerance_us, int(tolerance_pct / 100.0 * (expected_us - last_us)))


def within_tolerance(actual_us: int, expected_us: int, last_us: int | None, *,
                     expected_end_us: int | None = None,
                     tolerance_us: int = DEFAULT_TOLERANCE_US,
                     tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> bool:
    """Whether something packetdrill expects at ``expected_us`` (or in the range up to
    ``expected_end_us``) passes when it happens at ``actual_us``; the tolerance counts from
    the start of the range."""
    tol = tolerance(expected_us, last_us, tolerance_us=tolerance_us,
                    tolerance_pct=tolerance_pct)
    end = expected_us if expected_end_us is None else expected_end_us
    return expected_us - tol <= actual_us <= end + tol
