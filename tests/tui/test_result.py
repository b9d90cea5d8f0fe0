"""The measured-Δ line of the run screen comes from nagle_sim.compare's matcher."""

from __future__ import annotations

from nagle_sim.model.events import Micros, Side
from nagle_sim.trace import SegmentRecord, Trace
from nagle_sim.tui.result import measured_delta, measured_twins


def _seg(t: int, seq: int, length: int, flags: str = "PA") -> SegmentRecord:
    return SegmentRecord(t=Micros(t), src=Side.CLIENT, seq=seq, ack=1, length=length,
                         flags=flags)


def test_a_merged_real_segment_is_every_model_segment_s_twin() -> None:
    """Model 2 B + 28 B, kernel 30 B at once: both model rows point at the one real segment
    and say how it was regrouped (the old (seq, len, flags) lookup found no twin for them)."""
    sim = Trace(source="sim", title="t", meta={"mss": 1448},
                segments=[_seg(0, 1, 2), _seg(40_000, 3, 28)])
    real = Trace(source="realnet", title="t", meta={"mss": 1448, "link": "emulated"},
                 segments=[_seg(40_100, 1, 30)])
    twins = measured_twins(sim, real)
    first, second = sim.segments
    assert twins[id(first)] is twins[id(second)]
    text = measured_delta(second, twins.get(id(second)))
    assert text.startswith("measured at 40.100 ms (Δ +0.100 ms vs sim): ")
    assert "30 B" in text


def test_a_segment_without_a_real_twin_says_so() -> None:
    sim = Trace(source="sim", title="t", segments=[_seg(0, 1, 2)])
    real = Trace(source="realnet", title="t", segments=[])
    seg = sim.segments[0]
    assert measured_delta(seg, measured_twins(sim, real).get(id(seg))) == \
        "measured: no matching segment on real sockets"
