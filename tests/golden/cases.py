"""The golden-trace cases: every lesson (base, each `[[expect]]` what-if variant and each
toggle) and every scenario under tests/data, each run through the model. (examples/ are
full-size experiments — S3 is 10,000 messages — and are checked by tests/test_sweep.py.)

Owns the list of cases and how a trace is reduced to a stable fingerprint; used by
``test_golden_traces.py`` and by ``python -m tests.golden.update``. The fingerprint is
the SHA-256 of the trace's `nagle-sim-trace/1` JSON (keys sorted) with the scenario path
made relative to the repository, so it does not depend on where the checkout lives. It
hashes the /1 form on purpose: that form spells out every field of every record, so it
stays a fingerprint of the run itself whatever format the CLI writes (files are /2 since
issue 17, and a /2 file reads back to the same trace).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nagle_sim import lessons, scenario
from nagle_sim.scenario import Scenario, ScenarioError
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

ROOT = Path(__file__).resolve().parents[2]
HASHES = Path(__file__).with_name("traces.json")


@dataclass(frozen=True)
class Case:
    name: str
    scenario: Scenario


def _rel(path: str) -> str:
    try:
        # not resolve(): tests/data's seed scenarios are links into examples/, and a case
        # keeps the name it is listed under
        return Path(os.path.abspath(path)).relative_to(ROOT).as_posix()
    except ValueError:
        return path


# Every other stack profile on the seed scenarios, so profile code is guarded too.
_PROFILE_VARIANTS = ("linux-5.4", "windows", "freebsd", "macos")


def _variants(base: Scenario, text: str, path: Path) -> Iterator[tuple[tuple[str, ...], str]]:
    """(overrides, label) for each what-if: claim variants, lesson toggles, profiles."""
    for claim in lessons.parse_claims(base):
        yield claim.when, f"when {list(claim.when)}"
    lesson = base.raw.get("lesson", {})
    for toggle in lesson.get("toggles", []):
        on = "false" if toggle.endswith("quickack") else "true"
        yield (f"{toggle}={on}",), f"toggle {toggle}={on}"
    if path.parent.name == "data":
        for name in _PROFILE_VARIANTS:
            yield (f"server.profile='{name}'",), f"server profile {name}"


def cases() -> Iterator[Case]:
    files = sorted((ROOT / "lessons").glob("*/scenario.toml"))
    files += sorted((ROOT / "tests" / "data").glob("*.toml"))
    for path in files:
        text = path.read_text("utf-8")
        base = scenario.loads(text, str(path))
        name = _rel(str(path))
        yield Case(name, base)
        seen: set[tuple[str, ...]] = {()}
        for when, label in _variants(base, text, path):
            if when in seen:
                continue
            seen.add(when)
            try:
                variant = lessons.variant(base, text, when, str(path))
            except ScenarioError:
                continue    # e.g. a profile without an option the script sets
            yield Case(f"{name} {label}", variant)


def fingerprint(trace: Trace) -> dict[str, object]:
    doc = trace.to_json(version=1)
    if "scenario" in doc["meta"]:
        doc["meta"] = {**doc["meta"], "scenario": _rel(str(doc["meta"]["scenario"]))}
    blob = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode()
    return {"sha256": hashlib.sha256(blob).hexdigest(), "segments": len(trace.segments),
            "events": len(trace.events), "end_ms": round(trace.end / 1000, 3),
            "outcome": trace.outcome}


def compute() -> dict[str, dict[str, object]]:
    return {case.name: fingerprint(run_sim(case.scenario)) for case in cases()}
