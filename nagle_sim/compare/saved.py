"""Saved traces for ``compare``: a real or model trace from a file, checked before use.

Owns: refusing what a comparison cannot use — the wrong source on each side (`load_real`,
`load_model`), meta the comparison reads but that a hand-edited or foreign file got wrong
(`check_meta`), a run of another scenario (`check_same_scenario`, `check_same_title`) —
each as one `TraceError` line naming the file and the field.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from ..model.events import Side
from ..scenario.steps import HANDSHAKE_OPS, steps
from ..trace import Source, Trace, TraceError

MAX_DELAY_US = 60_000_000
"""Longest one-way delay or round trip (µs) a saved trace's clock estimate may carry."""

_FACT_TYPES: dict[str, tuple[type, ...]] = {
    "kernel": (str,), "system": (str,), "hz": (int,), "hz_source": (str,),
    "tcp_pingpong_thresh": (int,), "tcp_autocorking": (int,), "tcp_rmem": (list,),
    "tcp_wmem": (list,), "congestion_default": (str,), "congestion_allowed": (list,),
    "interface": (str,), "offloads": (dict,), "congestion": (dict,),
    "congestion_notes": (dict,)}

def _bad(where: str, key: str, value: Any, want: str) -> TraceError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return TraceError(f"{where}: meta.{key}: expected {want}, got {shown}")

def check_meta(trace: Trace, where: str) -> None:
    """Refuse a saved trace whose meta the comparison reads but cannot use: one
    `TraceError` naming the field (meta is free-form in the trace format, so a hand-edited
    or foreign file must be caught here, not as a traceback in the middle of a compare).
    Checked: ``mss``, ``link``, ``remote``, ``capture``, ``notes``, ``retransmissions``,
    ``retransmitted_segments``, ``host_facts`` (per side, each fact's type),
    ``clock_offset`` (finite µs within `MAX_DELAY_US`), ``measured_sleeps``,
    ``jiffy_phase_us`` and the sides' profile names."""
    meta = trace.meta

    def number(key: str, value: Any, lo: float, hi: float) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not lo <= value <= hi:       # NaN fails both comparisons
            raise _bad(where, key, value, f"a number from {lo:g} to {hi:g}")

    mss = meta.get("mss")
    if mss is not None and (type(mss) is not int or not 1 <= mss <= 65_535):
        raise _bad(where, "mss", mss, "a whole number of bytes from 1 to 65535")
    for key in ("link", "remote", "capture", "client_profile", "server_profile"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise _bad(where, key, meta[key], "text")
    notes = meta.get("notes")
    if notes is not None and not (isinstance(notes, list)
                                  and all(isinstance(n, str) for n in notes)):
        raise _bad(where, "notes", notes, "a list of text")
    for key in ("retransmissions", "retransmitted_segments", "measured_sleeps"):
        value = meta.get(key)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(v, int | str) and not isinstance(v, bool)
                for v in value.values())):
            raise _bad(where, key, value, "an object of counts")
    number("jiffy_phase_us", meta.get("jiffy_phase_us"), 0, 10_000)
    number("path_latency_us", meta.get("path_latency_us"), 0, 10_000)
    facts = meta.get("host_facts")
    if facts is not None:
        if not isinstance(facts, dict):
            raise _bad(where, "host_facts", facts, "an object per side (client, server)")
        for side, one in facts.items():
            if not isinstance(one, dict):
                raise _bad(where, f"host_facts.{side}", one, "an object of host facts")
            for key, value in one.items():
                want = _FACT_TYPES.get(key)
                if value is None or want is None:
                    continue
                if not isinstance(value, want):
                    raise _bad(where, f"host_facts.{side}.{key}", value,
                               want[0].__name__.replace("str", "text")
                               .replace("dict", "an object").replace("list", "a list"))
                if key == "hz":
                    number(f"host_facts.{side}.hz", value, 1, 100_000)
    clock = meta.get("clock_offset")
    if clock is not None:
        if not isinstance(clock, dict):
            raise _bad(where, "clock_offset", clock, "an object")
        for key, value in clock.items():
            if key == "method":
                continue
            if key in ("used_us", "control_channel_us", "handshake_us"):   # any offset
                number(f"clock_offset.{key}", value, -1e15, 1e15)
            else:                                   # delays: positive, under a minute
                number(f"clock_offset.{key}", value, 0, MAX_DELAY_US)


SCENARIO_CHECK_OPS = 10_000
"""Ops per side checked against the scenario's statements (bounded: a 100k-op trace)."""

def check_same_scenario(scenario: Any, real: Trace, where: str) -> None:
    """Refuse a saved real trace that is not a run of ``scenario``: its title and each
    side's ops (name and argument, in order, the first `SCENARIO_CHECK_OPS`) must be the
    scenario's statements. A run that stopped early is a prefix and passes. One
    `TraceError` naming the first difference."""


    if scenario.title and real.title and scenario.title != real.title:
        raise TraceError(f"{where}: a run of another scenario (its title is "
                         f"{real.title[:60]!r}, {scenario.source} is "
                         f"{scenario.title[:60]!r})")
    for side in Side:
        expected = steps(scenario.side(side).script)
        ops = (op for op in real.ops if op.side is side and op.op not in HANDSHAKE_OPS)
        for op in islice(ops, SCENARIO_CHECK_OPS):
            step = next(expected, None)
            if step is None:
                raise TraceError(f"{where}: a run of another scenario (the {side.value} ran "
                                 f"{op.op} {op.arg[:40]} after the end of {scenario.source}'s "
                                 f"{side.value} script)")
            if (op.op, op.arg) != (step.op, step.arg):
                raise TraceError(f"{where}: a run of another scenario (the {side.value} ran "
                                 f"{op.op} {op.arg[:40]!s} where {scenario.source} line "
                                 f"{step.line} says {step.op} {step.arg[:40]!s})")

def load_real(path: str, scenario: Any | None = None) -> Trace:
    """A saved real trace for `compare`: a real run (source ``realnet``), meta the
    comparison can use (`check_meta`), of ``scenario`` when one is given. Any problem is
    one `TraceError` line naming the file and field."""

    real = Trace.load(path)
    if real.source is not Source.REALNET:
        raise TraceError(f"{path}: not a real trace (its source is {real.source[:20]!r}; "
                         "save one with `nagle-sim realnet run FILE --json > REAL.json`)")
    check_meta(real, path)
    if scenario is not None:
        check_same_scenario(scenario, real, path)
    return real

def check_same_title(sim: Trace, real: Trace, where: str) -> None:
    """Two saved traces of different scenarios (different titles) are not compared."""

    if sim.title and real.title and sim.title != real.title:
        raise TraceError(f"{where}: a run of another scenario (its title is "
                         f"{real.title[:60]!r}, the model trace's is {sim.title[:60]!r})")

def load_model(path: str) -> Trace:
    """A saved model trace for `compare MODEL.json REAL.json` (source ``sim``)."""

    sim = Trace.load(path)
    if sim.source is not Source.SIM:
        raise TraceError(f"{path}: not a model trace (its source is {sim.source[:20]!r}; "
                         "compare a scenario or `nagle-sim run FILE --json > MODEL.json` "
                         "with the real trace)")
    check_meta(sim, path)
    return sim
