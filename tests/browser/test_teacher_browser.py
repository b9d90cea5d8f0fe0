"""The class as a class, in the real client (issue 24): Debian's Chromium with a teacher
tab and three student tabs against a real `nagle-sim serve`, through a whole
peer-instruction poll on lesson 7's question.

What each student sees is rebuilt from the terminal bytes (conftest.Screen); what the
teacher sees is read from the teacher page's DOM. Screenshots of both at 1280×720 are
saved for a person to look at ($NAGLE_SIM_SCREENSHOTS, default the test's tmp dir).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .conftest import (
    WAIT_MS,
    ServeProcess,
    Student,
    expect,
    open_student,
    open_teacher,
    screenshot,
    start_serve,
)

pytestmark = pytest.mark.slow

LESSON_7 = "07-write-write-read"


@pytest.fixture
def class_with_teacher() -> Any:
    served = start_serve("--host", "127.0.0.1")
    try:
        yield served
    finally:
        served.stop()


def _bars(teacher: Any) -> list[list[int]]:
    """The teacher page's histogram: per round, the count of each choice."""
    counts: list[list[int]] = []
    for row in teacher.locator("#chart .choice").all():
        for round_, n in enumerate(row.locator(".bar-row .n").all_inner_texts()):
            while len(counts) <= round_:
                counts.append([])
            counts[round_].append(int(n))
    return counts


def _wait_bars(teacher: Any, want: list[list[int]]) -> None:
    """Wait until the histogram shows `want` (per round, the count of each choice). The
    page lists the counts choice by choice, each choice's rounds in order."""
    in_page_order = [str(want[round_][choice]) for choice in range(len(want[0]))
                     for round_ in range(len(want))]
    expect(teacher.locator("#chart .choice .bar-row .n")).to_have_text(
        in_page_order, timeout=WAIT_MS)
    assert _bars(teacher) == want


def _wait_voted(teacher: Any, voted: int, connected: int) -> None:
    """Wait until the teacher's live count says `voted` of `connected` have voted."""
    expect(teacher.locator("#chart .big-count")).to_have_text(
        f"{voted} of {connected} have voted", timeout=WAIT_MS)


def _vote(student: Student, key: str, round_: int) -> None:
    student.wait_for(f"Vote {round_}: press a number", what=f"vote {round_} open")
    student.press(key)
    student.wait_for("is in. Waiting for the class", what=f"vote {round_} counted")


def test_a_teacher_leads_three_students_through_a_poll(
        browser: Any, class_with_teacher: ServeProcess, tmp_path: Path) -> None:
    served = class_with_teacher
    from nagle_sim.lessons import load_lessons
    lesson = next(item for item in load_lessons() if item.slug == LESSON_7)
    question = lesson.questions[0]
    right = str(question.answer + 1)
    wrong = "1" if right != "1" else "2"

    teacher = open_teacher(browser, served.teacher_url())
    screenshot(teacher, "teacher-welcome", tmp_path)
    everything: list[str] = []
    teacher.context.on("request", lambda request: everything.append(request.url))
    students = [open_student(browser, served.url(), name=name)
                for name in ("Ada", "Bob", "Cy")]
    for student in students:
        student.page.context.on("request", lambda request: everything.append(request.url))
        student.wait_for("Pick a lesson", what="the first screen")
    # (a name arrives just after its session: wait for the names, not only the count)
    expect(teacher.locator("#roster .name")).to_have_text(["Ada", "Bob", "Cy"],
                                                         timeout=WAIT_MS)
    assert teacher.inner_text("#count") == "3"

    # the teacher moves the class to lesson 7's question: every app follows
    teacher.select_option("#lesson", LESSON_7)
    teacher.click("#questions button >> nth=0")
    for student in students:
        student.wait_for("Predict (1/1)", what="lesson 7's question, brought by the teacher")
    _wait_voted(teacher, 0, 3)

    # vote 1: 2 right, 1 wrong; the teacher sees how many, not what
    _vote(students[0], right, 1)
    _vote(students[1], right, 1)
    _vote(students[2], wrong, 1)
    _wait_voted(teacher, 3, 3)
    assert teacher.locator("#chart .bar").count() == 0  # no spread while voting
    screenshot(teacher, "teacher-vote", tmp_path)
    students[0].shot("student-voted", tmp_path)
    for student in students:
        assert "Right." not in student.screen.text()  # no verdict before the reveal

    teacher.click("[data-phase=show]")
    want_1 = [[0] * len(question.choices)]
    want_1[0][question.answer] = 2
    want_1[0][int(wrong) - 1] = 1
    _wait_bars(teacher, want_1)
    assert "✓" not in teacher.inner_text("#chart")  # the answer waits for the reveal
    students[2].wait_for("vote 1 (3)", what="vote 1's histogram in a student's app")

    teacher.click("[data-phase=discuss]")
    teacher.click("[data-phase=revote]")
    for student in students:
        _vote(student, right, 2)
    _wait_voted(teacher, 3, 3)

    teacher.click("[data-phase=reveal]")
    want_2 = [want_1[0], [0] * len(question.choices)]
    want_2[1][question.answer] = 3
    _wait_bars(teacher, want_2)
    assert teacher.locator("#chart .choice.right").count() == 1
    assert "✓" in teacher.locator("#chart .choice.right").inner_text()
    for student in students:
        student.wait_for("Right.", what="the verdict on the re-vote")
        student.wait_for("vote 2 (3)", what="both histograms in the app")
    screenshot(teacher, "teacher-reveal", tmp_path)
    students[2].shot("student-reveal", tmp_path)

    # the session's results, as the teacher's browser downloads them
    teacher.click("#tab-results")
    with teacher.expect_download() as download:
        teacher.click("#csv")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text("utf-8"))))
    assert [(int(r["vote_1"]), int(r["vote_2"])) for r in rows] == list(
        zip(want_2[0], want_2[1], strict=True))
    assert {r["lesson"] for r in rows} == {LESSON_7}
    assert "Ada" not in Path(download.value.path()).read_text("utf-8")

    # play on: every question closes and every ladder plays past the horizon
    teacher.click("[data-phase=play]")
    for student in students:
        student.wait_for(lambda text: "Predict (" not in text, what="the question closed")
        student.wait_for(lambda text: "playing" in text.lower() or "▶" in text,
                         what="the ladder playing", timeout_s=30)
    students[0].shot("student-played-on", tmp_path)
    teacher.click("#tab-students")
    screenshot(teacher, "teacher-roster", tmp_path)

    hosts = {urlsplit(u).netloc for u in everything if not u.startswith(("data:", "blob:"))}
    assert hosts == {f"127.0.0.1:{served.port}"}, sorted(set(everything))


