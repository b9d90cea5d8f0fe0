"""Views of an explanation: the terminal (rich), --json, --markdown, pictures, --scenario.

Owns: the `--json` document (schema in docs/explain.md), the Markdown report, the terminal
report, `LadderClock` (capture-point times onto the ladder's clock, for the app and the
pictures' stall bands), and writing pictures through `nagle_sim.export` and the rebuilt
scenario. Text
from the capture (file names, addresses) is never interpreted as rich markup: every
`Text` is built from plain strings. Must not import textual or realnet.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import Explanation
from .advice import DEFAULT_RUNTIME, RUNTIMES, Advice, advise
from .causes import CAUSES, Stall
from .connections import Connection

if TYPE_CHECKING:
    from ..trace import Trace

SCHEMA = "nagle-sim-explain/1"


def _ms(us: int) -> float:
    return round(us / 1000, 3)


def connection_json(c: Connection) -> dict[str, Any]:
    sent_c, sent_s = c.bytes_sent()
    gap, _ = c.longest_gap()
    return {"number": c.number, "client": _ep(c.client), "server": _ep(c.server),
            "client_known": c.client_known, "packets": c.count,
            "duration_ms": _ms(c.duration), "bytes_client_to_server": sent_c,
            "bytes_server_to_client": sent_s, "longest_gap_ms": _ms(gap),
            "longest_stall_ms": _ms(c.longest_stall[0]) if c.longest_stall else None,
            "longest_stall_cause": (c.longest_stall[2] or None) if c.longest_stall else None,
            "analysed": c.stalls is not None,
            "stalls": c.stalls[0] if c.stalls is not None else None,
            "stalls_ms": _ms(c.stalls[1]) if c.stalls is not None else None,
            "suspect_gaps": c.suspect[0]}


def stall_cell(c: Connection) -> str:
    """The listing's "longest stall" cell: its length and cause (``app`` left out)."""
    if c.longest_stall is None:
        return f"gap {c.longest_gap()[0] / 1000:.1f} ms"
    us, _at, cause = c.longest_stall
    return f"{us / 1000:.1f} ms {cause}" if cause else "none"


def stalls_cell(c: Connection) -> str:
    """The listing's "stalls" cell: how many, when analysed (else "?")."""
    return "?" if c.stalls is None else str(c.stalls[0])


def _longest_cell(c: Connection) -> str:
    """The terminal's last cell: the longest stall's length and count, then its cause."""
    cell = stall_cell(c)
    n = None if c.stalls is None else c.stalls[0]
    count = "" if n is None else f"{n} stall{'' if n == 1 else 's'}"
    if " ms " in cell:
        ms, cause = cell.split(" ms ", 1)
        return f"{ms} ms\n{cause}\n{count}".rstrip()
    if cell == "none" and n:
        # every stall was an idle application's: say so rather than "none, 5 stalls"
        return f"{count}, all app"
    return f"{cell}\n{count}".rstrip() if n else cell


def listed(ex: Explanation) -> list[Connection]:
    """The summary table's rows: the ``ex.top`` connections with the longest stalls that
    are not an idle application's (analysed), then the most suspect by the triage, then
    the longest quiet gap; the explained one is always among them."""
    rows = sorted(ex.connections, key=lambda c: (
        -(c.longest_stall or (0, 0, ""))[0], -c.suspect[1], -c.gap[0], c.number))[:ex.top]
    if ex.chosen not in rows:
        rows.append(ex.chosen)
    return rows


def triage_line(ex: Explanation, shown: int) -> str:
    """What the table leaves out, and how much was analysed in full."""
    conns = ex.connections
    analysed = sum(1 for c in conns if c.stalls is not None and c.gap[0] >= 10_000)
    gaps = sum(1 for c in conns if c.gap[0] >= 10_000)
    suspect = sum(1 for c in conns if c.suspect[0])
    rest = len(conns) - shown
    more = (f"{rest:,} more not listed (--top N lists more, --json all); " if rest > 0
            else "")
    return (f"{more}{gaps:,} of {len(conns):,} connection(s) have a quiet gap of 10 ms or "
            f"more, {suspect:,} of them one an idle application does not explain; "
            f"{analysed:,} analysed in full")


