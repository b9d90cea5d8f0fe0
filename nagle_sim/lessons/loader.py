"""A lesson folder in, a `Lesson` out: prose, scenario, questions, what-ifs, a sweep.

Owns: the lesson directory format (docs/lessons.md), its loader, and where the shipped
lessons are found. A lesson is a folder ``NN-slug/`` holding ``lesson.md`` (Markdown prose,
split into setup and reveals by ``<!-- reveal -->`` markers) and ``scenario.toml`` (a
normal scenario with an ``[expect]`` list and a ``[lesson]`` table, which may declare a
``[lesson.sweep]`` grid: validated here with `nagle_sim.sweep`'s grammar, run by the app).
The shipped lessons live in the repository's ``lessons/`` folder and are installed as
package data of ``nagle_sim`` (``nagle_sim.lesson_files``), never as a top-level package,
so a ``lessons/`` folder in the user's directory cannot shadow them. Must not import
simpy, asyncio, textual, rich or anything that runs a scenario (an executor, or
`nagle_sim.sweep.run`).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .. import scenario as scenario_mod
from ..scenario import Scenario, ScenarioError
from ..sweep import Axis, SweepError, build_cells, parse_metrics, parse_vary


def _shipped_lessons() -> Path:
    """The installed lessons (package data), or the checkout's ``lessons/`` folder when
    running from a source tree that was installed before the lessons became package data."""
    try:
        root = resources.files("nagle_sim.lesson_files")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "lessons"
    # an installed package is a real folder (zip imports are not supported)
    return Path(str(root))


LESSONS_DIR = _shipped_lessons()


def cheat_sheet(root: Path | None = None) -> str:
    """The course's cheat sheet (``cheatsheet.md`` beside the lessons), as Markdown.

    Raises:
        ScenarioError: it is missing or unreadable (one line naming the file).
    """
    return scenario_mod.read_text((root or LESSONS_DIR) / "cheatsheet.md",
                                  what="the cheat sheet")

REVEAL = re.compile(r"^<!--\s*reveal(?:\s+after\s+(\d+))?\s*-->\s*$", re.MULTILINE)
"""A line ``<!-- reveal -->`` (after every question) or ``<!-- reveal after N -->`` (after
the first N questions, in time order) starts prose that stays hidden until then."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reveal:
    after: int
    """How many of the lesson's questions (in ``at_ms`` order) must be done first."""
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A predict-then-reveal question, asked when the cursor first reaches ``at_ms``."""

    at_ms: float
    prompt: str
    choices: tuple[str, ...]
    answer: int
    explain: str


SWEEP_MAX_CELLS = 48
"""A lesson's sweep runs in the app while the student waits: a few dozen model runs."""
SWEEP_MAX_SERIES = 6
"""Lines in the app's terminal plot (the keys after the first): more cannot be told apart."""
SWEEP_MAX_METRICS = 4
SWEEP_KEYS = ("title", "scenario", "vary", "metrics")


@dataclass(frozen=True, slots=True, kw_only=True)
class LessonSweep:
    """The grid a lesson declares in ``[lesson.sweep]`` (docs/lessons.md): the app runs
    every cell in the model and shows the table and a plot of each metric against the
    first varied key."""

    title: str
    axes: tuple[Axis, ...]
    """The varied keys in declaration order; the first is the plot's x axis."""
    metrics: tuple[str, ...]
    text: str
    """The swept scenario's TOML (the lesson's own, or the file named by ``scenario``)."""
    where: str
    """That scenario's path, as errors and the table name it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lesson:
    slug: str
    title: str
    summary: str
    prose: str
    """The whole lesson.md (markers included)."""
    scenario: Scenario
    path: Path
    questions: tuple[Question, ...] = ()
    toggles: tuple[str, ...] = ()
    """What-if toggles the lesson suggests, e.g. "client.nodelay"."""
    tags: tuple[str, ...] = field(default_factory=tuple)
    setup: str = ""
    """Prose shown from the start: it must not answer any question."""
    reveals: tuple[Reveal, ...] = ()
    sweep: LessonSweep | None = None
    """The lesson's declared sweep, if any."""

    @property
    def number(self) -> int | None:
        """The lesson's place in the teaching order: its directory's leading number
        ("07-write-write-read" is 7); None for a directory without one."""
        head = self.slug.split("-", 1)[0]
        return int(head) if head.isdigit() and len(head) <= 4 else None

    @property
    def numbered_title(self) -> str:
        """"Lesson 7: Write, write, read" (the title alone for a lesson without a number)."""
        return self.title if self.number is None else f"Lesson {self.number}: {self.title}"

    def visible_prose(self, done: int) -> str:
        """Setup plus every reveal whose questions are done (``done`` = answered or skipped,
        counted in time order)."""
        parts = [self.setup] + [r.text for r in self.reveals if r.after <= done]
        return "\n\n".join(p.strip("\n") for p in parts if p.strip())


