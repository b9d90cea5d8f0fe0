"""Behaviour of the TUI driven with Pilot (App.run_test)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.widgets import Markdown, Static

from nagle_sim.lessons import Lesson
from nagle_sim.scenario import ScenarioError, load
from nagle_sim.trace.rows import RowKind
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.screens.help import HelpScreen, screen_bindings
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.question import QuestionScreen
from nagle_sim.tui.screens.sandbox import SandboxScreen
from nagle_sim.tui.widgets.explain import ExplainPanel
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import FIXTURES, settle

MakeApp = Callable[..., NagleApp]


def _record_notes(app: NagleApp) -> list[str]:
    notes: list[str] = []
    original = app.notify

    def notify(message: str, **kwargs: object) -> None:
        notes.append(message)
        original(message, **kwargs)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    return notes


def _text(app: NagleApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def _open_first_lesson(pilot) -> Ladder:  # type: ignore[no-untyped-def]
    await pilot.press("enter")
    await settle(pilot)
    assert isinstance(pilot.app.screen, LessonScreen)
    return pilot.app.screen.query_one(Ladder)


async def test_enter_opens_the_lesson_with_prose_and_a_ladder(make_app: MakeApp) -> None:
    """Lesson 01: the lesson screen shows prose beside a simulated ladder."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        assert ladder.rows and ladder.cursor == 0
        assert app.screen.query_one(Markdown)
        latency = re.search(r"per-request latency ([\d.]+) ms", _text(app, "#diff"))
        assert latency and float(latency.group(1)) > 30, "the delayed-ACK stall shows"


async def test_with_a_question_pending_the_summary_waits(make_app: MakeApp) -> None:
    """Predict first: the run's summary (its latency) is not shown before the answer."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        assert "latency" not in _text(app, "#diff")
        assert "shown up to" in _text(app, "#diff")


async def test_arrows_step_forward_and_back_home_and_end(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("right", "right", "right")
        assert ladder.cursor == 3
        await pilot.press("left")
        assert ladder.cursor == 2
        await pilot.press("end")
        assert ladder.cursor == len(ladder.rows) - 1
        await pilot.press("right")
        assert ladder.cursor == len(ladder.rows) - 1
        await pilot.press("home")
        assert ladder.cursor == 0


async def test_n_jumps_to_the_stall_and_explains_what_is_held(make_app: MakeApp) -> None:
    """Lesson 01: the first stall is Nagle holding the 7-byte write."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("n")
        row = ladder.current_row
        assert row is not None and row.kind is RowKind.HOLD and row.code == "NAGLE_HOLD"
        explain = str(app.screen.query_one(ExplainPanel).body.render())
        assert "Nagle" in explain and "delayed ACK" in explain
        first = ladder.cursor
        await pilot.press("n")
        assert ladder.cursor > first
        await pilot.press("N")
        assert ladder.cursor == first


async def test_toggling_nodelay_resimulates_and_shows_the_latency_change(
        make_app: MakeApp) -> None:
    """Lesson 01: TCP_NODELAY removes the 44 ms wait."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        before = len(ladder.rows)
        await pilot.press("d")
        await settle(pilot)
        diff = _text(app, "#diff")
        change = re.match(r"per-request latency ([\d.]+) ms → ([\d.]+) ms", diff)
        assert change, diff
        assert float(change.group(1)) > 30 > 1 > float(change.group(2)), diff
        assert "segments" in diff
        assert len(ladder.rows) != before
        assert ladder.overlay("ghost"), "previous run stays visible as a ghost"
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        assert screen.result is not None and screen.result.scenario.client.options.nodelay


async def test_clicking_the_chip_also_toggles(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_first_lesson(pilot)
        await pilot.click("#chip-client-nodelay")
        await settle(pilot)
        assert "→" in _text(app, "#diff")


async def test_clicking_a_ladder_line_selects_that_row(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.click(Ladder, offset=(60, 6))
        await pilot.pause()
        assert ladder.cursor == ladder.layout_.row_at_line(5 + int(ladder.scroll_offset.y))
        assert ladder.cursor > 0


async def test_a_prediction_is_asked_before_the_cursor_passes_its_time(
        make_app: MakeApp) -> None:
    """Lesson 01 asks when the 7-byte segment leaves before showing it."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("end")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("2")
        verdict = str(app.screen.query_one("#verdict", Static).render())
        assert verdict.startswith("Right.")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen)
        assert app.screen.answers == {0: 1}
        assert ladder.cursor == len(ladder.rows) - 1
        await pilot.press("home", "end")
        assert not isinstance(app.screen, QuestionScreen), "each question is asked once"


