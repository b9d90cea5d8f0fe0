"""Every lesson loads, runs cleanly and keeps its claims; unit tests of nagle_sim.expect."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from nagle_sim import expect
from nagle_sim.expect import ClaimResult, check, check_text, parse_metric
from nagle_sim.lessons import Lesson, lesson_dirs, load_lesson, load_lessons, toggle_errors
from nagle_sim.scenario import Scenario, ScenarioError
from nagle_sim.scenario import loads as scenario_loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Trace

LESSONS = lesson_dirs()


@functools.cache
def _lesson(path: Path) -> Lesson:
    return load_lesson(path)


@functools.cache
def _results(path: Path) -> tuple[tuple[ClaimResult, ...], Trace]:
    """Check a lesson once; also keep the base run's trace."""
    traces: list[Trace] = []

    def runner(sc: Scenario) -> Trace:
        trace = run_sim(sc)
        traces.append(trace)
        return trace

    results = tuple(check(_lesson(path), runner=runner))
    return results, traces[0]


def test_there_are_at_least_twelve_lessons() -> None:
    assert len(LESSONS) >= 12
    assert len(load_lessons()) == len(LESSONS)


def test_lesson_folders_are_numbered_and_unique() -> None:
    numbers = [p.name.split("-", 1)[0] for p in LESSONS]
    assert all(n.isdigit() and len(n) == 2 for n in numbers), numbers
    assert len(set(numbers)) == len(numbers)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_metadata(path: Path) -> None:
    lesson = _lesson(path)
    assert lesson.title and lesson.summary
    assert "lesson" in lesson.scenario.raw, "scenario.toml needs a [lesson] table"
    words = len(lesson.prose.split())
    assert 120 <= words <= 450, f"lesson.md has {words} words (aim for ~150-400)"
    assert lesson.prose.lstrip().startswith("# "), "lesson.md starts with a '# Title' line"
    assert 1 <= len(lesson.questions) <= 2
    assert toggle_errors(lesson) == []


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_claims_are_well_formed(path: Path) -> None:
    claims = expect.parse_claims(_lesson(path).scenario)
    assert len(claims) >= 3, "a lesson needs at least three [[expect]] claims"
    assert any(c.when for c in claims), "at least one claim must check a `when` variant"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_runs_cleanly(path: Path) -> None:
    _, trace = _results(path)
    assert trace.outcome is Outcome.OK, trace.message
    for q in _lesson(path).questions:
        assert 0 <= q.at_ms <= trace.end / 1000, f"question at {q.at_ms} ms is past the end"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lesson_claims_hold(path: Path) -> None:
    results, _ = _results(path)
    failed = [r for r in results if not r.ok]
    assert not failed, "\n".join(
        f"expect[{r.index}] {r.claim}: {r.why} — actual {expect.show(r.actual)}, "
        f"expected {r.expected_text}" for r in failed)


# ---------------------------------------------------------------- expect.py unit tests
ECHO = """
title = "hand-made write-write-read"
[client]
script = "repeat 4 { write 6; write 7; read 13 }"
[server]
script = "repeat 4 { read 13; write 13 }"
"""


def _claims(*tables: str) -> str:
    return ECHO + "".join(f"\n[[expect]]\n{t.strip()}\n" for t in tables)


def test_a_true_claim_holds_and_a_false_one_fails() -> None:
    results = check_text(_claims(
        'metric = "iterations[1:].latency_ms"\nbetween = [40, 44.5]\nwhy = "delayed ACK"',
        'metric = "iterations[1:].latency_ms.max"\nat_most = 1\nwhy = "wrongly hopes for speed"',
    ), runner=run_sim)
    assert [r.ok for r in results] == [True, False]
    bad = results[1]
    assert bad.why == "wrongly hopes for speed"
    assert 40 <= bad.actual <= 44.5
    assert bad.expected_text == "≤ 1"
    assert "FAIL" in bad.text() and "wrongly hopes for speed" in bad.text()


