"""The wheel `pip install .` builds (README step 1) holds every package and the lessons,
and its command runs from it alone, away from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy without build/ or egg-info: setuptools reuses an in-tree build/lib,
    # so a checkout that once built a wheel would ship lessons renamed since then
    source = tmp_path_factory.mktemp("source") / "nagle-sim"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", ".git", "__pycache__", ".venv", ".hypothesis",
        ".mypy_cache", ".ruff_cache", ".pytest_cache"))
    # NAGLE_SIM_PURE=1: the packaging is what is checked here, and compiling with mypyc
    # (setup.py) would add a minute or more; CI builds and tests the compiled wheel itself
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                            "-q", "-w", str(out)],
                           capture_output=True, text=True, timeout=300, cwd=out,
                           env={**os.environ, "NAGLE_SIM_PURE": "1"})
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = out.glob("nagle_sim-*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


def test_every_package_of_the_checkout_is_in_the_wheel(unpacked: Path) -> None:
    packages = {str(p.parent.relative_to(ROOT)) for top in ("nagle_sim", "realnet")
                for p in (ROOT / top).rglob("__init__.py")}
    missing = sorted(p for p in packages if not (unpacked / p / "__init__.py").exists())
    assert not missing, f"packages left out of the wheel: {missing}"
    lessons = sorted(p.parent.name for p in (unpacked / "nagle_sim" / "lesson_files")
                     .glob("*/scenario.toml"))
    assert lessons == sorted(p.parent.name for p in (ROOT / "lessons").glob("*/scenario.toml"))
    assert not (unpacked / "lessons").exists(), "no top-level `lessons` package"
    # every file a lesson ships beside its text (the capstone's capture.pcap) too
    shipped = sorted(str(p.relative_to(ROOT / "lessons")) for p in (ROOT / "lessons").glob(
        "*/*.pcap"))
    assert shipped, "the capstone lesson ships a capture"
    for name in shipped:
        assert (unpacked / "nagle_sim" / "lesson_files" / name).is_file(), name
    # the README's example scenarios, for `nagle-sim examples` (issue 31.10)
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.toml"))
    assert "s1_write_write_read.toml" in examples
    assert sorted(p.name for p in (unpacked / "nagle_sim" / "example_files").glob(
        "*.toml")) == examples
    assert not (unpacked / "examples").exists(), "no top-level `examples` package"
    # and the README's `nagle-sim drill examples/drill` scripts
    drill = sorted(p.name for p in (ROOT / "examples" / "drill").glob("*.pkt"))
    assert drill and sorted(p.name for p in (
        unpacked / "nagle_sim" / "example_files" / "drill").glob("*.pkt")) == drill


def test_the_watch_object_ships_with_its_sources(unpacked: Path) -> None:
    """`pip install .` needs no compiler for watch: the prebuilt CO-RE object is package
    data, byte for byte the checkout's, with the manifest and sources it was built from."""
    watch = unpacked / "realnet" / "watch"
    for name in ("nagle_watch.bpf.o", "nagle_watch.bpf.json", "bpf/nagle_watch.bpf.c",
                 "bpf/nagle_watch.h"):
        assert (watch / name).read_bytes() == (ROOT / "realnet" / "watch" / name).read_bytes()


def test_the_wireshark_plugin_ships(unpacked: Path) -> None:
    """`nagle-sim wireshark --install` copies explain's Lua post-dissector from the
    installed package."""
    name = "nagle_sim/explain/nagle_sim.lua"
    assert (unpacked / name).read_bytes() == (ROOT / name).read_bytes()


def test_a_pure_build_compiles_nothing(unpacked: Path) -> None:
    """NAGLE_SIM_PURE=1 (like an editable install) leaves every module interpreted."""
    assert not sorted(unpacked.rglob("*.so")), "a pure build holds compiled modules"


def test_the_command_runs_from_the_wheel_alone(unpacked: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    for args in (["lessons"], ["drill", "--help"], ["explain", "--help"], ["sweep", "--help"]):
        done = subprocess.run([sys.executable, "-m", "nagle_sim", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (args, done.stderr[-1000:])
    where = subprocess.run([sys.executable, "-c", "import nagle_sim; print(nagle_sim.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(unpacked)
