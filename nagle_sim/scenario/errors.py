"""Bad scenario input: the error, and how user text is quoted in its one-line message.

Owns: `ScenarioError` (a `nagle_sim.errors.UserError`: one line naming the file and line,
exit 2) and `clip` / `shown`, which every message quoting a user's value goes through so
that a message stays one printable line however long or strange the value. Imports only
the error root.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError


class ScenarioError(UserError, ValueError):
    """Bad scenario input. ``str(err)`` is the one-line message shown to the user."""



def clip(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis) and made one printable line
    (control characters such as newlines shown escaped), for quoting user input in
    one-line messages."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    if cut.isprintable():
        return cut
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in cut)


def shown(value: Any) -> str:
    """``repr(value)`` clipped for a message (huge ints are not even converted)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        try:
            return f"a {len(str(abs(value)))}-digit number"
        except ValueError:     # past sys.get_int_max_str_digits()
            return "a number of thousands of digits"
    if isinstance(value, str):
        return repr(clip(value))
    if isinstance(value, list | dict):
        return "a table" if isinstance(value, dict) else "an array"
    return clip(repr(value))
