"""The sandbox: any scenario file in an editor beside the ladder; edit, run, toggle.

A bad file shows the CLI's one-line `ScenarioError` message in the status line and a
notification; the app keeps running. No simpy, no realnet.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import TextArea

from ...scenario import ScenarioError, read_text
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

    BINDINGS: list[BindingType] = [
        Binding("ctrl+r", "run_editor", "Run", show=True, id="sandbox.run",
                tooltip="Simulate the scenario text in the editor"),
        Binding("ctrl+o", "open", "Open", show=True, id="sandbox.open",
                tooltip="Open a scenario file"),
    ]

    def __init__(self, path: str | None = None) -> None:
        text: str | None
        if path is None:
            text, where, error = TEMPLATE, "sandbox.toml", ""
        else:
            where = path
            try:
                text, error = read_scenario_file(path), ""
            except ScenarioError as exc:
                text, error = None, str(exc)
        super().__init__(text=text, where=where, title=f"sandbox: {where}",
                         scenario_path=Path(where), error=error)

    def compose_side(self) -> ComposeResult:
        with Vertical(id="side"):
            yield TextArea(self.text or "", id="editor", show_line_numbers=True,
                           soft_wrap=False)

    def action_run_editor(self) -> None:
        self.start(self.query_one("#editor", TextArea).text, self.where)

    def action_open(self) -> None:
        def opened(path: str | None) -> None:
            if path:
                self.open_path(path)

        self.app.push_screen(OpenFileScreen(self.where), opened)

    def open_path(self, path: str) -> None:
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
