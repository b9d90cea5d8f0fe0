"""Issue 30: exercises, at least one per part of the course, each checked by claims.

An exercise (`[[lesson.exercise]]`, docs/lessons.md) is a task the student solves in the
sandbox, of one of two kinds:

* **edit**: change the scenario. The checker forces the exercise's `keep` overrides onto
  the student's scenario (so "without NODELAY" cannot be dodged by setting it), runs it and
  judges every `check` claim.
* **claim**: write a claim. It must hold on the lesson's run (and on every `also`
  variant) and fail on every `contrast` variant, so a claim that says nothing cannot pass.

The app does not run exercises yet (docs/lessons.md says what it must do); until it does,
this file is the checker, run on each exercise's `solution`, and proves each exercise can
fail: the lesson's own scenario (for an edit) or a claim that says nothing (for a claim)
does not pass.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from typing import Any

import pytest

from nagle_sim import lessons as expect
from nagle_sim.lessons import Lesson, load_lessons
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

SHIPPED = load_lessons()

PARTS = {1: range(1, 7), 2: range(7, 13), 3: range(13, 17), 4: range(17, 19),
         5: range(19, 22), 6: range(22, 27)}
"""The course's parts by lesson number (docs/teaching.md)."""

EDIT_KEYS = {"part", "kind", "task", "hint", "keep", "check", "solution"}
CLAIM_KEYS = {"part", "kind", "task", "hint", "also", "contrast", "solution"}


def exercises(lesson: Lesson) -> list[dict[str, Any]]:
    raw = tomllib.loads((lesson.path / "scenario.toml").read_text("utf-8"))
    return list(raw.get("lesson", {}).get("exercise", []))


ALL = [(lesson, i, ex) for lesson in SHIPPED for i, ex in enumerate(exercises(lesson))]
IDS = [f"{lesson.slug}[{i}]" for lesson, i, _ in ALL]


def _run(lesson: Lesson, overrides: Iterable[str]) -> Trace:
    path = lesson.path / "scenario.toml"
    text = path.read_text("utf-8")
    return run_sim(expect.variant(lesson.scenario, text, tuple(overrides), str(path)))


def _holds(raw_claim: dict[str, Any], trace: Trace, where: str) -> bool:
    claim = expect.parse_claim(raw_claim, 0, where)
    return claim.judge(expect.evaluate(trace, claim.metric.text))


def check_edit(lesson: Lesson, ex: dict[str, Any], student: Iterable[str]) -> list[str]:
    """The `check` claims that fail on the student's overrides with `keep` forced on top."""
    trace = _run(lesson, [*student, *ex.get("keep", [])])
    where = f"{lesson.slug}: exercise"
    return [c.get("why", c["metric"]) for c in ex["check"] if not _holds(c, trace, where)]


def check_claim(lesson: Lesson, ex: dict[str, Any], claim: dict[str, Any]) -> list[str]:
    """Why the student's claim does not solve the exercise (empty when it does)."""
    where = f"{lesson.slug}: exercise"
    problems = []
    for overrides in [[], *ex.get("also", [])]:
        if not _holds(claim, _run(lesson, overrides), where):
            problems.append(f"fails on {overrides or 'the lesson run'}")
    for overrides in ex["contrast"]:
        if _holds(claim, _run(lesson, overrides), where):
            problems.append(f"also holds on {overrides}: it does not tell them apart")
    return problems


def test_every_part_of_the_course_has_an_exercise() -> None:
    parts = {ex["part"] for _, _, ex in ALL}
    assert parts == set(PARTS), f"parts without an exercise: {set(PARTS) - parts}"
    for lesson, _, ex in ALL:
        assert lesson.number in PARTS[ex["part"]], (lesson.slug, ex["part"])


@pytest.mark.parametrize(("lesson", "i", "ex"), ALL, ids=IDS)
def test_exercise_is_well_formed(lesson: Lesson, i: int, ex: dict[str, Any]) -> None:
    assert ex.get("kind") in ("edit", "claim")
    keys = EDIT_KEYS if ex["kind"] == "edit" else CLAIM_KEYS
    assert set(ex) <= keys, f"unknown keys {set(ex) - keys}"
    assert isinstance(ex.get("task"), str) and len(ex["task"]) > 40
    where = f"{lesson.slug}: exercise[{i}]"
    if ex["kind"] == "edit":
        assert ex["check"], "an edit exercise needs check claims"
        for c in ex["check"]:
            expect.parse_claim(c, 0, where)
        assert ex["solution"] and all("=" in o for o in ex["solution"])
    else:
        expect.parse_claim(ex["solution"], 0, where)
        assert ex["contrast"], "a claim exercise needs a contrast the claim must fail on"


@pytest.mark.parametrize(("lesson", "i", "ex"), ALL, ids=IDS)
def test_the_solution_passes(lesson: Lesson, i: int, ex: dict[str, Any]) -> None:
    if ex["kind"] == "edit":
        assert check_edit(lesson, ex, ex["solution"]) == []
    else:
        assert check_claim(lesson, ex, ex["solution"]) == []


@pytest.mark.parametrize(("lesson", "i", "ex"), ALL, ids=IDS)
def test_the_exercise_is_not_solved_already(lesson: Lesson, i: int, ex: dict[str, Any]
                                            ) -> None:
    """An edit fails on the lesson as it stands; a claim that only says the run happened
    (duration at least 0) fails the contrast."""
    if ex["kind"] == "edit":
        assert check_edit(lesson, ex, []), "the lesson's own scenario already passes"
    else:
        empty = {"metric": "duration_ms", "at_least": 0, "why": "says nothing"}
        assert check_claim(lesson, ex, empty), "a claim that says nothing passes"


def test_keep_stops_the_shortcut() -> None:
    """Lesson 07's exercise forbids NODELAY: turning it on in the student's overrides is
    overridden by `keep`, and the script-level `set nodelay on` sends two segments a
    request, which its check refuses."""
    lesson = next(x for x in SHIPPED if x.slug.endswith("write-write-read"))
    ex = exercises(lesson)[0]
    assert check_edit(lesson, ex, ["client.nodelay=true"])
    assert check_edit(lesson, ex, [
        "client.script='set nodelay on; repeat 12 { write 6; write 7; read 13 }'"])
