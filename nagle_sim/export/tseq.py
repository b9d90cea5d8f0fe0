"""Time-sequence plot (Stevens / tcptrace style) as a `Scene`, for SVG or PNG.

Owns: the plot of one direction's data (relative sequence number vs time, one I-beam per
data segment), the ACK line of the other direction, stalls (from `summary.stalls`) shaded,
and the sender's hold bars / the receiver's delayed-ACK bars as strips under the data.
Time is linear (it is the point of this plot that stalls look long). Must not import
textual, simpy, asyncio or PIL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..model.events import Micros, Side
from ..trace import SegmentRecord, Trace
from ..trace.rows import build_bars
from ..trace.summary import stalls
from ..trace.units import ms_text
from . import scene as sc
from .scene import Line, Polyline, Rect, Scene, Text, text_width

PLOT_W = 1200
PLOT_H = 640
LEFT = 200
TOP = 110
STRIP_H = 14
TICK_SIZE = 17
LABEL_SIZE = 19


@dataclass(frozen=True, slots=True)
class TseqOptions:
    sender: Side = Side.CLIENT      # whose data is plotted; the ACK line is the peer's
    until: Micros | None = None
    title: str | None = None


def _nice_step(span: float, target: int = 8) -> float:
    raw = span / max(target, 1)
    if raw <= 0:
        return 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _ack_time(s: SegmentRecord) -> int:
    """When the sender saw this ACK: its arrival (send time if unknown)."""
    return s.arrive if s.arrive is not None else s.t


def _ack_points(segs: list[SegmentRecord], sender: Side, end: int) -> list[tuple[int, int]]:
    """(time, cumulative ACK) steps from the peer's segments, as the sender saw them."""
    steps: list[tuple[int, int]] = []
    best = -1
    for s in sorted((s for s in segs if s.src is sender.peer and s.has_ack),
                    key=_ack_time):
        t = _ack_time(s)
        if t > end:
            break
        if s.ack > best:
            best = s.ack
            steps.append((t, s.ack))
    return steps


@dataclass(frozen=True, slots=True)
class _Plot:
    """The plot's scales: time 0..``end`` µs across, sequence numbers
    ``bottom_seq``..``top_seq`` up."""

    end: int
    bottom_seq: int
    top_seq: int

    def x(self, t: float) -> float:
        return LEFT + t / self.end * PLOT_W

    def y(self, seq: float) -> float:
        return TOP + PLOT_H - (seq - self.bottom_seq) / max(self.top_seq - self.bottom_seq,
                                                            1) * PLOT_H


def build_tseq(trace: Trace, overlay: Trace | None = None,
               opts: TseqOptions | None = None) -> Scene:
    """The time-sequence plot of ``opts.sender``'s data in ``trace`` (``overlay`` dashed):
    the data and ACK points chosen and scaled, then drawn layer by layer (stalls, grid,
    hold/delayed-ACK strips, ACK lines and data I-beams, legend)."""
    opts = opts or TseqOptions()
    end = opts.until if opts.until is not None else max(
        trace.end, overlay.end if overlay else 0)
    end = max(end, 1)
    data = [s for s in trace.segments if s.src is opts.sender and s.is_data and s.t <= end]
    odata = [s for s in (overlay.segments if overlay else [])
             if s.src is opts.sender and s.is_data and s.t <= end]
    acks = _ack_points(trace.segments, opts.sender, end)
    oacks = _ack_points(overlay.segments, opts.sender, end) if overlay else []
    top_seq = max([s.seq + s.length for s in data + odata] + [a for _, a in acks + oacks]
                  + [1])
    bottom_seq = min([s.seq for s in data + odata] + [a for _, a in acks + oacks] + [0])
    top_seq += max(1, round((top_seq - bottom_seq) * 0.04))      # headroom for the last beam
    plot = _Plot(end, bottom_seq, top_seq)

    title = opts.title if opts.title is not None else (
        f"{trace.title or 'nagle-sim trace'}: {opts.sender.value} → "
        f"{opts.sender.peer.value} data")
    width = LEFT + PLOT_W + 60
    height = TOP + PLOT_H + 8 + 2 * (STRIP_H + 6) + 70 + 70
    scene = Scene(width=width, height=height, title=title)
    scene.add(Text(LEFT, 44, title, 28, sc.INK, bold=True))
    src = "real kernel" if trace.measured else "simulated"
    scene.add(Text(LEFT, 74, f"{src} · relative sequence number vs time · shaded: stalls "
                   "(no segment for ≥ 10 ms)", 17, sc.MUTED))
    _draw_stalls(scene, plot, trace)        # under everything
    _draw_grid(scene, plot, height)
    _draw_strips(scene, plot, trace, opts.sender)
    # ACK line(s) then data I-beams
    _ack_line(scene, acks, end, plot.x, plot.y,
              sc.SERVER if opts.sender is Side.CLIENT else sc.CLIENT, None)
    over_color, over_name = sc.overlay_look(overlay.measured if overlay else True)
    if overlay:
        _ack_line(scene, oacks, end, plot.x, plot.y, over_color, (8, 5))
    color = sc.CLIENT if opts.sender is Side.CLIENT else sc.SERVER
    for s in data:
        _ibeam(scene, plot.x(s.t), plot.y(s.seq), plot.y(s.seq + s.length), color, None)
    for s in odata:
        _ibeam(scene, plot.x(s.t) + 3, plot.y(s.seq), plot.y(s.seq + s.length), over_color,
               (4, 3))
    _draw_legend(scene, height, opts.sender, color,
                 (over_color, over_name) if overlay is not None else None)
    return scene


