"""Issue 9's reproducers, one test each: hostile or huge input gives a one-line error
(exit 2) checked before running, or a run bounded in time and memory — never a traceback,
a hang or markup interpreted from user text."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dpkt
import pytest

from nagle_sim import scenario
from nagle_sim.__main__ import main
from nagle_sim.export import ExportError, export_cli, ladder_scene, pcap, png
from nagle_sim.export.scene import MAX_LABEL, Scene, SceneTooBig, Text
from nagle_sim.scenario import (
    MAX_FILE_BYTES,
    MAX_NESTING,
    MAX_STATEMENTS,
    ScenarioError,
    count_ops,
    loads,
    parse_script,
)
from nagle_sim.scenario.steps import steps
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import MAX_TEXT, Outcome, Trace, TraceError

DATA = Path(__file__).parent / "data"
S1 = DATA / "s1_write_write_read.toml"


def _trace_doc(**changes: object) -> dict[str, object]:
    seg = {"t_ms": 0.0, "from": "client", "seq": 0, "ack": 0, "len": 0, "flags": "S"}
    op = {"side": "client", "op": "write", "arg": "1", "start_ms": 0.0, "end_ms": 0.1}
    seg.update(changes.pop("seg", {}))   # type: ignore[arg-type]
    op.update(changes.pop("op", {}))     # type: ignore[arg-type]
    doc: dict[str, object] = {"format": "nagle-sim-trace/1", "source": "sim", "title": "t",
                              "outcome": "ok", "message": "", "meta": {}, "segments": [seg],
                              "ops": [op], "events": []}
    doc.update(changes)
    return doc


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit status, stderr) of the CLI run in-process; argparse's SystemExit included."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    return code, err


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str],
                    fragment: str) -> str:
    code, err = _cli(argv, capsys)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err, err
    return err


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return str(path)


# ---------------------------------------------------------------- markup in user text
def test_markup_in_a_file_name_is_printed_as_it_is(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(["run", str(tmp_path / "[/].toml")], capsys, "[/].toml: no such file")


def test_markup_in_a_toml_key_is_printed_as_it_is(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "k.toml", '"[/x]" = 1\n')
    _one_line_error(["run", path], capsys, "[/x]: unknown key")


def test_markup_in_a_set_option_is_printed_as_it_is(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    _one_line_error(["run", str(S1), "--set", '=="[/]"'], capsys, "--set '==\"[/]\"': bad key")


def test_markup_in_a_trace_is_refused_or_shown_verbatim(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    bad = _write(tmp_path, "b.json", json.dumps(_trace_doc(seg={"from": "[/]"})))
    _one_line_error(["show", bad], capsys, "segments[0].from: expected \"client\" or")
    odd = _write(tmp_path, "o.json", json.dumps(_trace_doc(title="[/] [bold]x", message="[/]",
                                                           op={"op": "[/x]"})))
    assert main(["show", odd, "--width", "120"]) == 0
    out = capsys.readouterr().out
    assert "[/] [bold]x" in out and "[/x]" in out


# ---------------------------------------------------------------- numbers
def test_a_400_digit_integer_is_a_one_line_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "i.toml", "[link]\nmss = " + "9" * 400 + "\n")
    _one_line_error(["run", path], capsys, "i.toml:2: link.mss: expected a number of at most "
                                           "10^12, got a 400-digit number")


def test_a_5000_digit_integer_is_a_one_line_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "i.toml", "[link]\nmss = " + "9" * 5000 + "\n")
    _one_line_error(["run", path], capsys, "i.toml: invalid TOML: Exceeds the limit")
    with pytest.raises(ScenarioError, match="link.mss: expected a number, got '9999"):
        loads(S1.read_text(), "s1.toml", overrides=["link.mss=" + "9" * 5000])


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("t_ms", "1e400", "segments[0].t_ms: time inf ms is not a finite number"),
    ("t_ms", "NaN", "segments[0].t_ms: time nan ms"),
    ("seq", "1" + "0" * 30, "segments[0].seq: 1000000000000000000000000000000 is out of range"),
    ("len", "-1", "segments[0].len: -1 is out of range"),
    ("from", "7", "segments[0].from: expected \"client\" or \"server\", got 7"),
])
def test_bad_trace_numbers_are_one_line_errors(tmp_path: Path, field: str, value: str,
                                               fragment: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(_trace_doc(seg={field: "@@"})).replace('"@@"', value)
    _one_line_error(["show", _write(tmp_path, "t.json", text)], capsys, fragment)


_TIME_FIELDS = [("seg", "t_ms"), ("seg", "arrive_ms"), ("op", "start_ms"), ("op", "end_ms"),
                ("event", "t_ms"), ("event", "deadline_ms")]


@pytest.mark.parametrize(("record", "field"), _TIME_FIELDS,
                         ids=[f"{r}.{f}" for r, f in _TIME_FIELDS])
@pytest.mark.parametrize("value", ["1" + "0" * 400, "-1" + "0" * 400, "9" * 4000])
def test_a_huge_integer_time_in_a_trace_is_a_one_line_error(
        tmp_path: Path, record: str, field: str, value: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29.5: 10**400 in a time field raised OverflowError (math.isfinite converts
    the int to a float) instead of the one-line error."""
    event = {"t_ms": 0.0, "side": "client", "kind": "k", "code": "", "reason": "r"}
    doc = _trace_doc(events=[event], **{record: {field: "@@"}} if record != "event" else {})
    if record == "event":
        event[field] = "@@"
    text = json.dumps(doc).replace('"@@"', value)
    _one_line_error(["show", _write(tmp_path, "t.json", text)], capsys,
                    f"{field}: time a number of more than 60 digits ms is not a finite number")