async def test_a_wrong_prediction_reveals_the_right_answer(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        await pilot.press("end")
        await pilot.pause()
        await pilot.press("1")
        verdict = str(app.screen.query_one("#verdict", Static).render())
        assert "Not quite" in verdict and "delayed ACK" in verdict


async def test_a_missing_file_shows_the_cli_message_and_keeps_running(
        make_app: MakeApp, tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError) as cli:
        load(missing)
    app = make_app(path=str(missing))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SandboxScreen)
        assert str(cli.value) in _text(app, "#diff")
        await pilot.press("right", "d")   # nothing to step or toggle: must not crash
        await settle(pilot)
        assert app.is_running


async def test_a_bad_scenario_shows_the_same_one_line_error(make_app: MakeApp) -> None:
    bad = FIXTURES / "bad.toml"
    with pytest.raises(ScenarioError) as cli:
        load(bad)
    app = make_app(path=str(bad))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert str(cli.value) in _text(app, "#diff")
        # fix it in the editor and run again
        editor = app.screen.query_one("#editor")
        editor.text = (FIXTURES / "lessons" / "02-quick" / "scenario.toml").read_text()  # type: ignore[attr-defined]
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.screen.query_one(Ladder).rows
        assert "error" not in _text(app, "#diff")


async def test_an_impossible_what_if_is_an_error_not_a_crash(make_app: MakeApp) -> None:
    """CORK does not exist on Windows: the loader's message is shown, the old run stays."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        rows = ladder.rows
        await pilot.press("c")
        await settle(pilot)
        for _ in range(2):  # linux → linux-5.4 → windows
            await pilot.press("o")
            await settle(pilot)
        assert "has no TCP_CORK" in _text(app, "#diff")
        assert ladder.rows and ladder.rows is not rows


async def test_r_without_a_real_runner_says_why_and_runs_nothing(make_app: MakeApp) -> None:
    """Without realnet here, r explains itself instead of drawing an empty capture."""
    app = make_app(ask_questions=False, real_blocker="real-socket runs need Linux")
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert "need Linux" in _text(app, "#diff")
        assert ladder.overlay("measured") is None


async def test_real_run_overlays_measured_segments_with_the_time_difference(
        make_app: MakeApp, sim: Callable) -> None:  # type: ignore[type-arg]
    def fake_real(scenario):  # type: ignore[no-untyped-def]
        trace = sim(scenario)
        trace.source = "realnet"
        trace.segments = [replace(s, t=s.t + 120) for s in trace.segments]
        return trace

    app = make_app(ask_questions=False, run_real=fake_real)
    async with app.run_test(size=(120, 40)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert ladder.overlay("measured")
        while ladder.current_row is not None and ladder.current_row.segment is None:
            await pilot.press("right")
        explain = str(app.screen.query_one(ExplainPanel).body.render())
        assert "Δ +0.120 ms" in explain


async def test_export_writes_lesson_and_variant_named_files_in_the_current_directory(
        make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """e writes <lesson>-<variant>.svg/.pcap where the user is, never beside the lesson."""
    monkeypatch.chdir(tmp_path)
    app = make_app(ask_questions=False)
    notes = _record_notes(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("d")          # back to the lesson's own run, exported again:
        await settle(pilot)             # numbered, the first export is kept
        await pilot.press("e")
        await settle(pilot)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["01-tiny-2.pcap", "01-tiny-2.svg", "01-tiny-client-nodelay.pcap",
                     "01-tiny-client-nodelay.svg", "01-tiny.pcap", "01-tiny.svg"]
    assert (tmp_path / "01-tiny.svg").read_text("utf-8").startswith("<")
    assert (tmp_path / "01-tiny-2.svg").read_text("utf-8") == \
        (tmp_path / "01-tiny.svg").read_text("utf-8")
    assert any("01-tiny.svg" in n for n in notes) and any("01-tiny-2.svg" in n for n in notes)


async def test_help_lists_every_binding(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.source
        for needle in ("next stall", "NODELAY", "Play", "Contrast", "Projector"):
            assert needle in text
        await pilot.press("escape")
        assert isinstance(app.screen, LessonScreen)


async def test_help_is_built_once_and_follows_the_screen_underneath(
        make_app: MakeApp) -> None:
    """Help is one installed screen (reopening must not rebuild it: < 150 ms), yet its
    key table is always that of the screen it was opened over."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        first = app.screen
        assert isinstance(first, HelpScreen)
        assert "This screen (LessonScreen)" in first.source
        await pilot.press("escape")
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, SandboxScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen is first
        assert "This screen (SandboxScreen)" in first.source
        keys = str(first.query_one("#keys", Static).render())
        assert "SandboxScreen" in keys and "LessonScreen" not in keys
        await pilot.press("escape")
        assert isinstance(app.screen, SandboxScreen)


