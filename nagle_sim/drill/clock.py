"""Model time for one endpoint driven by hand, as packetdrill drives a kernel socket.

Owns the stepping loop that the drill runner and the model's hand-driven tests
(tests/model/harness.py) share: before any input at time t, every timer due by t fires in
order; after every input or timer, what the endpoint sends is collected with the time it
was sent. Imports only the model; knows nothing of scripts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TypeVar

from ..model import Endpoint, Micros, Segment

T = TypeVar("T")


class ModelClock:
    """``now`` (µs) and the endpoint's output so far, ``sent``: (time sent, segment)."""

    __slots__ = ("ep", "now", "sent", "after_timer")

    def __init__(self, ep: Endpoint | None = None,
                 after_timer: Callable[[], None] | None = None) -> None:
        self.ep = ep
        self.now = 0
        self.sent: deque[tuple[int, Segment]] = deque()
        self.after_timer = after_timer
        """Called after each timer fires (the runner finishes a blocked read there)."""

    def collect(self) -> None:
        if self.ep is not None:
            for seg in self.ep.segments_to_send():
                self.sent.append((self.now, seg))

    def advance(self, until: int) -> None:
        """Move time to ``until`` (never backwards), firing the timers due on the way."""
        ep = self.ep
        if ep is not None:
            while (d := ep.next_deadline()) is not None and d <= until:
                self.now = max(self.now, d)
                ep.on_deadline(Micros(self.now))
                self.collect()
                if self.after_timer is not None:
                    self.after_timer()
        self.now = max(self.now, until)

    def input(self, fn: Callable[[Micros], T]) -> T:
        """Give the endpoint one input now (``fn(now)``) and collect what it sends."""
        result = fn(Micros(self.now))
        self.collect()
        return result
