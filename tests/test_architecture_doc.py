"""docs/architecture.md stays true (in the style of tests/model/test_docs_map.py): its
package table lists every package and what each one really imports, its layers are the
`layers` contract lint-imports checks, and every `nagle_sim.…` / `realnet.…` name it writes
exists."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text("utf-8")
ROW = re.compile(r"^\| `((?:nagle_sim\.)?[a-z_]+)` \| (.+?) \| (.+?) \|$", re.MULTILINE)
NAME = re.compile(r"`((?:nagle_sim|realnet)(?:\.[A-Za-z_]+)+)`")


def _table() -> dict[str, set[str]]:
    """package → the packages it may import (short names, as the table writes them)."""
    return {pkg: set(re.findall(r"[a-z_]+", may)) for pkg, _owns, may in ROW.findall(DOC)}


def _short(module: str) -> str:
    return module if module == "realnet" else module.removeprefix("nagle_sim.")


def _package(module: str) -> str:
    parts = module.split(".")
    return "realnet" if parts[0] == "realnet" else ".".join(parts[:2])


def test_the_table_lists_every_package() -> None:
    on_disk = {f"nagle_sim.{p.parent.name}" for p in (ROOT / "nagle_sim").glob("*/__init__.py")}
    on_disk |= {"nagle_sim.errors", "nagle_sim.runners", "realnet"}
    assert set(_table()) == on_disk


def test_each_package_imports_only_what_the_table_says() -> None:
    """The "may import" column against the import graph (grimp, as lint-imports builds
    it): a package that starts importing another must say so here."""
    graph = grimp.build_graph("nagle_sim", "realnet", exclude_type_checking_imports=True)
    table = _table()
    wrong: dict[str, set[str]] = {}
    for module in graph.modules:
        pkg = _package(module)
        if pkg not in table or pkg == "nagle_sim.cli":
            continue        # the root's __init__/__main__; the cli may import anything
        used = {_short(_package(m)) for m in graph.find_modules_directly_imported_by(module)
                if m.startswith(("nagle_sim.", "realnet")) and _package(m) != pkg}
        if extra := used - table[pkg]:
            wrong.setdefault(pkg, set()).update(extra)
    assert wrong == {}
    assert table["nagle_sim.model"] == {"the", "standard", "library", "only"}


def test_the_layers_are_the_import_contracts() -> None:
    block = re.search(r"```layers\n(.*?)```", DOC, re.DOTALL)
    assert block is not None
    doc_layers = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))[
        "tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c["type"] == "layers"]
    assert len(layered) == 1
    assert doc_layers == layered[0]["layers"]
    listed = {p.strip() for layer in doc_layers for p in layer.split("|")}
    assert listed == set(_table())


@pytest.mark.parametrize("name", sorted(set(NAME.findall(DOC))))
def test_every_name_the_page_writes_exists(name: str) -> None:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            assert hasattr(obj, attr), f"docs/architecture.md names {name}"
            obj = getattr(obj, attr)
        return
    raise AssertionError(f"docs/architecture.md names {name}: no such module")


def test_the_readme_points_here() -> None:
    layout = (ROOT / "README.md").read_text("utf-8").split("## Layout", 1)[1].split("\n## ")[0]
    assert "docs/architecture.md" in layout
