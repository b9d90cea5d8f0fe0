"""The ladder (sequence) diagram as a `Scene`, for the SVG and PNG exports.

Owns: ladder layout for slides: time column, client/server lifelines, sloped segment arrows
labelled like the terminal ladder, app-call side notes, hold / delayed-ACK / probe bars,
compressed time gaps (labelled with their real duration), title, legend, and the overlay of
a second (real) trace. Rows and bars come from `nagle_sim.trace.rows` so this picture says
what the terminal and TUI ladders say. Must not import textual, simpy, asyncio or PIL.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from dataclasses import dataclass

from ..model.events import Micros, Side, short
from ..trace import SegmentRecord, Source, Trace
from ..trace.rows import Bar, Row, RowKind, build_bars, build_rows
from ..trace.units import ms_text
from . import scene as sc
from .scene import Item, Line, Rect, Scene, Text, text_width

TITLE_SIZE = 30
SUB_SIZE = 18
LABEL_SIZE = 19
NOTE_SIZE = 18
TIME_SIZE = 16
HEAD_SIZE = 24
NOTE_H = 26            # vertical space of one side note
ROW_H = 40             # minimum vertical step between two distinct instants
BREAK_H = 96           # height of a compressed gap
LANE_W = 12            # one hold/timer bar lane
MARGIN = 28
GAP_MIN = Micros(2_000)
"""In compressed mode, a quiet period at least this long is drawn as a labelled break."""

MAX_ROWS = 50_000
"""Most ladder rows (segments, app calls, notes, overlay segments) one picture draws: a
bigger picture is refused with a hint to crop (``--until-ms``), before it is laid out."""

BLOCK_MIN = Micros(1_000)
"""A read that waits at least this long is noted with how long it blocked."""

_BAR_COLOR = {"hold": sc.HOLD, "delack": sc.DELACK, "probe0": sc.PROBE, "rto": sc.MUTED}
_QUIET_CODES = ("APP_WRITE", "HANDSHAKE")


@dataclass(frozen=True, slots=True)
class LadderOptions:
    compress: bool = True            # False: gaps drawn to scale (px_per_ms), no breaks
    px_per_ms: float = 8.0           # only when compress is False
    gap_min: Micros = GAP_MIN        # compressed mode: gaps this long become breaks
    detail: str = "wire"             # build_rows detail for side notes: wire|normal|all
    causes: bool = True              # note why each segment left (sim traces only)
    until: Micros | None = None      # crop: nothing after this time
    title: str | None = None         # default: the trace's title
    gap_label: Callable[[int, int], str | None] | None = None
    """What a compressed gap (from, until µs) was, e.g. explain's stall cause; None: say
    only how long it was."""


def _gap_text(us: int) -> str:
    return f"{ms_text(us, 1)} ms" if us >= 10_000 else f"{ms_text(us, 2)} ms"


def _arrive(seg: SegmentRecord) -> Micros:
    return seg.arrive if seg.arrive is not None and seg.arrive >= seg.t else seg.t


def _seg_label(seg: SegmentRecord) -> str:
    label = seg.label()
    if seg.is_data and seg.has_ack:
        label += f" ack {seg.ack}"
    return label


@dataclass(slots=True)
class _Note:
    t: Micros
    side: Side
    text: str
    kind: str            # "op" | "cause" | "event"


class _TimeMap:
    """Monotone map from µs to y, with compressed breaks."""

    def __init__(self, times: list[int], top: float, opts: LadderOptions,
                 need: dict[int, float]) -> None:
        self.times = times
        self.ys: list[float] = []
        self.breaks: list[tuple[int, int, float, float]] = []
        y = top
        for i, t in enumerate(times):
            self.ys.append(y)
            if i + 1 == len(times):
                break
            dt = times[i + 1] - t
            if not opts.compress:
                step = max(dt * opts.px_per_ms / 1000, ROW_H, need.get(t, 0.0))
            elif dt >= opts.gap_min:
                step = max(BREAK_H, need.get(t, 0.0) + BREAK_H * 0.6)
                self.breaks.append((t, times[i + 1], y + need.get(t, 0.0), y + step))
            else:
                step = max(ROW_H + min(30.0, 8 * math.log10(1 + dt)), need.get(t, 0.0))
            y += step
        self.bottom = y

    def y(self, t: int) -> float:
        i = bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] == t:
            return self.ys[i]
        if i == 0:
            return self.ys[0]
        if i == len(self.times):
            return self.ys[-1]
        t0, t1, y0, y1 = self.times[i - 1], self.times[i], self.ys[i - 1], self.ys[i]
        return y0 + (y1 - y0) * (t - t0) / (t1 - t0)


def _lanes(bars: list[Bar]) -> list[int]:
    """Greedy interval colouring: a lane per bar so overlapping bars sit side by side."""
    ends: list[int] = []
    out = []
    for b in bars:
        for lane, end in enumerate(ends):
            if end <= b.start:
                ends[lane] = b.end
                out.append(lane)
                break
        else:
            ends.append(b.end)
            out.append(len(ends) - 1)
    return out


def _notes(rows: list[Row], opts: LadderOptions) -> list[_Note]:
    notes = []
    for row in rows:
        if row.kind is RowKind.SEGMENT:
            seg = row.segment
            if opts.causes and seg is not None and seg.code and seg.code not in _QUIET_CODES:
                why = short(seg.code)
                if why:
                    notes.append(_Note(row.t, row.side, why, "cause"))
        elif row.kind is RowKind.OP:
            label, op = row.label, row.op
            if op is not None and op.op == "read" and op.end is not None \
                    and op.end - op.start >= BLOCK_MIN:
                label += f" (blocks {ms_text(op.end - op.start)} ms)"
            notes.append(_Note(row.t, row.side, label, "op"))
        else:
            notes.append(_Note(row.t, row.side, row.label, "event"))
    return notes


@dataclass(slots=True)
class _Content:
    """What the picture shows: the rows up to ``until``, their segments, the overlay's
    segments, the side notes and the hold/timer bars."""

    rows: list[Row]
    segs: list[SegmentRecord]
    over: list[SegmentRecord]
    notes: list[_Note]
    bars: list[Bar]


@dataclass(slots=True)
class _Layout:
    """Where everything goes: the title block, the time map (y), the columns (x)."""

    title: str
    sub: list[str]
    """The subtitle's lines."""
    head_y: float
    top: float
    tmap: _TimeMap
    lanes: list[int]
    n_lanes: dict[Side, int]
    x_time: float
    x_of: dict[Side, float]
    width: int
    legend_top: float
    legend_rows: list[list[_Sample]]

    def note_x(self, side: Side) -> float:
        """Where a side's notes start (outside its bar lanes)."""
        return self.x_of[side] + _OUT[side] * (16 + self.n_lanes[side] * (LANE_W + 4))


