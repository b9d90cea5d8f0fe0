"""Tables of a run as Markdown or CSV: per-iteration latency, segments per side, stalls.

Owns: the generic table writers (`render_markdown`, `render_csv`, `write_rows`, which any
caller, e.g. the compare command, can use for its own rows) and the run-summary tables
built from `nagle_sim.trace.summary`. Must not import textual, simpy or asyncio.

Markdown gets three tables (iterations, segments per side, stalls with causes). CSV gets
one tidy table with one row per iteration (what a spreadsheet wants to plot): its latency,
the segments each side sent during it, and the stalls that began in it with their causes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model.events import Side
from ..trace import Outcome, Trace
from ..trace.summary import Summary, summarize, wire_unknown
from ..trace.units import ms

Cell = str | int | float | None

MARKDOWN_SUFFIXES = (".md", ".markdown", ".txt")
CSV_SUFFIXES = (".csv",)


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


def _cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _md_cell(value: Cell) -> str:
    return _cell(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """A GitHub-flavoured Markdown table; numbers are right-aligned."""
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) and bool(rows)
               for i in range(len(headers))]
    out = ["| " + " | ".join(_md_cell(h) for h in headers) + " |",
           "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def render_csv(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """RFC 4180 CSV (``\\r\\n`` line ends, quoting as needed)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(headers)
    writer.writerows([_cell(c) for c in row] for row in rows)
    return buf.getvalue()


def table_format(path: Path, fmt: str | None = None) -> str:
    """"markdown" or "csv" from ``fmt`` or the file suffix; ValueError if neither."""
    if fmt in ("markdown", "md"):
        return "markdown"
    if fmt == "csv":
        return "csv"
    if fmt is not None:
        raise ValueError(f"unknown table format {fmt!r} (use markdown or csv)")
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in CSV_SUFFIXES:
        return "csv"
    raise ValueError(f"{path}: cannot tell the table format from {suffix or 'no suffix'!r} "
                     "(use .md or .csv)")


def write_rows(rows: Sequence[Sequence[Cell]], headers: Sequence[str], path: str | Path,
               fmt: str | None = None, title: str | None = None) -> Path:
    """Write one table to ``path`` as Markdown or CSV (by ``fmt`` or suffix).

    Raises ValueError for an unknown format and OSError when the file cannot be written
    (`nagle_sim.export.write_table` turns both into `ExportError`)."""
    p = Path(path)
    if table_format(p, fmt) == "csv":
        text = render_csv(headers, rows)
        p.write_text(text, "utf-8", newline="")
    else:
        text = (f"## {title}\n\n" if title else "") + render_markdown(headers, rows)
        p.write_text(text, "utf-8")
    return p


# ---------------------------------------------------------------- run summary tables
def summary_tables(trace: Trace, summary: Summary | None = None) -> list[Table]:
    """Iterations, segments per side and stalls of ``trace``, as tables."""
    s = summary or summarize(trace)
    iters = Table("Iterations", ("iteration", "start (ms)", "end (ms)", "latency (ms)"),
                  tuple((it.index, ms(it.start), ms(it.end), ms(it.latency))
                        for it in s.iterations))
    sides = Table("Segments per side",
                  ("side", "segments", "data segments", "pure ACKs", "payload bytes"),
                  tuple((side.value, s.segments.get(side, 0), s.data_segments.get(side, 0),
                         s.pure_acks.get(side, 0), s.bytes_sent.get(side, 0))
                        for side in Side))
    stalls = Table("Stalls", ("start (ms)", "duration (ms)", "held by", "ended by"),
                   tuple((ms(st.start), ms(st.duration), st.held_by, st.ended_by)
                         for st in s.stalls))
    return [iters, sides, stalls]


def summary_markdown(trace: Trace, summary: Summary | None = None) -> str:
    """The run summary as a Markdown document (a heading and three tables)."""
    s = summary or summarize(trace)
    src = "real kernel" if trace.source == "realnet" else "simulated"
    lat = [it.latency for it in s.iterations]
    lines = [f"# {trace.title or 'nagle-sim run'}", "",
             f"{src} run, {len(trace.segments)} segments, {ms(s.duration):.3f} ms"
             + (f", mean iteration latency {ms(round(sum(lat) / len(lat))):.3f} ms"
                if lat else "")
             + (f", outcome: {trace.outcome}" if trace.outcome is not Outcome.OK else ""), ""]
    unknown = wire_unknown(trace)
    for table in summary_tables(trace, s):
        lines += [f"## {table.title}", ""]
        if unknown is not None and table.title in ("Segments per side", "Stalls"):
            # a real run without a capture: the wire is unknown, never "none" (issue 18)
            lines += [f"unknown (no segment was captured: {unknown})", ""]
        elif table.rows:
            lines.append(render_markdown(table.headers, table.rows))
        else:
            lines += ["(none)", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


CSV_HEADERS = ("iteration", "start_ms", "end_ms", "latency_ms", "client_segments",
               "server_segments", "client_bytes", "server_bytes", "stall_ms", "stalls")


def iteration_rows(trace: Trace, summary: Summary | None = None) -> list[tuple[Cell, ...]]:
    """One tidy row per iteration (see `CSV_HEADERS`)."""
    s = summary or summarize(trace)
    out: list[tuple[Cell, ...]] = []
    for it in s.iterations:
        inside = [g for g in trace.segments if it.start <= g.t <= it.end]
        counts = {side: [g for g in inside if g.src is side] for side in Side}
        mine = [st for st in s.stalls if it.start <= st.start < it.end]
        out.append((it.index, ms(it.start), ms(it.end), ms(it.latency),
                    len(counts[Side.CLIENT]), len(counts[Side.SERVER]),
                    sum(g.length for g in counts[Side.CLIENT]),
                    sum(g.length for g in counts[Side.SERVER]),
                    ms(sum(st.duration for st in mine)),
                    "; ".join(st.text() for st in mine)))
    return out


def summary_csv(trace: Trace, summary: Summary | None = None) -> str:
    return render_csv(CSV_HEADERS, iteration_rows(trace, summary))
