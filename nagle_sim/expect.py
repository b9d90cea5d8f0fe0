"""Expectations ("claims"): `[[expect]]` tables in a scenario, checked against runs.

Owns: the claim format and the metric language (docs/lessons.md), and `check()`, which runs
a scenario (and each distinct what-if variant named by a claim's ``when``) once and judges
every claim. Works on any `Trace`: the caller passes the runner (`nagle_sim.runners`'
simulator, or real sockets). Must not import simpy, asyncio, textual, rich or an executor.

A claim::

    [[expect]]
    claim = "every request after the first waits for the delayed ACK"   # optional label
    metric = "iterations[1:].latency_ms"
    between = [40, 44.5]
    why = "the server's delayed ACK (40 ms, rounded up to the next 4 ms jiffy) releases..."
    when = ["client.nodelay=true"]                                     # optional what-if

Exactly one comparison: ``equals``, ``between = [lo, hi]`` (inclusive), ``at_most``,
``at_least`` or ``one_of = [...]``. A metric that yields a list is checked value by value
(every value must pass, and the list must not be empty) unless ``equals`` is given a list,
which compares the whole list.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import scenario as scenario_mod
from .errors import UserError
from .model.events import Reason, Side
from .scenario import OPTIONS, Scenario, ScenarioError, clip
from .summary import iterations, stalls, write_spans
from .trace import Runner, SegmentRecord, Trace
from .units import ms

if TYPE_CHECKING:
    from .lessons import Lesson

COMPARATORS = ("equals", "between", "at_most", "at_least", "one_of")
CLAIM_KEYS = frozenset({"claim", "metric", "why", "when", *COMPARATORS})
AGGREGATES = ("count", "min", "max", "median", "mean", "sum", "first", "last")
SIDES = {"client": Side.CLIENT, "server": Side.SERVER}
REASON_CODES = frozenset(Reason.__members__)
OPS = ("write", "writev", "read", "sleep", "set", "get", "close")

# record-list roots: name -> (fields, default side or None for "both", side required)
_RECORDS: dict[str, tuple[tuple[str, ...], Side | None, bool]] = {
    "iterations": (("latency_ms", "start_ms", "end_ms"), Side.CLIENT, False),
    "stalls": (("duration_ms", "start_ms", "end_ms", "ended_by", "held_by", "ended_side"),
               None, False),
    "segment": (("t_ms", "arrive_ms", "length", "flags", "code", "seq", "ack"), None, False),
    "data": (("t_ms", "arrive_ms", "length", "flags", "code", "seq", "ack"), None, False),
    "acks": (("t_ms", "arrive_ms", "flags", "code", "ack"), None, False),
    "writes": (("start_ms", "size", "send_delay_ms", "alone", "segments"), Side.CLIENT, False),
    "ops": (("start_ms", "end_ms", "duration_ms", "result", "arg"), None, True),
}
_ALIASES = {"iteration": "iterations", "stall": "stalls", "write": "writes"}
_VALUE_LISTS = ("get", "ack_delay")          # lists of plain values (no field)
_SCALARS = ("duration_ms", "outcome", "segments", "bytes", "reason", "events")
_CODE_FIELDS = frozenset({"code", "ended_by", "held_by"})
_TEXT_FIELDS = _CODE_FIELDS | {"flags", "arg", "ended_side"}

METRICS_HELP = (
    "duration_ms, outcome, segments[.SIDE][.data|.pure_acks], bytes[.SIDE], "
    "reason[.SIDE].CODE, events[.SIDE].CODE, iterations[.SIDE][SEL].FIELD, "
    "stalls[SEL].FIELD, segment|data|acks[.SIDE][SEL].FIELD, writes[.SIDE][SEL].FIELD, "
    "ops.SIDE.OP[SEL].FIELD, get.SIDE.OPTION[SEL], ack_delay.SIDE[SEL]; "
    "optional .count|.min|.max|.median|.mean|.sum|.first|.last"
)


class _Missing:
    """An indexed value that the run did not produce (e.g. iteration[5] of 3)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"(none: {self.what})"


# ---------------------------------------------------------------- metric parsing
_TOKEN = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<sel>[^\]]*)\])?$")
# At most nine digits: a selector never needs more, and int() of a 5000-digit string fails.
_INDEX = re.compile(r"^\s*(-?\d{1,9})\s*$")
_SLICE = re.compile(r"^\s*(-?\d{1,9})?\s*:\s*(-?\d{1,9})?\s*$")


