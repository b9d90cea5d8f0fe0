"""A sweep's results as a line chart `Scene` (SVG or PNG), sized for a slide.

Owns: the chart layout — x is the first varied key (its values evenly spaced, in the order
given), one series per combination of the other keys, one panel per metric; with real
runs the kernel's mean is drawn dashed beside the model's solid line, its spread as a
whisker. Must not import textual, simpy, asyncio or PIL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from .scene import GRID, INK, MUTED, Line, Polyline, Rect, Scene, Text, text_width

if TYPE_CHECKING:      # for the type only: drawing never runs a sweep
    from ..sweep import SweepResult

# Okabe–Ito colours: distinguishable with the common colour-vision deficiencies and when
# projected (yellow is left out: it vanishes on white).
SERIES = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
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
    sub = "model" + ((" (solid) vs kernel (dashed, " + (
        f"mean of {result.repeat}, whisker ±1 sd)" if result.repeat > 1 else "one run)"))
        if result.real else "")
    scene.add(Text(WIDTH / 2, 70, sub, size=LABEL, color=MUTED, anchor="middle"))
    for p, metric in enumerate(result.metrics):
        _panel(scene, result, metric, TOP + p * PANEL_H, xs_text, series_keys)
    _plot_legend(scene, result, series_keys, TOP + len(result.metrics) * PANEL_H)
    return scene


_PLOT_W = WIDTH - LEFT - RIGHT


def _x_at(i: int, n: int) -> float:
    """Where the ``i``-th of ``n`` values of the first key sits, evenly spaced."""
    return LEFT + _PLOT_W / 2 if n == 1 else LEFT + 40 + i * (_PLOT_W - 80) / (n - 1)


def _panel(scene: Scene, result: SweepResult, metric: str, top: float, xs_text: list[str],
           series_keys: list[tuple[tuple[str, str], ...]]) -> None:
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
    scene.add(Line(LEFT, bottom, WIDTH - RIGHT, bottom, color=INK, width=1.5),
              Text(LEFT, top - 8, metric, size=LABEL + 2, bold=True))
    for i, label in enumerate(xs_text):
        scene.add(Text(_x_at(i, len(xs_text)), bottom + 26, label, size=TICK,
                       anchor="middle", mono=True))
    if result.axes:
        scene.add(Text(LEFT + _PLOT_W / 2, bottom + 56, result.axes[0].key, size=LABEL,
                       anchor="middle", color=MUTED))
    for s, key in enumerate(series_keys):
        # Series that share a value would hide each other: dodge each a few pixels.
        dodge = (s - (len(series_keys) - 1) / 2) * 7
        _panel_series(scene, result, metric, s, key, dodge, len(xs_text), y_at)


def _panel_series(scene: Scene, result: SweepResult, metric: str, s: int,
                  key: tuple[tuple[str, str], ...], dodge: float, n: int,
                  y_at: Callable[[float], float]) -> None:
    """Series ``s`` (the cells whose other keys are ``key``): the model's line, and with
    real runs the kernel's mean dashed beside it with its spread as a whisker."""
    color = SERIES[s % len(SERIES)]
    cells = [c for c in result.cells if c.cell.settings[1:] == key]
    model_pts = [(_x_at(i, n) + dodge, y_at(v)) for i, c in enumerate(cells)
                 if (v := c.model.get(metric)) is not None]
    _series(scene, model_pts, color, dash=None, shape=s)
    if result.real:
        real_pts = []
        for i, c in enumerate(cells):
            mean, spread = c.real_stat(metric)
            if mean is None:
                continue
            x = _x_at(i, n) + dodge + 4   # a little right of the model point: both stay visible
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
            scene.add(Line(LEFT, y - 6, LEFT + 44, y - 6, color=color, width=3),
                      Text(LEFT + 56, y, text, size=LABEL))
            _marker(scene, LEFT + 22, y - 6, s, color, hollow=False)
            y += 28
    if result.real:
        scene.add(Line(LEFT, y - 6, LEFT + 44, y - 6, color=INK, width=3),
                  Text(LEFT + 56, y, "model", size=LABEL),
                  Line(LEFT + 56 + text_width("model", LABEL) + 30, y - 6,
                       LEFT + 100 + text_width("model", LABEL) + 30, y - 6, color=INK,
                       width=3, dash=(8.0, 6.0)),
                  Text(LEFT + 112 + text_width("model", LABEL) + 30, y, "kernel",
                       size=LABEL))


TITLE_MAX, TITLE_MIN = 26.0, 15.0
"""The title's font size: as large as fits the slide's width, never below the minimum
(then cut with an ellipsis)."""


def _fit_title(text: str) -> tuple[str, float]:
    room = WIDTH - 40
    size = max(TITLE_MIN, min(TITLE_MAX, TITLE_MAX * room / max(1.0, text_width(
        text, TITLE_MAX, bold=True))))
    while len(text) > 1 and text_width(text, size, bold=True) > room + 0.5:   # float noise
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
    if len(pts) > 1:
        scene.add(Polyline(tuple(pts), color=color, width=3, dash=dash))
    for x, y in pts:
        _marker(scene, x, y, shape, color, hollow=dash is not None)
