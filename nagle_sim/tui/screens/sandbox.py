"""The sandbox: a scenario in an editor beside the ladder; edit, run, toggle.

The text comes from a file (local use only), from a lesson (an in-memory copy: editing
never touches the lesson) or from the template. In a classroom session the server's files
are out of reach: no open key, and `open_path` refuses. A bad file shows the CLI's one-line
`ScenarioError` message in the status line and a notification; the app keeps running.
No simpy, no realnet.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static, TextArea

from ...scenario import ScenarioError, read_text
from ..classroom import NO_FILES
from ..exercise import Exercise, Verdict, check
from ..runners import AppServices
from .open_file import OpenFileScreen
from .run import RunScreen

TEMPLATE = """title = "sandbox"
description = "two small writes, then a read (edit me, then ctrl+r)"

[link]
delay_ms = 0

[client]
script = \"\"\"
repeat 5 {
  write 6
  write 7
  read 13
}
\"\"\"

[server]
script = \"\"\"
repeat 5 {
  read 13
  write 13
}
\"\"\"
"""


read_scenario_file = read_text
"""The file's text; `ScenarioError` with the CLI's message when it cannot be read."""

_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\s]+?)\s*\]\]?\s*(#.*)?$")
TEACHING_TABLES = ("lesson", "expect")
"""A lesson's questions, answers, explanations and claims: not part of a sandbox copy."""


HIDDEN_DESCRIPTION = ("the lesson's description is hidden until its questions are "
                      "answered")
"""What a sandbox copy says in place of the description while a question is pending (a
description may say what happens, e.g. that the window runs out)."""

_DESCRIPTION = re.compile(r"^\s*description\s*=")
_TRIPLE = ('"""', "'''")


def _toggles_string(line: str) -> bool:
    """The line opens or closes a multi-line string."""
    return any(line.count(q) % 2 for q in _TRIPLE)


def without_answers(text: str, *, pending: bool = False) -> str:
    """``text`` without its ``[lesson]`` and ``[[expect]]`` tables (and their sub-tables),
    comments and layout of the rest kept: the sandbox copy of a lesson must not hold the
    answers of questions still to come. ``pending``: a question is still to be answered,
    so the top-level ``description`` (which may give the answer away) is replaced too.
    ValueError if the cut does not parse to exactly the rest of the scenario (never a copy
    that silently lost or kept something)."""
    out: list[str] = []
    skipping = False
    in_string = False
    top = True            # before the first table header: where description lives
    in_description = False
    for line in text.splitlines(keepends=True):
        if not in_string:
            header = _HEADER.match(line)
            if header:
                top = False
                root = header.group(1).split(".")[0].strip()
                skipping = root in TEACHING_TABLES
            elif pending and top and _DESCRIPTION.match(line):
                in_description = True
                out.append(f'description = "{HIDDEN_DESCRIPTION}"\n')
        if not skipping and not in_description:
            out.append(line)
        if _toggles_string(line):
            in_string = not in_string
        if in_description and not in_string:
            in_description = False    # the value (one line or a closed block) is over
    cut = "".join(out)
    try:
        kept = tomllib.loads(cut)
        whole = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text  # not TOML: the sandbox shows the loader's own error for it
    expected = {k: v for k, v in whole.items() if k not in TEACHING_TABLES}
    if pending and "description" in expected:
        expected["description"] = HIDDEN_DESCRIPTION
    if kept != expected:
        raise ValueError("the lesson's scenario.toml could not be cut cleanly")
    return cut


def _toml_value(text: str) -> str:
    """A ``--set`` value as TOML (a bare word, e.g. ``default``, becomes a string)."""
    try:
        tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return json.dumps(text)
    return text


