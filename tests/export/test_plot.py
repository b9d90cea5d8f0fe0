"""The sweep plot (`nagle_sim.export.plot`): series told apart without colour, a long
title kept on the slide."""

from __future__ import annotations

from nagle_sim.export.plot import SHAPES, TITLE_MIN, WIDTH, build_plot
from nagle_sim.export.scene import Line, Polyline, Rect, Text, text_width
from nagle_sim.sweep import Axis, CellResult, SweepResult, grid


def _result(series: int) -> SweepResult:
    axes = (Axis("sleep", ("0ms", "5ms")),
            Axis("client.tune.init_cwnd", tuple(str(n) for n in range(1, series + 1))))
    cells = [CellResult(c, {"m": float(i)}) for i, c in enumerate(grid(axes))]
    return SweepResult(source="x.toml", axes=axes, metrics=("m",), cells=cells)


def _marker_kinds(scene_items: list[object]) -> list[str]:
    """Per drawn marker, a description of its geometry (type and point count)."""
    out = []
    for item in scene_items:
        if isinstance(item, Rect) and item.w < 20:
            out.append(f"rect fill={item.fill == '#ffffff'}")
        elif isinstance(item, Polyline) and len(item.points) <= 9 and item.width < 3:
            out.append(f"poly{len(item.points)}")
        elif isinstance(item, Line) and abs(item.x2 - item.x1) <= 12 and item.width == 3:
            out.append("stroke")
    return out


def test_each_series_has_its_own_marker_shape() -> None:
    n = len(SHAPES)
    scene = build_plot(_result(n))
    kinds = _marker_kinds(scene.items)
    # every shape shows up: filled square, hollow box, three outlines (3, 4, 8 corners
    # closed), and the stroked plus and cross
    assert {"rect fill=False", "rect fill=True", "poly4", "poly5", "poly9", "stroke"} <= set(
        kinds)


def test_a_long_title_shrinks_to_fit_then_is_cut() -> None:
    long = "a sweep title " * 12
    heading = next(t for t in build_plot(_result(2), title=long).items if isinstance(t, Text))
    assert heading.size < 26 and text_width(heading.text, heading.size, bold=True) <= WIDTH
    very_long = "x" * 400
    heading = next(t for t in build_plot(_result(2), title=very_long).items
                   if isinstance(t, Text))
    assert heading.size == TITLE_MIN and heading.text.endswith("…")
    short = next(t for t in build_plot(_result(2), title="S5").items if isinstance(t, Text))
    assert short.size == 26 and short.text == "S5"
