"""A lesson's sweep: its grid run in the model, shown as a table and a terminal bar chart.

Owns `SweepScreen` (opened with ``w`` on a lesson that declares ``[lesson.sweep]``,
docs/lessons.md), `open_sweep` (what the key does on any screen) and `bar_chart`, the
plot drawn with block characters. The cells run through the app's injected runner in a
thread, one at a time, cancellable; the grid, the metrics and the table rows are
`nagle_sim.sweep`'s, so the screen shows what ``nagle-sim sweep`` prints for the same
grid. No simpy, no realnet, no `nagle_sim.sweep.run` (its worker pool).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, ProgressBar, Static
from textual.worker import get_current_worker

from ...errors import UserError
from ...lessons import LessonSweep
from ...sweep import CellResult, SweepResult, build_cells, fmt, measure, note_of, table
from ..runners import Runner, run_cancellable
from .closing import ClosesOnce
from .lesson import LessonScreen

if TYPE_CHECKING:
    from textual.app import App

COLOURS = ("#56b4e9", "#e69f00", "#3cc47c", "#cc79a7", "#f0e442", "#ff7f50")
"""Series colours: light Okabe–Ito shades (the exports' hues) that read on a dark terminal."""
FULL = " "
"""A whole cell of a bar: a space on the series colour. Block glyphs (█ ▓ ▒) were tried:
several fonts draw them wider than a cell (bars then overlap in SVG/PNG screenshots),
while a background always fills exactly its cell. Bars in one group are told apart by
colour, by their order (the legend's, left to right), by the value above each and by the
series' letter in the bar's bottom cell (the legend's key), which a monochrome projector
or a colour-blind student can still read."""
LETTERS = "abcdefghijkl"
"""Series letters: one per series (a lesson's sweep has at most 12)."""
EIGHTHS = " ▁▂▃▄▅▆▇"
"""The partial top cell of a bar, in eighths of a cell."""


def bar_style(series: int) -> str:
    return f"on {COLOURS[series % len(COLOURS)]}"

NO_LESSON = "w shows a lesson's sweep: open a lesson first"
NO_SWEEP = "This lesson declares no sweep ([lesson.sweep] in its scenario.toml)"
QUESTIONS_FIRST = ("Answer the lesson's questions first (q lists them): the sweep's table "
                   "would give their answers away")


def open_sweep(app: App[Any]) -> None:
    """The ``w`` key: the sweep of the lesson on screen, or one line saying why not."""
    screen = app.screen
    if isinstance(screen, SweepScreen):
        return
    if not isinstance(screen, LessonScreen):
        app.notify(NO_LESSON, markup=False)
        return
    lesson = screen.lesson
    if lesson.sweep is None:
        app.notify(NO_SWEEP, markup=False)
        return
    if screen.done() < len(lesson.questions):
        app.notify(QUESTIONS_FIRST, severity="warning", markup=False)
        return
    app.push_screen(SweepScreen(lesson.sweep, runner=screen.services.run_sim,
                                lesson_title=lesson.numbered_title))


def _short(value: float | None) -> str:
    """A bar's label in at most four characters (the table has the exact value)."""
    if value is None:
        return "–"
    v = float(value)
    if abs(v) >= 10_000:
        return f"{v / 1000:.0f}k"
    if abs(v) >= 10 or v.is_integer():
        return f"{v:.0f}"
    return f"{v:.1f}"


def _ceiling(top: float) -> float:
    """The axis top: ``top`` rounded up to 1, 2, 2.5 or 5 times a power of ten."""
    if top <= 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(top))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if top <= m * mag * (1 + 1e-9))


def series_of(result: SweepResult) -> list[tuple[tuple[str, str], ...]]:
    """The combinations of the keys after the first, in grid order: one series each."""
    out: list[tuple[tuple[str, str], ...]] = []
    for c in result.cells:
        if (key := c.cell.settings[1:]) not in out:
            out.append(key)
    return out


Series = tuple[tuple[str, str], ...]
"""One bar of each group: the settings of the keys after the first."""


