"""``nagle-sim run`` and ``nagle-sim show``: one trace, as JSON or as the terminal ladder.

Owns: the two commands' options, and `emit` (also ``realnet run``'s): JSON streamed to
stdout, or the ladder and summary (`nagle_sim.render.terminal`); exit 1 when the run did
not end cleanly. ``run --json`` is the start-up path that matters most: it imports the
scenario, the simulator and the trace, and nothing that draws.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..errors import EXIT_FAILED, EXIT_OK
from . import options
from .main import keep_to_the_end
from .messages import print_error

if TYPE_CHECKING:
    from ..trace import Trace, TraceStream


def emit(trace: Trace, args: argparse.Namespace, stream: TraceStream | None = None) -> int:
    """Print ``trace`` as ``args`` ask (`options.add_view_options`); 1 unless it ended ok.
    ``stream``: the `TraceStream` that took the run's records as it went (``--json``)."""
    if stream is not None:
        stream.finish(trace, sys.stdout)
        sys.stdout.write("\n")
    elif getattr(args, "json", False):
        # streamed: a big run's JSON is never one string
        trace.write_json(sys.stdout, version=getattr(args, "trace_format", 2))
        sys.stdout.write("\n")
    else:
        from rich.console import Console

        from ..explain.causes import wire_causes
        from ..render.terminal import print_run
        console = Console(width=args.width) if getattr(args, "width", None) else Console()
        print_run(trace, console, limit=None if args.all else args.limit, detail=args.detail,
                  wire=wire_causes)
    from ..trace import Outcome
    if trace.outcome is not Outcome.OK:
        if getattr(args, "json", False):
            print_error(trace.message)
        return EXIT_FAILED
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from ..runners import simulate
    from ..trace import TraceStream
    limits: dict[str, int] = {}
    if args.record_limit is not None:
        limits["record_limit"] = args.record_limit
    if args.time_limit is not None:
        limits["time_limit"] = round(args.time_limit * 1_000_000)
    scenario = options.load_scenario(args)
    # JSON out needs no record once written: the run hands them to the writer as it goes
    # and holds a few thousand at a time, whatever its length (docs/speed.md)
    stream = TraceStream(args.trace_format) if args.json else None
    trace = simulate(scenario, stream=stream, **limits)
    keep_to_the_end(trace, args)
    return emit(trace, args, stream)


def cmd_show(args: argparse.Namespace) -> int:
    """Print a saved trace (simulated or real) as a ladder and summary."""
    from ..trace import Trace
    trace = Trace.load(args.file)
    keep_to_the_end(trace, args)
    return emit(trace, args)


def fill_run(p: argparse.ArgumentParser) -> None:
    options.add_scenario(p)
    options.add_view_options(p)
    p.add_argument("--record-limit", type=options.bounded_int(1, options.MAX_RECORD_LIMIT),
                   metavar="N",
                   help="stop the run (outcome limit, exit 1) once its trace holds N records: "
                   "segments, app calls and model events (default 2000000, at most "
                   f"{options.MAX_RECORD_LIMIT}; each takes about 150-700 bytes of memory)")
    p.add_argument("--time-limit", type=options.time_limit, metavar="S",
                   help="stop the run (outcome limit, exit 1) after S simulated seconds "
                   f"(default 3600, at most {options.MAX_TIME_LIMIT_S:.0f})")
    p.set_defaults(func=cmd_run)


def fill_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="trace file (nagle-sim-trace/1 or /2 JSON)")
    options.add_view_options(p)
    p.set_defaults(func=cmd_show)
