"""The sandbox: a scenario in an editor beside the ladder; edit, run, toggle.

The text comes from a file (local use only), from a lesson (an in-memory copy: editing
never touches the lesson) or from the template. In a classroom session the server's files
are out of reach: no open key, and `open_path` refuses. A bad file shows the CLI's one-line
`ScenarioError` message in the status line and a notification; the app keeps running.
No simpy, no realnet.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import TextArea

from ...scenario import ScenarioError, read_text
from ..classroom import NO_FILES
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


def without_answers(text: str) -> str:
    """``text`` without its ``[lesson]`` and ``[[expect]]`` tables (and their sub-tables),
    comments and layout of the rest kept: the sandbox copy of a lesson must not hold the
    answers of questions still to come. ValueError if the cut does not parse to exactly the
    rest of the scenario (never a copy that silently lost or kept something)."""
    out: list[str] = []
    skipping = False
    in_string = False
    for line in text.splitlines(keepends=True):
        if not in_string:
            header = _HEADER.match(line)
            if header:
                root = header.group(1).split(".")[0].strip()
                skipping = root in TEACHING_TABLES
        if not skipping:
            out.append(line)
        if line.count('"""') % 2 or line.count("'''") % 2:
            in_string = not in_string
    cut = "".join(out)
    try:
        kept = tomllib.loads(cut)
        whole = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text  # not TOML: the sandbox shows the loader's own error for it
    if kept != {k: v for k, v in whole.items() if k not in TEACHING_TABLES}:
        raise ValueError("the lesson's scenario.toml could not be cut cleanly")
    return cut


class SandboxScreen(RunScreen):
    """Editor | ladder. ctrl+r runs the editor's text, ctrl+o opens another file."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run_editor", "Run", show=True, id="sandbox.run",
                tooltip="Simulate the scenario text in the editor"),
        # not in the footer: at 80 columns it pushed "? Help" out (help and ctrl+p list it)
        Binding("ctrl+o", "open", "Open", show=False, id="sandbox.open",
                tooltip="Open a scenario file"),
    ]

    def __init__(self, path: str | None = None, *, text: str | None = None,
                 name: str | None = None, horizon: int | None = None) -> None:
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

    def current_horizon(self) -> int | None:
        return self.lesson_horizon

    def compose_side(self) -> ComposeResult:
        with Vertical(id="side"):
            yield TextArea(self.text or "", id="editor", show_line_numbers=True,
                           soft_wrap=False)

    def action_run_editor(self) -> None:
        self.start(self.query_one("#editor", TextArea).text, self.where)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open" and cast(AppServices, self.app).classroom is not None:
            return False  # classroom: the key is neither shown nor bound
        return super().check_action(action, parameters)

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
