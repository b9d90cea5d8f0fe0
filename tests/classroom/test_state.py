"""The class state (issue 24): who may do what in a peer-instruction poll, what each side
is told, and the results files. Pure: no server, no app."""

from __future__ import annotations

import csv
import io

import pytest

from nagle_sim.classroom.results import results_csv, results_markdown
from nagle_sim.classroom.state import (
    MAX_STUDENTS,
    ClassState,
    LessonInfo,
    QuestionInfo,
    Refused,
    clean_name,
)

Q = QuestionInfo("When does the second write leave?", ("At once", "After the ACK", "Never"), 1)
LESSON = LessonInfo("07-write-write-read", "7. The write-write-read stall", (Q, Q))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def browser(n: int) -> str:
    return f"browser-{n:012d}"


@pytest.fixture
def state() -> ClassState:
    return ClassState([LESSON], clock=Clock())


def test_one_ballot_per_student_per_round_only_while_it_is_open(state: ClassState) -> None:
    ada = state.join(browser(1))
    assert ada is not None
    with pytest.raises(Refused, match="no longer open"):
        state.vote(ada, 1, 1, 0)  # no poll yet
    poll = state.ask(LESSON.slug, 0)
    assert state.vote(ada, poll.number, 1, 2) == 0
    with pytest.raises(Refused, match="voted in this round"):
        state.vote(ada, poll.number, 1, 1)
    with pytest.raises(Refused, match="closed"):
        state.vote(ada, poll.number, 2, 1)  # the re-vote is not open yet
    state.set_phase("show")
    with pytest.raises(Refused, match="closed"):
        state.vote(ada, poll.number, 1, 0)
    state.set_phase("revote")
    state.clock.now += 10  # type: ignore[attr-defined]  # (six tries so far: the burst)
    assert state.vote(ada, poll.number, 2, 1) == 1
    with pytest.raises(Refused, match="voted in this round"):
        state.vote(ada, poll.number, 2, 0)
    assert poll.counts(0) == [0, 0, 1] and poll.counts(1) == [0, 1, 0]


def test_a_reload_is_the_same_student_and_cannot_vote_again(state: ClassState) -> None:
    first = state.join(browser(7))
    assert first is not None
    poll = state.ask(LESSON.slug, 0)
    state.vote(first, poll.number, 1, 1)
    state.leave(first)  # the tab reloads: the session ends, a new one starts
    again = state.join(browser(7))
    assert again is first
    with pytest.raises(Refused, match="voted in this round"):
        state.vote(again, poll.number, 1, 0)
    assert state.student_view(again)["poll"]["mine"] == [1, None]


@pytest.mark.parametrize("bad", [None, -1, 3, 1.0, True, "1", [1]])
def test_a_ballot_for_no_such_choice_is_refused(state: ClassState, bad: object) -> None:
    ada = state.join(browser(1))
    assert ada is not None
    poll = state.ask(LESSON.slug, 0)
    with pytest.raises(Refused):
        state.vote(ada, poll.number, 1, bad)
    assert poll.ballots[0] == {}


def test_votes_are_rate_limited(state: ClassState) -> None:
    ada = state.join(browser(1))
    assert ada is not None
    state.ask(LESSON.slug, 0)
    refusals = []
    for _ in range(50):  # a script hammering its ballot (wrong poll: each is refused)
        try:
            state.vote(ada, 999, 1, 0)
        except Refused as why:
            refusals.append(str(why))
    assert "too many votes at once" in refusals
    assert refusals.count("too many votes at once") >= 40


def test_a_student_is_told_their_own_ballots_and_only_counts_everyone_may_see(
        state: ClassState) -> None:
    ada, bob = state.join(browser(1)), state.join(browser(2))
    assert ada is not None and bob is not None
    poll = state.ask(LESSON.slug, 0)
    state.vote(ada, poll.number, 1, 2)
    seen = state.student_view(bob)["poll"]
    assert seen["mine"] == [None, None] and seen["counts"] == [] and seen["answer"] is None
    teacher = state.teacher_view()["poll"]
    assert teacher["ballots"] == [1, 0] and teacher["counts"] == []  # a count, no spread
    assert teacher["answer"] is None
    state.set_phase("show")
    assert state.student_view(bob)["poll"]["counts"] == [[0, 0, 1]]
    state.set_phase("revote")
    assert state.student_view(bob)["poll"]["counts"] == []  # vote 1 hidden while re-voting
    state.set_phase("reveal")
    view = state.student_view(bob)["poll"]
    assert view["counts"] == [[0, 0, 1], [0, 0, 0]] and view["answer"] == 1
    for who in (ada, bob):
        text = repr(state.student_view(who))
        assert ada.key not in text and bob.key not in text  # no student's id, ever


