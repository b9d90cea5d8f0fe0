"""A comparison and a validation in the terminal (``nagle-sim compare``, ``validate``).

Owns: how a `nagle_sim.compare.Comparison` is drawn with rich (the segment table, the
iterations and stalls tables, notes, host differences, the problems, the verdict in
colour, its two layers: `print_layers`), the verdict tables of ``validate``
(`verdict_table`) and a disagreeing lesson's first problems with the lessons' layer
counts (`print_lesson_problems`). Cells and titles are plain `Text`: a scenario
title or an address such as ``[/]`` is shown as written, never read as rich markup. Must
not import textual, simpy or an executor.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..compare.tables import iteration_rows, match_rows, stall_rows
from ..compare.validate import LessonResult
from ..compare.verdict import Comparison
from .piped import fit_piped


def print_comparison(cmp: Comparison, console: Console, *, limit: int = 200) -> None:
    """Print the comparison tables. Cells and titles are plain `Text`: a scenario title or
    label such as ``[/]`` is shown as written, never read as rich markup."""
    headers, rows = match_rows(cmp)
    table = Table(title=Text(f"{cmp.title}: model vs kernel"), show_lines=False, expand=False)
    for h in headers:
        table.add_column(h, overflow="fold")
    shown = rows if len(rows) <= limit else [r for r in rows if r[8] == "✗"][:limit] or \
        rows[:limit]
    for row in shown:
        table.add_row(*map(Text, row), style=None if row[8] == "✓" else "red")
    fit_piped(console, table)
    if cmp.wire_unknown is not None:
        console.print(Text(f"{cmp.title}: segments were not captured "
                           f"({cmp.wire_unknown}): only ops are compared",
                           style="bold yellow"))
    else:
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
        fit_piped(console, it)
        console.print(it)
    headers, rows = stall_rows(cmp)
    if rows:
        st = Table(title="Stalls ≥ 10 ms")
        for h in headers:
            st.add_column(h, overflow="fold")
        for row in rows:
            st.add_row(*map(Text, row), style=None if row[6] == "✓" else "red")
        fit_piped(console, st)
        console.print(st)
    for note in cmp.notes:
        console.print(f"note: {note}", markup=False)
    for line in cmp.host:
        console.print(f"host: {line}", markup=False, style="yellow")
    for problem in cmp.problems[:40]:
        console.print(f"difference: {problem}", markup=False, style="red")
    if len(cmp.problems) > 40:
        console.print(f"… {len(cmp.problems) - 40} more differences (see --json)")
    console.print(Text(cmp.verdict, style="bold green" if cmp.agree else "bold red"))
    r = cmp.reasons
    if r is not None:
        for note in r.notes[:5]:
            console.print(f"reason note: {note}", markup=False, style="dim")
        if len(r.notes) > 5:
            console.print(f"… {len(r.notes) - 5} more reason notes (see --json)",
                          style="dim")
        for problem in r.problems[:40]:
            console.print(f"reason difference: {problem}", markup=False, style="red")
        if len(r.problems) > 40:
            console.print(f"… {len(r.problems) - 40} more reason differences (see --json)")
        console.print(Text(r.verdict, style="bold green" if r.agree else
                           "bold yellow" if r.unavailable else "bold red"))
    print_layers(cmp, console)


def print_layers(cmp: Comparison, console: Console, *, limit: int = 10) -> None:
    """The verdict's two layers (`nagle_sim.compare.layers`): decisions, then timing, each
    with its first differences; nothing when the comparison has none (a saved pair of
    traces)."""
    layers = cmp.layers
    if layers is None:
        return
    console.print(Text(layers.summary, style="bold green" if layers.decisions.agree
                       else "bold red"))
    for name, layer in (("decisions", layers.decisions), ("timing", layers.timing)):
        for line in layer.differences[:limit]:
            console.print(f"{name}: {line}", markup=False)
        if len(layer.differences) > limit:
            console.print(f"… {len(layer.differences) - limit} more {name} differences "
                          "(see --json)")
        for line in layer.host_facts:
            console.print(f"{name}, perhaps because {line}", markup=False, style="yellow")
        for line in layer.unjudged:
            console.print(f"{name}, not judged: {line}", markup=False, style="dim")


def verdict_table(title: str, headers: list[str], rows: list[list[str]], *,
                  verdict: int) -> Table:
    """A rich table of verdict rows (column ``verdict``: agree plain, n/a dim, anything
    else red). Cells and title are plain `Text`: user text (an address, a problem naming
    a scenario) is never read as rich markup."""
    table = Table(title=Text(title))
    for h in headers:
        table.add_column(h, overflow="fold")
    for row in rows:
        table.add_row(*map(Text, row),
                      style={"agree": None, "n/a": "dim"}.get(row[verdict], "red"))
    return table


def print_lesson_problems(results: Iterable[LessonResult], console: Console,
                          limit: int = 8) -> None:
    """Each disagreeing lesson's name, how many differences and its two layers' verdict,
    then its first ``limit`` decision differences (its first differences when decisions
    agree or were not judged); then how many lessons agree on decisions and on timing."""
    results = list(results)
    for res in results:
        if res.cmp is not None and not res.cmp.agree:
            layers = res.cmp.layers
            console.print(Text(res.slug, style="bold") + Text(
                f": {len(res.cmp.problems)} difference(s)"
                + (f"; {layers.summary}" if layers is not None else "")))
            shown = (layers.decisions.differences[:limit] if layers is not None
                     and not layers.decisions.agree else res.cmp.problems[:limit])
            for p in shown:
                console.print(f"  - {p}", markup=False)
    for res in results:
        r = res.cmp.reasons if res.cmp is not None else None
        if r is not None and r.problems:
            console.print(Text(res.slug, style="bold") + Text(
                f": {len(r.problems)} reason difference(s)"))
            for p in r.problems[:limit]:
                console.print(f"  - {p}", markup=False)
    judged = [res.cmp.layers for res in results
              if res.cmp is not None and res.cmp.layers is not None]
    if judged:
        console.print(f"decisions agree on {sum(la.decisions.agree for la in judged)} of "
                      f"{len(judged)} lessons run; timing on "
                      f"{sum(la.timing.agree for la in judged)}", markup=False)