@dataclass(frozen=True, slots=True)
class Selector:
    """``[i]`` picks one item; ``[a:b]`` (either end optional) keeps a list."""

    start: int | None
    stop: int | None
    single: bool

    def apply(self, items: list[Any], what: str) -> Any:
        if self.single:
            assert self.start is not None
            try:
                return items[self.start]
            except IndexError:
                return _Missing(f"{what}[{self.start}] of {len(items)}")
        return items[self.start:self.stop]


@dataclass(frozen=True, slots=True)
class Metric:
    """A parsed metric path; `evaluate` reads it from a `_Run`."""

    text: str
    root: str
    side: Side | None = None
    key: str = ""                 # segments kind, reason/event code, op name, option
    selector: Selector | None = None
    field: str = ""
    aggregate: str = ""

    @property
    def textual(self) -> bool:
        """True when the metric yields strings (codes, flags, sides), not numbers."""
        return (self.field in _TEXT_FIELDS or self.root == "outcome") and self.aggregate in (
            "", "first", "last")

    @property
    def is_code(self) -> bool:
        return self.field in _CODE_FIELDS and self.aggregate in ("", "first", "last")


class MetricError(UserError, ValueError):
    """A metric path that does not parse; ``str(err)`` is one short line."""


def _parse_selector(text: str) -> Selector:
    m = _INDEX.match(text)
    if m:
        return Selector(int(m.group(1)), None, single=True)
    m = _SLICE.match(text)
    if m:
        start = int(m.group(1)) if m.group(1) is not None else None
        stop = int(m.group(2)) if m.group(2) is not None else None
        return Selector(start, stop, single=False)
    raise MetricError(f"bad selector [{text}]: use [i], [a:b], [a:] or [:b]")


def parse_metric(text: str) -> Metric:
    """Parse a metric path; raises `MetricError` with a short message."""
    if not isinstance(text, str) or not text.strip():
        raise MetricError("metric must be a non-empty string")
    parts: list[tuple[str, Selector | None]] = []
    for raw in text.strip().split("."):
        m = _TOKEN.match(raw.strip())
        if m is None:
            raise MetricError(f"bad metric part {raw!r} in {text!r}")
        sel = _parse_selector(m.group("sel")) if m.group("sel") is not None else None
        parts.append((m.group("name"), sel))
    root, root_sel = parts[0]
    root = _ALIASES.get(root, root)
    rest = parts[1:]

    def no_sel(name: str, sel: Selector | None) -> None:
        if sel is not None:
            raise MetricError(f"{name!r} takes no [selector] in {text!r}")

    def take_side() -> Side | None:
        if rest and rest[0][0] in SIDES:
            name, sel = rest.pop(0)
            no_sel(name, sel)
            return SIDES[name]
        return None

    def single_with_aggregate(sel: Selector | None, aggregate: str) -> None:
        if sel is not None and sel.single and aggregate:
            raise MetricError(f"{text!r}: .{aggregate} needs a list, but [i] picks one item")

    if root in ("duration_ms", "outcome"):
        no_sel(root, root_sel)
        if rest:
            raise MetricError(f"{text!r}: {root!r} has no sub-fields")
        return Metric(text, root)
    if root in ("segments", "bytes"):
        no_sel(root, root_sel)
        side = take_side()
        key = "all"
        if root == "segments" and rest:
            name, sel = rest.pop(0)
            no_sel(name, sel)
            if name not in ("all", "data", "pure_acks"):
                raise MetricError(f"{text!r}: segments counts are all, data or pure_acks "
                                  f"(for one segment use segment[.SIDE][i].FIELD)")
            key = name
        if rest:
            raise MetricError(f"{text!r}: unexpected {rest[0][0]!r}")
        return Metric(text, root, side=side, key=key)
    if root in ("reason", "events"):
        no_sel(root, root_sel)
        side = take_side()
        if len(rest) != 1 or rest[0][1] is not None:
            raise MetricError(f"{text!r}: use {root}[.SIDE].CODE with a Reason code name")
        code = rest[0][0]
        if code not in REASON_CODES:
            raise MetricError(f"{text!r}: unknown Reason code {code!r} "
                              "(see nagle_sim/model/events.py)")
        return Metric(text, root, side=side, key=code)
    if root in _VALUE_LISTS:
        no_sel(root, root_sel)
        if not rest or rest[0][0] not in SIDES:
            raise MetricError(f"{text!r}: name a side after {root!r} (client or server)")
        side_name, sel = rest.pop(0)
        side = SIDES[side_name]
        key = ""
        if root == "get":
            if sel is not None or not rest:
                raise MetricError(f"{text!r}: use get.SIDE.OPTION[i]")
            key, sel = rest.pop(0)
            if key not in OPTIONS:
                raise MetricError(f"{text!r}: option must be one of {', '.join(OPTIONS)}")
        aggregate = _take_aggregate(rest, text)
        single_with_aggregate(sel, aggregate)
        return Metric(text, root, side=side, key=key, selector=sel, aggregate=aggregate)
    if root in _RECORDS:
        fields, default_side, side_required = _RECORDS[root]
        sel = root_sel
        side = default_side
        key = ""
        if root == "ops":
            no_sel(root, root_sel)
            if not rest or rest[0][0] not in SIDES or rest[0][1] is not None:
                raise MetricError(f"{text!r}: use ops.SIDE.OP[i].FIELD")
            side = SIDES[rest.pop(0)[0]]
            if not rest or rest[0][0] not in OPS:
                raise MetricError(f"{text!r}: OP must be one of {', '.join(OPS)}")
            key, sel = rest.pop(0)
        elif root != "stalls" and rest and rest[0][0] in SIDES:
            if sel is not None:
                raise MetricError(f"{text!r}: put the selector after the side, "
                                  f"e.g. {root}.client[0]")
            side_name, sel = rest.pop(0)
            side = SIDES[side_name]
        elif side_required:
            raise MetricError(f"{text!r}: name a side after {root!r}")
        fld = ""
        if rest and rest[0][0] not in AGGREGATES:
            name, fsel = rest.pop(0)
            no_sel(name, fsel)
            if name not in fields:
                raise MetricError(f"{text!r}: {root} has no field {name!r} "
                                  f"(fields: {', '.join(fields)})")
            fld = name
        aggregate = _take_aggregate(rest, text)
        if not fld and aggregate != "count":
            raise MetricError(f"{text!r}: name a field of {root} "
                              f"({', '.join(fields)}) or end with .count")
        single_with_aggregate(sel, aggregate)
        if aggregate in ("min", "max", "median", "mean", "sum") and fld in _TEXT_FIELDS:
            raise MetricError(f"{text!r}: .{aggregate} of a text field {fld!r}")
        return Metric(text, root, side=side, key=key, selector=sel, field=fld,
                      aggregate=aggregate)
    raise MetricError(f"unknown metric {text!r} (known: {METRICS_HELP})")


