"""The run summary of a trace without hold events (a real-socket run) names its stalls
from the wire, with explain's classifier, instead of "no data waiting to be sent"."""

from __future__ import annotations

import dataclasses

from nagle_sim.explain.causes import wire_causes
from nagle_sim.trace import Trace
from nagle_sim.trace.summary import stalls


def test_a_trace_without_holds_gets_wire_causes(s1_trace: Trace) -> None:
    real_like = dataclasses.replace(s1_trace, events=[], source="realnet")
    assert not any("on the wire:" in s.held_by for s in stalls(real_like))  # none injected
    found = stalls(real_like, wire=wire_causes)
    assert len(found) == 5
    assert all("nagle+delayed_ack" in s.held_by for s in found)
    assert not any("no data waiting" in s.held_by for s in found)


def test_a_simulated_trace_keeps_its_hold_events(s1_trace: Trace) -> None:
    found = stalls(s1_trace, wire=wire_causes)
    assert found and not any("on the wire:" in s.held_by for s in found)