def test_when_variant_is_run_separately() -> None:
    results = check_text(_claims(
        'metric = "iterations[1:].latency_ms.max"\nat_most = 1\n'
        'when = ["client.nodelay=true"]\nwhy = "NODELAY"',
        'metric = "segments.client.data"\nequals = 8\nwhy = "two per request"\n'
        'when = ["client.nodelay=true"]',
        'metric = "segments.client.data"\nequals = 8\nwhy = "also two per request by default"',
    ), runner=run_sim)
    assert [r.ok for r in results] == [True, True, True]
    assert results[0].when == ("client.nodelay=true",)
    assert "client.nodelay=true" in results[0].claim


def test_variants_run_once_each() -> None:
    calls: list[Scenario] = []

    def runner(sc: Scenario) -> Trace:
        calls.append(sc)
        return run_sim(sc)

    claim = 'metric = "duration_ms"\nat_least = 0\nwhy = "x"'
    text = _claims(claim, claim, claim + '\nwhen = ["client.nodelay=true"]',
                   claim + '\nwhen = ["client.nodelay=true"]')
    sc = scenario_loads(text)
    assert len(check(sc, runner=runner, text=text)) == 4
    assert len(calls) == 2


def test_equals_list_and_codes_and_missing_index() -> None:
    results = check_text(_claims(
        'metric = "data.client[:3].length"\nequals = [6, 7, 6]\nwhy = "sizes"',
        'metric = "stalls.ended_by"\nequals = "DELACK_FIRED"\nwhy = "timer"',
        'metric = "stall[0].held_by"\none_of = ["NAGLE_HOLD", "CORK_HOLD"]\nwhy = "Nagle"',
        'metric = "iterations[9].latency_ms"\nat_least = 0\nwhy = "there are only 4"',
        'metric = "reason.server.DELACK_FIRED"\nequals = 3\nwhy = "three stalls"',
        'metric = "writes.client[1].send_delay_ms"\nat_most = 1\nwhy = "first request fast"',
        'metric = "ack_delay.server[2]"\nbetween = [40, 44.5]\nwhy = "delayed"',
        'metric = "get.client.quickack"\nequals = []\nwhy = "no get calls"',
    ), runner=run_sim)
    assert [r.ok for r in results] == [True, True, True, False, True, True, True, True]
    assert "iterations.client[9] of 4" in expect.show(results[3].actual)


def test_empty_list_fails_a_numeric_claim() -> None:
    [result] = check_text(_claims('metric = "acks.client[50:].t_ms"\nat_least = 0\nwhy = "x"'),
                          runner=run_sim)
    assert not result.ok and result.actual == []


@pytest.mark.parametrize(("table", "message"), [
    ('metric = "iterations.latency_ms"\nat_most = 1', "missing 'why'"),
    ('metric = "iterations.latency_ms"\nwhy = "x"', "give exactly one of"),
    ('metric = "iterations.latency_ms"\nat_most = 1\nequals = 2\nwhy = "x"', "got equals, at_most"),
    ('metric = "iterations.latency_ms"\nbetween = [5, 1]\nwhy = "x"', "between must be"),
    ('metric = "iterations.latency_ms"\nbetween = 3\nwhy = "x"', "between must be"),
    ('metric = "iterations.latency_ms"\nat_most = "fast"\nwhy = "x"', "must be a number"),
    ('metric = "stalls.ended_by"\nequals = "DELAYED_ACK"\nwhy = "x"', "not a Reason code"),
    ('metric = "stalls.ended_by"\nat_most = 3\nwhy = "x"', "is text"),
    ('metric = "duration_ms"\nat_most = 1\nwhy = "x"\nwhen = "nodelay"', "KEY=VALUE"),
    ('metric = "duration_ms"\nat_most = 1\nwhy = "x"\nwhne = ["a=b"]', "unknown key 'whne'"),
    ('at_most = 1\nwhy = "x"', "missing 'metric'"),
    ('metric = "latency"\nat_most = 1\nwhy = "x"', "unknown metric 'latency'"),
    ('metric = "iterations.latency"\nat_most = 1\nwhy = "x"', "has no field 'latency'"),
    ('metric = "reason.client.SLOW"\nat_most = 1\nwhy = "x"', "unknown Reason code"),
    ('metric = "iterations[1:x].latency_ms"\nat_most = 1\nwhy = "x"', "bad selector"),
    ('metric = "segments.client.small"\nat_most = 1\nwhy = "x"', "all, data or pure_acks"),
    ('metric = "ops.client.read[0]"\nat_most = 1\nwhy = "x"', "name a field"),
    ('metric = "ack_delay[0]"\nat_most = 1\nwhy = "x"', "takes no [selector]"),
    ('metric = "iterations[0].latency_ms.max"\nat_most = 1\nwhy = "x"', "needs a list"),
    ('metric = "ack_delay.server[0].max"\nat_most = 1\nwhy = "x"', "needs a list"),
    ('metric = "stall[0].count"\nat_most = 1\nwhy = "x"', "needs a list"),
])
def test_malformed_claims_are_one_line_errors(table: str, message: str) -> None:
    text = _claims('metric = "duration_ms"\nat_least = 0\nwhy = "fine"', table)
    with pytest.raises(ScenarioError) as info:
        check_text(text, "demo.toml", runner=run_sim)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("demo.toml: expect[1]: "), text
    assert message in text, text


