"""Predict, then reveal, on every shipped lesson: when a question opens, no visible text
of the lesson screen mentions anything that happens after the question's time.

The forbidden strings come from the run itself: the ladder time of every later row, the
labels and sentences of later rows that no earlier row shares, the full labels of holds
and timers that are still running, and the run's summary (latency, stall lengths). The
lesson's prose is held to the specific ones (numbers, whole sentences): a concept's name
such as "delayed ACK" may appear in a setup, its timing may not.
"""

from __future__ import annotations

import re

import pytest
from textual.widgets import Markdown, Static

from nagle_sim.lessons import Lesson, Question, load_lessons
from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.result import RunResult, fmt_ms
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.question import QuestionScreen
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import settle

SHIPPED = load_lessons()


_QUANTITY = re.compile(r"\d[\d,.]*(?:[-–]\d[\d,.]*)?\s*(?:ms|bytes?|-byte|segments?)\b")
_FORMULA = re.compile(r"[\w]+\([^()]*\)")
REVIEW_PHRASES = {
    # what the review found answering a question before it was asked (issue 12)
    "one round trip later", "40-44 ms per request", "delayed-ACK timer is 200 ms",
    "max(RTO, 200 ms)", "fires in", "(timer 200 ms)", "about 40 ms",
}

PREMISES = {
    # numbers of a right choice that are the scenario's givens, which the setup must state
    "02-nagle-basics": {"500 ms"},  # the link's one-way delay towards the server
    "19-bulk-transfer": {"20 ms"},  # the round trip
}


def answer_keys(question: Question) -> set[str]:
    """The numbers and formulas of a question's right choice that neither its prompt nor a
    wrong choice says: text showing one of them before the answer gives the answer away.
    Never whitelisted by what an earlier row said (an armed timer's "fires in 42.0 ms" is
    an earlier row, and a leak)."""
    right = question.choices[question.answer]
    others = " ".join([question.prompt, *(c for i, c in enumerate(question.choices)
                                          if i != question.answer)])
    keys = set(_QUANTITY.findall(right)) | set(_FORMULA.findall(right))
    return {k.strip() for k in keys if k.strip() not in others}


def test_answer_keys_name_the_numbers_of_the_right_choice() -> None:
    q = next(q for lesson in SHIPPED if lesson.slug.endswith("-msg-more") for q in lesson.questions)
    assert "210-220 ms" in answer_keys(q)


def test_lesson_summaries_pose_the_topic_without_the_result() -> None:
    """Issue 12: the lesson list shows every summary before any question is asked."""
    for lesson in SHIPPED:
        keys = set(REVIEW_PHRASES)
        for q in lesson.questions:
            keys |= answer_keys(q)
        leaks = sorted(k for k in keys if k in lesson.summary)
        assert not leaks, f"{lesson.slug}: summary gives away {leaks}"


def forbidden_after(result: RunResult, at: int, allowed: str) -> set[str]:
    """Strings that only something after ``at`` (µs) could have produced.

    A string that an earlier row already says (a pacing plan names its departure time) or
    that the question itself uses (``allowed``) is not evidence of a leak."""
    past = [r for r in result.rows if r.t <= at]
    future = [r for r in result.rows if r.t > at]
    seen = "\n".join([r.label for r in past] + [r.explain for r in past] + [allowed])
    out = {f"{r.t / 1000:.3f}" for r in future}
    for r in future:
        out |= {text for text in (r.label, r.explain) if len(text) >= 6}
    out |= {b.label for b in result.bars if b.start <= at < b.end}
    if at < result.trace.end:
        if result.latency is not None:
            out.add(f"latency {fmt_ms(result.latency)}")
        out |= {s.text() for s in result.summary.stalls if s.end > at}
    return {text for text in out if text not in seen}


def visible_text(screen: LessonScreen) -> tuple[str, str]:
    """(what the widgets drawn from the run show, the prose shown beside them)."""
    ladder = screen.query_one(Ladder)
    width = ladder.scrollable_content_region.width
    lines = ["".join(seg.text for seg in ladder._render_full(y, width))
             for y in range(ladder.virtual_size.height)]
    parts = [str(w.render()) for w in screen.query(Static)
             if not any(isinstance(a, Markdown) for a in w.ancestors)]
    parts += [str(ladder.border_title or ""), screen.sub_title or ""]
    # every row the student can step back to, with the sentence the panel would show
    parts += [f"{row.label}\n{row.explain}" for row in ladder.rows]
    return "\n".join(parts + lines), "\n".join(w.source for w in screen.query(Markdown))


def specific(text: str) -> bool:
    return any(c.isdigit() for c in text) or len(text.split()) >= 5


