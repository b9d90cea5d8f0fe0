"""Scenario parameters: a ``[params]`` table of named defaults, used as ``{name}`` in the
scenario's strings (scripts above all), set from the command line with ``--param`` and
varied by ``sweep``.

Owns the rules (docs/scenarios.md):

* A string that is exactly ``{name}`` takes the parameter's value with its type (so
  ``delay_ms = "{delay}"`` stays a number); any other string has each ``{name}``
  replaced by the value's text.
* A parameter declared as a table is a *choice*: its ``default`` key names the entry in
  use, and setting the parameter to another entry's name picks that one. An entry is a
  value, or a table of values for other parameters (one choice can set a script's setup
  and its message together, e.g. S3's ``mode = "plain" | "nodelay" | "cork"``).
* A scenario without ``[params]`` is left alone (its scripts' braces are blocks, not
  references). Unknown and unused parameters are errors naming the file and line.

Standard library only (and the error root, `nagle_sim.errors`).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import UserError

_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCALAR = (str, int, float, bool)


class ParamError(UserError, ValueError):
    """A bad parameter table or reference; ``str(err)`` is one line naming file and line.
    The scenario loader raises it again as a `ScenarioError`."""


def _where(where: str, text: str, needle: str) -> str:
    """``FILE:LINE`` of the first ``needle`` in the text (``FILE`` if there is none)."""
    at = text.find(needle)
    return f"{where}:{text.count(chr(10), 0, at) + 1}" if at >= 0 else where


def _declared_at(where: str, text: str, name: str) -> str:
    """``FILE:LINE`` where parameter ``name`` is declared: its ``name =`` line inside a
    ``[params…]`` table, or its own ``[params.name]`` header."""
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped.strip("[] ")
            if table == f"params.{name}":
                return f"{where}:{number}"
            continue
        if table.split(".")[0] == "params" and re.match(
                rf"""["']?{re.escape(name)}["']?\s*=""", stripped):
            return f"{where}:{number}"
    return _where(where, text, "params")


_SUBSTITUTED = ("link", "client", "server", "expect")
"""The tables whose strings may use parameters (titles and prose keep their braces)."""


def _names(names: Any, most: int = 8) -> str:
    """The first ``most`` names, comma-separated, and how many more (a file may declare
    thousands: the error stays one short line)."""
    names = list(names)
    if not names:
        return "none"
    more = f", … {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _text_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _resolve(declared: dict[str, Any], given: dict[str, Any], text: str,
             where: str) -> tuple[dict[str, Any], set[str]]:
    """The value of every parameter after choices are made, and the names that must be
    used somewhere (a choice whose entries are tables need not be used itself)."""
    values: dict[str, Any] = {}
    must_use: set[str] = set()
    for name in given:
        if name not in declared:
            raise ParamError(f"--param {name}: {where} declares no parameter {name!r} "
                             f"(declared: {_names(declared)})")
    for name, spec in declared.items():
        # where the parameter is declared costs a pass over the file: only for an error
        # (once per parameter made checking quadratic in their count, issue 29.3)
        def here(name: str = name) -> str:
            return _declared_at(where, text, name)
        if not _NAME.fullmatch(name):
            raise ParamError(f"{here()}: params.{name}: a parameter name is letters, digits "
                             "and _, not starting with a digit")
        if isinstance(spec, _SCALAR):
            value = given.get(name, spec)
            if not isinstance(value, _SCALAR):
                raise ParamError(f"{here()}: params.{name}: must be a string, number or boolean")
            values[name] = value
            must_use.add(name)
            continue
        if not isinstance(spec, dict):
            raise ParamError(f"{here()}: params.{name}: must be a string, number, boolean or "
                             "a table of choices")
        entries = {k: v for k, v in spec.items() if k != "default"}
        chosen = given.get(name, spec.get("default"))
        if not entries or not isinstance(chosen, str) or chosen not in entries:
            raise ParamError(f"{here()}: params.{name}: choose one of "
                             f"{_names(entries) if entries else '(no entries)'}, got {chosen!r}")
        entry = entries[chosen]
        if isinstance(entry, dict):
            values[name] = chosen
            for sub_name, sub_value in entry.items():
                if sub_name in declared or not _NAME.fullmatch(sub_name) or not isinstance(
                        sub_value, _SCALAR):
                    raise ParamError(f"{_declared_at(where, text, name)}: params.{name}."
                                     f"{chosen}.{sub_name}: an entry sets new parameters "
                                     "(names not declared elsewhere) to strings, numbers "
                                     "or booleans")
                values[sub_name] = sub_value
                must_use.add(sub_name)
        elif isinstance(entry, _SCALAR):
            values[name] = entry
            must_use.add(name)
        else:
            raise ParamError(f"{here()}: params.{name}.{chosen}: must be a value or a table")
    return values, must_use


def apply_params(doc: dict[str, Any], text: str, where: str,
                 declared: dict[str, Any] | None) -> None:
    """Substitute the parameters into every string of ``doc`` outside ``[params]``, in
    place, and remove that table.

    Args:
        doc: the parsed scenario, after ``--set`` overrides (``--param NAME=V`` arrives
            as ``params.NAME``).
        text, where: the file's text and name, for line numbers in errors.
        declared: the ``[params]`` table as the file declared it (before overrides);
            None when the file has none.

    Raises:
        ParamError: a bad table, a reference to an undeclared parameter, a parameter set
            that the file does not declare, or one that nothing uses.
    """
    given = doc.pop("params", None)
    if given is None and declared is None:
        return
    if not isinstance(given, dict) or (declared is not None and not isinstance(declared, dict)):
        raise ParamError(f"{_where(where, text, 'params')}: params must be a table of "
                         "name = value")
    declared = declared or {}
    overridden = {k: v for k, v in given.items() if k not in declared or v is not declared[k]}
    values, must_use = _resolve(declared, overridden, text, where)
    used: set[str] = set()

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise ParamError(f"{_where(where, text, m.group(0))}: unknown parameter {name!r} "
                             f"(declared: {_names(values)}; a script block "
                             "needs spaces inside its braces)")
        used.add(name)
        return _text_of(values[name])

    def sub(value: Any) -> Any:
        if isinstance(value, str):
            whole = _REF.fullmatch(value)
            if whole and whole.group(1) in values:
                used.add(whole.group(1))
                return values[whole.group(1)]
            return _REF.sub(one, value)
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sub(v) for v in value]
        return value

    # a choice entry's text may use the plain parameters (one level: not other entries)
    plain = {k for k, v in declared.items() if not isinstance(v, dict)}

    def plain_only(m: re.Match[str]) -> str:
        if m.group(1) not in plain:
            return m.group(0)
        used.add(m.group(1))
        return _text_of(values[m.group(1)])

    for name in list(values):
        if name not in plain and isinstance(values[name], str):
            values[name] = _REF.sub(plain_only, values[name])
    for key in _SUBSTITUTED:
        if key in doc:
            doc[key] = sub(doc[key])
    unused = sorted(must_use - used)
    if unused:
        name = unused[0]
        raise ParamError(f"{_declared_at(where, text, name)}: params: {name!r} is never "
                         "used as {" + name + "}")
