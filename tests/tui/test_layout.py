"""The ladder's time axis (pure geometry, no Textual)."""

from __future__ import annotations

import re

import pytest

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


async def _cwnd_lesson(size: tuple[int, int], ask: bool):  # type: ignore[no-untyped-def]
    from nagle_sim.lessons import load_lessons
    from nagle_sim.sim.driver import run_sim
    from nagle_sim.tui.app import NagleApp
    from nagle_sim.tui.screens.lesson import LessonScreen

    lesson = next(x for x in load_lessons() if x.slug.endswith("nodelay-twenty-writes"))
    app = NagleApp(run_sim=run_sim, ask_questions=ask)
    return app, LessonScreen(lesson)


async def test_cwnd_lesson_in_flight_under_a_question_is_split_not_a_staircase() -> None:
    """Issue 12: with the question pending, in-flight arrows were never split."""
    from nagle_sim.tui.widgets.ladder import Ladder

    from .conftest import settle

    app, screen = await _cwnd_lesson((120, 40), ask=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(screen)
        await settle(pilot)
        ladder = screen.query_one(Ladder)
        assert ladder.horizon is not None
        flying = [a for a in ladder._arrows if a.y1 > ladder.layout_.height]
        assert len(flying) > 3
        assert all(a.split for a in flying)


def _number(label: str) -> str:
    """What names a segment: the end of its sequence range, the number it ACKs, or a
    SYN's sequence number ("S seq 0": it ACKs nothing)."""
    m = (re.search(r":(\d+)\(", label) or re.search(r"ack (\d+)", label)
         or re.search(r"seq (\d+)", label))
    assert m, label
    return m.group(1)


def _names(number: str, text: str) -> bool:
    return re.search(rf"(?<!\d){number}(?!\d)", text) is not None


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_every_send_and_every_arrival_is_named_on_its_line(
        size: tuple[int, int]) -> None:
    """Issue 12 at 80×24: two arrivals landing on one row shared one label (the second
    hid the first), and a pure ACK sent on such a row shrank to "…". Every lesson, every
    line: a send's own number (and "ack" for an ACK) is on its line; arrivals on one line
    from one side are each named (or, when more than two, the first and last or their
    count)."""
    from nagle_sim.lessons import load_lessons
    from nagle_sim.sim.driver import run_sim
    from nagle_sim.tui.app import NagleApp
    from nagle_sim.tui.screens.lesson import LessonScreen
    from nagle_sim.tui.widgets.ladder import Ladder

    from .conftest import settle

    app = NagleApp(run_sim=run_sim, ask_questions=False)
    groups_checked = sends_checked = crowded = 0
    async with app.run_test(size=size) as pilot:
        for lesson in load_lessons():
            screen = LessonScreen(lesson)
            await app.push_screen(screen)
            await settle(pilot)
            ladder = screen.query_one(Ladder)
            width = ladder.scrollable_content_region.width

            def text(y: int, ladder: Ladder = ladder, width: int = width) -> str:
                return "".join(seg.text for seg in ladder._render_full(y, width))

            for a in ladder._arrows:
                if a.label and a.y0 < ladder.layout_.height:
                    line = text(a.y0)
                    assert _names(_number(a.label), line), (lesson.slug, a.label, line)
                    if ":" not in a.label:
                        assert ("seq" if " seq " in a.label else "ack") in line, \
                            (lesson.slug, a.label, line)
                    sends_checked += 1
            groups: dict[tuple[int, object], list[str]] = {}
            for a in ladder._arrows:
                if a.split and a.label and a.y1 < ladder.layout_.height:
                    groups.setdefault((a.y1, a.src), []).append(a.label)
            for (y, src), labels in groups.items():
                line = text(y)
                numbers = [_number(x) for x in labels]
                named = all(_names(n, line) for n in numbers)
                if len(labels) > 2 and not named:
                    named = (_names(numbers[0], line) and _names(numbers[-1], line)) or \
                        re.search(rf"\b{len(labels)} (ACKs |segments )?arrive", line) is not None
                both_ends = any(y2 == y and s2 is not src for y2, s2 in groups)
                if both_ends and not named:
                    # segments land at both axes on this line: no room to list every one
                    # at 80 columns; each side's label still names its first arrival
                    named = _names(numbers[0], line)
                    crowded += 1
                assert named, (lesson.slug, labels, line)
                groups_checked += 1
            app.pop_screen()
            await pilot.pause()
    assert sends_checked > 100 and groups_checked > 10
    assert crowded <= groups_checked // 20, (crowded, groups_checked)


def test_delayed_ack_rows_are_purple_like_their_bar_and_the_legend_explains_stubs() -> None:
    """Issue 12: "delack timer fired" was amber, which the legend gives to probe/RTO."""
    from nagle_sim.lessons import load_lessons
    from nagle_sim.scenario import loads
    from nagle_sim.sim.driver import run_sim
    from nagle_sim.trace.rows import RowKind, build_rows
    from nagle_sim.tui.palette import legend_text
    from nagle_sim.tui.widgets.ladder import _BAR_CLASS, _row_class

    lesson = next(x for x in load_lessons() if x.slug.endswith("write-write-read"))
    scenario = loads((lesson.path / "scenario.toml").read_text("utf-8"), "03")
    rows = build_rows(run_sim(scenario), "normal")
    delack = [r for r in rows if r.kind is RowKind.TIMER and r.event is not None
              and r.event.timer == "delack"]
    assert delack and {_row_class(r) for r in delack} == {_BAR_CLASS["delack"]}
    legend = legend_text().plain
    for needle in ("┈", "arrives", "grey italic"):
        assert needle in legend


def test_many_arrivals_on_one_line_say_what_arrives() -> None:
    """Issue 12 review: "10 arrive, last …:2" read as one garbled phrase."""
    from nagle_sim.tui.widgets.ladder import _arrival_forms

    acks = _arrival_forms([f"ack {n}" for n in range(1, 11)])
    assert "10 ACKs arrive" in acks
    assert not [f for f in acks if "arrive, last" in f]
    data = _arrival_forms([". 1:101(100)", ". 101:201(100)", ". 201:301(100)"])
    assert any(f.startswith("3 segments arrive") for f in data)


def test_overlay_times_inside_a_compressed_gap_get_lines_of_their_own() -> None:
    """31.3: overlay times between two rows were interpolated onto the gap's few lines."""
    rows = [0, 29, 42_000]
    extra = [10_000 + k for k in (0, 5, 9, 12, 30, 31)]
    plain = LadderLayout(rows, Scale())
    lay = LadderLayout(rows, Scale(), extra)
    lines = [lay.line_of_time(t) for t in extra]
    assert len(set(lines)) == len(extra) and lines == sorted(lines)
    assert len({plain.line_of_time(t) for t in extra}) < len(extra)  # as it was drawn
    assert lay.row_y[:2] == plain.row_y[:2] and lay.row_y[2] > max(lines)
    assert all(lay.row_at_line(y) == 1 for y in lines)    # gap lines of the row before
    assert [lay.time_of_line(y) for y in lines] == extra
