"""`nagle-sim serve`: token, session cap, idle limit, killing app processes, Ctrl-C.

The server runs in-process on aiohttp's test server; app processes are small Python
stand-ins (a well-behaved one that quits when asked, a busy one that never reads stdin)
except in the end-to-end test, which starts the real command and its real app.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from nagle_sim.lessons import load_lessons
from nagle_sim.tui.serve import (
    ClassroomAppService,
    ClassroomServer,
    ServeOptions,
    app_argv,
    student_url,
)

READY = "import sys; sys.stdout.write('__GANGLION__\\n'); sys.stdout.flush(); "
POLITE = [sys.executable, "-c", READY + "sys.stdin.buffer.read()"]
"""Quits when stdin closes (textual-serve's quit message is ignored, the pipe isn't)."""
BUSY = [sys.executable, "-c", READY + "import signal; signal.signal(signal.SIGTERM, "
        "signal.SIG_IGN)\nwhile True: pass"]
"""An app stuck in an endless simulation: never reads stdin, ignores SIGTERM."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes (its parent reaps it)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not _alive(pid)


async def _client(options: ServeOptions, argv: list[str]) -> tuple[ClassroomServer,
                                                                    TestClient]:
    server = ClassroomServer(options)
    server.use_command(argv)
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    return server, client


@pytest.fixture
async def polite() -> AsyncIterator[tuple[ClassroomServer, TestClient]]:
    server, client = await _client(ServeOptions(token="class-token-1", max_sessions=2,
                                                kill_grace_s=0.5), POLITE)
    yield server, client
    await client.close()


async def _wait_sessions(server: ClassroomServer, n: int, within: float = 30.0) -> None:
    # generous: spawning the app process is slow on a loaded machine; a bound against hangs
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if len(server.sessions) == n and all(s.pid for s, _ in server.sessions.values()):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"expected {n} sessions, have {len(server.sessions)}")


async def test_the_index_and_the_socket_need_the_class_token(polite) -> None:  # type: ignore[no-untyped-def]
    """Issue 8: without the token nobody gets the page or an app process."""
    server, client = polite
    assert (await client.get("/")).status == 403
    assert (await client.get("/?token=wrong-token")).status == 403
    for path in ("/ws", "/ws/wrong-token"):
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await client.ws_connect(path)
    assert server.sessions == {}
    page = await client.get("/?token=class-token-1")
    assert page.status == 200
    body = await page.text()
    assert re.search(r'data-session-websocket-url="ws://[^"]+/ws/class-token-1"', body)


async def test_another_site_cannot_start_sessions(polite) -> None:  # type: ignore[no-untyped-def]
    """A page on another site (a cross-site WebSocket carries its Origin) or a foreign host
    name reaching a loopback-only server (DNS rebinding) gets nothing, token or not."""
    server, client = polite
    evil = {"Origin": "http://evil.example"}
    assert (await client.get("/?token=class-token-1", headers=evil)).status == 403
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await client.ws_connect("/ws/class-token-1", headers=evil)
    assert (await client.get("/?token=class-token-1",
                             headers={"Host": "evil.example"})).status == 403
    same = {"Origin": f"http://{client.host}:{client.port}"}
    assert (await client.get("/?token=class-token-1", headers=same)).status == 200
    assert server.sessions == {}


async def test_a_full_class_gets_a_friendly_page(polite) -> None:  # type: ignore[no-untyped-def]
    """Issue 8: --max-sessions; the next student sees "class is full", not an error."""
    server, client = polite
    first = await client.ws_connect("/ws/class-token-1?width=80&height=24")
    second = await client.ws_connect("/ws/class-token-1")
    await _wait_sessions(server, 2)
    page = await client.get("/?token=class-token-1")
    assert page.status == 503
    assert "class is full" in (await page.text()).lower()
    third = await client.ws_connect("/ws/class-token-1")
    message = await third.receive(timeout=5)
    assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert third.close_code == 1013
    assert len(server.sessions) == 2
    await first.close()
    await second.close()
    for _ in range(100):
        if not server.sessions:
            break
        await asyncio.sleep(0.05)
    assert (await client.get("/?token=class-token-1")).status == 200


async def test_closing_a_busy_tab_kills_its_app_process() -> None:
    """Issue 8: a tab that ran an endless scenario leaves no process at 80 % CPU."""
    server, client = await _client(ServeOptions(kill_grace_s=0.5), BUSY)
    try:
        ws = await client.ws_connect("/ws")
        await _wait_sessions(server, 1)
        (service, _), = server.sessions.values()
        pid = service.pid
        assert pid is not None and _alive(pid)
        await ws.close()
        assert await _gone(pid, within=5.0)
    finally:
        await client.close()


async def _warm_ready(server: object, within: float = 60.0) -> bool:
    """Wait until the pool holds a started process. A warm process is a whole Python +
    Textual start-up, which takes seconds on a loaded 2-core machine: the bound only stops
    a hang, it is not a speed claim (benchmarks/bench_serve.py times start-up)."""
    deadline = asyncio.get_running_loop().time() + within
    while not server.pool.ready:  # type: ignore[attr-defined]
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_a_warm_process_serves_the_next_tab_and_is_replaced() -> None:
    """Issue 8: processes started ahead of the class serve the first tabs at once."""
    server, client = await _client(ServeOptions(warm=1, kill_grace_s=0.3), POLITE)
    try:
        server.pool.refill()
        assert await _warm_ready(server)
        warm_pid = server.pool.ready[0].process.pid
        ws = await client.ws_connect("/ws")
        await _wait_sessions(server, 1)
        (service, _), = server.sessions.values()
        assert service.pid == warm_pid
        assert await _warm_ready(server)
        assert server.pool.ready[0].process.pid != warm_pid
        spare = server.pool.ready[0].process.pid
        await ws.close()
        await client.server.close()
        assert await _gone(warm_pid, within=5.0) and await _gone(spare, within=5.0)
    finally:
        await client.close()


