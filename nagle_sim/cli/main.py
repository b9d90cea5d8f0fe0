"""`nagle-sim`'s main: parse, run the command, turn what escapes into one line and a code.

Owns: the exit codes' meaning (0 ok, 1 the run failed: deadlock / limit / mismatch, 2 bad
input, 130 interrupted), what escapes a command (printed as the one error line of
`nagle_sim.cli.messages`), and how a command process ends (`keep_to_the_end`). Every
bad-input error is a `nagle_sim.errors.UserError` and carries its exit code; nothing here
knows which module raised it.
"""

from __future__ import annotations

import _signal
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, UserError
from .messages import print_error
from .parser import build_parser

ENDS_PROCESS = frozenset({"run", "show"})
"""Commands whose process prints one trace and ends (`keep_to_the_end`)."""

_KEPT: list[object] = []
"""What the `nagle-sim` process keeps until it ends (`keep_to_the_end`)."""


def keep_to_the_end(trace: object, args: Any) -> None:
    """The `nagle-sim` process of `run` and `show` (never `main` called with arguments, as
    tests do) prints one trace and ends, so the trace costs nothing more once printed:

    - the cyclic collector stays off from start-up to the end (`nagle_sim.__main__`'s
      guard, `main`). The driver runs with it off anyway, so all of a run's million
      records would sit in the youngest generation, and the collections while the JSON is
      written would scan them all again: 2.7 % of the instructions of `run --json` on S3
      NODELAY at 1,000 messages. Reading a trace builds a million dicts and no cycles;
    - the trace is kept here, and `main` ends the process with `os._exit` once the output
      is flushed, so its objects are not freed one by one either (another 1.1 %). Nothing
      on these paths registers `atexit` work (`realnet run`, which can, is not one)."""
    if getattr(args, "ends_process", False):
        _KEPT.append(trace)


def main(argv: Sequence[str] | None = None, *, as_command: bool = False,
         gc_paused: bool = False,
         start_up_handler: Callable[[int, Any], Any] | None = None) -> int:
    """Run one command; the exit code. ``as_command``: this is the `nagle-sim` process
    itself (``argv`` None, started as the command), which may end with ``os._exit``;
    ``gc_paused``: the start-up guard turned the cyclic collector off;
    ``start_up_handler``: its Ctrl-C handler, replaced by Python's once set up."""
    # `_signal`, not `signal`: that one builds its enums on import (a millisecond or two)
    if start_up_handler is not None and _signal.getsignal(_signal.SIGINT) is start_up_handler:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)   # set up: normal Ctrl-C
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            from .app import cmd_tui
            args.file = None
            args.func = cmd_tui
        # run and show print one trace and end the process (`keep_to_the_end`)
        args.ends_process = argv is None and as_command and args.command in ENDS_PROCESS
        if gc_paused and not args.ends_process:
            gc.enable()     # long-lived commands (the app, serve, sweeps) need it
        code = int(args.func(args))
        sys.stdout.flush()      # a full disk or closed pipe shows here, not at exit
        if _KEPT:
            sys.stderr.flush()
            os._exit(code)      # skip freeing what `keep_to_the_end` kept
        return code
    except UserError as exc:
        print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        return EXIT_INTERRUPTED
    except RuntimeError as exc:
        # Ctrl-C while a module is still being imported can land in a class body's
        # __set_name__ (every dataclass field), and Python 3.11 wraps it in a RuntimeError
        if isinstance(exc.__cause__, KeyboardInterrupt):
            print_error("interrupted")
            return EXIT_INTERRUPTED
        raise
    except BrokenPipeError:     # `| head`: the reader has what it wanted
        _stdout_gone()
        return EXIT_OK
    except OSError as exc:      # an output that cannot be written (/dev/full, /proc/...)
        where = exc.filename if exc.filename is not None else "standard output"
        print_error(f"cannot write {where}: {exc.strerror or exc}")
        _stdout_gone()
        return EXIT_BAD_INPUT


def _stdout_gone() -> None:
    """Point stdout at /dev/null if it can no longer be written, so the interpreter's
    final flush of what is still buffered adds no second error."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