def test_any_phase_may_be_skipped_and_the_answer_stays_shown(state: ClassState) -> None:
    state.join(browser(1))
    poll = state.ask(LESSON.slug, 1)
    state.set_phase("reveal")
    assert state.student_view(None)["poll"]["answer"] == 1
    state.set_phase("vote")  # back to a vote after the reveal: the answer is known
    assert state.student_view(None)["poll"]["answer"] == 1
    state.next_phase()
    assert poll.phase == "show"
    assert state.student_view(None)["done"] == [1]
    with pytest.raises(Refused):
        state.set_phase("shout")


def test_teacher_actions_are_checked(state: ClassState) -> None:
    with pytest.raises(Refused):
        state.open_lesson("no-such-lesson")
    with pytest.raises(Refused):
        state.ask(LESSON.slug, 2)
    with pytest.raises(Refused):
        state.set_phase("show")  # no poll on
    state.open_lesson(LESSON.slug)
    assert state.lead == LESSON.slug and state.poll is None
    state.ask(LESSON.slug, 0)
    state.free()
    assert state.lead is None and state.poll is None and len(state.polls) == 1


@pytest.mark.parametrize("raw, shown", [
    ("  Ada   Lovelace ", "Ada Lovelace"),
    ("evil\u202egnp.exe", "evilgnp.exe"),          # a right-to-left override
    ("a\x00b\x1b[31mc", "ab[31mc"),                 # control characters
    ("x" * 100, "x" * 24),
    ("q\u0301\u0300\u0302\u0303x", "q\u0301\u0300x"),  # a pile of combining marks
    ("<script>", "<script>"),                       # text: the page shows it as text
    (42, ""),
])
def test_nicknames_are_cleaned(raw: object, shown: str) -> None:
    assert clean_name(raw) == shown


def test_two_connected_students_never_share_a_name(state: ClassState) -> None:
    ada, other = state.join(browser(1)), state.join(browser(2))
    assert ada is not None and other is not None
    assert state.rename(ada, "Ada") == "Ada"
    assert state.rename(other, "ada") == "ada 2"
    assert state.rename(other, "") == f"student {other.number}"


def test_the_state_stops_growing_at_its_bound(state: ClassState) -> None:
    for n in range(MAX_STUDENTS):
        assert state.join(browser(n)) is not None
    assert state.join(browser(MAX_STUDENTS)) is None  # the app then works alone
    assert state.join(browser(3)) is not None  # a known browser still joins


def test_results_csv_and_markdown(state: ClassState) -> None:
    students = [state.join(browser(n)) for n in range(3)]
    assert all(s is not None for s in students)
    state.rename(students[0], "=HYPERLINK(\"http://x\")")  # type: ignore[arg-type]
    state.rename(students[1], "Bob | <b>")  # type: ignore[arg-type]
    poll = state.ask(LESSON.slug, 0)
    for s, choice in zip(students, (1, 1, 0), strict=True):
        state.vote(s, poll.number, 1, choice)  # type: ignore[arg-type]
    state.set_phase("revote")
    for s in students:
        state.vote(s, poll.number, 2, 1)  # type: ignore[arg-type]
    rows = list(csv.DictReader(io.StringIO(results_csv(state.polls, state.students))))
    assert [(r["choice"], r["vote_1"], r["vote_2"], r["right"]) for r in rows] == [
        ("1", "1", "0", "no"), ("2", "2", "3", "yes"), ("3", "0", "0", "no")]
    anonymous = results_csv(state.polls, state.students) + results_markdown(
        state.polls, state.students)
    assert "Bob" not in anonymous and "HYPERLINK" not in anonymous
    named = list(csv.DictReader(io.StringIO(results_csv(state.polls, state.students,
                                                        names=True))))
    assert [r["student"] for r in named] == ["'=HYPERLINK(\"http://x\")", "Bob | <b>",
                                             "student 3"]
    assert [(r["vote_1"], r["vote_2"]) for r in named] == [("2", "2"), ("2", "2"), ("1", "2")]
    markdown = results_markdown(state.polls, state.students, names=True)
    assert "| 2. After the ACK **(right)** | 2 | 3 |" in markdown
    assert "Bob \\| &lt;b&gt;" in markdown and "<b>" not in markdown