async def test_warm_apps_are_replaced_for_a_new_question_not_for_a_new_phase() -> None:
    """A warm app starts on the class's lead (its lesson and question first); when the
    teacher moves to another question the warm apps are replaced by ones on it, but a
    phase change (a click every minute of a poll) reaches apps over their channel and
    restarts none: replacing them cost up to a core for the whole lesson."""
    server, client = await _client(ServeOptions(warm=2, kill_grace_s=0.3), POLITE)
    try:
        server.pool.refill()
        deadline = time.monotonic() + 60
        while len(server.pool.ready) < 2:
            assert time.monotonic() < deadline, "the pool did not fill"
            await asyncio.sleep(0.05)
        before = {started.process.pid for started in server.pool.ready}
        server.classroom.ask("07-write-write-read", 0)
        server.pool.refill()
        key = server.start_view()[0]
        deadline = time.monotonic() + 30
        while not (len(server.pool.ready) == 2
                   and all(started.lead == key for started in server.pool.ready)):
            assert time.monotonic() < deadline, "warm apps not replaced for the question"
            await asyncio.sleep(0.05)
        asked = {started.process.pid for started in server.pool.ready}
        assert not asked & before
        for phase in ("show", "discuss", "revote", "reveal"):
            server.classroom.set_phase(phase)
            server.pool.refill()
            await asyncio.sleep(0.3)
        assert {started.process.pid for started in server.pool.ready} == asked
    finally:
        await client.close()


async def test_student_apps_run_nicer_than_serve(polite) -> None:  # type: ignore[no-untyped-def]
    """A class arriving at once takes every core with app start-ups; serve (heartbeats,
    votes, the teacher's page) must still be scheduled first: 60 students at once on a
    loaded 2-core machine lost 47 sessions to unanswered heartbeats before this."""
    from nagle_sim.tui.serve import APP_NICENESS
    server, client = polite
    ws = await client.ws_connect("/ws/class-token-1")
    await _wait_sessions(server, 1)
    (service, _), = server.sessions.values()
    assert service.pid is not None
    assert (os.getpriority(os.PRIO_PROCESS, service.pid)
            == os.getpriority(os.PRIO_PROCESS, 0) + APP_NICENESS)
    await ws.close()


async def test_an_idle_session_ends() -> None:
    server, client = await _client(ServeOptions(idle_s=0.3, kill_grace_s=0.3), POLITE)
    try:
        ws = await client.ws_connect("/ws")
        await _wait_sessions(server, 1)
        (service, _), = server.sessions.values()
        pid = service.pid
        assert pid is not None
        message = await ws.receive(timeout=10)
        assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert await _gone(pid, within=5.0)
    finally:
        await client.close()


JUNK = ["[[[[not json", "{}", "[]", "null", '"stdin"', "[1, 2]", '["stdin"]',
        '["stdin", 5]', '["stdin", ""]', '["resize"]', '["resize", [1, 2]]',
        '["unknown", 1]', "[" * 100_000]
"""What a browser page might send that textual-serve's client never does (nested 100,000
deep), and the one-element messages it does send when the page gains or loses focus."""


async def test_the_real_pages_focus_and_blur_keep_the_session(polite) -> None:  # type: ignore[no-untyped-def]
    """Issue 24: textual-serve's page sends ["focus"] and ["blur"] (one element) when a
    student clicks into it; the session used to end right there."""
    server, client = polite
    ws = await client.ws_connect("/ws/class-token-1")
    await _wait_sessions(server, 1)
    for message in ('["focus"]', '["blur"]', '["focus"]'):
        await ws.send_str(message)
    await ws.send_str('["ping", "42"]')
    assert (await _next_text(ws)) == ["pong", "42"]
    assert len(server.sessions) == 1
    await ws.close()


async def test_junk_from_a_browser_is_ignored_and_the_session_lives_on(polite) -> None:  # type: ignore[no-untyped-def]
    server, client = polite
    ws = await client.ws_connect("/ws/class-token-1")
    await _wait_sessions(server, 1)
    for junk in JUNK:
        await ws.send_str(junk)
    await ws.send_str('["ping", "after junk"]')
    assert (await _next_text(ws)) == ["pong", "after junk"]
    assert len(server.sessions) == 1
    await ws.close()


async def _next_text(ws: aiohttp.ClientWebSocketResponse) -> object:
    while True:
        message = await ws.receive(timeout=10)
        assert message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), message
        if message.type == aiohttp.WSMsgType.TEXT:
            return message.json()


async def _texts_until_pong(ws: aiohttp.ClientWebSocketResponse, stamp: str) -> list[object]:
    """The text messages serve sends before answering the ping `stamp` (sent here)."""
    await ws.send_str(json.dumps(["ping", stamp]))
    texts: list[object] = []
    while (text := await _next_text(ws)) != ["pong", stamp]:
        texts.append(text)
    return texts


