"""The capstone lesson's shipped capture: `nagle-sim explain` reads it, names the cause the
lesson teaches, and rebuilds the very scenario the lesson runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

from nagle_sim.explain import explain_file
from nagle_sim.lessons import lesson_dirs, load_lesson
from nagle_sim.sim.driver import run_sim

CAPSTONE = next(p for p in lesson_dirs() if p.name.endswith("diagnose-a-capture"))
CAPTURE = CAPSTONE / "capture.pcap"


def test_the_capture_is_shipped_and_small() -> None:
    assert CAPTURE.is_file()
    assert CAPTURE.stat().st_size < 64 * 1024


def test_explain_names_nagle_and_delayed_ack_for_every_stall() -> None:
    ex = explain_file(str(CAPTURE), runner=run_sim)
    assert len(ex.connections) == 1
    assert len(ex.stalls) == 7
    assert {s.cause for s in ex.stalls} == {"nagle+delayed_ack"}


def test_explain_rebuilds_the_lesson_scenario() -> None:
    ex = explain_file(str(CAPTURE), runner=run_sim)
    assert ex.rebuilt is not None
    lesson = load_lesson(Path(CAPSTONE))
    rebuilt = tomllib.loads(ex.rebuilt.toml)
    for side in ("client", "server"):
        assert rebuilt[side]["script"] == lesson.scenario.raw[side]["script"]
    assert rebuilt["link"] == lesson.scenario.raw["link"]
    fixes = {w.name: w.per_request_ms for w in ex.rebuilt.whatifs}
    assert fixes["NODELAY on the client"] <= 3
