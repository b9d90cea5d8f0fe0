"""The `nagle-sim` command: output, JSON trace contract, exit codes, no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim.__main__ import main

DATA = Path(__file__).parent / "data"


def test_run_prints_ladder_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--width", "140"]) == 0
    out = capsys.readouterr().out
    assert "P. 1:7(6)" in out and "Nagle holds" in out and "delayed ACK fired" in out
    assert "Per-iteration latency (client): 0.016, 41.994, 44.000" in out
    assert "Stalls ≥ 10 ms: 11" in out


def test_json_trace_follows_the_documented_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "nagle-sim-trace/2" and doc["source"] == "sim"
    syn = doc["segments"][0]
    assert syn == {**syn, "t_ms": 0.0, "from": "client", "seq": 0, "ack": 0, "len": 0,
                   "flags": "S"}
    ops = [o for o in doc["ops"] if o["op"] not in ("connect", "accept")]
    assert len([o for o in ops if o["side"] == "client"]) == 36
    assert len([o for o in ops if o["side"] == "server"]) == 24
    assert all(o["start_ms"] <= o["end_ms"] for o in ops)
    assert {"t_ms", "side", "kind", "code"} <= set(doc["events"][0])
    assert doc["reasons"][doc["events"][0]["code"]]     # the sentence, once, in the table
    assert any(e["kind"] == "timer_armed" and e["timer"] == "delack" for e in doc["events"])


def test_set_override_changes_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--set",
                 "client.nodelay=true", "--limit", "0"]) == 0
    assert "No stalls" in capsys.readouterr().out


def test_deadlock_is_reported_with_exit_1(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dead.toml"
    path.write_text('[client]\nscript = "read 5"\n[server]\nscript = "read 3"\n')
    assert main(["run", str(path), "--limit", "0"]) == 1
    out = capsys.readouterr().out
    assert "deadlock: client waits for 5 more of 5 bytes (line 2), server waits for 3 more " \
           "of 3 bytes (line 4)" in out.replace("\n", "")


def test_bad_file_exit_2_one_line_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[client]\nscript = \"write zero\"\n")
    proc = subprocess.run([sys.executable, "-m", "nagle_sim", "run", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{path}:2: write size must be a whole number" in lines[0]


def test_run_limit_ends_an_endless_scenario(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "long.toml"
    path.write_text('[client]\nscript = "repeat 100000 { sleep 1s }"\n')
    assert main(["run", str(path), "--limit", "0"]) == 1
    assert "still running after 3600 simulated s" in capsys.readouterr().out


@pytest.mark.parametrize("width", [80, 100, 160])
def test_ladder_times_are_never_truncated(width: int,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An 80-column terminal still shows every time in full (42.000, not 42.…)."""
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--width", str(width),
                 "--all"]) == 0
    out = capsys.readouterr().out
    ladder = out.split("Per-iteration latency")[0]
    rows = [line for line in ladder.splitlines() if line[:9].strip()[:1].isdigit()]
    assert len(rows) > 100 and "482.000" in out and "0.027" in out
    assert all(re.match(r"^ *\d+\.\d{3} ", line) for line in rows), \
        [line for line in rows if not re.match(r"^ *\d+\.\d{3} ", line)][:3]
    assert max(len(line) for line in out.splitlines()) <= width


def test_show_prints_a_saved_trace_and_export_accepts_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every view works on a saved trace: the terminal ladder and the exports."""
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--json"]) == 0
    saved = tmp_path / "s1.json"
    saved.write_text(capsys.readouterr().out)
    assert main(["show", str(saved), "--limit", "5", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "S1: write-write-read  [sim]" in out and " 0.000  connect" in out
    assert main(["export", str(saved), "--svg", str(tmp_path / "s1.svg")]) == 0
    assert (tmp_path / "s1.svg").read_text().startswith("<")
    assert main(["export", str(saved), "--real", "--svg", str(tmp_path / "x.svg")]) == 2


@pytest.mark.parametrize("argv", [
    ["run", str(DATA / "s1_write_write_read.toml"), "--width", "-3"],
    ["run", str(DATA / "s1_write_write_read.toml"), "--limit", "-5"],
    ["export", str(DATA / "s1_write_write_read.toml"), "--png", "x.png", "--png-scale", "inf"],
    ["export", str(DATA / "s1_write_write_read.toml"), "--svg", "x.svg", "--until-ms", "nan"],
])
def test_bad_flags_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


@pytest.mark.parametrize("argv", [
    ["compare", str(DATA / "s1_write_write_read.toml"), "--markdown", "/nonexistent/x.md"],
    ["validate", "--markdown", "/nonexistent/v.md"],
])
def test_unwritable_outputs_fail_before_any_run(argv: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "directory /nonexistent does not exist" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [
    ["run", str(DATA / "s1_write_write_read.toml")],
    ["run", str(DATA / "s1_write_write_read.toml"), "--json"],
    ["sweep", str(DATA / "s1_write_write_read.toml"), "--jobs", "1"],
], ids=["ladder", "json", "sweep"])
def test_a_full_disk_on_stdout_is_one_line_exit_2(argv: list[str]) -> None:
    """stdout that cannot be written (here /dev/full: ENOSPC) is named in one line, with
    no traceback and no second error from the interpreter's final flush."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "nagle_sim", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "error: cannot write standard output: No space left on device"


