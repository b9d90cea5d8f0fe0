"""The two trace formats (issue 17): `nagle-sim-trace/2` states each reason sentence once in
a ``reasons`` table and records refer to it by code; `/1` repeats it in every record. The
writer writes /2 unless asked for /1; every reader (`Trace.load`, ``show``, ``export``,
``compare``) reads both into the same trace; the streamed writer prints exactly what
``json.dumps`` of the document would.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nagle_sim import scenario
from nagle_sim.__main__ import main
from nagle_sim.model.events import Side
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import (
    EventRecord,
    OpRecord,
    Outcome,
    SegmentRecord,
    Trace,
    TraceError,
)

DATA = Path(__file__).parent / "data"
S1 = DATA / "s1_write_write_read.toml"
LESSONS = sorted((Path(__file__).parents[1] / "lessons").glob("*/scenario.toml"))


@pytest.fixture(scope="module")
def s1() -> Trace:
    return run_sim(scenario.load(S1))


def _odd_trace() -> Trace:
    """Every optional field, text JSON must escape, a code seen with two sentences, records
    with a sentence but no code and a code but no sentence."""
    odd = 'quote " backslash \\ tab \t newline \n é ✓ 𝄞'
    return Trace(
        source="realnet", title=odd, message=odd, outcome=Outcome.ERROR,
        meta={"nested": {"list": [1, 2.5, None, True]}, "text": odd},
        segments=[
            SegmentRecord(t=0, src=Side.CLIENT, seq=0, ack=0, length=0, flags="S"),
            SegmentRecord(t=1, src=Side.SERVER, seq=0, ack=1, length=0, flags="SA",
                          window=65535, arrive=2, why="first sentence", code="X"),
            SegmentRecord(t=3, src=Side.CLIENT, seq=1, ack=1, length=6, flags="PA",
                          arrive=None, why="second sentence " + odd, code="X"),
            SegmentRecord(t=4, src=Side.CLIENT, seq=7, ack=1, length=2, flags="PA",
                          why="no code", code=""),
            SegmentRecord(t=5, src=Side.CLIENT, seq=9, ack=1, length=2, flags="PA",
                          why="", code="LOST"),
            SegmentRecord(t=2**40 + 7, src=Side.SERVER, seq=2**62, ack=9, length=0,
                          flags="FA", why="first sentence", code="X"),
        ],
        ops=[
            OpRecord(side=Side.CLIENT, op="write", arg=odd, start=1, end=None, line=3,
                     iteration=(0, 12), loop=2, result=odd),
            OpRecord(side=Side.SERVER, op="read", arg="2", start=1_234_567, end=1_234_999),
            OpRecord(side=Side.SERVER, op="read", arg="2", start=-(10**13),
                     end=1234.5),           # type: ignore[arg-type]  # a float time
        ],
        events=[
            EventRecord(t=1, side=Side.SERVER, kind="hold", code="X",
                        reason="first sentence", detail=odd),
            EventRecord(t=2, side=Side.SERVER, kind="hold", code="X", reason="other " + odd),
            EventRecord(t=3, side=Side.CLIENT, kind="mode", code="", reason="no code"),
            EventRecord(t=4, side=Side.CLIENT, kind="mode", code="EMPTY", reason=""),
            EventRecord(t=5, side=Side.CLIENT, kind="timer_armed", code="Y",
                        reason="only in events", timer="delack", deadline=44_000,
                        data={"cwnd": 10, "négatif": -3}),
            # a decision the kernel was observed taking (nagle-sim watch, real runs)
            EventRecord(t=6, side=Side.SERVER, kind="ack_delayed", code="DELACK_WAIT",
                        reason="the kernel's", timer="delack", deadline=46_000,
                        data={"ato_j": 10}, by="kernel"),
            EventRecord(t=7, side=Side.CLIENT, kind="hold", code="X", reason="first sentence",
                        by="kernel"),
        ])


def _traces() -> list[tuple[str, Trace]]:
    return [("odd", _odd_trace()), ("s1", run_sim(scenario.load(S1))),
            ("lesson", run_sim(scenario.load(LESSONS[-1])))]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(("name", "trace"), _traces())
def test_streamed_writer_is_byte_identical_and_reads_back(name: str, trace: Trace,
                                                         version: int) -> None:
    """`write_json` formats records itself (no dict per record) yet writes exactly
    ``dumps()``, and either format reads back to the same trace."""
    out = io.StringIO()
    trace.write_json(out, version=version)
    assert out.getvalue() == trace.dumps(version=version)
    assert json.loads(out.getvalue()) == json.loads(json.dumps(trace.to_json(version)))
    back = Trace.loads(out.getvalue(), f"{name}.json")
    assert back.to_json(1) == json.loads(json.dumps(trace.to_json(1)))
    assert back.dumps(version=version) == out.getvalue()


def test_streamed_writer_batches_many_records() -> None:
    """More records than one write batch: the joins between batches are right too."""
    seg = SegmentRecord(t=1, src=Side.CLIENT, seq=1, ack=1, length=2, flags="PA",
                        arrive=3, why="w", code="W")
    trace = Trace(source="sim", title="many", segments=[seg] * 5000)
    out = io.StringIO()
    trace.write_json(out)
    assert out.getvalue() == trace.dumps()
    assert len(Trace.loads(out.getvalue()).segments) == 5000


def _cache_trace() -> Trace:
    """Records that tempt each of the writer's caches (docs in ``_RecordWriter``) to give
    one record's text to another: one sentence under two codes, and a code with two
    sentences; equal and unequal ``data`` dicts, one changed between two writes; the
    same loop indexes in a new tuple, then others; times in and out of one whole ms."""
    shared = {"cwnd": 10}

    def seg(t: int, why: str, code: str) -> SegmentRecord:
        return SegmentRecord(t=t, src=Side.CLIENT, seq=t, ack=1, length=t % 3,
                             flags="PA", window=t, arrive=t + 999, why=why, code=code)

    def op(t: int, iteration: tuple[int, ...], loop: int) -> OpRecord:
        return OpRecord(side=Side.SERVER, op="read", arg=str(t), start=t, end=t + 1,
                        line=t, iteration=iteration, loop=loop)

    def ev(t: int, data: dict[str, int], code: str = "A", reason: str = "a",
           side: Side = Side.SERVER, kind: str = "mode", detail: str = "",
           timer: str | None = None) -> EventRecord:
        return EventRecord(t=t, side=side, kind=kind, code=code, reason=reason,
                           detail=detail, timer=timer, data=data)
    return Trace(
        source="sim", title="caches",
        segments=[seg(999, "s", "A"), seg(1000, "s", "B"), seg(1001, "s", "A"),
                  seg(1002, "t", "A"), seg(1003, "s", ""), seg(10**15 + 5, "s", "A")],
        ops=[op(1, (0, 1), 1), op(2, (0, 1), 1), op(3, (0, 2), 1), op(4, (0, 2), 2),
             op(5, (1,), 3), op(6, (), 0), op(7, (0, 2), 2), op(2000, (999, 1000), 1000),
             op(1, (0, 1), 1), op(8, (1, 2, 3), 4),
             OpRecord(side=Side.CLIENT, op="read", arg="1", start=1, end=None, result="r")],
        events=[ev(1, shared), ev(2, {"cwnd": 10}), ev(3, {"cwnd": 11}), ev(4, shared),
                ev(5, {}), ev(6, shared, "A", "other"), ev(7, {"cwnd": 1, "x": -2}),
                ev(8, {}, "B", "a"), ev(9, {}, side=Side.CLIENT), ev(10, {}, kind="hold"),
                ev(11, {}, detail="d"), ev(12, {}, timer="delack"),
                ev(13, {}, timer=""), ev(14, {}, "", "a"), ev(15, {})])


@pytest.mark.parametrize("version", [1, 2])
def test_the_writers_caches_never_reuse_one_records_text_for_another(version: int) -> None:
    trace = _cache_trace()
    out = io.StringIO()
    trace.write_json(out, version=version)
    assert out.getvalue() == trace.dumps(version=version)
    trace.events[0].data["cwnd"] = 12              # a new write sees the change
    out = io.StringIO()
    trace.write_json(out, version=version)
    assert out.getvalue() == trace.dumps(version=version)
    assert '"data": {"cwnd": 12}' in out.getvalue()
    # an op with empty text first: nothing cached yet may pass for its text
    empty = Trace(source="sim", title="", ops=[
        OpRecord(side=Side.CLIENT, op="", arg="", start=0, end=0),
        OpRecord(side=Side.SERVER, op="", arg="", start=0, end=0)])
    out = io.StringIO()
    empty.write_json(out, version=version)
    assert out.getvalue() == empty.dumps(version=version)


def test_v2_states_each_sentence_once(s1: Trace) -> None:
    v1, v2 = s1.dumps(version=1), s1.dumps()
    doc = json.loads(v2)
    assert doc["format"] == "nagle-sim-trace/2"
    assert set(doc["reasons"]) == {e.code for e in s1.events} | {
        s.code for s in s1.segments if s.why}
    repeats = 0
    for code, sentence in doc["reasons"].items():
        assert v2.count(json.dumps(sentence, ensure_ascii=False)) == 1, code
        repeats += v1.count(json.dumps(sentence, ensure_ascii=False))
    assert repeats > 3 * len(doc["reasons"])
    assert not any("reason" in e for e in doc["events"])
    assert not any("why" in s for s in doc["segments"])
    assert len(v2.encode()) < 0.85 * len(v1.encode())


def test_v2_keeps_a_second_sentence_for_one_code_in_the_record() -> None:
    doc = json.loads(_odd_trace().dumps())
    assert doc["reasons"] == {"X": "first sentence", "Y": "only in events", "EMPTY": "",
                              "DELACK_WAIT": "the kernel's"}
    whys = [s.get("why") for s in doc["segments"]]
    assert whys[1] is None and whys[2].startswith("second") and whys[3] == "no code"
    odd = _odd_trace().title
    assert [e.get("reason") for e in doc["events"]] == [None, "other " + odd, "no code",
                                                        None, None, None, None]


def _v2_doc(**changes: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "format": "nagle-sim-trace/2", "source": "sim", "title": "t", "outcome": "ok",
        "message": "", "meta": {}, "reasons": {"APP_WRITE": "the app wrote"},
        "segments": [{"t_ms": 0.0, "from": "client", "seq": 1, "ack": 1, "len": 2,
                      "flags": "PA", "code": "APP_WRITE"}],
        "ops": [],
        "events": [{"t_ms": 0.0, "side": "client", "kind": "hold", "code": "APP_WRITE"}]}
    doc.update(changes)
    return doc


def test_v2_records_take_their_sentence_from_the_table() -> None:
    trace = Trace.from_json(_v2_doc())
    assert trace.segments[0].why == trace.events[0].reason == "the app wrote"
    assert trace.segments[0].code == trace.events[0].code == "APP_WRITE"


@pytest.mark.parametrize(("changes", "message"), [
    ({"reasons": ["x"]}, r"^t\.json: reasons: expected an object, got an array$"),
    ({"reasons": {"APP_WRITE": ["x"]}}, r"^t\.json: reasons\.APP_WRITE: expected text"),
    ({"reasons": {"APP_WRITE": "a\x1bb"}}, r"reasons\.APP_WRITE: text holds the control"),
    ({"reasons": {}}, r"^t\.json: segments\[0\]\.code: 'APP_WRITE' is not in the reasons "
                      r"table$"),
    ({"reasons": {"OTHER": "x"}, "segments": []},
     r"^t\.json: events\[0\]\.code: 'APP_WRITE' is not in the reasons table$"),
    ({"format": "nagle-sim-trace/3"},
     r"^t\.json: not a nagle-sim-trace/1 or nagle-sim-trace/2 trace$"),
])
def test_a_bad_v2_table_is_a_one_line_error(changes: dict[str, object], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        Trace.from_json(_v2_doc(**changes), "t.json")


def test_v1_documents_still_read() -> None:
    doc = _v2_doc(format="nagle-sim-trace/1", reasons="ignored in /1")
    doc["segments"][0]["why"] = "a why"      # type: ignore[index]
    doc["events"][0]["reason"] = "a reason"  # type: ignore[index]
    trace = Trace.from_json(doc)
    assert (trace.segments[0].why, trace.events[0].reason) == ("a why", "a reason")


def test_writing_an_unknown_version_is_refused(s1: Trace) -> None:
    with pytest.raises(ValueError, match="use 1 or 2"):
        s1.dumps(version=3)


# ---------------------------------------------------------------- the CLI and readers
def _run_json(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["run", str(S1), "--json", *extra]) == 0
    return capsys.readouterr().out


def test_run_json_writes_v2_and_v1_on_request(s1: Trace,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_json(capsys) == s1.dumps() + "\n"
    assert _run_json(capsys, "--trace-format", "1") == s1.dumps(version=1) + "\n"


def test_an_unknown_trace_format_option_is_a_one_line_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", str(S1), "--json", "--trace-format", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--trace-format" in err and len(err.strip().splitlines()) == 1


def test_show_and_export_read_both_formats(s1: Trace, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {}
    for version in (1, 2):
        path = tmp_path / f"s1-v{version}.json"
        path.write_text(s1.dumps(version=version), "utf-8")
        assert main(["show", str(path), "--width", "140", "--all"]) == 0
        ladder = capsys.readouterr().out
        assert main(["show", str(path), "--json"]) == 0
        again = capsys.readouterr().out
        csv = tmp_path / f"s1-v{version}.csv"
        assert main(["export", str(path), "--csv", str(csv)]) == 0
        capsys.readouterr()
        outputs[version] = (ladder, again, csv.read_text("utf-8"))
    assert outputs[1][0] == outputs[2][0] and "Nagle holds" in outputs[1][0]
    assert outputs[1][2] == outputs[2][2]
    assert outputs[1][1] == outputs[2][1] == s1.dumps() + "\n"   # show --json writes /2
    assert main(["export", str(S1), "--json", str(tmp_path / "e.json")]) == 0
    assert (tmp_path / "e.json").read_text("utf-8") == s1.dumps() + "\n"   # streamed too


# ---------------------------------------------------------------- the reader's fast path
_ODD = [None, True, False, 0, 1, -1, 65535, 2**63 - 1, 2**63, -(2**63), 0.5, -0.5, 1e10,
        1e11, float("nan"), float("inf"), "", "client", "server", "PA", "X", "Y", "write",
        "a\x1bb", "tab\tok", "x" * 16_384, "x" * 16_385, [], [0, 1], [1, -1], [True],
        [0] * 65, {}, {"k": 1}, {"k": True}, {"k": -(2**63)}, {"k": "1"}, {"\x07": 1}]
_VALUES = st.one_of(st.sampled_from(_ODD), st.integers(-(2**64), 2**64), st.floats(),
                    st.text(max_size=3))
_FIELDS = {
    "segments": {"t_ms": 1.5, "from": "client", "seq": 1, "ack": 1, "len": 2, "flags": "PA",
                 "win": 10, "arrive_ms": 2.0, "why": "w", "code": "X"},
    "ops": {"side": "server", "op": "read", "arg": "2", "start_ms": 0.0, "end_ms": 1.0,
            "line": 3, "iter": [0, 1], "loop": 1, "result": "r"},
    "events": {"t_ms": 0.1, "side": "client", "kind": "hold", "code": "X", "reason": "r",
               "detail": "d", "timer": "delack", "deadline_ms": 40.0, "data": {"a": 1}},
}


@settings(max_examples=800)
@given(kind=st.sampled_from(sorted(_FIELDS)), v2=st.booleans(), data=st.data())
def test_the_fast_reader_agrees_with_the_checked_one(kind: str, v2: bool,
                                                     data: st.DataObject) -> None:
    """Whatever record the fast path accepts, the checked path reads the same; what the
    checked path refuses, the fast path never accepts."""
    from nagle_sim.trace import codec as tr
    keys = sorted(_FIELDS[kind]) + ["extra"]
    drop = data.draw(st.sets(st.sampled_from(keys), max_size=2))
    changes = data.draw(st.dictionaries(st.sampled_from(keys), _VALUES, max_size=2))
    record = {k: v for k, v in _FIELDS[kind].items() if k not in drop} | changes
    reasons = {"X": "x sentence", "": "never used"} if v2 else None
    fast = {"segments": lambda: tr._segment_fast(record, reasons, set()),
            "ops": lambda: tr._op_fast(record, set()),
            "events": lambda: tr._event_fast(record, reasons, set())}[kind]()
    checked: Callable[[], object] = {
        "segments": lambda: tr._segment_checked(record, reasons, "r"),
        "ops": lambda: tr._op_checked(record, "r"),
        "events": lambda: tr._event_checked(record, reasons, "r")}[kind]
    try:
        slow = checked()
    except TraceError:
        assert fast is None
    else:
        assert fast is None or fast == slow


# ---------------------------------------------------------------- compact records
def test_event_records_share_equal_details_and_data() -> None:
    """Big runs repeat a few hundred details and data values: records share them (equal
    text and dicts, never merging ``True`` with ``1``, which print differently)."""
    from nagle_sim.model.events import Kind, Micros, Reason, TraceEvent

    def record(detail: str, data: dict[str, int]) -> EventRecord:
        event = TraceEvent(at=Micros(1), side=Side.CLIENT, kind=Kind.MODE,
                           reason=Reason.HANDSHAKE, detail=detail, data=data)
        return EventRecord.from_model(event)

    made = "".join(["ato ", "40 ms"])          # built at run time, as the model does
    a, b = record(made, {"ato": 40}), record("".join(["ato 4", "0 ms"]), {"ato": 40})
    assert a.detail is b.detail and a.data is b.data == {"ato": 40}
    flag = record("", {"ato": True})            # type: ignore[dict-item]
    assert flag.data is not a.data and json.dumps(flag.data) == '{"ato": true}'
    assert record("", {}).data == {} and record("", {}).data is record("x", {}).data


def test_a_kernel_decision_is_marked_and_reads_back() -> None:
    """``"by": "kernel"`` marks a decision the running kernel took (docs/trace.md); a
    model event has no ``by``; both readers keep it."""
    trace = _odd_trace()
    doc = json.loads(trace.dumps())
    by = [e.get("by") for e in doc["events"]]
    assert by == [None, None, None, None, None, "kernel", "kernel"]
    back = Trace.loads(trace.dumps(), "k.json")
    assert [e.by for e in back.events] == ["", "", "", "", "", "kernel", "kernel"]
    doc["events"][5]["by"] = ["kernel"]
    with pytest.raises(TraceError, match=r"events\[5\]\.by: expected text"):
        Trace.loads(json.dumps(doc), "k.json")