_OUT = {Side.CLIENT: -1.0, Side.SERVER: 1.0}
"""The direction away from the wire, per side."""


def build_ladder(trace: Trace, overlay: Trace | None = None,
                 opts: LadderOptions | None = None) -> Scene:
    """The ladder picture of ``trace`` (and ``overlay`` dashed on top, when given): the
    content chosen, laid out, then drawn layer by layer (headers, compressed gaps, the
    time column, bars, notes, arrows, legend)."""
    opts = opts or LadderOptions()
    content = _content(trace, overlay, opts)
    lay = _layout(content, trace, overlay, opts)
    height = round(lay.legend_top + len(lay.legend_rows) * 34 + MARGIN)
    scene = Scene(width=lay.width, height=height, title=lay.title)
    _draw_headers(scene, lay)
    _draw_gaps(scene, lay, opts)
    _draw_times(scene, lay, content)
    _draw_bars(scene, lay, content, opts)
    _draw_notes(scene, lay, content.notes)
    # the main trace's arrows and labels, then the overlay on top
    for s in content.segs:
        _arrow(scene, s, lay.tmap, lay.x_of, overlay=None)
    over_color = sc.overlay_look(overlay.measured)[0] if overlay is not None else None
    for s in content.over:
        _arrow(scene, s, lay.tmap, lay.x_of, overlay=over_color)
    _draw_legend(scene, lay)
    return scene


