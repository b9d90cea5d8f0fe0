"""`nagle-sim sweep`: the --vary grammar, grid expansion, every metric on traces whose
answer is known, the table and CSV shapes, real runs (faked) and the command's errors."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim import sweep
from nagle_sim.model.events import Micros, Side
from nagle_sim.sim.driver import run_sim
from nagle_sim.sweep import (
    Axis,
    SweepError,
    grid,
    measure,
    parse_metrics,
    parse_vary,
    table,
    writes_alone,
)
from nagle_sim.sweep_run import run_sweep
from nagle_sim.trace import OpRecord, SegmentRecord, Trace

DATA = Path(__file__).parent / "data"
S1 = DATA / "s1_write_write_read.toml"


# ---------------------------------------------------------------- grammar and grid
def test_vary_reads_key_and_values() -> None:
    assert parse_vary("client.nodelay=false, true") == Axis("client.nodelay", ("false", "true"))


@pytest.mark.parametrize("text, message", [
    ("client.nodelay", "use KEY=V1,V2"),
    ("=1,2", "use KEY=V1,V2"),
    ("client..nodelay=1", "bad key"),
    ("link.delay_ms=1,,2", "empty value"),
    ("link.delay_ms=1,1", "listed twice"),
])
def test_bad_vary_is_one_line(text: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_vary(text)


def test_grid_is_the_product_last_axis_fastest() -> None:
    cells = grid([Axis("link.a", ("1", "2")), Axis("b", ("x", "y", "z"))])
    assert [c.label() for c in cells] == [
        "link.a=1, b=x", "link.a=1, b=y", "link.a=1, b=z",
        "link.a=2, b=x", "link.a=2, b=y", "link.a=2, b=z"]
    # a dotted key is a --set key; a bare name is a scenario parameter
    assert cells[4].overrides == ["link.a=2", "params.b=y"]


def test_no_axes_is_one_cell() -> None:
    assert [c.settings for c in grid([])] == [()]


def test_a_key_varied_twice_or_a_huge_grid_is_refused() -> None:
    with pytest.raises(SweepError, match="twice"):
        grid([Axis("a", ("1",)), Axis("a", ("2",))])
    big = Axis("a", tuple(str(i) for i in range(200)))
    with pytest.raises(SweepError, match="40,000 cells"):
        grid([big, Axis("b", big.values)])


def test_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(SweepError, match="known: latency_p50_ms"):
        parse_metrics(["latency_p50_ms,bogus"])
    assert parse_metrics([]) == sweep.DEFAULT_METRICS
    assert parse_metrics(["stalls", "stalls,duration_ms"]) == ("stalls", "duration_ms")


# ---------------------------------------------------------------- metrics on known traces
def _seg(t: int, src: Side, seq: int, length: int, flags: str = "PA") -> SegmentRecord:
    return SegmentRecord(t=Micros(t), src=src, seq=seq, ack=1, length=length, flags=flags)


def _op(side: Side, op: str, arg: str, start: int, end: int,
        it: tuple[int, ...] = (), loop: int = 0) -> OpRecord:
    return OpRecord(side=side, op=op, arg=arg, start=Micros(start), end=Micros(end),
                    iteration=it, loop=loop)


def _trace(segments: list[SegmentRecord], ops: list[OpRecord]) -> Trace:
    return Trace(source="test", title="t", segments=segments, ops=ops)


C, S = Side.CLIENT, Side.SERVER


def test_writes_alone_counts_writes_not_coalesced() -> None:
    """Writes of 100, 100, 100, 50: the first leaves alone, the second and third share a
    segment, the fourth leaves alone but in two segments (still alone)."""
    tr = _trace([_seg(0, C, 0, 0, "S"), _seg(10, C, 1, 100), _seg(20, C, 101, 200),
                 _seg(30, C, 301, 20), _seg(31, C, 321, 30)],
                [_op(C, "write", "100", 0, 1), _op(C, "write", "100", 2, 3),
                 _op(C, "writev", "60 40", 4, 5), _op(C, "write", "50 more", 6, 7)])
    assert writes_alone(tr) == (2, 4)
    assert measure(tr, ["writes_alone_pct"]) == {"writes_alone_pct": 50.0}


def test_a_retransmission_with_the_same_boundaries_keeps_a_write_alone() -> None:
    tr = _trace([_seg(0, C, 0, 0, "S"), _seg(10, C, 1, 100), _seg(500, C, 1, 100)],
                [_op(C, "write", "100", 0, 1)])
    assert writes_alone(tr) == (1, 1)


def test_an_unsent_write_is_not_alone_and_no_writes_is_no_share() -> None:
    tr = _trace([_seg(0, C, 0, 0, "S"), _seg(10, C, 1, 100)],
                [_op(C, "write", "100", 0, 1), _op(C, "write", "5", 2, 3)])
    assert writes_alone(tr) == (1, 2)
    assert measure(_trace([], []), ["writes_alone_pct"]) == {"writes_alone_pct": None}


def test_latency_percentiles_and_counts() -> None:
    """Four iterations of 1, 2, 3 and 10 ms; nearest-rank percentiles."""
    ops = []
    for i, lat in enumerate([1000, 2000, 3000, 10000]):
        start = i * 100_000
        ops.append(_op(C, "write", "1", start, start + 10, (i,), 1))
        ops.append(_op(C, "read", "1", start + 10, start + lat, (i,), 1))
    segs = [_seg(0, C, 0, 0, "S"), _seg(5, S, 0, 0, "SA"), _seg(100, C, 1, 1),
            _seg(20_000, S, 1, 0, "A"), _seg(400_000, C, 2, 1)]
    got = measure(_trace(segs, ops), list(sweep.METRICS))
    assert got["latency_p50_ms"] == 2.0
    assert got["latency_p99_ms"] == 10.0
    assert got["latency_mean_ms"] == 4.0
    assert got["segments_client"] == 3 and got["segments_server"] == 2
    assert got["data_segments_client"] == 2
    assert got["duration_ms"] == 400.0
    # two gaps of ≥ 10 ms with nothing on the wire: 19.9 ms and 380 ms
    assert got["stalls"] == 2
    assert got["stall_ms"] == pytest.approx(19.9 + 380.0)


def test_s1_metrics_from_the_model() -> None:
    """Seed S1: 44 ms per request after the first with Nagle; NODELAY removes the stalls."""
    result = run_sweep(S1.read_text(), str(S1), [parse_vary("client.nodelay=false,true")],
                       ["latency_p50_ms", "stalls", "writes_alone_pct", "stall_ms"], jobs=1,
                       model_runner=run_sim)
    slow, fast = (c.model for c in result.cells)
    assert slow["latency_p50_ms"] == 44.0 and slow["stalls"] == 11
    assert fast["latency_p50_ms"] < 1 and fast["stalls"] == 0
    # a time is a float even when there is none (a table column must not mix 0 and 481.807)
    assert type(fast["stall_ms"]) is float and fast["stall_ms"] == 0.0
    assert slow["writes_alone_pct"] == fast["writes_alone_pct"] == 100.0


def test_parallel_cells_equal_serial_cells() -> None:
    axes = [parse_vary("client.nodelay=false,true"), parse_vary("server.profile=linux,windows")]
    metrics = ["latency_p50_ms", "segments_client", "stall_ms"]
    serial = run_sweep(S1.read_text(), str(S1), axes, metrics, jobs=1, model_runner=run_sim)
    parallel = run_sweep(S1.read_text(), str(S1), axes, metrics, jobs=2, model_runner=run_sim)
    assert [c.model for c in serial.cells] == [c.model for c in parallel.cells]


def test_a_bad_cell_fails_before_anything_runs() -> None:
    calls: list[object] = []
    with pytest.raises(SweepError, match=r"unknown profile 'beos'.*server\.profile=beos"):
        run_sweep(S1.read_text(), str(S1), [parse_vary("server.profile=linux,beos")],
                  ["stalls"], jobs=1, real=True, real_runner=calls.append, model_runner=run_sim)
    assert calls == []


# ---------------------------------------------------------------- real runs and tables
def test_real_runs_give_mean_spread_and_difference() -> None:
    """A fake kernel whose latency alternates 40 and 48 ms: mean 44, sd 4√2·…, Δ vs model."""
    from nagle_sim.sim.driver import run_sim

    runs = iter([40.0, 48.0, 40.0, 48.0])

    def fake_real(sc):  # noqa: ANN001, ANN202
        trace = run_sim(sc)
        shift = next(runs)
        for op in trace.ops:
            if op.op == "read" and op.side is C and op.end is not None and op.iteration:
                op.end = Micros(op.start + int(shift * 1000))
        return trace

    result = run_sweep(S1.read_text(), str(S1), [parse_vary("client.nodelay=false,true")],
                       ["latency_p50_ms"], jobs=1, real=True, repeat=2, real_runner=fake_real,
                       model_runner=run_sim)
    headers, rows = table(result)
    assert headers == ["client.nodelay", "latency_p50_ms model", "latency_p50_ms kernel",
                       "latency_p50_ms sd", "latency_p50_ms diff"]
    first = rows[0]
    assert first[0] is False and first[1] == 44.0
    assert first[2] == pytest.approx(44.0, abs=0.1)
    assert first[3] == pytest.approx(5.66, abs=0.1)     # sample sd of ≈40 and ≈48
    assert first[4] == pytest.approx(first[2] - first[1])

    # one run per cell says nothing about the spread: no sd column (not a misleading 0)
    runs = iter([40.0, 48.0])
    result = run_sweep(S1.read_text(), str(S1), [parse_vary("client.nodelay=false,true")],
                       ["latency_p50_ms"], jobs=1, real=True, repeat=1, real_runner=fake_real,
                       model_runner=run_sim)
    headers, rows = table(result)
    assert headers == ["client.nodelay", "latency_p50_ms model", "latency_p50_ms kernel",
                       "latency_p50_ms diff"]
    assert rows[0][2] == pytest.approx(40.0, abs=0.1) and rows[1][2] == pytest.approx(48.0,
                                                                                     abs=0.1)
    assert result.cells[0].real_stat("latency_p50_ms")[1] is None


def test_csv_has_one_column_per_key_then_per_metric(tmp_path: Path) -> None:
    out = tmp_path / "s1.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "nagle_sim", "sweep", str(S1), "--vary",
         "client.nodelay=false,true", "--vary", "link.delay_ms=0,5", "--metric",
         "latency_p50_ms,segments_client", "--csv", str(out), "--jobs", "1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(out.read_text())))
    assert rows[0] == ["client.nodelay", "link.delay_ms", "latency_p50_ms", "segments_client"]
    assert [r[:2] for r in rows[1:]] == [["false", "0"], ["false", "5"], ["true", "0"],
                                         ["true", "5"]]
    assert all(float(r[2]) >= 0 and int(r[3]) > 0 for r in rows[1:])
    assert "latency_p50_ms" in proc.stdout


def test_a_piped_table_keeps_its_natural_width() -> None:
    """Redirected, the table is not folded to 80 columns (headers stay whole, for pasting)."""
    proc = subprocess.run(
        [sys.executable, "-m", "nagle_sim", "sweep", str(S1), "--vary",
         "client.nodelay=false,true", "--metric", "latency_mean_ms,data_segments_client,"
         "segments_server,latency_p99_ms", "--jobs", "1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "latency_mean_ms" in line)
    for name in ("client.nodelay", "data_segments_client", "segments_server",
                 "latency_p99_ms"):
        assert name in header
    assert max(len(line) for line in proc.stdout.splitlines()) > 80


def test_ctrl_c_stops_a_parallel_sweep_at_once() -> None:
    """SIGINT ends the command with 130 without waiting for the queued cells (a pool of
    workers is terminated, not drained)."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "nagle_sim", "sweep", str(EXAMPLES / "s3.toml"), "--vary",
         "mode=plain,nodelay,cork", "--vary", "client.tune.init_cwnd=4,10,20", "--param",
         "messages=3000", "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3)                       # the workers are busy with the first cells
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


