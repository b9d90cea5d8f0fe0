"""The lesson's questions so far: answered (right or wrong), skipped, still to come.

Returns the number of the question to reopen, or None. Questions not yet reached are
listed without their prompt (it would tell what comes next). No simpy, no realnet.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...lessons import Question
from .closing import ClosesOnce


class QuestionsScreen(ClosesOnce, ModalScreen[int | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Close", id="questions.close",
                tooltip="Back to the lesson"),
    ]

    DEFAULT_CSS = """
    QuestionsScreen { align: center middle; }
    QuestionsScreen > Vertical {
        width: 90%; max-width: 96; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    QuestionsScreen OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, questions: tuple[Question, ...], asked: set[int],
                 answers: dict[int, int]) -> None:
        super().__init__()
        self.questions = questions
        self.asked = asked
        self.answers = answers

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Questions — Enter reopens one you skipped or answered",
                              style="bold"))
            options = OptionList(id="questions")
            for number, q in enumerate(self.questions):
                text = Text(f"{number + 1}. ")
                if number not in self.asked:
                    text.append("still to come", style="dim")
                    options.add_option(Option(text, id=f"q-{number}", disabled=True))
                    continue
                choice = self.answers.get(number)
                if choice is None:
                    text.append("skipped  ", style="bold yellow")
                elif choice == q.answer:
                    text.append("right  ", style="bold green")
                else:
                    text.append("wrong  ", style="bold red")
                text.append(q.prompt)
                options.add_option(Option(text, id=f"q-{number}"))
            yield options

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        reachable = sorted(self.asked)
        if reachable:
            options.highlighted = reachable[-1]
        options.focus()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_index)

    def action_cancel(self) -> None:
        self.dismiss(None)
