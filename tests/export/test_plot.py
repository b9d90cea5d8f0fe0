"""The sweep plot (`nagle_sim.export.plot`): series told apart without colour, a long
title kept on the slide."""

from __future__ import annotations

from pathlib import Path

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


def _sleep_result() -> SweepResult:
    axes = (Axis("sleep", ("0ms", "5ms", "15ms")), Axis("client.nodelay", ("false", "true")))
    values = {("0ms", "false"): 10.0, ("5ms", "false"): 10.0, ("15ms", "false"): 100.0}
    cells = [CellResult(c, {"writes_alone_pct": values.get(
        tuple(v for _, v in c.settings), 100.0)}) for c in grid(axes)]
    return SweepResult(source="examples/s5.toml", axes=axes, metrics=("writes_alone_pct",),
                       cells=cells)


def test_numbers_along_x_are_to_scale_and_cells_are_not_joined() -> None:
    """31.8: 0/5/15 ms were drawn evenly spaced and joined by lines: the line from 10 % at
    5 ms to 100 % at 15 ms read as 55 % at 10 ms, where the model gives 80 %."""
    scene = build_plot(_sleep_result())
    ticks = {t.text: t.x for t in scene.items if isinstance(t, Text) and t.text.endswith("ms")
             and t.mono}
    assert set(ticks) == {"0ms", "5ms", "15ms"}
    assert abs((ticks["5ms"] - ticks["0ms"]) / (ticks["15ms"] - ticks["0ms"]) - 1 / 3) < 1e-9
    # nothing spans from one cell to another: every polyline is a marker's outline
    for item in scene.items:
        if isinstance(item, Polyline):
            xs = [p[0] for p in item.points]
            assert max(xs) - min(xs) < 20, item
    texts = [t.text for t in scene.items if isinstance(t, Text)]
    assert any(t.startswith("Share of client writes whose bytes left") for t in texts)
    assert "sleep (ms, to scale)" in texts
    # words as values stay evenly spaced, in the order given
    modes = build_plot(SweepResult(source="x", axes=(Axis("mode", ("plain", "cork", "x")),),
                                   metrics=("m",), cells=[CellResult(c, {"m": 1.0}) for c in
                                                          grid((Axis("mode", ("plain", "cork",
                                                                              "x")),))]))
    xs = [t.x for t in modes.items if isinstance(t, Text) and t.text in ("plain", "cork", "x")]
    assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 1e-9


def test_the_plot_is_titled_by_the_scenario_not_its_path(tmp_path: Path) -> None:
    from nagle_sim.__main__ import main
    examples = Path(__file__).parents[2] / "examples"
    svg = tmp_path / "s5.svg"
    assert main(["sweep", str(examples / "s5.toml"), "--vary", "sleep=0ms,15ms",
                 "--metric", "writes_alone_pct", "--svg", str(svg)]) == 0
    text = svg.read_text("utf-8")
    assert "S5: ten 1200-byte writes" in text and "sweep of" not in text


def _orange(color: str | None) -> bool:
    """A saturated hue between red and yellow: what the other pictures call the kernel."""
    import colorsys
    if not color or not color.startswith("#") or len(color) != 7:
        return False
    r, g, b = (int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    return 15 <= h * 360 <= 50 and s >= 0.5 and v >= 0.5


def test_a_model_only_sweep_draws_nothing_in_the_kernels_orange() -> None:
    """Orange is the kernel in every picture (`scene.OVERLAY`); the sweep drew its second
    and fifth model series in Okabe–Ito's vermillion and orange."""
    from nagle_sim.export.plot import MAX_SERIES
    from nagle_sim.export.scene import OVERLAY
    assert _orange(OVERLAY)
    scene = build_plot(_result(MAX_SERIES))
    colours = {c for item in scene.items
               for c in (getattr(item, "color", None), getattr(item, "fill", None),
                         getattr(item, "stroke", None))}
    assert len(colours) > 5, colours      # the series were drawn, in several colours
    assert not [c for c in colours if _orange(c)], colours
