"""The HTML that `nagle-sim serve` sends to browsers, written here (not textual-serve's
template): the student page (with its nickname box), the teacher's page (its script and
style are files beside this module, in ``web/``), the pages that refuse or turn a student
away, and the page an export (`e`) opens in the student's browser.

Owns: page text and the security headers that go with each page. Everything a page
loads comes from the serve host itself (textual-serve's bundled xterm.js, CSS and Roboto
Mono font under /static/), so a class's browsers contact nothing else. Must not import
textual, simpy, realnet or aiohttp (serve.py puts these strings into responses).
"""

from __future__ import annotations

import base64
import functools
import html
from importlib import resources

PAGE_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
"""The student page's Content-Security-Policy: the browser itself refuses anything from
another host (CSP 3's 'self' covers the page's own ws:// and wss:// socket)."""

TEACHER_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; base-uri 'none'; form-action 'none'; "
               "frame-ancestors 'none'")
"""The teacher's page runs no inline script or style at all: its one script and style
sheet are files of this server, and everything students typed (nicknames) is put into
the page as text by that script, never as HTML."""

DOWNLOAD_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                "sandbox allow-downloads")
"""Every file a session delivers is served under this policy: an export page shows its
picture and offers its files as links, and runs no script whatever is in it."""

ICON = ("data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'"
        "%3E%3Crect width='16' height='16' rx='3' fill='%2312232d'/%3E%3Cpath d='M4 3v10M12 "
        "3v10M4 6l8 3' stroke='%23f0c040' stroke-width='1.6' fill='none'/%3E%3C/svg%3E")
"""A tiny ladder (two axes and a segment) as the tab icon, inline: no /favicon.ico fetch."""

_STYLE = """
@font-face { font-family: "Roboto Mono"; font-display: block;
  src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf") format("truetype"); }
body { background: #0c181f; margin: 0; color: #eee; font-family: "Roboto Mono", monospace; }
.dialog { position: absolute; inset: 0; display: flex; align-items: center;
  justify-content: center; z-index: 10; background: #0c181f; }
.dialog .box { max-width: 40em; padding: 2em 2.5em; background: #12232d;
  font-size: 16px; line-height: 1.5; text-align: center; }
.dialog button { padding: 0.8em 2em; margin-top: 1em; background: #5e0ba7; color: #fff;
  border: none; font: inherit; cursor: pointer; }
.dialog button:hover { background: #ac5af4; }
body.-first-byte .intro-dialog { display: none; }
.closed-dialog { display: none; }
body.-closed .closed-dialog { display: flex; }
body.-closed .intro-dialog { display: none; }
.textual-terminal { opacity: 0; }
body.-first-byte .textual-terminal { opacity: 1; }
#start { display: none; }
#terminal { position: absolute; inset: 0; }
.join-dialog { z-index: 20; }
body.-joined .join-dialog { display: none; }
.join-dialog label { display: block; margin: 0.5em 0; }
.join-dialog input { font: inherit; font-size: 22px; padding: 0.3em 0.5em; width: 14em;
  background: #0c181f; color: #fff; border: 2px solid #5e0ba7; }
.join-dialog .lead { font-size: 24px; font-weight: bold; margin: 0 0 0.5em; }
.join-dialog .small { font-size: 14px; color: #aab; }
.notice { position: fixed; top: 12px; left: 50%; transform: translateX(-50%); z-index: 30;
  max-width: 44em; padding: 0.7em 1.2em; background: #f0c040; color: #000; font-size: 18px;
  font-weight: bold; border-radius: 4px; box-shadow: 0 2px 12px #000; }
.notice[hidden] { display: none; }
"""

