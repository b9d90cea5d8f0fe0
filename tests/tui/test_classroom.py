"""Classroom mode inside the app (what a browser session may and may not do)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Static, TextArea

from nagle_sim.scenario import Scenario
from nagle_sim.trace import Trace
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.classroom import (
    Classroom,
    RealQueueBusy,
    export_stem,
    queued_runner,
    variant_name,
)
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.lesson_list import LessonListScreen
from nagle_sim.tui.screens.open_file import OpenFileScreen
from nagle_sim.tui.screens.sandbox import SandboxScreen, without_answers
from nagle_sim.tui.widgets.ladder import Ladder

from .conftest import settle

MakeApp = Callable[..., NagleApp]
SECRET = "root:x:0:0:do-not-show-this"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.toml"
    path.write_text(f'title = "{SECRET}"\n', "utf-8")
    return path


def _all_text(app: NagleApp) -> str:
    parts = [str(w.render()) for w in app.screen.query(Static)]
    parts += [w.text for w in app.screen.query(TextArea)]
    return "\n".join(parts)


async def test_classroom_ignores_a_start_path_and_offers_no_open_key(
        make_app: MakeApp, secret_file: Path) -> None:
    """Issue 8: a served session never opens a server file, even one given at start."""
    app = make_app(classroom=Classroom(), path=str(secret_file))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, LessonListScreen)
        assert app.screen.check_action("open", ()) is False
        await pilot.press("o")
        await pilot.pause()
        assert not isinstance(app.screen, OpenFileScreen)
        assert SECRET not in _all_text(app)


async def test_classroom_sandbox_cannot_open_a_path_outside_the_lessons(
        make_app: MakeApp, secret_file: Path) -> None:
    """Issue 8: neither ctrl+o nor open_path reaches the server's files in class."""
    app = make_app(classroom=Classroom(), ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("s")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SandboxScreen)
        assert screen.check_action("open", ()) is False
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert not isinstance(app.screen, OpenFileScreen)
        screen.open_path(str(secret_file))
        screen.open_path("/etc/passwd")
        await settle(pilot)
        assert SECRET not in _all_text(app)
        assert "root:" not in screen.query_one("#editor", TextArea).text
        assert "no access to the server's files" in str(screen.query_one("#diff").render())


async def test_local_sandbox_still_opens_files(make_app: MakeApp, tmp_path: Path) -> None:
    """The refusal is the classroom's: a local user opens their own files as before."""
    path = tmp_path / "mine.toml"
    path.write_text('title = "mine"\n[client]\nscript = "write 10"\n[server]\n'
                    'script = "read 10"\n', "utf-8")
    app = make_app(ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("s")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SandboxScreen)
        screen.open_path(str(path))
        await settle(pilot)
        assert 'title = "mine"' in screen.query_one("#editor", TextArea).text