def _content(trace: Trace, overlay: Trace | None, opts: LadderOptions) -> _Content:
    until = opts.until

    def keep(t: int) -> bool:
        return until is None or t <= until

    rows = [r for r in build_rows(trace, opts.detail) if keep(r.t)]
    segs = [r.segment for r in rows if r.kind is RowKind.SEGMENT and r.segment is not None]
    over = [s for s in (overlay.segments if overlay else []) if keep(s.t)]
    if len(rows) + len(over) > MAX_ROWS:
        raise sc.SceneTooBig(f"the ladder would have {len(rows) + len(over):,} rows (limit "
                             f"{MAX_ROWS:,}): draw part of the run with --until-ms")
    notes = _notes(rows, opts)
    bars = [b for b in build_bars(trace) if keep(b.start)]
    if until is not None:
        bars = [Bar(b.side, b.start, Micros(min(b.end, until)), b.what, b.label, b.began)
                for b in bars]
    return _Content(rows, segs, over, notes, bars)


def _layout(content: _Content, trace: Trace, overlay: Trace | None,
            opts: LadderOptions) -> _Layout:
    """Vertical layout (every instant drawn, room for stacked notes), then horizontal
    layout from the content's widths."""
    segs, over, notes, bars = content.segs, content.over, content.notes, content.bars
    times_set: set[int] = set()
    for s in segs + over:
        times_set.update((s.t, _arrive(s)))
    times_set.update(n.t for n in notes)
    times_set.update(t for b in bars for t in (b.start, b.end))
    if not times_set:
        times_set.add(0)
    times = sorted(times_set)
    count: dict[tuple[int, Side], int] = {}
    for n in notes:
        count[(n.t, n.side)] = count.get((n.t, n.side), 0) + 1
    need: dict[int, float] = {}
    for (t, _side), k in count.items():
        need[t] = max(need.get(t, 0.0), k * NOTE_H + 8)

    title = opts.title if opts.title is not None else (trace.title or "nagle-sim trace")

    lanes = _lanes(bars)
    n_lanes = {side: 1 + max([ln for b, ln in zip(bars, lanes, strict=True) if b.side is side],
                             default=-1) for side in Side}
    note_w = {side: max([text_width(n.text, NOTE_SIZE, mono=n.kind == "op")
                         for n in notes if n.side is side]
                        + [text_width(b.label, NOTE_SIZE, bold=True)
                           for b in bars if b.side is side]
                        + [text_width(side.value, HEAD_SIZE, bold=True)])
              for side in Side}
    label_w = max([text_width(_seg_label(s), LABEL_SIZE, bold=True) for s in segs + over],
                  default=100.0)
    time_w = text_width("000.000", TIME_SIZE, mono=True) + 16
    center = max(560.0, label_w * 1.8)
    x_time = MARGIN + time_w                       # right edge of the time column
    x_client = x_time + 24 + note_w[Side.CLIENT] + 16 + n_lanes[Side.CLIENT] * (LANE_W + 4) + 8
    x_server = x_client + center
    right = x_server + 8 + n_lanes[Side.SERVER] * (LANE_W + 4) + 16 + note_w[Side.SERVER]
    width = round(max(right + MARGIN, text_width(title, TITLE_SIZE, bold=True) + 2 * MARGIN))
    # the subtitle's parts, wrapped to the picture (one long line was cut at MAX_LABEL:
    # "dashed orange: real ker…", issue 31.7)
    sub = _wrap(_subtitle(trace, overlay, opts), width - 2 * MARGIN)
    head_y = MARGIN + TITLE_SIZE + 12 + len(sub) * (SUB_SIZE + 10) + 24
    top = head_y + HEAD_SIZE + 30
    tmap = _TimeMap(times, top, opts, need)
    legend_rows = _legend_rows(_legend(bars, overlay, trace), width - 2 * MARGIN)
    return _Layout(title, sub, head_y, top, tmap, lanes, n_lanes, x_time,
                   {Side.CLIENT: x_client, Side.SERVER: x_server}, width,
                   tmap.bottom + 40, legend_rows)


