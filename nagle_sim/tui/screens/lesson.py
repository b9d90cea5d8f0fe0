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
        self.answers: dict[int, int] = {}

    def compose_side(self) -> ComposeResult:
        with VerticalScroll(id="side"):
            yield Markdown(self.lesson.prose, id="prose")

    def action_sandbox_copy(self) -> None:
        from .sandbox import SandboxScreen  # the sandbox imports this module's siblings
        if self.text is not None:
            self.app.push_screen(SandboxScreen(text=self.text, name=self.lesson.slug))

    def move_to(self, index: int) -> None:
        ladder = self.query_one(Ladder)
        if not ladder.rows:
            return
        index = ladder.validate_cursor(index)
        question = self._question_between(ladder, ladder.cursor, index)
        if question is None:
            ladder.cursor = index
            return
        number, q = question
        self.asked.add(number)
        self.pause()

        def answered(choice: int | None) -> None:
            if choice is not None:
                self.answers[number] = choice
            self.move_to(index)

        self.app.push_screen(QuestionScreen(q, number=number + 1,
                                            total=len(self.lesson.questions)), answered)

    def _question_between(self, ladder: Ladder, old: int, new: int
                          ) -> tuple[int, Question] | None:
        if new <= old or not self.services.ask_questions:
            return None
        before, after = ladder.rows[old].t, ladder.rows[new].t
        for number, q in enumerate(self.lesson.questions):
            at = round(q.at_ms * 1000)
            if number not in self.asked and before < at <= after:
                return number, q
            if number not in self.asked and old == 0 and at <= before:
                return number, q
        return None
