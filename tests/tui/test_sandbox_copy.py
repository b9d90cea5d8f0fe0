"""Issue 12: `s` in a lesson opens an in-memory copy in the sandbox. While a question is
pending the copy must not give its answer away (nor in the description), and the copy is
the run the ladder shows: the what-ifs that are on are written into it."""

from __future__ import annotations

import tomllib

from textual.widgets import TextArea

from nagle_sim.lessons import load_lessons
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.sandbox import (
    HIDDEN_DESCRIPTION,
    SandboxScreen,
    with_overrides,
    without_answers,
)

from .conftest import settle

SHIPPED = load_lessons()


def _lesson(suffix: str):  # type: ignore[no-untyped-def]
    return next(x for x in SHIPPED if x.slug.endswith(suffix))


def test_a_pending_question_hides_the_description_of_every_lesson() -> None:
    for lesson in SHIPPED:
        text = (lesson.path / "scenario.toml").read_text("utf-8")
        cut = without_answers(text, pending=True)
        data = tomllib.loads(cut)
        assert data.get("description", HIDDEN_DESCRIPTION) == HIDDEN_DESCRIPTION, lesson.slug
        original = tomllib.loads(text).get("description", "")
        if original.strip():
            assert original.strip().splitlines()[0] not in cut, lesson.slug
        # everything else is the lesson's scenario
        whole = {k: v for k, v in tomllib.loads(text).items()
                 if k not in ("lesson", "expect", "description")}
        assert {k: v for k, v in data.items() if k != "description"} == whole, lesson.slug
        loads(cut, lesson.slug)   # and it loads
    # with no question pending the description stays
    text = (_lesson("nodelay-twenty-writes").path / "scenario.toml").read_text("utf-8")
    first = tomllib.loads(text)["description"].strip().splitlines()[0]
    assert first in without_answers(text)


def test_overrides_written_into_the_copy_load_as_the_same_scenario() -> None:
    for lesson in SHIPPED:
        text = without_answers((lesson.path / "scenario.toml").read_text("utf-8"))
        on = ["client.nodelay=true", "client.quickack=default",
              'server.profile="linux-6.1"', "link.to_server_delay_ms=20",
              "link.to_client_delay_ms=20"]
        changed = with_overrides(text, on)
        assert loads(changed, "x").raw == loads(text, "x", on).raw, lesson.slug


async def test_s_with_a_question_pending_hides_the_description() -> None:
    lesson = _lesson("nodelay-twenty-writes")
    app = NagleApp(run_sim=run_sim, lessons=SHIPPED)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        sandbox = app.screen
        assert isinstance(sandbox, SandboxScreen)
        text = sandbox.query_one("#editor", TextArea).text
        assert "congestion window runs out" not in text
        assert HIDDEN_DESCRIPTION in text


async def test_s_copies_the_what_ifs_that_are_on() -> None:
    lesson = _lesson("nodelay-twenty-writes")
    app = NagleApp(run_sim=run_sim, lessons=SHIPPED, ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        await pilot.press("d")          # the client's NODELAY off: a what-if
        await settle(pilot)
        on = screen.overrides()
        assert "client.nodelay=false" in on
        await pilot.press("s")
        await settle(pilot)
        sandbox = app.screen
        assert isinstance(sandbox, SandboxScreen)
        copy = loads(sandbox.query_one("#editor", TextArea).text, "copy")
        assert copy.client.options.nodelay is False
