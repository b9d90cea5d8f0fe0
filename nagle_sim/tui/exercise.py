"""A lesson's exercises (``[[lesson.exercise]]``, docs/lessons.md) checked in the sandbox.

Owns reading a lesson's exercises and judging a student's sandbox text against one:

* **edit**: the student's scenario, with the exercise's ``keep`` overrides forced on top
  (so "without NODELAY" cannot be dodged by setting it), is run and every ``check`` claim
  judged;
* **claim**: the first ``[[expect]]`` table the student wrote must hold on the lesson's run
  and on every ``also`` variant, and fail on every ``contrast`` variant (a claim that says
  nothing cannot pass).

The same rules as the course's checker (tests/lessons/test_exercises.py). Pure Python: no
textual, no simpy (the runner is passed in), no realnet.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from ..lessons import Lesson, evaluate, parse_claim, variant
from ..scenario import ScenarioError, loads
from ..trace import Runner, Trace


@dataclass(frozen=True, slots=True)
class Exercise:
    lesson: Lesson
    number: int
    """1-based, in the lesson's order."""
    raw: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind", ""))

    @property
    def task(self) -> str:
        return str(self.raw.get("task", ""))

    @property
    def hint(self) -> str:
        return str(self.raw.get("hint", ""))


@dataclass(frozen=True, slots=True)
class Verdict:
    solved: bool
    lines: list[tuple[bool, str]]
    """Each check (or requirement, for a claim) with whether it passed."""


def lesson_exercises(lesson: Lesson) -> list[Exercise]:
    """The lesson's exercises, in order (none when its scenario file cannot be read)."""
    try:
        raw = tomllib.loads((lesson.path / "scenario.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    found = raw.get("lesson", {}).get("exercise", [])
    return [Exercise(lesson, i + 1, ex) for i, ex in enumerate(found) if isinstance(ex, dict)]


def _lesson_run(ex: Exercise, overrides: list[str], run: Runner) -> Trace:
    path = ex.lesson.path / "scenario.toml"
    text = path.read_text("utf-8")
    return run(variant(ex.lesson.scenario, text, tuple(overrides), str(path)))


def check(ex: Exercise, text: str, where: str, run: Runner) -> Verdict:
    """Judge the student's sandbox ``text`` against ``ex``. A text that does not load is a
    `ScenarioError` (the sandbox shows its one line)."""
    claim_where = f"{ex.lesson.slug}: exercise {ex.number}"
    if ex.kind == "edit":
        scenario = loads(text, where, [str(o) for o in ex.raw.get("keep", [])])
        trace = run(scenario)
        lines = []
        for raw in ex.raw.get("check", []):
            claim = parse_claim(raw, 0, claim_where)
            ok = claim.judge(evaluate(trace, claim.metric.text))
            lines.append((ok, str(raw.get("why") or raw.get("metric"))))
        return Verdict(all(ok for ok, _ in lines), lines)
    if ex.kind == "claim":
        written = loads(text, where).expect
        if not written:
            raise ScenarioError(f"{where}: write your claim as an [[expect]] table (metric, a "
                                "comparison, why), then check again")
        claim = parse_claim(written[0], 0, where)
        lines = []
        for overrides in [[], *ex.raw.get("also", [])]:
            ok = claim.judge(evaluate(_lesson_run(ex, list(overrides), run),
                                      claim.metric.text))
            lines.append((ok, f"holds on {', '.join(overrides) or 'the lesson run'}"))
        for overrides in ex.raw.get("contrast", []):
            ok = not claim.judge(evaluate(_lesson_run(ex, list(overrides), run),
                                          claim.metric.text))
            lines.append((ok, f"fails on {', '.join(overrides)}"))
        return Verdict(all(ok for ok, _ in lines), lines)
    raise ScenarioError(f"{claim_where}: unknown kind {ex.kind!r}")
