"""Lesson sweeps (`w` in the app): the S3/S5 lesson declares its table, small enough to
run while the student waits, and the model's cells say what its reveal says."""

from __future__ import annotations

from nagle_sim.lessons import load_lessons
from nagle_sim.sim.driver import run_sim
from nagle_sim.sweep_run import run_sweep

TABLES = next(x for x in load_lessons() if x.slug.endswith("build-the-s3-and-s5-tables"))


def test_the_tables_lesson_declares_a_small_s5_sweep() -> None:
    sweep = TABLES.sweep
    assert sweep is not None, "lesson 23 (build-the-s3-and-s5-tables) declares no [lesson.sweep]"
    cells = 1
    for axis in sweep.axes:
        cells *= len(axis.values)
    assert cells <= 12
    assert [a.key for a in sweep.axes] == ["sleep", "client.nodelay"]
    assert "writes_alone_pct" in sweep.metrics


def test_the_s5_sweep_gives_the_figures_of_the_reveal() -> None:
    """The reveal: with Nagle on 10 % at 0 and 5 ms, 80 % at 10 ms, 100 % at 15 ms; with
    NODELAY (no device queue) 100 % everywhere."""
    sweep = TABLES.sweep
    assert sweep is not None
    result = run_sweep(sweep.text, sweep.where, sweep.axes, sweep.metrics, jobs=1,
                       model_runner=run_sim)
    table = {dict(c.cell.settings)["sleep"] + " " + dict(c.cell.settings)["client.nodelay"]:
             c.model["writes_alone_pct"] for c in result.cells}
    assert table == {"0ms false": 10, "5ms false": 10, "10ms false": 80, "15ms false": 100,
                     "0ms true": 100, "5ms true": 100, "10ms true": 100, "15ms true": 100}
    prose = TABLES.prose
    assert "Press `w`" in prose and "10 % at 0 and 5 ms, 80 % at 10 ms and 100 % at 15 ms" \
        in " ".join(prose.split())
