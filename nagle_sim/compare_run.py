"""Model vs kernel, run and shown: the ``compare`` and ``validate`` commands.

Owns the orchestration that `nagle_sim.compare` leaves out: running a scenario on real
sockets and on the model at the real run's jiffy phase, printing the comparison (rich),
writing its tables, and validating every lesson. May import realnet and the simulator, but
only inside the functions that run them, so importing this module stays cheap.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compare import (
    TOLERANCE_TEXT,
    Comparison,
    _without_kernel_events,
    compare,
    comparison_markdown,
    iteration_rows,
    match_rows,
    measured_jiffy_phase,
    stall_rows,
)
from .export.tables import render_csv, render_markdown
from .model.events import Side
from .scenario import real_run_caveats
from .summary import iterations, stalls
from .trace import Trace
from .units import ms_text


def _console() -> Any:
    from rich.console import Console
    return Console()


def print_comparison(cmp: Comparison, console: Any, *, limit: int = 200) -> None:
    """Print the comparison tables. Cells and titles are plain `Text`: a scenario title or
    label such as ``[/]`` is shown as written, never read as rich markup."""
    from rich.table import Table
    from rich.text import Text

    headers, rows = match_rows(cmp)
    table = Table(title=Text(f"{cmp.title}: model vs kernel"), show_lines=False, expand=False)
    for h in headers:
        table.add_column(h, overflow="fold")
    shown = rows if len(rows) <= limit else [r for r in rows if r[8] == "✗"][:limit] or \
        rows[:limit]
    for row in shown:
        table.add_row(*map(Text, row), style=None if row[8] == "✓" else "red")
    console.print(table)
    if len(shown) < len(rows):
        console.print(f"… {len(rows) - len(shown)} more segment rows (all of them are in --json)")
    headers, rows = iteration_rows(cmp)
    if rows:
        it = Table(title="Per-iteration latency (client)")
        for h in headers:
            it.add_column(h)
        for row in rows:
            it.add_row(*map(Text, row), style=None if row[-1] == "✓" else "red")
        console.print(it)
    headers, rows = stall_rows(cmp)
    if rows:
        st = Table(title="Stalls ≥ 10 ms")
        for h in headers:
            st.add_column(h, overflow="fold")
        for row in rows:
            st.add_row(*map(Text, row), style=None if row[6] == "✓" else "red")
        console.print(st)
    for note in cmp.notes:
        console.print(f"note: {note}", markup=False)
    for problem in cmp.problems[:40]:
        console.print(f"difference: {problem}", markup=False, style="red")
    if len(cmp.problems) > 40:
        console.print(f"… {len(cmp.problems) - 40} more differences (see --json)")
    console.print(Text(cmp.verdict, style="bold green" if cmp.agree else "bold red"))


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def with_jiffy_phase(scenario: Any, phase: int) -> Any:
    """``scenario`` with both sides' kernels ticking at ``phase`` (one machine, one clock)."""
    from dataclasses import replace
    sides = {side.value: replace(scenario.side(side), profile=scenario.side(side).profile
                                 .with_overrides(jiffy_phase_us=phase)) for side in Side}
    return replace(scenario, **sides)


def run_both(scenario: Any) -> tuple[Trace, Trace]:
    """The real run first, then the model at the real run's measured jiffy phase."""
    from realnet.runner import run_real

    from .sim.driver import run_sim
    real = run_real(scenario, progress=_stderr)
    return aligned_model_run(scenario, real, run_sim), real


def aligned_model_run(scenario: Any, real: Trace, run_sim: Any) -> Trace:
    phase = measured_jiffy_phase(real, scenario.client.profile.hz)
    if phase is None or real.meta.get("remote"):
        return run_sim(scenario)   # type: ignore[no-any-return]
    sim: Trace = run_sim(with_jiffy_phase(scenario, phase))
    sim.meta["jiffy_phase_us"] = phase
    return sim


