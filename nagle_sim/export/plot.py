"""A sweep's results as a line chart `Scene` (SVG or PNG), sized for a slide.

Owns: the chart layout — x is the first varied key (numbers sharing one unit, such as
``0ms,5ms,15ms``, placed to scale; other values evenly spaced, in the order given), one
series per combination of the other keys, one panel per metric headed by what the metric
measures; each cell a marker, nothing drawn between cells (a line from 10 % at 5 ms to
100 % at 15 ms read as 55 % at 10 ms, where the run gives 80 %: issue 31.8); with real
runs the kernel's mean a hollow marker beside the model's filled one, its spread as a
whisker. Must not import textual, simpy, asyncio or PIL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .scene import GRID, INK, MUTED, Line, Polyline, Rect, Scene, Text, text_width

if TYPE_CHECKING:      # for the type only: drawing never runs a sweep
    from ..sweep import SweepResult

# Okabe–Ito colours: distinguishable with the common colour-vision deficiencies and when
# projected (yellow is left out: it vanishes on white). Its orange and vermillion are left
# out too: orange means measured on the kernel in every other picture (`scene.OVERLAY`),
# and a model-only series drawn in it read as a kernel run (issue 31); Tol's indigo and
# wine take their places.
SERIES = ("#0072b2", "#009e73", "#cc79a7", "#332288", "#56b4e9", "#882255", "#000000")
MAX_SERIES = 12
"""More lines than this on one panel cannot be told apart (the palette has 7 colours)."""
WIDTH = 1200
PANEL_H = 430
LEFT = 130
RIGHT = 40
TOP = 96
LABEL = 19
TICK = 17


def _nice(lo: float, hi: float, target: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag)
    first = math.floor(lo / step) * step
    ticks = []
    v = first
    while v <= hi + step * 0.5:
        ticks.append(round(v, 10))
        v += step
    return ticks


def build_plot(result: SweepResult, title: str | None = None) -> Scene:
    """The chart of ``result``: one panel per metric, stacked, then the legend."""
    xs_text = list(result.axes[0].values) if result.axes else ["(one cell)"]
    series_keys: list[tuple[tuple[str, str], ...]] = []
    for c in result.cells:
        key = c.cell.settings[1:]
        if key not in series_keys:
            series_keys.append(key)
    legend_rows = len(series_keys) if result.axes[1:] else 0
    legend_h = (legend_rows + (1 if result.real else 0)) * 28 + (16 if legend_rows else 0)
    height = TOP + len(result.metrics) * PANEL_H + legend_h + 30
    scene = Scene(WIDTH, height, title=title or result.source)
    heading, size = _fit_title(title or f"sweep of {result.source}")
    scene.add(Text(WIDTH / 2, 40, heading, size=size, bold=True, anchor="middle"))
    sub = "model" + ((" (filled) vs kernel (hollow, " + (
        f"mean of {result.repeat}, whisker ±1 sd)" if result.repeat > 1 else "one run)"))
        if result.real else "") + "; one marker per cell run, nothing between them"
    scene.add(Text(WIDTH / 2, 70, sub, size=LABEL, color=MUTED, anchor="middle"))
    xs = x_positions(xs_text)
    for p, metric in enumerate(result.metrics):
        _panel(scene, result, metric, TOP + p * PANEL_H, xs_text, series_keys, xs)
    _plot_legend(scene, result, series_keys, TOP + len(result.metrics) * PANEL_H)
    return scene


_PLOT_W = WIDTH - LEFT - RIGHT


_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-zµ%]*)\s*$")


def numeric_axis(values: Sequence[str]) -> tuple[list[float], str] | None:
    """The values as numbers and their shared unit (``0ms,5ms,15ms`` → [0, 5, 15], "ms"),
    or None when one is not a number, the units differ, or fewer than two differ."""
    nums: list[float] = []
    units = set()
    for v in values:
        m = _NUMBER.match(v)
        if m is None:
            return None
        nums.append(float(m.group(1)))
        units.add(m.group(2))
    if len(units) != 1 or len(set(nums)) < 2:
        return None
    return nums, units.pop()


def x_positions(values: Sequence[str]) -> list[float]:
    """Where each value of the first key sits: to scale when they are numbers in one unit
    (5 ms is a third of the way from 0 to 15 ms), else evenly spaced in the order given."""
    n = len(values)
    axis = numeric_axis(values)
    if axis is not None:
        nums = axis[0]
        lo, hi = min(nums), max(nums)
        return [LEFT + 40 + (v - lo) / (hi - lo) * (_PLOT_W - 80) for v in nums]
    return [LEFT + _PLOT_W / 2 if n == 1 else LEFT + 40 + i * (_PLOT_W - 80) / (n - 1)
            for i in range(n)]


def metric_heading(metric: str) -> str:
    """What a panel's value axis measures, in words (the metric's own description):
    "writes_alone_pct" alone said nothing to a slide's audience (the key is written small
    under the panel, for whoever repeats the sweep)."""
    from ..sweep.metrics import METRICS
    known = METRICS.get(metric)
    if known is None:
        return metric
    return f"{known.doc[:1].upper()}{known.doc[1:]}"


def _panel(scene: Scene, result: SweepResult, metric: str, top: float, xs_text: list[str],
           series_keys: list[tuple[tuple[str, str], ...]], xs: list[float]) -> None:
    """One metric's panel: its value axis from 0 (or below) to the largest value, the
    first key's values along x, then each series."""
    bottom = top + PANEL_H - 90
    values: list[float] = []
    for c in result.cells:
        if (v := c.model.get(metric)) is not None:
            values.append(v)
        if result.real:
            mean, spread = c.real_stat(metric)
            if mean is not None:
                values += [mean - (spread or 0), mean + (spread or 0)]
    lo = min(0.0, min(values, default=0.0))
    hi = max(values, default=1.0)
    ticks = _nice(lo, hi)
    lo, hi = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1

    def y_at(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top - 10)

    for t in ticks:
        y = y_at(t)
        scene.add(Line(LEFT, y, WIDTH - RIGHT, y, color=GRID, width=1),
                  Text(LEFT - 10, y + 6, f"{t:g}", size=TICK, anchor="end", mono=True))
    heading, size = _fit(metric_heading(metric), WIDTH - LEFT - RIGHT + 60, LABEL + 2,
                         HEADING_MIN, bold=True)
    scene.add(Line(LEFT, bottom, WIDTH - RIGHT, bottom, color=INK, width=1.5),
              Text(LEFT - 60, top - 8, heading, size=size, bold=True))
    for x, label in zip(xs, xs_text, strict=True):
        scene.add(Line(x, bottom, x, bottom + 6, color=INK, width=1.5),
                  Text(x, bottom + 26, label, size=TICK, anchor="middle", mono=True))
    if result.axes:
        axis = numeric_axis(xs_text)
        name = result.axes[0].key + (f" ({axis[1]}, to scale)" if axis and axis[1] else
                                     " (to scale)" if axis else "")
        scene.add(Text(LEFT + _PLOT_W / 2, bottom + 56, name, size=LABEL,
                       anchor="middle", color=MUTED))
    scene.add(Text(LEFT - 60, bottom + 56, f"y: {metric}", size=TICK, color=MUTED,
                   mono=True))
    for s, key in enumerate(series_keys):
        # Series that share a value would hide each other: dodge each a few pixels.
        dodge = (s - (len(series_keys) - 1) / 2) * 7
        _panel_series(scene, result, metric, s, key, dodge, xs, y_at)


