"""Packaging of the lessons: package data of nagle_sim, never a top-level `lessons`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_lessons_folder_in_the_current_directory_does_not_hide_the_shipped_ones(
        tmp_path: Path) -> None:
    """Issue 12: starting the app where the user keeps their own lessons/ folder works."""
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "__init__.py").write_text(
        "raise SystemExit('the user folder was imported as the lessons package')\n")
    (tmp_path / "lessons" / "99-mine").mkdir()
    code = ("from nagle_sim.lessons import LESSONS_DIR, load_lessons; "
            "print(LESSONS_DIR); print(len(load_lessons()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    where, count = done.stdout.split()
    assert not Path(where).is_relative_to(tmp_path)
    assert int(count) == len([p for p in (ROOT / "lessons").iterdir()
                              if (p / "scenario.toml").exists()])


def test_the_lessons_install_as_nagle_sim_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    assert "lessons" not in config["packages"]
    assert config["package-dir"]["nagle_sim.lesson_files"] == "lessons"
    assert config["package-data"]["nagle_sim.lesson_files"] == ["*/*.toml", "*/*.md", "*/*.pcap"]


def test_the_loader_does_not_import_a_top_level_lessons_package() -> None:
    code = ("import sys, nagle_sim.lessons as m; m.load_lessons(); "
            "print('lessons' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
