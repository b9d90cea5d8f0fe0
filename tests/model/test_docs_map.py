"""docs/model.md's map of kernel rules stays true: every ``module.function`` it names
exists, and every rule function of the model appears in it (so a student who looks a
rule up in the map finds it, and a new rule cannot hide)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "model.md"
RULE_MODULES = ("send", "recv", "output", "timers", "rate", "connection")
NAMED = re.compile(r"`(" + "|".join(RULE_MODULES) + r")\.(?!py`)([a-z_]+)`")


def rule_functions(module: str) -> set[str]:
    mod = importlib.import_module(f"nagle_sim.model.{module}")
    return {name for name, fn in inspect.getmembers(mod, inspect.isfunction)
            if fn.__module__ == mod.__name__ and not name.startswith("_")}


def test_every_function_the_map_names_exists() -> None:
    named = NAMED.findall(DOC.read_text("utf-8"))
    assert named
    for module, name in named:
        assert name in rule_functions(module), f"docs/model.md names {module}.{name}"


def test_every_rule_function_is_in_the_map() -> None:
    named = set(NAMED.findall(DOC.read_text("utf-8")))
    missing = sorted(f"{m}.{f}" for m in RULE_MODULES for f in rule_functions(m)
                     if (m, f) not in named)
    assert not missing, f"not in docs/model.md's map: {missing}"