def test_a_late_student_votes_in_the_current_phase_and_the_teacher_skips_phases(
        browser: Any, class_with_teacher: ServeProcess, tmp_path: Path) -> None:
    """A student who opens the class link while the class is in its re-vote gets the
    question on their first screen and votes in that round; the teacher goes from vote
    straight to the re-vote (skipping show and discuss) and from the re-vote straight to
    the reveal; the roster names each student with the lesson and where in it they are."""
    served = class_with_teacher
    from nagle_sim.lessons import load_lessons
    lesson = next(item for item in load_lessons() if item.slug == LESSON_7)
    question = lesson.questions[0]
    right = str(question.answer + 1)
    wrong = "1" if right != "1" else "2"

    teacher = open_teacher(browser, served.teacher_url())
    early = open_student(browser, served.url(), name="Early")
    early.wait_for("Pick a lesson", what="the first screen")
    teacher.select_option("#lesson", LESSON_7)
    teacher.click("#questions button >> nth=0")
    early.wait_for("Predict (1/1)", what="the question, brought by the teacher")
    _vote(early, right, 1)

    teacher.click("[data-phase=revote]")  # show and discuss skipped
    early.wait_for("Vote 2: press a number", what="the re-vote, straight after vote 1")
    late = open_student(browser, served.url(), name="Late")
    late.wait_for("Vote 2: press a number", what="the re-vote on a late student's screen")
    _vote(late, wrong, 2)
    _wait_voted(teacher, 1, 2)

    expect(teacher.locator("#roster .name")).to_have_text(["Early", "Late"], timeout=WAIT_MS)
    expect(teacher.locator("#roster .where")).to_have_text(["L7 · question"] * 2,
                                                          timeout=WAIT_MS)
    screenshot(teacher, "teacher-late-revote", tmp_path)
    late.shot("student-late-revote", tmp_path)

    teacher.click("[data-phase=reveal]")  # nobody needs to vote again
    want = [[0] * len(question.choices), [0] * len(question.choices)]
    want[0][question.answer] = 1
    want[1][int(wrong) - 1] = 1
    _wait_bars(teacher, want)
    late.wait_for("Not quite", what="the verdict on the late student's re-vote")
    early.wait_for("Your votes: vote 1: " + right, what="the early student's own vote")

    # after the reveal, the roster follows each student stepping on alone
    late.press("Enter")
    late.wait_for(lambda text: "Predict (" not in text, what="the question closed")
    late.press("n", pause_ms=400)
    expect(teacher.locator("#roster .where").nth(1)).to_have_text(
        re.compile(r"^L7 · \d+/\d+$"), timeout=WAIT_MS)


_EVAL_LATER = """() => new Promise(done => setTimeout(() => {
    try { (0, eval)("1"); done("eval ran"); } catch (error) { done(error.name); }
}, 0))"""
"""The page's own code trying `eval` (from a timer, outside the DevTools call that
started it, which Chromium lets evaluate anything)."""


def test_the_teacher_page_refuses_eval_and_tests_wait_without_it(
        browser: Any, class_with_teacher: ServeProcess) -> None:
    """The teacher's page runs with script-src 'self' and no 'unsafe-eval': code in the
    page cannot turn a string into script. That is why no test here waits with
    `wait_for_function("…")` (Playwright evals a string predicate on every poll: it
    failed in CI whenever the page did not already show what was awaited)."""
    teacher = open_teacher(browser, class_with_teacher.teacher_url())
    assert teacher.evaluate(_EVAL_LATER) == "EvalError"
    here = Path(__file__).parent
    waits = [f"{path.name}:{number}" for path in sorted(here.glob("*.py"))
             for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             if re.match(r"\s*[\w.]+\.wait_for_function\(", line)]
    assert waits == [], f"string predicates need eval, refused by the page's CSP: {waits}"
