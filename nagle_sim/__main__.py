"""The `nagle-sim` process's start-up guard; the command line is `nagle_sim.cli`.

Owns only what must happen before anything else is imported: Ctrl-C during start-up is
one line and exit 130 (not a traceback from inside an import), and the cyclic collector
is paused while the ~200 modules load (`nagle_sim.cli.main.main` turns it back on for
every command but run and show). Imports nothing else until both are in place.
"""

from __future__ import annotations

import _signal  # the C module: `signal` builds its enums on import, a window of a millisecond
import gc
import os
import sys


def _interrupted_at_start_up(signum: int, frame: object) -> None:
    os.write(2, b"error: interrupted\n")
    os._exit(130)


_STARTED_AS_COMMAND = __name__ == "__main__" or os.path.basename(sys.argv[0]) == "nagle-sim"
if _STARTED_AS_COMMAND and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_at_start_up)
_GC_PAUSED = _STARTED_AS_COMMAND and gc.isenabled()
if _GC_PAUSED:   # its passes over start-up's objects are 3 % of start-up
    gc.disable()


def main(argv: list[str] | None = None) -> int:
    """The `nagle-sim` command (the console script's entry point); ``argv`` for tests."""
    from .cli.main import main as run_command
    return run_command(argv, as_command=_STARTED_AS_COMMAND, gc_paused=_GC_PAUSED,
                       start_up_handler=_interrupted_at_start_up)


if __name__ == "__main__":
    sys.exit(main())
