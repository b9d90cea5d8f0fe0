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
    """A command's options live in `nagle_sim.cli` (a module per command); nothing else
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


FLAG_LETTERS_ALLOWED = {
    "nagle_sim/trace/records.py": "the predicates themselves",
    "nagle_sim/drill/": "packetdrill's script packets, not trace records",
    "realnet/": "captured packets (realnet's own records) before they become a trace",
    "nagle_sim/explain/": "not yet converted (causes, rebuild, totrace): its records are "
                          "SegmentRecords and should ask the predicates",
}
"""Where a flag letter may still be tested directly, and why."""


def test_trace_records_are_asked_about_flags_not_searched_for_letters() -> None:
    """``"A" in seg.flags`` spelled out at each use hides what is asked (a pure ACK? a
    FIN?); a `SegmentRecord` answers `has_ack`, `has_fin`, `is_pure_ack`, ..."""
    found: list[str] = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
                    and isinstance(node.left.value, str) and len(node.left.value) == 1
                    and isinstance(node.ops[0], ast.In | ast.NotIn)
                    and isinstance(node.comparators[0], ast.Attribute)
                    and node.comparators[0].attr == "flags"):
                found.append(f"{rel}:{node.lineno}")
    assert any(f.startswith("nagle_sim/trace/records.py") for f in found)  # the walk sees them
    stray = [f for f in found if not f.startswith(tuple(FLAG_LETTERS_ALLOWED))]
    assert stray == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    """Whose a private name is: ``nagle_sim.X`` (the top-level modules ``nagle_sim.runners``
    and ``nagle_sim.errors`` are their own), and in realnet, a flat package of modules that
    each own one concern, each of its modules and subpackages (``realnet.hostfacts``,
    ``realnet.remote``): ``realnet.runner`` reading ``hostfacts._int`` is a crossing."""
    return ".".join(module.split(".")[:2])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(source: str, me: str, package_init: bool = False) -> list[str]:
    """``from other.package import _name`` (or from a ``_module``), and ``mod._name`` on a
    module imported from another package, in the source of module ``me``."""
    base = me.split(".") if package_init else me.split(".")[:-1]
    found: list[str] = []
    foreign: dict[str, str] = {}        # local name → module of another package
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = (".".join(base[:len(base) - node.level + 1] +
                               ([node.module] if node.module else []))
                      if node.level else node.module or "")
            if not target.startswith(("nagle_sim", "realnet")) or \
                    _package(target) == _package(me):
                continue
            for alias in node.names:
                if _private(alias.name) or any(map(_private, target.split("."))):
                    found.append(f"{node.lineno}: {target}.{alias.name}")
                foreign[alias.asname or alias.name] = f"{target}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(("nagle_sim", "realnet")) and \
                        _package(alias.name) != _package(me):
                    foreign[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in foreign):
            found.append(f"{node.lineno}: {foreign[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_is_imported_across_packages() -> None:
    """A leading underscore means "this package's own": another package that needs the
    name gets it public, from the owner's ``__init__`` (``core._Seg``,
    ``export._check_target``, ``hostfacts._int`` were such crossings)."""
    crossings = {path.relative_to(ROOT).as_posix(): uses for path in _sources()
                 if (uses := _private_uses(path.read_text("utf-8"), _module_name(path),
                                           path.name == "__init__.py"))}
    assert crossings == {}


def test_the_private_name_check_sees_a_crossing() -> None:
    probe = ("from ..compare.align import _write_bytes\nfrom .terminal import _own\n"
             "from .. import trace as t\nfrom realnet import core\n\n"
             "t._anything, core._Seg, core.__name__\n")
    assert _private_uses(probe, "nagle_sim.render.probe") == [
        "1: nagle_sim.compare.align._write_bytes", "6: nagle_sim.trace._anything",
        "6: realnet.core._Seg"]
    inside_realnet = ("from realnet.hostfacts import _int\nfrom .child import _Aborted\n"
                      "from ..core import _Seg\nfrom .server import _own\n")
    assert _private_uses(inside_realnet, "realnet.remote.client") == [
        "1: realnet.hostfacts._int", "3: realnet.core._Seg"]  # .child: its own package


LONGEST_LINES = 80
"""Outside the model, a function longer than this is split into named phases."""
NOT_YET_SPLIT: dict[str, str] = {}
"""Functions still over `LONGEST_LINES`, and why (this list only shrinks)."""


def test_functions_outside_the_model_are_short() -> None:
    """The model's longest function is 54 lines; above it, a long function is split into
    named phases (``build_ladder``: content, layout, then one function per layer drawn)."""
    long: dict[str, int] = {}
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("nagle_sim/model/"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > LONGEST_LINES:
                    long[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert sorted(set(long) - set(NOT_YET_SPLIT)) == []
    assert sorted(set(NOT_YET_SPLIT) - set(long)) == [], "split now: take it off the list"


WATCH_NAMES_OTHERWISE = {
    "AUTOCORK_HOLD": "watch's is inferred (autocork or pacing) and a stall only past 10 ms: "
                     "pacing; the model's is the kernel's autocork, microseconds, no cause",
}
"""Reasons watch names with a cause where explain's link says none, and why."""


