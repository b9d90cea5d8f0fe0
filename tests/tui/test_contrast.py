"""Every text/background pair the app draws, measured as WCAG 2 contrast (issue 31.4).

The high-contrast theme (f2, the projector set-up) drew its footer keys at 2.8:1; the
default theme put the highlighted lesson's summary, the lesson number, the question's
"Right." and the revealed right answer between 2.1 and 3.8:1. This walks the screens a
student meets, in each theme the app offers, and reads the colours off the compositor's
rendered strips (what the terminal receives), so a colour set anywhere — theme, CSS,
Rich style — is measured where it lands.

Text needs 4.5:1 (WCAG 1.4.3). Box-drawing and block glyphs are graphics (borders,
scroll bars, bars of the ladder) and are not text; what the dimmed screen behind a modal
shows is not measured (it is meant to recede), only the modal itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from rich.segment import Segment
from textual.pilot import Pilot
from textual.screen import ModalScreen

from nagle_sim.tui.app import DARK, HIGH_CONTRAST, NagleApp
from nagle_sim.tui.screens.cheatsheet import CheatSheetScreen
from nagle_sim.tui.screens.help import HelpScreen
from nagle_sim.tui.screens.question import QuestionScreen
from nagle_sim.tui.screens.questions import QuestionsScreen
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import settle

GRAPHICS = {chr(c) for c in range(0x2500, 0x25A0)} | set("⭘")
"""Box drawing and block elements: borders, bars, scroll bars and the header's icon."""

TEXT_MINIMUM = 4.5


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")
    channels = [int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: str, bg: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_formula_on_known_pairs() -> None:
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#0050ff", "#202020"), 1) == 2.8   # the footer keys
    assert contrast("#777777", "#ffffff") < 4.5 < contrast("#767676", "#ffffff")


def _low_pairs(app: NagleApp, where: str) -> list[str]:
    screen = app.screen
    region = screen.children[0].region if isinstance(screen, ModalScreen) else None
    found: dict[tuple[str, str], str] = {}
    for y, strip in enumerate(screen._compositor.render_strips()):
        if region is not None and not region.y <= y < region.bottom:
            continue
        x = 0
        for seg in strip:
            assert isinstance(seg, Segment)
            start, x = x, x + len(seg.text)
            if region is not None and not region.x <= start < region.right:
                continue
            text = "".join(ch for ch in seg.text if not ch.isspace() and ch not in GRAPHICS)
            if not text or seg.style is None:
                continue
            fg, bg = seg.style.color, seg.style.bgcolor
            assert fg is not None and fg.triplet is not None, f"{where}: {text!r} has no colour"
            assert bg is not None and bg.triplet is not None, f"{where}: {text!r} has no background"
            pair = (fg.triplet.hex, bg.triplet.hex)
            if contrast(*pair) < TEXT_MINIMUM and pair not in found:
                found[pair] = text[:30]
    return [f"{app.theme} {where}: {fg} on {bg} = {contrast(fg, bg):.2f}:1 ({text!r})"
            for (fg, bg), text in found.items()]


async def _walk_lesson(pilot: Pilot[object], low: list[str]) -> None:
    """Lesson list, a lesson, its ladder at a stall, help (questions off)."""
    app = pilot.app
    assert isinstance(app, NagleApp)
    low += _low_pairs(app, "lesson list")
    await pilot.press("enter")
    await settle(pilot)
    lesson = app.screen
    low += _low_pairs(app, "lesson")
    await pilot.press("n")
    await pilot.pause()
    lesson.query_one(Ladder).focus()
    await pilot.pause()
    low += _low_pairs(app, "ladder at a stall")
    await pilot.press("question_mark")
    await settle(pilot)
    assert isinstance(app.screen, HelpScreen)
    low += _low_pairs(app, "help")
    await pilot.press("escape")
    await settle(pilot)
    await pilot.press("f4")    # Markdown headings and tables
    await settle(pilot)
    assert isinstance(app.screen, CheatSheetScreen)
    low += _low_pairs(app, "cheat sheet")


async def _walk_questions(pilot: Pilot[object], low: list[str]) -> None:
    """A question, its feedback after a wrong answer, the question list."""
    app = pilot.app
    assert isinstance(app, NagleApp)
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("end")
    await settle(pilot)
    assert isinstance(app.screen, QuestionScreen)
    low += _low_pairs(app, "question")
    await pilot.press("2")
    await settle(pilot)
    low += _low_pairs(app, "question answered")
    await pilot.press("escape")
    await settle(pilot)
    await pilot.press("q")
    await settle(pilot)
    assert isinstance(app.screen, QuestionsScreen)
    low += _low_pairs(app, "question list")


@pytest.mark.parametrize("walk", [_walk_lesson, _walk_questions], ids=["lesson", "questions"])
@pytest.mark.parametrize("high_contrast", [False, True], ids=["dark", "high-contrast"])
async def test_every_screen_reads_at_4_5_to_1(
        make_app: Callable[..., NagleApp], high_contrast: bool,
        walk: Callable[[Pilot[object], list[str]], Awaitable[None]]) -> None:
    app = make_app(ask_questions=walk is _walk_questions)
    low: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        # the palette's "Change theme" offers only the themes measured here
        assert set(app.available_themes) == {DARK.name, HIGH_CONTRAST.name}
        assert app.theme == DARK.name
        if high_contrast:
            await pilot.press("f2")
            await settle(pilot)
            assert app.theme == HIGH_CONTRAST.name
        await walk(pilot, low)
    assert not low, "text below 4.5:1:\n" + "\n".join(low)