def bar_chart(result: SweepResult, metric: str, width: int, height: int) -> Text:
    """``metric`` against the first varied key: one group of bars per value of that key,
    one bar per combination of the others (colour; left to right in the legend's order),
    the value above each bar, then the x labels and a legend. Fits ``width`` × ``height``
    cells where it can (bars shrink to one cell wide, two rows high)."""
    chart = _Chart(result, metric, width, height)
    out = Text(no_wrap=True, overflow="crop")
    x_key = result.axes[0].key if result.axes else ""
    out.append(f"{metric}" + (f" by {x_key}" if x_key else ""), style="bold")
    out.append(f"  (top {chart.label(chart.top).strip()})\n", style="dim")
    for b in range(chart.rows, -1, -1):   # b = rows is the label row above a full bar
        chart.plot_row(out, b)
    out.append(chart.label(0.0) + " ┼", style="dim")
    out.append("─" * (chart.group_w * len(chart.xs)) + "\n", style="dim")
    out.append(" " * (chart.tick_w + 2))
    for x in chart.xs:
        out.append(" " * chart.gap)
        out.append(_fit(x, chart.group_w - chart.gap, centre=True), style="bold")
    out.append("\n")
    chart.legend(out)
    return out


def _legend_lines(legend: list[str], width: int) -> list[list[int]]:
    """The legend's entries (by index) packed into lines of at most ``width`` cells."""
    lines: list[list[int]] = []
    used = width
    for s, entry in enumerate(legend):
        if used + 3 + len(entry) + 3 > width:
            lines.append([])
            used = 0
        lines[-1].append(s)
        used += 3 + len(entry) + 3
    return lines