def test_watch_and_explain_link_reasons_to_causes_alike() -> None:
    """Two tables turn a Reason into explain's cause word: `nagle_sim.explain.reasons`
    (the model's stalls) and watch's ``CAUSE_OF`` (the kernel's own decisions). Where both
    name a cause they name the same one; where explain says a reason is no cause, watch
    names none either, unless listed with why (watch once called autocork "pacing" while
    explain called it no cause, and nothing said which was meant)."""
    from nagle_sim.explain.reasons import HOLD_CAUSE, NOT_A_CAUSE, RELEASE_CAUSE
    from realnet.watch.decide import CAUSE_OF

    linked = {**HOLD_CAUSE, **RELEASE_CAUSE}
    assert CAUSE_OF.keys() & linked.keys(), "the tables share no reason: nothing compared"
    differ = {r.name: (cause, linked[r]) for r, cause in CAUSE_OF.items()
              if r in linked and linked[r] != cause}
    assert differ == {}
    unlisted = sorted(r.name for r in CAUSE_OF if r in NOT_A_CAUSE)
    assert unlisted == sorted(WATCH_NAMES_OTHERWISE)


def test_each_package_says_what_it_owns_and_must_not_import() -> None:
    """The rule of docs/architecture.md for every package it lists (``nagle_sim``'s
    packages, realnet and realnet's subpackages): the ``__init__``'s docstring says what
    the package holds and what it imports or must not (realnet.watch's was empty)."""
    inits = [*sorted((ROOT / "nagle_sim").glob("*/__init__.py")),
             ROOT / "realnet" / "__init__.py", *sorted((ROOT / "realnet").glob("*/__init__.py"))]
    assert len(inits) > 15
    silent = []
    for path in inits:
        doc = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
        if len(doc) < 200 or "import" not in doc.lower():
            silent.append(path.relative_to(ROOT).as_posix())
    assert silent == []


def test_the_runner_type_is_defined_once() -> None:
    """An executor's type is `nagle_sim.trace.Runner` (and the model's option-taking
    `ModelRunner`), defined in the trace hub; no module spells its own ``Callable[...,
    Trace]`` alias (tui/exercise's ``Runner`` and compare.align's ``SimRunner`` were)."""
    aliases: list[str] = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Subscript) and ast.unparse(value).startswith(
                    ("Callable[", "collections.abc.Callable[")) and \
                    ast.unparse(value).replace(" ", "").endswith(",Trace]"):
                aliases.append(f"{rel}:{node.lineno}")
    assert aliases == []
    probe = ast.parse("SimRunner = Callable[..., Trace]\n").body[0]
    assert isinstance(probe, ast.Assign)
    assert ast.unparse(probe.value).replace(" ", "").endswith(",Trace]")   # the check's test
