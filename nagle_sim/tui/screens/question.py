"""Predict, then reveal: a modal multiple-choice question; returns the chosen index.

No simpy, no realnet.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...lessons import Question
from .closing import ClosesOnce


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

    def __init__(self, question: Question, *, number: int = 1, total: int = 1) -> None:
        super().__init__()
        self.question = question
        self.number = number
        self.total = total
        self.choice: int | None = None

    def compose(self) -> ComposeResult:
        # compact buttons and a scroll area: prompt, choices, verdict and explanation stay
        # readable at 80x24 (up/down or the mouse scroll the rest)
        with VerticalScroll():
            # lesson text is never read as markup
            yield Static(Text.assemble((f"Predict ({self.number}/{self.total}): ", "bold"),
                                       self.question.prompt), id="prompt")
            for i, text in enumerate(self.question.choices):
                yield Button(Text(f"{i + 1}. {text}"), id=f"choice-{i}", compact=True)
            yield Static("", id="verdict")
            yield Button("Continue ⏎", id="continue", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#continue").display = False

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        ident = event.button.id or ""
        if ident == "continue":
            self.dismiss(self.choice)
        elif ident.startswith("choice-"):
            self.action_answer(int(ident.split("-")[1]))

    def action_answer(self, index: int) -> None:
        if self.choice is not None or not 0 <= index < len(self.question.choices):
            return
        self.choice = index
        right = index == self.question.answer
        correct = self.question.choices[self.question.answer]
        verdict = (Text("Right. ", style="bold green") if right
                   else Text.assemble(("Not quite", "bold red"),
                                      f" — the answer is {self.question.answer + 1}. "
                                      f"{correct}. "))
        verdict.append(self.question.explain)
        self.query_one("#verdict", Static).update(verdict)
        for i, button in enumerate(self.query(Button).results(Button)):
            if button.id and button.id.startswith("choice-"):
                button.disabled = True
                if i == self.question.answer:
                    button.variant = "success"
                elif i == index:
                    button.variant = "error"
        button = self.query_one("#continue", Button)
        button.display = True
        button.focus()
        self.call_after_refresh(self.query_one("#verdict").scroll_visible, animate=False,
                                top=True)

    def action_skip(self) -> None:
        self.dismiss(self.choice)
