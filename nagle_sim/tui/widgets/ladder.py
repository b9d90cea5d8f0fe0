"""The ladder diagram: client | wire | server, time flowing down, one line per trace row.

A `ScrollView` using the line API with an LRU strip cache (the shape of Textual's `Log`), so
only visible lines are ever drawn and 100,000-row traces scroll and step instantly.
Geometry comes from `tui.layout`, rows and bars from `trace.rows`. No simpy, no realnet.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
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
from ...trace import SegmentRecord
from ...trace.rows import Bar, Row, RowKind
from ...trace.units import ms_text
from ..layout import LadderLayout, Scale
from ..palette import ladder_css
from ..rows import gc_paused, row_segments, row_times

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


class _Arrow:
    """One arrow of the ladder: a segment from its sender's axis (line ``y0``) to the
    receiver's (``y1``). A plain slotted class: a big run has 230,000 of them, built once
    per new run, and a frozen dataclass's ``__init__`` costs four times as much."""

    __slots__ = ("y0", "y1", "src", "seg", "cls", "line", "split", "arrive")

    def __init__(self, y0: int, y1: int, src: Side, seg: SegmentRecord | None, cls: str,
                 line: str, arrive: int) -> None:
        self.y0 = y0
        self.y1 = y1
        self.src = src
        self.seg = seg
        """The segment (its label is made when a line needs it): the run's own or an
        overlay's (ghost, measured; drawn in the overlay's style)."""
        self.cls = cls
        self.line = line   # run character
        self.split = False
        """Drawn as a labelled send stub and a labelled arrival stub, not a staircase: too
        many other arrows start while it is in flight, and staircases would tangle."""
        self.arrive = arrive
        """When it arrives (µs; its send time when it never does)."""

    @property
    def label(self) -> str:
        return self.seg.label() if self.seg is not None else ""


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

    cursor: reactive[int] = reactive(0, init=False, repaint=False)
    """Index of the selected row. Moving it repaints the two lines that change
    (`watch_cursor`), never the whole widget."""
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
        self.rows: Sequence[Row] = []
        self.bars: list[Bar] = []
        self.layout_: LadderLayout = LadderLayout([], Scale())
        self._arrow_list: list[_Arrow] | None = []
        self._arrow_y0: list[int] = []
        self._max_span = 0
        self._bar_lines: dict[Side, tuple[list[int], list[int], list[int], list[Bar]]] = {}
        self._overlays: dict[str, list[SegmentRecord]] = {}
        self._cache: LRUCache[int, Strip] = LRUCache(1024)
        self._styles: dict[str, Style] = {}
        self._cols: _Cols | None = None
        self._placeholder = "simulating…"
        self.horizon: int | None = None
        """Set while a question is pending: rows end there, and segments still in flight
        run off the bottom without an arrival (set before `set_rows`)."""

    # ------------------------------------------------------------------ data
    def set_rows(self, rows: Sequence[Row], bars: list[Bar], cursor: int = 0) -> None:
        """Show a new run; the cursor moves to ``cursor`` (clamped)."""
        self.rows = rows
        self.bars = bars
        self._relayout()
        self.set_reactive(Ladder.cursor, self.validate_cursor(cursor))
        self.scroll_to_cursor(center=True)
        self.post_message(self.StepChanged(self, self.cursor, self.current_row))

    def set_overlay(self, name: str, segments: list[SegmentRecord] | None, *,
                    relayout: bool = True) -> None:
        """Extra segments drawn under the simulated ones ("measured" or "ghost"). Their
        sends and arrivals get lines of their own (`LadderLayout`'s ``extra``);
        ``relayout=False``: new rows follow at once (`set_rows` lays them all out)."""
        if segments is None:
            if self._overlays.pop(name, None) is None:
                return
        else:
            self._overlays[name] = segments
        if relayout:
            keep = self.cursor
            self._relayout()
            self.set_reactive(Ladder.cursor, self.validate_cursor(keep))
            self.scroll_to_cursor()
        else:
            self._arrow_list = None
            self._invalidate()

    @property
    def placeholder(self) -> str:
        """What an empty ladder says (simulating…, an error)."""
        return self._placeholder

    @placeholder.setter
    def placeholder(self, text: str) -> None:
        self._placeholder = text
        if not self.rows:
            self._invalidate()   # its line is in the strip cache

    def overlay(self, name: str) -> list[SegmentRecord] | None:
        return self._overlays.get(name)

    @property
    def current_row(self) -> Row | None:
        return self.rows[self.cursor] if self.rows else None

    def _relayout(self) -> None:
        extra: list[int] = []
        for name, segs in self._overlays.items():
            if name == "ghost" and not self.show_ghost:
                continue
            for seg in segs:
                extra.append(seg.t)
                if seg.arrive is not None:
                    extra.append(seg.arrive)
        self.layout_ = LadderLayout(row_times(self.rows), self.scale, extra)
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
        self._arrow_list = None
        self.virtual_size = Size(0, self.layout_.height + self._tail())
        self._invalidate()

    def _tail(self) -> int:
        """Lines drawn after the last row at a horizon: in-flight arrows and a "next?"."""
        return _TAIL if self.horizon is not None and self.rows else 0

    @property
    def _arrows(self) -> list[_Arrow]:
        """The arrows of the run and overlays shown, sorted by start line; built on first
        use after a change (a new run and its overlays arrive together: built once)."""
        if self._arrow_list is None:
            with gc_paused():
                self._build_arrows()
            assert self._arrow_list is not None
        return self._arrow_list

    def _build_arrows(self) -> None:
        lay = self.layout_
        line_of_time = lay.line_of_time
        in_flight_to = lay.height + _TAIL if self.horizon is not None else None
        arrows: list[_Arrow] = []
        for name, segs in self._overlays.items():
            cls = f"ladder--{name}"
            run = "┄" if name == "measured" else "─"
            for s in segs:
                y0 = line_of_time(s.t)
                if s.arrive is None and in_flight_to is not None:
                    y1 = in_flight_to  # still in flight: no head is ever drawn
                else:
                    y1 = max(y0, line_of_time(s.arrive if s.arrive is not None else s.t))
                # labelled like the run's own (in the overlay's colour): on a line of
                # its own an unlabelled arrow said nothing of which segment it was
                arrows.append(_Arrow(y0, y1, s.src, s, cls, run,
                                     s.arrive if s.arrive is not None else s.t))
        classes = {(side, data): f"ladder--{side.value}" + ("" if data else "-ack")
                   for side in Side for data in (True, False)}
        row_y = lay.row_y
        for i, seg in row_segments(self.rows):
            y0 = row_y[i]
            arrive = seg.arrive
            if arrive is None:
                y1 = in_flight_to if in_flight_to is not None else y0
                arrive = seg.t
            else:
                y1 = max(y0, line_of_time(arrive))
            arrows.append(_Arrow(y0, y1, seg.src, seg, classes[seg.src, seg.is_data], "─",
                                 arrive))
        arrows.sort(key=lambda a: a.y0)
        starts = [a.y0 for a in arrows]
        in_flight: list[int] = []  # ends of earlier arrows still travelling (a heap)
        for i, a in enumerate(arrows):
            while in_flight and in_flight[0] <= a.y0:
                heapq.heappop(in_flight)
            others = len(in_flight) + bisect.bisect_left(starts, a.y1) - i - 1
            heapq.heappush(in_flight, a.y1)
            if a.y1 > a.y0 + 1 and others > _MAX_CROSSINGS:
                if a.y1 <= lay.height:
                    # the arrival goes on the receiver's first row at or after it (an
                    # arrival between rows would share the line of the row before it);
                    # one still in flight at a question's horizon keeps its send stub
                    # alone (its arrival line lies past the last line, never drawn)
                    j = bisect.bisect_left(lay.times, a.arrive)
                    if j < len(lay.row_y):
                        a.y1 = max(a.y1, lay.row_y[j])
                a.split = True
        self._arrow_list = arrows
        self._arrow_y0 = starts
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
        keep = self.cursor
        self._relayout()   # the ghost's own lines come and go with it
        self.set_reactive(Ladder.cursor, self.validate_cursor(keep))
        self.scroll_to_cursor()

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
                canvas.put(2, self._placeholder, base + self._style("ladder--note"))
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
        row = self.rows[index]
        busy = frozenset((row.side,)) if row_line and row.kind is not RowKind.SEGMENT \
            else frozenset()
        self._draw_arrows(canvas, cols, line, busy)
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

    def _draw_arrows(self, canvas: _Canvas, cols: _Cols, line: int,
                     busy: frozenset[Side] = frozenset()) -> None:
        arrows = self._arrows
        lo = bisect.bisect_left(self._arrow_y0, line - self._max_span)
        hi = bisect.bisect_right(self._arrow_y0, line)
        base = self.rich_style
        labels: list[tuple[_Arrow, Style]] = []
        w = cols.wire_w
        arrivals: list[tuple[_Arrow, Style]] = []
        heads: list[tuple[_Arrow, Style, list[tuple[int, str]]]] = []
        for arrow in arrows[lo:hi]:
            if arrow.y1 < line:
                continue
            if arrow.cls == "ladder--ghost" and not self.show_ghost:
                continue
            style = base + self._style(arrow.cls)
            k, i = arrow.y1 - arrow.y0, line - arrow.y0
            if arrow.split:
                stub = _stub(w)
                if i == 0:
                    cells = [(x, arrow.line) for x in range(stub)] + [(stub, "┈")]
                elif i == k:
                    cells = [(x, arrow.line) for x in range(w - stub, w - 1)] + [(w - 1, "▶")]
                    if arrow.label:
                        arrivals.append((arrow, style))
                    # drawn last: a segment sent from the same axis on this line must not
                    # hide the arrival's head
                    heads.append((arrow, style, cells))
                    continue
                else:
                    continue
            else:
                cells = _stair(k, i, w, arrow.line)
            self._put_cells(canvas, cols, arrow, style, cells)
            if i == 0 and arrow.label:
                labels.append((arrow, style))
        for arrow, style, cells in heads:
            self._put_cells(canvas, cols, arrow, style, cells)
        self._place_labels(canvas, cols, labels, arrivals, busy)

    @staticmethod
    def _put_cells(canvas: _Canvas, cols: _Cols, arrow: _Arrow, style: Style,
                   cells: list[tuple[int, str]]) -> None:
        w = cols.wire_w
        for x, ch in cells:
            if arrow.src is Side.SERVER:
                x, ch = w - 1 - x, ch.translate(_MIRROR)
            canvas.put(cols.wire_x + x, ch, style)

    def _place_labels(self, canvas: _Canvas, cols: _Cols, sends: list[tuple[_Arrow, Style]],
                      arrivals: list[tuple[_Arrow, Style]], busy: frozenset[Side]) -> None:
        """Label the sends and split arrivals of one line so that each says what its
        segment is. Arrivals landing on one line from one side share one label naming
        them all; a send label is only shortened to its short form ("ack 14897",
        "…:2401"), never to "…": when the wire has no room for it beside the arrivals, it
        moves beside its own axis (a segment row has nothing else there); then arrivals
        move beside the axis they reach. ``busy``: sides whose column has the row's own
        label on this line."""
        w = cols.wire_w
        stub = _stub(w)
        left: _Label | None = None     # starts after the client axis
        right: _Label | None = None    # ends before the server axis
        for src in (Side.SERVER, Side.CLIENT):
            group = [(a, st) for a, st in arrivals if a.src is src]
            if not group:
                continue
            forms = _arrival_forms([a.label for a, _ in group])
            if src is Side.SERVER:      # lands on the client's axis, at the left
                left = _Label(forms, group[0][1], stub + 1, w)
            else:
                right = _Label(forms, group[0][1], 1, w - stub - 1)
        aside: dict[Side, _Label] = {}   # labels beside an axis, in its side column
        for arrow, style in sends:
            lab = _Label(_send_forms(arrow.label), style, 1,
                         w - 1 if arrow.src is Side.CLIENT else w - 2, send=arrow)
            if arrow.src is Side.CLIENT and left is None:
                left = lab
            elif arrow.src is Side.SERVER and right is None:
                right = lab
            else:
                aside[arrow.src] = lab
        while not _fit_pair(left, right):
            # no room in the wire for both: a send goes beside its own axis, else an
            # arrival's label beside the axis it reaches, where that column is free
            for want_send in (True, False):
                pair = [(left, Side.CLIENT), (right, Side.SERVER)]
                mover = next(((lab, side) for lab, side in pair if lab is not None
                              and (lab.send is not None) is want_send
                              and side not in busy and side not in aside), None)
                if mover is not None:
                    break
            if mover is None:
                _squeeze(left, right)
                break
            lab, side = mover
            aside[side] = lab
            lab.level, lab.text = 0, lab.forms[0]
            if lab is left:
                left = None
            else:
                right = None
        x0 = cols.wire_x
        if left is not None:
            canvas.put(x0 + left.lo, left.text, left.style, limit=x0 + w)
        if right is not None:
            canvas.put(x0 + right.hi - len(right.text), right.text, right.style,
                       limit=x0 + w)
        room = max(1, cols.side_w - 1)
        for side, lab in aside.items():
            text = next((f for f in lab.forms if len(f) <= room), _fit(lab.forms[-1], room))
            if side is Side.CLIENT:
                canvas.put(cols.cg_x - 1 - len(text), text, lab.style, limit=cols.cg_x)
            else:
                canvas.put(cols.sl_x + 1, text, lab.style)


