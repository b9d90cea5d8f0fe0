"""`nagle-sim serve`: token, session cap, idle limit, killing app processes, Ctrl-C.

The server runs in-process on aiohttp's test server; app processes are small Python
stand-ins (a well-behaved one that quits when asked, a busy one that never reads stdin)
except in the end-to-end test, which starts the real command and its real app.
"""

from __future__ import annotations

import asyncio
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

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from nagle_sim.tui.serve import ClassroomServer, ServeOptions, app_argv, student_url

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
    server.argv = argv
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
        warm_pid = server.pool.ready[0].pid
        ws = await client.ws_connect("/ws")
        await _wait_sessions(server, 1)
        (service, _), = server.sessions.values()
        assert service.pid == warm_pid
        assert await _warm_ready(server)
        assert server.pool.ready[0].pid != warm_pid
        spare = server.pool.ready[0].pid
        await ws.close()
        await client.server.close()
        assert await _gone(warm_pid, within=5.0) and await _gone(spare, within=5.0)
    finally:
        await client.close()


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
        '["unknown", 1]', "[" * 100_000,
        '["stdin", "' + "a" * 70_000 + '"]']
"""What a browser page might send that textual-serve's client never does (nested 100,000
deep, a 70 KB paste over the per-message limit), and the one-element messages it does
send when the page gains or loses focus."""


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