@pytest.fixture
def typed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What serve types into each app (every `send_bytes` of a session)."""
    seen: list[bytes] = []
    original = ClassroomAppService.send_bytes

    async def send_bytes(self: ClassroomAppService, data: bytes) -> bool:
        seen.append(data)
        return await original(self, data)
    monkeypatch.setattr(ClassroomAppService, "send_bytes", send_bytes)
    return seen


async def test_an_overlong_paste_is_refused_with_one_notice_and_is_not_activity(
        polite, typed: list[bytes]) -> None:  # type: ignore[no-untyped-def]
    """Issue 29.7: 40 MB pasted took an app 42 s of CPU and 136 MB, and each paste reset
    the idle limit. Over the per-message limit nothing is typed, the student's page is
    told once (however many pastes), the idle clock is not reset, the session lives."""
    from nagle_sim.tui.serve import STDIN_LIMIT
    server, client = polite
    ws = await client.ws_connect("/ws/class-token-1")
    await _wait_sessions(server, 1)
    (service, _), = server.sessions.values()
    before = service.last_activity
    for _ in range(3):
        await ws.send_str(json.dumps(["stdin", "a" * (STDIN_LIMIT + 1000)]))
    texts = await _texts_until_pong(ws, "after pastes")
    assert len(texts) == 1, texts
    kind, words = texts[0]  # type: ignore[misc]
    assert kind == "notice" and "Not pasted" in words and f"{STDIN_LIMIT // 1024} KB" in words
    assert typed == []
    assert service.last_activity == before
    await ws.send_str('["stdin", "q"]')  # ordinary keys still arrive
    await _texts_until_pong(ws, "after a key")
    assert typed == [b"q"] and service.last_activity > before
    assert len(server.sessions) == 1
    await ws.close()


async def test_paste_after_paste_is_held_to_a_typing_rate(
        polite, typed: list[bytes]) -> None:  # type: ignore[no-untyped-def]
    """Pastes each under the limit, one after another: the burst is typed, the rest is
    refused with a notice (no tab keeps its app digesting text)."""
    from nagle_sim.tui.serve import TYPED_BURST
    server, client = polite
    ws = await client.ws_connect("/ws/class-token-1")
    await _wait_sessions(server, 1)
    chunk = "b" * 60_000
    for _ in range(TYPED_BURST // len(chunk) + 3):
        await ws.send_str(json.dumps(["stdin", chunk]))
    texts = await _texts_until_pong(ws, "after pastes")
    assert len(texts) == 1 and texts[0][0] == "notice", texts  # type: ignore[index]
    assert "too much text" in texts[0][1]  # type: ignore[index]
    assert len(typed) == TYPED_BURST // len(chunk)
    await ws.close()


def test_browser_messages_are_parsed_as_the_page_sends_them() -> None:
    from nagle_sim.tui.serve import STDIN_LIMIT, browser_message
    assert browser_message('["focus"]') == ("focus", None)
    assert browser_message('["blur"]') == ("blur", None)
    assert browser_message('["stdin", "q"]') == ("stdin", "q")
    assert browser_message('["resize", {"width": 120, "height": 40}]') == ("resize",
                                                                           (120, 40))
    assert browser_message('["resize", {"width": 100000, "height": -3}]') == ("resize",
                                                                              (500, 10))
    assert browser_message('["resize", {"width": "x", "height": 1e308}]') == ("resize",
                                                                               (80, 24))
    assert browser_message('["ping", "1700000000000"]') == ("ping", "1700000000000")
    assert browser_message('["stdin", "' + "x" * STDIN_LIMIT + '"]') is not None
    for junk in JUNK:
        assert browser_message(junk) is None, junk


async def test_shutdown_ends_every_session_even_busy_ones() -> None:
    """Issue 8: Ctrl-C on serve (the app's shutdown) ends every app process."""
    server, client = await _client(ServeOptions(kill_grace_s=5.0), BUSY)
    sockets = [await client.ws_connect("/ws") for _ in range(3)]
    await _wait_sessions(server, 3)
    pids = [s.pid for s, _ in server.sessions.values()]
    started = time.monotonic()
    await client.server.close()  # the server's shutdown, as after Ctrl-C
    assert time.monotonic() - started < 4.0  # killed at once, not after the grace
    for pid in pids:
        assert pid is not None and await _gone(pid, within=3.0)
    for ws in sockets:
        assert ws.closed or (await ws.receive(timeout=5)).type in (
            aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    await client.close()


def test_a_class_url_carries_the_token_and_the_app_runs_in_classroom_mode() -> None:
    options = ServeOptions(host="192.0.2.7", port=8123, token="abcdefgh12")
    assert student_url(options) == "http://192.0.2.7:8123/?token=abcdefgh12"
    argv = app_argv(options, None)
    assert argv[-2:] == ["tui", "--classroom"] and "--allow-real" not in argv
    assert "--allow-real" in app_argv(ServeOptions(allow_real=True), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    return [int(a) for a, b in (line.split() for line in out.splitlines()) if int(b) == pid]


@pytest.mark.slow
def test_serve_end_to_end_first_screen_then_ctrl_c_ends_everything() -> None:
    """The real command on loopback: the page, the app's first screen over the socket, and
    SIGINT ending serve and its app process."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "serve", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        body = ""
        while time.monotonic() < deadline and not body:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as rsp:
                    body = rsp.read().decode()
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        assert "nagle-sim" in body

        async def first_screen() -> bytes:
            async with aiohttp.ClientSession() as session, session.ws_connect(
                    f"ws://127.0.0.1:{port}/ws?width=100&height=30") as ws:
                got = b""
                while b"Pick a lesson" not in got:
                    message = await ws.receive(timeout=20)
                    assert message.type == aiohttp.WSMsgType.BINARY, message
                    got += message.data
                assert _children(proc.pid)
                proc.send_signal(signal.SIGINT)
                return got

        assert b"Pick a lesson" in asyncio.run(first_screen())
        assert proc.wait(timeout=15) == 0
        assert _children(proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "nagle_sim", "serve", "--port", str(port),
                               "--warm", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "cannot listen" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_plain_get_of_the_socket_address_is_answered_426(polite) -> None:  # type: ignore[no-untyped-def]
    """Issue 29.6: a link to /ws/<token> followed by hand got no answer and printed a
    traceback on the teacher's console."""
    server, client = polite
    for path in ("/ws/class-token-1", "/ws/class-token-1?width=80&height=24"):
        answer = await client.get(path)
        assert answer.status == 426
        assert "class link" in await answer.text()
    assert server.sessions == {}
    assert (await client.get("/favicon.ico")).status == 204


async def test_the_student_page_loads_nothing_from_elsewhere(polite) -> None:  # type: ignore[no-untyped-def]
    """Issue 24: the page asked fonts.googleapis.com for its font; now every URL in it is
    the server's own, and its policy makes the browser refuse anything else."""
    _, client = polite
    page = await client.get("/?token=class-token-1")
    body = await page.text()
    loaded = re.findall(r'(?:src|href)="([^"]*)"', body) + re.findall(r'url\("([^"]*)"\)',
                                                                      body)
    assert loaded and all(url.startswith(("/", "data:")) for url in loaded), loaded
    assert "googleapis" not in body
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "font-src 'self'" in policy
    font = await client.get("/static/fonts/RobotoMono-VariableFont_wght.ttf")
    assert font.status == 200 and len(await font.read()) > 10_000


def test_serve_as_root_without_allow_real_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    import nagle_sim.tui.serve as serve_module
    from nagle_sim.tui.serve import announce
    for root, allow_real, warned in ((True, False, True), (True, True, False),
                                     (False, False, False)):
        monkeypatch.setattr(serve_module, "running_as_root", lambda r=root: r)
        out = io.StringIO()
        announce(ServeOptions(allow_real=allow_real), out)
        assert ("runs as root" in out.getvalue()) is warned, (root, allow_real)


STORM_KEYS = ["\x10", "\x1b", "\r", "\t", "\x7f", "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D", " ",
              "q", "n", "e", "?", "x", "1", "2", "s", "r", "d", "a", "b", "\x0f", "\x1bOP",
              "v", "z", "+", "N", "l", "o", "k"]
"""Keys a student (or a cat) may hit: ctrl+p (the command palette), esc, enter, tab,
backspace, arrows, f1, ctrl+o and the app's letters."""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 2, 21])
async def test_a_key_storm_through_serve_never_crashes_the_app(
        seed: int, capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 29.7: random keystroke storms ended 6 of 8 sessions through Textual's
    command palette (NoMatches 'CommandList', ScreenStackError) and the app's progress
    timer ('#progress' queried on a screen being taken down), a traceback each time on
    the teacher's console. The real app behind the real serve path; seeded keys (their
    timing is the machine's, so a storm that happens to pick the palette's Quit may end
    the app cleanly: that is allowed, a crash is not)."""
    import json
    import random
    server = ClassroomServer(ServeOptions(token="storm-token-1", kill_grace_s=2.0))
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    try:
        ws = await client.ws_connect("/ws/storm-token-1?width=100&height=30")
        await _wait_sessions(server, 1)
        service = next(iter(server.sessions.values()))[0]
        rng = random.Random(seed)
        drawn = 0
        while drawn < 2000:  # the first screen
            message = await ws.receive(timeout=30)
            assert message.type == aiohttp.WSMsgType.BINARY, message
            drawn += len(message.data)
        for _ in range(300):
            if ws.closed:
                break
            await ws.send_str(json.dumps(["stdin", rng.choice(STORM_KEYS)]))
            await asyncio.sleep(rng.choice([0, 0.005, 0.02, 0.1]))
        await asyncio.sleep(1.5)
        process = service._process
        assert process is not None
        if process.returncode is None:
            await ws.send_str('["ping", "alive"]')
            while True:
                message = await ws.receive(timeout=10)
                assert message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), (
                    message)
                if message.type == aiohttp.WSMsgType.TEXT and message.json()[0] == "pong":
                    break  # (other texts: downloads the storm's e announced)
        else:
            assert process.returncode == 0, f"the app crashed: exit {process.returncode}"
        await ws.close()
    finally:
        await client.close()
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Error" not in out + err, (out + err)[-3000:]


async def test_a_half_sent_request_is_closed_and_a_whole_one_is_not() -> None:
    """Issue 29.6: 1,100 half-sent requests held their sockets for 30 s and more."""
    from aiohttp import web

    from nagle_sim.tui.serve import close_slow_requests
    server = ClassroomServer(ServeOptions(warm=0))
    runner = web.AppRunner(await server._make_app(), handle_signals=False)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    assert runner.server is not None
    guard = asyncio.create_task(close_slow_requests(runner.server, server._answered,
                                                    timeout_s=1.0, every_s=0.2))
    try:
        slow_reader, slow = await asyncio.open_connection("127.0.0.1", port)
        slow.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        whole_reader, whole = await asyncio.open_connection("127.0.0.1", port)
        whole.write(b"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await whole_reader.readline()).startswith(b"HTTP/1.1 204")
        started = time.monotonic()
        assert await asyncio.wait_for(slow_reader.read(10), 10) == b""
        assert 0.8 <= time.monotonic() - started < 5
        await asyncio.sleep(1.5)
        assert not whole.is_closing() and len(runner.server.connections) == 1
        whole.close()
    finally:
        guard.cancel()
        await runner.cleanup()


def test_a_malformed_request_is_one_line_on_the_teachers_console() -> None:
    """Issue 29.6: two Host headers printed aiohttp's parser traceback."""
    import logging
    try:
        raise ValueError("400, message:\n  Duplicate 'Host' header found.")
    except ValueError:
        record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1,
                                   "Error handling request from %s", ("127.0.0.1",),
                                   sys.exc_info())
    from nagle_sim.tui.serve import one_line_records
    assert one_line_records(record)
    text = logging.Formatter("%(message)s").format(record)
    assert text == ("Error handling request from 127.0.0.1: refused (ValueError: 400, "
                    "message: Duplicate 'Host' header found.)")


