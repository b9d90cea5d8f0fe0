"""Issue 31.9: a command's tables piped or redirected keep their natural width. Rich
assumes 80 columns off a terminal and folded `compare`'s segment table ("P." / "7:14(7" /
")" on three lines) while `sweep` kept its width. Here stdout is pytest's capture, not a
terminal, as it is under `| less` or `> file`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.scenario import load
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Source

DATA = Path(__file__).parent / "data"


def _rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("│")]


def test_compare_piped_keeps_every_row_on_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = run_sim(load(DATA / "s1_write_write_read.toml"))
    saved_model, saved_real = tmp_path / "model.json", tmp_path / "real.json"
    with open(saved_model, "w") as f:
        model.write_json(f)
    real = dataclasses.replace(model, source=Source.REALNET,
                               meta={**model.meta, "link": "loopback"})
    with open(saved_real, "w") as f:
        real.write_json(f)
    assert main(["compare", str(saved_model), str(saved_real)]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    segments = [r for r in rows if re.match(r"│ [cs]→[cs] ", r)]
    # one line per segment of the trace, each naming its segment whole, twice
    assert len(segments) == len(model.segments), out[:2000]
    assert all(r.count("P. 7:14(7)") == 2 for r in segments if " 7:14" in r), \
        [r for r in segments if " 7:14" in r]
    assert not any(r.startswith("│     │") for r in rows), "a folded row continues"
    assert max(len(line) for line in out.splitlines()) > 80


def test_sweep_piped_keeps_its_width(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(DATA / "s1_write_write_read.toml"), "--vary",
                 "client.nodelay=false,true", "--metric",
                 "latency_mean_ms,data_segments_client,stalls"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert len(rows) == 2, out


def test_drill_piped_gives_each_script_one_row(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(__file__).parent / "drill"
    scripts = sorted(folder.rglob("*.pkt"))
    main(["drill", str(folder)])
    rows = _rows(capsys.readouterr().out)
    # a folded row continues on a line whose script cell is blank
    assert len(rows) == len(scripts), rows[:5]
    assert all(r.split("│")[1].strip() for r in rows)