def _draw_headers(scene: Scene, lay: _Layout) -> None:
    """The title, the subtitle, the time column's unit and the two sides' names."""
    scene.add(Text(MARGIN, MARGIN + TITLE_SIZE, lay.title, TITLE_SIZE, sc.INK, bold=True))
    for k, line in enumerate(lay.sub):
        scene.add(Text(MARGIN, MARGIN + TITLE_SIZE + 12 + SUB_SIZE + k * (SUB_SIZE + 10),
                       line, SUB_SIZE, sc.MUTED))
    head_y = lay.head_y
    scene.add(Text(lay.x_time, head_y + HEAD_SIZE, "ms", TIME_SIZE + 2, sc.MUTED,
                   anchor="end"))
    for side, color in ((Side.CLIENT, sc.CLIENT), (Side.SERVER, sc.SERVER)):
        w = text_width(side.value, HEAD_SIZE, bold=True) + 28
        scene.add(Rect(lay.x_of[side] - w / 2, head_y - 4, w, HEAD_SIZE + 16, fill="#ffffff",
                       stroke=color, width=2.5),
                  Text(lay.x_of[side], head_y + HEAD_SIZE, side.value, HEAD_SIZE, color,
                       anchor="middle", bold=True))


def _draw_gaps(scene: Scene, lay: _Layout, opts: LadderOptions) -> None:
    """Compressed gaps (shading and their duration), then the lifelines: solid, dotted
    across a gap."""
    x_client, x_server = lay.x_of[Side.CLIENT], lay.x_of[Side.SERVER]
    bottom = lay.tmap.bottom + 16
    spans: list[tuple[float, float, bool]] = []     # (y0, y1, is_break) along the lifelines
    cursor: float = lay.top - 12
    for t0, t1, y0, y1 in lay.tmap.breaks:
        y0, y1 = y0 + 6, y1 - 6
        spans += [(cursor, y0, False), (y0, y1, True)]
        cursor = y1
        scene.add(Rect(MARGIN, y0, lay.width - 2 * MARGIN, y1 - y0, fill=sc.STALL_FILL,
                       opacity=0.55))
        mid = (y0 + y1) / 2
        what = opts.gap_label(t0, t1) if opts.gap_label is not None else None
        scene.add(Text((x_client + x_server) / 2, mid + LABEL_SIZE * 0.35,
                       f"≈ {_gap_text(t1 - t0)}: {what}" if what else
                       f"≈ {_gap_text(t1 - t0)} later (gap compressed)", LABEL_SIZE - 1,
                       sc.MUTED, anchor="middle", italic=True))
    spans.append((cursor, bottom, False))
    for side in Side:
        x = lay.x_of[side]
        for y0, y1, broken in spans:
            if y1 > y0:
                scene.add(Line(x, y0, x, y1, sc.MUTED if broken else sc.INK,
                               2.0 if broken else 3.0, dash=(3, 7) if broken else None))


def _draw_times(scene: Scene, lay: _Layout, content: _Content) -> None:
    """The time column: one tick per instant with a segment or a note, never crowded."""
    x_time = lay.x_time
    shown_times = sorted({s.t for s in content.segs + content.over}
                         | {n.t for n in content.notes})
    last_y = -1e9
    for t in shown_times:
        y = lay.tmap.y(t)
        if y - last_y < TIME_SIZE + 2:
            continue
        last_y = y
        scene.add(Text(x_time, y + TIME_SIZE * 0.35, ms_text(t), TIME_SIZE, sc.MUTED,
                       anchor="end", mono=True))
        scene.add(Line(x_time + 6, y, x_time + 18, y, sc.GRID, 1.5))


