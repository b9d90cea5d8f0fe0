"""``run --json`` streams (issue 32): the driver hands its records to a `TraceStream` as the
run goes on, so the process holds a few thousand records at a time instead of the run's
millions (S3 NODELAY at 100,000 messages peaked at 1.2 GB), and the JSON it prints is
byte for byte what the whole trace's ``dumps`` prints, whatever the run's length, outcome
or format version. Runs against the compiled build too (nothing here patches compiled
code: only the standard library's `tempfile`)."""

from __future__ import annotations

import io
import json
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from nagle_sim import scenario
from nagle_sim.__main__ import main
from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario
from nagle_sim.sim.driver import HAND_OVER_RECORDS, run_sim
from nagle_sim.trace import EventRecord, OpRecord, SegmentRecord, Source, Trace, TraceStream

from ..golden.cases import cases

_S3 = ('[client]\nnodelay = {nodelay}\n'
       'script = "repeat {n} {{ repeat 15 {{ write 2 }}; read 2 }}"\n'
       '[server]\nscript = "repeat {n} {{ read 30; write 2 }}"\n')


def _s3(messages: int, nodelay: bool = True) -> Scenario:
    """Seed scenario S3 (examples/): ``messages`` requests of 15 two-byte writes."""
    return scenario.loads(_S3.format(n=messages, nodelay=str(nodelay).lower()), "s3.toml")


def _streamed(sc: Scenario, version: int = 2, **limits: int) -> tuple[str, Trace, TraceStream]:
    stream = TraceStream(version)
    tail = run_sim(sc, stream=stream, **limits)
    out = io.StringIO()
    stream.finish(tail, out)
    return out.getvalue(), tail, stream


def _held(trace: Trace) -> int:
    return len(trace.segments) + len(trace.ops) + len(trace.events)


@pytest.mark.parametrize("version", [1, 2])
def test_a_long_streamed_run_prints_exactly_the_whole_traces_json(version: int) -> None:
    """S3 NODELAY at 1,000 messages: 150,000 records handed over in dozens of batches,
    ~10 MB of text moved to temporary files on the way."""
    sc = _s3(1000)
    whole = run_sim(sc)
    stream = TraceStream(version)
    tail = run_sim(sc, stream=stream)
    # what the run still holds at its end: the records since the last hand-over
    assert _held(tail) < 2 * HAND_OVER_RECORDS
    assert sum(stream.counts) + _held(tail) == _held(whole)
    assert all(spool.file is not None for spool in stream.spools)
    out = io.StringIO()
    stream.finish(tail, out)
    assert out.getvalue() == whole.dumps(version=version)


def test_a_streamed_run_holds_a_bounded_part_of_the_trace() -> None:
    """Traced memory of the run itself: the whole trace grows with the run, the streamed
    one stays at a few batches' worth (measured: 25 MB against 5 MB at 2,000 NODELAY
    messages, pure build, when the stream kept 4 MB of text in memory; it keeps 1 MB)."""
    sc = _s3(1000)
    tracemalloc.start()
    try:
        whole = run_sim(sc)
        whole_peak = tracemalloc.get_traced_memory()[1]
        del whole
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        stream = TraceStream()
        tail = run_sim(sc, stream=stream)
        streamed_peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert sum(stream.counts) > 70_000
    assert streamed_peak < whole_peak / 3, (streamed_peak >> 20, whole_peak >> 20)
    assert _held(tail) < 2 * HAND_OVER_RECORDS


@pytest.mark.parametrize(("name", "text", "outcome"), [
    ("deadlock", '[client]\nscript = "write 10; read 10"\n[server]\nscript = "read 20"\n',
     "deadlock"),
    ("error", '[client]\nscript = "write 10; read 10"\n'
     '[server]\nscript = "read 10; close"\n', "error"),
])
def test_a_run_that_does_not_end_ok_streams_the_same_json(name: str, text: str,
                                                          outcome: str) -> None:
    sc = scenario.loads(text, f"{name}.toml")
    whole = run_sim(sc)
    assert whole.outcome.value == outcome
    for version in (1, 2):
        got, tail, _ = _streamed(sc, version)
        assert got == whole.dumps(version=version)
        assert tail.outcome == whole.outcome and tail.message == whole.message


