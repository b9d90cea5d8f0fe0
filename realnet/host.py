"""What this host can do for a real run, asked before one starts.

Owns: `RealnetError` (a real run cannot be made here: not Linux, no root for namespaces,
a remote that cannot be used; a `nagle_sim.errors.UserError`, so one line and exit 2),
the checks that raise or explain it (`check_platform`, `capture_unavailable`,
`netns_unavailable`), whether the side processes may use real-time priority
(`rt_priority_available`), the TCP_MAXSEG that gives a scenario's MSS (`maxseg_for`), and
`Progress`, how a run reports its one-line status messages. Must not import simpy,
textual or rich.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Callable

from nagle_sim.errors import UserError
from realnet.hostfacts import read_sysctl as _read_sysctl

Progress = Callable[[str], None]
"""Where a run reports one-line status messages (what is captured, what is missing)."""


class RealnetError(UserError):
    """A real run cannot be made here (wrong OS, missing privilege, bad remote...): a
    `nagle_sim.errors.UserError`, so the CLI prints the one-line message and exits 2."""


SIDE_RT_PRIORITY = 5
"""SCHED_FIFO priority of the side processes when allowed (root); 0 = normal scheduling."""


def rt_priority_available() -> int:
    """`SIDE_RT_PRIORITY` if this process may use SCHED_FIFO, else 0."""
    if not hasattr(os, "SCHED_FIFO"):
        return 0
    try:
        limit = os.sched_get_priority_max(os.SCHED_FIFO)
    except OSError:
        return 0
    return min(SIDE_RT_PRIORITY, limit) if os.geteuid() == 0 else 0



def check_platform() -> None:
    if not sys.platform.startswith("linux"):
        system = platform.system() or sys.platform
        raise RealnetError(f"realnet runs on Linux only (this is {system}): it needs "
                           "TCP_CORK, TCP_QUICKACK, TCP_INFO and AF_PACKET")


def capture_unavailable() -> str | None:
    """Why packet capture cannot work here (None: it can)."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    except PermissionError:
        return "AF_PACKET capture needs CAP_NET_RAW (run as root)"
    except OSError as exc:
        return f"AF_PACKET capture failed: {exc.strerror or exc}"
    s.close()
    return None


def netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing"
    return None


TCP_TIMESTAMP_OPTION = 12
"""Bytes the timestamp option takes from every segment (net.ipv4.tcp_timestamps=1)."""


def maxseg_for(mss: int, fresh_namespace: bool = False) -> int:
    """TCP_MAXSEG that gives ``mss`` bytes of payload per segment.

    The scenario's ``mss`` is the payload size (the model's segment size; Linux's 1448 on
    a 1500-byte MTU). TCP_MAXSEG sets the MSS option, which does not count TCP options, so
    with timestamps on (the default, also in a new namespace) add their 12 bytes."""
    value = "1" if fresh_namespace else _read_sysctl("net.ipv4.tcp_timestamps")
    return mss + (TCP_TIMESTAMP_OPTION if value in (None, "1") else 0)
