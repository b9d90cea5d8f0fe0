"""`NagleApp`: global bindings, themes, the command palette and screen routing only.

Behaviour lives in the screens. Executors are injected (``run_sim``, ``run_real``) so tests
pass fakes. Must not import simpy or realnet at module level; `run_app` imports the
simulator driver when it is called.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar

from platformdirs import user_downloads_path
from textual import events
from textual.actions import parse
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.geometry import Size
from textual.screen import Screen
from textual.theme import Theme

from ..lessons import Lesson, cheat_sheet, load_lessons
from ..scenario import ScenarioError
from .classlink import ClassLink
from .classroom import NO_FILES, REAL_OFF, Classroom
from .commands import binding_commands, own_bindings
from .runners import Runner
from .screens.cheatsheet import CheatSheetScreen
from .screens.closing import OncePalette
from .screens.help import HelpScreen, key_label, screen_bindings
from .screens.lesson_list import LessonListScreen
from .screens.run import RunScreen
from .screens.sandbox import SandboxScreen
from .screens.sweep import open_sweep

DARK = Theme(
    name="nagle-dark",
    primary="#0A5CA8",
    secondary="#004578",
    warning="#ffa62b",
    error="#ba3c5b",
    success="#4EBF71",
    accent="#ffa62b",
    foreground="#e0e0e0",
    dark=True,
    variables={
        # Textual's dark theme puts text on its primary blue #0178D4 (3.6-3.8:1) and
        # draws headings in it (4.1:1 on the background): a deeper blue under text, a
        # deeper still under the highlighted row (whose summary is dimmed) and the
        # lighter text shade for headings keep every pair at WCAG's 4.5:1 for text
        "block-cursor-background": "#083A68",
        "markdown-h1-color": "#57A5E2",
        "markdown-h2-color": "#57A5E2",
        "markdown-h3-color": "#57A5E2",
    },
)
"""The default: Textual's dark theme with every text/background pair at 4.5:1 or more
(tests/tui/test_contrast.py measures each screen)."""

HIGH_CONTRAST = Theme(
    name="nagle-high-contrast",
    primary="#FFFFFF",
    secondary="#00FFFF",
    accent="#3D8BFF",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#202020",
    boost="#101010",
    success="#00FF00",
    warning="#FFFF00",
    error="#FF4040",
    dark=True,
    variables={
        # the ladder's cursor row is $primary-muted: white at 30 % (#4c4c4c) left the
        # client's blue arrows at 3.2:1; a near-black row keeps every hue above 4.5:1
        "primary-muted": "#262626",
        "footer-key-foreground": "#00FFFF",
    },
)
"""Pure black and white with saturated signal colours (projectors, low vision)."""


class NagleApp(App[int]):
    """The nagle-sim TUI."""

    CSS_PATH = "app.tcss"
    TITLE = "nagle-sim"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help", show=True, id="app.help",
                key_display="?", tooltip="Show every key binding"),
        Binding("f2", "high_contrast", "Contrast", show=False, id="app.high_contrast",
                tooltip="Switch the high-contrast theme on or off"),
        Binding("f3", "projector", "Projector", show=False, id="app.projector",
                tooltip="Projector mode: double row spacing and bolder text"),
        Binding("f4", "cheat_sheet", "Cheat sheet", show=False, id="app.cheat_sheet",
                tooltip="The course's cheat sheet: when Linux ACKs at once, when Nagle "
                "holds, what releases held data, the constants (nagle-sim handout prints it)"),
        Binding("w", "sweep", "Sweep", show=False, id="app.sweep",
                tooltip="The lesson's sweep: its grid run in the model, as a table and a plot"),
        Binding("ctrl+q", "quit", "Quit", show=False, id="app.quit",
                tooltip="Quit nagle-sim (also in the palette)", priority=True),
    ]

    def __init__(self, *, run_sim: Runner, run_real: Runner | None = None,
                 lessons: Sequence[Lesson] | None = None, lessons_root: Path | None = None,
                 path: str | None = None, ask_questions: bool = True,
                 classroom: Classroom | None = None, real_blocker: str = "",
                 class_link: ClassLink | None = None) -> None:
        super().__init__()
        self.run_sim = run_sim
        self.classroom = classroom
        self.class_link = class_link
        """The served app's link to its class (`classlink`): follows the teacher."""
        if classroom is not None and not classroom.allow_real:
            run_real, real_blocker = None, REAL_OFF
        self.run_real = run_real
        self.real_blocker = real_blocker
        """Why `r` cannot run here (empty when it can); shown instead of running."""
        self.ask_questions = ask_questions
        self.projector = False
        self.scores: dict[str, tuple[int, int]] = {}
        self.start_path = path
        self._lessons = list(lessons) if lessons is not None else None
        self._lessons_root = lessons_root
        self._plain_theme = DARK.name

    def lesson_list(self) -> tuple[list[Lesson], str]:
        if self._lessons is None:
            try:
                self._lessons = (load_lessons(self._lessons_root) if self._lessons_root
                                 else load_lessons())
            except (ScenarioError, OSError) as exc:
                return [], str(exc)
        return self._lessons, ""

    def on_mount(self) -> None:
        # only the app's own themes, each measured for contrast: Textual's built-in ones
        # (offered by the palette's "Change theme") put text below 4.5:1
        for theme in (DARK, HIGH_CONTRAST):
            self.register_theme(theme)
        self.theme = DARK.name
        for name in list(self.available_themes):
            if name not in (DARK.name, HIGH_CONTRAST.name):
                self.unregister_theme(name)
        self.push_screen(LessonListScreen())
        if self.class_link is not None:
            self.class_link.attach(self)  # a class led already: its lesson comes first
        if self.start_path is not None:
            if self.classroom is not None:  # a served session never opens server files
                self.notify(NO_FILES, severity="warning")
            else:
                self.push_screen(SandboxScreen(self.start_path))

    def on_unmount(self) -> None:
        if self.class_link is not None:
            self.class_link.close()

    def on_ready(self) -> None:
        """Take the size the terminal last reported, once more. Textual's web driver posts
        its start-up size (80×24) from a coroutine it schedules, while its input thread
        posts each size the browser sends; a size sent while the app was starting (a warm
        classroom process handed to a tab at once) was handled first and then overwritten,
        and the app stayed 80×24 in a 142×34 page. The driver keeps the last size it was
        told (textual/drivers/web_driver.py)."""
        told = getattr(self._driver, "_size", None)
        if isinstance(told, tuple) and len(told) == 2 and Size(*told) != self.size:
            self.post_message(events.Resize(Size(*told), Size(*told)))

    def action_command_palette(self) -> None:
        """Textual's, but not while the last palette is still being taken down: it is off
        the screen stack at once but stays a child until removed, and a second one with
        its id ended the app with DuplicateIds (ctrl+p, esc, ctrl+p typed fast)."""
        # the app's own node list holds every screen it has not removed yet
        # (App.children shows only the active one)
        if self.use_command_palette and not any(isinstance(node, CommandPalette)
                                                for node in self._nodes):
            self.push_screen(OncePalette(id="--command-palette"))

    def _handle_exception(self, error: Exception) -> None:
        """Textual ends the app on any unhandled error. Its command palette's
        command-gathering worker and watchers query the palette's own children after a
        fast esc has removed them (NoMatches 'CommandList'): with the palette's other
        races (screens.closing) a key storm ended 6 of 8 classroom sessions. The palette
        is disposable, so that error is dropped; every other error still ends the app."""
        if palette_race(error):
            self.log.warning(f"ignored a command-palette race: {error!r}")
            return
        super()._handle_exception(error)

    # ------------------------------------------------------------------ actions
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        # one help screen, installed once: reopening only swaps its key text (help must
        # open in < 150 ms; composing its widgets again was most of that)
        if not self.is_screen_installed("help"):
            self.install_screen(HelpScreen(self.screen), "help")
        help_screen = self.get_screen("help")
        assert isinstance(help_screen, HelpScreen)
        help_screen.show_for(self.screen)
        self.push_screen(help_screen)

    def action_high_contrast(self) -> None:
        if self.theme == HIGH_CONTRAST.name:
            self.theme = self._plain_theme
        else:
            self._plain_theme = self.theme
            self.theme = HIGH_CONTRAST.name

    def action_projector(self) -> None:
        self.projector = not self.projector
        self.set_class(self.projector, "-projector")
        for screen in self.screen_stack:
            if isinstance(screen, RunScreen):
                screen.set_projector(self.projector)

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """Textual's screenshot (palette: "Save screenshot"), saved where the user can
        find it. Textual saves to the downloads folder and said only "Failed to save
        screenshot" where that folder did not exist yet (a fresh account, a server):
        it is created, or the current directory is used when it cannot be."""
        if path is None and not self.is_web:
            folder = user_downloads_path()
            try:
                folder.mkdir(parents=True, exist_ok=True)
                path = str(folder)
            except OSError:
                path = str(Path.cwd())
        return super().deliver_screenshot(filename, path, time_format)

    def offers(self, action: str, screen: Screen[object] | None) -> bool:
        """Whether help lists the app's key for ``action`` over ``screen``: ``w`` only on
        a lesson with a sweep (elsewhere it only says why not, and help listing "w Sweep"
        over the sandbox promised what it cannot do)."""
        if action == "sweep":
            return getattr(getattr(screen, "lesson", None), "sweep", None) is not None
        return True

    def action_cheat_sheet(self) -> None:
        if isinstance(self.screen, CheatSheetScreen):
            return
        try:
            own = self._lessons_root
            # a lessons folder of one's own may have no cheat sheet: the course's then
            text = cheat_sheet(own if own and (own / "cheatsheet.md").exists() else None)
        except ScenarioError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.push_screen(CheatSheetScreen(text))

    def action_sweep(self) -> None:
        open_sweep(self)

    def action_sandbox(self) -> None:
        self.push_screen(SandboxScreen())

    # ------------------------------------------------------------------ palette
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from binding_commands(type(self).BINDINGS, self.run_action)
        # The sandbox has a key only on the lesson list; the palette offers it everywhere.
        if not isinstance(screen, SandboxScreen):
            yield SystemCommand("Sandbox", "Edit and run any scenario", self.action_sandbox)
        if not isinstance(screen, RunScreen):
            yield from binding_commands(own_bindings(type(screen)), screen.run_action)
            return
        # a run screen's entries are built from its bindings, with their keys, so every
        # key is in the palette too (what-ifs named by the lesson, CORK, detail, ghost…)
        variants = getattr(screen, "variants", None)
        toggle = getattr(screen, "toggle_variant", None)
        for binding in screen_bindings(screen):
            _ns, name, _params = parse(binding.action)
            if binding.action.startswith("app."):
                continue
            if name in ("variant", "variant_page") and variants is not None:
                continue    # every what-if is listed below, by its name, on any page
            title = binding.description
            yield SystemCommand(f"{title} ({key_label(binding)})", binding.tooltip or title,
                                partial(screen.run_action, binding.action))
        if variants is not None and toggle is not None:
            for index, variant in enumerate(variants):
                title = f"What-if {index + 1}: {variant.label}"
                yield SystemCommand(title, "Switch this what-if on or off",
                                    partial(toggle, index))


