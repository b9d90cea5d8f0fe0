"""Issue 12: at the app's normal detail every row teaches: no routine bookkeeping, and no
two rows saying the same sentence at the same moment."""

from __future__ import annotations

from nagle_sim.lessons import load_lessons
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace.rows import ROUTINE_CODES, build_rows


def _traces():  # type: ignore[no-untyped-def]
    for lesson in load_lessons():
        scenario = loads((lesson.path / "scenario.toml").read_text("utf-8"), lesson.slug)
        yield lesson.slug, run_sim(scenario)


def test_normal_detail_hides_routine_rows_and_all_shows_them() -> None:
    hidden = 0
    for slug, trace in _traces():
        normal = build_rows(trace, "normal")
        assert not [r.label for r in normal if r.event is not None and r.code in ROUTINE_CODES
                    ], slug
        assert "16 quick ACKs" not in {r.label for r in normal}, slug
        hidden += sum(1 for r in build_rows(trace, "all")
                      if r.event is not None and r.code in ROUTINE_CODES)
    assert hidden > 0  # the routine rows exist: "all" still shows them


def test_a_delayed_ack_is_one_row_not_two() -> None:
    for slug, trace in _traces():
        rows = build_rows(trace, "normal")
        for a, b in zip(rows, rows[1:], strict=False):
            assert not (a.t == b.t and a.side is b.side and a.explain == b.explain
                        and a.event is not None), (slug, a.label, b.label)


def _cwnd_lesson_with_bbr():  # type: ignore[no-untyped-def]
    lesson = next(x for x in load_lessons() if x.slug.endswith("nodelay-twenty-writes"))
    text = (lesson.path / "scenario.toml").read_text("utf-8")
    assert "nodelay = true\n" in text
    text = text.replace("nodelay = true\n", 'nodelay = true\ncongestion = "bbr"\n', 1)
    return run_sim(loads(text, lesson.slug))


def test_a_hold_bar_is_named_by_its_teaching_cause_not_the_first_routine_hold() -> None:
    """Lesson 21 (nodelay-twenty-writes) under BBR: a pacing hold comes first
    (10.047 ms), then the congestion window fills. The bar over the ten-millisecond wait
    teaches "cwnd full", not "paced"."""
    from nagle_sim.trace.rows import build_bars

    trace = _cwnd_lesson_with_bbr()
    holds = [e.code for e in trace.events if e.kind == "hold"]
    assert holds[:2] == ["PACING_HOLD", "CWND_HOLD"]  # the order the issue is about
    for detail in ("normal", "all"):
        long = [b for b in build_bars(trace, detail) if b.what == "hold"
                and b.end - b.start > 5_000]
        assert long and all(b.label.startswith("cwnd full") for b in long), detail
    # a period held only by pacing is routine: folded at normal detail, shown at "all"
    normal = [b.label for b in build_bars(trace, "normal") if b.what == "hold"]
    everything = [b.label for b in build_bars(trace, "all") if b.what == "hold"]
    assert not [label for label in normal if label.startswith("paced")]
    assert [label for label in everything if label.startswith("paced")]


def test_the_app_panel_names_the_teaching_cause_of_a_hold() -> None:
    from nagle_sim.tui.result import RunResult

    lesson = next(x for x in load_lessons() if x.slug.endswith("nodelay-twenty-writes"))
    scenario = loads((lesson.path / "scenario.toml").read_text("utf-8"), lesson.slug)
    result = RunResult.build(scenario, _cwnd_lesson_with_bbr(), "normal")
    held = [b for b in result.bars_at(15_000) if b.what == "hold"]
    assert [b.label.split(" B ")[0] for b in held] == ["cwnd full 12000"]