def _draw_bars(scene: Scene, lay: _Layout, content: _Content, opts: LadderOptions) -> None:
    """Hold and timer bars (under the arrows), each labelled where a note leaves room."""
    tmap = lay.tmap
    # Tops of the note lines taken on each side, sorted (every line is NOTE_H tall), so
    # placing a note or a bar label looks only at its neighbours: linear-ish, not
    # quadratic, in the number of notes.
    taken: dict[Side, list[float]] = {Side.CLIENT: [], Side.SERVER: []}
    for n_side, t in ((n.side, n.t) for n in content.notes):
        ty, tops = tmap.y(t), taken[n_side]
        k = bisect_left(tops, ty + 1) - bisect_right(tops, ty - 1)
        insort(tops, ty + k * NOTE_H)
    for b, lane in zip(content.bars, lay.lanes, strict=True):
        color = _BAR_COLOR.get(b.what, sc.MUTED)
        x = lay.x_of[b.side] + _OUT[b.side] * (10 + lane * (LANE_W + 4))
        x0 = x if b.side is Side.SERVER else x - LANE_W
        y0, y1 = tmap.y(b.start), tmap.y(b.end)
        scene.add(Rect(x0, y0, LANE_W, max(y1 - y0, 4), fill=color, opacity=0.85))
        long_enough = (b.end - b.start >= opts.gap_min) if opts.compress else True
        if long_enough and y1 - y0 >= 2 * NOTE_H:
            ly = _free_y(taken[b.side], (y0 + y1) / 2 - NOTE_H / 2, y0, y1)
            if ly is not None:
                insort(taken[b.side], ly)
                scene.add(Text(lay.note_x(b.side), ly + NOTE_SIZE * 0.35 + NOTE_H / 2 - 4,
                               b.label, NOTE_SIZE, color,
                               anchor="start" if b.side is Side.SERVER else "end",
                               bold=True))


def _draw_notes(scene: Scene, lay: _Layout, notes: list[_Note]) -> None:
    """Side notes (calls, causes, events), stacked where several share an instant."""
    stack: dict[tuple[int, Side], int] = {}
    for n in notes:
        k = stack.get((n.t, n.side), 0)
        stack[(n.t, n.side)] = k + 1
        y = lay.tmap.y(n.t) + k * NOTE_H + NOTE_SIZE * 0.35
        color = sc.INK if n.kind == "op" else sc.MUTED
        scene.add(Text(lay.note_x(n.side), y, n.text, NOTE_SIZE, color,
                       anchor="start" if n.side is Side.SERVER else "end",
                       bold=n.kind == "op", italic=n.kind != "op", mono=n.kind == "op"))


def _draw_legend(scene: Scene, lay: _Layout) -> None:
    y = lay.legend_top
    for row in lay.legend_rows:
        x = float(MARGIN)
        for sample, text in row:
            scene.add(*sample(x, y))
            scene.add(Text(x + 52, y + 6, text, SUB_SIZE, sc.INK))
            x += 52 + text_width(text, SUB_SIZE) + 36
        y += 34


def _free_y(tops: list[float], want: float, lo: float, hi: float) -> float | None:
    """A y near ``want`` in [lo, hi - NOTE_H] where a note line does not collide with the
    lines at ``tops`` (sorted; each NOTE_H tall). Only lines starting within (lo - NOTE_H,
    hi) can collide with a line inside [lo, hi], so only those are looked at."""
    near = tops[bisect_right(tops, lo - NOTE_H):bisect_left(tops, hi)]
    for delta in range(0, int(hi - lo) + 1, 6):
        for y in (want + delta, want - delta):
            if lo <= y <= hi - NOTE_H and all(y + NOTE_H <= a or y >= a + NOTE_H
                                              for a in near):
                return y
    return None


def _arrow(scene: Scene, s: SegmentRecord, tmap: _TimeMap, x_of: dict[Side, float],
           overlay: str | None) -> None:
    """One segment's arrow and label; ``overlay``: the overlay's colour (dashed, labelled
    below the line), None for the picture's own trace."""
    x1, x2 = x_of[s.src], x_of[s.dst]
    inset = 3.0
    x1 += inset if x2 > x1 else -inset
    x2 -= inset if x2 > x1 else -inset
    y1, y2 = tmap.y(s.t), tmap.y(_arrive(s))
    if y2 - y1 < ROW_H / 2:     # arrival unknown (or same µs): draw a visible slope
        y2 = y1 + ROW_H / 2
    special = s.is_control
    if overlay is not None:
        color, width, dash = overlay, 2.5, (10.0, 6.0)
    else:
        color = sc.CLIENT if s.src is Side.CLIENT else sc.SERVER
        width, dash = (3.5 if s.is_data else 2.0), None
        if special:
            color, width = sc.MUTED, 2.0
    scene.add(Line(x1, y1, x2, y2, color, width, dash=dash, arrow=True))
    mx, my = (x1 + x2) / 2, (y1 + y2) / 2
    label = _seg_label(s)
    size = LABEL_SIZE - 1 if overlay is not None else LABEL_SIZE
    # The line's rise across the label's width: keep the text clear of its own arrow.
    rise = abs(y2 - y1) / max(abs(x2 - x1), 1.0) * text_width(label, size) / 2
    if overlay is not None:   # below the line
        scene.add(Text(mx, my + rise + size + 2, label, size, overlay,
                       anchor="middle", italic=True, halo=True))
    else:         # above the line
        scene.add(Text(mx, my - rise - 6, label, size, color, anchor="middle",
                       bold=bool(s.length), halo=True))


