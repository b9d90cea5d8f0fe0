"""The cheat sheet's source (issue 30): `lessons/cheatsheet.md`, shipped with the lessons
for the app's cheat-sheet key and a printable handout to render. It must hold every part
the issue asks for, fit one page, and point only at lessons that exist."""

from __future__ import annotations

import re

from nagle_sim.lessons import LESSONS_DIR, load_lessons

SHEET = LESSONS_DIR / "cheatsheet.md"
SECTIONS = ("When Linux ACKs at once", "When Nagle holds", "What releases held data",
            "Constants", "Seeing 40 ms?", "Seeing 200 ms?", "Fixes, in order", "Glossary")


def test_the_sheet_ships_with_the_lessons_and_has_every_part() -> None:
    text = SHEET.read_text("utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings == list(SECTIONS)
    assert "HZ=250" in text and "HZ=1000" in text


def test_it_fits_one_page() -> None:
    """About what a printed A4 page or one projector slide pair holds at a legible size."""
    text = SHEET.read_text("utf-8")
    assert len(text.split()) <= 1200
    assert len(text.splitlines()) <= 110


def test_every_lesson_reference_exists() -> None:
    numbers = {lesson.number for lesson in load_lessons()}
    text = SHEET.read_text("utf-8")
    refs = {int(n) for group in re.findall(r"\((\d\d(?:, \d\d)*)\)", text)
            for n in group.split(", ")}
    assert refs and refs <= numbers, refs - numbers