async def test_play_advances_and_pauses(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("full_stop", "full_stop", "full_stop", "full_stop", "space")
        await pilot.pause(0.3)
        await pilot.press("space")
        moved = ladder.cursor
        assert moved > 0
        await pilot.pause(0.2)
        assert ladder.cursor == moved


async def test_themes_projector_and_zoom(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("f2")
        assert app.theme == "nagle-high-contrast"
        await pilot.press("f2")
        assert app.theme != "nagle-high-contrast"
        await pilot.press("f3")
        assert ladder.scale.row_height == 2 and app.has_class("-projector")
        await pilot.press("z")
        assert not ladder.scale.compressed
        height = ladder.layout_.height
        await pilot.press("minus")
        assert ladder.layout_.height < height


def test_every_binding_has_an_id_and_a_tooltip() -> None:

    from nagle_sim.tui.screens import (
        help,
        lesson_list,
        open_file,
        question,
        run,
        sandbox,
    )

    classes = [NagleApp, Ladder, help.HelpScreen, lesson_list.LessonListScreen,
               open_file.OpenFileScreen, question.QuestionScreen, run.RunScreen,
               sandbox.SandboxScreen]
    for cls in classes:
        for b in cls.BINDINGS:
            assert isinstance(b, Binding)
            assert b.id and b.tooltip, f"{cls.__name__}: {b.key}"


async def test_command_palette_has_the_main_actions(make_app: MakeApp) -> None:
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        titles = set(commands)
        # the screen's entries come from its bindings: description and key
        for title in ("Stall (n)", "NODELAY (d)", "Export (e)", "Real (r)"):
            assert title in titles
        # built from the bindings: every key of the screen and of the app is in the palette
        for binding in [*screen_bindings(app.screen), *NagleApp.BINDINGS]:
            assert isinstance(binding, Binding)
            if binding.action != "quit":
                assert any(t == binding.description or t.startswith(binding.description + " (")
                           or t.startswith("What-if") for t in titles), binding.id
        assert "Sandbox" in commands
        app.call_next(commands["Contrast"].callback)   # as the palette runs it
        await pilot.pause()
        assert app.theme == "nagle-high-contrast"


def test_the_tui_imports_neither_simpy_nor_realnet() -> None:
    import subprocess

    code = ("import sys, nagle_sim.tui.app, nagle_sim.tui.serve, nagle_sim.tui.screenshot;"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('simpy', 'realnet')];"
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_skipped_question_can_be_reopened_and_the_list_shows_the_score(
        make_app: MakeApp) -> None:
    """Issue 12: Esc skips; q lists the questions and reopens the skipped one; the lesson
    list shows the score."""
    from nagle_sim.tui.screens.lesson_list import LessonListScreen
    from nagle_sim.tui.screens.questions import QuestionsScreen

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_first_lesson(pilot)
        await pilot.press("end")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("escape")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen) and screen.asked == {0}
        assert screen.answers == {}
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuestionsScreen)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("2", "enter")
        await settle(pilot)
        assert screen.answers == {0: 1}
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, LessonListScreen)
        first = app.screen.query_one("#lessons").get_option_at_index(0).prompt
        assert "1/1 right" in str(first)