def _ep(ep: tuple[bytes, int]) -> str:
    from .connections import format_endpoint
    return format_endpoint(ep)


def fixes_of(s: Stall, runtime: str) -> list[Advice]:
    """The advice for ``s`` in ``runtime``, or in every runtime for "all"."""
    keys = list(RUNTIMES) if runtime == "all" else [runtime]
    return [advise(s, k) for k in keys]


def stall_json(s: Stall, runtime: str = DEFAULT_RUNTIME) -> dict[str, Any]:
    fixes = fixes_of(s, runtime)
    return {"fix": fixes[0].to_json() if runtime != "all" else None,
            "fixes": [f.to_json() for f in fixes] if runtime == "all" else None,
            "start_ms": _ms(s.start), "duration_ms": _ms(s.duration), "causes": s.causes,
            "cause": s.cause, "text": s.text,
            "waiting": s.waiting.value if s.waiting else None,
            "evidence": [e.to_json() for e in s.evidence],
            "confidence": s.confidence, "reproduced": s.reproduced, "model_ms": s.model_ms,
            "alternatives": [a.to_json() for a in s.alternatives],
            "decided_by": s.decided_by}


def to_json(ex: Explanation) -> dict[str, Any]:
    meta = ex.captured.trace.meta
    conn = connection_json(ex.chosen)
    conn.update({"rtt_ms": meta["rtt_ms"], "mss": meta["mss"],
                 "start_epoch_us": meta["start_epoch_us"],
                 "window_scale": meta["window_scale"]})
    rb = ex.rebuilt
    out: dict[str, Any] = {
        "format": SCHEMA, "file": ex.capture.path, "file_format": ex.capture.fmt,
        "link_types": ex.capture.link_types, "frames": ex.capture.frames,
        "frames_not_tcp": ex.capture.skipped,
        "frames_cut_in_headers": ex.capture.truncated_headers,
        "file_truncated": ex.capture.truncated or None, "connection": conn,
        "captured_at": ex.captured.captured_on,
        "captured_at_how": meta["captured_on_how"],
        "connections": [connection_json(c) for c in ex.connections],
        "stalls": [stall_json(s, ex.runtime) for s in ex.stalls],
        "runtime": ex.runtime,
        "missing": [{"side": h.side.value, "bytes": h.end - h.start, "from_seq": h.start,
                     "from_ms": _ms(h.t_from), "to_ms": _ms(h.t_to)}
                    for h in ex.captured.holes],
        "whatifs": [w.to_json() for w in rb.whatifs] if rb else [],
        "model": None, "notes": ex.notes,
    }
    if rb is not None:
        out["model"] = {
            "profiles": {s.value: {"profile": p, "why": why} for s, (p, why) in
                         rb.profiles.items()},
            "outcome": rb.model.outcome if rb.model else None,
            "baseline": rb.baseline.to_json() if rb.baseline else None,
            "captured_per_request_ms": rb.captured_per_request_ms,
            "scenario": rb.toml,
        }
    return out


def dumps(ex: Explanation) -> str:
    return json.dumps(to_json(ex), ensure_ascii=False)


def _where(ex: Explanation) -> str:
    c = ex.captured
    meta = c.trace.meta
    rtt = meta["rtt_ms"]
    if c.captured_on == "both":
        return f"on the same host as both ends (loopback), round trip {rtt} ms"
    if c.captured_on in ("client", "server"):
        return (f"on the {c.captured_on} (from {meta['captured_on_how']}), round trip "
                f"{rtt} ms")
    if c.captured_on == "between" and not meta["rtt_ms"]:
        return "near both hosts (two addresses, no measurable delay between them)"
    if c.captured_on == "between":
        return (f"between the hosts: {meta['client_distance_ms']} ms from the client, "
                f"{meta['server_distance_ms']} ms from the server")
    return "at an unknown point (no handshake and no data to judge by)"


def _model_text(s: Stall) -> str:
    if s.model_ms is None:
        return "model: no such stall" if s.reproduced is False else ""
    mark = "reproduced" if s.reproduced else "differs"
    return f"model {s.model_ms:.1f} ms, capture {s.duration / 1000:.1f} ms ({mark})"