def _draw_stalls(scene: Scene, plot: _Plot, trace: Trace) -> None:
    """Each stall shaded across the plot, with its length where it fits."""
    for st in stalls(trace):
        if st.start > plot.end:
            continue
        x0, x1 = plot.x(st.start), plot.x(min(st.end, plot.end))
        scene.add(Rect(x0, TOP, max(x1 - x0, 1), PLOT_H, fill=sc.STALL_FILL, opacity=1.0))
        if x1 - x0 > text_width("00.0 ms", 15):
            scene.add(Text((x0 + x1) / 2, TOP + 20, f"{ms_text(st.duration, 1)} ms", 15,
                           sc.MUTED, anchor="middle"))


def _draw_grid(scene: Scene, plot: _Plot, height: float) -> None:
    """Axes, grid lines and ticks in round steps, the frame and the axis names."""
    x, y, end = plot.x, plot.y, plot.end
    t_step = _nice_step(end / 1000) * 1000
    t = 0.0
    while t <= end + 1e-9:
        scene.add(Line(x(t), TOP, x(t), TOP + PLOT_H, sc.GRID, 1.0),
                  Text(x(t), TOP + PLOT_H + 2 * (STRIP_H + 6) + 34, f"{t / 1000:g}",
                       TICK_SIZE, sc.INK, anchor="middle"))
        t += t_step
    s_step = max(1.0, _nice_step(plot.top_seq - plot.bottom_seq, 6))
    seq = math.ceil(plot.bottom_seq / s_step) * s_step
    while seq <= plot.top_seq:
        scene.add(Line(LEFT, y(seq), LEFT + PLOT_W, y(seq), sc.GRID, 1.0),
                  Text(LEFT - 10, y(seq) + TICK_SIZE * 0.35, f"{seq:g}", TICK_SIZE, sc.INK,
                       anchor="end"))
        seq += s_step
    scene.add(Rect(LEFT, TOP, PLOT_W, PLOT_H, stroke=sc.INK, width=2.0))
    scene.add(Text(LEFT + PLOT_W / 2, height - 70, "time (ms)", LABEL_SIZE, sc.INK,
                   anchor="middle"),
              Text(LEFT - 10, TOP - 14, "seq (bytes)", LABEL_SIZE, sc.INK, anchor="middle"))


def _draw_strips(scene: Scene, plot: _Plot, trace: Trace, sender: Side) -> None:
    """The sender's holds and the receiver's delayed ACKs, as strips under the plot."""
    strips_top = TOP + PLOT_H + 8
    names = (("hold", sender, sc.HOLD, f"{sender.value} holds data"),
             ("delack", sender.peer, sc.DELACK, f"{sender.peer.value} delays ACK"))
    bars = build_bars(trace)
    for i, (what, side, color, name) in enumerate(names):
        sy = strips_top + i * (STRIP_H + 6)
        scene.add(Text(LEFT - 10, sy + STRIP_H, name, 16, color, anchor="end"))
        scene.add(Rect(LEFT, sy, PLOT_W, STRIP_H, stroke=sc.GRID, width=1.0))
        for b in bars:
            if b.what == what and b.side is side and b.start <= plot.end:
                x0, x1 = plot.x(b.start), plot.x(min(b.end, plot.end))
                scene.add(Rect(x0, sy, max(x1 - x0, 1.5), STRIP_H, fill=color, opacity=0.85))


def _draw_legend(scene: Scene, height: float, sender: Side, color: str,
                 overlaid: tuple[str, str] | None) -> None:
    """``overlaid``: the overlay's colour and name (`scene.overlay_look`)."""
    ly = height - 30
    items: list[tuple[str, tuple[float, float] | None, str]] = [
        (color, None, f"{sender.value} data segment (seq..seq+len)"),
        (sc.SERVER if sender is Side.CLIENT else sc.CLIENT, None,
         f"{sender.peer.value}'s cumulative ACK")]
    if overlaid is not None:
        items.append((overlaid[0], (8.0, 5.0), f"dashed: {overlaid[1]} (overlay)"))
    lx = float(LEFT)
    for c, dash, text in items:
        scene.add(Line(lx, ly - 6, lx + 36, ly - 6, c, 3.0, dash=dash),
                  Text(lx + 46, ly, text, 17, sc.INK))
        lx += 46 + text_width(text, 17) + 36


def _ack_line(scene: Scene, acks: list[tuple[int, int]], end: int,
              x: Callable[[float], float], y: Callable[[float], float], color: str,
              dash: tuple[float, float] | None) -> None:
    if not acks:
        return
    pts: list[tuple[float, float]] = []
    for (t, a), nxt in zip(acks, acks[1:] + [(end, acks[-1][1])], strict=True):
        pts += [(x(t), y(a)), (x(nxt[0]), y(a))]
    scene.add(Polyline(tuple(pts), color, 2.5, dash=dash))


def _ibeam(scene: Scene, x: float, y0: float, y1: float, color: str,
           dash: tuple[float, float] | None) -> None:
    if abs(y0 - y1) < 4:           # keep tiny segments visible
        y1 = y0 - 4
    scene.add(Line(x, y0, x, y1, color, 3.0, dash=dash),
              Line(x - 5, y0, x + 5, y0, color, 2.0),
              Line(x - 5, y1, x + 5, y1, color, 2.0))
