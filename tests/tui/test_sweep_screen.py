"""A lesson's sweep (issue 15, "in the app"): the ``[lesson.sweep]`` declaration, the ``w``
key, the table matching ``nagle-sim sweep``'s, cancelling, and snapshots at 80×24 and
120×40 (look at them as PNGs: ``python -m tests.tui.snapshot_png``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from nagle_sim.lessons import Lesson, load_lesson, load_lessons, parse_sweep
from nagle_sim.scenario import Scenario, ScenarioError
from nagle_sim.sim.driver import run_sim
from nagle_sim.sweep import CellResult, SweepResult, grid, table
from nagle_sim.sweep_run import run_sweep
from nagle_sim.trace import Trace
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.sweep import (
    LETTERS,
    NO_LESSON,
    NO_SWEEP,
    QUESTIONS_FIRST,
    SweepPlot,
    SweepScreen,
    bar_chart,
    bar_style,
    cell_text,
)

from .conftest import SlowRunner, settle

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])

SCENARIO = """
title = "tiny"
[params]
sleep = "0ms"
[link]
delay_ms = 5
[client]
script = "repeat 3 { write 100; sleep {sleep} }; read 1"
[server]
script = "read 300; write 1"
[lesson]
title = "Tiny"
summary = "Three small writes."
[[lesson.question]]
at_ms = 1
prompt = "When?"
choices = ["now", "later"]
answer = 0
"""

SWEEP = """
[lesson.sweep]
vary = { sleep = ["0ms", "5ms"], "client.nodelay" = [false, true] }
metrics = ["writes_alone_pct"]
"""


def _lesson(tmp_path: Path, sweep: str = SWEEP, extra: dict[str, str] | None = None) -> Path:
    folder = tmp_path / "01-tiny"
    folder.mkdir(exist_ok=True)
    (folder / "scenario.toml").write_text(SCENARIO + sweep, "utf-8")
    (folder / "lesson.md").write_text("# Tiny\n\nThree writes.\n", "utf-8")
    for name, text in (extra or {}).items():
        (folder / name).write_text(text, "utf-8")
    return folder


def _autocork_lesson() -> Lesson:
    """The S5 lesson (NODELAY is not one packet per write), found by slug: the lesson that
    declares S5's sweep, wherever the teaching order puts it."""
    return next(x for x in load_lessons() if x.slug.endswith("nodelay-back-to-back-writes"))


# ------------------------------------------------------------------ the declaration
def test_a_declared_sweep_keeps_its_keys_in_order_and_its_values_as_vary_text(
        tmp_path: Path) -> None:
    """The first key is the plot's x axis; values read back as --vary reads them."""
    lesson = load_lesson(_lesson(tmp_path))
    assert lesson.sweep is not None
    assert [(a.key, a.values) for a in lesson.sweep.axes] == [
        ("sleep", ("0ms", "5ms")), ("client.nodelay", ("false", "true"))]
    assert lesson.sweep.metrics == ("writes_alone_pct",)
    assert lesson.sweep.where == str(tmp_path / "01-tiny" / "scenario.toml")
    assert lesson.sweep.title == "sweep of scenario.toml"


def test_a_lesson_without_a_sweep_has_none(tmp_path: Path) -> None:
    assert load_lesson(_lesson(tmp_path, sweep="")).sweep is None


def test_a_string_that_reads_as_toml_stays_a_string(tmp_path: Path) -> None:
    """A profile named "10" or a string "true" must not turn into a number or boolean."""
    where = tmp_path / "x.toml"
    sweep = parse_sweep(where, {"vary": {"sleep": ["0ms"], "client.nodelay": [True]}},
                        tmp_path, own_text=SCENARIO)
    assert sweep.axes[1].values == ("true",)
    with pytest.raises(ScenarioError, match=r"client\.nodelay"):
        parse_sweep(where, {"vary": {"sleep": ["0ms"], "client.nodelay": ["true"]}},
                    tmp_path, own_text=SCENARIO)   # "true" the string is not a boolean


