"""Both captures of a remote run made one list of segments on this host's clock.

Owns: `merge_captures`: each direction's segments from the sender's capture (this host's,
or the serve's moved by the clock offset), and where the sender's capture missed one,
from the receiver's minus the one-way delay; `SOURCE_KEY` names where each came from.
Must not import simpy, textual or rich.
"""

from __future__ import annotations

import bisect
from typing import Any

from nagle_sim.model.events import Side
from realnet.assemble import (
    Seg,
)

SOURCE_KEY = (("L", "this host's capture, at the sender (the client)"),
              ("R", "the serve's capture, at the sender (the server), moved onto this "
                    "host's clock by the estimated offset"),
              ("A", "this host's capture at arrival, minus the estimated one-way delay "
                    "(the serve did not capture this segment)"),
              ("B", "the serve's capture at arrival, minus the estimated one-way delay "
                    "(this host did not capture this segment)"))
"""What each letter of ``meta.segment_capture`` (one per segment, in order) means."""


SEQ_SPACE = 1 << 32
ARRIVAL_SLACK_NS = 1_000_000
"""An arrival may appear this much before its send (the clock offset is an estimate)."""
MAX_PIECE_BYTES = 1 << 18
"""Longest captured segment looked back over (GRO / BIG TCP packets stay well under)."""


def _rel(seq: int, base: int) -> int:
    """A sequence number as an offset from ``base`` (modulo 2^32: the stream may wrap)."""
    return (seq - base) % SEQ_SPACE


class _Arrivals:
    """The receiver's capture of one direction: data by byte range, the rest by header.

    A NIC may cut a sender's TSO burst into MSS pieces, and GRO may merge pieces on
    receipt, so the two hosts' captures of the same bytes need not have the same segment
    boundaries: data is matched by the bytes it carries, never by its header."""

    def __init__(self, packets: list[tuple[int, Any]], base: int) -> None:
        self.base = base
        # by first byte, for bisect: a lookup must not scan the whole capture (100k ops)
        self.data = sorted((_rel(p.seq, base), _rel(p.seq, base) + p.payload_len, t)
                           for t, p in packets if p.payload_len)
        self.starts = [lo for lo, _, _ in self.data]
        self.control: dict[tuple[int, int, str], list[int]] = {}
        for t, p in sorted(packets, key=lambda tp: tp[0]):
            if not p.payload_len:
                self.control.setdefault((p.seq, p.ack, p.flags), []).append(t)

    def arrival(self, t_sent: int, p: Any) -> int | None:
        """When ``p`` (sent at ``t_sent``) had wholly arrived: for data, the first arrival
        at or after its send of a piece holding its last byte; for the rest, the next
        capture of the same header."""
        if not p.payload_len:
            queue = self.control.get((p.seq, p.ack, p.flags))
            return queue.pop(0) if queue else None
        last = _rel(p.seq, self.base) + p.payload_len - 1
        holding = []
        i = bisect.bisect_right(self.starts, last) - 1
        while i >= 0 and self.data[i][0] > last - MAX_PIECE_BYTES:
            lo, hi, t = self.data[i]
            if hi > last:
                holding.append(t)
            i -= 1
        holding.sort()
        if not holding:
            return None
        return next((t for t in holding if t >= t_sent - ARRIVAL_SLACK_NS), holding[-1])


