"""The error root: what the user did wrong, as one line and an exit code.

Owns: `UserError`, the base of every error that bad input anywhere raises (a scenario,
a trace, an option, a capture, a packetdrill script, a metric, an output path, a host
that cannot run a real scenario), and the exit codes of the command line. `nagle-sim`'s
``main`` catches `UserError` alone: it prints ``error: <message>`` on one line and exits
with `UserError.exit_code`. Anything else that escapes is a bug and keeps its traceback.

The pattern is click's ``ClickException``: the error carries how the process ends, the
code that raises it need not know whether a command line, the app or a test called it.

Imports nothing (every package may import it, the model excepted: the model's errors are
its own, `nagle_sim.model.state.ModelError`, a bug and never bad input).
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
"""The run itself failed: a deadlock, a run limit, the model and the kernel disagree."""
EXIT_BAD_INPUT: Final = 2
EXIT_INTERRUPTED: Final = 130


class UserError(Exception):
    """Bad input, or a request this host cannot carry out; ``str(err)`` is the one-line
    message shown to the user (it names where: the file and line, the option, the
    host), and ``exit_code`` how the command ends (2 unless a subclass or the raiser
    says otherwise).

    Subclasses keep their own names, so callers can catch one kind
    (`nagle_sim.scenario.ScenarioError`, `nagle_sim.trace.TraceError`, …); errors that
    were ``ValueError`` before the root existed stay ``ValueError`` too."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: str = "", exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "UserError"]
