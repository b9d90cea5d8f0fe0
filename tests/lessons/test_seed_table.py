"""docs/lessons.md maps every seed figure to a lesson and a claim: each quoted claim label
in that table must exist in one of the lessons its row names, so the table cannot drift
from the lessons (a renamed folder or a reworded claim fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from nagle_sim import lessons as expect
from nagle_sim.lessons import lesson_dirs, load_lesson

DOC = Path(__file__).resolve().parents[2] / "docs" / "lessons.md"


def _rows() -> list[list[str]]:
    text = DOC.read_text("utf-8")
    section = text[text.index("## Seed figures"):]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| S")]


def _labels() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in lesson_dirs():
        claims = expect.parse_claims(load_lesson(path).scenario)
        out[path.name[:2]] = [c.label for c in claims]
    return out


def _matches(quoted: str, label: str) -> bool:
    """A quoted label may leave words out with "…"; its pieces must appear in order."""
    at = 0
    for piece in (p.strip() for p in quoted.split("…")):
        if not piece:
            continue
        found = label.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def test_the_table_covers_all_five_seed_scenarios() -> None:
    seeds = {row[0][:2] for row in _rows()}
    assert seeds == {"S1", "S2", "S3", "S4", "S5"}


def test_every_quoted_claim_exists_in_a_lesson_its_row_names() -> None:
    labels = _labels()
    missing = []
    for figure, lessons, claims in _rows():
        numbers = re.findall(r"\b(\d\d)\b", lessons)
        quoted = re.findall(r'"([^"]+)"', claims)
        if not quoted:
            # a row without a claim must say why: pending profiles, or not reproduced
            assert re.search(r"pending: profiles|not reproduced|not claimed", claims), figure
            continue
        assert numbers, f"{figure}: names no lesson"
        pool = [label for n in numbers for label in labels.get(n, [])]
        missing += [f"{figure}: {q}" for q in quoted
                    if not any(_matches(q, label) for label in pool)]
    assert not missing, "\n".join(missing)