_HOSTILE_JSON = ["1" + "0" * 400, "-1" + "0" * 400, "1e400", "-1e400", "NaN", "Infinity",
                 "-Infinity", str(2**64), "-1", "1.5", '"5"', "true", "null", "[1]", "{}",
                 "[[[[[[1]]]]]]"]


@pytest.mark.parametrize("value", _HOSTILE_JSON)
def test_every_field_of_a_saved_trace_takes_any_json_value_without_a_traceback(
        tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every field of every record kind and of the document (also the ones a reader may
    leave out), given each hostile JSON value: `show` prints the trace (exit 0) or one
    line (exit 2); never an exception. The trace codec checks them all (issue 29.5)."""
    event = {"t_ms": 0.0, "side": "client", "kind": "k", "code": "", "reason": "r",
             "detail": "", "timer": "delack", "deadline_ms": 1.0, "data": {"ato": 40}}
    base = _trace_doc(events=[event], seg={"arrive_ms": 0.5, "win": 10, "why": "w",
                                           "code": ""},
                      op={"line": 1, "iter": [0], "loop": 1, "result": "ok"})
    paths: list[tuple[object, ...]] = [(k,) for k in base if k not in ("segments", "ops",
                                                                       "events")]
    paths += [("meta", "mss")]
    for kind in ("segments", "ops", "events"):
        record = base[kind][0]     # type: ignore[index]
        paths += [(kind, 0, k) for k in record]
    paths += [("events", 0, "data", "ato"), ("ops", 0, "iter", 0)]
    for path in paths:
        doc = json.loads(json.dumps(base))
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = "@@"
        text = json.dumps(doc).replace('"@@"', value)
        code, err = _cli(["show", _write(tmp_path, "t.json", text)], capsys)
        assert code in (0, 2), (path, err)
        assert "Traceback" not in err, (path, err)
        if code == 2:
            assert err.startswith("error: ") and err.count("\n") == 1, (path, err)


def test_a_non_integer_loop_index_in_a_trace_is_refused(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    path = _write(tmp_path, "t.json", json.dumps(_trace_doc(op={"iter": ["a"]})))
    _one_line_error(["show", path], capsys, "ops[0].iter: expected a whole number, got 'a'")


@pytest.mark.parametrize("value", ['"finished"', "[]"])
def test_an_unknown_outcome_in_a_trace_is_refused(tmp_path: Path, value: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(_trace_doc(outcome="@@")).replace('"@@"', value)
    _one_line_error(["show", _write(tmp_path, "t.json", text)], capsys,
                    'outcome: expected one of "ok", "deadlock", "error", "limit"')


def test_a_trace_outcome_reads_back_as_the_enum() -> None:
    trace = Trace.from_json(_trace_doc(outcome="deadlock"))
    assert trace.outcome is Outcome.DEADLOCK
    assert json.loads(trace.dumps())["outcome"] == "deadlock"


# ---------------------------------------------------------------- nesting
def _nested(depth: int) -> str:
    text = "write 1\n"
    for _ in range(depth):
        text = f"repeat 1 {{\n{text}}}\n"
    return text


def test_repeat_nesting_is_limited_and_parsed_without_recursion() -> None:
    body = parse_script(_nested(MAX_NESTING))
    assert [(step.arg, len(step.iteration)) for step in steps(body)] == [("1", MAX_NESTING)]
    with pytest.raises(ScenarioError, match=f"nest more than {MAX_NESTING} deep"):
        parse_script(_nested(MAX_NESTING + 1))


def test_500_nested_repeats_are_a_one_line_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "n.toml", f'[client]\nscript = """\n{_nested(500)}"""\n')
    _one_line_error(["run", path], capsys, f":{3 + MAX_NESTING}: 'repeat' blocks nest more")


def test_walkers_handle_deep_scripts_built_without_the_parser() -> None:
    """The TUI or a test may build statements directly: walking them must not recurse."""
    body: tuple[scenario.Statement, ...] = (scenario.Write(1, 5),)
    for _ in range(5000):
        body = (scenario.Repeat(1, 1, body),)
    assert count_ops(body) == 1
    assert [len(step.iteration) for step in steps(body)] == [5000]
    assert list(scenario.outermost_loops(body).values()) == [1]


def test_deep_toml_is_a_one_line_error(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "d.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _one_line_error(["run", path], capsys, "invalid TOML: values nest more than")
    shallow_but_deep = "x = " + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "\n"
    with pytest.raises(ScenarioError, match="nest more than"):
        loads(shallow_but_deep)


def test_deep_json_is_a_one_line_error(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(_trace_doc(meta={"a": "@@"})).replace(
        '"@@"', "[" * 100_000 + "]" * 100_000)
    _one_line_error(["show", _write(tmp_path, "d.json", text)], capsys,
                    "JSON nests more than 64 deep")
    text = json.dumps(_trace_doc(meta={"a": "@@"})).replace('"@@"', "[" * 70 + "]" * 70)
    with pytest.raises(TraceError, match="nests more than"):
        Trace.loads(text)


# ---------------------------------------------------------------- loops and statement limit
@pytest.mark.parametrize("command", ["run", "compare", "export"])
def test_an_endless_empty_loop_is_refused_before_running(tmp_path: Path, command: str,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    path = _write(tmp_path, "e.toml", '[client]\nscript = "repeat 1000000000 { }"\n')
    extra = ["--svg", str(tmp_path / "e.svg")] if command == "export" else []
    _one_line_error([command, path, *extra], capsys, "e.toml:2: script runs more than "
                    f"{MAX_STATEMENTS:,} statements and loop iterations")


def test_a_loop_that_runs_nothing_is_passed_over_not_spun() -> None:
    """A loop whose body runs no statement at any depth is skipped whole by the script
    walker: spun, its iterations would run inside one ``next()`` that a cancelled run (the
    app's esc, a classroom tab that left) could not interrupt. Built without the parser,
    past its statement bound: spinning 10^8 empty iterations takes a minute or more."""
    dead = scenario.Repeat(1, 10**8, (scenario.Repeat(1, 1, ()), scenario.Repeat(1, 0, (
        scenario.Write(1, 1),))))
    start = time.perf_counter()
    assert list(steps((dead,))) == []
    with_dead = [(s.op, s.arg, s.iteration) for s in steps(parse_script(
        "repeat 2 { write 1; repeat 1000 { repeat 3 { } } ; repeat 0 { read 1 } }; close"))]
    assert with_dead == [("write", "1", (0,)), ("write", "1", (1,)), ("close", "", ())]
    assert time.perf_counter() - start < 30


def test_loop_iterations_count_even_when_empty() -> None:
    assert count_ops(parse_script("repeat 10 { }")) == 10
    assert count_ops(parse_script("repeat 10 { repeat 0 { write 1 } }")) == 10
    assert count_ops(parse_script("repeat 10 { write 1; write 2 }")) == 20
    assert count_ops(parse_script("repeat 0 { repeat 1000000000 { } }")) == 0
    start = time.perf_counter()
    assert list(steps(parse_script(f"repeat {MAX_STATEMENTS} {{ }}"))) == []
    assert time.perf_counter() - start < 30     # skipped, not spun a million times


def test_a_tiny_file_cannot_ask_for_twenty_million_writes(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    path = _write(tmp_path, "w.toml", '[client]\nscript = "repeat 20000000 { write 1 }"\n')
    _one_line_error(["run", path], capsys, "statements and loop iterations (limit 10,000,000")


def test_the_statement_bound_is_ten_million() -> None:
    """Room for S3 at 100,000 messages (issue 17's linearity check), and no more."""
    assert MAX_STATEMENTS == 10_000_000
    s3 = "repeat 100000 { set cork on; repeat 15 { write 2 }; set cork off; read 2 }"
    assert count_ops(parse_script(s3)) == 1_800_000
    with pytest.raises(ScenarioError, match="limit 10,000,000"):
        parse_script("repeat 10000001 { repeat 1 { } }")
    parse_script("repeat 10000000 { repeat 1 { } }")


def test_a_run_stops_when_its_trace_reaches_the_record_limit() -> None:
    # the server reads: a closed one would reset the connection at the first byte
    sc = loads('[client]\nnodelay = true\nscript = "repeat 5000 { write 1 }"\n'
               '[server]\nscript = "read 5000"\n')
    trace = run_sim(sc, record_limit=2000)
    assert trace.outcome is Outcome.LIMIT and "grew past 2,000 records" in trace.message
    assert len(trace.ops) + len(trace.segments) + len(trace.events) <= 2000 + 10


def test_a_big_write_makes_a_bounded_number_of_segments() -> None:
    """The timing of `write 200000000` is in benchmarks/fuzz_inputs.py; here only the
    segment count is pinned: one big write is about size / MSS segments, not more."""
    trace = run_sim(loads('[client]\nscript = "write 2000000"\n[server]\n'
                          'script = "read 2000000"\n'))
    data = [s for s in trace.segments if s.src.value == "client" and s.length]
    assert trace.outcome is Outcome.OK and sum(s.length for s in data) == 2_000_000
    assert len(data) <= 2_000_000 // 1448 + 2


# ---------------------------------------------------------------- input size
def test_a_huge_scenario_file_is_refused_before_parsing(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    path = tmp_path / "big.toml"
    with path.open("wb") as f:           # sparse: 80 MB on paper, nothing on disk
        f.truncate(80_000_000)
    start = time.perf_counter()
    _one_line_error(["run", str(path)], capsys, "80,000,000 bytes is too big (limit "
                                                f"{MAX_FILE_BYTES:,})")
    assert time.perf_counter() - start < 30
    with pytest.raises(ScenarioError, match="too big for a scenario"):
        loads("#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ScenarioError, match="script is .* characters"):
        parse_script("write 1\n" * (MAX_FILE_BYTES // 8 + 1))


def test_a_huge_trace_label_is_refused_on_read(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "l.json", json.dumps(_trace_doc(op={"op": "x" * 10_000_000})))
    _one_line_error(["export", path, "--png", str(tmp_path / "l.png")], capsys,
                    f"ops[0].op: 10,000,000 characters of text (limit {MAX_TEXT:,})")
    assert not (tmp_path / "l.png").exists()


def test_long_labels_are_cut_in_pictures() -> None:
    trace = Trace.from_json(_trace_doc(op={"op": "x" * MAX_TEXT}, title="y" * MAX_TEXT))
    scene = ladder_scene(trace)
    assert scene.width < 4000
    assert all(len(i.text) <= MAX_LABEL for i in scene.items if isinstance(i, Text))


# ---------------------------------------------------------------- non-regular files
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifos_are_refused_as_inputs_and_outputs(tmp_path: Path) -> None:
    fifo = tmp_path / "f.svg"
    os.mkfifo(fifo)
    toml_fifo = tmp_path / "f.toml"
    os.mkfifo(toml_fifo)
    json_fifo = tmp_path / "f.json"
    os.mkfifo(json_fifo)
    for argv, fragment in [
        (["export", str(S1), "--svg", str(fifo)], "not a regular file"),
        (["run", str(toml_fifo)], "not a regular file"),
        (["show", str(json_fifo)], "not a regular file"),
    ]:
        proc = subprocess.run([sys.executable, "-m", "nagle_sim", *argv], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


# ---------------------------------------------------------------- export paths and sizes
def test_two_outputs_to_one_path_are_refused(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a.svg"
    _one_line_error(["export", str(S1), "--svg", str(a), "--tseq", str(a)], capsys,
                    "--svg and --tseq both write")
    assert not a.exists()
    (tmp_path / "alias.svg").symlink_to(a)
    with pytest.raises(ExportError, match="both write"):
        export_cli(Trace(source="sim", title="x"), svg=a, tseq=tmp_path / "alias.svg")


def test_an_over_long_export_path_is_a_one_line_error(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    _one_line_error(["export", str(S1), "--svg", str(tmp_path / ("a" * 300 + ".svg"))],
                    capsys, "file name longer than 255 bytes")
    deep = str(tmp_path / "/".join(["b" * 200] * 30) / "x.svg")
    _one_line_error(["export", str(S1), "--svg", deep], capsys, "cannot write")


def test_a_tiny_png_scale_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(["export", str(S1), "--png", "x.png", "--png-scale", "0.0001"], capsys,
                    "argument --png-scale: expected 0.25 to 8, got 0.0001")
    with pytest.raises(ExportError, match="PNG scale must be from 0.25 to 8"):
        export_cli(Trace(source="sim", title="x"), png="/tmp/never.png", png_scale=0.01)


def test_png_size_is_bounded_before_any_pixel_is_allocated() -> None:
    tall = Scene(width=1500, height=600_000)
    with pytest.raises(SceneTooBig, match=r"1,500 × 600,000 px \(limit 20 Mpx"):
        png.render(tall)
    wide = Scene(width=70_000, height=10)
    with pytest.raises(SceneTooBig, match="65,000 px a side"):
        png.render(wide)


def test_a_long_run_as_png_is_refused_with_a_hint(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    trace = run_sim(scenario.load(S1))
    monkeypatch.setattr(png, "MAX_PIXELS", 2_000_000)     # the whole run: 10 Mpx
    with pytest.raises(ExportError, match="--until-ms"):
        export_cli(trace, png=tmp_path / "s1.png")
    assert not (tmp_path / "s1.png").exists()
    export_cli(trace, png=tmp_path / "s1.png", until_ms=0.05)   # cropped: small enough
    assert (tmp_path / "s1.png").stat().st_size > 0


def test_the_ladder_refuses_more_rows_than_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from nagle_sim.export import ladder
    trace = run_sim(scenario.load(S1))
    monkeypatch.setattr(ladder, "MAX_ROWS", 50)
    with pytest.raises(ExportError, match=r"rows \(limit 50\): draw part of the run"):
        ladder_scene(trace)
    assert ladder_scene(trace, until_ms=0.05).items


def _records(data: bytes) -> list[tuple[int, int, bytes]]:
    """(captured length, wire length, frame) of every pcap record."""
    out, pos = [], 24
    while pos < len(data):
        _, _, incl, orig = pcap._RECORD.unpack_from(data, pos)
        out.append((incl, orig, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out


def test_pcap_never_allocates_a_segments_claimed_length() -> None:
    trace = Trace.from_json(_trace_doc(seg={"len": 10**10, "flags": "PA"}))
    data = pcap.to_pcap(trace)
    [(incl, orig, frame)] = _records(data)
    assert len(data) < 70_000 and incl == len(frame) < 70_000
    assert orig == 2**32 - 1            # the wire length, capped to the record's field
    assert len(dpkt.ethernet.Ethernet(frame).data.data.data) == pcap.MAX_PAYLOAD


def test_a_huge_pcap_keeps_short_payloads_with_true_lengths(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    trace = run_sim(loads('[client]\nscript = "write 100000"\n[server]\n'
                          'script = "read 100000"\n'))
    monkeypatch.setattr(pcap, "FULL_FILE_BYTES", 10_000)
    records = _records(pcap.to_pcap(trace))
    assert len(records) == len(trace.segments)
    for (incl, orig, frame), seg in zip(records, sorted(trace.segments, key=lambda s: s.t),
                                        strict=True):
        ip = dpkt.ethernet.Ethernet(frame).data
        assert len(ip.data.data) == min(seg.length, pcap.SHORT_PAYLOAD)
        assert orig == 14 + ip.len and ip.len == 20 + ip.data.off * 4 + seg.length
        assert incl == len(frame) <= 14 + 60 + 12 + pcap.SHORT_PAYLOAD
    assert list(dpkt.pcap.Reader(io.BytesIO(pcap.to_pcap(trace))))   # dpkt still reads it


# ---------------------------------------------------------------- Ctrl-C
def test_ctrl_c_while_loading_is_one_line_and_130(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import nagle_sim.cli.options as cli

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "load_scenario", interrupted)
    assert main(["run", str(S1)]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_ctrl_c_inside_a_class_body_while_importing_is_one_line_and_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C landing in a dataclass field's __set_name__ while a module imports: Python
    3.11 wraps it in a RuntimeError (seen in CI at 0.5 s into start-up)."""
    import nagle_sim.cli.options as cli

    def interrupted(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Error calling __set_name__") from KeyboardInterrupt()
    monkeypatch.setattr(cli, "load_scenario", interrupted)
    assert main(["run", str(S1)]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a real bug")
    monkeypatch.setattr(cli, "load_scenario", broken)
    with pytest.raises(RuntimeError, match="a real bug"):
        main(["run", str(S1)])


def test_ctrl_c_at_any_moment_of_start_up_gives_no_traceback_from_our_code() -> None:
    """SIGINT sent at several moments while `python -m nagle_sim` starts: the process
    ends (no hang) with 130 or by the signal itself (before Python's own start-up is
    done), and never with a traceback through nagle_sim or the libraries it loads."""
    for delay in (0.05, 0.1, 0.15, 0.2, 0.3, 0.5):
        proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "run", str(S1), "--all"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 130, -signal.SIGINT, 1), (delay, err)
        ours = [line for line in err.splitlines() if line.strip().startswith("File ") and any(
            f"/{name}/" in line for name in ("nagle_sim", "rich", "simpy", "textual"))]
        assert not ours, (delay, err)
        if proc.returncode == 130:
            assert err == "error: interrupted\n", (delay, err)


def test_compare_prints_a_markup_title_as_it_is() -> None:
    """`nagle-sim compare` tables quote the scenario title (user text) verbatim."""
    from rich.console import Console

    from nagle_sim.compare import compare
    from nagle_sim.render.compare import print_comparison
    sim = run_sim(loads('title = "[/] [bold]t"\n' + S1.read_text().split("\n", 1)[1]))
    console = Console(file=io.StringIO(), width=200)
    print_comparison(compare(sim, sim), console)
    assert "[/] [bold]t: model vs kernel" in console.file.getvalue()   # type: ignore[attr-defined]


def test_a_huge_claim_selector_is_a_one_line_error() -> None:
    """Found by benchmarks/fuzz_inputs.py (seed 1): a 5000-digit slice bound in a claim's
    metric reached int() and raised a bare ValueError."""
    from nagle_sim.lessons import parse_claims
    metric = "iterations[1:" + "9" * 5000 + "].latency_ms.max"
    text = S1.read_text() + f'[[expect]]\nmetric = "{metric}"\nat_most = 1\nwhy = "x"\n'
    with pytest.raises(ScenarioError, match=r"expect\[0\]: bad selector"):
        parse_claims(loads(text, "s1.toml"))


def test_streamed_json_is_byte_identical_to_dumps(capsys: pytest.CaptureFixture[str]) -> None:
    """`run --json` streams records (bounded memory) yet prints exactly `Trace.dumps()`."""
    trace = run_sim(scenario.load(S1))
    out = io.StringIO()
    trace.write_json(out)
    assert out.getvalue() == trace.dumps()
    assert main(["run", str(S1), "--json"]) == 0
    assert capsys.readouterr().out == trace.dumps() + "\n"


@pytest.mark.parametrize("width", ["1000000", "5", "0"])
def test_an_absurd_terminal_width_is_refused(width: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """--width 1000000 used to print a 321 MB ladder with 1.4 GB of memory."""
    _one_line_error(["run", str(S1), "--width", width], capsys, "argument --width: expected")


# ---------------------------------------------------------------- terminal escapes
def test_escape_sequences_in_a_title_are_refused_not_printed(tmp_path: Path) -> None:
    """A title carrying ESC ] … BEL would retitle the user's terminal (or clear it) when
    printed, and makes an SVG export malformed XML: refused as bad input."""
    path = tmp_path / "evil.toml"
    path.write_text('title = "evil\\u001b]0;PWNED\\u0007\\u001b[2J"\n[client]\n'
                    'script = "write 1"\n[server]\nscript = "read 1"\n')
    proc = subprocess.run([sys.executable, "-m", "nagle_sim", "run", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "title: holds the control character \\x1b" in proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr


def test_escape_sequences_in_a_saved_trace_are_refused(tmp_path: Path) -> None:
    from nagle_sim.trace import Trace, TraceError

    doc = run_sim(scenario.loads("[client]\nscript='write 1'\n[server]\nscript='read 1'",
                                 "t.toml")).to_json()
    doc["title"] = "\x1b[31mred"
    with pytest.raises(TraceError, match=r"title: text holds the control character \\x1b"):
        Trace.from_json(doc, "t.json")


def test_svg_text_stays_well_formed_xml_whatever_it_holds() -> None:
    import xml.etree.ElementTree as ET

    from nagle_sim.export.scene import Scene, Text
    from nagle_sim.export.svg import to_svg

    scene = Scene(200, 100)
    scene.add(Text(10, 50, "bell\x07 form\x0c ok"))
    root = ET.fromstring(to_svg(scene))
    assert any("ok" in (t.text or "") for t in root.iter("{http://www.w3.org/2000/svg}text"))
