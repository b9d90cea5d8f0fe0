"""``nagle-sim validate --random`` against this machine's kernel: the table, the count,
the exit code and the kept scenarios agree with each other (which seeds agree is the
model's fidelity, checked by the lessons and tests/realnet/test_fidelity_rules.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim.scenario import loads
from nagle_sim.scenario.generator import random_scenario

pytestmark = [pytest.mark.realnet, pytest.mark.usefixtures("requires_root_netns")]


def test_validate_random_runs_each_seed_on_both_and_keeps_what_disagrees(
        tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    md = tmp_path / "random.md"
    proc = subprocess.run(
        [sys.executable, "-m", "nagle_sim", "validate", "--random", "3", "--seed", "12",
         "--keep", str(keep), "--markdown", str(md)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    found = re.search(r"(\d+) of 3 agree", proc.stdout)
    assert found, proc.stdout
    agreed = int(found.group(1))
    assert (proc.returncode == 0) == (agreed == 3)
    table = md.read_text("utf-8")
    rows = [line for line in table.splitlines() if re.match(r"\| 1[234] ", line)]
    assert len(rows) == 3, table
    for seed in (12, 13, 14):
        assert f"random scenario {seed} ({seed - 11}/3)" in proc.stderr
    disagreed = sorted(int(p.stem.split("-")[1]) for p in keep.glob("random-*.toml"))
    assert len(disagreed) == 3 - agreed
    for seed in disagreed:
        kept = (keep / f"random-{seed}.toml").read_text("utf-8")
        assert kept == random_scenario(seed).text
        loads(kept, "kept.toml")     # a file `nagle-sim compare` takes as it is