def split_prose(prose: str, questions: int, where: Path) -> tuple[str, tuple[Reveal, ...]]:
    """``(setup, reveals)`` of a lesson.md; a marker asking for more questions than the
    lesson has is an error (the text would never show)."""
    marks = list(REVEAL.finditer(prose))
    if not marks:
        return prose, ()
    setup = prose[:marks[0].start()]
    reveals = []
    last = 0
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(prose)
        after = int(mark.group(1)) if mark.group(1) else questions
        line = prose.count("\n", 0, mark.start()) + 1
        if not 0 <= after <= questions:
            raise ScenarioError(f"{where}:{line}: reveal after {after}: the lesson has "
                                f"{questions} question(s)")
        if after < last:
            raise ScenarioError(f"{where}:{line}: reveal markers must not go back in time "
                                f"({after} after {last})")
        last = after
        reveals.append(Reveal(after=after, text=prose[mark.end():end]))
    return setup, tuple(reveals)


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


def _value_text(value: Any) -> str:
    """A declared sweep value as ``--vary`` text: TOML for booleans and numbers, strings
    as written unless they would read back as another type (then quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    try:
        tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return text
    return json.dumps(text)  # a TOML basic string: "true", "10" stay strings


def parse_sweep(where: Path, raw: Any, folder: Path, own_text: str | None = None
                ) -> LessonSweep:
    """Validate a ``[lesson.sweep]`` table: every cell's scenario is built (not run), so a
    bad key or value is reported when the lesson loads. Errors are one-line
    `ScenarioError`s naming ``where`` and the key.

    Args:
        where: the lesson's scenario.toml, for errors.
        raw: the table as parsed.
        folder: the lesson folder (``scenario`` names a file in it).
        own_text: the lesson's scenario text, when already read.
    """
    if not isinstance(raw, dict):
        raise _fail(where, "sweep", "must be a table (vary = {KEY = [V1, V2, …]}, "
                                    "metrics = [NAME, …])")
    for key in raw:
        if key not in SWEEP_KEYS:
            raise _fail(where, f"sweep.{key}", f"unknown key (allowed: {', '.join(SWEEP_KEYS)})")
    title = raw.get("title", "")
    if not isinstance(title, str):
        raise _fail(where, "sweep.title", "must be a string")
    name = raw.get("scenario")
    if name is None:
        swept = where
        text = own_text if own_text is not None else scenario_mod.read_text(where)
    else:
        if (not isinstance(name, str) or not name.endswith(".toml") or Path(name).name != name
                or name.startswith(".")):
            raise _fail(where, "sweep.scenario", "must name a .toml file in the lesson's "
                                                 f"folder, got {scenario_mod.shown(name)}")
        swept = folder / name
        try:
            text = scenario_mod.read_text(swept)
        except ScenarioError as exc:
            raise _fail(where, "sweep.scenario", str(exc)) from None
    vary = raw.get("vary")
    if not isinstance(vary, dict) or not vary:
        raise _fail(where, "sweep.vary", "must be a table of KEY = [V1, V2, …] (at least "
                                         "one key)")
    axes: list[Axis] = []
    for key, values in vary.items():
        at = f"sweep.vary.{key}"
        if not isinstance(values, list) or not values or not all(
                isinstance(v, str | int | float | bool) for v in values):
            raise _fail(where, at, "must be a list of strings, numbers or booleans")
        texts = [_value_text(v) for v in values]
        if any("," in t or not t.strip() for t in texts):
            raise _fail(where, at, "a value is empty or holds a comma")
        try:
            axes.append(parse_vary(f"{key}={','.join(texts)}"))
        except SweepError as exc:
            raise _fail(where, at, str(exc).removeprefix("--vary ")) from None
    cells = math.prod(len(a.values) for a in axes)
    if cells > SWEEP_MAX_CELLS:
        raise _fail(where, "sweep.vary", f"{cells} cells; a lesson's sweep runs while the "
                                         f"student waits: at most {SWEEP_MAX_CELLS}")
    series = math.prod(len(a.values) for a in axes[1:])
    if series > SWEEP_MAX_SERIES:
        raise _fail(where, "sweep.vary", f"{series} lines per plot (the keys after the first); "
                                         f"at most {SWEEP_MAX_SERIES}")
    metrics = raw.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise _fail(where, "sweep.metrics", "must be a list of metric names")
    try:
        chosen = parse_metrics(metrics)
    except SweepError as exc:
        raise _fail(where, "sweep.metrics", str(exc).removeprefix("--metric ")) from None
    if len(chosen) > SWEEP_MAX_METRICS:
        raise _fail(where, "sweep.metrics", f"{len(chosen)} metrics; at most "
                                            f"{SWEEP_MAX_METRICS}")
    try:
        build_cells(text, str(swept), axes)
    except SweepError as exc:
        raise _fail(where, "sweep.vary", str(exc)) from None
    return LessonSweep(title=title or f"sweep of {swept.name}", axes=tuple(axes),
                       metrics=chosen, text=text, where=str(swept))


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
    questions = tuple(sorted(questions, key=lambda q: q.at_ms))
    setup, reveals = split_prose(prose, len(questions), md_path)
    sweep = (parse_sweep(toml_path, meta["sweep"], folder) if "sweep" in meta else None)
    return Lesson(slug=folder.name, title=str(meta.get("title", scenario.title)),
                  summary=str(meta.get("summary", scenario.description)), prose=prose,
                  scenario=scenario, path=folder, questions=questions,
                  toggles=tuple(str(t) for t in meta.get("toggles", ())),
                  tags=tuple(str(t) for t in meta.get("tags", ())),
                  setup=setup, reveals=reveals, sweep=sweep)


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """A what-if a lesson offers: a toggle (``"server.nodelay"``) or the ``--set`` list of
    a claim's ``when``."""

    label: str
    toggle: str = ""
    overrides: tuple[str, ...] = ()


