"""One finished run as the TUI shows it: scenario, trace, ladder rows, bars and summary.

Owns the "what changed" sentence shown after a what-if toggle and the measured-Δ line of a
segment (matched by `nagle_sim.compare`, the matcher of ``nagle-sim compare``). Built off
the UI thread. Must not import textual, simpy or realnet.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..compare import Match, compare
from ..model.events import Micros
from ..scenario import Scenario
from ..trace import Outcome, SegmentRecord, Trace
from ..trace.rows import Bar, Row, RowKind, build_bars
from ..trace.summary import Stall, Summary, summarize
from ..trace.units import ms_text
from .rows import RowList, gc_paused, row_times


def fmt_ms(us: float) -> str:
    """44.0 ms, 0.041 ms: one decimal when it is readable, three below 1 ms."""
    return f"{ms_text(us, 1)} ms" if us >= 1000 else f"{ms_text(us)} ms"


@dataclass(frozen=True, slots=True)
class RunResult:
    scenario: Scenario
    trace: Trace
    rows: Sequence[Row]
    """A `RowList` when built here: rows are worded when first read."""
    bars: list[Bar]
    summary: Summary
    overrides: tuple[str, ...] = ()
    """The ``--set`` list this run was simulated with: the what-if variant it shows. Real
    runs and exports take their variant from here, never from the toggles' current state
    (which may already name a variant still being simulated)."""
    _bar_starts: list[int] = field(default_factory=list)
    _bar_reach: list[int] = field(default_factory=list)
    _stall_starts: list[int] = field(default_factory=list)

    @classmethod
    def build(cls, scenario: Scenario, trace: Trace, detail: str = "normal",
              overrides: tuple[str, ...] = ()) -> RunResult:
        """Rows at ``detail`` (trace.rows.DETAIL_LEVELS: wire, normal, all)."""
        with gc_paused():
            return cls._build(scenario, trace, detail, overrides)

    @classmethod
    def _build(cls, scenario: Scenario, trace: Trace, detail: str,
               overrides: tuple[str, ...]) -> RunResult:
        bars = sorted(build_bars(trace, detail), key=lambda b: b.start)
        reach: list[int] = []
        top = -1
        for bar in bars:
            top = max(top, bar.end)
            reach.append(top)
        summary = summarize(trace)
        rows = RowList(trace, detail)
        return cls(scenario, trace, rows, bars, summary, overrides,
                   [b.start for b in bars], reach, [s.start for s in summary.stalls])

    def bars_at(self, t: int) -> list[Bar]:
        """Bars covering time ``t`` (bisect, so stepping stays fast on huge traces)."""
        out: list[Bar] = []
        i = bisect.bisect_right(self._bar_starts, t) - 1
        while i >= 0 and self._bar_reach[i] > t:
            if self.bars[i].end > t:
                out.append(self.bars[i])
            i -= 1
        return out[::-1]

    def stall_at(self, t: int) -> Stall | None:
        i = bisect.bisect_right(self._stall_starts, t) - 1
        if i >= 0 and self.summary.stalls[i].end > t:
            return self.summary.stalls[i]
        return None

    @property
    def latency(self) -> Micros | None:
        """Median per-request (per-iteration) latency of the client, if it loops."""
        its = self.summary.iterations
        if not its:
            return None
        return Micros(int(statistics.median(i.latency for i in its)))

    @property
    def segment_count(self) -> int:
        return len(self.trace.segments)

    def headline(self) -> str:
        parts = []
        if self.latency is not None:
            parts.append(f"per-request latency {fmt_ms(self.latency)}")
        parts.append(f"segments {self.segment_count}")
        parts.append(f"stalls {len(self.summary.stalls)}")
        if self.trace.outcome is not Outcome.OK:
            parts.append(f"{self.trace.outcome}: {self.trace.message}")
        return ", ".join(parts)

    def stall_rows(self) -> list[tuple[int, Stall]]:
        """For each stall, the row that best shows what was held (cursor target)."""
        times = row_times(self.rows)
        out: list[tuple[int, Stall]] = []
        for stall in self.summary.stalls:
            lo = bisect.bisect_left(times, stall.start)
            hi = bisect.bisect_left(times, stall.end)
            if hi <= 0:
                continue
            pick = hi - 1
            for kinds in ((RowKind.HOLD,), (RowKind.ACK, RowKind.TIMER)):
                found = [i for i in range(lo, hi) if self.rows[i].kind in kinds]
                if found:
                    pick = found[-1]
                    break
            out.append((pick, stall))
        return out


def compare_text(before: RunResult, after: RunResult) -> str:
    """E.g. "per-request latency 44.0 ms → 0.041 ms, segments 57 → 37"."""
    parts = []
    if before.latency is not None and after.latency is not None:
        parts.append(f"per-request latency {fmt_ms(before.latency)} → {fmt_ms(after.latency)}")
    parts.append(f"segments {before.segment_count} → {after.segment_count}")
    b, a = len(before.summary.stalls), len(after.summary.stalls)
    if a != b:
        parts.append(f"stalls {b} → {a}")
    return ", ".join(parts)


def measured_twins(sim: Trace, real: Trace) -> dict[int, Match]:
    """Each simulated segment's row of the sim-vs-real comparison, keyed by ``id(segment)``
    (the segments of ``sim``, which the screen keeps while the overlay is shown)."""
    return {id(seg): m for m in compare(sim, real).matches for seg in m.sim}


def measured_delta(seg: SegmentRecord, match: Match | None) -> str:
    """Where the real twin of ``seg`` went out, and how far from the model, e.g.
    "measured at 44.120 ms (Δ +0.120 ms vs sim)"; a regrouped twin adds the matcher's note."""
    if match is None or match.real_t is None:
        return "measured: no matching segment on real sockets"
    delta = match.real_t - seg.t
    sign = "+" if delta >= 0 else "−"
    text = f"measured at {ms_text(match.real_t)} ms (Δ {sign}{fmt_ms(abs(delta))} vs sim)"
    return f"{text}: {match.note}" if match.kind != "match" and match.note else text