@pytest.mark.slow
def test_serve_answers_two_host_headers_400_without_a_traceback() -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "serve", "--port", str(port),
                             "--warm", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        with conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
            assert conn.recv(100).startswith(b"HTTP/1.0 400")
    finally:
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=30)[0]
    assert "Traceback" not in out and "Duplicate 'Host'" in out, out


# ------------------------------------------------------------------ the class (issue 24)
import json  # noqa: E402

from nagle_sim.tui.serve import AppProcess, ExecStarter, spawn_app  # noqa: E402

LESSON_7 = "07-write-write-read"


class ChannelStarter(ExecStarter):
    """Stand-in apps (POLITE) whose end of the class channel the test keeps: the test
    speaks as each app, in the order the apps were started."""

    def __init__(self, environment: dict[str, str]) -> None:
        super().__init__(POLITE, environment)
        self.app_ends: list[socket.socket] = []
        self.started = asyncio.Event()

    async def start(self, width: int, height: int, view: str = "") -> AppProcess:
        ours, theirs = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # fills up quickly
        process = await spawn_app(self.argv, self.environment)
        self.app_ends.append(theirs)
        self.started.set()
        return AppProcess(process, ours)


class AppEnd:
    """One stand-in app's side of its channel."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.got: list[dict[str, object]] = []

    def send(self, message: object) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.writer.write(text.encode() + b"\n")

    async def next(self, kind: str, within: float = 10.0) -> dict[str, object]:
        while True:
            line = await asyncio.wait_for(self.reader.readline(), within)
            assert line, "the channel closed"
            message = json.loads(line)
            self.got.append(message)
            if message["t"] == kind:
                return message

    async def drain(self, within: float = 0.3) -> None:
        """Read whatever arrives within `within` seconds."""
        with contextlib.suppress(TimeoutError):
            while True:
                line = await asyncio.wait_for(self.reader.readline(), within)
                if not line:
                    return
                self.got.append(json.loads(line))


async def _class(**options: object) -> tuple[ClassroomServer, TestClient, ChannelStarter]:
    server = ClassroomServer(ServeOptions(token="class-token-1", kill_grace_s=0.5, warm=0,
                                          **options))  # type: ignore[arg-type]
    starter = ChannelStarter(server.environment)
    server.starter = server.pool.starter = starter
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    return server, client, starter


async def _student(client: TestClient, starter: ChannelStarter, browser: str
                   ) -> tuple[aiohttp.ClientWebSocketResponse, AppEnd]:
    known = len(starter.app_ends)
    ws = await client.ws_connect(f"/ws/class-token-1?width=80&height=24&student={browser}")
    deadline = time.monotonic() + 30
    while len(starter.app_ends) <= known:
        assert time.monotonic() < deadline, "no app was started"
        await asyncio.sleep(0.02)
    sock = starter.app_ends[known]
    sock.setblocking(False)
    end = AppEnd(*await asyncio.open_connection(sock=sock))
    await end.next("class")  # serve tells each app its view when the session starts
    return ws, end


async def _teacher(client: TestClient, server: ClassroomServer
                   ) -> aiohttp.ClientWebSocketResponse:
    ws = await client.ws_connect(f"/teacher/ws?key={server.teacher_token}")
    assert (await ws.receive_json(timeout=10))["t"] == "hello"
    return ws


async def _state(ws: aiohttp.ClientWebSocketResponse, check: object = None,
                 within: float = 10.0) -> dict[str, object]:
    """The next teacher snapshot (that passes `check`)."""
    while True:
        message = await ws.receive_json(timeout=within)
        if message["t"] == "state" and (check is None or check(message)):  # type: ignore[operator]
            return message  # type: ignore[no-any-return]


def _browser(n: int) -> str:
    return f"test-browser-{n:08d}"


async def test_the_teacher_link_has_a_secret_of_its_own() -> None:
    """Not derivable from the class link: random for each serve, never the class token;
    the class token opens neither the teacher's page, its socket nor the results."""
    server, client, _ = await _class()
    try:
        other = ClassroomServer(ServeOptions(token="class-token-1", warm=0))
        teacher = server.teacher_token
        assert teacher != other.teacher_token and len(teacher) >= 20
        assert "class-token-1" not in teacher
        page = await client.get("/?token=class-token-1")
        assert teacher not in await page.text()
        for key in ("class-token-1", "", teacher[:-1], teacher + "x"):
            for path in ("/teacher", "/teacher/results.csv", "/teacher/results.md"):
                answer = await client.get(f"{path}?key={key}")
                assert answer.status == 403, (path, key)
            with pytest.raises(aiohttp.WSServerHandshakeError):
                await client.ws_connect(f"/teacher/ws?key={key}")
        assert (await client.get(f"/?token={teacher}")).status == 403
        page = await client.get(f"/teacher?key={teacher}")
        assert page.status == 200
        policy = page.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        body = await page.text()
        assert re.findall(r"<script[^>]*>", body) == ['<script src="/teacher/teacher.js" defer>']
        assert "<style" not in body and " style=" not in body
        script = await client.get("/teacher/teacher.js")
        assert script.status == 200 and "innerHTML" not in await script.text()
        assert (await client.get("/teacher/../serve.py")).status == 404
    finally:
        await client.close()


