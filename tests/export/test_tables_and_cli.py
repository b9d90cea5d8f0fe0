"""Markdown / CSV tables, JSON, export_default and the one-line ExportError contract."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim.export import ExportError, export_cli, export_default, export_to, write_table
from nagle_sim.export.tables import render_markdown
from nagle_sim.trace import Trace
from nagle_sim.trace.summary import summarize

from .conftest import S1


def test_markdown_summary_has_three_tables(s1: Trace, tmp_path: Path) -> None:
    [out] = export_cli(s1, markdown=tmp_path / "s1.md")
    text = out.read_text("utf-8")
    s = summarize(s1)
    assert text.startswith(f"# {s1.title}\n")
    for heading in ("## Iterations", "## Segments per side", "## Stalls"):
        assert heading in text
    assert "| iteration | start (ms) | end (ms) | latency (ms) |" in text
    assert f"| {s.iterations[1].index} | {s.iterations[1].start / 1000:.3f} |" in text
    assert f"| client | {s.segments[next(iter(s.segments))]} |" in text
    for st in s.stalls:
        assert st.held_by.replace("|", "\\|") in text and st.ended_by in text
    assert "|---:|" in text


def test_csv_has_one_row_per_iteration(s1: Trace, tmp_path: Path) -> None:
    [out] = export_cli(s1, csv=tmp_path / "s1.csv")
    rows = list(csv.DictReader(io.StringIO(out.read_text("utf-8"))))
    s = summarize(s1)
    assert len(rows) == len(s.iterations)
    assert [float(r["latency_ms"]) for r in rows] == [round(i.latency / 1000, 3)
                                                      for i in s.iterations]
    stalled = [r for r in rows if float(r["stall_ms"]) > 0]
    assert len(stalled) == len(s.stalls) and stalled[0]["stalls"] == s.stalls[0].text()


def test_write_table_for_compare_style_rows(tmp_path: Path) -> None:
    rows = [("S1", 0.016, 41.994, None), ("a|b", 1, 2, 3)]
    headers = ["scenario", "sim (ms)", "real (ms)", "Δ"]
    md = write_table(rows, headers, tmp_path / "cmp.md", title="Compare")
    assert md.read_text("utf-8").startswith("## Compare\n\n| scenario |")
    assert "a\\|b" in md.read_text("utf-8")
    out = write_table(rows, headers, tmp_path / "cmp.csv")
    assert list(csv.reader(io.StringIO(out.read_text("utf-8")))) == [
        headers, ["S1", "0.016", "41.994", ""], ["a|b", "1", "2", "3"]]
    with pytest.raises(ExportError, match="use .md or .csv"):
        write_table(rows, headers, tmp_path / "cmp.xlsx")
    assert render_markdown(["a"], []) == "| a |\n|---|\n"


def test_json_round_trips(s1: Trace, tmp_path: Path) -> None:
    [out] = export_cli(s1, json=tmp_path / "s1.json")
    back = Trace.load(out)
    assert back.to_json() == s1.to_json()


def test_export_default_writes_pcap_and_svg_next_to_scenario(s1: Trace, tmp_path: Path) -> None:
    scen = tmp_path / "lesson" / "s1.toml"
    scen.parent.mkdir()
    scen.write_text(S1.read_text("utf-8"), "utf-8")
    paths = export_default(s1, scen)
    assert paths == [tmp_path / "lesson" / "s1.pcap", tmp_path / "lesson" / "s1.svg"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_export_cli_writes_every_format(s1: Trace, real: Trace, tmp_path: Path) -> None:
    names = {"pcap": "a.pcap", "svg": "a.svg", "png": "a.png", "tseq": "t.svg",
             "markdown": "a.md", "csv": "a.csv", "json": "a.json"}
    paths = export_cli(s1, overlay=real, **{k: tmp_path / v for k, v in names.items()})  # type: ignore[arg-type]
    assert [p.name for p in paths] == list(names.values())
    assert all(p.stat().st_size > 0 for p in paths)


def test_export_to_guesses_by_suffix(s1: Trace, tmp_path: Path) -> None:
    assert export_to(s1, tmp_path / "x.pcap").read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1",
                                                                    b"\xa1\xb2\xc3\xd4")
    with pytest.raises(ExportError, match="unknown export format '.xyz'"):
        export_to(s1, tmp_path / "x.xyz")
    with pytest.raises(ExportError, match="unknown export format 'gif'"):
        export_to(s1, tmp_path / "x.gif", fmt="gif")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "nothing to export"),
    ({"pcap": "{tmp}/no/such/dir/x.pcap"}, "directory .* does not exist"),
    ({"svg": "{tmp}"}, "expected a file name ending in .svg"),
    ({"svg": "{tmp}/d.svg"}, "is a directory"),
    ({"png": "{tmp}/x.jpg"}, "--png .*x.jpg: expected a file name ending in .png"),
    ({"markdown": ""}, "empty file name"),
    ({"csv": "{tmp}/f.txt/x.csv"}, "is not a directory"),
])
def test_bad_paths_raise_one_line_export_errors(s1: Trace, tmp_path: Path,
                                                kwargs: dict[str, str], message: str) -> None:
    (tmp_path / "d.svg").mkdir()
    (tmp_path / "f.txt").write_text("x")
    args = {k: v.replace("{tmp}", str(tmp_path)) for k, v in kwargs.items()}
    with pytest.raises(ExportError, match=message) as err:
        export_cli(s1, **args)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_nothing_is_written_when_one_path_is_bad(s1: Trace, tmp_path: Path) -> None:
    with pytest.raises(ExportError):
        export_cli(s1, pcap=tmp_path / "ok.pcap", svg=tmp_path / "missing" / "x.svg")
    assert not (tmp_path / "ok.pcap").exists()


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this process cannot create files in. Root ignores mode bits, but not
    sysfs, which refuses new files to everyone."""
    if os.name == "posix" and os.geteuid() == 0 and Path("/sys").is_dir():
        return Path("/sys")
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    return ro


def test_unwritable_directory(s1: Trace, tmp_path: Path) -> None:
    target = _unwritable_dir(tmp_path)
    try:
        with pytest.raises(ExportError, match="(?i)permission denied") as err:
            export_cli(s1, svg=target / "nagle-sim-test.svg")
        assert "\n" not in str(err.value)
    finally:
        if target != Path("/sys"):
            target.chmod(0o700)


def test_write_failure_becomes_export_error(s1: Trace, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Path, *a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_bytes", boom)
    monkeypatch.setattr(Path, "open", boom)     # pcap streams its frames to an open file
    with pytest.raises(ExportError, match=r"cannot write .*x.pcap: No space left on device"):
        export_cli(s1, pcap=tmp_path / "x.pcap")


def test_export_package_imports_no_ui_or_event_loop_library() -> None:
    code = ("import sys, nagle_sim.export, nagle_sim.export.png; "
            "bad = [m for m in ('simpy', 'textual', 'rich', 'asyncio', 'PIL') "
            "if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"nagle_sim.export pulled in {out}"
