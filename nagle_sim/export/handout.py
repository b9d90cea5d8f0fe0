"""The cheat sheet as a printable page: `handout_html` (``nagle-sim handout``).

Owns the page: Markdown (CommonMark with tables, by markdown-it-py) in one self-contained
HTML file with print styles, so a teacher opens it in any browser and prints it; nothing
is fetched from anywhere (no fonts, scripts or images from outside). Must not import the
model, the simulator, realnet or the app.
"""

from __future__ import annotations

import html

from markdown_it import MarkdownIt

STYLE = """
@page { size: A4; margin: 14mm 12mm; }
html { font: 10.5pt/1.35 "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #111; }
body { max-width: 190mm; margin: 1.5em auto; padding: 0 1em; }
h1 { font-size: 17pt; margin: 0 0 .3em; }
h2 { font-size: 12.5pt; margin: 1.1em 0 .35em; border-bottom: 1px solid #888;
     break-after: avoid; }
p, li { margin: .25em 0; }
table { border-collapse: collapse; width: 100%; margin: .4em 0; break-inside: avoid; }
th, td { border: 1px solid #999; padding: .2em .4em; vertical-align: top; text-align: left; }
th { background: #eee; }
code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 92%; }
footer { margin-top: 1.5em; font-size: 8.5pt; color: #444; }
@media print { body { margin: 0; max-width: none; } }
"""


def handout_html(markdown: str, *, title: str = "nagle-sim cheat sheet",
                 footer: str = "") -> str:
    """One printable HTML page of ``markdown`` (raw HTML in it is shown as text)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    body = md.render(markdown)
    foot = f"<footer>{html.escape(footer)}</footer>" if footer else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
            f"<body>{body}{foot}</body></html>\n")