class _Label:
    """One label of a ladder line: its forms (longest first), the one chosen, and the
    wire cells [lo, hi) it may use. A left label starts at ``lo``, a right one ends at
    ``hi``."""

    __slots__ = ("forms", "level", "style", "lo", "hi", "send", "text")

    def __init__(self, forms: list[str], style: Style, lo: int, hi: int,
                 send: _Arrow | None = None) -> None:
        self.forms, self.level, self.style = forms, 0, style
        self.lo, self.hi, self.send = lo, hi, send
        self.text = forms[0]

    def shorter(self) -> bool:
        if self.level + 1 >= len(self.forms):
            return False
        self.level += 1
        self.text = self.forms[self.level]
        return True


def _fit_pair(left: _Label | None, right: _Label | None) -> bool:
    """Choose the longest forms with which both labels fit side by side (a blank cell
    between them); False when even the shortest forms do not."""
    while True:
        need_l = len(left.text) if left is not None else 0
        need_r = len(right.text) if right is not None else 0
        ok_l = left is None or left.lo + need_l <= left.hi
        ok_r = right is None or right.hi - need_r >= right.lo
        apart = left is None or right is None or left.lo + need_l + 1 <= right.hi - need_r
        if ok_l and ok_r and apart:
            return True
        # shorten the one that overflows, else the longer of the two
        order = [lab for lab in (left, right) if lab is not None]
        if not ok_l and left is not None:
            order = [left] + order
        elif not ok_r and right is not None:
            order = [right] + order
        else:
            order.sort(key=lambda lab: -len(lab.text))
        if not any(lab.shorter() for lab in order):
            return False


