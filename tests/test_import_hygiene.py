"""Layering rules of shared/house-style.md B1, checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

FORBIDDEN = ("simpy", "textual", "rich", "asyncio")


@pytest.mark.parametrize("module", ["nagle_sim.model", "nagle_sim.scenario", "nagle_sim.trace",
                                    "nagle_sim.summary", "nagle_sim.render.rows"])
def test_core_modules_import_no_io_or_ui_library(module: str) -> None:
    code = (f"import sys, {module}; bad = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"{module} pulled in {out}"
