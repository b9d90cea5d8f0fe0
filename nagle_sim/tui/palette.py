"""The app's colours and legend: the same meaning per colour as the SVG/PNG exports.

The exports (nagle_sim/export/scene.py) draw on white: client data blue, server data
green, held data red, delayed-ACK timer purple, probe timer amber, the real-socket overlay
orange and dashed. The app draws on a dark terminal, so it uses lighter shades of the same
hues. Must not import textual, simpy or realnet (rich only, for the legend's text).
"""

from __future__ import annotations

from rich.text import Text

CLIENT = "#6b9bff"
SERVER = "#3cc47c"
HOLD = "#ff5a6e"
DELACK = "#b68cff"
PROBE = "#e0a93a"
OVERLAY = "#ff9330"
GHOST = "#80868f"
"""Fainter than every other mark yet 4:1 on the dark surface (WCAG asks 3:1 of graphics)."""
GAP = "#e0a93a"

LEGEND: tuple[tuple[str, str, str], ...] = (
    ("──▶", f"bold {CLIENT}", "client data segment (blue in exports)"),
    ("──▶", CLIENT, "client pure ACK (thin in exports)"),
    ("◀──", f"bold {SERVER}", "server data segment (green)"),
    ("◀──", SERVER, "server pure ACK"),
    ("┃", f"bold {HOLD}", "data held back: Nagle, cork, MSG_MORE, cwnd (red bar)"),
    ("┃", f"bold {DELACK}", "delayed ACK: its timer running (purple bar) and its rows"),
    ("┃", PROBE, "probe / retransmission timer: bar and rows (amber)"),
    ("──┈", CLIENT, "a segment sent while many others travel: drawn as a send stub…"),
    ("──▶", CLIENT, "…then its arrival stub: \"… arrives\" (several: \"…:2401,3601\")"),
    ("…:2401 ●", CLIENT, "a segment's label beside its sender's axis (the wire row is full)"),
    ("┄┄▶", OVERLAY, "measured on real sockets (orange, dashed)"),
    ("──▶", GHOST, "the previous run, before your last what-if (ghost)"),
    ("◆ ◇", "bold", "the application writes / reads"),
    ("→ mode", "italic dim", "grey italic: a mode, state or option change (a note)"),
    ("+44.0ms", f"italic {GAP}", "a silent gap, compressed (z: linear time)"),
    ("? …", f"italic {GAP}", "the run goes on after the pending question"),
)
"""(sample, rich style, meaning) for every mark the ladder draws."""


def legend_text() -> Text:
    text = Text()
    for i, (sample, style, meaning) in enumerate(LEGEND):
        if i:
            text.append("\n")
        text.append(f"{sample:>8}", style=style)
        text.append(f"  {meaning}")
    return text


def ladder_css() -> str:
    """Component-class colours of the ladder, from the palette above."""
    return f"""
        & > .ladder--client {{ color: {CLIENT}; text-style: bold; }}
        & > .ladder--server {{ color: {SERVER}; text-style: bold; }}
        & > .ladder--client-ack {{ color: {CLIENT}; }}
        & > .ladder--server-ack {{ color: {SERVER}; }}
        & > .ladder--held {{ color: {HOLD}; text-style: bold; }}
        & > .ladder--delack {{ color: {DELACK}; text-style: bold; }}
        & > .ladder--timer {{ color: {PROBE}; }}
        & > .ladder--measured {{ color: {OVERLAY}; }}
        & > .ladder--ghost {{ color: {GHOST}; }}
        & > .ladder--gap {{ color: {GAP}; text-style: italic; }}
    """
