"""Real-browser tests: Debian's Chromium driven by Playwright against a real `nagle-sim
serve` process, the judge the classroom is used through.

What a student sees is read back from the terminal stream itself: every byte the app
sends over the page's WebSocket is fed to pyte (a VT100 emulator) sized as the page's
xterm.js is, so a test can wait for text on the screen without reading pixels.
Screenshots are saved under $NAGLE_SIM_SCREENSHOTS (default: the test's tmp dir) for a
person to look at.

Skips, with the reason, where Playwright or the browser is missing; CI installs both
(.ci/run: apt's chromium, pip's playwright).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-default-apps", "--mute-audio"]
"""As root Chromium needs --no-sandbox; the background-networking flags keep it from
calling Google's services, so the network log holds only what the page asked for."""

WAIT_MS = 30_000
"""How long a test waits for the teacher's page to show something (Playwright's own
default for a wait; its `expect` would give up after 5 s)."""

TOKEN = "browser-test-class-1"
TEACHER = "browser-test-teacher-1"


def _need_browser() -> Any:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: Debian's chromium package (apt-get install "
                    "chromium; .ci/run installs it)")
    pytest.importorskip("pyte", reason="pyte is not installed (pip install -e '.[test]')")
    return sync_api


def expect(locator: Any) -> Any:
    """Playwright's auto-waiting assertions on a locator. Tests of our pages wait with
    these, never with `page.wait_for_function("…")`: a string predicate is run with
    `eval` on every poll, which the teacher page's CSP (script-src 'self', no
    'unsafe-eval') refuses with an EvalError. Only its first poll, run inside the DevTools
    call itself, is let through, so such a wait passed whenever the page already showed
    the awaited text and failed when it had to wait (CI, issue 24)."""
    from playwright.sync_api import expect as playwright_expect
    return playwright_expect(locator)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per test module. Not per session: Playwright's sync API runs its own
    event loop in this thread while it is open, and every asyncio test after it (Textual
    pilots, aiohttp servers) would fail with "cannot be called from a running event
    loop"."""
    sync_api = _need_browser()
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def lan_address() -> str | None:
    """An address of this machine other than loopback, or None (no network)."""
    from nagle_sim.tui.serve import lan_address as address
    found = address()
    return None if found.startswith("127.") else found


@dataclass
class ServeProcess:
    port: int
    process: subprocess.Popen[str]
    token: str = TOKEN
    out: list[str] = field(default_factory=list)

    def url(self, host: str = "127.0.0.1", token: str | None = None) -> str:
        name = f"[{host}]" if ":" in host else host
        given = self.token if token is None else token
        return f"http://{name}:{self.port}/?token={given}"

    def teacher_url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/teacher?key={TEACHER}"

    def stop(self) -> str:
        """SIGINT (the teacher's Ctrl-C); returns what serve printed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        assert self.process.stdout is not None
        return self.process.stdout.read()


def start_serve(*args: str, env: dict[str, str] | None = None) -> ServeProcess:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nagle_sim", "serve", "--port", str(port), "--token", TOKEN,
         "--teacher-token", TEACHER, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})})
    served = ServeProcess(port, process)
    listen = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
    probe = served.url("127.0.0.1" if listen == "0.0.0.0" else listen)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, served.stop()
        try:
            with urllib.request.urlopen(probe, timeout=2):
                return served
        except urllib.error.HTTPError:
            return served
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise AssertionError("serve did not answer within 30 s:\n" + served.stop())


@pytest.fixture
def class_open_to_lan() -> Iterator[ServeProcess]:
    """`serve --host 0.0.0.0`: what a teacher runs in a classroom."""
    served = start_serve("--host", "0.0.0.0", "--warm", "1")
    try:
        yield served
    finally:
        served.stop()


class Screen:
    """The app's screen as the page's terminal shows it, rebuilt from the socket's bytes."""

    def __init__(self) -> None:
        import pyte
        self._pyte = pyte
        self.screen = pyte.Screen(80, 24)
        self.stream = pyte.ByteStream(self.screen)
        self.texts: list[Any] = []
        """JSON messages from the server (downloads announced, pongs)."""
        self.sent: list[str] = []
        self.closed = False

    def attach(self, websocket: Any) -> None:
        query = parse_qs(urlsplit(websocket.url).query)
        self.screen.resize(int(query.get("height", ["24"])[0]),
                           int(query.get("width", ["80"])[0]))
        websocket.on("framereceived", self._received)
        websocket.on("framesent", self._sent)
        websocket.on("close", lambda *_: setattr(self, "closed", True))

    def _received(self, payload: str | bytes) -> None:
        if isinstance(payload, bytes):
            self.stream.feed(payload)
        else:
            import json
            self.texts.append(json.loads(payload))

    def _sent(self, payload: str | bytes) -> None:
        text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
        self.sent.append(text)
        match = re.fullmatch(r'\["resize",\{"width":(\d+),"height":(\d+)\}\]', text)
        if match:
            self.screen.resize(int(match[2]), int(match[1]))

    def text(self) -> str:
        return "\n".join(self.screen.display)


