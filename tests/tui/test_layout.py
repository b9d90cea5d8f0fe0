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