def test_the_record_limit_counts_the_records_already_handed_over() -> None:
    """A streamed run stops at the same record as a whole one, past many hand-overs."""
    sc = _s3(400)
    whole = run_sim(sc, record_limit=20_000)
    assert whole.outcome.value == "limit"
    got, tail, stream = _streamed(sc, record_limit=20_000)
    assert tail.message == whole.message
    assert got == whole.dumps()
    assert sum(stream.counts) == _held(whole)


def test_every_golden_case_streams_to_the_same_json() -> None:
    """Every lesson, what-if and seed scenario (tests/golden): records of every kind the
    model makes, each format."""
    for case in cases():
        whole = run_sim(case.scenario)
        for version in (1, 2):
            got, _, _ = _streamed(case.scenario, version)
            assert got == whole.dumps(version=version), case.name


def _hand(version: int, batches: list[tuple[str, list[Any]]], trace: Trace) -> str:
    stream = TraceStream(version)
    for kind, records in batches:
        getattr(stream, kind)(records)
    out = io.StringIO()
    stream.finish(trace, out)
    return out.getvalue()


@pytest.mark.parametrize("version", [1, 2])
def test_a_later_segment_that_changes_a_codes_sentence_rewrites_the_events_before_it(
        version: int) -> None:
    """The /2 table takes a code's sentence from its first segment, even one that comes
    after events with that code and another sentence: events already written are
    rewritten (the simulator never does this; records from elsewhere may)."""
    def ev(t: int, code: str, reason: str) -> EventRecord:
        return EventRecord(t=t, side=Side.CLIENT, kind="hold", code=code, reason=reason,
                           detail="d" if t % 2 else "", data={"n": t} if t % 3 else {})

    def seg(t: int, code: str, why: str) -> SegmentRecord:
        return SegmentRecord(t=t, src=Side.SERVER, seq=t, ack=1, length=2, flags="PA",
                             window=100, arrive=t + 5, why=why, code=code)
    early = [ev(1, "X", "from an event"), ev(2, "X", "from the segment"),
             ev(3, "Y", "why y"), ev(4, "X", "from an event")]
    segments = [seg(5, "Z", "why z"), seg(6, "X", "from the segment"), seg(7, "X", "other")]
    late = [ev(8, "X", "from the segment"), ev(9, "X", "from an event"), ev(10, "Z", "zz")]
    ops = [OpRecord(side=Side.CLIENT, op="write", arg="2", start=1, end=2, line=1)]
    whole = Trace(source=Source.SIM, title="table", segments=segments, ops=ops,
                  events=early + late)
    want = whole.dumps(version=version)
    head = Trace(source=Source.SIM, title="table")
    assert _hand(version, [("events", early), ("ops", ops), ("segments", segments),
                           ("events", late)], head) == want
    assert _hand(version, [("events", early[:2]), ("events", early[2:]),
                           ("segments", segments[:1]), ("segments", segments[1:]),
                           ("events", late), ("ops", ops)], head) == want
    # records the trace still holds are handed over by `finish`
    rest = Trace(source=Source.SIM, title="table", segments=segments[1:], ops=ops,
                 events=late)
    assert _hand(version, [("events", early), ("segments", segments[:1])], rest) == want
    if version == 2:
        assert json.loads(want)["reasons"]["X"] == "from the segment"


def test_the_temporary_files_have_no_name_and_a_missing_directory_keeps_text_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sc = _s3(300)
    want = run_sim(sc).dumps()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stream = TraceStream()
    tail = run_sim(sc, stream=stream)
    assert all(spool.file is not None for spool in stream.spools)
    assert list(tmp_path.iterdir()) == []          # unnamed: nothing left if killed
    out = io.StringIO()
    stream.finish(tail, out)
    assert out.getvalue() == want
    assert all(spool.file is None or spool.file.closed for spool in stream.spools)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    got, _, stream = _streamed(sc)
    assert got == want
    assert all(spool.file is None for spool in stream.spools)


def test_run_json_prints_the_streamed_trace(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s3.toml"
    path.write_text(_S3.format(n=300, nodelay="true"), "utf-8")
    for version in ("1", "2"):
        assert main(["run", str(path), "--json", "--trace-format", version]) == 0
        printed = capsys.readouterr().out
        assert printed == run_sim(scenario.load(path)).dumps(version=int(version)) + "\n"
    assert main(["run", str(path), "--json", "--record-limit", "9000"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["outcome"] == "limit"
    assert "9,000 records" in captured.err
