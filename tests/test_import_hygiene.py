"""Layering rules of shared/house-style.md B1, checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

FORBIDDEN = ("simpy", "textual", "rich", "asyncio")


@pytest.mark.parametrize("module", ["nagle_sim.model", "nagle_sim.scenario", "nagle_sim.trace",
                                    "nagle_sim.trace.summary", "nagle_sim.trace.rows"])
def test_core_modules_import_no_io_or_ui_library(module: str) -> None:
    code = (f"import sys, {module}; bad = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"{module} pulled in {out}"


@pytest.mark.parametrize("module", ["realnet.runner", "realnet.remote", "realnet.__main__",
                                    "realnet.sockopts"])
def test_realnet_uses_only_the_shared_data_layer(module: str) -> None:
    """realnet may import nagle_sim.scenario / trace / model.events, no views or simpy."""
    code = (f"import sys, {module}; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('simpy', 'textual', 'rich') "
            "or m in ('nagle_sim.render', 'nagle_sim.sim', 'nagle_sim.tui', "
            "'nagle_sim.compare', 'nagle_sim.trace.summary')]; print(','.join(sorted(bad)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"{module} pulled in {out}"


def test_the_tui_package_imports_no_simulator_or_realnet() -> None:
    """The executors reach the app by injection (house style B1 rule 4)."""
    code = ("import sys, nagle_sim.tui.app; bad = [m for m in ('simpy', 'realnet', "
            "'nagle_sim.sim.driver') if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", out


def test_the_runner_seam_imports_its_executors_only_when_asked() -> None:
    """`nagle_sim.runners` is the one module that imports the simulator and realnet, and
    only inside the functions that need them: importing it (every command that runs
    anything does) loads neither."""
    code = ("import sys, nagle_sim.runners; bad = [m for m in ('simpy', 'realnet', "
            "'nagle_sim.sim', 'nagle_sim.sim.driver') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", out
