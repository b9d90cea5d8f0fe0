"""Build hook: a wheel compiles the simulation's hot modules with mypyc; an editable install
stays pure Python.

All metadata lives in pyproject.toml; this file only decides ``ext_modules``:

- ``pip install .``, ``pip wheel .`` and ``python -m build --wheel`` (setuptools' own
  ``bdist_wheel``/``build``/``install`` commands) compile `COMPILED` with mypyc into C
  extensions beside the ``.py`` files, which stay in the wheel: Python imports an
  extension before a source file of the same name, and the sources remain the reference.
- ``pip install -e .`` (setuptools' PEP 660 ``editable_wheel``, or the old ``develop``)
  compiles nothing and writes no ``.so`` into the source tree: a student who edits the
  model sees the change at the next run.
- ``NAGLE_SIM_PURE=1`` builds a pure wheel anyway (tests/test_wheel.py does, for speed).
- No C compiler, or mypyc missing from the build environment: a pure wheel and a warning,
  never a failed install. Only the speed differs (docs/speed.md).

mypyc compiles typed Python to C; the compiled modules behave the same (the golden traces
are byte-identical either way, checked in CI) but must keep to what mypyc accepts: class
constants marked ``Final``, no monkeypatching of compiled functions or classes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "nagle_sim/model/bbr.py",
    "nagle_sim/model/config.py",
    "nagle_sim/model/connection.py",
    "nagle_sim/model/cubic.py",
    "nagle_sim/model/endpoint.py",
    "nagle_sim/model/events.py",
    "nagle_sim/model/output.py",
    "nagle_sim/model/rate.py",
    "nagle_sim/model/recv.py",
    "nagle_sim/model/send.py",
    "nagle_sim/model/sock.py",
    "nagle_sim/model/state.py",
    "nagle_sim/model/timers.py",
    "nagle_sim/trace/records.py",
    "nagle_sim/trace/document.py",
    "nagle_sim/trace/codec.py",
    "nagle_sim/trace/units.py",
    "nagle_sim/scenario/errors.py",
    "nagle_sim/scenario/files.py",
    "nagle_sim/scenario/types.py",
    "nagle_sim/scenario/script.py",
    "nagle_sim/scenario/steps.py",
    "nagle_sim/scenario/loader.py",
    "nagle_sim/sim/driver.py",
]
"""What a wheel compiles: the model, the driver and the script walker (every simulated
segment runs through them), the trace's records and JSON codec (a big run builds and
writes a million records) and the scenario modules the driver's types come from. The
packages' ``__init__`` files (re-exports only) and everything else (CLI, app, exports,
realnet, summaries) are I/O- or UI-bound and stay interpreted."""

BUILDING = {"bdist_wheel", "build", "build_ext", "install", "bdist"}
"""setuptools commands that produce installable files (PEP 517 ``build_wheel`` runs
``bdist_wheel``). Metadata steps (``egg_info``, ``dist_info``), ``sdist`` and the editable
builds run without mypyc: it type-checks and generates C at the time this file runs."""
EDITABLE = {"editable_wheel", "develop"}


def _warn(message: str) -> None:
    print(f"nagle-sim setup.py: warning: {message}; building pure Python", file=sys.stderr)


def _wants_compiled() -> bool:
    commands = set(sys.argv[1:])
    if os.environ.get("NAGLE_SIM_PURE", "") not in ("", "0"):
        return False
    return bool(commands & BUILDING) and not commands & EDITABLE


class OptionalBuildExt(build_ext):
    """`build_ext` that falls back to the pure wheel when compiling fails (no C compiler,
    no Python headers): it removes whatever it built, so no module is left half compiled
    (each compiled module needs the shared mypyc library beside it)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:    # distutils' compiler errors have no common public base
            _warn(f"compiling with mypyc failed ({type(exc).__name__}: {exc})")
            self._remove_built()

    def _remove_built(self) -> None:
        for ext in self.extensions:
            path = self.get_ext_fullpath(ext.name)
            if os.path.exists(path):
                os.remove(path)
        self.extensions = []

    def get_outputs(self) -> list[str]:
        return [path for path in super().get_outputs() if os.path.exists(path)]


def _ext_modules() -> list[Any]:
    if not _wants_compiled():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not installed in the build environment")
        return []
    try:
        return mypycify(COMPILED, opt_level="3", debug_level="0")
    except (Exception, SystemExit) as exc:   # mypy reports type errors by exiting
        _warn(f"mypyc rejected the sources ({type(exc).__name__}: {exc})")
        return []


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