def test_plot_files_are_written(tmp_path: Path) -> None:
    svg, png = tmp_path / "p.svg", tmp_path / "p.png"
    proc = subprocess.run(
        [sys.executable, "-m", "nagle_sim", "sweep", str(S1), "--vary",
         "server.profile=linux,windows", "--vary", "client.nodelay=false,true",
         "--svg", str(svg), "--png", str(png), "--jobs", "1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = svg.read_text()
    assert "latency_p50_ms" in text and "client.nodelay=false" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, message", [
    (["--vary", "client.nodelay"], "use KEY=V1,V2"),
    (["--metric", "nope"], "unknown metric"),
    (["--vary", "server.profile=beos"], "unknown profile"),
    (["--repeat", "3"], "go with --real"),
    (["--csv", "/nonexistent-dir/x.csv"], "does not exist"),
    (["--csv", "same.txt", "--markdown-out", "same.txt"], "same file"),
    (["--param", "x=1", "--vary", "x=1,2"], "also fixed by --set/--param"),
    (["--set", "client.nodelay=true", "--vary", "client.nodelay=false,true"], "also fixed"),
    (["--vary", "bogus=1,2"], "--vary bogus: "),
    (["--param", "sleep"], "--param 'sleep': use NAME=VALUE"),
    (["--csv", ""], "--csv: empty file name"),
    (["--png", "p.svg"], "expected a file name ending in .png"),
    (["--csv", "/proc/no-such.csv"], "cannot write /proc/no-such.csv"),
    (["--jobs", "100000"], "--jobs 100000: at most"),
    (["--set", "link.delay_ms=-1", "--vary", "client.nodelay=false,true"],
     "(given by --set link.delay_ms=-1)"),
    (["--vary", "client.nodelay=false", "--vary", "client.nodelay=true"],
     "--vary client.nodelay: the same key is varied twice"),
    (["--vary", "client.nodelay=false,true", "--vary", "link.delay_ms=" +
      ",".join(map(str, range(13))), "--png", "p.png"], "13 lines per panel"),
])
def test_cli_errors_are_one_line_exit_2(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "nagle_sim", "sweep", str(S1), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- the seed tables
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_s5_table_in_the_model_matches_the_seed_measurement() -> None:
    """Seed S5 over a 12 ms RTT (measured here on 6.18): with Nagle, 0 or 5 ms sleeps let
    only the first write leave alone; 15 ms sleeps (more than the RTT) all ten; with
    NODELAY every write leaves alone at every sleep (TUN: no device queue)."""
    path = EXAMPLES / "s5.toml"
    result = run_sweep(path.read_text(), str(path),
                       [parse_vary("client.nodelay=false,true"),
                        parse_vary("sleep=0ms,5ms,15ms")], ["writes_alone_pct"], jobs=2,
                        model_runner=run_sim)
    share = {c.cell.label(): c.model["writes_alone_pct"] for c in result.cells}
    assert share == {
        "client.nodelay=false, sleep=0ms": 10.0, "client.nodelay=false, sleep=5ms": 10.0,
        "client.nodelay=false, sleep=15ms": 100.0,
        "client.nodelay=true, sleep=0ms": 100.0, "client.nodelay=true, sleep=5ms": 100.0,
        "client.nodelay=true, sleep=15ms": 100.0}


def test_s3_modes_send_what_the_seed_describes() -> None:
    """Seed S3 (20 messages here): plain waits ~44 ms per message on the delayed ACK;
    NODELAY sends one segment per 2-byte write; CORK one 30-byte segment per message."""
    path = EXAMPLES / "s3.toml"
    result = run_sweep(path.read_text(), str(path), [parse_vary("mode=plain,nodelay,cork")],
                       ["latency_p50_ms", "data_segments_client"], jobs=1,
                       base=["params.messages=20"], model_runner=run_sim)
    plain, nodelay, cork = (c.model for c in result.cells)
    assert plain["latency_p50_ms"] == 44.0
    assert nodelay["data_segments_client"] == 20 * 15 and nodelay["latency_p50_ms"] < 1
    assert cork["data_segments_client"] == 20 and cork["latency_p50_ms"] < 1



# ---------------------------------------------------------------- a lesson's own sweep
LESSON_WITH_SWEEP = """
title = "tiny"
[params]
sleep = "0ms"
[link]
delay_ms = 5
[client]
script = "repeat 3 { write 100; sleep {sleep} }; read 1"
[server]
script = "read 300; write 1"
[lesson]
title = "Tiny"
summary = "Three small writes."
[lesson.sweep]
vary = { sleep = ["0ms", "15ms"], "client.nodelay" = [false, true] }
metrics = ["writes_alone_pct"]
"""


def _sweep_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nagle_sim", "sweep", *args, "--jobs", "1"],
                          capture_output=True, text=True, timeout=120)