def _take_aggregate(rest: list[tuple[str, Selector | None]], text: str) -> str:
    if not rest:
        return ""
    name, sel = rest.pop(0)
    if name not in AGGREGATES or sel is not None:
        raise MetricError(f"{text!r}: unexpected {name!r} "
                          f"(aggregates: {', '.join(AGGREGATES)})")
    if rest:
        raise MetricError(f"{text!r}: nothing may follow .{name}")
    return name


# ---------------------------------------------------------------- evaluating a run
class _Run:
    """One trace plus lazily computed record lists."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._cache: dict[tuple[str, Side | None, str], list[Any]] = {}

    def records(self, root: str, side: Side | None, key: str = "") -> list[Any]:
        ck = (root, side, key)
        if ck not in self._cache:
            self._cache[ck] = getattr(self, f"_rec_{root}")(side, key)
        return self._cache[ck]

    # segments -------------------------------------------------------------
    def _segs(self, side: Side | None) -> list[SegmentRecord]:
        return [s for s in self.trace.segments if side is None or s.src is side]

    @staticmethod
    def _seg(s: SegmentRecord) -> dict[str, Any]:
        return {"t_ms": ms(s.t), "arrive_ms": ms(s.arrive), "length": s.length,
                "flags": s.flags, "code": s.code, "seq": s.seq, "ack": s.ack}

    def _rec_segment(self, side: Side | None, _key: str) -> list[dict[str, Any]]:
        return [self._seg(s) for s in self._segs(side)]

    def _rec_data(self, side: Side | None, _key: str) -> list[dict[str, Any]]:
        return [self._seg(s) for s in self._segs(side) if s.is_data]

    def _rec_acks(self, side: Side | None, _key: str) -> list[dict[str, Any]]:
        return [self._seg(s) for s in self._segs(side) if s.is_pure_ack]

    # iterations, stalls ---------------------------------------------------------
    def _rec_iterations(self, side: Side | None, _key: str) -> list[dict[str, Any]]:
        return [{"latency_ms": ms(it.latency), "start_ms": ms(it.start),
                 "end_ms": ms(it.end)} for it in iterations(self.trace, side or Side.CLIENT)]

    def _rec_stalls(self, _side: Side | None, _key: str) -> list[dict[str, Any]]:
        out = []
        for st in stalls(self.trace):
            ender = next((s for s in self.trace.segments if s.t == st.end), None)
            out.append({"duration_ms": ms(st.duration), "start_ms": ms(st.start),
                        "end_ms": ms(st.end), "ended_by": st.ended_code,
                        "held_by": st.held_code,
                        "ended_side": ender.src.value if ender else ""})
        return out

    # application calls -----------------------------------------------------------
    def _rec_ops(self, side: Side | None, key: str) -> list[dict[str, Any]]:
        out = []
        for o in self.trace.ops:
            if o.side is side and o.op == key:
                result: Any = o.result
                if isinstance(result, str) and re.fullmatch(r"-?\d+", result):
                    result = int(result)
                out.append({"start_ms": ms(o.start), "end_ms": ms(o.end),
                            "duration_ms": None if o.end is None else ms(o.end - o.start),
                            "result": result, "arg": o.arg})
        return out

    def _rec_get(self, side: Side | None, key: str) -> list[Any]:
        return [o["result"] for o in self._rec_ops(side, "get")
                if o["arg"] == key]

    def _rec_writes(self, side: Side | None, _key: str) -> list[dict[str, Any]]:
        return [{"start_ms": ms(w.start), "size": w.size,
                 "send_delay_ms": None if w.sent_at is None else ms(w.sent_at - w.start),
                 "alone": w.alone, "segments": w.segments}
                for w in write_spans(self.trace, side or Side.CLIENT)]

    def _rec_ack_delay(self, side: Side | None, _key: str) -> list[float | None]:
        """For each data segment ``side`` received: ms until ``side`` ACKed all of it."""
        assert side is not None
        mine = self._segs(side)
        out: list[float | None] = []
        for d in self._segs(side.peer):
            if not d.is_data:
                continue
            arrived = d.arrive if d.arrive is not None else d.t
            end = d.seq + d.length
            ack = next((s for s in mine if s.t >= arrived and "A" in s.flags
                        and s.ack >= end), None)
            out.append(None if ack is None else ms(ack.t - arrived))
        return out

    # scalars ------------------------------------------------------------------------
    def scalar(self, m: Metric) -> Any:
        if m.root == "duration_ms":
            return ms(self.trace.end)
        if m.root == "outcome":
            return self.trace.outcome
        segs = self._segs(m.side)
        if m.root == "bytes":
            return sum(s.length for s in segs)
        if m.root == "segments":
            if m.key == "data":
                return sum(1 for s in segs if s.is_data)
            if m.key == "pure_acks":
                return sum(1 for s in segs if s.is_pure_ack)
            return len(segs)
        if m.root == "reason":
            return sum(1 for s in segs if s.code == m.key)
        return sum(1 for e in self.trace.events
                   if e.code == m.key and (m.side is None or e.side is m.side))

    def evaluate(self, m: Metric) -> Any:
        if m.root in _SCALARS:
            return self.scalar(m)
        items = self.records(m.root, m.side, m.key)
        what = m.root if m.side is None else f"{m.root}.{m.side.value}"
        if m.key:
            what += f".{m.key}"
        value: Any = items if m.selector is None else m.selector.apply(items, what)
        if isinstance(value, _Missing):
            return value
        if m.field:
            value = value[m.field] if isinstance(value, dict) else [v[m.field] for v in value]
        return _aggregate(value, m.aggregate) if m.aggregate else value


def _aggregate(values: list[Any], how: str) -> Any:
    if how == "count":
        return len(values)
    if how in ("first", "last"):
        if not values:
            return _Missing("empty list")
        return values[0] if how == "first" else values[-1]
    nums = [float(v) for v in values if v is not None]
    if not nums:
        return _Missing("empty list")
    if how == "sum":
        total = sum(nums)
        return int(total) if all(isinstance(v, bool | int) for v in values) else round(total, 3)
    funcs: dict[str, Callable[[list[float]], float]] = {
        "min": min, "max": max, "median": statistics.median, "mean": statistics.fmean}
    return round(funcs[how](nums), 3)


# ---------------------------------------------------------------- claims
@dataclass(frozen=True, slots=True)
class Claim:
    index: int
    label: str
    metric: Metric
    comparator: str
    expected: Any
    why: str
    when: tuple[str, ...] = ()

    def expected_text(self, is_list: bool = False) -> str:
        e = self.expected
        if self.comparator == "equals":
            text = f"= {_fmt(e)}"
        elif self.comparator == "between":
            text = f"between {_fmt(e[0])} and {_fmt(e[1])}"
        elif self.comparator == "at_most":
            text = f"≤ {_fmt(e)}"
        elif self.comparator == "at_least":
            text = f"≥ {_fmt(e)}"
        else:
            text = f"one of {', '.join(_fmt(v) for v in e)}"
        if is_list and not (self.comparator == "equals" and isinstance(e, list)):
            text = f"every value {text}"
        return text

    def judge(self, actual: Any) -> bool:
        if isinstance(actual, _Missing):
            return False
        if self.comparator == "equals" and isinstance(self.expected, list):
            return isinstance(actual, list) and len(actual) == len(self.expected) and all(
                _same(a, e) for a, e in zip(actual, self.expected, strict=True))
        if isinstance(actual, list):
            return bool(actual) and all(self._one(a) for a in actual)
        return self._one(actual)

    def _one(self, a: Any) -> bool:
        e = self.expected
        if a is None or isinstance(a, _Missing):
            return False
        if self.comparator == "equals":
            return _same(a, e)
        if self.comparator == "one_of":
            return any(_same(a, v) for v in e)
        if isinstance(a, bool) or not isinstance(a, int | float):
            return False
        if self.comparator == "between":
            return bool(e[0] <= a <= e[1])
        if self.comparator == "at_most":
            return bool(a <= e)
        return bool(a >= e)


def _same(a: Any, e: Any) -> bool:
    if isinstance(a, bool) or isinstance(e, bool):
        return a is e or (isinstance(a, bool) and isinstance(e, bool) and a == e)
    if isinstance(a, int | float) and isinstance(e, int | float):
        return math.isclose(a, e, rel_tol=0, abs_tol=1e-6)
    return bool(a == e)


def show(value: Any) -> str:
    """An actual value as claims print it."""
    return repr(value) if isinstance(value, _Missing) else _fmt(value)


def _fmt(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".")
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    return str(v)


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claim: str
    ok: bool
    actual: Any
    expected_text: str
    why: str
    metric: str = ""
    when: tuple[str, ...] = ()
    index: int = 0

    def text(self) -> str:
        """One line for reports: label, verdict, actual vs expected, and why on failure."""
        mark = "ok  " if self.ok else "FAIL"
        line = f"{mark} {self.claim}: {show(self.actual)} (expected {self.expected_text})"
        return line if self.ok else f"{line} — {self.why}"


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def parse_claim(raw: Any, index: int, where: str) -> Claim:
    """Validate one ``[[expect]]`` table; errors are one-line `ScenarioError`s."""

    def fail(message: str) -> ScenarioError:
        # Messages quote the user's values: clip them to one readable line.
        return ScenarioError(f"{where}: expect[{index}]: {clip(message, 300)}")

    if not isinstance(raw, dict):
        raise fail("must be a table with metric, a comparison and why")
    unknown = sorted(set(raw) - CLAIM_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(CLAIM_KEYS))})")
    if "metric" not in raw:
        raise fail("missing 'metric' (e.g. metric = \"iterations[1:].latency_ms.max\")")
    try:
        metric = parse_metric(raw["metric"])
    except MetricError as exc:
        raise fail(str(exc)) from None
    why = raw.get("why")
    if not isinstance(why, str) or not why.strip():
        raise fail("missing 'why': say what the claim shows, it is printed when it fails")
    label = raw.get("claim", metric.text)
    if not isinstance(label, str) or not label.strip():
        raise fail("'claim' must be a non-empty string")
    given = [c for c in COMPARATORS if c in raw]
    if len(given) != 1:
        raise fail(f"give exactly one of {', '.join(COMPARATORS)}"
                   + (f" (got {', '.join(given)})" if given else ""))
    comparator = given[0]
    expected = raw[comparator]
    text_metric = metric.textual
    if comparator == "between":
        if not (isinstance(expected, list) and len(expected) == 2
                and all(_number(v) for v in expected) and expected[0] <= expected[1]):
            raise fail("between must be [low, high] numbers with low ≤ high")
    elif comparator in ("at_most", "at_least"):
        if not _number(expected):
            raise fail(f"{comparator} must be a number, got {expected!r}")
    elif comparator == "one_of" and (not isinstance(expected, list) or not expected):
        raise fail("one_of must be a non-empty list")
    if text_metric and comparator in ("between", "at_most", "at_least"):
        raise fail(f"{metric.text!r} is text; use equals or one_of")
    if metric.is_code:
        values = expected if isinstance(expected, list) else [expected]
        for v in values:
            if not isinstance(v, str) or (v and v not in REASON_CODES):
                raise fail(f"{v!r} is not a Reason code name (see nagle_sim/model/events.py)")
    when = raw.get("when", [])
    if isinstance(when, str):
        when = [when]
    if not isinstance(when, list) or not all(isinstance(w, str) and "=" in w for w in when):
        raise fail("when must be a list of KEY=VALUE overrides, e.g. [\"client.nodelay=true\"]")
    return Claim(index=index, label=label.strip(), metric=metric, comparator=comparator,
                 expected=expected, why=" ".join(why.split()),
                 when=tuple(w.strip() for w in when))


def parse_claims(sc: Scenario) -> list[Claim]:
    """Every claim of a scenario, validated (nothing is run)."""
    return [parse_claim(raw, i, sc.source) for i, raw in enumerate(sc.expect)]


# ---------------------------------------------------------------- checking
def _resolve(target: Scenario | Lesson | str | Path) -> tuple[Scenario, str | None]:
    """(base scenario, TOML text for building variants or None)."""
    if isinstance(target, str | Path):
        path = Path(target)
        if path.is_dir():
            path = path / "scenario.toml"
        sc = scenario_mod.load(path)
        return sc, path.read_text("utf-8")
    sc = target if isinstance(target, Scenario) else target.scenario
    path = Path(sc.source)
    if sc.source != "<string>" and path.is_file():
        return sc, path.read_text("utf-8")
    return sc, None


def variant(base: Scenario, text: str | None, when: Iterable[str], where: str) -> Scenario:
    """The what-if scenario for a claim's ``when`` overrides."""
    when = list(when)
    if not when:
        return base
    if text is None:
        raise ScenarioError(f"{where}: cannot build what-if variants of an in-memory "
                            "scenario: pass its file, or use check_text()")
    return scenario_mod.loads(text, base.source, when)


