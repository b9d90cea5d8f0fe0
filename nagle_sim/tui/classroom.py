"""Classroom policy for app processes started by `nagle-sim serve`, and export naming.

Owns: what a browser session may not do (no server file system, no writes, real-socket
runs only when the teacher allowed them, one at a time with a wall-time bound), the
cross-process queue for those real runs, and the file names exports get. Must not import
textual, simpy or realnet (the real runner arrives as a callable).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..scenario import Scenario
from ..trace import Trace

REAL_OFF = ("real-socket runs are off in this classroom; the teacher can start "
            "`nagle-sim serve --allow-real` to allow them")
"""Why `r` runs nothing in a classroom session the teacher did not open to real runs."""

NO_FILES = "the classroom has no access to the server's files"


@dataclass(frozen=True, slots=True, kw_only=True)
class Classroom:
    """The policy of one served app process (None on the app: a local, trusted user)."""

    allow_real: bool = False
    real_lock: Path | None = None
    """File the serve process created; its flock makes real runs take turns."""
    real_timeout_s: float = 20.0
    """Wall-time bound of one real run (the runner's own whole-run limit is capped at it)."""
    queue_wait_s: float = 120.0
    """How long a real run waits for its turn before giving up with a message."""


class RealQueueBusy(Exception):
    """The real-socket queue did not free up in time; ``str()`` is the user's message."""


def queued_runner(run: Callable[..., Trace], policy: Classroom, *,
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> Callable[[Scenario], Trace]:
    """Wrap realnet's ``run(scenario, timeout_s=...)`` so that sessions take turns.

    Every served app process is a separate process, so the queue is an exclusive `flock`
    on the file the serve process created; waiting polls (a thread blocked in flock could
    not be cancelled when the student leaves)."""

    def runner(scenario: Scenario) -> Trace:
        if policy.real_lock is None:
            return run(scenario, timeout_s=policy.real_timeout_s)
        fd = os.open(policy.real_lock, os.O_RDWR)
        try:
            give_up = clock() + policy.queue_wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if clock() >= give_up:
                        raise RealQueueBusy(
                            "another student's real-socket run is still going; try again "
                            "in a minute") from None
                    sleep(0.2)
            return run(scenario, timeout_s=policy.real_timeout_s)
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    return runner


def variant_name(overrides: list[str]) -> str:
    """A file-name fragment for a what-if state, from its ``--set`` overrides.

    ``[]`` → ``""``; ``["client.nodelay=true"]`` → ``"client-nodelay"``;
    ``['server.profile="windows"']`` → ``"server-windows"``."""
    parts: list[str] = []
    for item in overrides:
        key, _, value = item.partition("=")
        value = value.strip('"')
        side, _, option = key.partition(".")
        if side == "link":
            part = f"delay-{value}ms"
            if part not in parts:
                parts.append(part)
        elif value == "true":
            parts.append(f"{side}-{option}")
        elif value == "false":
            parts.append(f"{side}-no-{option}")
        elif option == "profile":
            parts.append(f"{side}-{value}")
        elif len(value) > 16:  # a script: a short digest keeps the name a name
            parts.append(f"{side}-{option}-{hashlib.sha1(value.encode()).hexdigest()[:6]}")
        else:
            parts.append(f"{side}-{option}-{value}")
    return "-".join(parts)


def export_stem(name: str, overrides: list[str]) -> str:
    """``<lesson or scenario name>[-<variant>]``, safe as a file name anywhere."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "nagle-sim"
    variant = variant_name(overrides)
    return f"{base}-{variant}" if variant else base