def run_app(path: str | None = None, *, run_sim: Runner, run_real: Runner | None = None,
            classroom: Classroom | None = None, real_blocker: str = "",
            lessons: Sequence[Lesson] | None = None,
            class_link: ClassLink | None = None) -> int:
    """Run the TUI: the lesson list, or the sandbox on ``path``. Returns an exit code.

    The executors are injected: the CLI passes the simulator, and realnet's runner when it
    can run here. The app itself never imports either (an import contract checks it)."""
    app = NagleApp(run_sim=run_sim, run_real=run_real, path=path, classroom=classroom,
                   real_blocker=real_blocker, lessons=lessons, class_link=class_link)
    result = app.run()
    return result if isinstance(result, int) else 0


def palette_race(error: BaseException) -> bool:
    """An error Textual's command palette raised against its own half-removed screen:
    NoMatches for its parts, raised in textual/command.py (judged by where it was raised,
    not by its message)."""
    from textual.css.query import NoMatches
    from textual.worker import WorkerFailed
    if isinstance(error, WorkerFailed):
        error = error.error
    if not isinstance(error, NoMatches):
        return False
    frames = traceback.extract_tb(error.__traceback__)
    return any(frame.filename.replace("\\", "/").endswith("textual/command.py")
               for frame in frames)
