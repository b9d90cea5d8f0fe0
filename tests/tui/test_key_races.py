"""Keys typed faster than screens open and close (issue 29.7: a classroom key storm ended
6 of 8 sessions). Each test drives the mechanism directly, so it fails on c0d499a every
time, not only when the storm's timing happens to hit the race."""

from __future__ import annotations

from collections.abc import Callable

from textual.command import CommandPalette
from textual.css.query import NoMatches
from textual.worker import WorkerFailed

from nagle_sim.tui.app import NagleApp, palette_race
from nagle_sim.tui.screens.help import HelpScreen
from nagle_sim.tui.screens.lesson_list import LessonListScreen
from nagle_sim.tui.screens.run import RunScreen

from .conftest import settle


async def test_a_second_close_of_help_does_not_pop_the_screen_below(
        make_app: Callable[..., NagleApp]) -> None:
    """Textual's dismiss pops whatever is on top: `?` then `q` typed at once closed help
    and then the lesson list (or ended the app with nothing left to pop)."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await settle(pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        help_screen.dismiss()
        help_screen.dismiss()
        await settle(pilot)
        assert isinstance(app.screen, LessonListScreen)
        assert len(app.screen_stack) == 2


async def test_ctrl_p_again_while_the_last_palette_is_leaving_opens_no_twin(
        make_app: Callable[..., NagleApp]) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        app.action_command_palette()
        await settle(pilot)
        palette = app.screen
        assert isinstance(palette, CommandPalette)
        palette.dismiss()
        app.action_command_palette()  # before the old one is removed: no DuplicateIds
        palette.dismiss()             # and its second dismiss pops nothing
        await settle(pilot)
        assert isinstance(app.screen, LessonListScreen)
        assert len(app.screen_stack) == 2


async def test_keys_for_a_screen_still_composing_run_nothing(
        make_app: Callable[..., NagleApp]) -> None:
    """The ladder's keys (z, +, v…) reached a lesson screen before its ladder was mounted:
    NoMatches ended the app."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        assert screen.check_action("compress", ()) is True
        for ladder in list(screen.query("Ladder")):
            await ladder.remove()
        assert screen.check_action("compress", ()) is False
        assert screen.check_action("app.pop_screen", ()) is True


def test_only_the_palettes_own_nomatches_is_forgiven() -> None:
    def raise_in(filename: str) -> NoMatches:
        code = compile("raise NoMatches('x')", filename, "exec")
        try:
            exec(code, {"NoMatches": NoMatches})
        except NoMatches as error:
            return error
        raise AssertionError

    from_palette = raise_in("/site-packages/textual/command.py")
    ours = raise_in("/work/nagle_sim/tui/screens/run.py")
    assert palette_race(from_palette)
    assert palette_race(WorkerFailed(from_palette))
    assert not palette_race(ours)
    assert not palette_race(ValueError("x"))
