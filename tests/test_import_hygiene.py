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


def test_a_run_process_does_not_load_the_package_metadata_reader(tmp_path) -> None:
    """simpy reads its own version through ``importlib.metadata`` on import: a third of a
    small ``run``'s process (issue 32). The ``nagle-sim run`` process imports simpy with a
    stand-in for that one lookup (`nagle_sim.cli.run`), prints the same trace, and a later
    import gets the real module."""
    import os
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    bare = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"],
                          capture_output=True, text=True, check=True, env=env).stderr
    if "importlib.metadata" in bare:
        pytest.skip("this interpreter's site start-up imports importlib.metadata itself")
    s1 = root / "tests" / "data" / "s1_write_write_read.toml"
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "nagle_sim", "run",
                           str(s1), "--json"], capture_output=True, text=True, check=True,
                          env=env, cwd=tmp_path)
    assert "| simpy\n" in done.stderr
    assert "importlib.metadata" not in done.stderr
    from nagle_sim import scenario
    from nagle_sim.sim.driver import run_sim
    assert done.stdout == run_sim(scenario.load(s1)).dumps() + "\n"
    code = ("import sys; from nagle_sim.cli.run import _import_simpy_without_its_version as f; "
            "f(); import simpy, importlib.metadata as m; "
            "print(hasattr(simpy, '__version__'), m.version('simpy') != '', "
            "'importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    assert out == ["False", "True", "True"]