def check(target: Scenario | Lesson | str | Path, *, runner: Runner,
          text: str | None = None) -> list[ClaimResult]:
    """Run the scenario (and each distinct ``when`` variant once) with ``runner`` and judge
    every claim.

    ``target`` is a `Scenario`, a `Lesson`, a scenario file or a lesson folder; ``runner``
    the executor (`nagle_sim.runners.simulate`, or a real one). Variants are rebuilt from
    the scenario's file (or from ``text``). Malformed claims raise `ScenarioError` before
    anything runs.
    """
    sc, file_text = _resolve(target)
    if text is not None:
        file_text = text
    claims = parse_claims(sc)
    variants: dict[tuple[str, ...], Scenario] = {(): sc}
    for c in claims:
        if c.when not in variants:
            try:
                variants[c.when] = variant(sc, file_text, c.when, sc.source)
            except ScenarioError as exc:
                raise ScenarioError(f"{sc.source}: expect[{c.index}]: when "
                                    f"{list(c.when)}: {exc}") from None
    runs: dict[tuple[str, ...], _Run] = {}
    results = []
    for c in claims:
        if c.when not in runs:
            runs[c.when] = _Run(runner(variants[c.when]))
        actual = runs[c.when].evaluate(c.metric)
        results.append(ClaimResult(
            claim=c.label + (f" [{', '.join(c.when)}]" if c.when else ""),
            ok=c.judge(actual), actual=actual,
            expected_text=c.expected_text(isinstance(actual, list)), why=c.why,
            metric=c.metric.text, when=c.when, index=c.index))
    return results


def check_text(text: str, where: str = "<string>", *, runner: Runner
               ) -> list[ClaimResult]:
    """`check` for scenario TOML held in memory."""
    return check(scenario_mod.loads(text, where), runner=runner, text=text)


def evaluate(trace: Trace, metric: str) -> Any:
    """The value of one metric on an existing trace (e.g. for the CLI or a notebook)."""
    try:
        parsed = parse_metric(metric)
    except MetricError as exc:
        raise ScenarioError(str(exc)) from None
    value = _Run(trace).evaluate(parsed)
    return None if isinstance(value, _Missing) else value


__all__ = ["Claim", "ClaimResult", "Metric", "check", "check_text", "evaluate",
           "parse_claim", "parse_claims", "parse_metric", "variant", "METRICS_HELP"]