async def test_a_students_connections_cannot_call_a_teacher_action() -> None:
    """Neither the student's page socket nor the student's app channel reaches the
    teacher's commands, whatever they send."""
    server, client, starter = await _class()
    try:
        teacher = await _teacher(client, server)
        await teacher.send_json({"do": "ask", "lesson": LESSON_7, "question": 0})
        await _state(teacher, lambda s: s["poll"] is not None)
        ws, app = await _student(client, starter, _browser(1))
        for message in ('{"do": "next"}', '["do", {"do": "phase", "phase": "reveal"}]',
                        '["phase", "reveal"]', '["next"]', '["free"]',
                        '["ask", {"lesson": "01-why-nagle-exists", "question": 0}]',
                        '["stdin", "{\\"do\\": \\"free\\"}"]'):
            await ws.send_str(message)
        for message in ({"t": "phase", "phase": "reveal"}, {"do": "next"},
                        {"t": "next"}, {"t": "free"}, {"t": "open", "lesson": "x"},
                        {"t": "ask", "lesson": LESSON_7, "question": 0},
                        {"t": "vote", "poll": 1, "round": 2, "choice": 0}):
            app.send(message)
        await ws.send_str('["ping", "after"]')
        assert (await _next_text(ws)) == ["pong", "after"]
        await app.drain()
        state = server.classroom
        assert state.lead == LESSON_7 and state.poll is not None
        assert state.poll.phase == "vote" and len(state.polls) == 1
        assert state.poll.ballots[1] == {}  # the re-vote was not open: refused
        await ws.close()
        await teacher.close()
    finally:
        await client.close()