async def test_the_list_numbers_the_lessons_and_the_lesson_says_its_number(
        make_app: MakeApp) -> None:
    """Issue 13 ("numbered in the list"): each row starts with the lesson's number (its
    directory's), and an open lesson's header says "Lesson N: title"."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        options = app.screen.query_one("#lessons")
        rows = [str(options.get_option_at_index(i).prompt).split("\n")[0]
                for i in range(options.option_count)]
        assert rows == [" 1  Write-write-read", " 2  One write per request"], rows
        await _open_first_lesson(pilot)
        assert app.screen.sub_title == "Lesson 1: Write-write-read"


async def test_a_stall_jump_past_a_question_lands_on_the_first_revealed_row(
        make_app: MakeApp) -> None:
    """n (next stall) at a question's time asks first; after the answer the cursor stops
    on the first row the answer reveals, not on the later stall, so the student sees what
    they just predicted. n again goes on to the stall."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        for _ in range(10):
            await pilot.press("n")
            await pilot.pause()
            if isinstance(app.screen, QuestionScreen):
                break
        assert isinstance(app.screen, QuestionScreen)
        before = len(ladder.rows)
        stall = next(i for i in screen._stall_rows if i >= before)
        await pilot.press("2", "enter")
        await settle(pilot)
        assert stall > before and len(ladder.rows) > stall
        assert ladder.cursor == before, (ladder.cursor, before, stall)
        await pilot.press("n")
        await settle(pilot)
        assert ladder.cursor == stall


def test_a_lesson_directory_without_a_number_is_listed_by_its_title(
        lessons: list[Lesson]) -> None:
    plain = replace(lessons[0], slug="intro")
    assert plain.number is None and plain.numbered_title == "Write-write-read"
    assert replace(lessons[0], slug="12-x").numbered_title == "Lesson 12: Write-write-read"


async def test_v_cycles_the_detail_level_like_the_cli(make_app: MakeApp) -> None:
    """Issue 12: routine rows fold away under a detail level (wire < normal < all)."""
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        normal = len(ladder.rows)
        await pilot.press("v")
        await pilot.pause()
        assert app.screen.detail == "all" and len(ladder.rows) >= normal
        await pilot.press("v")
        await pilot.pause()
        assert app.screen.detail == "wire" and len(ladder.rows) < normal
        assert all(r.kind in (RowKind.SEGMENT, RowKind.OP) for r in ladder.rows)
        assert all(r.explain for r in ladder.rows)


