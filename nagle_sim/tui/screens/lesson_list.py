"""The first screen: the list of lessons, plus ways into the sandbox. No simpy, no realnet."""

from __future__ import annotations

from typing import ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from ...lessons import Lesson
from ..runners import AppServices
from .lesson import LessonScreen
from .open_file import OpenFileScreen
from .sandbox import SandboxScreen


class LessonListScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sandbox", "Sandbox", show=True, id="lessons.sandbox",
                tooltip="Open the sandbox with an example scenario"),
        Binding("o", "open", "Open file", show=True, id="lessons.open",
                tooltip="Open a scenario file in the sandbox"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.lessons: list[Lesson] = []

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # a served session never browses the server's files
        return not (action == "open" and cast(AppServices, self.app).classroom is not None)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Pick a lesson (Enter), or press s for the sandbox.", id="intro")
        yield OptionList(id="lessons")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "lessons"
        lessons, error = cast(AppServices, self.app).lesson_list()
        self.lessons = lessons
        self.fill()
        if error:
            self.query_one("#intro", Static).update(Text.assemble(("error: ", "bold red"),
                                                                  error))
        elif not lessons:
            self.query_one("#intro", Static).update(
                "No lessons found. Press s for the sandbox or o to open a scenario file.")
        options = self.query_one(OptionList)
        if lessons:
            options.highlighted = 0
        options.focus()

    def fill(self) -> None:
        """(Re)build the list: title, score so far, summary."""
        options = self.query_one(OptionList)
        keep = options.highlighted
        options.clear_options()
        scores = cast(AppServices, self.app).scores
        for i, lesson in enumerate(self.lessons):
            text = Text()
            if lesson.number is not None:
                # plain bold, no fixed colours: the highlighted row is white in the
                # high-contrast theme and blue in the dark one, and cyan, green or yellow
                # text fails one of them (tests/tui/test_contrast.py)
                text.append(f"{lesson.number:>2}  ", style="bold")
            text.append(lesson.title, style="bold")
            if lesson.slug in scores:
                right, total = scores[lesson.slug]
                text.append(f"   {'✓' if right == total else '·'} {right}/{total} right",
                            style="bold")
            if lesson.summary:
                text.append("\n" + lesson.summary, style="dim")
            options.add_option(Option(text, id=f"lesson-{i}"))
        if keep is not None and self.lessons:
            options.highlighted = min(keep, len(self.lessons) - 1)

    def on_screen_resume(self) -> None:
        if self.lessons:
            self.fill()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.open_lesson(event.option_index)

    def open_lesson(self, index: int) -> None:
        self.app.push_screen(LessonScreen(self.lessons[index]))

    def action_sandbox(self) -> None:
        self.app.push_screen(SandboxScreen())

    def action_open(self) -> None:
        if cast(AppServices, self.app).classroom is not None:
            return

        def opened(path: str | None) -> None:
            if path:
                self.app.push_screen(SandboxScreen(path))

        self.app.push_screen(OpenFileScreen(), opened)
