"""The class state `nagle-sim serve` keeps in memory: students, the lead, and the polls.

Peer instruction (Mazur; Porter and Simon in computing) on a lesson's question, as phases
the teacher moves through in any order (any phase may be skipped or revisited):

    vote     every student answers alone; the teacher sees how many have, not what
    show     the first vote's histogram, without the answer
    discuss  the same histogram while neighbours argue
    revote   everyone answers again (the first histogram is hidden: seeing the majority
             would pull the second vote towards it)
    reveal   the right answer and both histograms side by side
    play     every student's ladder plays on past the question's horizon

Owns: who may do what. A student (one browser, possibly reloaded) casts at most one
ballot per round, only while that round is open, only for the poll on now, only for a
choice the question has, and within a rate limit; what a student is told is their own
ballots and, once a round is closed, the class's counts — never another student's
ballot. Teacher actions are methods no student message reaches (serve calls them only
from the teacher's authenticated socket). Ballots are kept by the choice's canonical
index in the lesson file, never by where the choice was on a student's screen.

Standard library only (no textual, aiohttp, simpy, realnet); the clock is injected.
"""

from __future__ import annotations

import re
import secrets
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

PHASES = ("vote", "show", "discuss", "revote", "reveal", "play")
OPEN_ROUND = {"vote": 0, "revote": 1}
"""The ballot round each voting phase collects (0: the first vote, 1: the re-vote)."""
SHOWN_ROUNDS = {"vote": 0, "show": 1, "discuss": 1, "revote": 0, "reveal": 2, "play": 2}
"""How many rounds' counts everyone may see in each phase."""
ROUNDS = 2

NAME_LIMIT = 24
"""Characters of a nickname (after cleaning)."""
RENAME_LIMIT = 20
"""Nickname changes one student may make in a session."""
MAX_STUDENTS = 5000
"""Students remembered in one session (a reload is the same student; a flood of new
browsers is not allowed to grow the state without bound)."""
MAX_POLLS = 500
"""Polls kept in a session's results."""
BROWSER_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
"""What a browser's own id (kept in its local storage) must look like to be trusted as
'the same browser as before'."""


@dataclass(frozen=True, slots=True)
class QuestionInfo:
    """One question of a lesson, as the class state needs it."""

    prompt: str
    choices: tuple[str, ...]
    answer: int


@dataclass(frozen=True, slots=True)
class LessonInfo:
    slug: str
    title: str
    questions: tuple[QuestionInfo, ...]


class Bucket:
    """A token bucket: `take()` is True while the rate (per second) and burst allow."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.clock = clock
        self.at = clock()

    def take(self, cost: float = 1.0) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False


def clean_name(raw: object) -> str:
    """A nickname a student typed, made safe to show anywhere: text only, no control or
    formatting characters (no bidirectional overrides that would reorder the teacher's
    roster), spaces collapsed, at most `NAME_LIMIT` characters. Empty: no name."""
    if not isinstance(raw, str):
        return ""
    kept: list[str] = []
    marks = 0
    for c in unicodedata.normalize("NFC", raw[:200]):
        kind = unicodedata.category(c)
        if kind[0] == "Z" or c.isspace():
            kept.append(" ")
        elif kind[0] == "M":    # accents stay; a pile of them (a tall "zalgo" name) does not
            marks += 1
            if marks <= 2:
                kept.append(c)
            continue
        elif kind[0] != "C":    # control, format (bidi overrides), private, unassigned
            kept.append(c)
        marks = 0
    return " ".join("".join(kept).split())[:NAME_LIMIT].strip()


@dataclass(slots=True)
class Student:
    key: str
    """serve's own id for this student (never sent to another student)."""
    number: int
    """Order of arrival: the name shown until the student picks one."""
    browser: str | None
    name: str = ""
    renames: int = 0
    sessions: int = 0
    """Open sessions (tabs) of this student."""
    where: dict[str, Any] = field(default_factory=dict)
    """What the student's app last reported: screen, lesson, step."""
    bucket: Bucket | None = None

    @property
    def shown(self) -> str:
        return self.name or f"student {self.number}"


@dataclass(slots=True)
class Poll:
    """One question asked of the class."""

    number: int
    lesson: LessonInfo
    question: int
    phase: str = "vote"
    was_revealed: bool = False
    """The answer has been shown to the class (a later phase change keeps it shown)."""
    ballots: tuple[dict[str, int], ...] = field(
        default_factory=lambda: tuple({} for _ in range(ROUNDS)))
    """Per round: student key → canonical choice index."""

    @property
    def info(self) -> QuestionInfo:
        return self.lesson.questions[self.question]

    def counts(self, round_: int) -> list[int]:
        tally = [0] * len(self.info.choices)
        for choice in self.ballots[round_].values():
            tally[choice] += 1
        return tally

    @property
    def open_round(self) -> int | None:
        return OPEN_ROUND.get(self.phase)

    @property
    def revealed(self) -> bool:
        return self.phase in ("reveal", "play")

    def visible_counts(self) -> list[list[int]]:
        """The rounds' counts everyone may see now (see `SHOWN_ROUNDS`)."""
        return [self.counts(r) for r in range(SHOWN_ROUNDS[self.phase])]


