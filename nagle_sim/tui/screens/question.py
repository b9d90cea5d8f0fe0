"""Predict, then reveal: a modal multiple-choice question; returns the chosen index.

Alone, choosing shows the verdict at once. In a class led by a teacher (`ballot` given,
`nagle_sim.tui.classlink`) a choice is a vote the ballot sends: no verdict until the
ballot's reveal, which uses `open_choices` and `show_verdict`. Choices are identified by
their canonical index (their place in the lesson file), wherever a screen shows them.
No simpy, no realnet.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...lessons import Question
from .closing import ClosesOnce


class Ballot(Protocol):
    """A class vote on this question (`classlink.ClassBallot`)."""

    def attach(self, screen: QuestionScreen) -> None:
        """The screen is mounted: draw the phase into its ``#class`` line."""

    def cast(self, choice: int) -> bool:
        """The student chose `choice` (canonical index); True when it was sent."""

    def may_close(self) -> bool:
        """Whether the student may close the question (after the reveal)."""

    def answered(self, screen: Any) -> None:
        """The question closed; `screen` is the lesson that asked it."""


class QuestionScreen(ClosesOnce, ModalScreen[int | None]):
    """Ask, check, explain. Keys 1-6 answer; Enter continues after the reveal."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(str(n), f"answer({n - 1})", f"Answer {n}", show=False,
                  id=f"question.answer-{n}", tooltip=f"Choose answer {n}")
          for n in range(1, 7)),
        Binding("escape", "skip", "Skip", id="question.skip",
                tooltip="Skip the question (the run continues)"),
    ]

    DEFAULT_CSS = """
    QuestionScreen { align: center middle; }
    QuestionScreen > VerticalScroll {
        width: 90%; max-width: 96; height: auto; max-height: 100%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    QuestionScreen Button { width: 100%; margin-top: 1; }
    QuestionScreen #verdict { margin-top: 1; }
    """

    def __init__(self, question: Question, *, number: int = 1, total: int = 1,
                 ballot: Ballot | None = None) -> None:
        super().__init__()
        self.question = question
        self.number = number
        self.total = total
        self.choice: int | None = None
        self.ballot = ballot

    def compose(self) -> ComposeResult:
        # compact buttons and a scroll area: prompt, choices, verdict and explanation stay
        # readable at 80x24 (up/down or the mouse scroll the rest)
        with VerticalScroll():
            # lesson text is never read as markup
            yield Static(Text.assemble((f"Predict ({self.number}/{self.total}): ", "bold"),
                                       self.question.prompt), id="prompt")
            for i, text in enumerate(self.question.choices):
                yield Button(Text(f"{i + 1}. {text}"), id=f"choice-{i}", compact=True)
            if self.ballot is not None:
                yield Static("", id="class")
            yield Static("", id="verdict")
            yield Button("Continue ⏎", id="continue", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#continue").display = False
        if self.ballot is not None:
            self.ballot.attach(self)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        ident = event.button.id or ""
        if ident == "continue":
            self.dismiss(self.choice)
        elif ident.startswith("choice-"):
            self.action_answer(int(ident.split("-")[1]))

    def action_answer(self, index: int) -> None:
        """The student chose choice `index` (canonical: its place in the lesson file)."""
        if not 0 <= index < len(self.question.choices):
            return
        if self.ballot is not None:  # a class vote: the ballot decides what follows
            self.ballot.cast(index)
            return
        if self.choice is not None:
            return
        self.show_verdict(index)

    def open_choices(self, open_: bool, *, chosen: int | None = None) -> None:
        """Class votes: let the choices be pressed or not; mark the one voted for."""
        for button in self.query(Button).results(Button):
            ident = button.id or ""
            if ident.startswith("choice-"):
                button.disabled = not open_
                button.variant = ("primary" if chosen is not None
                                  and ident == f"choice-{chosen}" else "default")

    def show_verdict(self, index: int | None) -> None:
        """Reveal: the right answer, and whether `index` (canonical, or None: no answer
        given) was it; Continue then closes the question."""
        if index is None:
            self.choice = None
            correct = self.question.choices[self.question.answer]
            verdict = Text.assemble(("The answer", "bold"),
                                    f" is {self.question.answer + 1}. {correct}. ")
            verdict.append(self.question.explain)
            self._verdict(verdict, None)
            return
        self.choice = index
        right = index == self.question.answer
        correct = self.question.choices[self.question.answer]
        verdict = (Text("Right. ", style="bold green") if right
                   else Text.assemble(("Not quite", "bold red"),
                                      f" — the answer is {self.question.answer + 1}. "
                                      f"{correct}. "))
        verdict.append(self.question.explain)
        self._verdict(verdict, index)

    def _verdict(self, verdict: Text, index: int | None) -> None:
        self.query_one("#verdict", Static).update(verdict)
        for button in self.query(Button).results(Button):
            if button.id and button.id.startswith("choice-"):
                button.disabled = True
                choice = int(button.id.split("-")[1])
                if choice == self.question.answer:
                    button.variant = "success"
                elif choice == index:
                    button.variant = "error"
                else:
                    button.variant = "default"
        button = self.query_one("#continue", Button)
        button.display = True
        button.focus()
        self.call_after_refresh(self.query_one("#verdict").scroll_visible, animate=False,
                                top=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # a class question stays until its reveal (the teacher moves the class on)
        if action == "skip" and self.ballot is not None:
            return self.ballot.may_close()
        return True

    def action_skip(self) -> None:
        self.dismiss(self.choice)
