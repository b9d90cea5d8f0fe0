"""The ladder diagram: client | wire | server, time flowing down, one line per trace row.

A `ScrollView` using the line API with an LRU strip cache (the shape of Textual's `Log`), so
only visible lines are ever drawn and 100,000-row traces scroll and step instantly.
Geometry comes from `tui.layout`, rows and bars from `render.rows`. No simpy, no realnet.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...model.events import Side
from ...render.rows import Bar, Row, RowKind
from ...trace import SegmentRecord
from ...units import ms_text
from ..layout import LadderLayout, Scale
from ..palette import ladder_css

_BAR_CLASS = {"hold": "ladder--held", "delack": "ladder--delack", "probe0": "ladder--timer",
              "rto": "ladder--timer"}
_ROW_CLASS = {RowKind.OP: "ladder--op", RowKind.HOLD: "ladder--held",
              RowKind.TIMER: "ladder--timer", RowKind.ACK: "ladder--delack",
              RowKind.MODE: "ladder--note", RowKind.OPTION: "ladder--note",
              RowKind.STATE: "ladder--note"}
_MIRROR = str.maketrans("╮╰▶╲┄─", "╭╯◀╱┄─")
_TAIL = 3
"""Lines after the last row while a question is pending."""
_MAX_CROSSINGS = 3
"""An arrow that more than this many others start under is drawn split (send | arrival)."""


@dataclass(frozen=True, slots=True)
class _Arrow:
    y0: int
    y1: int
    src: Side
    label: str
    cls: str
    line: str   # run character
    split: bool = False
    """Drawn as a labelled send stub and a labelled arrival stub, not a staircase: too many
    other arrows start while it is in flight, and staircases would tangle."""


@dataclass(frozen=True, slots=True)
class _Cols:
    time_w: int
    cl_x: int
    side_w: int
    cg_x: int
    ca_x: int
    wire_x: int
    wire_w: int
    sa_x: int
    sg_x: int
    sl_x: int

    @classmethod
    def fit(cls, width: int, time_w: int) -> _Cols:
        rest = max(0, width - time_w)
        side_w = max(6, min(28, int(rest * 0.27)))
        wire_w = rest - 2 * side_w - 4
        if wire_w < 10:
            side_w = max(3, (rest - 14) // 2)
            wire_w = max(1, rest - 2 * side_w - 4)
        cl_x = time_w
        cg_x = cl_x + side_w
        ca_x = cg_x + 1
        wire_x = ca_x + 1
        sa_x = wire_x + wire_w
        return cls(time_w, cl_x, side_w, cg_x, ca_x, wire_x, wire_w, sa_x, sa_x + 1, sa_x + 2)


class _Canvas:
    __slots__ = ("chars", "styles", "width")

    def __init__(self, width: int, style: Style) -> None:
        self.width = width
        self.chars = [" "] * width
        self.styles = [style] * width

    def put(self, x: int, text: str, style: Style, limit: int | None = None) -> None:
        end = min(self.width, limit if limit is not None else self.width)
        for i, ch in enumerate(text):
            if 0 <= x + i < end:
                self.chars[x + i] = ch
                self.styles[x + i] = style

    def overlay(self, style: Style) -> None:
        self.styles = [s + style for s in self.styles]

    def strip(self) -> Strip:
        segments: list[Segment] = []
        chars, styles = self.chars, self.styles
        start = 0
        for i in range(1, self.width + 1):
            if i == self.width or styles[i] is not styles[start]:
                segments.append(Segment("".join(chars[start:i]), styles[start]))
                start = i
        return Strip(segments, self.width)


def _row_class(row: Row) -> str:
    """The colour of an event row: a delayed-ACK timer's rows are purple like its bar and
    like the exports; amber is for the probe and retransmission timers."""
    if row.kind is RowKind.TIMER and row.event is not None and row.event.timer == "delack":
        return "ladder--delack"
    return _ROW_CLASS.get(row.kind, "ladder--note")


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _short_label(label: str, width: int) -> str:
    """A segment label cut to ``width`` keeping what tells arrivals apart, the end of its
    sequence range: "P. 1:1201(1200)" → "…:1201"; an ACK keeps its number."""
    if len(label) <= width:
        return label
    if ":" in label:
        end = "…" + label[label.rfind(":"):].split("(")[0]
        if len(end) <= width:
            return end
    if "ack " in label:
        ack = "ack " + label.rsplit("ack ", 1)[1]
        if len(ack) <= width:
            return ack
    return _fit(label, width)


class Ladder(ScrollView, can_focus=True, inherit_bindings=False):
    """Client | wire | server ladder over a finished trace, with a row cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "Scroll up", show=False, id="ladder.scroll_up",
                tooltip="Scroll the ladder up one line"),
        Binding("down", "scroll_down", "Scroll down", show=False, id="ladder.scroll_down",
                tooltip="Scroll the ladder down one line"),
        Binding("pageup", "page_up", "Page up", show=False, id="ladder.page_up",
                tooltip="Scroll the ladder up one page"),
        Binding("pagedown", "page_down", "Page down", show=False, id="ladder.page_down",
                tooltip="Scroll the ladder down one page"),
    ]

    COMPONENT_CLASSES = {
        "ladder--cursor", "ladder--time", "ladder--axis", "ladder--gap", "ladder--segment",
        "ladder--ack", "ladder--op", "ladder--held", "ladder--delack", "ladder--timer",
        "ladder--note", "ladder--measured", "ladder--ghost", "ladder--client",
        "ladder--server", "ladder--client-ack", "ladder--server-ack",
    }

    DEFAULT_CSS = """
    Ladder {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
        & > .ladder--cursor { background: $primary-muted; text-style: bold; }
        & > .ladder--time { color: $foreground-muted; }
        & > .ladder--axis { color: $foreground-muted; }
        & > .ladder--segment { color: $foreground; text-style: bold; }
        & > .ladder--ack { color: $foreground-muted; }
        & > .ladder--op { color: $foreground; }
        & > .ladder--note { color: $foreground-muted; text-style: italic; }
        &:focus { background-tint: $foreground 4%; }
    """ + ladder_css() + """
    }
    """

    cursor: reactive[int] = reactive(0, init=False)
    """Index of the selected row."""
    scale: reactive[Scale] = reactive(Scale, init=False)
    """Time axis: compressed gaps or linear zoom."""
    show_ghost: reactive[bool] = reactive(True, init=False)
    """Draw the previous run's segments faintly."""

    class StepChanged(Message):
        """The cursor moved to another row."""

        def __init__(self, ladder: Ladder, index: int, row: Row | None) -> None:
            super().__init__()
            self.ladder = ladder
            self.index = index
            self.row = row

        @property
        def control(self) -> Ladder:
            return self.ladder

    class RowClicked(Message):
        """The user clicked a line; ``index`` is the row drawn there (or just above)."""

        def __init__(self, ladder: Ladder, index: int) -> None:
            super().__init__()
            self.ladder = ladder
            self.index = index

        @property
        def control(self) -> Ladder:
            return self.ladder

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.rows: list[Row] = []
        self.bars: list[Bar] = []
        self.layout_: LadderLayout = LadderLayout([], Scale())
        self._arrows: list[_Arrow] = []
        self._arrow_y0: list[int] = []
        self._max_span = 0
        self._bar_lines: dict[Side, tuple[list[int], list[int], list[int], list[Bar]]] = {}
        self._overlays: dict[str, list[SegmentRecord]] = {}
        self._cache: LRUCache[int, Strip] = LRUCache(1024)
        self._styles: dict[str, Style] = {}
        self._cols: _Cols | None = None
        self.placeholder = "simulating…"
        self.horizon: int | None = None
        """Set while a question is pending: rows end there, and segments still in flight
        run off the bottom without an arrival (set before `set_rows`)."""

    # ------------------------------------------------------------------ data
    def set_rows(self, rows: list[Row], bars: list[Bar], cursor: int = 0) -> None:
        """Show a new run; the cursor moves to ``cursor`` (clamped)."""
        self.rows = rows
        self.bars = bars
        self._relayout()
        self.set_reactive(Ladder.cursor, self.validate_cursor(cursor))
        self.scroll_to_cursor(center=True)
        self.post_message(self.StepChanged(self, self.cursor, self.current_row))

    def set_overlay(self, name: str, segments: list[SegmentRecord] | None) -> None:
        """Extra segments drawn under the simulated ones ("measured" or "ghost")."""
        if segments is None:
            self._overlays.pop(name, None)
        else:
            self._overlays[name] = segments
        self._build_arrows()
        self._invalidate()

    def overlay(self, name: str) -> list[SegmentRecord] | None:
        return self._overlays.get(name)

    @property
    def current_row(self) -> Row | None:
        return self.rows[self.cursor] if self.rows else None

    def _relayout(self) -> None:
        self.layout_ = LadderLayout([r.t for r in self.rows], self.scale)
        self._cols = None  # the time column's width follows the last time (a lifted horizon)
        bar_lines: dict[Side, tuple[list[int], list[int], list[int], list[Bar]]] = {}
        for side in Side:
            mine = [b for b in self.bars if b.side is side]
            ys = [(self.layout_.line_of_time(b.start), self.layout_.line_of_time(b.end), b)
                  for b in mine]
            ys.sort(key=lambda v: v[0])
            y0s = [v[0] for v in ys]
            reach: list[int] = []
            top = -1
            for v in ys:
                top = max(top, v[1])
                reach.append(top)
            bar_lines[side] = (y0s, [v[1] for v in ys], reach, [v[2] for v in ys])
        self._bar_lines = bar_lines
        self._build_arrows()
        self.virtual_size = Size(0, self.layout_.height + self._tail())
        self._invalidate()

    def _tail(self) -> int:
        """Lines drawn after the last row at a horizon: in-flight arrows and a "next?"."""
        return _TAIL if self.horizon is not None and self.rows else 0

    def _build_arrows(self) -> None:
        lay = self.layout_
        arrows: list[_Arrow] = []
        arrive_at: dict[int, int] = {}
        for name, segs in self._overlays.items():
            cls = f"ladder--{name}"
            run = "┄" if name == "measured" else "─"
            for s in segs:
                y0 = lay.line_of_time(s.t)
                if s.arrive is None and self.horizon is not None:
                    y1 = lay.height + _TAIL  # still in flight: no head is ever drawn
                else:
                    y1 = max(y0, lay.line_of_time(s.arrive if s.arrive is not None else s.t))
                arrow = _Arrow(y0, y1, s.src, "", cls, run)
                arrive_at[id(arrow)] = s.arrive if s.arrive is not None else s.t
                arrows.append(arrow)
        for i, row in enumerate(self.rows):
            seg = row.segment
            if seg is None:
                continue
            y0 = lay.row_y[i]
            if seg.arrive is None and self.horizon is not None:
                y1 = lay.height + _TAIL
            else:
                y1 = max(y0, lay.line_of_time(seg.arrive) if seg.arrive is not None else y0)
            cls = f"ladder--{seg.src.value}" + ("" if seg.is_data else "-ack")
            arrow = _Arrow(y0, y1, seg.src, seg.label(), cls, "─")
            arrive_at[id(arrow)] = seg.arrive if seg.arrive is not None else seg.t
            arrows.append(arrow)
        arrows.sort(key=lambda a: a.y0)
        starts = [a.y0 for a in arrows]
        in_flight: list[int] = []  # ends of earlier arrows still travelling (a heap)
        for i, a in enumerate(arrows):
            while in_flight and in_flight[0] <= a.y0:
                heapq.heappop(in_flight)
            others = len(in_flight) + bisect.bisect_left(starts, a.y1) - i - 1
            heapq.heappush(in_flight, a.y1)
            if a.y1 > a.y0 + 1 and others > _MAX_CROSSINGS:
                if a.y1 > lay.height:
                    # still in flight at a question's horizon: the send stub alone (its
                    # arrival line lies past the last line and is never drawn)
                    y1 = a.y1
                else:
                    # the arrival goes on the receiver's first row at or after it (an
                    # arrival between rows would share the line of the row before it)
                    j = bisect.bisect_left(lay.times, arrive_at[id(a)])
                    y1 = lay.row_y[j] if j < len(lay.row_y) else a.y1
                arrows[i] = _Arrow(a.y0, max(a.y1, y1), a.src, a.label, a.cls, a.line,
                                   split=True)
        self._arrows = arrows
        self._arrow_y0 = [a.y0 for a in arrows]
        self._max_span = max((a.y1 - a.y0 for a in arrows), default=0)

    def _invalidate(self) -> None:
        self._cache.clear()
        self.refresh()

    # ------------------------------------------------------------------ reactives
    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        rh = self.scale.row_height
        for index in (old, new):
            if 0 <= index < len(self.layout_.row_y):
                y = self.layout_.row_y[index]
                for line in range(y, y + rh):
                    self._cache.discard(line)
                self.refresh_lines(y, rh)
        self.scroll_to_cursor()
        self.post_message(self.StepChanged(self, new, self.current_row))

    def watch_scale(self) -> None:
        keep = self.cursor
        self._relayout()
        self.scroll_to_cursor(center=True)
        self.cursor = keep

    def watch_show_ghost(self) -> None:
        self._invalidate()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._cache.clear()

    def on_resize(self, event: events.Resize) -> None:
        self._cols = None
        self._cache.clear()

    def scroll_to_cursor(self, center: bool = False) -> None:
        if not self.rows or not self.size.height:
            return
        y = self.layout_.row_y[self.cursor]
        height = self.scrollable_content_region.height
        top = int(self.scroll_offset.y)
        margin = min(4, height // 4)
        if center or y < top + 1 or y + self.scale.row_height > top + height - margin:
            self.scroll_to(y=max(0, y - height // 3), animate=False, immediate=True)

    # ------------------------------------------------------------------ mouse
    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self.rows:
            return
        line = offset.y + int(self.scroll_offset.y)
        self.post_message(self.RowClicked(self, self.layout_.row_at_line(line)))

    # ------------------------------------------------------------------ drawing
    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(name, partial=True)
        return style

    def _columns(self, width: int) -> _Cols:
        if self._cols is None or self._cols.sl_x + self._cols.side_w != width:
            last = self.layout_.times[-1] if self.layout_.times else 0
            time_w = max(9, len(ms_text(last)) + 2)  # room for the cursor ▶
            self._cols = _Cols.fit(width, time_w)
        return self._cols

    def render_line(self, y: int) -> Strip:
        line = y + int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        strip = self._cache.get(line)
        if strip is None or strip.cell_length != width:
            strip = self._render_full(line, width)
            self._cache.set(line, strip)
        return strip

    def _render_full(self, line: int, width: int) -> Strip:
        base = self.rich_style
        canvas = _Canvas(width, base)
        if not self.rows:
            if line == 1:
                canvas.put(2, self.placeholder, base + self._style("ladder--note"))
            return canvas.strip()
        if line >= self.layout_.height:
            if line < self.layout_.height + self._tail():
                self._draw_tail(canvas, line - self.layout_.height, width)
            return canvas.strip()
        cols = self._columns(width)
        lay = self.layout_
        index = lay.row_at_line(line)
        row_line = lay.row_y[index] == line
        gap_line = line >= lay.row_y[index] + lay.scale.row_height
        axis = "┊" if gap_line and lay.scale.compressed else "│"
        axis_style = base + self._style("ladder--axis")
        canvas.put(cols.ca_x, axis, axis_style)
        canvas.put(cols.sa_x, axis, axis_style)
        first_gap = gap_line and line == lay.row_y[index] + lay.scale.row_height
        self._draw_bars(canvas, cols, line, first_gap)
        self._draw_arrows(canvas, cols, line)
        row = self.rows[index]
        if row_line:
            self._draw_row(canvas, cols, row)
        elif gap_line and line == lay.row_y[index] + lay.scale.row_height and \
                index + 1 < len(self.rows):
            gap = self.rows[index + 1].t - row.t
            if gap >= 1000:
                text = f"+{ms_text(gap, 1)}ms"
                canvas.put(cols.time_w - 1 - len(text), text, base + self._style("ladder--gap"))
        if index == self.cursor and not gap_line:
            canvas.put(0, "▶", base + self._style("ladder--segment"))
            canvas.overlay(self._style("ladder--cursor"))
        return canvas.strip()

    def _draw_tail(self, canvas: _Canvas, k: int, width: int) -> None:
        cols = self._columns(width)
        axis_style = self.rich_style + self._style("ladder--axis")
        canvas.put(cols.ca_x, "┊", axis_style)
        canvas.put(cols.sa_x, "┊", axis_style)
        self._draw_arrows(canvas, cols, self.layout_.height + k)
        if k == _TAIL - 1:
            note = _fit("? predict what happens next", max(1, cols.wire_w - 2))
            canvas.put(cols.wire_x + (cols.wire_w - len(note)) // 2, note,
                       self.rich_style + self._style("ladder--gap"))

    def _draw_row(self, canvas: _Canvas, cols: _Cols, row: Row) -> None:
        base = self.rich_style
        text = ms_text(row.t)
        canvas.put(cols.time_w - 1 - len(text), text, base + self._style("ladder--time"))
        client = row.side is Side.CLIENT
        axis_x = cols.ca_x if client else cols.sa_x
        if row.kind is RowKind.SEGMENT:
            seg = row.segment
            cls = f"ladder--{row.side.value}" + ("" if seg is not None and seg.is_data
                                                  else "-ack")
            canvas.put(axis_x, "●", base + self._style(cls))
            return
        style = base + self._style(_row_class(row))
        if row.kind is RowKind.OP and row.op is not None:
            mark = {"write": "◆", "writev": "◆", "read": "◇"}.get(row.op.op, "•")
            canvas.put(axis_x, mark, style)
        label = _fit(row.label, cols.side_w - 1)
        if client:
            canvas.put(cols.cg_x - 1 - len(label), label, style)
        else:
            canvas.put(cols.sl_x + 1, label, style)

    def _draw_bars(self, canvas: _Canvas, cols: _Cols, line: int, first_gap: bool) -> None:
        base = self.rich_style
        for side in Side:
            y0s, y1s, reach, bars = self._bar_lines.get(side, ([], [], [], []))
            i = bisect.bisect_right(y0s, line) - 1
            best: Bar | None = None
            while i >= 0 and reach[i] >= line:
                if line <= y1s[i] and (best is None or bars[i].what == "hold"):
                    best = bars[i]
                i -= 1
            if best is None:
                continue
            style = base + self._style(_BAR_CLASS.get(best.what, "ladder--timer"))
            gutter = cols.cg_x if side is Side.CLIENT else cols.sg_x
            canvas.put(gutter, "┃", style)
            if first_gap:
                label = _fit(best.label, cols.side_w - 1)
                if side is Side.CLIENT:
                    canvas.put(cols.cg_x - 1 - len(label), label, style)
                else:
                    canvas.put(cols.sl_x + 1, label, style)

    def _draw_arrows(self, canvas: _Canvas, cols: _Cols, line: int) -> None:
        lo = bisect.bisect_left(self._arrow_y0, line - self._max_span)
        hi = bisect.bisect_right(self._arrow_y0, line)
        base = self.rich_style
        labels: list[tuple[_Arrow, Style]] = []
        w = cols.wire_w
        arrivals: list[tuple[_Arrow, Style]] = []
        for arrow in self._arrows[lo:hi]:
            if arrow.y1 < line:
                continue
            if arrow.cls == "ladder--ghost" and not self.show_ghost:
                continue
            style = base + self._style(arrow.cls)
            k, i = arrow.y1 - arrow.y0, line - arrow.y0
            if arrow.split:
                stub = max(2, w // 5)
                if i == 0:
                    cells = [(x, arrow.line) for x in range(stub)] + [(stub, "┈")]
                elif i == k:
                    cells = [(x, arrow.line) for x in range(w - stub, w - 1)] + [(w - 1, "▶")]
                    if arrow.label:
                        arrivals.append((arrow, style))
                else:
                    continue
            else:
                cells = _stair(k, i, w, arrow.line)
            rtl = arrow.src is Side.SERVER
            for x, ch in cells:
                if rtl:
                    x, ch = w - 1 - x, ch.translate(_MIRROR)
                canvas.put(cols.wire_x + x, ch, style)
            if i == 0 and arrow.label:
                labels.append((arrow, style))
        under = (canvas.chars[:], canvas.styles[:])  # the arrows, before any label
        placed: list[list[object]] = []  # [x, text, style] of each send label
        for arrow, style in labels:
            label = _fit(arrow.label, max(1, w - 3))
            x = 1 if arrow.src is Side.CLIENT else w - 2 - len(label)
            canvas.put(cols.wire_x + x, label, style, limit=cols.wire_x + w)
            placed.append([cols.wire_x + x, label, style])
        # arrivals from one side on one line share a stub: label the latest only, or
        # each would overwrite the one before (five ACKs of a CUBIC flight in lesson 11)
        arrivals = list({arrow.src: (arrow, style) for arrow, style in arrivals}.values())
        for arrow, style in arrivals:
            # the arrival's label takes only the free cells beside its stub: a segment sent
            # at the same moment keeps its own label readable
            stub = max(2, w // 5)
            lo, hi = cols.wire_x, cols.wire_x + w - stub - 1
            if arrow.src is Side.SERVER:
                lo, hi = cols.wire_x + stub + 1, cols.wire_x + w
            run = _free_run(canvas.chars, lo, hi, near_end=arrow.src is Side.CLIENT, least=7)
            if run is not None:
                start, end = run
                room = end - start - 1
                label = f"{arrow.label} arrives"
                label = _fit(label if len(label) <= room else arrow.label, room)
                x = end - 1 - len(label) if arrow.src is Side.CLIENT else start + 1
                canvas.put(x, label, style, limit=cols.wire_x + w)
                continue
            # no gap (a narrow wire, a segment sent on the same line): the arrival still
            # gets a short label ("…:13449") beside its stub, and a send label in the way
            # is shortened to make room
            label = _short_label(arrow.label, max(4, min(8, w - stub - 4)))
            if arrow.src is Side.CLIENT:
                a, b = max(lo, hi - len(label) - 1), hi
            else:
                a, b = lo, min(hi, lo + len(label) + 1)
            for item in placed:
                px, text, pstyle = item
                assert isinstance(px, int) and isinstance(text, str)
                if px >= b or px + len(text) <= a:
                    continue
                for i in range(px, px + len(text)):  # give the cells back to the arrows
                    if 0 <= i < canvas.width:
                        canvas.chars[i], canvas.styles[i] = under[0][i], under[1][i]
                if px < a:
                    text = _fit(text, a - px - 1)
                else:
                    cut = px + len(text) - b - 1
                    text = "…" + text[len(text) - cut + 1:] if cut > 1 else ""
                    px = b + 1
                item[:2] = [px, text]
                canvas.put(px, text, pstyle, limit=cols.wire_x + w)  # type: ignore[arg-type]
            x = b - len(label) if arrow.src is Side.CLIENT else a + 1
            canvas.put(x, label, style, limit=cols.wire_x + w)


def _free_run(chars: list[str], lo: int, hi: int, *, near_end: bool,
              least: int = 10) -> tuple[int, int] | None:
    """The blank run of at least ``least`` cells within [lo, hi) nearest to ``hi`` (or to
    ``lo``), as (start, end); None when there is none."""
    runs: list[tuple[int, int]] = []
    x = lo
    while x < hi:
        if chars[x] == " ":
            y = x
            while y < hi and chars[y] == " ":
                y += 1
            if y - x >= least:
                runs.append((x, y))
            x = y
        else:
            x += 1
    if not runs:
        return None
    return runs[-1] if near_end else runs[0]


def _stair(k: int, i: int, w: int, run: str) -> list[tuple[int, str]]:
    """Cells (x, char) of line ``i`` of an arrow spanning ``k + 1`` lines, left to right."""
    if w <= 1:
        return [(0, "▶")] if i == k else []
    if k + 1 <= w:
        bounds = [round((j + 1) * (w - 1) / (k + 1)) for j in range(k + 1)]
        a = 0 if i == 0 else bounds[i - 1] + 1
        b = bounds[i]
        cells = [(x, run) for x in range(a, b + 1)]
        if not cells:
            return []
        if i > 0:
            cells[0] = (a, "╰")
        if i < k:
            cells[-1] = (b, "╮" if b > a or i == 0 else "│")
        else:
            cells[-1] = (b, "▶")
        return cells
    x = round(i * (w - 1) / k)
    if i == 0:
        return [(0, run)]
    return [(x, "▶" if i == k else "╲")]