def test_every_lesson_with_questions_keeps_its_answers_for_a_reveal() -> None:
    """Issue 12: lesson.md has a reveal marker, and no setup states a right answer."""
    for lesson in SHIPPED:
        if not lesson.questions:
            continue
        assert lesson.reveals, f"{lesson.slug}: lesson.md has no <!-- reveal --> marker"
        for q in lesson.questions:
            right = q.choices[q.answer]
            assert len(right.split()) < 3 or right not in lesson.setup, lesson.slug
            leaks = sorted(k for k in answer_keys(q) - PREMISES.get(lesson.slug, set())
                           if k in lesson.setup)
            assert not leaks, f"{lesson.slug}: the setup prose gives away {leaks}"


@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
async def test_no_question_opens_on_a_screen_that_shows_its_future(lesson: Lesson) -> None:
    """Issue 12: every question of every lesson, checked at the moment it opens."""
    if not lesson.questions:
        pytest.skip("this lesson asks nothing")  # reported, so a lesson without any shows
    app = NagleApp(run_sim=run_sim, lessons=SHIPPED)
    asked = 0
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen) and screen.result is not None
        result = screen.result
        await pilot.press("end")
        await pilot.pause()
        while isinstance(app.screen, QuestionScreen):
            question = app.screen.question
            at = round(question.at_ms * 1000)
            widgets, prose = visible_text(screen)
            allowed = " ".join([lesson.title, question.prompt, *question.choices])
            forbidden = forbidden_after(result, at, allowed)
            forbidden |= answer_keys(question) - PREMISES.get(lesson.slug, set())
            leaks = sorted(s for s in forbidden if s in widgets)
            leaks += sorted(s for s in forbidden if specific(s) and s in prose)
            assert not leaks, f"question {asked + 1} at {question.at_ms} ms shows {leaks}"
            assert "? predict what happens next" in widgets or at >= result.rows[-1].t
            asked += 1
            await pilot.press("1")
            await pilot.press("enter")
            await settle(pilot)
        assert asked == len(lesson.questions)
        assert screen.horizon is None
        assert "latency" in str(screen.query_one("#diff", Static).render()) or \
            result.latency is None


def test_an_armed_timer_under_a_horizon_does_not_say_when_it_fires() -> None:
    """Issue 12: "fires in 42.0 ms" is the answer to write-write-read's question."""
    from nagle_sim.scenario import loads
    from nagle_sim.tui.horizon import visible_rows

    for slug, at in (("write-write-read", 30), ("other-receivers", 20), ("-msg-more", 100_000)):
        lesson = next(x for x in SHIPPED if x.slug.endswith(slug))
        scenario = loads((lesson.path / "scenario.toml").read_text("utf-8"), slug)
        result = RunResult.build(scenario, run_sim(scenario))
        armed = [r for r in visible_rows(result.rows, at)
                 if r.event is not None and r.event.kind in ("ack_delayed", "timer_armed")
                 and r.event.timer != "rto"]
        # issue 31.1: one still running is not drawn at all (its presence is the answer)
        assert all(r.event is not None and r.event.deadline is not None
                   and r.event.deadline <= at for r in armed), slug
        assert [r for r in result.rows if r.t <= at and r.event is not None
                and r.event.kind in ("ack_delayed", "timer_armed")], \
            f"{slug}: the check must see timers armed before the question"
        for row in armed:
            for said in ("fires in", "timer 200 ms", "max(RTO", "RTO 210"):
                assert said not in row.explain, (slug, row.explain)


async def test_a_skip_reveals_nothing_and_a_reopened_question_hides_the_future_again(
        ) -> None:
    """Issue 12: Esc leaves the reveal hidden; q reopens the question over the run cut at
    its time; the answer then reveals."""
    from nagle_sim.tui.screens.questions import QuestionsScreen

    lesson = next(x for x in SHIPPED if x.slug.endswith("write-write-read"))
    at = round(lesson.questions[0].at_ms * 1000)
    reveal = lesson.reveals[0].text.strip().splitlines()[0]
    app = NagleApp(run_sim=run_sim, lessons=SHIPPED)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        ladder = screen.query_one(Ladder)
        await pilot.press("end")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert screen.horizon is None and ladder.rows[-1].t > at
        assert reveal not in screen.query_one("#prose", Markdown).source
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuestionsScreen)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, QuestionScreen)
        assert screen.horizon == at and ladder.rows[-1].t <= at
        assert reveal not in screen.query_one("#prose", Markdown).source
        await pilot.press("2", "enter")
        await settle(pilot)
        assert screen.horizon is None and ladder.rows[-1].t > at
        assert reveal in screen.query_one("#prose", Markdown).source
        assert screen.answers == {0: 1}
        # reopening an answered question after seeing the run does not change the score
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, QuestionScreen) and screen.horizon == at
        await pilot.press("1", "enter")
        await settle(pilot)
        assert screen.answers == {0: 1}