async def test_a_student_cannot_read_anothers_vote() -> None:
    """What a student's app is told while others vote: its own ballots and nothing else;
    once the round closes, the class's counts (aggregates), never who voted what; the
    page socket carries no class data at all."""
    server, client, starter = await _class()
    try:
        teacher = await _teacher(client, server)
        ada_ws, ada = await _student(client, starter, _browser(1))
        bob_ws, bob = await _student(client, starter, _browser(2))
        await teacher.send_json({"do": "ask", "lesson": LESSON_7, "question": 0})
        ada_poll = (await ada.next("class"))["poll"]
        await bob.next("class")
        assert isinstance(ada_poll, dict)
        ada.send({"t": "vote", "poll": ada_poll["id"], "round": 1, "choice": 3})
        assert (await ada.next("ballot"))["ok"] is True
        counted = await _state(teacher, lambda s: bool(s["poll"]) and s["poll"]["ballots"][0] == 1)
        assert counted["poll"]["counts"] == []  # the teacher sees how many, not what
        await teacher.send_json({"do": "phase", "phase": "show"})
        shown = await bob.next("class")
        await bob.drain()
        for message in bob.got:
            text = json.dumps(message)
            poll = message.get("poll")
            assert "Ada" not in text and ada_ws is not None
            if isinstance(poll, dict):
                assert poll["mine"] == [None, None]
                assert poll["counts"] in ([], [[0, 0, 0, 1]])
        assert shown["poll"]["counts"] == [[0, 0, 0, 1]]  # type: ignore[index]
        await bob_ws.send_str('["ping", "end"]')
        while True:  # the page socket: the app's screen (binary) and pongs, nothing else
            message = await bob_ws.receive(timeout=10)
            if message.type == aiohttp.WSMsgType.TEXT:
                assert message.json() == ["pong", "end"]
                break
            assert message.type == aiohttp.WSMsgType.BINARY
    finally:
        await client.close()


async def test_a_student_cannot_vote_twice_in_a_phase_even_after_a_reload() -> None:
    server, client, starter = await _class()
    try:
        teacher = await _teacher(client, server)
        await teacher.send_json({"do": "ask", "lesson": LESSON_7, "question": 0})
        ws, app = await _student(client, starter, _browser(5))
        app.send({"t": "vote", "poll": 1, "round": 1, "choice": 1})
        assert (await app.next("ballot"))["ok"] is True
        app.send({"t": "vote", "poll": 1, "round": 1, "choice": 0})
        second = await app.next("ballot")
        assert second["ok"] is False and "voted" in str(second["why"])
        await ws.close()  # the tab reloads: a new session, a new app, the same browser
        ws, app = await _student(client, starter, _browser(5))
        assert app.got[-1]["poll"]["mine"] == [1, None]  # type: ignore[index]
        app.send({"t": "vote", "poll": 1, "round": 1, "choice": 0})
        assert (await app.next("ballot"))["ok"] is False
        assert server.classroom.poll is not None
        assert server.classroom.poll.counts(0) == [0, 1, 0, 0]
        await teacher.send_json({"do": "phase", "phase": "revote"})
        await app.next("class")
        app.send({"t": "vote", "poll": 1, "round": 2, "choice": 0})
        assert (await app.next("ballot"))["ok"] is True  # one in each round
        await ws.close()
    finally:
        await client.close()


