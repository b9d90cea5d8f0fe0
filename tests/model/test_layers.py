"""The model's modules import only downwards (docs/model.md, "Theory of operation"), so a
student can read them bottom-up and there are no import cycles inside the model."""

from __future__ import annotations

import ast
from pathlib import Path

import nagle_sim.model

MODEL_DIR = Path(nagle_sim.model.__file__).parent

LAYERS: dict[str, int] = {
    "events": 0, "config": 0, "bbr": 0, "cubic": 0, "state": 0, "sock": 0,
    "rate": 1,
    "output": 2, "timers": 2,
    "send": 3, "recv": 3, "recovery": 3,
    "connection": 4,
    "endpoint": 5,
    "__init__": 6,
}


def model_imports(module: str) -> set[str]:
    """Sibling modules ``module`` imports (``from .x import …`` or ``from . import x``)."""
    tree = ast.parse((MODEL_DIR / f"{module}.py").read_text("utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module)
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_every_model_module_has_a_layer() -> None:
    assert sorted(p.stem for p in MODEL_DIR.glob("*.py")) == sorted(LAYERS)


def test_model_modules_import_only_lower_layers() -> None:
    """Layer 0 modules may import each other (data and vocabulary only, no rules)."""
    for module, layer in LAYERS.items():
        for imported in model_imports(module):
            below = LAYERS[imported] < layer or (layer == 0 and LAYERS[imported] == 0)
            assert below, f"{module} (layer {layer}) imports {imported} " \
                          f"(layer {LAYERS[imported]})"