def _covered(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open byte ranges, as sorted disjoint ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _uncovered(lo: int, hi: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi) outside ``covered`` (sorted disjoint ranges)."""
    out: list[tuple[int, int]] = []
    at = lo
    for c_lo, c_hi in covered:
        if c_hi <= at:
            continue
        if c_lo >= hi:
            break
        if c_lo > at:
            out.append((at, c_lo))
        at = max(at, c_hi)
        if at >= hi:
            break
    if at < hi:
        out.append((at, hi))
    return out


def _merge_direction(sent: list[tuple[int, Any]], received: list[tuple[int, Any]],
                     side: Side, one_way_ns: int, sent_letter: str, arrival_letter: str
                     ) -> list[tuple[Seg, str]]:
    """One direction: every sender-side segment with its arrival, then what only the
    receiver captured, each byte range once (the receiver's pieces of bytes the sender's
    capture already holds are arrivals, never segments of their own)."""
    everything = sent + received
    if not everything:
        return []
    base = min(everything, key=lambda tp: tp[0])[1].seq
    arrivals = _Arrivals(received, base)
    out: list[tuple[Seg, str]] = []
    sent_ranges = []
    sent_headers: dict[tuple[int, int, str], int] = {}
    for t, p in sorted(sent, key=lambda tp: tp[0]):
        out.append((Seg(t, side, p.seq, p.ack, p.payload_len, p.flags, p.window,
                         arrivals.arrival(t, p)), sent_letter))
        if p.payload_len:
            sent_ranges.append((_rel(p.seq, base), _rel(p.seq, base) + p.payload_len))
        else:
            key = (p.seq, p.ack, p.flags)
            sent_headers[key] = sent_headers.get(key, 0) + 1
    covered = _covered(sent_ranges)
    for t, p in sorted(received, key=lambda tp: tp[0]):
        if not p.payload_len:
            key = (p.seq, p.ack, p.flags)
            if sent_headers.get(key):
                sent_headers[key] -= 1
                continue
            out.append((Seg(t - one_way_ns, side, p.seq, p.ack, 0, p.flags, p.window, t),
                        arrival_letter))
            continue
        lo = _rel(p.seq, base)
        for a, b in _uncovered(lo, lo + p.payload_len, covered):
            seq = (base + a) % SEQ_SPACE
            out.append((Seg(t - one_way_ns, side, seq, p.ack, b - a, p.flags, p.window, t),
                        arrival_letter))
        # a retransmission the receiver saw twice is still the same bytes: count once
        covered = _covered(covered + [(lo, lo + p.payload_len)])
    return out


def merge_captures(local: list[Any], local_off: int, remote: list[Any], remote_to_ours: int,
                   port: int, one_way_to_client_ns: int, one_way_to_server_ns: int = 0
                   ) -> tuple[list[Seg], str]:
    """Both hosts' captures as one list of segments on our perf clock, each timed at its
    sender: the client's from this host's capture, the server's from the serve's capture
    when it has them, else from their arrival here minus the one-way delay. Arrivals come
    from the receiver's capture, matched by byte range (TSO bursts cut into MSS pieces and
    GRO-merged pieces cover the same bytes), so no byte range is ever counted twice.
    Returns (segments in time order, one source letter per segment, see `SOURCE_KEY`)."""
    here = [(p.t_ns - local_off, p) for p in local]
    there = [(p.t_ns - remote_to_ours, p) for p in remote]
    to_server_sent = [(t, p) for t, p in here if p.outgoing and p.dport == port]
    to_server_arrived = [(t, p) for t, p in there if not p.outgoing and p.dport == port]
    to_client_sent = [(t, p) for t, p in there if p.outgoing and p.sport == port]
    to_client_arrived = [(t, p) for t, p in here if not p.outgoing and p.sport == port]
    out = _merge_direction(to_server_sent, to_server_arrived, Side.CLIENT,
                           one_way_to_server_ns, "L", "B")
    out += _merge_direction(to_client_sent, to_client_arrived, Side.SERVER,
                            one_way_to_client_ns, "R", "A")
    out.sort(key=lambda item: item[0].t_ns)
    return [seg for seg, _ in out], "".join(letter for _, letter in out)


def causality(segs: list[Seg]) -> dict[str, Any]:
    """``meta.causality``: whether every merged segment arrives no earlier than it was
    sent on the merged clock (``arrive_before_sent`` 0), checked over every segment that
    has an arrival, with the worst case in µs (negative: an arrival before its send)."""
    checked = [s.arrive_ns - s.t_ns for s in segs if s.arrive_ns is not None]
    early = [d for d in checked if d < 0]
    return {"checked": len(checked), "arrive_before_sent": len(early),
            "worst_us": round(min(early) / 1000, 1) if early else None,
            "min_one_way_us": round(min(checked) / 1000, 1) if checked else None}
