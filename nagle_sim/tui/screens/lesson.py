"""A lesson: Markdown prose beside the ladder, with predict-then-reveal questions.

A question is asked when a cursor move would cross its ``at_ms`` for the first time: the
move waits until the student has answered. No simpy, no realnet.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Markdown

from ...lessons import Lesson, Question
from ..widgets.ladder import Ladder
from .question import QuestionScreen
from .run import RunScreen


class LessonScreen(RunScreen):
    """Prose | ladder, explanation, what-if bar."""

    BINDINGS: list[BindingType] = [
        Binding("s", "sandbox_copy", "Sandbox", id="lesson.sandbox",
                tooltip="Edit this lesson's scenario in the sandbox (a copy in memory)"),
    ]

    def __init__(self, lesson: Lesson) -> None:
        toml = lesson.path / "scenario.toml"
        try:
            text: str | None = toml.read_text("utf-8")
            error = ""
        except OSError as exc:
            text, error = None, f"{toml}: cannot read: {exc.strerror}"
        super().__init__(text=text, where=str(toml), title=lesson.title, scenario_path=toml,
                         error=error)
        self.lesson = lesson
        self.export_name = lesson.slug
        self.asked: set[int] = set()
        """Questions behind the student (answered or skipped with Esc)."""
        self.answers: dict[int, int] = {}

    def compose_side(self) -> ComposeResult:
        with VerticalScroll(id="side"):
            yield Markdown(self.lesson.visible_prose(self.done()), id="prose")

    def done(self) -> int:
        """How many questions, in time order, are behind the student (answered or
        skipped): the reveals of lesson.md up to that count are shown."""
        count = 0
        while count in self.asked:
            count += 1
        return count if self.services.ask_questions else len(self.lesson.questions)

    def pending(self) -> tuple[int, Question] | None:
        """The next question not yet asked (questions are sorted by ``at_ms``)."""
        if not self.services.ask_questions:
            return None
        for number, q in enumerate(self.lesson.questions):
            if number not in self.asked:
                return number, q
        return None

    def current_horizon(self) -> int | None:
        pending = self.pending()
        return None if pending is None else round(pending[1].at_ms * 1000)

    def action_sandbox_copy(self) -> None:
        from .sandbox import SandboxScreen  # the sandbox imports this module's siblings
        if self.text is not None:
            self.app.push_screen(SandboxScreen(text=self.text, name=self.lesson.slug))

    def move_to(self, index: int) -> None:
        ladder = self.query_one(Ladder)
        pending = self.pending()
        last = len(ladder.rows) - 1
        at_end = self.result is not None and last == len(self.result.rows) - 1
        if pending is not None and self.result is not None and (
                index > last or (at_end and index >= last)):
            # the move would pass the pending question's time: ask first
            if ladder.rows:
                ladder.cursor = len(ladder.rows) - 1
            self.ask(*pending, then=index)
            return
        if ladder.rows:
            ladder.cursor = ladder.validate_cursor(index)

    def ask(self, number: int, question: Question, then: int | None = None) -> None:
        self.pause()

        def answered(choice: int | None) -> None:
            self.asked.add(number)
            if choice is not None:
                self.answers[number] = choice
            self.query_one("#prose", Markdown).update(self.lesson.visible_prose(self.done()))
            self.refresh_view()
            if then is not None:
                self.move_to(then)

        self.app.push_screen(QuestionScreen(question, number=number + 1,
                                            total=len(self.lesson.questions)), answered)
