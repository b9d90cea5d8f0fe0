"""The project's shape, held by tests (docs/architecture.md describes it; lint-imports holds
the import layering): where the command line lives and what bad input raises."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import nagle_sim
import realnet
from nagle_sim.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
PROCESS_ENTRY_POINTS = {"realnet/__main__.py", "realnet/relay.py", "realnet/watchdog.py",
                        "realnet/watch/__main__.py", "realnet/watch/demo.py",
                        "realnet/watch/build.py"}
"""Modules that start a process of their own (``python -m realnet``, the link relay, the
realnet watchdog,
``python -m realnet.watch`` until `nagle-sim watch` has its command, watch's demo program
and the BPF object's build): they parse their own command lines."""


def _sources() -> list[Path]:
    return sorted([*(ROOT / "nagle_sim").rglob("*.py"), *(ROOT / "realnet").rglob("*.py")])


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_argparse_is_imported_only_by_the_cli_and_process_entry_points() -> None:
    """A command's options live in `nagle_sim.cli` (one module per command); nothing else
    builds a parser of its own (serve's test-only one duplicated serve's options under
    other names)."""
    users = {p.relative_to(ROOT).as_posix() for p in _sources() if "argparse" in _imports(p)}
    assert users, "the check found no user of argparse at all"
    stray = sorted(u for u in users if not u.startswith("nagle_sim/cli/")
                   and u not in PROCESS_ENTRY_POINTS)
    assert stray == []


def test_the_entry_module_is_only_the_start_up_guard() -> None:
    lines = (ROOT / "nagle_sim" / "__main__.py").read_text("utf-8").splitlines()
    assert len(lines) < 50


def _error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (nagle_sim, realnet):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if info.name.startswith(("nagle_sim.tui", "nagle_sim.model")) or \
                    info.name.endswith("__main__"):
                continue    # the app's widgets need textual; the model's errors are bugs
            module = importlib.import_module(info.name)
            for name, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, Exception) and obj.__module__ == module.__name__:
                    found[f"{obj.__module__}.{name}"] = obj
    return list(found.values())


NOT_BAD_INPUT = {
    "nagle_sim.sim.driver.RunCancelled": "a newer run superseded this one (the app's)",
    "nagle_sim.sim.driver.RunLimit": "a run at its bound: the trace's outcome, exit 1",
    "nagle_sim.sim.driver._Passing": "a model bug on its way out of a catch-up",
    "nagle_sim.drill.runner._Stop": "the script's end, inside the drill runner",
    "realnet.relay._Stop": "a signal ending the relay process",
    "nagle_sim.export.png.PngUnavailable": "Pillow missing: turned into an ExportError",
    "nagle_sim.scenario.files.FileTooBig": "turned into the caller's one-line error",
    "realnet.child._Aborted": "the runner stopping a side, internal",
    "realnet.child._SideFailure": "a side's failure, recorded in the trace",
    "realnet.remote.protocol.ProtocolError": "a malformed peer message, turned into a RealnetError",
    "nagle_sim.tui.classroom.RealQueueBusy": "the app's message, never the CLI's",
    "nagle_sim.classroom.state.Refused": "a vote or teacher command refused: told to the "
                                         "student's app or the teacher's page, never the CLI",
    "nagle_sim.drill.code.CodeFailed": "a script's assertion failed: its result, exit 1",
    "nagle_sim.drill.code.CodeUnsupported": "the script is unsupported: its result",
    "nagle_sim.drill.commands.CommandUnsupported": "the script is unsupported: its result",
    "realnet.watch.build.BuildError": "the BPF object's build, a developer's tool",
    "realnet.watch.session.Stopped": "a signal ending a watch session",
}
"""Exceptions that are not the user's bad input, and where they go instead."""


def test_every_bad_input_error_is_a_user_error() -> None:
    """One error root: every error a user's input can raise subclasses `UserError`
    (so the command line catches one type and prints one line, exit 2)."""
    classes = _error_classes()
    names = {f"{c.__module__}.{c.__name__}" for c in classes}
    assert "nagle_sim.scenario.errors.ScenarioError" in names     # the walk saw them
    stray = sorted(n for c, n in ((c, f"{c.__module__}.{c.__name__}") for c in classes)
                   if not issubclass(c, UserError) and n not in NOT_BAD_INPUT)
    assert stray == []
    assert not [n for n in NOT_BAD_INPUT if n in names and
                issubclass(next(c for c in classes if f"{c.__module__}.{c.__name__}" == n),
                           UserError)], "listed as not bad input, yet a UserError"


TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py", "runners.py"}
"""The only modules directly under ``nagle_sim/``: the package, its start-up guard, the
error root and the runner seam. Everything else is a package with its name (a hub, an
executor, a feature, a view, the command line)."""


def test_nagle_sim_holds_packages_not_modules() -> None:
    """``ls nagle_sim`` tells hubs, executors, features, views and the cli apart: they are
    packages; a flat module beside them (``sweep_run.py``, ``compare.py``) is refused."""
    top = ROOT / "nagle_sim"
    modules = {p.name for p in top.glob("*.py")}
    assert "__main__.py" in modules     # the walk looked at the right folder
    assert modules - TOP_LEVEL_MODULES == set()
    packages = {p.name for p in top.iterdir() if (p / "__init__.py").is_file()}
    assert {"cli", "compare", "lessons", "scenario", "sweep", "trace"} <= packages


def test_no_module_is_named_for_a_commands_fragment() -> None:
    """A feature is one package (its command line in `nagle_sim.cli`), never a ``*_cli`` or
    ``*_run`` module beside another module of the same feature."""
    names = [p.relative_to(ROOT).as_posix() for p in _sources()]
    assert len(names) > 100
    fragments = [n for n in names
                 if Path(n).stem.endswith(("_cli", "_run")) or
                 any(part.endswith(("_cli", "_run")) for part in Path(n).parts[:-1])]
    assert fragments == []
