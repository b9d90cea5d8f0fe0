"""Claims: a scenario's `[[expect]]` tables, checked against runs.

Owns: the claim format (docs/lessons.md) and `check()`, which runs a scenario (and each
distinct what-if variant named by a claim's ``when``) once and judges every claim; the
metric a claim names is read by `nagle_sim.lessons.metrics`. Works on any `Trace`: the
caller passes the runner (`nagle_sim.runners`' simulator, or real sockets). Must not
import simpy, asyncio, textual, rich or an executor.

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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import scenario as scenario_mod
from ..scenario import Scenario, ScenarioError, clip
from ..trace import Runner
from .metrics import REASON_CODES, Metric, MetricError, MetricReader, Missing, parse_metric

if TYPE_CHECKING:
    from .loader import Lesson

COMPARATORS = ("equals", "between", "at_most", "at_least", "one_of")
CLAIM_KEYS = frozenset({"claim", "metric", "why", "when", *COMPARATORS})


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
        if isinstance(actual, Missing):
            return False
        if self.comparator == "equals" and isinstance(self.expected, list):
            return isinstance(actual, list) and len(actual) == len(self.expected) and all(
                _same(a, e) for a, e in zip(actual, self.expected, strict=True))
        if isinstance(actual, list):
            return bool(actual) and all(self._one(a) for a in actual)
        return self._one(actual)

    def _one(self, a: Any) -> bool:
        e = self.expected
        if a is None or isinstance(a, Missing):
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
    return repr(value) if isinstance(value, Missing) else _fmt(value)


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
    runs: dict[tuple[str, ...], MetricReader] = {}
    results = []
    for c in claims:
        if c.when not in runs:
            runs[c.when] = MetricReader(runner(variants[c.when]))
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
