"""The grid of a sweep: which settings vary, and every cell's scenario.

Owns: the ``--vary`` grammar (`parse_vary`: a ``--set`` key or a scenario parameter and
its values), the grid's cells in order (`grid`: the last axis varies fastest, at most
`MAX_CELLS`), each cell's scenario validated before anything runs (`build_cells`, whose
errors name the option the user gave), and `SweepError`. Must not import textual, simpy,
realnet or an executor.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UserError
from ..scenario import Scenario, ScenarioError, loads

MAX_CELLS = 10_000
"""A grid larger than this is refused before anything runs (it is almost surely a typo)."""

class SweepError(UserError, ValueError):
    """A sweep that cannot run as asked; ``str(err)`` is one line."""


@dataclass(frozen=True, slots=True)
class Axis:
    """One varied setting: a ``--set`` key (``client.nodelay``) or a scenario parameter
    (``sleep``), and its values as text."""

    key: str
    values: tuple[str, ...]


def parse_vary(text: str) -> Axis:
    """``KEY=V1,V2,…`` → `Axis`. Values are TOML where they parse (``true``, ``10``,
    ``'linux'``), plain strings otherwise, exactly as ``--set`` reads them."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SweepError(f"--vary {text!r}: use KEY=V1,V2,…, e.g. client.nodelay=false,true")
    if not all(part.strip() for part in key.split(".")):
        raise SweepError(f"--vary {text!r}: bad key {key!r}")
    values = tuple(v.strip() for v in rest.split(","))
    if not values or any(not v for v in values):
        raise SweepError(f"--vary {text!r}: empty value in the list")
    if len(set(values)) != len(values):
        raise SweepError(f"--vary {text!r}: a value is listed twice")
    return Axis(key, values)


@dataclass(frozen=True, slots=True)
class Cell:
    """One point of the grid: (key, value text) for every axis, in axis order."""

    settings: tuple[tuple[str, str], ...]

    @property
    def overrides(self) -> list[str]:
        """``--set`` items; a key without a dot is a scenario parameter (``params.KEY``)."""
        return [f"{k if '.' in k else 'params.' + k}={v}" for k, v in self.settings]

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings)


def grid(axes: Sequence[Axis]) -> list[Cell]:
    """Every combination of the axes' values; the last axis varies fastest."""
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise SweepError(f"--vary {twice}: the same key is varied twice; give its values "
                         "once (KEY=V1,V2,…)")
    size = math.prod(len(a.values) for a in axes)
    if size > MAX_CELLS:
        raise SweepError(f"--vary: the grid has {size:,} cells; at most {MAX_CELLS:,}")
    return [Cell(tuple(zip(keys, combo, strict=True)))
            for combo in itertools.product(*(a.values for a in axes))]


def value_of(text: str) -> object:
    """A grid value as data (for CSV and plots): TOML if it parses, else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def build_cells(text: str, where: str, axes: Sequence[Axis], base: Sequence[str] = ()
                ) -> list[tuple[Cell, Scenario]]:
    """Every cell with its scenario (``base`` overrides first, then the cell's), all
    validated before anything runs."""
    out = []
    for cell in grid(axes):
        try:
            out.append((cell, loads(text, where, [*base, *cell.overrides])))
        except ScenarioError as exc:
            if base and not out:
                # the first cell failed: when the fixed settings fail on their own, the
                # error is theirs, not the cell's
                try:
                    loads(text, where, list(base))
                except ScenarioError as base_exc:
                    raise SweepError(_blame(str(base_exc), text, where, base)) from None
            where_in = f" (in the cell {cell.label()})" if cell.settings else ""
            raise SweepError(f"{_as_vary(str(exc), cell)}{where_in}") from None
    return out


def _blame(message: str, text: str, where: str, base: Sequence[str]) -> str:
    """``message`` with the --set / --param that causes it on its own, where one does."""
    for item in base:
        try:
            loads(text, where, [item])
        except ScenarioError:
            key, _, value = item.partition("=")
            option = (f"--param {key.removeprefix('params.')}={value}"
                      if key.startswith("params.") else f"--set {item}")
            return f"{message} (given by {option})"
    return message


def _as_vary(message: str, cell: Cell) -> str:
    """A cell's settings reach the scenario as --param / --set overrides; an error about
    one of them names the option the user gave: --vary."""
    for key, _ in cell.settings:
        for said in (f"--param {key}:", f"--set {key}:", f"--set {key!r}:"):
            if message.startswith(said):
                return f"--vary {key}:" + message[len(said):]
    return message
