"""Lessons: prose + scenario + expectations + prediction questions, loaded from `lessons/`.

Owns: the lesson directory format (docs/lessons.md) and its loader. A lesson is a folder
``lessons/NN-slug/`` holding ``lesson.md`` (Markdown prose) and ``scenario.toml`` (a normal
scenario with an ``[expect]`` list and a ``[lesson]`` table). Must not import simpy,
asyncio, textual or rich.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lessons as _lesson_data

from . import scenario as scenario_mod
from .scenario import Scenario, ScenarioError

LESSONS_DIR = Path(_lesson_data.__file__).resolve().parent


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A predict-then-reveal question, asked when the cursor first reaches ``at_ms``."""

    at_ms: float
    prompt: str
    choices: tuple[str, ...]
    answer: int
    explain: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Lesson:
    slug: str
    title: str
    summary: str
    prose: str
    scenario: Scenario
    path: Path
    questions: tuple[Question, ...] = ()
    toggles: tuple[str, ...] = ()
    """What-if toggles the lesson suggests, e.g. "client.nodelay"."""
    tags: tuple[str, ...] = field(default_factory=tuple)


def _fail(where: Path, key: str, message: str) -> ScenarioError:
    return ScenarioError(f"{where}: lesson.{key}: {message}")


def _question(where: Path, i: int, raw: Any) -> Question:
    key = f"question[{i}]"
    if not isinstance(raw, dict):
        raise _fail(where, key, "must be a table")
    try:
        choices = tuple(str(c) for c in raw["choices"])
        answer = int(raw["answer"])
        q = Question(at_ms=float(raw.get("at_ms", 0.0)), prompt=str(raw["prompt"]),
                     choices=choices, answer=answer, explain=str(raw.get("explain", "")))
    except KeyError as exc:
        raise _fail(where, key, f"missing {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise _fail(where, key, str(exc)) from None
    if not 2 <= len(choices) <= 6 or not 0 <= answer < len(choices):
        raise _fail(where, key, "needs 2-6 choices and an answer index among them")
    return q


def load_lesson(folder: str | Path) -> Lesson:
    """Load one lesson folder; errors are one-line `ScenarioError`s."""
    folder = Path(folder)
    toml_path = folder / "scenario.toml"
    md_path = folder / "lesson.md"
    scenario = scenario_mod.load(toml_path)
    try:
        prose = md_path.read_text("utf-8")
    except OSError:
        raise ScenarioError(f"{md_path}: missing lesson prose") from None
    meta = scenario.raw.get("lesson", {})
    if not isinstance(meta, dict):
        raise _fail(toml_path, "", "must be a table")
    questions = tuple(_question(toml_path, i, q) for i, q in enumerate(meta.get("question", [])))
    return Lesson(slug=folder.name, title=str(meta.get("title", scenario.title)),
                  summary=str(meta.get("summary", scenario.description)), prose=prose,
                  scenario=scenario, path=folder, questions=questions,
                  toggles=tuple(str(t) for t in meta.get("toggles", ())),
                  tags=tuple(str(t) for t in meta.get("tags", ())))


TOGGLE_OPTIONS = ("nodelay", "cork", "quickack")
"""Socket options a lesson toggle may flip: ``"<client|server>.<option>"``."""


def toggle_errors(lesson: Lesson) -> list[str]:
    """Problems with a lesson's ``toggles`` (read-only check; empty when all are valid)."""
    problems = []
    for toggle in lesson.toggles:
        side, _, option = toggle.partition(".")
        if side not in ("client", "server") or option not in TOGGLE_OPTIONS:
            problems.append(f"{toggle!r}: use client|server.{'|'.join(TOGGLE_OPTIONS)}")
            continue
        spec = lesson.scenario.client if side == "client" else lesson.scenario.server
        if option == "cork" and not spec.profile.supports_cork:
            problems.append(f"{toggle!r}: profile {spec.profile.name!r} has no TCP_CORK")
        if option == "quickack" and not spec.profile.supports_quickack:
            problems.append(f"{toggle!r}: profile {spec.profile.name!r} has no TCP_QUICKACK")
    return problems


def lesson_dirs(root: Path = LESSONS_DIR) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "scenario.toml").exists())


def load_lessons(root: Path = LESSONS_DIR) -> list[Lesson]:
    """Every lesson, in folder order."""
    return [load_lesson(p) for p in lesson_dirs(root)]