_Sample = tuple[Callable[[float, float], tuple[Item, ...]], str]
"""A legend entry: (draw the sample at x, y) and its text."""


def _legend(bars: list[Bar], overlay: Trace | None, trace: Trace) -> list[_Sample]:
    def line(color: str, width: float,
             dash: tuple[float, float] | None = None) -> Callable[[float, float], tuple[Item]]:
        return lambda x, y: (Line(x, y, x + 40, y, color, width, dash=dash, arrow=True),)

    def bar(color: str) -> Callable[[float, float], tuple[Item]]:
        return lambda x, y: (Rect(x + 14, y - 12, LANE_W, 24, fill=color, opacity=0.85),)

    src = sc.trace_name(trace.measured, captured=trace.source == Source.CAPTURE)
    items: list[_Sample] = [(line(sc.CLIENT, 3.5), f"client data ({src})"),
                            (line(sc.SERVER, 3.5), f"server data ({src})"),
                            (line(sc.INK, 2.0), "thin: pure ACK")]
    if overlay is not None:
        color, name = sc.overlay_look(overlay.measured)
        items.append((line(color, 2.5, (10, 6)), f"dashed: {name} (overlay)"))
    whats = {b.what for b in bars}
    names = {"hold": "data held back", "delack": "delayed-ACK timer", "probe0": "probe timer",
             "rto": "RTO timer"}
    for what in ("hold", "delack", "probe0", "rto"):
        if what in whats:
            items.append((bar(_BAR_COLOR[what]), names[what]))
    return items


def _legend_rows(items: list[_Sample], width: float) -> list[list[_Sample]]:
    rows: list[list[_Sample]] = [[]]
    used = 0.0
    for item in items:
        w = 52 + text_width(item[1], SUB_SIZE) + 36
        if rows[-1] and used + w > width:
            rows.append([])
            used = 0.0
        rows[-1].append(item)
        used += w
    return rows


def _wrap(parts: list[str], width: float) -> list[str]:
    """``parts`` joined with " · " into lines no wider than ``width`` (and no longer than
    a picture's text may be); a part is never split."""
    lines: list[str] = []
    for part in parts:
        joined = f"{lines[-1]} · {part}" if lines else part
        if lines and text_width(joined, SUB_SIZE) <= width and len(joined) <= sc.MAX_LABEL:
            lines[-1] = joined
        else:
            lines.append(part)
    return lines


def _subtitle(trace: Trace, overlay: Trace | None, opts: LadderOptions) -> list[str]:
    m = trace.meta
    parts = []
    if "client_profile" in m:
        parts.append(f"{m['client_profile']} client ↔ {m.get('server_profile', '?')} server")
    if "to_server_delay_ms" in m:
        parts.append(f"one-way delay {m['to_server_delay_ms']:g} / "
                     f"{m.get('to_client_delay_ms', 0):g} ms")
    if opts.compress:
        parts.append(f"time runs down; gaps ≥ {opts.gap_min / 1000:g} ms compressed")
    else:
        parts.append(f"time runs down, {opts.px_per_ms:g} px/ms")
    if overlay is not None:
        name = sc.overlay_look(overlay.measured)[1]
        parts.append(f"dashed {'orange' if overlay.measured else 'grey'}: {name}")
    return parts
