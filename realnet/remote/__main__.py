"""``python -m realnet.remote [HOST:PORT]``: a serve without the nagle-sim command line
(`nagle-sim realnet serve` is the one with options)."""

import sys

from realnet.remote.server import serve_forever

if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve_forever(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070"))
