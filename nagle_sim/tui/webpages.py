"""The HTML that `nagle-sim serve` sends to browsers, written here (not textual-serve's
template): the student page, the pages that refuse or turn a student away, and the page
an export (`e`) opens in the student's browser.

Owns: page text and the security headers that go with each page. Everything a page
loads comes from the serve host itself (textual-serve's bundled xterm.js, CSS and Roboto
Mono font under /static/), so a class's browsers contact nothing else. Must not import
textual, simpy, realnet or aiohttp (serve.py puts these strings into responses).
"""

from __future__ import annotations

import base64
import html

PAGE_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
"""The student page's Content-Security-Policy: the browser itself refuses anything from
another host (CSP 3's 'self' covers the page's own ws:// and wss:// socket)."""

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
"""

# Runs before textual.js creates its socket: remembers why the socket closed, so the
# "session ended" box can say it (the server closes with a reason: idle, class full,
# class ended), or that the page never got through.
_WATCH_SOCKET = """
(function () {
  const Native = window.WebSocket;
  function Watched(url, protocols) {
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    let opened = false;
    ws.addEventListener("open", function () { opened = true; });
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
<div class="dialog intro-dialog"><div class="box">{title}: starting your app…
<button type="button" id="start" onclick="location.reload()">Start</button></div></div>
<div class="dialog closed-dialog"><div class="box"><p>Session ended.</p>
<p id="closed-reason"></p>
<button type="button" onclick="location.reload()">Start again</button></div></div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{ws_url}"
 data-font-size="{font_size}"></div>
</body></html>
"""


def student_page(*, ws_url: str, font_size: int, title: str = "nagle-sim") -> str:
    """The page a student's browser opens: xterm.js connected to `ws_url`."""
    return STUDENT_PAGE.format(title=html.escape(title), icon=ICON, style=_STYLE,
                               watch=_WATCH_SOCKET, ws_url=html.escape(ws_url),
                               font_size=int(font_size))


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