def _squeeze(left: _Label | None, right: _Label | None) -> None:
    """Last resort on a very narrow wire: cut the arrival labels to the room there is."""
    if left is not None and right is not None:
        mid = (left.lo + right.hi) // 2
        left.hi, right.lo = mid, mid + 1
    for lab in (left, right):
        if lab is not None:
            lab.text = _fit(lab.text, max(1, lab.hi - lab.lo))


def _send_forms(label: str) -> list[str]:
    """A segment label and its short form, which still says what the segment is:
    "P. 1:1201(1200)" → "…:1201"; ". ack 14897" → "ack 14897"; "F. ack 3" → "F ack 3"."""
    forms = [label]
    flags, _, rest = label.partition(" ")
    if ":" in rest:
        forms += [f"{flags} {rest.split('(')[0]}", "…" + rest[rest.find(":"):].split("(")[0]]
    elif rest.startswith("ack "):
        bare = flags.replace(".", "")
        forms.append(f"{bare} {rest}" if bare else rest)
    return [f for i, f in enumerate(forms) if f not in forms[:i]]


def _arrival_forms(labels: list[str]) -> list[str]:
    """Forms of the label of the arrivals landing on one line from one side, longest
    first; every form names each segment ("…:2401,3601" for two data segments)."""
    shorts = [_send_forms(x)[-1] for x in labels]
    if len(labels) == 1:
        return [f"{labels[0]} arrives", labels[0], *([shorts[0]] if shorts[0] != labels[0]
                                                     else [])]
    forms = [", ".join(labels) + " arrive", ", ".join(shorts) + " arrive",
             ",".join(shorts)]
    ends = [x.rsplit(":", 1)[1] if x.startswith("…:") else None for x in shorts]
    acks = [x[4:] if x.startswith("ack ") else None for x in shorts]
    for head, nums in (("…:", ends), ("ack ", acks)):
        if all(nums):
            forms.append(head + ",".join(n for n in nums if n))
            if len(nums) > 2:   # too many to list: the first and the last, and how many
                forms += [f"{len(nums)}× {head}{nums[0]}-{nums[-1]}",
                          f"{head}{nums[0]}-{nums[-1]}"]
    if len(labels) > 2:
        # "10 arrive, last …:2" read as one phrase; say what arrives and mark the last
        what = ("ACKs" if all(x.lstrip(". ").startswith("ack ") for x in labels)
                else "segments")
        forms += [f"{len(labels)} {what} arrive (last {shorts[-1]})",
                  f"{len(labels)} {what} arrive", f"{len(labels)} arrive"]
    return forms


def _stub(wire_w: int) -> int:
    """Length of a split arrow's send and arrival stubs: a fifth of the wire, but only 2
    cells on a narrow wire (80 columns), where the labels need the room."""
    return max(2, wire_w // 5) if wire_w >= 24 else 2


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
