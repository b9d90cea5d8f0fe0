"""The web driver a classroom app runs with (textual-serve's tab): Textual's `WebDriver`,
writing each packet to serve whole and one at a time.

Textual's driver writes its packets to stdout (a pipe to serve) with a bare `os.write`
from two threads: the app's loop writes the screen ("D" packets) and the input thread
answers serve's chunk requests with a file's 64 KB chunks ("P" packets). A pipe keeps a
write whole only up to PIPE_BUF (4 KB): a chunk bigger than the pipe's free room (a
chunk is always bigger than the 64 KB pipe) waits for serve to read, and a screen update
written meanwhile lands inside the chunk. serve then could not decode the chunk, stopped
reading the app (the tab froze), and the browser's export tab never finished loading
(the flaky classroom export test in tests/browser: 1 run in 8 with two CPU burners; in
the failed run the chunk that failed to decode, "DecodeError('More data expected')", was
the input thread's write that had waited 25 ms for room in the pipe). A write that a
signal cuts short would have lost the rest of its packet too: `os.write` returns how
much it wrote, and Textual ignores it.

Here every packet goes out under one lock and in full. serve selects this driver by
TEXTUAL_DRIVER (`nagle_sim.tui.serve`); the fork server's `TemplateDriver` builds on it.
Must not import simpy or realnet.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from textual.drivers.web_driver import WebDriver


class WholePackets:
    """Writes byte strings to a descriptor, each whole and none interleaved with
    another, from any thread."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> int:
        view = memoryview(data)
        with self._lock:
            while view:
                view = view[os.write(self.fd, view):]
        return len(data)


class ClassroomWebDriver(WebDriver):
    """Textual's web driver with `WholePackets` as its only way to stdout."""

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        # Textual annotates the attribute as partial(os.write, fd); any bytes -> int will do
        self._write = WholePackets(self.fileno)  # type: ignore[assignment]