def describe_override(override: str) -> str:
    """A ``--set`` string in a student's words: ``client.nodelay=true`` is "client NODELAY
    on", ``client.script=…`` is "client script: …"."""
    key, _, value = override.partition("=")
    value = value.strip().strip("'\"")
    side, _, rest = key.partition(".")
    if rest == "script":
        return f"{side} script: {value}"
    if value in ("true", "false"):
        return f"{side} {rest.upper()} {'on' if value == 'true' else 'off'}"
    return f"{side} {rest} = {value}"


def variants(lesson: Lesson) -> list[Variant]:
    """The lesson's what-ifs, in order: its toggles, then each distinct claim variant that
    is not just one of those toggles switched on."""
    out = [Variant(label=describe_override(f"{t}=true").replace(" on", ""), toggle=t)
           for t in lesson.toggles]
    same_as_toggle = {(f"{t}=true",) for t in lesson.toggles}
    seen: set[tuple[str, ...]] = set()
    for claim in lesson.scenario.raw.get("expect", ()):
        when = claim.get("when") if isinstance(claim, dict) else None
        if not when:
            continue
        key = tuple(str(w) for w in when)
        if key in seen or key in same_as_toggle:
            continue
        seen.add(key)
        out.append(Variant(label="; ".join(describe_override(w) for w in key), overrides=key))
    return out


TOGGLE_OPTIONS = scenario_mod.OPTIONS
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