def markdown(ex: Explanation) -> str:
    from ..export.tables import render_markdown as markdown_table
    c = ex.chosen
    lines = [f"# Explain: {ex.capture.path}", "",
             f"Connection {c.number}: {c.label()}, {c.count} packets, "
             f"{c.duration / 1000:.1f} ms; captured {_where(ex)}.", ""]
    if len(ex.connections) > 1:
        rows = listed(ex)
        lines += ["## Connections", "", markdown_table(
            ["#", "client → server", "packets", "ms", "bytes c→s", "bytes s→c", "stalls",
             "longest stall (not app)"],
            [[str(x.number), x.label(), str(x.count), f"{x.duration / 1000:.1f}",
              *map(str, x.bytes_sent()), stalls_cell(x), stall_cell(x)]
             for x in rows]), "", triage_line(ex, len(rows)) + "."]
    lines += ["## Stalls", ""]
    if not ex.stalls:
        lines.append("No stall of 10 ms or more.")
    else:
        lines.append(markdown_table(
            ["at ms", "ms", "cause", "confidence", "model", "why"],
            [[f"{s.start / 1000:.3f}", f"{s.duration / 1000:.1f}", s.cause,
              f"{s.confidence:.1f}", _model_text(s), s.text + alternatives_text(s)]
             for s in ex.stalls]))
        lines += ["", "## Evidence", ""] + _markdown_evidence(ex.stalls)
    fixes = fix_groups(ex.stalls)
    if fixes:
        lines += ["## Fixes", ""]
        for members in fixes:
            for f in fixes_of(members[0], ex.runtime):
                lines.append(f"- {len(members)} × `{members[0].cause}` "
                             f"({RUNTIMES[f.runtime].name}): {_md_text(f.summary)}")
                lines += [f"  {i}. {_md_text(s.text)} — {_md_text(s.why)}"
                          for i, s in enumerate(f.steps, 1)]
        lines.append("")
    if ex.rebuilt and ex.rebuilt.whatifs:
        lines += ["## What if", ""] + [f"- {w.text}" for w in ex.rebuilt.whatifs] + [""]
    if ex.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in ex.notes] + [""]
    lines += ["## Causes", ""] + [f"- `{k}`: {v}" for k, v in CAUSES.items()]
    return "\n".join(lines) + "\n"


MARKDOWN_EVIDENCE = 50
"""Stalls whose evidence rows the Markdown report lists (--json has every one)."""


def _md_text(text: str) -> str:
    """Plain text for a Markdown list item: characters Markdown would act on escaped."""
    return "".join("\\" + ch if ch in "\\`*_[]<>|#" else ch for ch in text)


def _markdown_evidence(stalls: list[Stall]) -> list[str]:
    """Each stall's evidence rows, in frame order, under a line naming the stall."""
    out: list[str] = []
    for s in stalls[:MARKDOWN_EVIDENCE]:
        out.append(f"- at {s.start / 1000:.3f} ms, {s.duration / 1000:.1f} ms, `{s.cause}`:")
        out += [f"  - {_md_text(e.text())}" for e in s.evidence]
    if len(stalls) > MARKDOWN_EVIDENCE:
        out.append(f"- … {len(stalls) - MARKDOWN_EVIDENCE} more stalls: their evidence is "
                   "in --json")
    return out + [""]


def _skipped(ex: Explanation) -> str:
    c = ex.capture
    parts = []
    if c.skipped:
        parts.append(f"{c.skipped} not TCP")
    if c.truncated_headers:
        parts.append(f"{c.truncated_headers} cut inside their headers")
    return f" ({', '.join(parts)})" if parts else ""


def _per_request(ms: float | None) -> str:
    """"12.3 ms per request", or what to say when no request/response pair was seen (a
    capture of one to three frames): never "None ms"."""
    return "n/a (no request and reply seen)" if ms is None else f"{ms} ms per request"


