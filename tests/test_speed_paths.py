"""Shortcuts taken for speed (docs/speed.md) give exactly what the plain way gives.

The golden traces guard the simulation as a whole; these tests pin the pieces whose
equivalence rests on an argument (number formatting, cached words) over inputs the
goldens do not reach."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from nagle_sim import trace
from nagle_sim.units import ms


@given(st.one_of(st.integers(min_value=-(10**17), max_value=10**17),
                 st.integers(min_value=0, max_value=2_000_000),
                 st.integers(min_value=10**15 - 2_000, max_value=10**15 + 2_000)))
def test_a_time_is_written_as_json_writes_its_ms(us: int) -> None:
    assert trace._ms(us) == json.dumps(ms(us))


def test_every_remainder_of_a_ms_is_written_as_json_writes_it() -> None:
    for us in range(0, 3_000_000, 7):
        assert trace._ms(us) == json.dumps(ms(us)), us
    assert trace._ms(None) == "null"


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.booleans()),
                       max_size=4))
def test_event_data_is_written_as_json_writes_it(data: dict[str, int]) -> None:
    assert trace._data_text(data, trace._Quoted()) == json.dumps(data, ensure_ascii=False)


def test_event_records_never_share_a_bool_as_a_whole_number() -> None:
    """``True == 1``: a ``data`` holding a bool keeps its own dict (both builds)."""
    from nagle_sim.model.events import Kind, Reason, Side, TraceEvent
    one = TraceEvent(at=0, side=Side.CLIENT, kind=Kind.MODE, reason=Reason.CWND_GROW,
                     data={"flag": 1})
    yes = TraceEvent(at=0, side=Side.CLIENT, kind=Kind.MODE, reason=Reason.CWND_GROW,
                     data={"flag": True})    # type: ignore[dict-item]
    records = trace.event_records([one, yes])
    assert [json.dumps(r.data) for r in records] == ['{"flag": 1}', '{"flag": true}']