class Refused(Exception):
    """A request the class state will not carry out; ``str()`` says why, in a few words
    a student or teacher can read."""


class ClassState:
    """Everything serve knows about one class; no I/O (serve sends what it says)."""

    def __init__(self, lessons: Iterable[LessonInfo], *,
                 clock: Callable[[], float] = time.monotonic,
                 vote_rate: float = 2.0, vote_burst: float = 6.0) -> None:
        self.lessons: dict[str, LessonInfo] = {lesson.slug: lesson for lesson in lessons}
        self.clock = clock
        self.vote_rate = vote_rate
        self.vote_burst = vote_burst
        self.students: dict[str, Student] = {}
        self._by_browser: dict[str, str] = {}
        self._arrivals = 0
        self.lead: str | None = None
        """The lesson the teacher leads the class through (None: everyone is free)."""
        self.poll: Poll | None = None
        self.polls: list[Poll] = []
        self.version = 0
        """Grows with every change the teacher's page shows."""
        self.student_version = 0
        """Grows with every change students are told about (lead, poll, phase)."""
        self.on_change: Callable[[bool], None] | None = None
        """Called after every change (True: students' views changed too)."""

    # ---------------------------------------------------------------- students
    def join(self, browser: str | None) -> Student | None:
        """A session opens. A browser seen before (its id from local storage) is the same
        student again, with their ballots; None when the session cannot be counted in
        (more than `MAX_STUDENTS` in this session): its app then works alone."""
        if browser is not None and not BROWSER_ID.fullmatch(browser):
            browser = None
        key = self._by_browser.get(browser) if browser is not None else None
        student = self.students.get(key) if key is not None else None
        if student is None:
            if len(self.students) >= MAX_STUDENTS:
                return None
            self._arrivals += 1
            student = Student(key=secrets.token_hex(8), number=self._arrivals,
                              browser=browser,
                              bucket=Bucket(self.vote_rate, self.vote_burst, self.clock))
            self.students[student.key] = student
            if browser is not None:
                self._by_browser[browser] = student.key
        student.sessions += 1
        self._changed()
        return student

    def leave(self, student: Student) -> None:
        student.sessions = max(0, student.sessions - 1)
        if student.sessions == 0:
            student.where = {}
        self._changed()

    def rename(self, student: Student, raw: object) -> str:
        """Set a student's nickname; returns the name now shown. Two connected students
        never share one (the later gets a number)."""
        if student.renames >= RENAME_LIMIT:
            raise Refused("too many name changes")
        name = clean_name(raw)
        if name:
            taken = {s.name.casefold() for s in self.students.values()
                     if s is not student and s.sessions}
            base, n = name, 2
            while name.casefold() in taken:
                suffix = f" {n}"
                name = base[:NAME_LIMIT - len(suffix)] + suffix
                n += 1
        if name != student.name:
            student.renames += 1
            student.name = name
            self._changed()
        return student.shown

    def report(self, student: Student, where: dict[str, Any]) -> None:
        """What a student's app says it shows (already checked by `channel`)."""
        if where != student.where:
            student.where = where
            self._changed()

    def connected(self) -> list[Student]:
        return sorted((s for s in self.students.values() if s.sessions),
                      key=lambda s: s.number)

    # ---------------------------------------------------------------- teacher
    def open_lesson(self, slug: str) -> None:
        """Lead the class into a lesson (no question yet)."""
        if slug not in self.lessons:
            raise Refused(f"no lesson {slug!r}")
        self.lead = slug
        self._end_poll()
        self._changed(students=True)

    def ask(self, slug: str, question: int) -> Poll:
        """Move the class to a question of a lesson: a new poll, in its vote phase."""
        lesson = self.lessons.get(slug)
        if lesson is None:
            raise Refused(f"no lesson {slug!r}")
        if not 0 <= question < len(lesson.questions):
            raise Refused(f"lesson {slug!r} has no question {question + 1}")
        if len(self.polls) >= MAX_POLLS:
            raise Refused(f"this session has asked {MAX_POLLS} questions already")
        self.lead = slug
        self._end_poll()
        self.poll = Poll(number=len(self.polls) + 1, lesson=lesson, question=question)
        self.polls.append(self.poll)
        self._changed(students=True)
        return self.poll

    def set_phase(self, phase: str) -> None:
        if self.poll is None:
            raise Refused("no question is on")
        if phase not in PHASES:
            raise Refused(f"no phase {phase!r}")
        if phase != self.poll.phase:
            self.poll.phase = phase
            self.poll.was_revealed |= self.poll.revealed
            self._changed(students=True)

    def next_phase(self) -> None:
        if self.poll is None:
            raise Refused("no question is on")
        at = PHASES.index(self.poll.phase)
        if at + 1 < len(PHASES):
            self.set_phase(PHASES[at + 1])

    def free(self) -> None:
        """Stop leading: every student goes on alone (their apps keep what they show)."""
        self.lead = None
        self._end_poll()
        self._changed(students=True)

    def _end_poll(self) -> None:
        self.poll = None

    # ---------------------------------------------------------------- ballots
    def vote(self, student: Student, poll: object, round_: object, choice: object) -> int:
        """Cast a student's ballot; returns the round (0 or 1) it counted in, or raises
        `Refused` (a second ballot, a closed round, another poll, no such choice, too
        fast). Nothing of a refused ballot is kept."""
        assert student.bucket is not None
        if not student.bucket.take():
            raise Refused("too many votes at once")
        current = self.poll
        if current is None or poll != current.number:
            raise Refused("that question is no longer open")
        open_round = current.open_round
        if open_round is None or round_ != open_round + 1:
            raise Refused("voting is closed")
        if (not isinstance(choice, int) or isinstance(choice, bool)
                or not 0 <= choice < len(current.info.choices)):
            raise Refused("no such choice")
        ballots = current.ballots[open_round]
        if student.key in ballots:
            raise Refused("you have voted in this round")
        ballots[student.key] = choice
        self._changed()
        return open_round

    # ---------------------------------------------------------------- views
    def student_view(self, student: Student | None) -> dict[str, Any]:
        """What one student's app is told: the lead, the poll on now (phase, its own
        ballots, and only the counts everyone may see), and the name it shows."""
        poll = self.poll
        view: dict[str, Any] = {"t": "class", "lead": self.lead, "poll": None,
                                "done": self.revealed_questions(self.lead),
                                "name": student.shown if student is not None else ""}
        if poll is not None:
            mine = [None if student is None else poll.ballots[r].get(student.key)
                    for r in range(ROUNDS)]
            view["poll"] = {
                "id": poll.number, "lesson": poll.lesson.slug, "question": poll.question,
                "phase": poll.phase,
                "round": None if poll.open_round is None else poll.open_round + 1,
                "counts": poll.visible_counts(),
                "answer": (poll.info.answer if poll.revealed or poll.was_revealed
                           else None),
                "mine": mine}
        return view

    def revealed_questions(self, slug: str | None) -> list[int]:
        """The questions of a lesson the class has seen answered in this session."""
        return sorted({p.question for p in self.polls
                       if p.lesson.slug == slug and (p.was_revealed or p.revealed)})

    def teacher_view(self) -> dict[str, Any]:
        """The teacher's page: the roster, the lead, the poll (ballot numbers while a
        round is open, counts as the phase allows, the answer once revealed) and the
        results so far."""
        poll = self.poll
        open_round = poll.open_round if poll is not None else None
        roster = []
        for s in self.connected():
            where = s.where
            roster.append({
                "name": s.shown, "named": bool(s.name), "screen": where.get("screen", ""),
                "lesson": where.get("lesson"), "step": where.get("step"),
                "steps": where.get("steps"),
                "voted": (poll is not None and open_round is not None
                          and s.key in poll.ballots[open_round])})
        view: dict[str, Any] = {"t": "state", "connected": len(roster), "students": roster,
                                "lead": self.lead, "poll": None,
                                "results": [self.poll_summary(p) for p in self.polls]}
        if poll is not None:
            view["poll"] = {
                **self.poll_summary(poll), "phase": poll.phase,
                "round": None if open_round is None else open_round + 1,
                "ballots": [len(b) for b in poll.ballots]}
        return view

    def poll_summary(self, poll: Poll) -> dict[str, Any]:
        """A poll as results show it: counts only once they may be seen (the current
        poll's), and the answer once revealed."""
        shown = (poll.visible_counts() if poll is self.poll
                 else [poll.counts(r) for r in range(ROUNDS)])
        revealed = poll.revealed or poll.was_revealed
        return {"id": poll.number, "lesson": poll.lesson.slug,
                "lessonTitle": poll.lesson.title, "question": poll.question,
                "prompt": poll.info.prompt, "choices": list(poll.info.choices),
                "answer": poll.info.answer if revealed else None, "counts": shown,
                "voters": [len(b) for b in poll.ballots]}

    def _changed(self, *, students: bool = False) -> None:
        self.version += 1
        if students:
            self.student_version += 1
        if self.on_change is not None:
            self.on_change(students)
