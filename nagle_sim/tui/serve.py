"""Classroom mode: serve the TUI to browsers with textual-serve.

Each browser tab gets its own ``python -m nagle_sim`` process (the lesson list).
Must not import simpy or realnet.
"""

from __future__ import annotations

import shlex
import sys


def serve_command() -> str:
    """The command textual-serve runs per browser session (``nagle-sim`` with no args)."""
    return f"{shlex.quote(sys.executable)} -m nagle_sim"


def serve(host: str = "localhost", port: int = 8000, *, public_url: str | None = None) -> None:
    """Serve nagle-sim on http://host:port until interrupted (Ctrl+C)."""
    from textual_serve.server import Server

    Server(serve_command(), host=host, port=port, title="nagle-sim",
           public_url=public_url).serve()


if __name__ == "__main__":  # lets tests start the server without the CLI
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    serve(args.host, args.port)
