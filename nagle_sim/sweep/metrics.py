"""What a sweep measures: the documented metric set (docs/sweep.md), read from any trace.

Owns: `METRICS` (name, description, how it is computed from a `Trace`: per-iteration
latency percentiles, segment counts, the share of writes sent alone as S5 counted, stalls),
`parse_metrics` (``--metric``) and `measure`. A metric read from the segments is unknown
(None), never a false 0, for a real run that captured none. Must not import textual,
simpy, realnet or an executor.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..model.events import Side
from ..trace import Trace
from ..trace.summary import iterations, stalls, wire_unknown, write_spans
from .grid import SweepError


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    doc: str
    compute: Callable[[Trace], float | None]


def _latencies(trace: Trace) -> list[float]:
    return [it.latency / 1000 for it in iterations(trace, Side.CLIENT)]


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: every reported value happened)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _data_segments(trace: Trace, side: Side) -> int:
    return sum(1 for s in trace.segments if s.src is side and s.length)


def writes_alone(trace: Trace, side: Side = Side.CLIENT) -> tuple[int, int]:
    """(writes that left as their own segments, writes), by `summary.write_spans`'s rule:
    no segment carrying any of a write's bytes also carried another write's."""
    spans = write_spans(trace, side)
    return sum(1 for w in spans if w.alone), len(spans)


def _writes_alone_pct(trace: Trace) -> float | None:
    alone, total = writes_alone(trace)
    return 100 * alone / total if total else None


def _stall_list(trace: Trace) -> list[float]:
    return [s.duration / 1000 for s in stalls(trace)]


def _on_wire(compute: Callable[[Trace], float | None]) -> Callable[[Trace], float | None]:
    """A metric read from the segments: unknown (None, shown "–") for a real run that
    captured none, never a false 0."""
    def metric(trace: Trace) -> float | None:
        return None if wire_unknown(trace) is not None else compute(trace)
    return metric


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("latency_p50_ms", "median per-iteration latency of the client's first loop (ms)",
           lambda t: _percentile(_latencies(t), 50)),
    Metric("latency_p99_ms", "99th percentile (nearest rank) of the client's per-iteration "
           "latency (ms)", lambda t: _percentile(_latencies(t), 99)),
    Metric("latency_mean_ms", "mean per-iteration latency of the client's first loop (ms)",
           lambda t: _mean(_latencies(t))),
    Metric("duration_ms", "time from the client's SYN to the last segment or call (ms)",
           lambda t: t.end / 1000),
    Metric("segments_client", "segments the client sent (handshake, data, ACKs, FIN)",
           _on_wire(lambda t: sum(1 for s in t.segments if s.src is Side.CLIENT))),
    Metric("segments_server", "segments the server sent",
           _on_wire(lambda t: sum(1 for s in t.segments if s.src is Side.SERVER))),
    Metric("data_segments_client", "client segments that carried data",
           _on_wire(lambda t: _data_segments(t, Side.CLIENT))),
    Metric("writes_alone_pct", "share of client writes whose bytes left in segments of "
           "their own, not coalesced with another write (%), as S5 counted",
           _on_wire(_writes_alone_pct)),
    Metric("stalls", "gaps of 10 ms or more with nothing on the wire that no application "
           "sleep explains", _on_wire(lambda t: len(_stall_list(t)))),
    Metric("stall_ms", "the stalls' total length (ms)",
           _on_wire(lambda t: float(sum(_stall_list(t))))),
)}

DEFAULT_METRICS = ("latency_p50_ms", "segments_client", "stalls")


def parse_metrics(names: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for raw in names:
        for name in (n.strip() for n in raw.split(",")):
            if name not in METRICS:
                raise SweepError(f"--metric {name!r}: unknown metric (known: "
                                 f"{', '.join(METRICS)})")
            if name not in out:
                out.append(name)
    return tuple(out) or DEFAULT_METRICS


def measure(trace: Trace, metrics: Sequence[str]) -> dict[str, float | None]:
    return {name: METRICS[name].compute(trace) for name in metrics}
