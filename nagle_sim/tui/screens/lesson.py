"""A lesson: Markdown prose beside the ladder, with predict-then-reveal questions.

A question is asked when a cursor move would cross its ``at_ms`` for the first time: the
move waits until the student has answered. No simpy, no realnet.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static

from ...lessons import Lesson, Question, Variant, describe_override, variants
from ...model.events import Side
from ...scenario import ScenarioError, loads
from ..whatif import Knob
from ..widgets.ladder import Ladder
from .question import Ballot, QuestionScreen
from .run import RunScreen


class LessonScreen(RunScreen):
    """Prose | ladder, explanation, what-if bar."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "questions", "Questions", show=False, id="lesson.questions",
                tooltip="List the lesson's questions; reopen one you skipped or answered"),
        Binding("s", "sandbox_copy", "Sandbox", show=False, id="lesson.sandbox",
                tooltip="Edit this lesson's scenario in the sandbox (a copy in memory)"),
        Binding("1", "variant(0)", "What-ifs", show=True, key_display="1-9",
                id="lesson.variant-1", tooltip="The lesson's what-ifs (listed in the left pane): "
                "press a number to switch one on or off"),
        *(Binding(str(n), f"variant({n - 1})", f"What-if {n}", show=False,
                  id=f"lesson.variant-{n}", tooltip=f"Switch the lesson's what-if {n}")
          for n in range(2, 10)),
        Binding("0", "variant_page", "More what-ifs", show=False, id="lesson.variant-page",
                tooltip="A lesson with more than nine what-ifs: show the next nine on 1-9"),
        # the lesson's own what-ifs replace the generic NODELAY key in the footer
        Binding("d", "flip('client','nodelay')", "NODELAY", show=False, id="lesson.nodelay",
                tooltip="What if the client set TCP_NODELAY?"),
    ]

    def __init__(self, lesson: Lesson) -> None:
        toml = lesson.path / "scenario.toml"
        try:
            text: str | None = toml.read_text("utf-8")
            error = ""
        except OSError as exc:
            text, error = None, f"{toml}: cannot read: {exc.strerror}"
        super().__init__(text=text, where=str(toml), title=lesson.numbered_title,
                         scenario_path=toml, error=error)
        self.lesson = lesson
        self.export_name = lesson.slug
        self.variants: list[Variant] = variants(lesson)
        self.variant_page = 0
        """Which nine what-ifs the keys 1-9 switch (0 shows the next nine)."""
        self.asked: set[int] = set()
        """Questions behind the student (answered or skipped with Esc)."""
        self.answers: dict[int, int] = {}
        self.reopened: int | None = None
        """A question reopened from the list (q): its time is the horizon while it is open."""
        self.class_pending: dict[str, object] | None = None
        """A class question that arrived before the lesson's run (`classlink`)."""

    def compose_side(self) -> ComposeResult:
        with VerticalScroll(id="side"):
            yield Static(self.variants_text(), id="variants")
            yield Markdown(self.lesson.visible_prose(self.done()), id="prose")

    PROSE_FIRST_BELOW = 32
    """Screens shorter than this (80×24) put the prose before the what-ifs: above it, the
    what-ifs filled the whole pane and a newcomer saw no word of the lesson (issue 31.5)."""

    def on_resize(self) -> None:
        super().on_resize()
        self.order_side()

    def order_side(self) -> None:
        """The prose first on a short screen, the what-ifs first where both fit."""
        side = self.query_one("#side")
        variants, prose = self.query_one("#variants"), self.query_one("#prose")
        prose_first = self.size.height < self.PROSE_FIRST_BELOW
        if prose_first != (side.children.index(prose) < side.children.index(variants)):
            if prose_first:
                side.move_child(variants, after=prose)
            else:
                side.move_child(variants, before=prose)
        variants.set_class(prose_first, "-after-prose")

    def variants_text(self) -> Text:
        text = Text("What-ifs: ", style="bold")
        if not self.variants:
            text.append("none in this lesson (the keys in help still work)", style="dim")
        for i, (variant, label) in enumerate(self.page_labels()):
            on = self._variant_on(variant)
            text.append(f"\n {i + 1} ", style="reverse" if on else "bold")
            text.append(" " + label, style="bold" if on else "")
        if len(self.variants) > 9:
            pages = -(-len(self.variants) // 9)
            nxt = (self.variant_page + 1) % pages * 9
            text.append("\n 0 ", style="bold")
            text.append(f" what-ifs {nxt + 1}-{min(nxt + 9, len(self.variants))} of "
                        f"{len(self.variants)}", style="dim")
        if self.lesson.questions and self.services.ask_questions:
            # q is not in the footer (no room at 80 columns): say it where it matters
            right = sum(1 for n, c in self.answers.items()
                        if c == self.lesson.questions[n].answer)
            text.append(f"\nQuestions: {len(self.answers)}/{len(self.lesson.questions)} "
                        f"answered, {right} right", style="bold")
            text.append("  q lists them (reopen a skipped one)", style="dim")
        return text

    def page_labels(self) -> list[tuple[Variant, str]]:
        """The what-ifs keys 1-9 switch now, each with the words shown for it."""
        start = self.variant_page * 9
        # scripts are numbered across pages, so "script 3" is the same one on every page
        scripts = sum(1 for v in self.variants[:start] if "script:" in v.label)
        out = []
        for variant in self.variants[start:start + 9]:
            label = variant.label
            if "script:" in label and self.current_horizon() is not None:
                # a script spells out writes and reads: shown after the predictions; the
                # what-if's other changes stay named ("another script (1)" alone hid
                # that lesson 23's fourth what-if also turns NODELAY on)
                # (built from the overrides: a script's own text holds "; ")
                scripts += 1
                parts = [describe_override(o) if not o.partition("=")[0].endswith(".script")
                         else f"{o.partition('.')[0]} script {scripts}"
                         for o in variant.overrides]
                label = "; ".join(parts) + " (its script is shown after the questions)"
            out.append((variant, label))
        return out

    def binding_tooltip(self, binding: Binding) -> str | None:
        """Help's line for a what-if key: the what-if it switches now (help listed "What-if
        2" with no name)."""
        if not binding.action.startswith("variant("):
            return None
        index = int(binding.action[len("variant("):-1])
        labels = self.page_labels()
        if not 0 <= index < len(labels):
            return None
        if index == 0:
            # the "1-9 What-ifs" row stands for every number key: say so, then what 1
            # does (it read "Switch what-if 1 on or off: …" as if that were all of 1-9)
            keys = "1" if len(labels) == 1 else f"1-{len(labels)}"
            return (f"{keys}: switch one of the what-ifs listed in the left pane on or off; "
                    f"1: {labels[0][1]}")
        return f"Switch what-if {index + 1} on or off: {labels[index][1]}"

    def _variant_on(self, variant: Variant) -> bool:
        if variant.overrides:
            return self.extra == variant.overrides
        side, _, option = variant.toggle.partition(".")
        if self.whatif is None or self.base_whatif is None:
            return False
        now: object = getattr(self.whatif.side(Side(side)), option)
        was: object = getattr((self.extra_whatif or self.base_whatif).side(Side(side)), option)
        return now != was

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "variant":
            index = parameters[0] if parameters else 0
            return (isinstance(index, int)
                    and self.variant_page * 9 + index < len(self.variants))
        if action == "variant_page":
            return len(self.variants) > 9
        return super().check_action(action, parameters)

    def action_variant_page(self) -> None:
        pages = -(-len(self.variants) // 9)
        self.variant_page = (self.variant_page + 1) % max(1, pages)
        self.query_one("#variants", Static).update(self.variants_text())
        self.refresh_bindings()

    def action_variant(self, index: int) -> None:
        """Key 1-9: the index-th what-if of the page shown."""
        self.toggle_variant(self.variant_page * 9 + index)

    def toggle_variant(self, index: int) -> None:
        """Switch the lesson's what-if ``index`` (0-based, over all pages) on or off."""
        if not 0 <= index < len(self.variants):
            return
        variant = self.variants[index]
        if variant.overrides:
            self.set_variant(() if self.extra == variant.overrides else variant.overrides)
        else:
            side, _, option = variant.toggle.partition(".")
            self.action_flip(side, Knob(option).value)

    def on_result(self, result: object) -> None:
        self.query_one("#variants", Static).update(self.variants_text())
        link = self.services.class_link
        if link is not None:
            link.lesson_ready(self)

    def done(self) -> int:
        """How many questions, in time order, the student has answered: the reveals of
        lesson.md up to that count are shown. A question skipped with Esc reveals nothing
        (the student may reopen it with q and still predict); one reopened hides its reveal
        again while it is open."""
        count = 0
        while count in self.answers and count != self.reopened:
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
        if self.reopened is not None:
            return round(self.lesson.questions[self.reopened].at_ms * 1000)
        pending = self.pending()
        return None if pending is None else round(pending[1].at_ms * 1000)

    def record_score(self) -> None:
        """The lesson list shows right answers / questions for each lesson."""
        right = sum(1 for n, c in self.answers.items() if c == self.lesson.questions[n].answer)
        self.services.scores[self.lesson.slug] = (right, len(self.lesson.questions))

    def action_questions(self) -> None:
        from .questions import QuestionsScreen

        def chosen(number: int | None) -> None:
            if number is not None and number in self.asked:
                self.ask(number, self.lesson.questions[number])

        self.app.push_screen(QuestionsScreen(self.lesson.questions, self.asked,
                                             self.answers), chosen)

    def action_sandbox_copy(self) -> None:
        from .sandbox import SandboxScreen, with_overrides, without_answers  # siblings
        if self.text is None:
            return
        try:
            # a question still pending: the description may give its answer away too
            text = without_answers(self.text, pending=self.current_horizon() is not None)
        except ValueError as exc:
            self.show_error(f"{self.where}: {exc}")
            return
        # the copy is what the ladder shows: the what-ifs that are on written into it
        on = self.overrides() if self.whatif is not None and self.base_whatif else []
        if on:
            try:
                changed = with_overrides(text, on)
                # the same document (scripts' line numbers shift: compare the tables)
                same = loads(changed, self.where).raw == loads(text, self.where, on).raw
            except (ValueError, ScenarioError):
                same = False
            if same:
                text = changed
            else:
                self.say("The sandbox copy is the lesson as written: the what-ifs that are "
                         "on could not be written into it.", severity="warning")
        # a question still pending keeps its horizon in the copy: the sandbox must not be
        # a way round predicting
        from ..exercise import lesson_exercises
        self.app.push_screen(SandboxScreen(text=text, name=self.lesson.slug,
                                           horizon=self.current_horizon(),
                                           exercises=lesson_exercises(self.lesson)))

    def move_to(self, index: int, *, reveal_first: bool = False) -> None:
        ladder = self.query_one(Ladder)
        pending = self.pending()
        last = len(ladder.rows) - 1
        at_end = self.result is not None and last == len(self.result.rows) - 1
        if pending is not None and self.result is not None and (
                index > last or (at_end and index >= last)):
            link = self.services.class_link
            if link is not None and link.holds(self.lesson.slug, pending[0]):
                # a class led by its teacher answers this question together
                if ladder.rows:
                    ladder.cursor = len(ladder.rows) - 1
                self.pause()
                self.say("The class answers the next question together: your teacher "
                         "opens it.", timeout=4)
                return
            # the move would pass the pending question's time: ask first. A jump to a
            # later stall then stops on the first row the answer reveals, not past what
            # the student just predicted; End goes on (and asks the next question).
            if ladder.rows:
                ladder.cursor = len(ladder.rows) - 1
            self.ask(*pending, then=min(index, last + 1) if reveal_first else index)
            return
        if ladder.rows:
            ladder.cursor = ladder.validate_cursor(index)

    def ask(self, number: int, question: Question, then: int | None = None, *,
            ballot: Ballot | None = None) -> None:
        """Ask question `number`, alone or (`ballot`) as a class vote."""
        self.pause()
        if self.result is not None and (self.result.overrides or self.simulating()):
            # a question is about the lesson's own run, never about a what-if variant drawn
            # behind it
            self.action_reset_whatif()
            self.say("What-ifs undone: the question is about the lesson's own run.",
                     timeout=4)
        if number in self.asked:
            # reopened from the list: behind the question, the run is cut at its time again
            # and its reveal is hidden, as when it was first asked
            self.reopened = number
            self.query_one("#prose", Markdown).update(self.lesson.visible_prose(self.done()))
            self.refresh_view()

        def answered(choice: int | None) -> None:
            self.reopened = None
            self.asked.add(number)
            if choice is not None and number not in self.answers:
                # the first answer counts: answering again after seeing the run is practice
                self.answers[number] = choice
            self.record_score()
            self.query_one("#prose", Markdown).update(self.lesson.visible_prose(self.done()))
            self.query_one("#variants", Static).update(self.variants_text())
            self.refresh_view()
            if then is not None:
                self.move_to(then)
            if ballot is not None:
                ballot.answered(self)

        self.app.push_screen(QuestionScreen(question, number=number + 1,
                                            total=len(self.lesson.questions), ballot=ballot),
                             answered)
