"""The sandbox: a scenario in an editor beside the ladder; edit, run, toggle.

The text comes from a file (local use only), from a lesson (an in-memory copy: editing
never touches the lesson) or from the template. In a classroom session the server's files
are out of reach: no open key, and `open_path` refuses. A bad file shows the CLI's one-line
`ScenarioError` message in the status line and a notification; the app keeps running.
No simpy, no realnet.
"""

from __future__ import annotations

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


class SandboxScreen(RunScreen):
    """Editor | ladder. ctrl+r runs the editor's text, ctrl+o opens another file."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run_editor", "Run", show=True, id="sandbox.run",
                tooltip="Simulate the scenario text in the editor"),
        Binding("ctrl+o", "open", "Open", show=True, id="sandbox.open",
                tooltip="Open a scenario file"),
    ]

    def __init__(self, path: str | None = None, *, text: str | None = None,
                 name: str | None = None) -> None:
        """Open ``path``, or edit ``text`` in memory (named ``name``), or the template."""
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
