"""The ladder's time axis (pure geometry, no Textual)."""

from __future__ import annotations

from nagle_sim.tui.layout import LadderLayout, Scale, gap_lines


def test_every_row_gets_its_own_line_even_microseconds_apart() -> None:
    layout = LadderLayout([0, 1, 2, 20], Scale())
    assert layout.row_y == [0, 1, 2, 3]


def test_compressed_mode_gives_a_40ms_stall_a_few_lines_not_thousands() -> None:
    layout = LadderLayout([0, 20, 44_020], Scale(compressed=True))
    assert 2 <= layout.row_y[2] - layout.row_y[1] - 1 <= 7
    assert gap_lines(999, Scale()) == 0


def test_linear_mode_is_proportional_to_the_zoom() -> None:
    coarse = LadderLayout([0, 44_000], Scale(compressed=False, zoom=2))   # 1 ms per line
    fine = LadderLayout([0, 44_000], Scale(compressed=False, zoom=3))     # 10 ms per line
    assert coarse.row_y[1] - 1 == 44
    assert fine.row_y[1] - 1 == 4


def test_time_and_line_map_back_and_forth() -> None:
    layout = LadderLayout([0, 10, 40_010], Scale(compressed=False, zoom=2))
    assert layout.line_of_time(10) == 1
    mid = layout.line_of_time(20_010)
    assert layout.row_y[1] < mid < layout.row_y[2]
    assert layout.row_at_line(mid) == 1
    assert 10 < layout.time_of_line(mid) < 40_010


def test_projector_rows_are_two_lines_high() -> None:
    layout = LadderLayout([0, 1], Scale(row_height=2))
    assert layout.row_y == [0, 2]
    assert layout.height == 4


async def _lesson_11(size: tuple[int, int], ask: bool):  # type: ignore[no-untyped-def]
    from nagle_sim.lessons import load_lessons
    from nagle_sim.sim.driver import run_sim
    from nagle_sim.tui.app import NagleApp
    from nagle_sim.tui.screens.lesson import LessonScreen

    lesson = next(x for x in load_lessons() if x.slug.startswith("11-"))
    app = NagleApp(run_sim=run_sim, ask_questions=ask)
    return app, LessonScreen(lesson)


async def test_lesson_11_in_flight_under_a_question_is_split_not_a_staircase() -> None:
    """Issue 12: with the question pending, in-flight arrows were never split."""
    from nagle_sim.tui.widgets.ladder import Ladder

    from .conftest import settle

    app, screen = await _lesson_11((120, 40), ask=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(screen)
        await settle(pilot)
        ladder = screen.query_one(Ladder)
        assert ladder.horizon is not None
        flying = [a for a in ladder._arrows if a.y1 > ladder.layout_.height]
        assert len(flying) > 3
        assert all(a.split for a in flying)


async def test_lesson_11_every_arrival_is_labelled_at_80x24() -> None:
    """Issue 12: an arrival label was dropped when no 7-cell gap was free."""
    from nagle_sim.tui.widgets.ladder import Ladder, _short_label

    from .conftest import settle

    app, screen = await _lesson_11((80, 24), ask=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.push_screen(screen)
        await settle(pilot)
        ladder = screen.query_one(Ladder)
        width = ladder.scrollable_content_region.width
        cols = ladder._columns(width)
        stub = max(2, cols.wire_w // 5)
        split = [a for a in ladder._arrows if a.split and a.label
                 and a.y1 < ladder.layout_.height]
        assert split
        by_line: dict[int, list[str]] = {}
        for a in split:
            by_line.setdefault(a.y1, []).append(a.label)
        for y, names in by_line.items():
            # arrivals landing on one line share a stub per side: one label at least (an
            # 18-cell wire has no room for both sides' labels and a send label, as on the
            # line where CUBIC's five ACKs meet two data arrivals and a new ACK)
            line = "".join(seg.text for seg in ladder._render_full(y, width))
            wire = line[cols.wire_x:cols.wire_x + cols.wire_w]
            shorts = {_short_label(n, max(4, min(8, cols.wire_w - stub - 4))) for n in names}
            assert any(t in wire for t in shorts | {n[:6] for n in names}), (names, wire)


def test_delayed_ack_rows_are_purple_like_their_bar_and_the_legend_explains_stubs() -> None:
    """Issue 12: "delack timer fired" was amber, which the legend gives to probe/RTO."""
    from nagle_sim.lessons import load_lessons
    from nagle_sim.render.rows import RowKind, build_rows
    from nagle_sim.scenario import loads
    from nagle_sim.sim.driver import run_sim
    from nagle_sim.tui.palette import legend_text
    from nagle_sim.tui.widgets.ladder import _BAR_CLASS, _row_class

    lesson = next(x for x in load_lessons() if x.slug.startswith("03"))
    scenario = loads((lesson.path / "scenario.toml").read_text("utf-8"), "03")
    rows = build_rows(run_sim(scenario), "normal")
    delack = [r for r in rows if r.kind is RowKind.TIMER and r.event is not None
              and r.event.timer == "delack"]
    assert delack and {_row_class(r) for r in delack} == {_BAR_CLASS["delack"]}
    legend = legend_text().plain
    for needle in ("┈", "arrives", "grey italic"):
        assert needle in legend
