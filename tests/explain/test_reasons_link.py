"""The model's reasons and explain's causes are linked by one table
(`nagle_sim.explain.reasons`), and the link holds: a lesson run on the model, written as a
pcap and explained from the wire alone, gets the causes the model's own reasons link to."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim.explain import explain_file
from nagle_sim.explain.causes import CAUSES
from nagle_sim.explain.reasons import HOLD_CAUSE, NOT_A_CAUSE, RELEASE_CAUSE, model_causes
from nagle_sim.export.pcap import to_pcap
from nagle_sim.model.events import Reason
from nagle_sim.scenario import load
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace.summary import stalls

LESSONS = Path(__file__).resolve().parents[2] / "lessons"


def test_every_reason_is_linked_to_a_cause_or_said_to_be_none() -> None:
    """A reason the model gains must be placed: a cause of its own, or why it is none."""
    tables = (HOLD_CAUSE, RELEASE_CAUSE, NOT_A_CAUSE)
    placed = [r for table in tables for r in table]
    assert len(placed) == len(set(placed)), "a reason is in two tables"
    missing = sorted(r.name for r in Reason if r not in placed)
    assert missing == [], ("place each new Reason in nagle_sim/explain/reasons.py: "
                           "HOLD_CAUSE, RELEASE_CAUSE or NOT_A_CAUSE")
    assert set(HOLD_CAUSE.values()) | set(RELEASE_CAUSE.values()) <= set(CAUSES)


def test_model_causes_reads_a_stalls_codes() -> None:
    assert model_causes("NAGLE_HOLD", "DELACK_FIRED") == ["nagle", "delayed_ack"]
    assert model_causes("CORK_HOLD", "PROBE0_RELEASE") == ["cork"]
    assert model_causes("", "RETRANSMIT") == ["rto"]
    assert model_causes("", "APP_WRITE") == model_causes("", "") == []
    assert model_causes("not a reason", "") == []


@pytest.mark.parametrize("lesson", ["07-write-write-read", "09-classic-nagle-vs-minshall",
                                    "11-nodelay-vs-cork", "14-http-headers-then-body"])
def test_explain_names_a_model_stall_by_the_causes_its_reasons_link_to(
        lesson: str, tmp_path: Path) -> None:
    """Measured over every lesson (model run → pcap → explain): of the 121 captured stalls
    whose model twin recorded a hold, 120 got exactly the linked causes; lesson 02's one
    Nagle hold ended by an ACK over a long link is "link" to explain. These lessons'
    stalls all agree."""
    trace = run_sim(load(str(LESSONS / lesson / "scenario.toml")))
    pcap = tmp_path / "run.pcap"
    pcap.write_bytes(to_pcap(trace))
    model = stalls(trace, asleep=True)
    compared = 0
    for st in explain_file(str(pcap)).stalls:
        twin = min(model, key=lambda m: abs(m.start - st.start) + abs(m.end - st.end))
        if abs(twin.start - st.start) > 2000 or abs(twin.end - st.end) > 2000:
            continue        # explain's stall has no model twin (an idle application's)
        if not twin.held_code:
            continue        # nothing was held: explain names it from timing alone
        compared += 1
        assert sorted(st.causes) == sorted(model_causes(twin.held_code, twin.ended_code))
    assert compared >= 5