# ---------------------------------------------------------------- start-up: lazy parsers
SUBCOMMANDS = {"run": "--trace-format", "show": "--trace-format", "tui": "[file]",
               "serve": "--max-sessions", "lessons": "-h", "export": "--png-scale",
               "compare": "REAL.json", "validate": "--random", "explain": "--truncated-ok",
               "sweep": "--vary", "drill": "--tolerance-usecs", "realnet": "{run,serve,cleanup}",
               "realnet run": "--remote", "realnet serve": "--no-auth",
               "realnet cleanup": "-h"}
"""Each subcommand and an option its help lists."""


def test_detail_levels_are_the_renderers() -> None:
    """The parser spells --detail's choices out (so it imports no renderer): the same."""
    from nagle_sim.cli.options import DETAIL_LEVELS
    from nagle_sim.trace.rows import DETAIL_LEVELS as RENDERED
    assert DETAIL_LEVELS == RENDERED


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_every_subcommand_has_its_help(command: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Each subcommand's options are added when it is used: its --help still lists them."""
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: nagle-sim {command} ")
    assert SUBCOMMANDS[command] in out


def test_the_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(f"    {c.split()[0]} " in out for c in SUBCOMMANDS)


def test_a_bad_option_of_a_lazily_built_parser_is_one_line_and_2(tmp_path: Path) -> None:
    for args, prefix in (
            (["run", "x.toml", "--detail", "loud"], "nagle-sim run: argument --detail"),
            (["sweep", "x.toml", "--jobs", "0"], "nagle-sim sweep: argument --jobs"),
            (["realnet", "run"], "nagle-sim realnet run: the following arguments"),
            (["explain", "x.pcap", "--bogus"], "nagle-sim: unrecognized arguments: --bogus")):
        done = subprocess.run([sys.executable, "-m", "nagle_sim", *args], capture_output=True,
                              text=True, cwd=tmp_path)
        assert done.returncode == 2, args
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"error: {prefix}"), done.stderr