def _panel_series(scene: Scene, result: SweepResult, metric: str, s: int,
                  key: tuple[tuple[str, str], ...], dodge: float, xs: list[float],
                  y_at: Callable[[float], float]) -> None:
    """Series ``s`` (the cells whose other keys are ``key``): the model's line, and with
    real runs the kernel's mean dashed beside it with its spread as a whisker."""
    color = SERIES[s % len(SERIES)]
    cells = [c for c in result.cells if c.cell.settings[1:] == key]
    model_pts = [(xs[i] + dodge, y_at(v)) for i, c in enumerate(cells)
                 if (v := c.model.get(metric)) is not None]
    _series(scene, model_pts, color, dash=None, shape=s)
    if result.real:
        real_pts = []
        for i, c in enumerate(cells):
            mean, spread = c.real_stat(metric)
            if mean is None:
                continue
            x = xs[i] + dodge + 4   # a little right of the model point: both stay visible
            real_pts.append((x, y_at(mean)))
            if spread:
                scene.add(Line(x, y_at(mean - spread), x, y_at(mean + spread),
                               color=color, width=2))
        _series(scene, real_pts, color, dash=(8.0, 6.0), shape=s)


def _plot_legend(scene: Scene, result: SweepResult,
                 series_keys: list[tuple[tuple[str, str], ...]], y: float) -> None:
    """One line per series (when there are keys after the first), then model vs kernel."""
    if result.axes[1:]:
        for s, key in enumerate(series_keys):
            color = SERIES[s % len(SERIES)]
            text = ", ".join(f"{k}={v}" for k, v in key)
            scene.add(Text(LEFT + 56, y, text, size=LABEL))
            _marker(scene, LEFT + 22, y - 6, s, color, hollow=False)
            y += 28
    if result.real:
        gap = text_width("model", LABEL) + 50
        _marker(scene, LEFT + 22, y - 6, 0, INK, hollow=False)
        _marker(scene, LEFT + 56 + gap + 22, y - 6, 0, INK, hollow=True)
        scene.add(Text(LEFT + 56, y, "model", size=LABEL),
                  Text(LEFT + 56 + gap + 56, y, "kernel", size=LABEL))


