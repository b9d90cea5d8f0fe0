"""Record the fixtures of tests/explain/test_kernel_join.py (root, Linux with BTF, tcpdump,
gcc).

    sudo python -m tests.explain.record_kernel_fixtures

Runs each real program of tests/explain/programs against a NODELAY echo server on
loopback while tcpdump captures the connection and ``nagle-sim watch -o`` records the
kernel's decisions (tests/explain/watchcap.py), and writes NAME.pcap and NAME.watch.json
to tests/explain/kernel/:

- ``wwr``: the write-write-read Python client (6 rounds), both ends watched (--port);
- ``wwr_client``: the same, only the client watched (``watch -- PROGRAM``);
- ``cork``, ``more``: the C client corked with TCP_CORK never cleared, or sending every
  request with MSG_MORE (3 rounds), both ends watched.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from .watchcap import PROGRAMS, capture_and_watch

HERE = Path(__file__).resolve().parent / "kernel"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        corked = tmp / "corked"
        subprocess.run(["gcc", "-O1", "-o", str(corked), str(PROGRAMS / "corked.c")],
                       check=True)
        wwr = [sys.executable, str(PROGRAMS / "wwr.py"), "before"]
        runs = {
            "wwr": (wwr, 13, 13, 6, False),
            "wwr_client": (wwr, 13, 13, 6, True),
            "cork": ([str(corked), "cork"], 30, 20, 3, False),
            "more": ([str(corked), "more"], 30, 20, 3, False),
        }
        for name, (argv, request, reply, rounds, only) in runs.items():
            pcap, trace, _err = capture_and_watch(tmp, argv, request=request, reply=reply,
                                                  rounds=rounds, name=name,
                                                  program_only=only)
            (HERE / pcap.name).write_bytes(pcap.read_bytes())
            (HERE / trace.name).write_bytes(trace.read_bytes())
            print(f"{name}: {pcap.stat().st_size} B capture, {trace.stat().st_size} B trace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