def print_report(ex: Explanation, console: Any, *, all_stalls: bool = False) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from .connections import format_endpoint

    c = ex.chosen
    hang(console, "", Text(f"{ex.capture.path}: {ex.capture.fmt}, "
                           f"{', '.join(ex.capture.link_types)}, {ex.capture.frames} frames"
                           f"{_skipped(ex)}, {len(ex.connections)} TCP connection(s)"), 4)
    if len(ex.connections) > 1:
        # fits 80 columns: endpoints on two lines, long cells fold (never cut: users need
        # the port for --port)
        table = Table(title="Connections (explaining the one marked ▶; --conn N for another)",
                      box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
        table.add_column("#", no_wrap=True)
        table.add_column("client → server", overflow="fold", min_width=21)
        for h in ("packets", "ms", "bytes →/←"):
            table.add_column(h, overflow="fold", justify="right")
        table.add_column("longest stall\n(not app)", overflow="fold", min_width=17)
        rows = listed(ex)
        for x in rows:
            sent = x.bytes_sent()
            table.add_row(("▶" if x is c else " ") + str(x.number),
                          Text(f"{format_endpoint(x.client)}\n→ {format_endpoint(x.server)}"),
                          str(x.count), f"{x.duration / 1000:.1f}",
                          f"{sent[0]}/{sent[1]}", Text(_longest_cell(x)))
        console.print(table)
        hang(console, "", Text(triage_line(ex, len(rows)), style="dim"), 4)
    head = Text("Connection ", style="bold")
    head.append(f"{c.number}: {c.label()}, {c.count} packets, "
                f"{c.duration / 1000:.1f} ms, captured {_where(ex)}")
    hang(console, "", head, 4)
    if ex.rebuilt:
        for side, (profile, why) in ex.rebuilt.profiles.items():
            hang(console, "  ", Text(f"{side.value}: {profile} ({why})", style="dim"), 4)
    if not ex.stalls:
        console.print(Text("No stall of 10 ms or more.", style="green"))
    else:
        if all_stalls:
            _stall_table(ex.stalls, console)
            print_fixes(ex.stalls, console, ex.runtime)
        else:
            _stall_groups(ex.stalls, console, ex.runtime)
        first = evidence_stall(ex.stalls)
        hang(console, "", Text(f"Evidence for the stall at {first.start / 1000:.3f} ms "
                               f"({first.cause}):", style="bold"), 4)
        for e in first.evidence:
            hang(console, "  ", Text(e.text()), 4)
    if ex.rebuilt and ex.rebuilt.whatifs:
        console.print(Text("What if (the rebuilt scenario re-run on the model)",
                           style="bold"))
        if ex.rebuilt.baseline:
            b = ex.rebuilt.baseline
            hang(console, "  ", Text(
                f"as captured: {_per_request(ex.rebuilt.captured_per_request_ms)}; the "
                f"model of it: {_per_request(b.per_request_ms)}, {b.stalls} stall(s)"), 4)
        for w in ex.rebuilt.whatifs:
            # the capture's and the model's own times are on the line above
            hang(console, "  ", Text(f"{w.name}: {_per_request(w.per_request_ms)}, "
                                     f"{w.stalls} stall(s)"), 4)
    for note in ex.notes:
        hang(console, "note: ", Text(note, style="dim"), 6)


def hang(console: Any, lead: str, body: Any, indent: int | None = None) -> None:
    """Print ``lead`` then ``body`` (str, or a rich Text whose style and spans are kept),
    the lines it wraps into indented by ``indent`` columns (default: the lead's width),
    so a long item reads as one block at 80 columns instead of running back to the
    margin. Wraps at word boundaries; a word longer than a line is folded."""
    import textwrap

    from rich.text import Text
    text = body if isinstance(body, Text) else Text(body)
    width = max(20, console.width)
    pad = len(lead) if indent is None else indent
    plain = text.plain
    lines = textwrap.wrap(plain, width=width, initial_indent=lead,
                          subsequent_indent=" " * pad, break_on_hyphens=False,
                          drop_whitespace=True) or [lead]
    # map each wrapped line back onto the text (same characters, in order, the
    # whitespace at the breaks dropped) to keep its styles
    pos = 0
    for i, line in enumerate(lines):
        head = lead if i == 0 else " " * pad
        chunk = line[len(head):]
        at = plain.find(chunk, pos) if chunk else pos
        if at < 0:                  # cannot happen: textwrap only drops whitespace
            at = pos
        out = Text(head, style=text.style, end="\n")
        out.append_text(text[at:at + len(chunk)])
        out.no_wrap = True
        console.print(out, overflow="ignore", crop=False)
        pos = at + len(chunk)


def evidence_stall(stalls: list[Stall]) -> Stall:
    """The stall whose evidence the terminal shows: the first that a socket setting or the
    network caused (not an idle application, not only the round trip), else the first
    that is more than a round trip, else the first."""
    return next((s for s in stalls if s.causes[0] not in ("app", "link")),
                next((s for s in stalls if s.causes != ["link"]), stalls[0]))


def group_stalls(stalls: list[Stall]) -> list[list[Stall]]:
    """Stalls with the same cause and waiting side, in order of their first member."""
    groups: dict[tuple[str, str], list[Stall]] = {}
    for st in stalls:
        groups.setdefault((st.cause, st.waiting.value if st.waiting else ""), []).append(st)
    return list(groups.values())


def group_line(members: list[Stall]) -> str:
    """"11 × 42.7–44.0 ms, first at …: nagle+delayed_ack — why; model: 11/11 reproduced"."""
    durations = [m.duration / 1000 for m in members]
    span = (f"{durations[0]:.1f} ms" if max(durations) - min(durations) < 0.05
            else f"{min(durations):.1f}–{max(durations):.1f} ms")
    first = members[0]
    at = (f"first at {first.start / 1000:.3f} ms" if len(members) > 1
          else f"at {first.start / 1000:.3f} ms")
    compared = [m for m in members if m.reproduced is not None]
    model = (f"; model: {sum(1 for m in compared if m.reproduced)}/{len(compared)} "
             "reproduced" if compared else "")
    return (f"{len(members)} × {span}, {at}: {first.cause} ({confidence_text(members)}) — "
            f"{first.text}{model}{alternatives_text(first)}")


def confidence_text(members: list[Stall]) -> str:
    """"confidence 0.9"; "the kernel's decision" when a watch trace decided every one
    (`nagle_sim.explain.watched`), or how many it decided."""
    conf = min(m.confidence for m in members)
    by_kernel = sum(1 for m in members if m.decided_by == "kernel")
    if by_kernel == len(members):
        return f"the kernel's decision, confidence {conf:.1f}"
    if by_kernel:
        return f"confidence {conf:.1f}; {by_kernel} of {len(members)} decided by the kernel"
    return f"confidence {conf:.1f}"


def alternatives_text(s: Stall) -> str:
    """"; or app (confidence 0.3): …" for each other reading the wire leaves open."""
    return "".join(f"; or {a.cause} (confidence {a.confidence:.1f}): {a.text}"
                   for a in s.alternatives)


def _stall_groups(stalls: list[Stall], console: Any, runtime: str = DEFAULT_RUNTIME
                  ) -> None:
    from rich.text import Text
    console.print(Text(f"{len(stalls)} stall(s) of 10 ms or more, "
                       f"{sum(s.duration for s in stalls) / 1000:.1f} ms in all "
                       "(--all lists each):", style="bold"))
    for members in group_stalls(stalls):
        hang(console, "  • ", group_line(members))
    print_fixes(stalls, console, runtime)


def fix_groups(stalls: list[Stall]) -> list[list[Stall]]:
    """Stalls that take the same fix: the same causes and the same writer."""
    groups: dict[tuple[str, str], list[Stall]] = {}
    for st in stalls:
        if st.causes == ["link"]:
            continue
        groups.setdefault((st.cause, st.key[0] if st.key else ""), []).append(st)
    return list(groups.values())


def print_fixes(stalls: list[Stall], console: Any, runtime: str) -> None:
    """The fix for each kind of stall, in the user's runtime (every runtime for "all"):
    the stalls a change can remove first, each with its ordered steps (the why dimmed
    under each); those no socket setting removes (an idle application, losses, the
    round trip) after them, one line each."""
    from rich.text import Text
    groups = fix_groups(stalls)
    if not groups:
        return
    where = ("every runtime" if runtime == "all"
             else f"{RUNTIMES[runtime].name}; --runtime NAME for another")
    hang(console, "", Text(f"Fix — {where}:", style="bold"), 4)
    actionable = [(g, fixes_of(g[0], runtime)) for g in groups]
    actionable.sort(key=lambda gf: not _can_fix(gf[1][0]))
    for members, fixes in actionable:
        first, head = members[0], fixes[0]
        label = f"{len(members)} × {first.cause}"
        if not _can_fix(head):
            hang(console, "  • ", Text(f"{label}: {head.summary}"))
            continue
        line = Text(f"{label}: ", style="bold")
        line.append(head.summary)
        hang(console, "  • ", line)
        if runtime == "all":
            for f in fixes:
                hang(console, "      ", Text(f"{f.runtime}: " + ("; then ".join(
                    s.text for s in f.steps[:2]) if f.steps else "—")), 8)
            continue
        for i, step in enumerate(head.steps, 1):
            hang(console, f"    {i}. ", Text(step.text))
            hang(console, "       why: ", Text(step.why, style="dim"), 12)


def _can_fix(advice: Advice) -> bool:
    """A change to one endpoint's code or settings removes the stall."""
    return advice.side is not None and any(s.kind != "none" for s in advice.steps)


def _stall_table(stalls: list[Stall], console: Any) -> None:
    """--all: one line per stall (lines fold at any width; a table would cut causes)."""
    from rich.text import Text
    console.print(Text(f"{len(stalls)} stall(s) of 10 ms or more:", style="bold"))
    for s in stalls:
        line = Text(f"at {s.start / 1000:.3f} ms, {s.duration / 1000:.1f} ms: ")
        line.append(s.cause, style="bold")
        model = _model_text(s)
        line.append(f" ({confidence_text([s])}) — {s.text}"
                    + (f"; {model}" if model else "") + alternatives_text(s))
        hang(console, "  ", line, 4)


PICTURE_SEGMENTS = 60
"""Segments drawn around the stall a picture shows (a ladder row is ~40 px: a picture of
this many stays far inside the export's 20 Mpx bound)."""


def picture_window(ex: Explanation) -> tuple[tuple[int, int] | None, str]:
    """((from, until) µs of trace time, the one line saying so) — `PICTURE_SEGMENTS`
    segments around the first stall that is not the link's, or the first ones when there
    is none; None when the whole capture is that short."""
    segs = ex.captured.trace.segments
    if len(segs) <= PICTURE_SEGMENTS:
        return None, ""
    first = next((s for s in ex.stalls if s.causes != ["link"]), None)
    seen = ex.captured.seen
    if first is None:
        lo, what = 0, "no stall but the link's"
    else:
        # the segment ending the stall, a third of the window before it
        end_i = next((i for i, t in enumerate(seen) if t >= first.end), len(segs) - 1)
        lo = max(0, min(end_i - PICTURE_SEGMENTS // 3, len(segs) - PICTURE_SEGMENTS))
        what = f"around the stall at {first.start / 1000:.3f} ms ({first.cause})"
    hi = min(len(segs), lo + PICTURE_SEGMENTS) - 1
    t_from, t_until = segs[lo].t, segs[hi].t
    return (t_from, t_until), (f"the pictures show {t_from / 1000:.1f}–{t_until / 1000:.1f} "
                               f"ms ({hi - lo + 1} of {len(segs)} segments, {what}; "
                               "--until-ms MS draws from the start)")


def _cut(trace: Trace, t_from: int, t_until: int) -> Trace:
    """The part of ``trace`` between two times (segments, ops and events)."""
    import dataclasses
    return dataclasses.replace(
        trace, segments=[s for s in trace.segments if t_from <= s.t <= t_until],
        ops=[o for o in trace.ops if o.start <= t_until and (o.end or o.start) >= t_from],
        events=[e for e in trace.events if t_from <= e.t <= t_until])


class LadderClock:
    """Capture-point times (what explain's stalls and evidence say) → the ladder's clock
    (the captured trace's send times: capture time minus the sender's distance), so a
    stall and the rows it explains are compared on one clock."""

    SCAN = 10_000
    """Segments looked through for the one a stall released (bounded time per stall)."""

    def __init__(self, captured: Any) -> None:
        self.seen: list[int] = list(captured.seen)
        self.segments = captured.trace.segments

    def index(self, t: int) -> int | None:
        """The segment captured at ``t`` (the first of several), else the nearest one."""
        if not self.seen:
            return None
        i = bisect.bisect_left(self.seen, t)
        if i < len(self.seen) and self.seen[i] == t:
            return i
        near = [j for j in (i - 1, i) if 0 <= j < len(self.seen)]
        return min(near, key=lambda j: abs(self.seen[j] - t))

    def at(self, t: int) -> int:
        i = self.index(t)
        if i is None:
            return int(t)
        return int(self.segments[i].t + (t - self.seen[i]))

    def released(self, stall: Any) -> int | None:
        """The segment that ended ``stall``: the data it held (its `key`: side, first
        byte), else the segment captured at its end."""
        end = self.index(stall.end)
        if end is None:
            return None
        if stall.key is not None:
            side, byte = stall.key
            for i in range(end, min(len(self.segments), end + self.SCAN)):
                seg = self.segments[i]
                if seg.src.value == side and seg.seq == byte and seg.length > 0:
                    return i
        return end

    def evidence(self, e: Any) -> str:
        """An evidence line with its time on the ladder's clock."""
        t = (self.segments[e.index].t if 0 <= e.index < len(self.segments)
             else self.at(e.t))
        where = f"frame {e.frame}, " if e.frame else ""
        return f"{where}{t / 1000:.3f} ms, {e.side.value} {e.label}: {e.note}"


CAUSE_WORDS = {
    "nagle": "Nagle", "delayed_ack": "delayed ACK", "cork": "TCP_CORK",
    "msg_more": "MSG_MORE", "tlp": "tail loss probe", "rto": "RTO",
    "zero_window": "zero window", "receiver": "receiver's window",
    "cwnd": "congestion window", "pacing": "pacing", "link": "link", "app": "app idle",
}
"""Each cause as a picture's band says it ("≈ 41.6 ms: Nagle + delayed ACK")."""


def cause_words(stall: Stall) -> str:
    text = " + ".join(CAUSE_WORDS.get(c, c) for c in stall.causes)
    if stall.causes == ["cork"]:
        text = "TCP_CORK or MSG_MORE"
    return text


def gap_labeller(ex: Explanation) -> Callable[[int, int], str | None]:
    """For the ladder's compressed gaps (trace time, from, until): the cause of the stall
    that covers most of the gap, when it covers at least half of it."""
    clock = LadderClock(ex.captured)
    spans = sorted((clock.at(s.start), clock.at(s.end), s.duration, cause_words(s))
                   for s in ex.stalls)
    starts = [a for a, _, _, _ in spans]

    def label(t0: int, t1: int) -> str | None:
        best, best_cover = None, (t1 - t0) / 2
        # a stall covering part of [t0, t1] starts before t1; stalls do not overlap much
        hi = bisect.bisect_right(starts, t1)
        for a, b, duration, words in spans[max(0, hi - 4):hi]:
            cover = min(b, t1) - max(a, t0)
            if cover >= best_cover:
                # other segments drawn (the model's overlay, arrivals) can cut a stall
                # into several gaps: each piece names the whole
                best = words if t1 - t0 >= 0.9 * (b - a) else (
                    f"part of the {duration / 1000:.1f} ms stall ({words})")
                best_cover = cover
        return best
    return label


def write_pictures(ex: Explanation, svg: str | None, png: str | None,
                   until_ms: float | None = None) -> tuple[list[str], str]:
    """The captured ladder with the model's re-run as overlay (nagle_sim.export), cut to
    ``until_ms`` (--until-ms) or else `picture_window`; returns the written paths and the
    window's line ("" when given or whole).
    Raises `nagle_sim.export.ExportError` beyond the export's bounds."""
    import dataclasses

    from ..export import export_cli
    from ..trace import Source
    # the export's legend names a trace by its source: the capture is what the real
    # kernels did ("real"), the overlay is the model's re-run ("model trace")
    overlay = (dataclasses.replace(ex.rebuilt.model, source=Source.MODEL)
               if ex.rebuilt and ex.rebuilt.model else None)
    main = dataclasses.replace(ex.captured.trace, source=Source.REALNET)
    line = ""
    if until_ms is None:
        window, line = picture_window(ex)
        if window is not None:
            main = _cut(main, *window)
            overlay = _cut(overlay, *window) if overlay is not None else None
    paths = export_cli(main, svg=svg, png=png, overlay=overlay, until_ms=until_ms,
                       gap_label=gap_labeller(ex))
    return [str(p) for p in paths], line