HEADING_MIN = 12.0
"""A panel's heading (the metric in words) shrinks to this before it is cut."""
TITLE_MAX, TITLE_MIN = 26.0, 15.0
"""The title's font size: as large as fits the slide's width, never below the minimum
(then cut with an ellipsis)."""


def _fit_title(text: str) -> tuple[str, float]:
    return _fit(text, WIDTH - 40, TITLE_MAX, TITLE_MIN, bold=True)


def _fit(text: str, room: float, biggest: float, smallest: float, *,
         bold: bool) -> tuple[str, float]:
    """``text`` as large as fits ``room`` px, never below ``smallest`` (then cut with an
    ellipsis)."""
    size = max(smallest, min(biggest, biggest * room / max(1.0, text_width(
        text, biggest, bold=bold))))
    while len(text) > 1 and text_width(text, size, bold=bold) > room + 0.5:   # float noise
        text = text[:-2] + "…"
    return text, size


SHAPES = ("square", "diamond", "triangle", "circle", "plus", "cross", "box")
"""One marker shape per series, so lines are told apart without colour (a monochrome
projector, a colour-blind reader); with the 7 colours, 12 series stay distinct."""


def _marker(scene: Scene, x: float, y: float, series: int, color: str,
            hollow: bool) -> None:
    """Series ``series``'s marker at (x, y); the kernel's points are drawn hollow."""
    shape = SHAPES[series % len(SHAPES)]
    r = 6.0
    if shape in ("square", "box"):
        filled = shape == "square" and not hollow
        scene.add(Rect(x - r + 1, y - r + 1, 2 * r - 2, 2 * r - 2,
                       fill=color if filled else "#ffffff", stroke=color, width=2.5))
        return
    if shape == "plus":
        scene.add(Line(x - r, y, x + r, y, color=color, width=3),
                  Line(x, y - r, x, y + r, color=color, width=3))
        return
    if shape == "cross":
        scene.add(Line(x - r, y - r, x + r, y + r, color=color, width=3),
                  Line(x - r, y + r, x + r, y - r, color=color, width=3))
        return
    corners = {"diamond": 4, "triangle": 3, "circle": 8}[shape]
    start = -math.pi / 2
    pts = [(x + (r + 1) * math.cos(start + 2 * math.pi * k / corners),
            y + (r + 1) * math.sin(start + 2 * math.pi * k / corners))
           for k in range(corners + 1)]
    if not hollow:      # a filled look: a smaller copy inside the outline
        inner = [(x + (px - x) * 0.45, y + (py - y) * 0.45) for px, py in pts]
        scene.add(Polyline(tuple(inner), color=color, width=4))
    scene.add(Polyline(tuple(pts), color=color, width=2.5))


def _series(scene: Scene, pts: list[tuple[float, float]], color: str,
            dash: tuple[float, float] | None, shape: int = 0) -> None:
    """A series' markers (hollow for the kernel's, ``dash`` given); no line joins them:
    the sweep ran only these cells, and a line would claim the values between."""
    for x, y in pts:
        _marker(scene, x, y, shape, color, hollow=dash is not None)
