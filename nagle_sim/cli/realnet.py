"""``nagle-sim realnet run | serve | cleanup``: real kernel sockets from the command line.

Owns: the three subcommands' options and wiring. The run goes through the executor seam
(`nagle_sim.runners.run_real`: one line and exit 2 when this host cannot run it); the
serve and the cleanup are realnet's own entry points, imported when asked for.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_OK, UserError
from . import options
from .parser import Command, add_commands
from .run import emit

SUBCOMMANDS = (
    Command("run", "run a scenario on real sockets and print the real ladder",
            "realnet:fill_realnet_run"),
    Command("serve", "serve the server side of scenarios to remote clients",
            "realnet:fill_realnet_serve"),
    Command("cleanup", "remove namespaces, relays and temp files of dead runs",
            "realnet:fill_realnet_cleanup"),
)


def cmd_realnet_run(args: argparse.Namespace) -> int:
    from ..runners import run_real
    # status lines (a congestion control the remote refused, retransmissions, a missing
    # capture) go to stderr as they come: only --json's meta held them before
    return emit(run_real(options.load_scenario(args), args.remote, args.token,
                         progress=_say), args)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_realnet_serve(args: argparse.Namespace) -> int:
    from ..runners import serve_real
    return int(serve_real(args.listen, token=args.token, no_auth=args.no_auth) or 0)


def cmd_realnet_cleanup(args: argparse.Namespace) -> int:
    from ..runners import remove_stale_real
    try:
        removed = remove_stale_real()
    except OSError as exc:
        raise UserError(f"realnet cleanup: {exc.strerror or exc} (run as root?)") from None
    print("\n".join(f"removed {name}" for name in removed) or "nothing to remove")
    return EXIT_OK


def fill_realnet(p: argparse.ArgumentParser) -> None:
    add_commands(p, "realnet_command", True, SUBCOMMANDS)


def fill_realnet_run(p: argparse.ArgumentParser) -> None:
    options.add_scenario(p)
    options.add_view_options(p)
    options.add_remote(p)
    p.set_defaults(func=cmd_realnet_run)


def fill_realnet_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default="127.0.0.1:7070", metavar="HOST:PORT")
    p.add_argument("--token", help="shared secret clients must know (default "
                   "$NAGLE_SIM_REALNET_TOKEN, else a random one, printed)")
    p.add_argument("--no-auth", action="store_true",
                   help="no token (allowed on a loopback address only)")
    p.set_defaults(func=cmd_realnet_serve)


def fill_realnet_cleanup(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_realnet_cleanup)
