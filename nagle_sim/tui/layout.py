"""Ladder geometry: which screen line each trace row lands on, for a given time scale.

Owns the time axis of the ladder (compressed gaps or linear zoom) and the mapping
time <-> line in both directions. Pure Python: must not import textual, rich or simpy.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

ZOOM_LEVELS: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000)
"""Linear mode: µs of simulated time per screen line, finest first."""

MAX_GAP_LINES = 1_000
"""Linear mode never inserts more blank lines than this for one gap."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scale:
    compressed: bool = True
    """Compressed: a gap gets a few lines growing with log10 of its length."""
    zoom: int = 2
    """Index into `ZOOM_LEVELS` (linear mode only)."""
    row_height: int = 1
    """Lines per trace row (2 in projector mode)."""

    @property
    def us_per_line(self) -> int:
        return ZOOM_LEVELS[self.zoom]

    def describe(self) -> str:
        if self.compressed:
            return "compressed gaps"
        per = self.us_per_line
        return f"1 line = {per / 1000:g} ms" if per >= 1000 else f"1 line = {per} µs"


def gap_lines(gap: int, scale: Scale) -> int:
    """Blank lines drawn between two rows ``gap`` µs apart."""
    if gap <= 0:
        return 0
    if scale.compressed:
        if gap < 1_000:
            return 0
        return min(7, 1 + 2 * int(math.log10(gap / 1_000)))
    return min(MAX_GAP_LINES, gap // scale.us_per_line)


class LadderLayout:
    """Line positions of time-ordered rows. Every row gets its own line(s), gaps add more.

    ``extra``: times that are not rows but must not share a line with another time: the
    sends and arrivals of an overlay (a real run, the model over a capture). Inside a
    compressed gap they would all be interpolated onto its few lines, and a dozen measured
    segments drew as one arrow (issue 31.3); each gets a line of its own."""

    __slots__ = ("times", "row_y", "height", "scale", "anchor_t", "anchor_y")

    def __init__(self, times: Sequence[int], scale: Scale, extra: Sequence[int] = ()
                 ) -> None:
        self.times = list(times)
        self.scale = scale
        row_y: list[int] = []
        anchor_t: list[int] = []
        anchor_y: list[int] = []
        y = 0
        rh = scale.row_height
        prev: int | None = None
        extras = sorted(set(extra).difference(self.times)) if extra else []
        k = 0
        for t in self.times:
            while k < len(extras) and extras[k] < t:
                x = extras[k]
                k += 1
                if prev is not None:
                    y += gap_lines(x - prev, scale)
                anchor_t.append(x)
                anchor_y.append(y)
                y += rh
                prev = x
            if prev is not None and prev != t:
                y += gap_lines(t - prev, scale)
            row_y.append(y)
            anchor_t.append(t)
            anchor_y.append(y)
            y += rh
            prev = t
        for x in extras[k:]:
            if prev is not None:
                y += gap_lines(x - prev, scale)
            anchor_t.append(x)
            anchor_y.append(y)
            y += rh
            prev = x
        self.row_y = row_y
        self.anchor_t = anchor_t
        self.anchor_y = anchor_y
        self.height = y

    def __len__(self) -> int:
        return len(self.times)

    def row_at_line(self, y: int) -> int:
        """The row drawn on line ``y``, or the last row above it (gap lines)."""
        if not self.row_y:
            return -1
        return max(0, bisect.bisect_right(self.row_y, y) - 1)

    def line_of_time(self, t: int) -> int:
        """The line where time ``t`` falls (interpolated inside gaps)."""
        times, row_y = self.anchor_t, self.anchor_y
        if not times:
            return 0
        i = bisect.bisect_left(times, t)
        if i >= len(times):
            return row_y[-1]
        if times[i] == t or i == 0:
            return row_y[i]
        prev_end = row_y[i - 1] + self.scale.row_height
        gap = row_y[i] - prev_end
        if gap <= 0:
            return row_y[i]
        frac = (t - times[i - 1]) / (times[i] - times[i - 1])
        return min(row_y[i] - 1, prev_end + int(frac * gap))

    def time_of_line(self, y: int) -> int:
        """Simulated time at line ``y`` (interpolated inside gaps)."""
        times, ys = self.anchor_t, self.anchor_y
        if not ys:
            return 0
        i = max(0, bisect.bisect_right(ys, y) - 1)
        t0 = times[i]
        if i + 1 >= len(times):
            return t0
        start = ys[i] + self.scale.row_height
        gap = ys[i + 1] - start
        if y < start or gap <= 0:
            return t0
        return t0 + (times[i + 1] - t0) * (y - start + 1) // (gap + 1)