# Runs before textual.js creates its socket: adds this browser's own id to the socket's
# address (kept in local storage, so a reload is the same student, with the same votes),
# sends the nickname once the socket is open, and remembers why the socket closed, so
# the "session ended" box can say it (the server closes with a reason: idle, class full,
# class ended), or that the page never got through.
_WATCH_SOCKET = """
(function () {
  const PASTE_LIMIT = PASTE_LIMIT_CHARACTERS;
  const Native = window.WebSocket;
  let appSocket = null;
  let pendingName = null;
  function browserId() {
    let id = null;
    try { id = window.localStorage.getItem("nagle-sim-student"); } catch (e) { id = null; }
    if (!id || !/^[A-Za-z0-9_-]{16,64}$/.test(id)) {
      const bytes = new Uint8Array(16);
      window.crypto.getRandomValues(bytes);
      id = Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); })
        .join("");
      try { window.localStorage.setItem("nagle-sim-student", id); } catch (e) { /* private */ }
    }
    return id;
  }
  function sendName() {
    if (appSocket && appSocket.readyState === Native.OPEN && pendingName !== null) {
      appSocket.send(JSON.stringify(["name", pendingName]));
      pendingName = null;
    }
  }
  window.nagleJoin = function (name) { pendingName = name; sendName(); };
  // Typed text has a size limit (serve's STDIN_LIMIT): a longer paste is stopped here,
  // before the terminal turns it into one huge message, and said once, in the page.
  let noticeTimer = null;
  function notice(text) {
    const box = document.getElementById("notice");
    if (!box) { return; }
    box.textContent = String(text).slice(0, 300);
    box.hidden = false;
    window.clearTimeout(noticeTimer);
    noticeTimer = window.setTimeout(function () { box.hidden = true; }, 10000);
  }
  function tooLong(length) {
    const size = length >= 1048576 ? (length / 1048576).toFixed(1) + " MB" :
      Math.floor(length / 1024) + " KB";
    notice("Not pasted: that text is " + size + ", and the app takes at most " +
      Math.round(PASTE_LIMIT / 1024) + " KB at once. Nothing of it was typed.");
  }
  window.addEventListener("paste", function (event) {
    if (event.target && event.target.id === "nickname") { return; }
    const data = event.clipboardData ? event.clipboardData.getData("text/plain") : "";
    if (data.length > PASTE_LIMIT) {
      event.preventDefault();
      event.stopImmediatePropagation();
      tooLong(data.length);
    }
  }, true);
  function Watched(url, protocols) {
    if (appSocket === null) {
      url = url + (url.indexOf("?") < 0 ? "?" : "&") + "student=" + browserId();
    }
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    if (appSocket === null) {
      appSocket = ws;
      const send = ws.send.bind(ws);
      ws.send = function (data) {  // what gets past the paste check (a drop, say)
        if (typeof data === "string" && data.length > PASTE_LIMIT + 64 &&
            data.startsWith('["stdin"')) { tooLong(data.length); return; }
        return send(data);
      };
      ws.addEventListener("message", function (event) {
        if (typeof event.data !== "string" || !event.data.startsWith('["notice"')) {
          return;
        }
        try { notice(JSON.parse(event.data)[1]); } catch (e) { /* not ours */ }
      });
    }
    let opened = false;
    ws.addEventListener("open", function () { opened = true; sendName(); });
    ws.addEventListener("close", function (event) {
      const reason = document.getElementById("closed-reason");
      if (!reason) { return; }
      if (event.reason) {
        reason.textContent = "The class server says: " + event.reason + ".";
      } else if (!opened) {
        reason.textContent = "This page could not join the class: the server refused " +
          "it or is not running. Check that the link is the teacher's current one.";
      } else {
        reason.textContent = "The connection to the class was lost (the teacher's " +
          "server stopped, or the network dropped).";
      }
    });
    return ws;
  }
  Watched.prototype = Native.prototype;
  for (const key of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) { Watched[key] = Native[key]; }
  window.WebSocket = Watched;
})();
"""

STUDENT_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="{icon}">
<link rel="preload" href="/static/fonts/RobotoMono-VariableFont_wght.ttf" as="font"
 type="font/ttf" crossorigin>
<link rel="stylesheet" href="/static/css/xterm.css">
<style>{style}</style>
<script>{watch}</script>
<script src="/static/js/textual.js"></script>
</head>
<body>
<div class="dialog join-dialog"><form class="box" id="join">
<p class="lead">{title} class</p>
<label for="nickname">Your name for the class</label>
<input id="nickname" name="nickname" maxlength="24" autocomplete="nickname" autofocus
 spellcheck="false" placeholder="optional">
