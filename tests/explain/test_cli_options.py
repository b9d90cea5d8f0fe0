"""`nagle-sim explain` options a review found wanting: the single connection's longest
stall in --json, --json with --markdown, and a capture cut mid-frame (--truncated-ok)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.explain import CaptureError, explain_file, read_capture
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

from .captures import write_capture


def test_json_names_the_longest_stall_of_a_single_connection(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    longest = max(s["duration_ms"] for s in doc["stalls"] if s["causes"] != ["app"])
    for conn in (doc["connection"], doc["connections"][0]):
        assert conn["longest_stall_ms"] == pytest.approx(longest, abs=0.001)
        assert conn["longest_stall_cause"] == "nagle+delayed_ack"


def test_json_and_markdown_together_is_a_one_line_error(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), "--json", "--markdown"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "--json" in lines[0] and "--markdown" in lines[0]


def _cut_mid_frame(trace: Trace, tmp_path: Path) -> tuple[Path, int]:
    """The capture cut 7 bytes into a frame; the number of complete frames before it."""
    whole = write_capture(trace, tmp_path / "whole.pcap")
    data = whole.read_bytes()
    # pcap: a 24-byte file header, then per frame a 16-byte record header and the frame
    at, frames = 24, 0
    while at + 16 <= len(data) and frames < 12:
        at += 16 + int.from_bytes(data[at + 8:at + 12], "little")
        frames += 1
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:at + 16 + 7])
    return cut, frames


def test_a_capture_cut_mid_frame_names_the_option_that_reads_it(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut, frames = _cut_mid_frame(s1_trace, tmp_path)
    with pytest.raises(CaptureError, match=f"add --truncated-ok to explain the {frames} "
                       "complete frame"):
        read_capture(cut)
    assert main(["explain", str(cut)]) == 2
    err = capsys.readouterr().err.strip()
    assert "truncated" in err and "--truncated-ok" in err and "\n" not in err


def test_truncated_ok_explains_the_complete_frames_and_says_so(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut, frames = _cut_mid_frame(s1_trace, tmp_path)
    ex = explain_file(str(cut), truncated_ok=True, runner=run_sim)
    assert ex.capture.frames == frames == len(ex.capture.packets)
    assert ex.notes[0].startswith("the file is truncated") and f"{frames} complete" in \
        ex.notes[0]
    assert ex.stalls and ex.stalls[0].cause == "nagle+delayed_ack"
    assert main(["explain", str(cut), "--truncated-ok"]) == 0
    assert "the file is truncated" in capsys.readouterr().out
    assert main(["explain", str(cut), "--truncated-ok", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["file_truncated"] == ex.notes[0] and doc["frames"] == frames


def test_truncated_ok_cannot_save_a_file_cut_before_its_first_frame(
        s1_trace: Trace, tmp_path: Path) -> None:
    whole = write_capture(s1_trace, tmp_path / "whole.pcap").read_bytes()
    cut = tmp_path / "head.pcap"
    cut.write_bytes(whole[:30])
    with pytest.raises(CaptureError, match="after 0 complete") as info:
        read_capture(cut, truncated_ok=True)
    assert "--truncated-ok" not in str(info.value)


def test_picture_bands_name_the_stall_cause(s1_trace: Trace, tmp_path: Path) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap", at="both")
    svg = tmp_path / "ladder.svg"
    assert main(["explain", str(path), "--svg", str(svg)]) == 0
    text = svg.read_text("utf-8")
    # each of the five stalls is a band (or bands, cut by the model's overlay) naming it
    assert "ms: Nagle + delayed ACK" in text
    assert text.count("Nagle + delayed ACK") >= 5


def test_markdown_lists_the_evidence_rows(s1_trace: Trace, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), "--markdown"]) == 0
    text = capsys.readouterr().out
    evidence = text.split("## Evidence", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in evidence.splitlines() if line.startswith("  - frame ")]
    assert len(rows) >= 5 * 3        # five stalls, three segments each
    assert "a delayed ACK" in evidence and "`nagle+delayed_ack`" in evidence


def test_a_picture_too_big_for_the_given_until_ms_asks_for_a_smaller_one(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nagle_sim.export import ladder
    monkeypatch.setattr(ladder, "MAX_ROWS", 10)
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    svg = tmp_path / "ladder.svg"
    assert main(["explain", str(path), "--svg", str(svg), "--until-ms", "400"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--until-ms 400 still draws too much" in err
    assert "draw part of the run with --until-ms" not in err
