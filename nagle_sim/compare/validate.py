"""Validating the model against the kernel: every lesson, or seeded random scenarios.

Owns: the loops of ``nagle-sim validate`` (`validate_lessons`, `validate_random`) with
their per-scenario results and table rows (each lesson's two layers, decisions and
timing: `layer_cells`); the runs come from a `run_both` the caller hands in (already
bound to its runners and profile), progress lines go to a callback.
Printing the tables is `nagle_sim.render.compare`'s, the command `nagle_sim.cli.compare`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from ..scenario import Scenario, loads
from ..scenario.generator import random_scenario
from ..trace import Trace
from ..trace.summary import iterations, stalls
from ..trace.units import ms_text
from .match import without_kernel_events
from .run import Both, not_comparable
from .verdict import Comparison

if TYPE_CHECKING:
    from ..lessons import Lesson


@dataclass(slots=True)
class LessonResult:
    slug: str
    cmp: Comparison | None
    sim: Trace | None
    real: Trace | None
    error: str = ""
    comparable: bool = True

    def key_numbers(self) -> tuple[str, str, str]:
        """(model, real, difference) text: median latency, data segments, stalls."""
        if self.sim is None or self.real is None:
            return "", "", self.error
        return (_numbers(self.sim), _numbers(self.real), _difference(self))

def _median(values: list[int]) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[len(v) // 2] / 1000

def _numbers(trace: Trace) -> str:
    lat = _median([it.latency for it in iterations(trace)])
    data = sum(1 for s in trace.segments if s.length)
    n_stalls = len(stalls(without_kernel_events(trace)))
    lat_text = "—" if lat is None else f"{lat:.1f} ms"
    return f"median {lat_text}, {data} data segs, {n_stalls} stalls"

def _difference(res: LessonResult) -> str:
    assert res.cmp is not None
    if res.cmp.agree:
        return f"max timing error {ms_text(res.cmp.max_error(), 1)} ms"
    first = res.cmp.problems[0]
    more = len(res.cmp.problems) - 1
    return first + (f" (+{more} more)" if more else "")

MAX_RANDOM = 1000
"""Random scenarios one ``validate --random`` may run (each takes a second or two)."""


def lesson_verdict(res: LessonResult) -> str:
    """A lesson's verdict word: n/a (not comparable here), error, agree or DISAGREE."""
    return ("n/a" if not res.comparable else "error" if res.cmp is None
            else "agree" if res.cmp.agree else "DISAGREE")


LESSON_HEADERS = ["lesson", "verdict", "model", "real", "difference", "decisions", "timing",
                  "reasons"]
RANDOM_HEADERS = ["seed", "scenario", "verdict", "first difference"]


def validate_lessons(lessons: Iterable[Lesson], run_both: Callable[[Scenario], Both],
                     progress: Callable[[str], None], *, remote: bool = False
                     ) -> list[LessonResult]:
    """Every lesson on the kernel and on the model (``run_both``), one at a time; a lesson
    this machine (``remote``: this host and a serve's) cannot run as the model does is
    n/a, one whose run fails is an error."""
    results: list[LessonResult] = []
    for lesson in lessons:
        progress(f"validate: {lesson.slug} …")
        reason = not_comparable(lesson.scenario, remote)
        if reason:
            results.append(LessonResult(lesson.slug, None, None, None, reason,
                                        comparable=False))
            continue
        try:
            both = run_both(lesson.scenario)
        except UserError as exc:
            results.append(LessonResult(lesson.slug, None, None, None, str(exc)))
            continue
        results.append(LessonResult(lesson.slug, both.compare(), both.sim, both.real))
    return results


def lesson_rows(results: list[LessonResult]) -> list[list[str]]:
    """`LESSON_HEADERS` rows: slug, verdict, the key numbers of each run, the difference,
    the two layers' verdicts and the reasons'."""
    return [[res.slug, lesson_verdict(res), *res.key_numbers(), *layer_cells(res.cmp),
             reason_cell(res)] for res in results]


def layer_cells(cmp: Comparison | None) -> list[str]:
    """The decisions and timing cells of a verdict row (`nagle_sim.compare.layers`; two
    empty cells without layers)."""
    layers = cmp.layers if cmp is not None else None
    if layers is None:
        return ["", ""]
    dec = layers.decisions
    timing = layers.timing
    causes = ", ".join(f"{k} {v}" for k, v in sorted(timing.causes.items(),
                                                     key=lambda kv: -kv[1]))
    return ["agree" if dec.agree else f"DIFFER ({len(dec.differences)})",
            "agree" if timing.agree else f"differs ({len(timing.differences)}: {causes})"]


def reason_cell(res: LessonResult) -> str:
    """The reasons' verdict in a few words: matched of the model's, differences."""
    r = res.cmp.reasons if res.cmp is not None else None
    if r is None:
        return ""
    if r.unavailable is not None:
        return "not recorded"
    unseen = r.model_total - r.matched - sum(1 for p in r.pairs if p.model is not None
                                              and not p.ok)
    words = f"{r.matched}/{r.model_total} matched" + (f", {unseen} unseen" if unseen else "")
    return words + (f", {len(r.problems)} differ" if r.problems else ", agree")


def validate_random(first: int, count: int, run_both: Callable[[Scenario], Both],
                    progress: Callable[[str], None], keep: Path | None = None
                    ) -> tuple[list[list[str]], int]:
    """Generated scenarios ``first`` … ``first + count - 1`` (`nagle_sim.scenario.generator`)
    on the kernel and on the model: `RANDOM_HEADERS` rows and how many agree; each
    disagreeing scenario is written to ``keep`` (for ``nagle-sim compare``)."""
    rows: list[list[str]] = []
    agreed = 0
    for i, seed in enumerate(range(first, first + count), 1):
        rs = random_scenario(seed)
        progress(f"validate: random scenario {seed} ({i}/{count}) …")
        try:
            both = run_both(loads(rs.text, f"<random scenario {seed}>"))
        except UserError as exc:
            rows.append([str(seed), rs.summary, "error", str(exc)])
            continue
        cmp = both.compare()
        if cmp.agree:
            agreed += 1
            rows.append([str(seed), rs.summary, "agree",
                         f"max timing error {ms_text(cmp.max_error(), 1)} ms"])
            continue
        first_problem = cmp.problems[0] if cmp.problems else ""
        more = f" (+{len(cmp.problems) - 1} more)" if len(cmp.problems) > 1 else ""
        rows.append([str(seed), rs.summary, "DISAGREE", first_problem + more])
        if keep is not None:
            path = keep / f"random-{seed}.toml"
            path.write_text(rs.text, "utf-8")
            progress(f"wrote {path}")
    return rows, agreed
