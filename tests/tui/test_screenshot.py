"""README screenshots: a lesson rendered mid-stall to SVG."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.screenshot import save_svg

from .conftest import LESSONS


def test_save_svg_renders_the_lesson_at_its_first_stall(tmp_path: Path) -> None:
    out = save_svg(tmp_path / "shot.svg", "01-tiny", run_sim=run_sim, lessons_root=LESSONS)
    svg = out.read_text("utf-8")
    assert svg.startswith("<svg") and "Nagle" in svg


def test_save_svg_names_the_known_lessons_for_a_bad_slug(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="01-tiny"):
        save_svg(tmp_path / "x.svg", "nope", run_sim=run_sim, lessons_root=LESSONS)