@dataclass
class Student:
    page: Any
    screen: Screen
    requests: list[str]

    def wait_for(self, predicate: Callable[[str], bool] | str, *, timeout_s: float = 60,
                 what: str = "") -> str:
        """Wait (letting the browser run) until the screen shows `predicate`."""
        check = (lambda text: predicate in text) if isinstance(predicate, str) else predicate
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.screen.text()
            if check(text):
                return text
            assert not self.screen.closed, (
                f"the session ended while waiting for {what or predicate!r}; page says: "
                + self.page.inner_text("body"))
            self.page.wait_for_timeout(100)
        raise AssertionError(f"not on screen after {timeout_s} s: {what or predicate!r}\n"
                             + self.screen.text())

    def settle(self, timeout_s: float = 30) -> str:
        """Wait until the app has drawn at the page's size: a warm app first replays a
        screen drawn at 80×24 and redraws when the page's size reaches it. The footer's
        last key (``^p palette``) ends at the right edge of the app's own width."""
        columns = self.screen.screen.columns

        def full_width(text: str) -> bool:
            return len(text.splitlines()[-1].rstrip()) >= columns - 2

        return self.wait_for(full_width, timeout_s=timeout_s,
                             what=f"the app drawn {columns} columns wide")

    def press(self, *keys: str, pause_ms: int = 150) -> None:
        for key in keys:
            self.page.keyboard.press(key)
            self.page.wait_for_timeout(pause_ms)

    def shot(self, name: str, folder: Path) -> Path:
        return screenshot(self.page, name, folder)


def screenshot(page: Any, name: str, folder: Path) -> Path:
    """Save a PNG of `page` for a person to look at: under $NAGLE_SIM_SCREENSHOTS when
    set, else `folder` (the test's tmp dir)."""
    where = Path(os.environ.get("NAGLE_SIM_SCREENSHOTS", folder))
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def open_student(browser: Any, url: str, *, width: int = 1280, height: int = 720,
                 context_options: dict[str, Any] | None = None, name: str = "") -> Student:
    """A student's own browser (a context of its own: its own local storage, so its own
    id) on the class link, joined with `name` (the page's nickname box; empty: none)."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  accept_downloads=True, **(context_options or {}))
    page = context.new_page()
    screen = Screen()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("websocket", lambda websocket: requests.append(websocket.url))
    page.on("websocket", screen.attach)
    page.goto(url)
    page.fill("#nickname", name)
    page.press("#nickname", "Enter")
    page.wait_for_selector(".join-dialog", state="hidden")
    student = Student(page, screen, requests)
    return student


def open_teacher(browser: Any, url: str, *, width: int = 1280, height: int = 720) -> Any:
    """The teacher's page in a browser of its own, once its socket has said hello."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  accept_downloads=True)
    page = context.new_page()
    page.goto(url)
    expect(page.locator("#lesson option")).not_to_have_count(0, timeout=WAIT_MS)
    return page