def with_overrides(text: str, overrides: list[str]) -> str:
    """``text`` with each ``table.key=value`` of ``overrides`` written into it (the line
    replaced, or added under its table, or the table appended): the sandbox copy of the
    what-ifs that are on. ValueError when one cannot be written as a line (the caller
    then keeps the original text and says so)."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for item in overrides:
        key, _, value = item.partition("=")
        table, _, name = key.strip().rpartition(".")
        if not table or not name or "." in table:
            raise ValueError(f"cannot write {item!r} into the copy")
        entry = f"{name} = {_toml_value(value.strip())}  # a what-if that was on\n"
        at = header = None
        in_string = False
        current = ""
        for i, line in enumerate(lines):
            if not in_string:
                h = _HEADER.match(line)
                if h:
                    current = h.group(1).strip()
                    if current == table:
                        header = i
                elif current == table and re.match(rf"^\s*{re.escape(name)}\s*=", line):
                    if _toggles_string(line) or "[" in line.split("=", 1)[1]:
                        raise ValueError(f"cannot rewrite the multi-line {key}")
                    at = i
            if _toggles_string(line):
                in_string = not in_string
        if at is not None:
            lines[at] = entry
        elif header is not None:
            lines.insert(header + 1, entry)
        else:
            lines += ["\n", f"[{table}]\n", entry]
    return "".join(lines)


class SandboxScreen(RunScreen):
    """Editor | ladder. ctrl+r runs the editor's text, ctrl+o opens another file."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run_editor", "Run", show=True, id="sandbox.run",
                tooltip="Simulate the scenario text in the editor"),
        # not in the footer: at 80 columns it pushed "? Help" out (help and ctrl+p list it)
        Binding("ctrl+o", "open", "Open", show=False, id="sandbox.open",
                tooltip="Open a scenario file"),
        Binding("ctrl+t", "check_exercise", "Check", show=False, id="sandbox.check",
                tooltip="Check the editor's scenario against the lesson's exercise"),
    ]

    def __init__(self, path: str | None = None, *, text: str | None = None,
                 name: str | None = None, horizon: int | None = None,
                 exercises: list[Exercise] | None = None) -> None:
        """Open ``path``, or edit ``text`` in memory (named ``name``), or the template.
        ``horizon``: a lesson question still pending (µs): the copy shows nothing after it."""
        self.lesson_horizon = horizon
        if text is not None:
            where, error = f"{name or 'sandbox'}.toml", ""
        elif path is None:
            text, where, error = TEMPLATE, "sandbox.toml", ""
        else:
            where = path
            try:
                text, error = read_scenario_file(path), ""
            except ScenarioError as exc:
                text, error = None, str(exc)
        super().__init__(text=text, where=where, title=f"sandbox: {where}",
                         scenario_path=Path(where), error=error)
        if name is not None:
            self.export_name = f"{name}-sandbox"
        self.exercises = exercises or []
        """The lesson's exercises (a copy made with `s` from a lesson; issue 30): the
        first is shown above the editor and ctrl+t checks the editor's text against it."""

    def current_horizon(self) -> int | None:
        return self.lesson_horizon

    def compose_side(self) -> ComposeResult:
        with Vertical(id="side"):
            if self.exercises:
                with VerticalScroll(id="exercise-box"):
                    yield Static(self.exercise_text(), id="exercise")
            yield TextArea(self.text or "", id="editor", show_line_numbers=True,
                           soft_wrap=False)

    def exercise_text(self, verdict: Verdict | None = None) -> Text:
        """The exercise's task and how to check it; after a check, each claim ✓ or ✗."""
        ex = self.exercises[0]
        text = Text(f"Exercise ({ex.kind}): ", style="bold")
        text.append(ex.task)
        if verdict is None:
            text.append("\nctrl+t checks it", style="dim")
            if ex.kind == "claim":
                text.append(" (write your claim as an [[expect]] table)", style="dim")
            return text
        for ok, why in verdict.lines:
            text.append(f"\n{'✓' if ok else '✗'} {why}", style="green" if ok else "bold red")
        text.append("\nSolved." if verdict.solved else f"\nNot yet. Hint: {ex.hint}",
                    style="bold green" if verdict.solved else "")
        return text

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "check_exercise" and not self.exercises:
            return False
        if self._check_open(action):
            return False  # classroom: the key is neither shown nor bound
        return super().check_action(action, parameters)

    def action_check_exercise(self) -> None:
        if not self.exercises:
            return
        if self.lesson_horizon is not None:
            # the verdict says what the run does ("✗ no request waits for a delayed ACK"):
            # it would answer the lesson's pending question
            self.say("Answer the lesson's questions first: checking the exercise shows what "
                     "the run does.", title="Exercise", severity="warning")
            return
        self.say("checking the exercise…", timeout=2)
        self._check(self.query_one("#editor", TextArea).text)

    @work(thread=True, exclusive=True, group="exercise")
    def _check(self, text: str) -> None:
        try:
            verdict = check(self.exercises[0], text, self.where, self.services.run_sim)
        except ScenarioError as exc:
            self.app.call_from_thread(self.show_error, str(exc))
            return
        except Exception as exc:  # the model refusing a combination is the student's too
            self.app.call_from_thread(self.show_error,
                                      f"{self.where}: {type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._checked, verdict)

    def _checked(self, verdict: Verdict) -> None:
        self.query_one("#exercise", Static).update(self.exercise_text(verdict))
        self.query_one("#exercise-box").scroll_end(animate=False)
        self.say("Exercise solved." if verdict.solved else
                 f"Not yet: {sum(not ok for ok, _ in verdict.lines)} check(s) fail.",
                 title="Exercise", severity="information" if verdict.solved else "warning")

    def action_run_editor(self) -> None:
        self.start(self.query_one("#editor", TextArea).text, self.where)

    def _check_open(self, action: str) -> bool:
        return action == "open" and cast(AppServices, self.app).classroom is not None

    def action_open(self) -> None:
        if cast(AppServices, self.app).classroom is not None:
            return

        def opened(path: str | None) -> None:
            if path:
                self.open_path(path)

        self.app.push_screen(OpenFileScreen(self.where), opened)

    def open_path(self, path: str) -> None:
        if cast(AppServices, self.app).classroom is not None:
            self.show_error(NO_FILES)
            return
        try:
            text = read_scenario_file(path)
        except ScenarioError as exc:
            self.show_error(str(exc))
            return
        self.where = path
        self.scenario_path = Path(path)
        self.sub_title = self.title_text = f"sandbox: {path}"
        self.query_one("#editor", TextArea).text = text
        self.start(text, path)