async def test_a_misbehaving_app_channel_does_not_stall_the_class(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An app that never reads its channel, and one that sends a line over the limit:
    both channels end (those apps work on alone), the others and the teacher go on."""
    import nagle_sim.tui.serve as serve_module
    monkeypatch.setattr(serve_module, "CHANNEL_BUFFER_LIMIT", 16 * 1024)
    server, client, starter = await _class()
    try:
        teacher = await _teacher(client, server)
        deaf_ws, deaf = await _student(client, starter, _browser(1))
        loud_ws, loud = await _student(client, starter, _browser(2))
        good_ws, good = await _student(client, starter, _browser(3))
        loud.writer.write(b"x" * 20_000 + b"\n")
        await teacher.send_json({"do": "ask", "lesson": LESSON_7, "question": 0})
        deadline = time.monotonic() + 60
        i = 0
        while len(server.channels) > 1:  # views until the deaf app's buffers are full
            assert time.monotonic() < deadline, f"{len(server.channels)} channels left"
            i += 1
            await teacher.send_json({"do": "phase", "phase": "show" if i % 2 else "vote"})
            if i % 20 == 0:
                await good.drain(0.01)
        assert [c.student.number for c in server.channels] == [3]
        await teacher.send_json({"do": "phase", "phase": "reveal"})
        assert (await good.next("class"))["poll"] is not None
        await _state(teacher, lambda s: bool(s["poll"]) and s["poll"]["phase"] == "reveal")
        for ws in (deaf_ws, loud_ws, good_ws):  # every session still lives
            await ws.send_str('["ping", "alive"]')
            assert (await _next_text(ws)) == ["pong", "alive"]
    finally:
        await client.close()


async def test_a_flooding_tab_is_held_to_its_rate() -> None:
    """A tab that sends messages as fast as it can: beyond the burst they are dropped
    (the flood's pings go unanswered), and the teacher's commands are still carried out
    and reported."""
    server, client, starter = await _class()
    try:
        teacher = await _teacher(client, server)
        ws, _ = await _student(client, starter, _browser(1))
        for i in range(3000):
            await ws.send_str(f'["ping", "{i}"]')
        await teacher.send_json({"do": "open", "lesson": LESSON_7})
        await _state(teacher, lambda s: s["lead"] == LESSON_7)
        pongs = 0
        with contextlib.suppress(TimeoutError):
            while True:
                message = await ws.receive(timeout=2)
                if message.type == aiohttp.WSMsgType.TEXT:
                    pongs += 1
        assert 400 <= pongs < 3000, pongs
        await ws.send_str('["ping", "later"]')
        assert (await _next_text(ws)) == ["pong", "later"]
    finally:
        await client.close()


async def test_results_export_counts_and_nicknames_only_when_asked() -> None:
    server, client, starter = await _class()
    try:
        teacher = await _teacher(client, server)
        await teacher.send_json({"do": "ask", "lesson": LESSON_7, "question": 0})
        sessions = [await _student(client, starter, _browser(n)) for n in range(3)]
        for n, ((ws, app), choice) in enumerate(zip(sessions, (1, 1, 0), strict=True)):
            await ws.send_str(json.dumps(["name", f"Student-{n}"]))
            app.send({"t": "vote", "poll": 1, "round": 1, "choice": choice})
            assert (await app.next("ballot"))["ok"] is True
        key = server.teacher_token
        csv_text = await (await client.get(f"/teacher/results.csv?key={key}")).text()
        assert "Student-" not in csv_text
        lesson = next(x for x in load_lessons() if x.slug == LESSON_7)
        title = f"{lesson.number}. {lesson.title}"     # as the teacher's page lists it
        # the prompt quotes "world\r\n" with a real CR LF: a CSV reader, not splitlines
        table = list(csv.reader(io.StringIO(csv_text, newline="")))
        assert table[1][:4] == ["1", LESSON_7, title, "1"], table[1]
        rows = [row[-3:] for row in table[1:]]
        assert rows == [["no", "1", "0"], ["yes", "2", "0"], ["no", "0", "0"],
                        ["no", "0", "0"]]
        named = await client.get(f"/teacher/results.md?key={key}&names=1")
        assert named.headers["Content-Disposition"].startswith("attachment;")
        text = await named.text()
        assert "| Student-0 | 2 |  |" in text and "| Student-2 | 1 |  |" in text
    finally:
        await client.close()


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(_children(p))
    return found


async def _first_screen(port: int, token: str = "") -> tuple[aiohttp.ClientSession,
                                                               aiohttp.ClientWebSocketResponse]:
    session = aiohttp.ClientSession()
    path = f"/ws/{token}" if token else "/ws"
    ws = await session.ws_connect(f"ws://127.0.0.1:{port}{path}?width=100&height=30")
    got = b""
    while b"Pick a lesson" not in got:
        message = await ws.receive(timeout=60)
        assert message.type == aiohttp.WSMsgType.BINARY, message
        got += message.data
    return session, ws


def _serve_process(*args: str) -> tuple[subprocess.Popen[str], int]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "serve", "--port", str(port),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)


@pytest.mark.slow
def test_a_sigkilled_serve_leaves_no_app_and_no_fork_server() -> None:
    """The fork server notices its socket close (serve is gone, even by SIGKILL, which
    runs none of serve's own clean-up) and kills every app it forked, then itself."""
    proc, port = _serve_process("--warm", "2")

    async def open_two() -> list[int]:
        held = [await _first_screen(port) for _ in range(2)]
        pids = _tree(proc.pid)
        for session, ws in held:
            await ws.close()
            await session.close()
        return pids

    try:
        pids = asyncio.run(open_two())
        # serve, the fork server, two apps for the tabs and at least one warm one
        assert len(pids) >= 4, pids
        alive = [p for p in _tree(proc.pid) if p != proc.pid]
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in alive):
            assert time.monotonic() < deadline, [p for p in alive if _alive(p)]
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()


def _is_fork_server(pid: int) -> bool:
    try:
        return "forkserver" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False


@pytest.mark.slow
def test_when_the_fork_server_dies_new_tabs_still_get_an_app() -> None:
    """A fork server that is gone (killed) is replaced by starting each app on its own,
    with one line on the teacher's console and no traceback."""
    proc, port = _serve_process("--warm", "0")

    async def before_and_after() -> None:
        session, ws = await _first_screen(port)  # forked
        await ws.close()
        await session.close()
        fork_server = next(p for p in _children(proc.pid) if _is_fork_server(p))
        os.kill(fork_server, signal.SIGKILL)
        await asyncio.sleep(0.5)
        session, ws = await _first_screen(port)  # started on its own
        assert not any(_is_fork_server(p) for p in _children(proc.pid) if _alive(p))
        await ws.close()
        await session.close()

    try:
        asyncio.run(before_and_after())
    finally:
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=30)[0]
    assert "each app starts on its own instead" in out, out
    assert "Traceback" not in out, out


@pytest.mark.slow
def test_the_fork_server_reports_exits_and_kills_its_apps_when_serve_goes() -> None:
    """The fork server alone: a fork per request with the four descriptors given, an
    exit report for an app that ends, and — when serve's socket closes — every app it
    forked killed, even one whose stdin is still open (a busy app would not notice)."""
    import json as json_module
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    from nagle_sim.tui.serve import ClassroomServer
    environment = ClassroomServer(ServeOptions(warm=0)).environment
    server = subprocess.Popen(
        [sys.executable, "-m", "nagle_sim.cli.forkserver"], pass_fds=[theirs.fileno()],
        env={**environment, "NAGLE_SIM_FORK_FD": str(theirs.fileno()),
             "NAGLE_SIM_FORK_CONFIG": "{}"}, stdin=subprocess.DEVNULL)
    theirs.close()
    held: list[int] = []
    try:
        ours.settimeout(60)
        assert json_module.loads(ours.recv(4096)) == {"ready": True}

        def fork(ident: int) -> int:
            pipes = [os.pipe() for _ in range(3)]
            app_end, class_end = socket.socketpair()
            given = [pipes[0][0], pipes[1][1], pipes[2][1], class_end.fileno()]
            socket.send_fds(ours, [json_module.dumps({"id": ident, "columns": 80,
                                                      "rows": 24}).encode()], given)
            for fd in given[:3]:
                os.close(fd)
            class_end.close()
            held.extend([pipes[0][1], pipes[1][0], pipes[2][0], app_end.detach()])
            answer = json_module.loads(ours.recv(4096))
            assert answer["id"] == ident
            return int(answer["pid"])

        first, second = fork(1), fork(2)
        assert _alive(first) and _alive(second)
        assert os.getpgid(first) == first  # its own session: serve kills its group
        os.kill(first, signal.SIGKILL)
        assert json_module.loads(ours.recv(4096)) == {"exit": first, "code": -9}
        ours.close()  # serve is gone
        assert server.wait(timeout=20) == 0
        assert not _alive(second)
    finally:
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)
        if server.poll() is None:
            server.kill()


