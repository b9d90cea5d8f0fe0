"""Big runs in the app: rows worded only when read, a progress bar while simulating, and
leaving the screen stops the simulation (issue 17's app bullet; the timings are in
benchmarks/bench_tui.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import ProgressBar

from nagle_sim.lessons import load_lessons
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace.rows import DETAIL_LEVELS, build_rows
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.rows import RowList, row_segments, row_times
from nagle_sim.tui.screens.run import RunScreen
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import SlowRunner, settle

NODELAY = """title = "NODELAY x{n}"
[client]
nodelay = true
script = \"\"\"
repeat {n} {{
  repeat 15 {{ write 2 }}
  read 2
}}
\"\"\"
[server]
script = \"\"\"
repeat {n} {{
  read 30
  write 2
}}
\"\"\"
"""


@pytest.mark.parametrize("detail", DETAIL_LEVELS)
def test_a_row_list_is_the_rows_build_rows_makes(detail: str) -> None:
    for lesson in load_lessons():
        trace = run_sim(lesson.scenario)
        built = build_rows(trace, detail)
        rows = RowList(trace, detail)
        assert len(rows) == len(built)
        assert row_times(rows) == [r.t for r in built]
        assert [(i, id(s)) for i, s in row_segments(rows)] == \
            [(i, id(r.segment)) for i, r in enumerate(built) if r.segment is not None]
        assert rows == built, (lesson.slug, detail)
        assert rows[-1] == built[-1] and rows[1:4] == built[1:4]


def test_a_row_list_words_a_row_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import nagle_sim.tui.rows as rows_module

    made: list[object] = []
    real = rows_module.make_row
    monkeypatch.setattr(rows_module, "make_row", lambda item: made.append(item) or real(item))
    rows = RowList(run_sim(loads(NODELAY.format(n=20), "nodelay.toml")))
    assert len(rows) > 500 and made == []
    first = rows[7]
    assert rows[7] is first and len(made) == 1
    with pytest.raises(IndexError):
        rows[len(rows)]


async def test_opening_and_stepping_a_big_run_words_only_the_rows_it_shows(
        tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text(NODELAY.format(n=400))
    app = NagleApp(run_sim=run_sim, path=str(path), ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.result is not None
        rows = screen.result.rows
        assert isinstance(rows, RowList) and len(rows) > 20_000
        for key in ("right", "right", "end", "left", "home"):
            await pilot.press(key)
        await pilot.pause()
        ladder = screen.query_one(Ladder)
        assert ladder.cursor == 0
        # the lines drawn (top and bottom screens) and the selected rows, not 20,000
        assert len(rows._made) < 4 * ladder.size.height


async def test_a_long_simulation_shows_progress_and_escape_stops_it() -> None:
    from nagle_sim.tui.screens.lesson_list import LessonListScreen

    slow = SlowRunner()

    app = NagleApp(run_sim=slow, ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, LessonListScreen)
        await pilot.press("enter")
        assert slow.started.wait(5)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        await pilot.pause(1.2)
        assert screen.query_one("#progress", ProgressBar).display
        ladder = screen.query_one(Ladder)
        drawn = "".join(segment.text for segment in ladder.render_line(1))
        assert "simulating… " in drawn and " s (esc goes back" in drawn, drawn
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert slow.stopped.is_set()
        assert isinstance(app.screen, LessonListScreen)
