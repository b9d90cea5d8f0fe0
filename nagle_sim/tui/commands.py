"""The command palette's entries, derived from the key bindings (never a hand-kept copy).

Owns: collecting a screen's own bindings (its nagle_sim classes, base first) and turning
bindings into palette commands (title: the binding's description; help: its tooltip and
key). Used by the app's palette and the help screen. No simpy, no realnet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding, BindingType

PALETTE_SKIP = frozenset({"quit"})
"""Actions Textual's own palette entries already offer."""


def own_bindings(cls: type) -> list[BindingType]:
    """The BINDINGS declared by ``cls`` and its nagle_sim bases, base classes first."""
    out: list[BindingType] = []
    for klass in reversed(cls.__mro__):
        own = klass.__dict__.get("BINDINGS")
        if own and klass.__module__.startswith("nagle_sim"):
            out.extend(own)
    return out


def binding_commands(bindings: Iterable[BindingType],
                     run_action: Callable[[str], Any]) -> Iterator[SystemCommand]:
    """One palette command per binding (an action once), running it like its key would."""
    seen: set[str] = set()
    for b in bindings:
        if not isinstance(b, Binding) or b.action in PALETTE_SKIP or b.action in seen:
            continue
        seen.add(b.action)
        key = b.key_display or b.key.split(",")[0]
        help_text = f"{b.tooltip} (key {key})" if b.tooltip else f"key {key}"
        yield SystemCommand(b.description, help_text, partial(run_action, b.action))
