"""docs/explain.md's runtime table is what `nagle-sim explain --runtimes --markdown` prints,
row for row, and every row cites a source (document or source file, and version)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.explain.advice import RUNTIMES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "explain.md"


def _table_rows(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_docs_table_is_the_runtimes_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--runtimes", "--markdown"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    header = printed[0]
    documented = _table_rows(DOCS.read_text(encoding="utf-8"), header)
    assert documented == printed
    # one row per runtime, in the order --runtime lists them
    assert [row.split("|")[1].strip() for row in printed[2:]] == list(RUNTIMES)


def test_every_runtime_cites_its_source() -> None:
    for rt in RUNTIMES.values():
        assert rt.sources, rt.key
        assert all(s.where and s.version for s in rt.sources), rt.key