<p class="small">Your teacher sees it next to where you are in the lesson (not your
votes). Leave it empty to stay anonymous.</p>
<button type="submit">Join</button>
</form></div>
<div class="dialog intro-dialog"><div class="box">{title}: starting your app…
<button type="button" id="start" onclick="location.reload()">Start</button></div></div>
<div class="dialog closed-dialog"><div class="box"><p>Session ended.</p>
<p id="closed-reason"></p>
<button type="button" onclick="location.reload()">Start again</button></div></div>
<div id="notice" class="notice" role="alert" hidden></div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{ws_url}"
 data-font-size="{font_size}"></div>
<script>{join}</script>
</body></html>
"""

# The nickname box: the app starts behind it at once (the socket opens on page load);
# Join sends the name (remembered for the next visit) and hands the keys to the terminal.
_JOIN = """
(function () {
  const form = document.getElementById("join");
  const input = document.getElementById("nickname");
  try { input.value = window.localStorage.getItem("nagle-sim-name") || ""; } catch (e) { }
  input.focus();
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const name = input.value.trim().slice(0, 24);
    try { window.localStorage.setItem("nagle-sim-name", name); } catch (e) { }
    window.nagleJoin(name);
    document.body.classList.add("-joined");
    const keys = document.querySelector(".xterm-helper-textarea");
    if (keys) { keys.focus(); }
  });
})();
"""


def student_page(*, ws_url: str, font_size: int, title: str = "nagle-sim",
                 paste_limit: int = 64 * 1024 - 64) -> str:
    """The page a student's browser opens: xterm.js connected to `ws_url`; a paste of
    more than `paste_limit` characters is refused in the page, with a notice."""
    watch = _WATCH_SOCKET.replace("PASTE_LIMIT_CHARACTERS", str(int(paste_limit)))
    return STUDENT_PAGE.format(title=html.escape(title), icon=ICON, style=_STYLE,
                               watch=watch, ws_url=html.escape(ws_url),
                               font_size=int(font_size), join=_JOIN)


TEACHER_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nagle-sim: the class</title>
<link rel="icon" href="{icon}">
<link rel="stylesheet" href="/teacher/teacher.css">
<script src="/teacher/teacher.js" defer></script>
</head>
<body>
<header>
  <div class="brand">nagle-sim class</div>
  <div class="count"><span id="count">0</span> <span id="count-word">students</span></div>
  <div class="join"><img id="qr" alt="QR code of the class link">
    <div><div class="small">Students join at</div><div id="class-link" class="link"></div></div>
  </div>
</header>
<div id="banner" class="banner" hidden></div>
<main>
  <section id="stage" aria-live="polite">
    <div id="lesson-title" class="lesson-title">No lesson is led yet</div>
    <div id="prompt" class="prompt">Open a lesson for everyone, then move the class to a
      question.</div>
    <div id="phase-line" class="phase-line"></div>
    <div id="chart" class="chart"></div>
  </section>
  <aside id="side">
    <div class="tabs"><button type="button" id="tab-students" class="on">Students</button>
      <button type="button" id="tab-results">Results</button></div>
    <ol id="roster"></ol>
    <div id="results" hidden>
      <table><thead><tr><th>#</th><th>question</th><th>vote 1</th><th>vote 2</th></tr>
      </thead><tbody id="results-body"></tbody></table>
      <p class="exports">Download: <a id="csv" href="#">CSV</a> · <a id="md" href="#">Markdown</a>
        <label><input type="checkbox" id="names"> with nicknames</label></p>
    </div>
  </aside>
</main>
<footer id="controls">
  <div class="row">
    <label for="lesson">Lesson</label> <select id="lesson"></select>
    <button type="button" id="open">Open for everyone</button>
    <span id="questions" class="questions"></span>
    <button type="button" id="free">Let everyone go on alone</button>
  </div>
  <div class="row phases">
    <button type="button" data-phase="vote">1 Vote</button>
    <button type="button" data-phase="show">2 Show</button>
    <button type="button" data-phase="discuss">3 Discuss</button>
    <button type="button" data-phase="revote">4 Re-vote</button>
    <button type="button" data-phase="reveal">5 Reveal</button>
    <button type="button" data-phase="play">6 Play on</button>
    <button type="button" id="next" class="primary">Next ▶</button>
    <button type="button" id="hide-names">Hide names</button>
  </div>
</footer>
</body></html>
"""