def test_run_json_imports_only_what_it_uses() -> None:
    """`run --json` builds only run's parser and writes JSON: no renderer, rich, other
    subcommands' modules (explain, sweep, drill, exports) or the app are imported."""
    code = ("import sys; from nagle_sim.__main__ import main; "
            f"code = main(['run', {str(DATA / 's1_write_write_read.toml')!r}, '--json']); "
            "sys.stdout.flush(); print(code, ' '.join(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    exit_code, modules = done.stderr.split(" ", 1)
    assert exit_code == "0" and json.loads(done.stdout)["outcome"] == "ok"
    loaded = set(modules.split())
    assert "nagle_sim.sim.driver" in loaded          # the check sees what was imported
    heavy = [m for m in loaded if m.split(".")[0] in ("rich", "textual", "realnet", "dpkt")
             or m.startswith(("nagle_sim.render", "nagle_sim.explain", "nagle_sim.sweep",
                              "nagle_sim.drill", "nagle_sim.export", "nagle_sim.tui",
                              "nagle_sim.trace.summary", "nagle_sim.compare", "nagle_sim.lessons"))]
    assert heavy == []


# ---------------------------------------------------------------- run's limits
def test_run_record_limit_stops_the_run_with_exit_1(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--json",
                 "--record-limit", "50"]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["outcome"] == "limit" and "past 50 records" in doc["message"]
    assert len(doc["segments"]) + len(doc["ops"]) + len(doc["events"]) <= 51
    assert err.count("\n") == 1 and "past 50 records" in err


def test_run_time_limit_stops_the_run_in_simulated_time(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--json",
                 "--time-limit", "0.02"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "limit" and "after 0.02 simulated s" in doc["message"]
    assert main(["run", str(DATA / "s1_write_write_read.toml"), "--json",
                 "--time-limit", "5", "--record-limit", "10000000"]) == 0


@pytest.mark.parametrize(("option", "value", "why"), [
    ("--record-limit", "0", "must be 1-10000000, got 0"),
    ("--record-limit", "10000001", "must be 1-10000000"),
    ("--record-limit", "2e6", "expected a whole number, got '2e6'"),
    ("--time-limit", "0", "expected a number above 0 and at most 864000"),
    ("--time-limit", "nan", "at most 864000"),
    ("--time-limit", "1e9", "at most 864000"),
    ("--time-limit", "1e-9", "expected at least 0.000001 (one simulated µs), got 1e-9")])
def test_bad_run_limits_are_one_line_and_2(option: str, value: str, why: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(DATA / "s1_write_write_read.toml"), option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: nagle-sim run: argument {option}: ") and why in err


def test_run_limits_help_names_the_drivers_defaults(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    from nagle_sim.sim.driver import DEFAULT_RECORD_LIMIT, DEFAULT_TIME_LIMIT
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_RECORD_LIMIT}, at most 10000000;" in out
    assert f"(default {DEFAULT_TIME_LIMIT // 1_000_000}, at most 864000)" in out


def test_the_command_process_writes_everything_before_it_ends(tmp_path: Path) -> None:
    """`nagle-sim run --json` and `show` end with os._exit once their output is flushed
    (the trace is not freed object by object): the whole JSON is there, the exit code and
    the error line too."""
    for extra, code in (([], 0), (["--record-limit", "40"], 1)):
        out = tmp_path / "out.json"
        with out.open("wb") as sink:
            done = subprocess.run([sys.executable, "-m", "nagle_sim", "run",
                                   str(DATA / "s1_write_write_read.toml"), "--json", *extra],
                                  stdout=sink, stderr=subprocess.PIPE, text=True)
        assert done.returncode == code
        doc = json.loads(out.read_text("utf-8"))
        assert doc["outcome"] == ("ok" if code == 0 else "limit")
        assert out.read_bytes().endswith(b"]}\n")
        assert done.stderr == ("" if code == 0 else f"error: {doc['message']}\n")
        again = subprocess.run([sys.executable, "-m", "nagle_sim", "show", str(out), "--json"],
                               capture_output=True)
        assert again.returncode == code and again.stdout == out.read_bytes()


MODULE_OF = {"run": "run", "show": "run", "lessons": "app", "sweep": "sweep", "tui": "app"}
"""The `nagle_sim.cli` module of each command the collector test replaces."""


@pytest.mark.parametrize(("command", "collector"), [
    ("run", False), ("show", False), ("lessons", True), ("sweep", True), ("tui", True)])
def test_only_run_and_show_keep_the_collector_off(command: str, collector: bool) -> None:
    """The command process starts with the cyclic GC off (start-up is 3 % faster); every
    command but run and show, which print one trace and end, gets it back."""
    code = ("import gc, sys; sys.argv = ['nagle-sim', *sys.argv[1:]]; "
            "import nagle_sim.__main__ as entry, importlib; print(gc.isenabled()); "
            f"module = importlib.import_module('nagle_sim.cli.{MODULE_OF[command]}'); "
            f"module.cmd_{command} = lambda args: print(gc.isenabled()) or 0; "
            "sys.exit(entry.main())")
    done = subprocess.run([sys.executable, "-c", code, command,
                           *([] if command == "lessons" else ["x"])], capture_output=True,
                          text=True)
    assert (done.returncode, done.stdout.split()) == (0, ["False", str(collector)]), done


@pytest.mark.parametrize("args", [["--version"], ["realnet", "cleanup", "--help"],
                                  ["serve", "--help"], ["lessons", "--help"]])
def test_commands_that_read_no_scenario_import_none_of_the_simulator(args: list[str]) -> None:
    code = ("import sys; from nagle_sim.__main__ import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    assert exc.code == 0\n"
            "print(' '.join(m for m in sys.modules if m.startswith(('nagle_sim.', 'simpy', "
            "'rich'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, check=True)
    loaded = done.stderr.split()
    assert "nagle_sim.__main__" in loaded and "nagle_sim.cli.parser" in loaded
    # the command line's own modules and the error root, nothing that reads or runs a
    # scenario (scenario, trace, sim, realnet) and no rich
    own = ("nagle_sim.__main__", "nagle_sim.errors", "nagle_sim.cli")
    assert [m for m in loaded if m not in own and not m.startswith("nagle_sim.cli.")] == []


def test_scenario_and_trace_errors_are_still_one_line_and_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_trace = tmp_path / "t.json"
    bad_trace.write_text('{"format": "nagle-sim-trace/2", "segments": 3}')
    assert main(["show", str(bad_trace)]) == 2
    assert capsys.readouterr().err == (f"error: {bad_trace}: segments: expected an array, "
                                       "got 3\n")
    bad_scenario = tmp_path / "s.toml"
    bad_scenario.write_text('[client]\nscript = "write"\n')
    assert main(["run", str(bad_scenario), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad_scenario}:2") and err.count("\n") == 1
