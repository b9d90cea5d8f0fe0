"""Module constants that mypyc compiles wrongly (issue 29.4).

mypyc 1.x stores a ``Final`` tuple that holds floats in a C static that reads as unset:
the compiled code then raises ``NameError: value for final name "X" was not set`` at the
first use (BBR's PACING_GAINS crashed every compiled run that reached PROBE_BW), while the
pure build runs. This test reads the compiled modules' sources (setup.py's COMPILED) for
module- and class-level ``Final`` names and fails on any whose value is a tuple with a
float in it: keep such tables in integers (as the kernel does) or in a list."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def compiled_sources() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text("utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "COMPILED"):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    raise AssertionError("setup.py has no COMPILED list")


def _is_final(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    return (isinstance(annotation, ast.Name) and annotation.id == "Final") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "Final")


def final_names(source: str) -> list[tuple[str | None, str]]:
    """(class name or None, name) of every Final at module or class level."""
    found: list[tuple[str | None, str]] = []
    tree = ast.parse(source)
    scopes: list[tuple[str | None, list[ast.stmt]]] = [(None, tree.body)]
    scopes += [(n.name, n.body) for n in tree.body if isinstance(n, ast.ClassDef)]
    for owner, body in scopes:
        for node in body:
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and node.value is not None and _is_final(node.annotation)):
                found.append((owner, node.target.id))
    return found


def _has_float(value: Any) -> bool:
    return isinstance(value, tuple) and any(
        isinstance(v, float) or _has_float(v) for v in value)


def test_no_compiled_final_tuple_holds_a_float() -> None:
    bad = []
    checked = 0
    for rel in compiled_sources():
        module = importlib.import_module(rel.removesuffix(".py").replace("/", "."))
        for owner, name in final_names((ROOT / rel).read_text("utf-8")):
            holder = getattr(module, owner) if owner else module
            checked += 1
            if _has_float(getattr(holder, name)):
                bad.append(f"{rel}: {owner + '.' if owner else ''}{name}")
    assert checked > 50     # the scan found the constants at all
    assert not bad, f"Final tuples with floats (mypyc cannot compile them): {bad}"


def test_the_check_finds_a_float_tuple() -> None:
    source = "from typing import Final\nA: Final = (5 / 4, 1.0)\nclass C:\n    B: Final = 2\n"
    assert final_names(source) == [(None, "A"), ("C", "B")]
    assert _has_float((5 / 4, 1.0)) and not _has_float((320, 256))
