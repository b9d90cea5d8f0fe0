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


# ------------------------------------------------------------------ a class led by a teacher
# (issue 24) The app end of the local channel, driven from a fake serve end in the test:
# the messages are those of nagle_sim.classroom.state.ClassState.student_view.

import asyncio  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
from typing import Any  # noqa: E402

from textual.widgets import Button  # noqa: E402

from nagle_sim.tui.classlink import ClassLink  # noqa: E402
from nagle_sim.tui.screens.question import QuestionScreen  # noqa: E402


class FakeServe:
    """serve's end of one app's channel, in the test's event loop."""

    def __init__(self) -> None:
        self.ours, theirs = socket.socketpair()
        self.link = ClassLink(theirs)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.got: list[dict[str, Any]] = []

    async def start(self) -> None:
        self.ours.setblocking(False)
        self.reader, self.writer = await asyncio.open_connection(sock=self.ours)

    def send(self, message: dict[str, Any]) -> None:
        assert self.writer is not None
        self.writer.write(json.dumps(message).encode() + b"\n")

    async def next(self, kind: str, within: float = 10.0) -> dict[str, Any]:
        assert self.reader is not None
        deadline = asyncio.get_running_loop().time() + within
        while True:
            left = deadline - asyncio.get_running_loop().time()
            line = await asyncio.wait_for(self.reader.readline(), max(0.01, left))
            message = json.loads(line)
            self.got.append(message)
            if message["t"] == kind:
                return message


def view(phase: str | None, *, lead: str | None = "01-tiny", counts: Any = (),
         answer: int | None = None, mine: Any = (None, None), done: Any = ()) -> dict[str, Any]:
    poll = None
    if phase is not None:
        poll = {"id": 1, "lesson": "01-tiny", "question": 0, "phase": phase,
                "round": {"vote": 1, "revote": 2}.get(phase), "counts": list(counts),
                "answer": answer, "mine": list(mine)}
    return {"t": "class", "lead": lead, "poll": poll, "done": list(done), "name": "Ada"}


async def _until(pilot: Any, check: Any, what: str, within: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await pilot.pause(0.05)


def _class_text(app: NagleApp) -> str:
    return str(app.screen.query_one("#class", Static).render())


async def test_the_app_follows_the_teacher_through_a_whole_poll(make_app: MakeApp) -> None:
    """Lead mode and the peer-instruction loop as a student's app lives it: the question
    comes to the lesson list; a vote is sent by its canonical index, once per round,
    with no verdict; the class histogram shows when the phase allows; the re-vote opens
    the choices again; the reveal gives the verdict on the re-vote; "play" closes the
    question and the ladder plays on past its horizon."""
    serve = FakeServe()
    app = make_app(classroom=Classroom(), class_link=serve.link)
    async with app.run_test(size=(100, 34)) as pilot:
        await serve.start()
        await settle(pilot)
        assert isinstance(app.screen, LessonListScreen)
        serve.send(view("vote"))
        await _until(pilot, lambda: isinstance(app.screen, QuestionScreen), "the question")
        question = app.screen
        assert isinstance(question, QuestionScreen)
        lesson = app.screen_stack[-2]
        assert isinstance(lesson, LessonScreen) and lesson.lesson.slug == "01-tiny"
        await pilot.press("escape")  # a class question stays until the reveal
        assert app.screen is question

        await pilot.press("3")  # canonical choice 2
        vote = await serve.next("vote")
        assert vote == {"t": "vote", "poll": 1, "round": 1, "choice": 2}
        await pilot.press("1")  # one vote per round: nothing more is sent
        serve.send({"t": "ballot", "poll": 1, "round": 1, "ok": True})
        await _until(pilot, lambda: "is in" in _class_text(app), "the vote acknowledged")
        assert str(question.query_one("#verdict", Static).render()) == ""
        assert all(b.disabled for b in question.query(Button) if (b.id or "")
                   .startswith("choice-"))

        serve.send(view("show", counts=[[1, 0, 2]], mine=[2, None]))
        await _until(pilot, lambda: "vote 1 (3)" in _class_text(app), "vote 1's histogram")
        assert "✓" not in _class_text(app)  # no answer before the reveal

        serve.send(view("revote", mine=[2, None]))
        await _until(pilot, lambda: "Vote again" in _class_text(app), "the re-vote")
        assert "vote 1" not in _class_text(app)  # the first histogram is hidden now
        await pilot.press("2")
        assert await serve.next("vote") == {"t": "vote", "poll": 1, "round": 2, "choice": 1}
        serve.send({"t": "ballot", "poll": 1, "round": 2, "ok": True})

        serve.send(view("reveal", counts=[[1, 0, 2], [0, 3, 0]], answer=1, mine=[2, 1]))
        await _until(pilot, lambda: "Right." in str(
            question.query_one("#verdict", Static).render()), "the verdict on the re-vote")
        assert "vote 2 (3)" in _class_text(app) and "✓" in _class_text(app)
        before = lesson.query_one(Ladder).cursor
        serve.send(view("play", counts=[[1, 0, 2], [0, 3, 0]], answer=1, mine=[2, 1],
                        done=[0]))
        await _until(pilot, lambda: app.screen is lesson, "the question closed by play")
        await _until(pilot, lambda: lesson.query_one(Ladder).cursor > before + 1,
                     "the ladder playing past the horizon")
        assert lesson.answers == {0: 1}
        report = await serve.next("at")
        assert report["lesson"] == "01-tiny" and report["screen"] in ("lesson", "question")


async def test_in_a_led_lesson_a_question_waits_for_the_class(make_app: MakeApp) -> None:
    """Stepping past a question the class has not reached does not ask it alone (that
    would show the answer before the class votes); without a lead it asks as before."""
    serve = FakeServe()
    app = make_app(classroom=Classroom(), class_link=serve.link)
    async with app.run_test(size=(100, 34)) as pilot:
        await serve.start()
        await settle(pilot)
        serve.send(view(None))
        await _until(pilot, lambda: isinstance(app.screen, LessonScreen), "the lesson led")
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        assert isinstance(app.screen, LessonScreen), "the question was asked alone"
        serve.send(view(None, lead=None))
        await _until(pilot, lambda: serve.link.leading() is None, "the lead ended")
        await pilot.press("end")
        await _until(pilot, lambda: isinstance(app.screen, QuestionScreen),
                     "the question asked alone once the class is free")


async def test_a_link_that_breaks_leaves_the_app_working_alone(make_app: MakeApp) -> None:
    serve = FakeServe()
    app = make_app(classroom=Classroom(), class_link=serve.link)
    async with app.run_test(size=(100, 34)) as pilot:
        await serve.start()
        await settle(pilot)
        serve.send(view(None))
        await _until(pilot, lambda: isinstance(app.screen, LessonScreen), "the lesson led")
        assert serve.writer is not None
        serve.writer.write(b"x" * 20_000 + b"\n")  # over the line limit: the link ends
        await _until(pilot, lambda: serve.link.closed, "the link closed")
        await settle(pilot)
        await pilot.press("end")
        await _until(pilot, lambda: isinstance(app.screen, QuestionScreen),
                     "the question asked alone")