def test_a_sweep_may_run_another_scenario_file_of_the_lesson(tmp_path: Path) -> None:
    other = SCENARIO.split("[lesson]")[0].replace('"tiny"', '"other"')
    folder = _lesson(tmp_path, sweep='[lesson.sweep]\nscenario = "grid.toml"\n'
                     'vary = { sleep = ["0ms", "1ms"] }\n', extra={"grid.toml": other})
    sweep = load_lesson(folder).sweep
    assert sweep is not None
    assert sweep.where == str(folder / "grid.toml")
    assert 'title = "other"' in sweep.text
    assert sweep.metrics == ("latency_p50_ms", "segments_client", "stalls")  # the CLI's


BAD = [
    ('[lesson]\nsweep = 3\n', "lesson.sweep: must be a table"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\ncolour = "red"\n',
     "lesson.sweep.colour: unknown key"),
    ('[lesson.sweep]\nmetrics = ["stalls"]\n', "lesson.sweep.vary: must be a table"),
    ('[lesson.sweep]\nvary = {}\n', "lesson.sweep.vary: must be a table"),
    ('[lesson.sweep]\nvary = { sleep = "0ms" }\n', "lesson.sweep.vary.sleep: must be a list"),
    ('[lesson.sweep]\nvary = { sleep = [] }\n', "lesson.sweep.vary.sleep: must be a list"),
    ('[lesson.sweep]\nvary = { sleep = [["0ms"]] }\n', "lesson.sweep.vary.sleep: must be"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms", "0ms"] }\n', "a value is listed twice"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms,1ms"] }\n', "holds a comma"),
    ('[lesson.sweep]\nvary = { "client." = [true] }\n', "bad key"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\nmetrics = ["speed"]\n',
     "lesson.sweep.metrics: 'speed': unknown metric"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\nmetrics = "stalls"\n',
     "lesson.sweep.metrics: must be a list"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\nscenario = "../x.toml"\n',
     "lesson.sweep.scenario: must name a .toml file in the lesson's folder"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\nscenario = "missing.toml"\n',
     "missing.toml: no such file"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\ntitle = 3\n',
     "lesson.sweep.title: must be a string"),
    ('[lesson.sweep]\nvary = { "client.nodelay" = ["maybe"] }\n',
     "(in the cell client.nodelay=maybe)"),
    ('[lesson.sweep]\nvary = { "link.delay_ms" = [1, 2, 3, 4, 5, 6, 7], '
     '"client.nodelay" = [false, true], "server.nodelay" = [false, true], '
     'sleep = ["0ms", "1ms"] }\n', "56 cells"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"], "link.delay_ms" = [1, 2, 3, 4], '
     '"client.nodelay" = [false, true] }\n', "8 lines per plot"),
    ('[lesson.sweep]\nvary = { sleep = ["0ms"] }\nmetrics = ["stalls", "stall_ms", '
     '"duration_ms", "segments_client", "segments_server"]\n', "5 metrics; at most 4"),
]


@pytest.mark.parametrize(("sweep", "expected"), BAD, ids=[b[1][:30] for b in BAD])
def test_a_bad_sweep_is_one_line_naming_the_file_and_the_key(
        tmp_path: Path, sweep: str, expected: str) -> None:
    folder = _lesson(tmp_path, sweep=sweep)
    if sweep.startswith("[lesson]\n"):   # a second [lesson] header: fold it into the first
        text = (folder / "scenario.toml").read_text("utf-8")
        (folder / "scenario.toml").write_text(
            text.replace("[lesson]\nsweep = 3\n", "").replace(
                '[lesson]\ntitle = "Tiny"', '[lesson]\nsweep = 3\ntitle = "Tiny"'), "utf-8")
    with pytest.raises(ScenarioError) as err:
        load_lesson(folder)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(folder / "scenario.toml") + ": "), message
    assert expected in message, message


def test_the_autocork_lesson_declares_the_s5_grid() -> None:
    """Lesson 20 (nodelay-back-to-back-writes): its sweep is S5's table (pause ×
    NODELAY, writes sent alone) and small enough to run while the student waits."""
    sweep = _autocork_lesson().sweep
    assert sweep is not None
    assert [a.key for a in sweep.axes] == ["sleep", "client.nodelay"]
    assert sweep.metrics[0] == "writes_alone_pct"
    assert len(grid(sweep.axes)) <= 12