def test_bad_when_override_names_the_claim(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_claims('metric = "duration_ms"\nat_least = 0\nwhy = "x"\n'
                            'when = ["client.profile=\'plan9\'"]'), "utf-8")
    with pytest.raises(ScenarioError) as info:
        check(path, runner=run_sim)
    assert str(info.value).startswith(f"{path}: expect[0]: when ")
    assert "plan9" in str(info.value) and "\n" not in str(info.value)


def test_in_memory_scenario_without_text_cannot_build_variants() -> None:
    sc = scenario_loads(_claims(
        'metric = "duration_ms"\nat_least = 0\nwhy = "x"\nwhen = ["client.nodelay=true"]'))
    with pytest.raises(ScenarioError, match="in-memory"):
        check(sc, runner=run_sim)


def test_check_accepts_files_folders_and_lessons() -> None:
    folder = LESSONS[0]
    by_folder = check(folder, runner=run_sim)
    by_file = check(folder / "scenario.toml", runner=run_sim)
    by_lesson = check(_lesson(folder), runner=run_sim)
    assert [r.ok for r in by_folder] == [r.ok for r in by_file] == [r.ok for r in by_lesson]


def test_no_claims_means_no_results() -> None:
    assert check_text(ECHO, runner=run_sim) == []


@pytest.mark.parametrize("metric", [
    "duration_ms", "outcome", "segments", "segments.server", "segments.client.pure_acks",
    "bytes.client", "reason.DELACK_FIRED", "events.client.NAGLE_HOLD",
    "iterations.count", "iteration[0].latency_ms", "iterations.server[1:].end_ms.median",
    "stalls.count", "stall[-1].duration_ms", "stalls.ended_side.last",
    "segment[0].flags", "segment.server[2:4].t_ms.mean", "data.client.length.sum",
    "acks.server.count", "writes.client.alone.sum", "writes.server[0].size",
    "ops.client.read[0].duration_ms", "ops.server.write.count", "get.client.quickack[0]",
    "ack_delay.server.max", "ack_delay.client[1:].min",
])
def test_every_metric_form_parses_and_evaluates(metric: str) -> None:
    parse_metric(metric)
    trace = run_sim(scenario_loads(ECHO))
    expect.evaluate(trace, metric)  # must not raise


def test_evaluate_reports_unknown_metrics() -> None:
    trace = run_sim(scenario_loads(ECHO))
    with pytest.raises(ScenarioError, match="unknown metric"):
        expect.evaluate(trace, "throughput")
    assert expect.evaluate(trace, "iterations[7].latency_ms") is None
    assert expect.evaluate(trace, "segments.client.data") == 8