LESSON_7_POLL = {"t": "class", "lead": "07-write-write-read", "done": [], "name": "",
                 "poll": {"id": 1, "lesson": "07-write-write-read", "question": 0,
                          "phase": "vote", "round": 1, "counts": [], "answer": None,
                          "mine": [None, None]}}


@pytest.mark.slow
def test_tabs_forked_from_the_template_show_the_lead_and_each_speaks_for_itself() -> None:
    """The fork server's template app (cli/forktemplate.py) follows the class to lesson
    7's question and forks each tab from there: every tab's terminal shows the question,
    each app reports on its own class channel (the link rebound from the template's), and
    once the class is freed a new tab gets the lesson list, not the template's old
    lesson."""
    import json as json_module
    import select
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    from nagle_sim.tui.serve import ClassroomServer
    environment = ClassroomServer(ServeOptions(warm=0)).environment
    server = subprocess.Popen(
        [sys.executable, "-m", "nagle_sim.cli.forkserver"], pass_fds=[theirs.fileno()],
        env={**environment, "NAGLE_SIM_FORK_FD": str(theirs.fileno()),
             "NAGLE_SIM_FORK_CONFIG": "{}"}, stdin=subprocess.DEVNULL)
    theirs.close()
    held: list[int] = []
    tabs: list[tuple[int, int, socket.socket]] = []  # stdin, stdout, class channel
    try:
        ours.settimeout(90)
        assert json_module.loads(ours.recv(4096)) == {"ready": True}

        def fork(view: dict[str, object] | None) -> tuple[int, int, socket.socket]:
            pipes = [os.pipe() for _ in range(3)]
            app_end, class_end = socket.socketpair()
            given = [pipes[0][0], pipes[1][1], pipes[2][1], class_end.fileno()]
            socket.send_fds(ours, [json_module.dumps({
                "id": len(tabs), "columns": 100, "rows": 30,
                "view": json_module.dumps(view) if view else ""}).encode()], given)
            for fd in given[:3]:
                os.close(fd)
            class_end.close()
            held.extend([pipes[0][1], pipes[1][0], pipes[2][0]])
            while "pid" not in json_module.loads(ours.recv(4096)):
                pass  # (an exit report of an earlier tab)
            tab = (pipes[0][1], pipes[1][0], app_end)
            tabs.append(tab)
            return tab

        def screen_until(fd: int, want: bytes, timeout_s: float = 90) -> bytes:
            got = b""
            deadline = time.monotonic() + timeout_s
            while want not in got:
                left = deadline - time.monotonic()
                assert left > 0, f"{want!r} not on the tab's screen: {got[-2000:]!r}"
                if select.select([fd], [], [], left)[0]:
                    data = os.read(fd, 65536)
                    assert data, f"the tab's app ended before showing {want!r}"
                    got += data
            return got

        first, second = fork(LESSON_7_POLL), fork(LESSON_7_POLL)
        for _stdin, stdout, _channel in (first, second):
            screen_until(stdout, b"Predict (")
        for _stdin, _stdout, channel in (first, second):
            channel.settimeout(30)
            report = json_module.loads(channel.recv(4096).split(b"\n")[0])
            assert report["t"] == "at" and report["lesson"] == "07-write-write-read", report


        freed = {**LESSON_7_POLL, "lead": None, "poll": None}
        _stdin, stdout, _channel = fork(freed)
        screen_until(stdout, b"Pick a lesson")
    finally:
        ours.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=20)
        if server.poll() is None:
            server.kill()
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)
        for _stdin, _stdout, channel in tabs:
            channel.close()