# ------------------------------------------------------------------ the key
def _capture_notes(app: NagleApp) -> list[str]:
    notes: list[str] = []
    original = app.notify

    def notify(message: str, **kwargs: object) -> None:
        notes.append(message)
        original(message, **kwargs)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    return notes


async def _open_lesson(pilot: Pilot[object], lesson: Lesson) -> None:
    await pilot.app.push_screen(LessonScreen(lesson))
    await settle(pilot)


def _rows(data: DataTable[object]) -> list[list[str]]:
    return [[str(getattr(c, "plain", c)) for c in data.get_row_at(i)]
            for i in range(data.row_count)]


async def test_w_shows_the_same_table_as_nagle_sim_sweep() -> None:
    """Lesson 20 (nodelay-back-to-back-writes): every cell of the app's table is
    what `nagle-sim sweep` prints for the same grid (same runs, same metrics, same
    formatting)."""
    lesson = _autocork_lesson()
    assert lesson.sweep is not None
    expected = run_sweep(lesson.sweep.text, lesson.sweep.where, lesson.sweep.axes,
                         lesson.sweep.metrics, jobs=1, model_runner=run_sim)
    headers, rows = table(expected)
    app = NagleApp(run_sim=run_sim, ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_lesson(pilot, lesson)
        await pilot.press("w")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        data = screen.query_one(DataTable)
        assert [str(getattr(c.label, "plain", c.label)) for c in data.ordered_columns] \
            == headers
        assert _rows(data) == [[cell_text(v) for v in row] for row in rows]
        # S5's shape: with no pause NODELAY sends two of the ten writes alone (autocork
        # merges the rest behind the device queue: the lesson's own claim), Nagle almost
        # none; with pauses longer than the round trip every write leaves alone either way
        by_cell = {tuple(r[:2]): float(r[2]) for r in _rows(data)}
        assert by_cell[("0ms", "true")] == 20
        assert by_cell[("0ms", "false")] == 10      # only the first write
        # a pause longer than the 12 ms round trip: Nagle's ACK is back before each write
        assert by_cell[("15ms", "false")] == by_cell[("15ms", "true")] == 100
        assert by_cell[("10ms", "false")] < 100 == by_cell[("10ms", "true")]
        await pilot.press("m")
        await pilot.pause()
        assert screen.query_one(SweepPlot).metric == 1
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen)


async def test_w_on_a_lesson_without_a_sweep_says_so_in_one_line(
        lessons: list[Lesson]) -> None:
    app = NagleApp(run_sim=run_sim, lessons=lessons, ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = _capture_notes(app)
        await pilot.press("w")          # the lesson list: no lesson open
        await _open_lesson(pilot, lessons[0])
        await pilot.press("w")
        await pilot.pause()
        assert notes == [NO_LESSON, NO_SWEEP]
        assert isinstance(app.screen, LessonScreen)


async def test_w_waits_for_the_lessons_questions(tmp_path: Path) -> None:
    """The sweep's table answers questions: it opens only once they are answered."""
    lesson = load_lesson(_lesson(tmp_path))
    app = NagleApp(run_sim=run_sim, lessons=[lesson])
    async with app.run_test(size=(100, 30)) as pilot:
        notes = _capture_notes(app)
        await _open_lesson(pilot, lesson)
        await pilot.press("w")
        await pilot.pause()
        assert notes == [QUESTIONS_FIRST]
        assert isinstance(app.screen, LessonScreen)
        app.screen.answers[0] = 0
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, SweepScreen)
        assert app.screen.query_one(DataTable).row_count == 4