async def test_s_in_a_lesson_opens_an_in_memory_copy_in_the_sandbox(
        make_app: MakeApp, tmp_path: Path) -> None:
    """Issue 12: s edits a copy of the lesson; the lesson's file is never written."""
    app = make_app(classroom=Classroom(), ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        lesson_screen = app.screen
        assert isinstance(lesson_screen, LessonScreen)
        original = (lesson_screen.lesson.path / "scenario.toml").read_text("utf-8")
        await pilot.press("s")
        await settle(pilot)
        sandbox = app.screen
        assert isinstance(sandbox, SandboxScreen)
        editor = sandbox.query_one("#editor", TextArea)
        # the copy is the scenario alone: no questions, answers or claims (issue 12)
        assert editor.text == without_answers(original) and "[lesson]" not in editor.text
        assert editor.text.startswith(original.split("[lesson]")[0])
        editor.text = original.replace("title", "# edited\ntitle", 1)
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert (lesson_screen.lesson.path / "scenario.toml").read_text("utf-8") == original
        assert sandbox.result is not None


async def test_classroom_export_goes_to_the_browser_and_writes_no_file(
        make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 8: e in class calls Textual's delivery API; nothing lands on the server."""
    import nagle_sim.export as export

    def no_files(*args: object, **kwargs: object) -> None:
        raise AssertionError("classroom export must not write files")

    monkeypatch.setattr(export, "export_cli", no_files)
    monkeypatch.chdir(tmp_path)
    app = make_app(classroom=Classroom(), ask_questions=False)
    delivered: list[tuple[str, bytes, str | None]] = []

    def deliver_binary(file, *, save_filename=None, mime_type=None, **kwargs):  # type: ignore[no-untyped-def]
        delivered.append((save_filename, file.read(), mime_type))
        return "key"

    app.deliver_binary = deliver_binary  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
    # one delivery: a page the browser opens, linking both files (issue 24: a browser
    # blocks a second automatic download)
    assert [(d[0], d[2]) for d in delivered] == [("01-tiny-client-nodelay.html",
                                                  "text/html")]
    files = page_files(delivered[0][1])
    assert list(files) == ["01-tiny-client-nodelay.svg", "01-tiny-client-nodelay.pcap"]
    assert files["01-tiny-client-nodelay.svg"].startswith(b"<")
    assert files["01-tiny-client-nodelay.pcap"][:4] in (b"\xd4\xc3\xb2\xa1",
                                                        b"\xa1\xb2\xc3\xd4")
    assert list(tmp_path.iterdir()) == []


def page_files(page: bytes) -> dict[str, bytes]:
    """The files an export page offers: its ``<a download=NAME href="data:…">`` links."""
    import base64
    import re
    return {name: base64.b64decode(data) for name, data in re.findall(
        rb'<a download="([^"]+)" href="data:[^;]+;base64,([^"]+)"', page)
        for name in [name.decode()]}


async def test_r_is_refused_in_class_without_allow_real(make_app: MakeApp) -> None:
    """Issue 8: a student's r runs nothing unless the teacher passed --allow-real."""
    calls: list[Scenario] = []

    def fake_real(scenario: Scenario) -> Trace:
        calls.append(scenario)
        raise AssertionError("must not run")

    app = make_app(classroom=Classroom(), run_real=fake_real, ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert calls == []
        assert "--allow-real" in str(app.screen.query_one("#diff").render())


async def test_r_runs_in_class_with_allow_real(make_app: MakeApp,
                                               sim: Callable[[Scenario], Trace]) -> None:
    calls: list[Scenario] = []

    def fake_real(scenario: Scenario) -> Trace:
        calls.append(scenario)
        return sim(scenario)

    app = make_app(classroom=Classroom(allow_real=True), run_real=fake_real,
                   ask_questions=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert len(calls) == 1


async def test_a_real_run_of_another_variant_is_never_drawn(
        make_app: MakeApp, sim: Callable[[Scenario], Trace]) -> None:
    """Issue 12: toggling while r runs discards the measurement instead of overlaying it."""
    app = make_app(ask_questions=False)

    def fake_real(scenario: Scenario) -> Trace:
        app.call_from_thread(app.screen.action_flip, "client", "nodelay")
        return sim(scenario)

    app.run_real = fake_real
    notes: list[str] = []
    original = app.notify

    def notify(message: str, **kwargs: object) -> None:
        notes.append(message)
        original(message, **kwargs)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        await settle(pilot)
        screen = app.screen
        assert any("discarded" in n for n in notes)
        assert screen.measured is None
        assert screen.query_one(Ladder).overlay("measured") is None


def test_real_runs_take_turns_across_processes(tmp_path: Path) -> None:
    """Issue 8: while one session's real run holds the queue, another waits, then gives up
    with a message instead of running at the same time."""
    lock = tmp_path / "real.lock"
    lock.touch()
    ran: list[float] = []
    now = [0.0]

    def run(scenario: object, *, timeout_s: float) -> Trace:
        ran.append(timeout_s)
        return Trace(source="realnet", title="fake")

    def sleep(seconds: float) -> None:
        now[0] += seconds

    policy = Classroom(allow_real=True, real_lock=lock, real_timeout_s=7.0, queue_wait_s=1.0)
    runner = queued_runner(run, policy, sleep=sleep, clock=lambda: now[0])
    holder = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(RealQueueBusy, match="try again"):
            runner(object())  # type: ignore[arg-type]
        assert ran == [] and now[0] >= 1.0
    finally:
        os.close(holder)
    runner(object())  # type: ignore[arg-type]
    assert ran == [7.0]


@pytest.mark.parametrize(("overrides", "name"), [
    ([], ""),
    (["client.nodelay=true"], "client-nodelay"),
    (["server.nodelay=false"], "server-no-nodelay"),
    (['server.profile="windows"'], "server-windows"),
    (["client.quickack=default"], "client-quickack-default"),
    (["link.to_server_delay_ms=40", "link.to_client_delay_ms=40"], "delay-40ms"),
])
def test_variant_names(overrides: list[str], name: str) -> None:
    assert variant_name(overrides) == name


def test_export_stem_is_a_safe_file_name() -> None:
    assert export_stem("../../etc/x y", []) == "etc-x-y"
    assert export_stem("07-write-write-read", ["client.nodelay=true"]) == \
        "07-write-write-read-client-nodelay"


async def test_a_lesson_offers_its_own_what_ifs_as_number_keys(sim) -> None:  # type: ignore[no-untyped-def]
    """Issue 12: in lesson nagle-basics the writer is the server, so its what-if is server
    NODELAY; a claim's `when` variant (bulk-transfer's init_cwnd) is a key too, and
    pressing it again goes back."""
    from nagle_sim.lessons import load_lessons

    shipped = {lesson.slug[3:]: lesson for lesson in load_lessons()}
    app = NagleApp(run_sim=sim, lessons=list(shipped.values()), ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(shipped["nagle-basics"]))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        assert "1  server NODELAY" in str(screen.query_one("#variants").render())
        assert screen.check_action("variant", (len(screen.variants),)) is False
        await pilot.press("1")
        await settle(pilot)
        assert screen.result is not None and screen.result.scenario.server.options.nodelay
        assert screen.export_stem() == "02-nagle-basics-server-nodelay"

        await app.push_screen(LessonScreen(shipped["bulk-transfer"]))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        await pilot.press("2")
        await settle(pilot)
        assert screen.extra == ("client.tune.init_cwnd=4",)
        assert screen.result is not None
        assert screen.result.scenario.client.tune.get("init_cwnd") == 4
        await pilot.press("2")
        await settle(pilot)
        assert screen.extra == ()
        assert screen.result.scenario.client.tune.get("init_cwnd") != 4


async def test_an_export_while_a_question_is_pending_stops_at_its_time(
        make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 12: e before answering must not hand out the rest of the run."""
    monkeypatch.chdir(tmp_path)
    app = make_app(classroom=Classroom())
    got: list[bytes] = []

    def deliver_binary(file, *, save_filename=None, mime_type=None, **kwargs):  # type: ignore[no-untyped-def]
        got.append(file.read())
        return "key"

    app.deliver_binary = deliver_binary  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen) and screen.horizon is not None
        full = screen.result
        assert full is not None
        await pilot.press("e")
        await settle(pilot)
    later = [s for s in full.trace.segments if s.t > screen.horizon]
    assert later, "the fixture lesson has segments after its question"
    pcap = next(
        data for name, data in page_files(got[0]).items() if name.endswith(".pcap"))
    shown = len(full.trace.segments) - len(later)
    from nagle_sim.export.pcap import to_pcap
    from nagle_sim.tui.horizon import trace_until
    assert pcap == to_pcap(trace_until(full.trace, screen.horizon))
    assert len(pcap) < len(to_pcap(full.trace)) and shown >= 0
