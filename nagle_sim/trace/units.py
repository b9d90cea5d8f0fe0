"""Milliseconds for people and for JSON, from the integer microseconds used everywhere inside.

Owns: the one conversion of µs to ms numbers (traces, tables, [expect] values) and to ms
text (ladders, reports, messages). Imports nothing from nagle_sim; the model never uses it
(model time stays `Micros`).
"""

from __future__ import annotations

from typing import overload


@overload
def ms(us: float) -> float: ...
@overload
def ms(us: None) -> None: ...
@overload
def ms(us: float | None) -> float | None: ...
def ms(us: float | None) -> float | None:
    """``us`` as milliseconds rounded to the µs (3 decimals), the JSON form; None stays."""
    return None if us is None else round(us / 1000, 3)


def ms_text(us: float, digits: int = 3) -> str:
    """``us`` as millisecond text without a unit: ``ms_text(1500)`` is ``"1.500"``."""
    return f"{us / 1000:.{digits}f}"