async def test_escape_cancels_a_running_sweep(tmp_path: Path) -> None:
    """A slow runner is told to stop when the student leaves; nothing is shown after."""
    lesson = load_lesson(_lesson(tmp_path))
    slow = SlowRunner()

    app = NagleApp(run_sim=run_sim, lessons=[lesson], ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_lesson(pilot, lesson)
        app.run_sim = slow
        await pilot.press("w")
        await pilot.pause()
        sweep_screen = app.screen
        assert isinstance(sweep_screen, SweepScreen)
        assert slow.started.wait(5)
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert slow.stopped.is_set()
        assert isinstance(app.screen, LessonScreen)
        assert sweep_screen.result is None


async def test_a_failing_cell_is_one_line_on_the_screen(tmp_path: Path) -> None:
    lesson = load_lesson(_lesson(tmp_path))

    def broken(scenario: Scenario) -> Trace:
        raise ValueError("the model refuses this cell")

    app = NagleApp(run_sim=run_sim, lessons=[lesson], ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_lesson(pilot, lesson)
        app.run_sim = broken
        await pilot.press("w")
        await settle(pilot)
        status = str(app.screen.query_one("#sweep-status", Static).render())
        assert status == (f"{lesson.sweep.where}: ValueError: "  # type: ignore[union-attr]
                          "the model refuses this cell")


# ------------------------------------------------------------------ the plot
def _result(values: list[list[float | None]]) -> SweepResult:
    """Two series (client.nodelay) over three x values."""
    from nagle_sim.sweep import Axis

    axes = (Axis("sleep", ("0ms", "5ms", "10ms")), Axis("client.nodelay", ("false", "true")))
    cells = [CellResult(c, {"m": values[i // 2][i % 2]}) for i, c in enumerate(grid(axes))]
    return SweepResult(source="x.toml", axes=axes, metrics=("m",), cells=cells)


def test_bar_heights_are_proportional_with_the_value_above_each_bar() -> None:
    chart = bar_chart(_result([[0, 100], [50, 25], [None, 100]]), "m", 80, 15)
    text = chart.plain
    lines = text.splitlines()
    assert len(lines) <= 15
    assert lines[0].startswith("m by sleep")
    body = lines[1:-3]                # label row + bar rows; then axis, x labels, legend
    rows = len(body) - 1
    assert rows == 10

    coloured = chart.split("\n")[1:-3]

    def full_rows(s: int) -> int:
        """Rows where series ``s`` (its colour) draws at least one whole cell: a blank, or
        its letter in the bottom row."""
        return sum(1 for line in coloured if any(
            bar_style(s) in str(span.style) and line.plain[span.start:span.end].strip()
            in ("", LETTERS[s]) for span in line.spans))

    # series 1 reaches the top (100) and series 0 half way (50); each cell is 1/rows
    assert full_rows(1) == rows
    assert full_rows(0) == rows // 2
    assert "100" in body[0] and "25" in body[rows - 3] and "50" in body[rows // 2]
    assert "–" in body[-1]            # the missing value is marked on the baseline
    # without colour: each full bar's bottom cell carries its series' letter, as the legend
    # (0 has no bar, only its value; the missing value its dash)
    assert body[-1].split() == ["│", "0", "b", "a", "b", "–", "b"]
    assert " a client.nodelay=false" in lines[-1] and " b client.nodelay=true" in lines[-1]
    assert lines[-2].split() == ["0ms", "5ms", "10ms"]
    assert "client.nodelay=false" in lines[-1] and "client.nodelay=true" in lines[-1]


def test_the_plot_fits_80_columns_and_stays_readable_when_short() -> None:
    text = bar_chart(_result([[0, 100], [50, 25], [10, 100]]), "m", 76, 6).plain
    assert max(len(line) for line in text.splitlines()) <= 76
    assert len(text.splitlines()) >= 6


# ------------------------------------------------------------------ snapshots
async def _sweep_of_the_autocork_lesson(pilot: Pilot[object]) -> None:
    await _open_lesson(pilot, _autocork_lesson())
    await pilot.press("w")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SweepScreen)
    # the sweep runs in a worker thread: wait for its result and for the table to be laid
    # out with its rows (the 60 s bound only stops a hang; a table left zero rows high was
    # a real defect, fixed in the screen), then let the screen settle
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        table = screen.query_one(DataTable)
        if screen.result is not None and table.row_count and table.region.height > 1:
            break
        await pilot.pause(0.02)
    await settle(pilot)


@SIZES
def test_sweep_screen_snapshot(snap_compare: Callable[..., bool],
                               size: tuple[int, int]) -> None:
    """Lesson 20's sweep (nodelay-back-to-back-writes): the table and the bar chart
    readable at both sizes."""
    app = NagleApp(run_sim=run_sim, ask_questions=False)
    assert snap_compare(app, terminal_size=size, run_before=_sweep_of_the_autocork_lesson)