async def test_an_empty_capture_is_a_failed_real_run_not_zero_segments(
        make_app: MakeApp, sim: Callable) -> None:  # type: ignore[type-arg]
    """Issue 12: never "segments 67 → 0" from a capture that saw nothing."""
    def empty_real(scenario):  # type: ignore[no-untyped-def]
        trace = sim(scenario)
        trace.source = "realnet"
        trace.segments = []
        return trace

    app = make_app(ask_questions=False, run_real=empty_real)
    async with app.run_test(size=(100, 30)) as pilot:
        ladder = await _open_first_lesson(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert "real run failed" in _text(app, "#diff")
        assert ladder.overlay("measured") is None


async def test_r_and_e_wait_for_the_what_if_being_simulated_and_use_the_runs_variant(
        make_app: MakeApp, sim: Callable, monkeypatch: pytest.MonkeyPatch,  # type: ignore[type-arg]
        tmp_path: Path) -> None:
    """Issue 12: toggling d updates the toggles at once, but the run shown is the old one
    until the re-simulation finishes: r and e must not measure or name the new variant
    over the old run."""
    import threading

    monkeypatch.chdir(tmp_path)
    gate = threading.Event()
    gate.set()
    real_runs: list[object] = []

    def slow_sim(scenario):  # type: ignore[no-untyped-def]
        assert gate.wait(30)
        return sim(scenario)

    def fake_real(scenario):  # type: ignore[no-untyped-def]
        real_runs.append(scenario)
        return sim(scenario)

    app = make_app(ask_questions=False, run_sim=slow_sim, run_real=fake_real)
    notes = _record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_first_lesson(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        gate.clear()
        await pilot.press("d")
        await pilot.pause()
        assert screen.simulating()
        await pilot.press("r", "e")
        await pilot.pause()
        assert real_runs == []
        assert sum("still simulating" in n for n in notes) == 2
        assert list(tmp_path.iterdir()) == []
        gate.set()
        await settle(pilot)
        assert not screen.simulating()
        assert screen.result is not None and screen.result.overrides
        await pilot.press("e")
        await settle(pilot)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "01-tiny-client-nodelay.pcap", "01-tiny-client-nodelay.svg"]


async def test_a_real_run_under_a_question_counts_only_what_is_shown(
        make_app: MakeApp, sim: Callable) -> None:  # type: ignore[type-arg]
    """Issue 12: "measured N segments" under a horizon counts the segments up to it."""
    app = make_app(run_real=sim)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_first_lesson(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen) and screen.horizon is not None
        await pilot.press("r")
        await settle(pilot)
        assert screen.measured is not None
        shown = sum(1 for s in screen.measured.segments if s.t <= screen.horizon)
        assert shown < len(screen.measured.segments)
        assert f"measured {shown} segments up to" in _text(app, "#diff")


async def test_a_question_opens_over_the_lessons_own_run_not_a_what_if(
        make_app: MakeApp) -> None:
    """Issue 12: d before the question, then the question: the variant is undone."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_first_lesson(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        await pilot.press("d")
        await settle(pilot)
        assert screen.result is not None and screen.result.overrides
        await pilot.press("end")
        await settle(pilot)
        assert isinstance(app.screen, QuestionScreen)
        assert screen.result is not None and screen.result.overrides == ()
        assert screen.whatif == screen.base_whatif


async def test_palette_help_and_footer_offer_every_key_once(make_app: MakeApp) -> None:
    """Issue 12: the palette is built from the bindings (nothing missing), help lists d
    once and only the lesson's what-ifs, tooltips wrap indented, the sandbox footer keeps
    ? Help at 80 columns, and q is announced beside the what-ifs."""
    from textual.widgets import Footer

    from nagle_sim.tui.screens.help import screen_bindings

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_first_lesson(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        titles = [c.title for c in app.get_system_commands(screen)]
        for needle in ("Server CORK", "Detail", "Ghost", "Questions", "Sandbox (s)",
                       f"What-if 1: {screen.variants[0].label}"):
            assert any(needle in t for t in titles), (needle, titles)
        keys = [b.key for b in screen_bindings(screen)]
        assert keys.count("d") == 1
        assert len([k for k in keys if k.isdigit()]) == len(screen.variants)
        assert "q lists them" in _text(app, "#variants")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        lines = str(app.screen.query_one("#keys", Static).render()).splitlines()
        tooltip_lines = [ln for ln in lines if ln.strip() and not ln.startswith(
            ("This screen", "Ladder", "Everywhere", "Press ctrl+p"))]
        assert all(ln.startswith(" ") for ln in tooltip_lines), tooltip_lines
        await pilot.press("escape")
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, SandboxScreen)
        footer = app.screen.query_one(Footer)
        shown = [k for k in footer.query("FooterKey") if k.region.right <= 80
                 and k.region.width > 0]
        assert any(getattr(k, "key", "") == "question_mark" for k in shown), [
            getattr(k, "key", "") for k in shown]


async def test_more_than_nine_what_ifs_are_paged_with_0_and_all_in_the_palette() -> None:
    """Lessons 22 and 23 have 10 and 13 what-ifs: 1-9 switch the first nine, 0 shows the
    next page (1 then switches what-if 10), and the palette names every one of them."""
    from nagle_sim.lessons import load_lessons, variants
    from nagle_sim.sim.driver import run_sim

    lesson = next(x for x in load_lessons() if len(variants(x)) > 9)
    app = NagleApp(run_sim=run_sim, lessons=[lesson], ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lesson))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        n = len(screen.variants)
        assert f"what-ifs 10-{min(18, n)} of {n}" in _text(app, "#variants")
        await pilot.press("0")
        await pilot.pause()
        shown = _text(app, "#variants")
        assert screen.variant_page == 1 and f"what-ifs 1-9 of {n}" in shown
        await pilot.press("1")
        await settle(pilot)
        assert screen.extra == screen.variants[9].overrides
        titles = [c.title for c in app.get_system_commands(screen)]
        assert f"What-if {n}: {screen.variants[n - 1].label}" in titles
        await pilot.press("0")
        await pilot.pause()
        assert screen.variant_page == 0