def test_a_lesson_scenario_without_vary_runs_its_declared_sweep(tmp_path: Path) -> None:
    """No --vary on a scenario with [lesson.sweep]: the lesson's grid and metrics (what
    `w` shows in the app), said on stderr; --vary or --metric still take over."""
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(LESSON_WITH_SWEEP, "utf-8")
    out = tmp_path / "t.csv"
    proc = _sweep_cli(str(scenario), "--csv", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "[lesson.sweep]" in proc.stderr and "sleep=0ms,15ms" in proc.stderr
    rows = list(csv.reader(io.StringIO(out.read_text())))
    assert rows[0] == ["sleep", "client.nodelay", "writes_alone_pct"]
    cells = {(r[0], r[1]): float(r[2]) for r in rows[1:]}
    assert set(cells) == {("0ms", "false"), ("0ms", "true"), ("15ms", "false"),
                          ("15ms", "true")}
    # with 15 ms between writes over a 10 ms round trip, every write leaves alone
    assert cells[("15ms", "false")] == cells[("15ms", "true")] == 100
    assert cells[("0ms", "false")] < 100

    proc = _sweep_cli(str(scenario), "--metric", "segments_client", "--csv", str(out))
    assert proc.returncode == 0, proc.stderr
    assert next(csv.reader(io.StringIO(out.read_text()))) == [
        "sleep", "client.nodelay", "segments_client"]

    proc = _sweep_cli(str(scenario), "--vary", "link.delay_ms=1,2", "--csv", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "[lesson.sweep]" not in proc.stderr
    assert next(csv.reader(io.StringIO(out.read_text())))[0] == "link.delay_ms"


def test_a_bad_lesson_sweep_is_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(LESSON_WITH_SWEEP.replace('metrics = ["writes_alone_pct"]',
                                                  'metrics = ["nope"]'), "utf-8")
    proc = _sweep_cli(str(scenario))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "sweep.metrics" in proc.stderr or "nope" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
