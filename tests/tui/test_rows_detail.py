"""Issue 12: at the app's normal detail every row teaches: no routine bookkeeping, and no
two rows saying the same sentence at the same moment."""

from __future__ import annotations

from nagle_sim.lessons import load_lessons
from nagle_sim.render.rows import ROUTINE_CODES, build_rows
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim


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
