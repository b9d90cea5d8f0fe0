"""SIGTERM as an interrupt: how a real run, or the whole ``python -m realnet`` command, is
stopped by a SIGTERM and still removes everything it made.

Owns: `Terminated` (what a SIGTERM raises in the main thread), `sigterm_as_interrupt`
(installs the handler for a run or a command, and on the way out raises a SIGTERM whose
exception was lost), `check` (the same, at the points where a run waits) and `pending`.

Why a subclass of KeyboardInterrupt: every ``except KeyboardInterrupt`` and ``finally``
that unwinds a run on Ctrl-C unwinds it the same way on SIGTERM. Why not KeyboardInterrupt
itself (measured, CPython 3.11.7; scratch runs of ``python -m realnet`` with SIGTERM sent
at random moments): when the exception passes through code run from a *string*
(``exec``/``eval``: every dataclass defined by a module imported in the middle of a run
builds its methods so), CPython marks the process as ended by an uncaught Ctrl-C, even if
a caller catches it, and under ``-m`` the interpreter then kills itself with SIGINT at exit
(status -2 instead of the 130 ``__main__`` returned: 1 run in 40). CPython compares the
exception's type by identity, so a subclass never sets that mark.

Why `check`: Python runs a signal handler between two bytecodes of the main thread, which
may be inside a callback whose exceptions Python only prints ("Exception ignored in":
an at-fork hook of ``os.fork()``, a weakref callback, a ``__del__``); the run would then
go on as if no SIGTERM had come (exit 0, 1 run in 40). The handler therefore also notes
the request, and `check` raises it again where the run waits (supervision, between phases,
at the end of the ``with``).

A second SIGTERM while the first one's exception is unwinding is noted, not raised: it
would cut the clean-up short (a namespace or relay left for the watchdog).

Must not import anything beyond the standard library (``__main__`` installs the handler
before importing the rest).
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType

EXIT_TERMINATED = 130
"""What ``python -m realnet`` returns after a SIGTERM or Ctrl-C, once it has cleaned up."""


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised in the main thread (see the module docstring for why a subclass)."""

    def __init__(self) -> None:
        super().__init__("SIGTERM")


_pending = False


def pending() -> bool:
    """True once a SIGTERM arrived while `sigterm_as_interrupt` was installed."""
    return _pending


def _handler(_signum: int, _frame: FrameType | None) -> None:
    global _pending
    _pending = True
    if isinstance(sys.exc_info()[1], KeyboardInterrupt):
        return      # already unwinding from one: let the clean-up finish
    raise Terminated


def check() -> None:
    """Raise `Terminated` if a SIGTERM came (its first exception may have been lost)."""
    if _pending:
        raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread for the body, so every ``finally``
    runs; a SIGTERM whose exception was lost is raised when the body ends. Nests (the
    inner one leaves the outer's handler in place). Only the main thread can install
    handlers: elsewhere (a run in the app's worker thread) this does nothing, and
    PDEATHSIG and the watchdog clean up instead."""
    global _pending
    try:
        previous = signal.signal(signal.SIGTERM, _handler)
    except ValueError:          # not the main thread
        yield
        return
    outermost = previous is not _handler
    if outermost:
        _pending = False
    try:
        yield
        check()
    finally:
        signal.signal(signal.SIGTERM, previous)
