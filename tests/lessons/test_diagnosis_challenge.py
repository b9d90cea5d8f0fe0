"""Lesson 26's diagnosis challenge (issue 30): six unlabelled captures shipped with the
package, five made by real programs on this machine, and their key in
`[[lesson.capture]]`. `nagle-sim explain` reads each one and must reach the key's
diagnosis, so the key the student is checked against is the tool's own answer, and at
least two captures are ones where Nagle is not the cause."""

from __future__ import annotations

import tomllib
from collections import Counter
from typing import Any

import pytest

from nagle_sim.explain import explain_file
from nagle_sim.lessons import Lesson, load_lessons
from nagle_sim.sim.driver import run_sim

CHALLENGE: Lesson = next(x for x in load_lessons() if x.slug.endswith("diagnosis-challenge"))
KEY: list[dict[str, Any]] = tomllib.loads(
    (CHALLENGE.path / "scenario.toml").read_text("utf-8"))["lesson"]["capture"]

SAME_CAUSE = {"zero_window": "receiver"}
"""explain names a stall on a full window `receiver` or, when the peer said so with a zero
window, `zero_window`: one diagnosis for the student."""


def _main_cause(path: str) -> tuple[str, Any]:
    ex = explain_file(path, runner=run_sim)   # the model's re-run gives the what-ifs
    spent: Counter[str] = Counter()
    for stall in ex.stalls:
        spent[SAME_CAUSE.get(stall.cause, stall.cause)] += stall.duration
    return spent.most_common(1)[0][0], ex


def test_six_captures_and_at_least_two_not_nagle() -> None:
    assert [c["file"] for c in KEY] == [f"capture-{n}.pcap" for n in range(1, 7)]
    assert sum("nagle" not in c["cause"] for c in KEY) >= 2
    assert sum("made by the model" in c["made_by"] or "a model run" in c["made_by"]
               for c in KEY) <= 1, "at most one capture may come from the model"


@pytest.mark.parametrize("entry", KEY, ids=[c["file"] for c in KEY])
def test_explain_reaches_the_key(entry: dict[str, Any]) -> None:
    path = CHALLENGE.path / entry["file"]
    assert path.is_file() and path.stat().st_size < 64 * 1024
    cause, ex = _main_cause(str(path))
    assert cause == entry["cause"], f"explain blames {cause!r}"
    assert ex.rebuilt is not None
    if "receiver" in entry:
        assert tomllib.loads(ex.rebuilt.toml)["server"]["profile"] == entry["receiver"]
    nodelay = {w.name: w.per_request_ms for w in ex.rebuilt.whatifs}.get(
        "NODELAY on the client")
    if entry["fix"] == "client.nodelay":
        assert nodelay is not None and nodelay <= 3, "NODELAY on the client must fix it"
    elif nodelay is not None:
        assert nodelay > 3, "NODELAY on the client must not be what fixes this one"


def test_the_key_is_in_the_reveal_not_the_setup() -> None:
    for n in range(1, 7):
        assert f"| {n} |" in CHALLENGE.prose.split("<!-- reveal after 2 -->")[1]
        assert f"| {n} |" not in CHALLENGE.setup


def test_the_lesson_runs_capture_2_as_explain_rebuilds_it() -> None:
    ex = explain_file(str(CHALLENGE.path / "capture-2.pcap"))
    assert ex.rebuilt is not None
    rebuilt = tomllib.loads(ex.rebuilt.toml)
    assert "sleep 45ms" in rebuilt["server"]["script"]
    assert "sleep 45ms" in CHALLENGE.scenario.raw["server"]["script"]
    # loopback's MSS (65483) in the capture; the lesson asks for 32000, the most
    # TCP_MAXSEG accepts, so that a real run (`r`, validate) can set it
    assert rebuilt["link"]["mss"] == 65483 and CHALLENGE.scenario.raw["link"]["mss"] == 32000
