"""The link's scripted faults: `[link] drop` and `hold` (`nagle_sim.scenario.LinkFault`).

Owns: counting the segments that enter the link, per direction and kind (data, pure ACK,
FIN), and deciding each one's fate: lost, held back by a fixed extra delay, or passed on
as is. realnet's relay (`realnet.relay`) counts the same way on the raw IP packets, so a
scenario drops or reorders the same segment in the model and on the real path, whatever
the timing. Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

from ..model.events import ACK, FIN, RST, SYN, Segment, Side
from ..scenario import LinkFault


def segment_kinds(length: int, flags: int) -> tuple[str, ...]:
    """The `FAULT_KINDS` a segment counts as: "data" if it carries bytes, "fin" if it
    has FIN (both for data + FIN), "ack" for a bare ACK (no data, SYN, FIN or RST)."""
    kinds = []
    if length:
        kinds.append("data")
    if flags & FIN:
        kinds.append("fin")
    if not length and flags & ACK and not flags & (SYN | FIN | RST):
        kinds.append("ack")
    return tuple(kinds)


class LinkFaults:
    """The fate of each segment entering the link, by the scenario's fault entries."""

    def __init__(self, faults: tuple[LinkFault, ...]) -> None:
        self.faults = faults
        self.counts: dict[tuple[Side, str], int] = {}

    def fate(self, towards: Side, seg: Segment) -> int | None:
        """Count ``seg`` (travelling towards ``towards``) and return None if it is lost,
        else the µs it is held back beyond the link's delay (0: not held)."""
        hits: list[LinkFault] = []
        for kind in segment_kinds(seg.length, seg.flags):
            n = self.counts.get((towards, kind), 0) + 1
            self.counts[(towards, kind)] = n
            hits.extend(f for f in self.faults
                        if f.towards is towards and f.kind == kind and f.first <= n <= f.last)
        if any(f.extra is None for f in hits):
            return None
        return max((f.extra or 0 for f in hits), default=0)
