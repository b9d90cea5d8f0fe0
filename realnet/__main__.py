"""Headless real-socket run: ``python -m realnet scenario.toml [--json] [--set K=V]...``.

Owns: the tiny command line for headless jobs: prints the trace as JSON (view it with
`nagle-sim show`, or run `nagle-sim realnet run` for the ladder). Exit 0 ok, 1 the run
failed (deadlock, error, limit), 2 bad input, 130 interrupted (Ctrl-C or SIGTERM, after
everything the run made was removed). The SIGTERM handler (`realnet.interrupt`) is
installed before anything else is imported; a SIGTERM earlier than that (interpreter
start-up, nothing created yet) or after the trace is written ends the process the default
way (killed by the signal). Must not import textual, rich or simpy.
"""

from __future__ import annotations

import argparse
import sys

from realnet.interrupt import EXIT_TERMINATED, Terminated, sigterm_as_interrupt


def main(argv: list[str] | None = None) -> int:
    try:
        with sigterm_as_interrupt():
            return _main(argv)
    except KeyboardInterrupt as exc:
        print("error: terminated (SIGTERM)" if isinstance(exc, Terminated)
              else "error: interrupted", file=sys.stderr)
        return EXIT_TERMINATED
    except RuntimeError as exc:
        # An interrupt inside a class body's __set_name__ (a dataclass field of a module
        # imported during the run) comes wrapped in a RuntimeError on Python 3.11.
        if isinstance(exc.__cause__, KeyboardInterrupt):
            print("error: interrupted", file=sys.stderr)
            return EXIT_TERMINATED
        raise


def _main(argv: list[str] | None) -> int:
    from nagle_sim.errors import UserError
    from nagle_sim.scenario import load
    from nagle_sim.trace import Outcome

    parser = argparse.ArgumentParser(prog="python -m realnet",
                                     description="Run a scenario over real kernel sockets.")
    parser.add_argument("file", help="scenario file (TOML)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                        help="override a scenario key (repeatable)")
    parser.add_argument("--json", action="store_true",
                        help="accepted for symmetry with nagle-sim; the output is always JSON")
    parser.add_argument("--remote", metavar="HOST:PORT",
                        help="run the server side on a `nagle-sim realnet serve`")
    parser.add_argument("--token", help="the serve's token (default $NAGLE_SIM_REALNET_TOKEN)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="whole-run limit (default: derived from the scenario)")
    args = parser.parse_args(argv)
    try:
        from realnet.runner import run_real

        scenario = load(args.file, args.set)
        trace = run_real(scenario, remote=args.remote, timeout_s=args.timeout, token=args.token,
                         progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    trace.write_json(sys.stdout)    # streamed: the same text as dumps(), never all of it
    sys.stdout.write("\n")
    sys.stdout.flush()
    if trace.outcome is not Outcome.OK:
        print(f"error: {trace.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