def teacher_page() -> str:
    """The teacher's page: a skeleton its script fills from the teacher socket."""
    return TEACHER_PAGE.format(icon=ICON)


@functools.cache
def teacher_file(name: str) -> str:
    """``teacher.js`` or ``teacher.css`` (files of this package, in ``web/``)."""
    if name not in ("teacher.js", "teacher.css"):
        raise KeyError(name)
    return resources.files(__package__).joinpath("web", name).read_text("utf-8")


def not_teacher_page() -> str:
    return _plain_page("nagle-sim: not the teacher's link", (
        "<h1>This is not the teacher's link</h1><p>The teacher's page needs the teacher's "
        "own key (<code>/teacher?key=…</code>), printed by <code>nagle-sim serve</code> "
        "when it starts. The class link (with <code>?token=</code>) is for students and "
        "does not open it.</p>"))


def _plain_page(title: str, body: str, *, refresh_s: int | None = None) -> str:
    refresh = (f'<meta http-equiv="refresh" content="{refresh_s}">'
               if refresh_s is not None else "")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<title>{html.escape(title)}</title><link rel="icon" href="{ICON}">{refresh}'
            '</head><body style="font-family: sans-serif; background: #12232d; color: #eee;'
            f' padding: 3em; font-size: 20px; line-height: 1.5">{body}</body></html>')


def full_page(limit: int) -> str:
    return _plain_page("nagle-sim: class is full", (
        f"<h1>The class is full</h1><p>All {int(limit)} places of this nagle-sim class "
        "are taken. This page tries again every 20 seconds; a place frees up when someone "
        "closes their tab.</p>"), refresh_s=20)


def no_token_page() -> str:
    return _plain_page("nagle-sim: ask for the link", (
        "<h1>Ask your teacher for the link</h1><p>This nagle-sim class needs the full "
        "address, including its <code>?token=</code> part.</p>"))


def wrong_token_page() -> str:
    return _plain_page("nagle-sim: this link is not the class's", (
        "<h1>This link is not the class's current one</h1><p>The address has a class key "
        "(<code>?token=…</code>), but not this class's. The teacher gets a new key each "
        "time the class is started: ask for the current link, or check that it was "
        "copied whole.</p>"))


def foreign_page(names: list[str]) -> str:
    listed = ", ".join(f"<code>{html.escape(n)}</code>" for n in names)
    return _plain_page("nagle-sim: refused", (
        "<h1>Refused</h1><p>This nagle-sim class only answers pages it served itself, "
        f"under the names it listens on ({listed}). Open the teacher's link directly "
        "rather than through another site or name.</p>"))


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


PREVIEW_LIMIT = 4 << 20
"""An export's picture is shown in its page up to this size; a bigger one (a run of
thousands of segments) is only offered as a file, so the page stays quick to open."""


def export_page(stem: str, files: list[tuple[str, bytes, str]]) -> str:
    """The page `e` opens in a classroom: the ladder picture (any SVG among `files`)
    and one download link per file (name, bytes, MIME type). One page rather than one
    automatic download per file: a browser lets a page start one download by itself and
    blocks the next, while links the student clicks always work."""
    items = []
    preview = ""
    for name, data, mime in files:
        uri = _data_uri(mime, data)
        kind = ("the ladder picture (SVG: opens in any browser, drops into slides)"
                if mime == "image/svg+xml" else
                "the capture (pcap: opens in Wireshark or tshark)"
                if "pcap" in mime else mime)
        items.append(f'<li><a download="{html.escape(name)}" href="{uri}">'
                     f"{html.escape(name)}</a> — {html.escape(kind)}, "
                     f"{len(data):,} bytes</li>")
        if mime == "image/svg+xml" and not preview and len(data) <= PREVIEW_LIMIT:
            preview = (f'<p><img alt="the ladder of this run" src="{uri}" '
                       'style="max-width: 100%; background: #fff"></p>')
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>nagle-sim export: {html.escape(stem)}</title>"
            f'<link rel="icon" href="{ICON}"></head>'
            '<body style="font-family: sans-serif; margin: 2em; font-size: 18px">'
            f"<h1>{html.escape(stem)}</h1><p>Your export. Save each file with its link "
            f"(nothing was saved on the class server):</p><ul>{''.join(items)}</ul>"
            f"{preview}</body></html>")
