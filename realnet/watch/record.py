"""The kernel's own decisions during a real run: watch attached for one connection.

Owns: `KernelRecorder`, which a real run (`realnet.runner`) starts once it knows the
server's port and stops when the sides are done: it loads watch's BPF program for that
port (every socket whose local or peer port it is), reads its records on a thread of its
own while the run goes, and returns the decisions about the run's connection as trace
events marked ``by="kernel"`` (`realnet.watch.trace.kernel_events`), on the run's clock
(CLOCK_MONOTONIC, the capture's and the sides' clock: `bpf_ktime_get_ns`).

"When available": a host where watch cannot load (not root, no BTF, no libbpf) still runs;
`start` returns the one-line reason, which the trace's meta keeps. Nothing outlives the
recorder: the program, maps and links belong to its file descriptors (closed by `stop`,
and by the kernel if the run is killed).

Must not import rich, textual or simpy.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Final

from nagle_sim.model.events import Side
from nagle_sim.trace import EventRecord

from . import raw
from .decide import Conn, Engine
from .loader import Config, Watcher, WatchError
from .trace import kernel_events

DISABLE_ENV: Final = "NAGLE_SIM_NO_KERNEL_DECISIONS"
"""Set (to anything but "" or "0") to run real runs without watch (e.g. to time them)."""
_POLL_MS: Final = 50


class KernelRecorder:
    """The kernel's decisions about the connections on one port, for one real run."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.engine: Engine | None = None
        self.watcher: Watcher | None = None
        self.unavailable: str | None = None
        self.missing: list[str] = []
        self.counters: dict[str, int] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> str | None:
        """Load and attach; None when recording, else why not (one line)."""
        if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
            self.unavailable = f"not recorded (${DISABLE_ENV} is set)"
            return self.unavailable
        try:
            watcher = Watcher(Config(port=self.port), self._on_record)
            rep = watcher.start()
        except WatchError as exc:
            self.unavailable = str(exc)
            return self.unavailable
        except OSError as exc:
            self.unavailable = f"watch could not load: {exc}"
            return self.unavailable
        self.watcher = watcher
        self.missing = list(rep.lost)
        self.engine = Engine(hz=rep.hz or 250, t0_ns=0, keep=True)
        self._thread = threading.Thread(target=self._read, name="kernel-decisions",
                                        daemon=True)
        self._thread.start()
        return None

    def _on_record(self, blob: bytes) -> None:
        if self.engine is not None:
            self.engine.feed(raw.RawEvent.decode(blob))

    def _read(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if self.watcher is None:
                    return
                self.watcher.poll(_POLL_MS)

    def stop(self) -> None:
        """Read what is left and detach everything (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None
        with self._lock:
            watcher, self.watcher = self.watcher, None
            if watcher is None:
                return
            try:
                watcher.drain()
                self.counters = watcher.counters()
            finally:
                watcher.close()

    def connection(self) -> dict[Side, Conn]:
        """The run's two sockets by side: the client connected to the port, the server
        accepted on it (the last connection on the port if there were several)."""
        out: dict[Side, Conn] = {}
        if self.engine is None:
            return out
        for c in self.engine.all_conns:
            if c.dport == self.port and c.sport != self.port:
                out[Side.CLIENT] = c
            elif c.sport == self.port and c.dport:
                out[Side.SERVER] = c
        return out

    def events(self, t0_ns: int) -> list[EventRecord]:
        """The decisions about the run's connection, ``by="kernel"``, µs from
        ``t0_ns`` (the client's SYN on CLOCK_MONOTONIC)."""
        conns = self.connection()
        if not conns:
            return []
        return kernel_events(conns, t0_ns // 1000)

    def meta(self, n_events: int) -> dict[str, Any] | str:
        """What the trace's meta says about the recording."""
        if self.unavailable is not None:
            return f"unavailable: {self.unavailable}"
        out: dict[str, Any] = {"events": n_events, "by": "nagle-sim watch (BPF, "
                               "docs/watch.md)", **self.counters}
        if self.missing:
            out["missing"] = self.missing
        return out
