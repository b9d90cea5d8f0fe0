"""A comparison as tables: segment rows, iterations, stalls, and the Markdown report.

Owns: the rows every view of a comparison shows (terminal, ``--csv``, ``--markdown``) and
`comparison_markdown`. Drawing them in the terminal is `nagle_sim.render.compare`'s.
"""

from __future__ import annotations

from ..export.tables import render_markdown
from ..trace.units import ms_text
from .match import arrow
from .verdict import Comparison


def match_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    headers = ["dir", "class", "model t (ms)", "model", "real t (ms)", "real",
               "error (ms)", "tol (ms)", "ok", "note"]

    def cell(v: int | None) -> str:
        return "" if v is None else ms_text(v)
    rows = [[arrow(m.side), m.klass, cell(m.sim_t), m.label("sim"), cell(m.real_t),
             m.label("real"), cell(m.error), cell(m.tol), "✓" if m.ok else "✗", m.note]
            for m in cmp.matches]
    return headers, rows

def iteration_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    def cell(v: int | None) -> str:
        return "—" if v is None else ms_text(v)
    return (["iteration", "model (ms)", "real (ms)", "difference (ms)", "ok"],
            [[str(it.index), cell(it.sim_us), cell(it.real_us), cell(it.diff),
              "✓" if it.ok else "✗"] for it in cmp.iterations])

def stall_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    rows = []
    for p in cmp.stalls:
        s, r = p.sim, p.real
        rows.append([ms_text(s.start) if s else "—",
                     ms_text(s.duration, 1) if s else "—",
                     s.held_by if s else "",
                     ms_text(r.start) if r else "—",
                     ms_text(r.duration, 1) if r else "—",
                     r.ended_by if r else "", "✓" if p.ok else "✗", p.note])
    return (["model at (ms)", "model (ms)", "model's cause", "real at (ms)", "real (ms)",
             "real ended by", "ok", "note"], rows)

def comparison_markdown(cmp: Comparison) -> str:
    parts = [f"# Model vs kernel: {cmp.title}\n", f"**Verdict:** {cmp.verdict}\n"]
    if cmp.layers is not None:
        parts.append(f"**In two layers:** {cmp.layers.summary}\n")
        for name, layer in (("Decisions", cmp.layers.decisions),
                            ("Timing", cmp.layers.timing)):
            if layer.differences:
                parts.append(f"## {name}: differences\n\n"
                             + "".join(f"- {d}\n" for d in layer.differences))
    if cmp.problems:
        parts.append("## Differences\n\n" + "".join(f"- {p}\n" for p in cmp.problems))
    if cmp.host:
        parts.append("## Host vs model profile\n\n" + "".join(f"- {h}\n" for h in cmp.host))
    if cmp.notes:
        parts.append("## Notes\n\n" + "".join(f"- {n}\n" for n in cmp.notes))
    parts.append("## Per-iteration latency\n\n" + render_markdown(*iteration_rows(cmp)))
    if cmp.stalls:
        parts.append("## Stalls ≥ 10 ms\n\n" + render_markdown(*stall_rows(cmp)))
    if cmp.wire_unknown is not None:
        parts.append(f"## Segments\n\nunknown: not captured ({cmp.wire_unknown})\n")
    else:
        parts.append("## Segments\n\n" + render_markdown(*match_rows(cmp)))
    return "\n".join(parts)