def _write_tables(cmp: Comparison, markdown: str | None, csv_path: str | None) -> None:
    if markdown:
        Path(markdown).write_text(comparison_markdown(cmp), "utf-8")
        _stderr(f"wrote {markdown}")
    if csv_path:
        Path(csv_path).write_text(render_csv(*match_rows(cmp)), "utf-8")
        _stderr(f"wrote {csv_path}")


def compare_cli(scenario: Any, args: Any) -> int:
    """``nagle-sim compare FILE``: exit 0 when the kernel agrees with the model, else 1."""
    reason = not_comparable(scenario)
    if reason:
        _stderr(f"note: {reason}; comparing anyway, expect differences")
    sim, real = run_both(scenario)
    cmp = compare(sim, real)
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(cmp.to_json(), ensure_ascii=False) + "\n")
    else:
        print_comparison(cmp, _console())
    _write_tables(cmp, getattr(args, "markdown", None), getattr(args, "csv", None))
    return 0 if cmp.agree else 1


def not_comparable(scenario: Any) -> str:
    """Why this machine's kernel cannot run ``scenario`` as the model does ("" if it can)."""
    caveats = real_run_caveats(scenario)
    return caveats[0] if caveats else ""


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
    n_stalls = len(stalls(_without_kernel_events(trace)))
    lat_text = "—" if lat is None else f"{lat:.1f} ms"
    return f"median {lat_text}, {data} data segs, {n_stalls} stalls"


def _difference(res: LessonResult) -> str:
    assert res.cmp is not None
    if res.cmp.agree:
        return f"max timing error {ms_text(res.cmp.max_error(), 1)} ms"
    first = res.cmp.problems[0]
    more = len(res.cmp.problems) - 1
    return first + (f" (+{more} more)" if more else "")


def validate_cli(args: Any) -> int:
    """``nagle-sim validate``: every lesson on the model and on the kernel; exit 1 if any
    lesson disagrees (everything is printed first)."""
    from rich.table import Table

    from .lessons import load_lessons
    from .scenario import ScenarioError

    results: list[LessonResult] = []
    for lesson in load_lessons():
        _stderr(f"validate: {lesson.slug} …")
        reason = not_comparable(lesson.scenario)
        if reason:
            results.append(LessonResult(lesson.slug, None, None, None, reason,
                                        comparable=False))
            continue
        try:
            sim, real = run_both(lesson.scenario)
        except ScenarioError as exc:
            results.append(LessonResult(lesson.slug, None, None, None, str(exc)))
            continue
        results.append(LessonResult(lesson.slug, compare(sim, real), sim, real))
    headers = ["lesson", "verdict", "model", "real", "difference"]
    rows = []
    for res in results:
        verdict = ("n/a" if not res.comparable else "error" if res.cmp is None
                   else "agree" if res.cmp.agree else "DISAGREE")
        rows.append([res.slug, verdict, *res.key_numbers()])
    table = Table(title=f"Model vs kernel, every lesson ({TOLERANCE_TEXT})")
    for h in headers:
        table.add_column(h, overflow="fold")
    for row in rows:
        table.add_row(*row, style={"agree": None, "n/a": "dim"}.get(row[1], "red"))
    console = _console()
    console.print(table)
    for res in results:
        if res.cmp is not None and not res.cmp.agree:
            console.print(f"[bold]{res.slug}[/]: {len(res.cmp.problems)} difference(s)")
            for p in res.cmp.problems[:8]:
                console.print(f"  - {p}", markup=False)
    markdown = getattr(args, "markdown", None)
    if markdown:
        text = (f"# Model vs kernel, every lesson\n\nTolerance: {TOLERANCE_TEXT}.\n\n"
                + render_markdown(headers, rows))
        Path(markdown).write_text(text, "utf-8")
        _stderr(f"wrote {markdown}")
    ok = all(res.cmp is not None and res.cmp.agree for res in results if res.comparable)
    return 0 if ok else 1