def test_the_sandbox_copy_of_every_lesson_holds_no_answers() -> None:
    """Issue 12: `s` must not be a way round predicting: no [lesson], no [[expect]]."""
    import tomllib
    from dataclasses import replace

    from nagle_sim.scenario import loads
    from nagle_sim.tui.screens.sandbox import without_answers

    for lesson in SHIPPED:
        text = (lesson.path / "scenario.toml").read_text("utf-8")
        cut = without_answers(text)
        data = tomllib.loads(cut)
        assert "lesson" not in data and "expect" not in data, lesson.slug
        for q in lesson.questions:
            assert q.explain not in cut
        same = [replace(loads(t, "x"), expect=(), raw={}) for t in (cut, text)]
        assert same[0] == same[1], lesson.slug


async def test_the_sandbox_opened_with_a_question_pending_keeps_its_horizon() -> None:
    from nagle_sim.tui.screens.sandbox import SandboxScreen

    lesson = next(x for x in SHIPPED if x.slug.endswith("write-write-read"))
    at = round(lesson.questions[0].at_ms * 1000)
    app = NagleApp(run_sim=run_sim, lessons=SHIPPED)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        sandbox = app.screen
        assert isinstance(sandbox, SandboxScreen)
        assert sandbox.horizon == at
        assert sandbox.query_one(Ladder).rows[-1].t <= at
        assert "[[expect]]" not in (sandbox.text or "")


async def test_the_time_column_widens_when_the_horizon_lifts() -> None:
    """Issue 12: other-receivers's last row read ▶600.152 for 1600.152 after the answer."""
    lesson = next(x for x in SHIPPED if x.slug.endswith("other-receivers"))
    app = NagleApp(run_sim=run_sim, lessons=SHIPPED)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        ladder = screen.query_one(Ladder)
        await pilot.press("end")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("3", "enter")
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        width = ladder.scrollable_content_region.width
        y = ladder.layout_.row_y[ladder.cursor]
        line = "".join(seg.text for seg in ladder._render_full(y, width))
        last = f"{ladder.rows[-1].t / 1000:.3f}"
        assert len(last) >= 8 and f"▶{last}" in line.replace(" ", ""), line


@pytest.mark.parametrize("lesson", [x for x in SHIPPED if x.questions], ids=lambda x: x.slug)
def test_a_pending_hold_or_timer_is_not_drawn_before_its_question(lesson: Lesson) -> None:
    """Issue 31.1: even without its length, a running delayed-ACK bar under lesson 7's
    "when does world leave?" or "Nagle holds" under lesson 1's first question answers it.
    Holds whose data has not left, and delayed-ACK/probe timers that have not fired, by
    the question's time are neither rows nor bars, nor events of an export of the cut
    run; those that ended before it stay."""
    from nagle_sim.trace.rows import build_bars, build_rows
    from nagle_sim.tui.horizon import trace_until, visible_bars, visible_rows

    trace = run_sim(lesson.scenario)
    rows, bars = build_rows(trace), build_bars(trace, "normal")
    for q in lesson.questions:
        at = round(q.at_ms * 1000)
        sends = [s for s in trace.segments if s.is_data and s.t <= at]
        cut = visible_rows(rows, at)
        assert [r.t for r in cut] == [r.t for r in rows[:len(cut)]], \
            "row i of the cut view must be row i of the run (stall jumps index both)"
        for row in cut:
            e = row.event
            if e is None:
                continue
            if e.kind == "hold":
                assert any(s.src is e.side and s.t > e.t for s in sends), \
                    f"{lesson.slug} Q at {q.at_ms} ms: {row.label!r} still held"
            if e.kind == "ack_delayed" or (e.kind == "timer_armed"
                                           and e.timer in ("delack", "probe0")):
                assert e.deadline is not None and e.deadline <= at, \
                    f"{lesson.slug} Q at {q.at_ms} ms: {row.label!r} still running"
        assert all(b.end <= at for b in visible_bars(bars, at))
        cut = trace_until(trace, at)
        assert all(b.end <= at for b in build_bars(cut, "all") if b.what != "hold"
                   ), f"{lesson.slug}: an export of the cut run draws a running timer"
        assert not [e for e in cut.events if e.kind == "hold"
                    and not any(s.src is e.side and s.t > e.t for s in sends)]


def test_lessons_1_and_7_hide_exactly_what_the_issue_saw() -> None:
    from nagle_sim.trace.rows import build_bars, build_rows
    from nagle_sim.tui.horizon import visible_bars, visible_rows

    for slug, hidden in (("01-", "Nagle holds"), ("07-", "delayed ACK")):
        lesson = next(x for x in SHIPPED if x.slug.startswith(slug))
        trace = run_sim(lesson.scenario)
        at = round(lesson.questions[0].at_ms * 1000)
        shown = [r.label for r in visible_rows(build_rows(trace), at)]
        shown += [b.label for b in visible_bars(build_bars(trace, "normal"), at)]
        assert not [x for x in shown if hidden in x], (slug, shown[-6:])
        after = [r.label for r in build_rows(trace) if r.t <= at]
        assert [x for x in after if hidden in x], \
            "the check must see what it hides when no question is pending"
