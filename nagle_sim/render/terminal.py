"""The terminal ladder and run summary, drawn with rich.

Owns: how `nagle-sim run` prints a trace (client | wire | server columns, one row per
segment / app call / decision) and its summary. Must not import simpy, asyncio or textual.
"""

from __future__ import annotations

import statistics

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model.events import Side, short
from ..trace import Outcome, Trace
from ..trace.rows import Row, RowKind, build_rows
from ..trace.summary import Stall, Summary, WireNamer, summarize
from ..trace.units import ms_text

_STYLE = {
    RowKind.OP: "bold cyan", RowKind.HOLD: "bold yellow", RowKind.TIMER: "magenta",
    RowKind.ACK: "green", RowKind.MODE: "blue", RowKind.OPTION: "bold cyan",
    RowKind.STATE: "dim",
}


def _wire(row: Row, width: int) -> Text:
    seg = row.segment
    assert seg is not None
    label = f" {seg.label()} "
    if seg.ack and seg.is_data:
        label = f" {seg.label()} ack {seg.ack} "
    dashes = max(2, width - len(label) - 1)
    left, right = dashes // 2, dashes - dashes // 2
    if seg.src is Side.CLIENT:
        body = "─" * left + label + "─" * right + "▶"
    else:
        body = "◀" + "─" * left + label + "─" * right
    style = "bold" if seg.is_data else ""
    if "S" in seg.flags or "F" in seg.flags or "R" in seg.flags:
        style = "dim"
    return Text(body, style=style)


def ladder_table(rows: list[Row], *, width: int = 120) -> Table:
    """The ladder as a table sized to ``width`` columns: the time column never shrinks,
    the wire gets about 40 % of the rest and the two sides share the remainder."""
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False,
                  header_style="bold")
    # rich counts the cell's one-space right padding inside `width`; 6 is the header
    t_width = max([6, *(len(ms_text(r.t)) for r in rows)]) + 1
    avail = max(60, width - t_width - 3)            # the other columns' padding
    wire_width = max(24, avail * 2 // 5) - 2
    note_width = (avail - wire_width - 2) // 2
    table.add_column("t (ms)", justify="right", no_wrap=True, width=t_width)
    table.add_column("client", width=note_width, overflow="fold")
    table.add_column("wire", width=wire_width + 2, no_wrap=True)
    table.add_column("server", width=note_width, overflow="fold")
    previous = None
    for row in rows:
        t = ms_text(row.t) if row.t != previous else ""
        previous = row.t
        if row.kind is RowKind.SEGMENT:
            seg = row.segment
            assert seg is not None
            why = Text(_short_why(row), style="dim")
            client = why if seg.src is Side.CLIENT else Text("")
            server = why if seg.src is Side.SERVER else Text("")
            table.add_row(t, client, _wire(row, wire_width), server)
            continue
        note = Text(row.label, style=_STYLE.get(row.kind, ""))
        if row.kind is RowKind.OP and row.op and row.op.end is not None and row.op.op == "read":
            note.append(f" ({ms_text(row.op.end - row.op.start)} ms)", style="dim")
        cells = (note, Text("")) if row.side is Side.CLIENT else (Text(""), note)
        table.add_row(t, cells[0], Text("│".center(wire_width), style="dim"), cells[1])
    return table


def _short_why(row: Row) -> str:
    return "" if row.code in ("APP_WRITE", "HANDSHAKE") else short(row.code)


def summary_renderable(trace: Trace, summary: Summary | None = None) -> RenderableType:
    s = summary or summarize(trace)
    parts: list[RenderableType] = []
    lat = [it.latency / 1000 for it in s.iterations]
    if lat:
        text = Text("Per-iteration latency (client): ", style="bold")
        if len(lat) <= 12:
            text.append(", ".join(f"{v:.3f}" for v in lat) + " ms")
        else:
            text.append(", ".join(f"{v:.3f}" for v in lat[:6]) + f" … {lat[-1]:.3f} ms")
            text.append(f"\n  {len(lat)} iterations: min {min(lat):.3f}, median "
                        f"{statistics.median(lat):.3f}, max {max(lat):.3f}, total "
                        f"{sum(lat):.1f} ms")
        parts.append(text)
    seg = Text("Segments: ", style="bold")
    seg.append(", ".join(
        f"{side.value} {s.segments[side]} ({s.data_segments[side]} with data, "
        f"{s.bytes_sent[side]} B)" for side in Side))
    parts.append(seg)
    parts.append(Text(f"Duration: {ms_text(s.duration)} ms", style="bold"))
    if s.stalls:
        parts.append(Text(f"Stalls ≥ 10 ms: {len(s.stalls)}, "
                          f"{ms_text(sum(st.duration for st in s.stalls), 1)} ms in all",
                          style="bold yellow"))
        groups: dict[tuple[str, str], list[Stall]] = {}
        for stall in s.stalls:
            groups.setdefault((stall.held_code, stall.ended_code), []).append(stall)
        for members in groups.values():
            durations = [m.duration / 1000 for m in members]
            span = (f"{durations[0]:.1f} ms" if max(durations) - min(durations) < 0.05
                    else f"{min(durations):.1f}–{max(durations):.1f} ms")
            first = members[0]
            parts.append(Text(f"  • {len(members)} × {span}: {first.held_by} — until "
                              f"{first.ended_by}" + (f" (first at {ms_text(first.start)} ms)"
                                                     if len(members) > 1 else
                                                     f" (at {ms_text(first.start)} ms)")))
    elif trace.source == "realnet" and not trace.segments:
        # without a capture the wire is unknown: never claim it had no stall (issue 18)
        parts.append(Text("Stalls on the wire: unknown (no segment was captured: "
                          f"{trace.meta.get('capture', 'no capture')}).", style="bold yellow"))
    else:
        parts.append(Text("No stalls ≥ 10 ms.", style="bold green"))
    if trace.outcome is not Outcome.OK:
        parts.append(Text(trace.message, style="bold red"))
    return Group(*parts)


def print_run(trace: Trace, console: Console, *, limit: int | None = 200,
              detail: str = "normal", wire: WireNamer | None = None) -> None:
    """The ladder and the summary; ``wire`` names a real run's stalls from the wire."""
    rows = build_rows(trace, detail)
    title = Text(f"{trace.title}  [{trace.source}]", style="bold underline")
    console.print(title)
    shown = rows if limit is None else rows[:limit]
    console.print(ladder_table(shown, width=console.width))
    if limit is not None and len(rows) > limit:
        console.print(Text(f"… {len(rows) - limit} more rows (use --all to print them)",
                           style="dim"))
    console.print()
    console.print(summary_renderable(trace, summarize(trace, wire)))
