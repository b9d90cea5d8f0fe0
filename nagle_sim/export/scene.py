"""A tiny vector scene: the drawing that both the SVG and the PNG writers render.

Owns: the drawing primitives (line, arrow, rectangle, text, polyline), colours, font sizes
and the text-width estimate used for layout. Layout never asks a real font for metrics, so
a picture has the same size and placement whichever fonts a machine has (the PNG test
relies on that). Standard library only (and the error root): must not import textual,
simpy, asyncio or PIL.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ..errors import UserError

Anchor = Literal["start", "middle", "end"]

# High-contrast palette (readable projected, distinguishable for common colour blindness).
INK = "#111111"
MUTED = "#555555"
GRID = "#d0d0d0"
CLIENT = "#1549b8"        # segments sent by the client
SERVER = "#0a6b35"        # segments sent by the server
OVERLAY = "#e06000"       # an overlay measured on a kernel (real sockets), dashed
MODEL_OVERLAY = "#6b6b6b"  # the model's run drawn over a measured one (explain), dashed
HOLD = "#c0162b"          # data held back (Nagle, cork, MSG_MORE, cwnd...)
DELACK = "#7a2fd0"        # delayed-ACK timer running
PROBE = "#8a5a00"         # probe0 timer (what releases cork / MSG_MORE data)
STALL_FILL = "#ececec"



def overlay_look(measured: bool) -> tuple[str, str]:
    """An overlay's colour and name, one vocabulary for every picture and the app: orange
    is always the kernel (measured), grey the model (issue 31.7: explain drew the model in
    orange and called it "overlay", where everywhere else orange meant the kernel)."""
    return (OVERLAY, "kernel") if measured else (MODEL_OVERLAY, "model")


def trace_name(measured: bool, captured: bool = False) -> str:
    """What a trace is called in a legend: "model", "kernel" (real sockets) or "capture"
    (the caller asks the trace: `Trace.measured`, and whether its source is a capture)."""
    if captured:
        return "capture"
    return "kernel" if measured else "model"


FONT_FAMILY = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
MONO_FAMILY = "DejaVu Sans Mono, Consolas, Menlo, monospace"


MAX_LABEL = 120
"""Longest text drawn in a picture (characters); longer labels end in an ellipsis, so a
hostile trace label cannot widen a picture without bound."""


class SceneTooBig(UserError, ValueError):
    """A picture over its documented size bound; ``str(err)`` is a one-line message."""


def fit(text: str) -> str:
    """``text`` cut to `MAX_LABEL` characters (the last one an ellipsis when cut)."""
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def text_width(text: str, size: float, mono: bool = False, bold: bool = False) -> float:
    """A generous estimate of the rendered width of ``text`` as drawn (after `fit`),
    with DejaVu-like metrics."""
    return min(len(text), MAX_LABEL) * size * (0.61 if mono else 0.66 if bold else 0.58)


@dataclass(frozen=True, slots=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    color: str = INK
    width: float = 2.0
    dash: tuple[float, float] | None = None
    arrow: bool = False              # arrowhead at (x2, y2)


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str | None = None
    stroke: str | None = None
    width: float = 1.0
    opacity: float = 1.0             # of the fill


@dataclass(frozen=True, slots=True)
class Text:
    x: float
    y: float                         # baseline
    text: str
    size: float = 20.0
    color: str = INK
    anchor: Anchor = "start"
    bold: bool = False
    italic: bool = False
    mono: bool = False
    halo: bool = False               # white outline so the text stays legible over lines


@dataclass(frozen=True, slots=True)
class Polyline:
    points: tuple[tuple[float, float], ...]
    color: str = INK
    width: float = 2.0
    dash: tuple[float, float] | None = None


Item = Line | Rect | Text | Polyline


@dataclass(slots=True)
class Scene:
    width: int
    height: int
    title: str = ""
    background: str = "#ffffff"
    items: list[Item] = field(default_factory=list)

    def add(self, *items: Item) -> None:
        """Append ``items``; text longer than `MAX_LABEL` is cut (see `fit`)."""
        self.items.extend(replace(i, text=fit(i.text))
                          if isinstance(i, Text) and len(i.text) > MAX_LABEL else i
                          for i in items)


def arrowhead(line: Line, length: float = 16.0, half: float = 6.5) -> tuple[tuple[float, float],
                                                                            ...]:
    """The triangle (tip first) of the arrowhead at ``line``'s end."""
    dx, dy = line.x2 - line.x1, line.y2 - line.y1
    norm = (dx * dx + dy * dy) ** 0.5 or 1.0
    ux, uy = dx / norm, dy / norm
    bx, by = line.x2 - ux * length, line.y2 - uy * length
    return ((line.x2, line.y2), (bx - uy * half, by + ux * half), (bx + uy * half, by - ux * half))


def shortened(line: Line, by: float) -> tuple[float, float]:
    """The end point of ``line`` pulled back by ``by`` (so a thick shaft ends inside the head)."""
    dx, dy = line.x2 - line.x1, line.y2 - line.y1
    norm = (dx * dx + dy * dy) ** 0.5 or 1.0
    return line.x2 - dx / norm * by, line.y2 - dy / norm * by
