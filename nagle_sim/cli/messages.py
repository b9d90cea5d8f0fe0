"""The one error line every command prints: ``error: <message>`` on stderr.

Owns the line's form (plain text, never rich markup, whitespace folded to one line,
clipped) so that a parser error, a `nagle_sim.errors.UserError` and a run's failure
message all read alike. Imports rich only when it prints.
"""

from __future__ import annotations

import sys

MAX_MESSAGE = 2000
"""Longest error message printed (user text inside messages is clipped already)."""


def print_error(message: str) -> None:
    """``error: message`` on one line of stderr. The message is plain text: user input in
    it (file names, keys, trace labels) is never read as rich markup."""
    one_line = " ".join(message.split())[:MAX_MESSAGE]
    try:
        from rich.console import Console
        from rich.text import Text
        Console(stderr=True, highlight=False).print(
            Text.assemble(("error:", "bold red"), " ", one_line), soft_wrap=True)
    except Exception:   # rich unusable: a plain line still tells the user what is wrong
        sys.stderr.write(f"error: {one_line}\n")
