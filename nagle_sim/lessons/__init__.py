"""Lessons: prose, a scenario, prediction questions and claims the lesson makes about it.

- `loader`: the lesson folder format (``lesson.md`` with its reveals, ``scenario.toml``
  with its ``[lesson]`` table: questions, toggles, a declared sweep) and where the
  shipped lessons are (`LESSONS_DIR`, `load_lessons`);
- `claims`: ``[[expect]]`` claims, checked by running the scenario with the runner the
  caller passes (`check`);
- `metrics`: the metric language claims are written in (`parse_metric`, `evaluate`).

Imports the scenario and trace hubs and `nagle_sim.sweep`'s grammar; must not import
simpy, asyncio, textual, rich or an executor (runners are passed in).
"""

from .claims import (
    COMPARATORS,
    Claim,
    ClaimResult,
    check,
    check_text,
    parse_claim,
    parse_claims,
    show,
    variant,
)
from .loader import (
    LESSONS_DIR,
    Lesson,
    LessonSweep,
    Question,
    Reveal,
    Variant,
    cheat_sheet,
    describe_override,
    lesson_dirs,
    load_lesson,
    load_lessons,
    parse_sweep,
    split_prose,
    toggle_errors,
    variants,
)
from .metrics import METRICS_HELP, Metric, MetricError, evaluate, parse_metric

__all__ = [
    "COMPARATORS", "LESSONS_DIR", "METRICS_HELP", "Claim", "ClaimResult", "Lesson",
    "LessonSweep", "Metric", "MetricError", "Question", "Reveal", "Variant", "cheat_sheet",
    "check",
    "check_text", "describe_override", "evaluate", "lesson_dirs", "load_lesson",
    "load_lessons", "parse_claim", "parse_claims", "parse_metric", "parse_sweep", "show",
    "split_prose", "toggle_errors", "variant", "variants",
]