class _Chart:
    """`bar_chart`'s layout: the values, the scale and its ticks, the legend's lines, and
    the sizes of rows, bars and groups that fit the space."""

    def __init__(self, result: SweepResult, metric: str, width: int, height: int) -> None:
        self.xs = list(result.axes[0].values) if result.axes else ["(one cell)"]
        self.series = series_of(result)
        self.value: dict[tuple[str, Series], float | None] = {}
        for c in result.cells:
            x = c.cell.settings[0][1] if c.cell.settings else self.xs[0]
            self.value[(x, c.cell.settings[1:])] = c.model.get(metric)
        known = [float(v) for v in self.value.values() if v is not None]
        self.top = top = _ceiling(max(known, default=0.0))
        self.ticks = [top, top / 2, 0.0]
        self.tick_w = max(len(fmt(t) if not float(t).is_integer() else str(int(t)))
                          for t in self.ticks)
        self.entries = [" ".join(f"{k}={v}" for k, v in key) for key in self.series if key]
        self.lines = _legend_lines(self.entries, width)
        rows = max(2, height - 4 - len(self.lines))  # title, label row, axis, x labels
        # an even number of rows puts the middle tick exactly at top / 2
        self.rows = rows = rows - rows % 2
        plot_w = max(1, width - self.tick_w - 2)
        n, k = len(self.xs), len(self.series)
        self.gap = gap = 2 if n * (k + 2) <= plot_w else 1 if n * (k + 1) <= plot_w else 0
        # a space between bars
        self.inner = inner = 1 if k > 1 and n * (gap + 3 * k - 1) <= plot_w else 0
        self.bar_w = bar_w = max(1, min(8, (plot_w // n - gap + inner) // k - inner))
        self.group_w = gap + bar_w * k + inner * (k - 1)
        self.units_of = {key: round(min(v, top) / top * rows * 8)
                         if (v := self.value.get(key)) is not None else None
                         for key in self.value}
        self.tick_rows = {rows - 1: self.ticks[0], rows // 2 - 1: self.ticks[1]}

    def label(self, t: float) -> str:
        return (str(int(t)) if float(t).is_integer() else fmt(t)).rjust(self.tick_w)

    def plot_row(self, out: Text, b: int) -> None:
        """Row ``b`` of the plot (0 the bottom; ``rows`` the label row above a full bar):
        the axis with its tick, then every group's bars."""
        if b in self.tick_rows and b < self.rows:
            out.append(self.label(self.tick_rows[b]) + " ┤", style="dim")
        else:
            out.append(" " * self.tick_w + (" │" if b < self.rows else "  "), style="dim")
        for x in self.xs:
            out.append(" " * self.gap)
            for s, key in enumerate(self.series):
                if s:
                    out.append(" " * self.inner)
                self.bar_cell(out, b, s, x, key)
        out.append("\n")

    def bar_cell(self, out: Text, b: int, s: int, x: str, key: Series) -> None:
        """Bar ``s`` of group ``x`` in row ``b``: full, a partial top (eighths), its value
        just above it, or empty; a missing value is a dash on the axis."""
        bar_w = self.bar_w
        units = self.units_of.get((x, key))
        style = COLOURS[s % len(COLOURS)]
        if units is None:
            out.append(_fit("–" if b == 0 else "", bar_w), style="dim")
            return
        fill = min(8, max(0, units - b * 8))
        top_row = max(0, math.ceil(units / 8))
        if fill == 8 and b == 0:
            out.append(_fit(LETTERS[s % len(LETTERS)], bar_w, centre=True),
                       style=f"bold #000000 {bar_style(s)}")
        elif fill == 8:
            out.append(FULL * bar_w, style=bar_style(s))
        elif fill > 0:
            out.append(EIGHTHS[fill] * bar_w, style=style)
        elif b == top_row:
            out.append(_fit(_short(self.value[(x, key)]), bar_w), style=f"bold {style}")
        else:
            out.append(" " * bar_w)

    def legend(self, out: Text) -> None:
        """Each series' letter on its colour and its settings, line by line."""
        for number, line in enumerate(self.lines):
            for s in line:
                out.append(f" {LETTERS[s % len(LETTERS)]}",
                           style=f"bold #000000 {bar_style(s)}")
                out.append(" ")
                out.append(self.entries[s] + ("   " if s != line[-1] else ""))
            if number < len(self.lines) - 1:
                out.append("\n")


def _fit(text: str, width: int, centre: bool = False) -> str:
    text = text if len(text) <= width else text[:max(0, width - 1)] + "…" if width > 1 \
        else text[:width]
    return text.center(width) if centre else text.ljust(width)


class SweepPlot(Widget):
    """The bar chart of one metric, redrawn for the widget's size."""

    DEFAULT_CSS = """
    SweepPlot { height: 1fr; width: 1fr; padding: 0 1; }
    """

    metric: reactive[int] = reactive(0)
    """Index of the plotted metric in the result's metrics."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self.result: SweepResult | None = None

    def show(self, result: SweepResult) -> None:
        self.result = result
        self.refresh()

    def render(self) -> Text:
        if self.result is None or not self.result.metrics:
            return Text("")
        metric = self.result.metrics[self.metric % len(self.result.metrics)]
        size = self.content_size
        return bar_chart(self.result, metric, size.width, size.height)


class SweepScreen(ClosesOnce, Screen[None]):
    """The table and the plot of a lesson's sweep; the grid runs while it shows progress."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "next_metric", "Metric", show=True, id="sweep.metric",
                tooltip="Plot the sweep's next metric"),
        Binding("escape", "close", "Close", show=True, id="sweep.close",
                tooltip="Stop the sweep if it is running and go back to the lesson"),
    ]

    DEFAULT_CSS = """
    SweepScreen { layout: vertical; }
    SweepScreen #sweep-title { height: auto; padding: 0 1; }
    SweepScreen #sweep-status { height: auto; padding: 0 1; color: $text-muted; }
    SweepScreen #sweep-progress { height: 1; padding: 0 1; }
    SweepScreen #sweep-table { height: auto; max-height: 45%; }  /* set to its rows once run */
    """

    class Progress(Message):
        """A cell finished (posted from the worker thread)."""

        def __init__(self, done: int, total: int) -> None:
            super().__init__()
            self.done = done
            self.total = total

    class Finished(Message):
        def __init__(self, result: SweepResult) -> None:
            super().__init__()
            self.result = result

    class Failed(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, sweep: LessonSweep, *, runner: Runner, lesson_title: str = "") -> None:
        super().__init__()
        self.sweep = sweep
        self.runner = runner
        self.lesson_title = lesson_title
        self.result: SweepResult | None = None
        self.cells = math.prod(len(a.values) for a in sweep.axes)

    def compose(self) -> ComposeResult:
        title = Text(self.sweep.title, style="bold")
        if self.lesson_title:
            title.append(f"  — {self.lesson_title}", style="dim")
        yield Static(title, id="sweep-title")
        yield Static(Text(f"Running {self.cells} cells in the model…"), id="sweep-status")
        yield ProgressBar(total=self.cells, show_eta=False, id="sweep-progress")
        # no cursor: a highlighted row would read as the answer; arrows still scroll
        yield DataTable(id="sweep-table", cursor_type="none", zebra_stripes=True)
        yield SweepPlot(id="sweep-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sweep-table").display = False
        self._run()

    @work(thread=True, exclusive=True, group="sweep")
    def _run(self) -> None:
        worker = get_current_worker()
        sweep = self.sweep
        try:
            cells = build_cells(sweep.text, sweep.where, sweep.axes)
            done: list[CellResult] = []
            for cell, scenario in cells:
                if worker.is_cancelled:
                    return
                trace = run_cancellable(self.runner, scenario, lambda: worker.is_cancelled)
                if worker.is_cancelled:
                    return
                done.append(CellResult(cell, measure(trace, sweep.metrics), note_of(trace)))
                self.post_message(self.Progress(len(done), len(cells)))
        except UserError as exc:
            self.post_message(self.Failed(str(exc)))
            return
        except Exception as exc:  # the model refusing a cell is the lesson's error, not a crash
            if not worker.is_cancelled:
                self.post_message(self.Failed(f"{sweep.where}: {type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Finished(SweepResult(source=sweep.where, axes=sweep.axes,
                                                    metrics=sweep.metrics, cells=done)))

    @on(Progress)
    def _progress(self, message: Progress) -> None:
        self.query_one(ProgressBar).update(progress=message.done, total=message.total)

    @on(Finished)
    def _finished(self, message: Finished) -> None:
        self.result = message.result
        self.query_one(ProgressBar).display = False
        headers, rows = table(message.result)
        data = self.query_one(DataTable)
        keys = len(message.result.axes)
        for i, h in enumerate(headers):
            data.add_column(Text(h, justify="right" if i >= keys and h != "note" else "left"),
                            key=f"c{i}")
        for row in rows:
            data.add_row(*(Text(cell_text(v), justify="right" if i >= keys else "left")
                           for i, v in enumerate(row)))
        # a definite height (the header and every row, capped by max-height): with
        # ``height: auto`` the table was sometimes laid out once, before its rows were
        # measured, and stayed zero rows high at 80×24 (one snapshot run in four)
        data.styles.height = len(rows) + (1 if data.show_header else 0)
        data.display = True
        self.query_one(SweepPlot).show(message.result)
        self._say()

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        self.query_one(ProgressBar).display = False
        self.query_one("#sweep-status", Static).update(Text(message.text, style="bold red"))

    def _say(self) -> None:
        if self.result is None:
            return
        metrics = self.result.metrics
        shown = metrics[self.query_one(SweepPlot).metric % len(metrics)]
        text = Text(f"{len(self.result.cells)} cells, run in the model. Plotted: ")
        text.append(shown, style="bold")
        if len(metrics) > 1:
            text.append(f" ({self.query_one(SweepPlot).metric % len(metrics) + 1}/"
                        f"{len(metrics)}; m for the next)")
        self.query_one("#sweep-status", Static).update(text)

    def action_next_metric(self) -> None:
        plot = self.query_one(SweepPlot)
        if self.result is not None and self.result.metrics:
            plot.metric = (plot.metric + 1) % len(self.result.metrics)
            self._say()

    def action_close(self) -> None:
        self.workers.cancel_group(self, "sweep")
        self.dismiss()


def cell_text(value: object) -> str:
    """A table cell as ``nagle-sim sweep`` prints it: metric values with `fmt`, booleans
    as TOML writes them, a missing value as –."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return fmt(value)
    return "–" if value is None else str(value)
