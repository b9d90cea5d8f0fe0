"""The serve's clock against this host's, and the path's own delays and rate.

Owns: `ClockEstimate` and `estimate_offset`. Every segment both hosts captured bounds the
offset: a segment sent here cannot have arrived there before it was sent, nor one sent
there arrived here before (causality), so each direction gives one side of an interval
and the tightest segment of each direction wins. The estimate is the interval's middle
(or the point that gives a declared asymmetric path, `nagle_sim.scenario.Link.
describes_path`, its asymmetry), its uncertainty half the interval, and the path's
one-way delays are the *minimum* one-way delays at that offset: never the handshake's
round trip, which holds the remote's turnaround (a slow host answers a SYN late). With
no segment captured on both hosts, the control channel's best round trip gives the
offset and this host's own capture the path's round trip. `path_rate_bps`: the path's
rate from the receiver's spacing of back-to-back segments (packet pairs).
Must not import simpy, textual or rich.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from nagle_sim.scenario import Scenario
from realnet.remote.protocol import CLOCK_SAMPLES

SEQ_SPACE = 1 << 32
MAX_PIECE_BYTES = 1 << 18
"""Longest captured segment looked back over (GRO / BIG TCP packets stay well under)."""
HEADER_BYTES = 52
"""IPv4 + TCP with timestamps: what a packet adds to its payload on the wire."""
PAIR_GAP_NS = 50_000
"""Two segments sent at most this far apart count as back to back (a packet pair)."""
MIN_PAIRS = 5
"""Fewer packet pairs than this measure no rate."""
UNLIMITED_BPS = 1_000_000_000
"""A path measured at this rate or faster is taken as unlimited: serialization at 1 Gbit/s
is 12 µs per full segment, below what the comparison can see."""


@dataclass(slots=True)
class ClockEstimate:
    """The serve's clock against ours (server perf − client perf), how sure it is, and
    the path's delays."""

    offset_ns: int
    method: str
    control_ns: int
    control_rtt_ns: int
    handshake_rtt_ns: int | None = None
    one_way_to_client_ns: int = 0
    one_way_to_server_ns: int = 0
    uncertainty_ns: int = 0
    """The true offset is within this of `offset_ns` (half the interval the segments
    allow; half the control channel's round trip when they allow none)."""
    bounding_segments: int = 0
    """How many segments, captured on both hosts, bound the offset (0: control channel)."""
    path_from: str = ""
    """Where the path's delays come from, in words."""
    path_rate_bps: int | None = None
    """The path's rate from packet pairs (0: faster than `UNLIMITED_BPS`; None: not
    measured, `rate_note` says why)."""
    rate_note: str = ""

    def to_meta(self) -> dict[str, Any]:
        def us(v: int | None) -> float | None:
            return None if v is None else round(v / 1000, 1)
        return {"used_us": us(self.offset_ns), "method": self.method,
                "uncertainty_us": us(self.uncertainty_ns),
                "bounding_segments": self.bounding_segments,
                "control_channel_us": us(self.control_ns),
                "control_rtt_us": us(self.control_rtt_ns),
                "handshake_rtt_us": us(self.handshake_rtt_ns),
                "one_way_to_client_us": us(self.one_way_to_client_ns),
                "one_way_to_server_us": us(self.one_way_to_server_ns)}

    def path_meta(self) -> dict[str, Any]:
        """``meta.path``: the path's delays and rate as the model's link should take them."""
        return {"to_server_us": round(self.one_way_to_server_ns / 1000, 1),
                "to_client_us": round(self.one_way_to_client_ns / 1000, 1),
                "rtt_us": round((self.one_way_to_server_ns + self.one_way_to_client_ns)
                                / 1000, 1),
                "from": self.path_from, "rate_bps": self.path_rate_bps,
                "rate_note": self.rate_note}


def _time(tp: tuple[int, Any]) -> int:
    return tp[0]


def _rel(seq: int, base: int) -> int:
    return (seq - base) % SEQ_SPACE


def _first_arrivals(sent: list[tuple[int, Any]], received: list[tuple[int, Any]]
                    ) -> list[tuple[int, int]]:
    """(first send, first arrival) of every header or byte both captures hold, each time
    on its own host's clock. Never a guess: whatever the two captures' segment boundaries
    (TSO bursts cut in pieces, GRO merging them), the first arrival of a byte follows its
    first send, and the first arrival of a header (a pure ACK, SYN, FIN) the first send of
    that header. Data is keyed by each sent segment's first byte."""
    if not sent or not received:
        return []
    base = min(sent + received, key=lambda tp: tp[0])[1].seq
    first_header: dict[tuple[int, int, str, int], int] = {}
    pieces = []
    for t, p in received:
        if p.payload_len:
            lo = _rel(p.seq, base)
            pieces.append((lo, lo + p.payload_len, t))
        else:
            key = (p.seq, p.ack, p.flags, p.window)
            if key not in first_header or t < first_header[key]:
                first_header[key] = t
    pieces.sort()
    starts = [lo for lo, _, _ in pieces]
    out: list[tuple[int, int]] = []
    seen: set[Any] = set()
    for t, p in sorted(sent, key=_time):
        if not p.payload_len:
            key = (p.seq, p.ack, p.flags, p.window)
            if key in seen:
                continue
            seen.add(key)
            if key in first_header:
                out.append((t, first_header[key]))
            continue
        byte = _rel(p.seq, base)
        if byte in seen:
            continue            # a retransmission: its first send is the one that counts
        seen.add(byte)
        i = bisect.bisect_right(starts, byte) - 1
        best = None
        while i >= 0 and pieces[i][0] > byte - MAX_PIECE_BYTES:
            lo, hi, at = pieces[i]
            if hi > byte and (best is None or at < best):
                best = at
            i -= 1
        if best is not None:
            out.append((t, best))
    return out


def _rate(sent: list[tuple[int, Any]], received: list[tuple[int, Any]]
          ) -> tuple[int | None, int]:
    """The path's rate from packet pairs: two data segments the sender sent back to back
    (within `PAIR_GAP_NS`) reach the receiver spaced by the bottleneck's time for the
    second; the median over every pair, or None with fewer than `MIN_PAIRS` pairs.
    Returns (bit/s or None, number of pairs)."""
    pairs = {(p.seq, p.payload_len): t for t, p in sent if p.payload_len}
    arrivals = sorted(((t, p) for t, p in received if p.payload_len), key=_time)
    rates = []
    for (t1, p1), (t2, p2) in zip(arrivals, arrivals[1:], strict=False):
        s1, s2 = pairs.get((p1.seq, p1.payload_len)), pairs.get((p2.seq, p2.payload_len))
        if s1 is None or s2 is None or not 0 <= s2 - s1 <= PAIR_GAP_NS:
            continue
        if (p2.seq - p1.seq) % SEQ_SPACE != p1.payload_len:
            continue            # not consecutive bytes: not one burst
        gap = t2 - t1
        rates.append(UNLIMITED_BPS * 10 if gap <= 0 else
                     (p2.payload_len + HEADER_BYTES) * 8 * 1_000_000_000 // gap)
    if len(rates) < MIN_PAIRS:
        return None, len(rates)
    rates.sort()
    return rates[len(rates) // 2], len(rates)


def _local_round_trip(here: list[tuple[int, Any]], port: int) -> int | None:
    """The shortest time from a segment this host sent to the first segment it received
    that acknowledges it: the path's round trip plus the remote's quickest turnaround
    (an upper bound on the path's; used only when the serve captured nothing)."""
    sent = sorted(((t, p) for t, p in here if p.outgoing and p.dport == port
                   and (p.payload_len or "S" in p.flags or "F" in p.flags)), key=_time)
    acks = sorted(((t, p) for t, p in here if not p.outgoing and p.sport == port
                   and "A" in p.flags), key=_time)
    times = [ta for ta, _ in acks]
    best = None
    for t, p in sent:
        end = (p.seq + p.payload_len + ("S" in p.flags) + ("F" in p.flags)) % SEQ_SPACE
        # the first acknowledgement is near: a bounded look keeps 100k segments linear
        start = bisect.bisect_left(times, t)
        for ta, a in acks[start:start + 64]:
            if (a.ack - end) % SEQ_SPACE < SEQ_SPACE // 2:
                if best is None or ta - t < best:
                    best = ta - t
                break
    return best


def _handshake_rtt(here: list[tuple[int, Any]], port: int) -> int | None:
    """The first SYN-ACK's arrival minus the last SYN sent before it (kept for the record
    only: it holds the remote's turnaround, so it never sets the path's delays)."""
    t4 = next((t for t, p in sorted(here, key=lambda tp: tp[0])
               if not p.outgoing and p.sport == port and "S" in p.flags
               and "A" in p.flags), None)
    syns = [t for t, p in here if p.outgoing and p.dport == port and "S" in p.flags
            and "A" not in p.flags and t4 is not None and t <= t4]
    return None if t4 is None or not syns else t4 - max(syns)


def estimate_offset(local: list[Any], local_off: int, remote: list[Any], remote_off: int,
                     port: int, scenario: Scenario, control_ns: int,
                     control_rtt_ns: int) -> ClockEstimate:
    """The offset from every segment both hosts captured (each direction bounds it; the
    tightest segment of each wins), else the control channel's best round trip; the
    path's one-way delays (minimum ones) and rate. A declared asymmetric path (the
    scenario's link delays, when they add up to the measured round trip) splits the round
    trip as declared; otherwise both directions are taken as equally long."""
    here = [(int(p.t_ns) - local_off, p) for p in local]
    there = [(int(p.t_ns) - remote_off, p) for p in remote]
    est = ClockEstimate(control_ns, f"control channel (best of {CLOCK_SAMPLES} round "
                        "trips)", control_ns, control_rtt_ns,
                        uncertainty_ns=control_rtt_ns // 2)
    est.handshake_rtt_ns = _handshake_rtt(here, port)
    up = _first_arrivals([(t, p) for t, p in here if p.outgoing and p.dport == port],
                         [(t, p) for t, p in there if not p.outgoing and p.dport == port])
    down = _first_arrivals([(t, p) for t, p in there if p.outgoing and p.sport == port],
                           [(t, p) for t, p in here if not p.outgoing and p.sport == port])
    if up and down:
        _bound_by_segments(est, up, down, scenario, control_ns, control_rtt_ns)
    if not est.path_from:
        _path_without_segments(est, here, port, scenario, control_rtt_ns)
    _path_rate(est, here, there, port)
    return est


def _bound_by_segments(est: ClockEstimate, up: list[tuple[int, int]],
                       down: list[tuple[int, int]], scenario: Scenario, control_ns: int,
                       control_rtt_ns: int) -> None:
    """The offset from the segments both hosts captured (``up``: to the server, ``down``:
    to the client, each (sent, arrived) on its own host's clock), narrowed by the control
    channel's round trip where that is tighter; the path's one-way delays with it. Leaves
    ``est`` as it was (but for its method's note) when the captures contradict each
    other."""
    ds, dc = scenario.link.to_server_delay * 1000, scenario.link.to_client_delay * 1000
    # arrival there (their clock) − offset ≥ send here; send there − offset ≤ arrival here
    upper = min(arr - sent for sent, arr in up)
    lower = max(sent - arr for sent, arr in down)
    if upper < lower:
        est.method += (f"; the captures contradict each other (the segments bound the "
                       f"offset to an empty interval, {lower / 1000:.0f} to "
                       f"{upper / 1000:.0f} µs): not used")
        return
    rtt = upper - lower
    declared = scenario.link.describes_path(rtt / 1000)
    offset = (upper + lower - (ds - dc if declared else 0)) // 2
    # The control channel bounds the offset too (its server time was read between our two
    # reads). It is the looser bound whenever both directions have a segment that crossed
    # quickly; where it is the tighter (one direction bounded only by a retransmission's
    # first send), the interval is narrowed to both.
    lo, hi = control_ns - control_rtt_ns // 2, control_ns + (control_rtt_ns + 1) // 2
    both, how = (lower, upper), ""
    if max(lower, lo) > min(upper, hi):
        how = (f"; the control channel's ({control_ns / 1000:.0f} ± "
               f"{control_rtt_ns / 2000:.0f} µs) disagrees: the kernel's timestamps "
               "are kept")
    elif control_rtt_ns < upper - lower:
        both = (max(lower, lo), min(upper, hi))
        offset = (both[0] + both[1]) // 2
        how = "; narrowed by the control channel's round trip"
    offset = min(both[1], max(both[0], offset))
    est.offset_ns = offset
    est.uncertainty_ns = max(both[1] - offset, offset - both[0])
    est.bounding_segments = len(up) + len(down)
    est.one_way_to_server_ns = upper - offset
    est.one_way_to_client_ns = offset - lower
    est.method = (f"segments captured on both hosts ({len(up)} to the server, "
                  f"{len(down)} to the client bound it)"
                  + ("; split as the scenario's declared asymmetric link"
                     if declared else "") + how)
    est.path_from = ("the captures' minimum one-way delays (their sum is the path's round "
                     "trip; " + ("split as the scenario declares" if declared
                                 else "split evenly") + ")")


def _path_without_segments(est: ClockEstimate, here: list[tuple[int, Any]], port: int,
                           scenario: Scenario, control_rtt_ns: int) -> None:
    """The path's one-way delays when no segment bounds the offset: this host's quickest
    acknowledged segment (which holds the remote's turnaround), else the control
    channel's best round trip, split as a declared asymmetric link or evenly."""
    ds, dc = scenario.link.to_server_delay * 1000, scenario.link.to_client_delay * 1000
    quickest = _local_round_trip(here, port)
    rtt = control_rtt_ns if quickest is None else quickest
    if quickest is None:
        est.path_from = ("the control channel's best round trip (no segment was "
                         "captured with its acknowledgement)")
    else:
        est.path_from = ("this host's capture: the quickest acknowledgement of a "
                         "segment (the serve captured none; includes the remote's "
                         "quickest turnaround)")
    declared = scenario.link.describes_path(rtt / 1000)
    est.one_way_to_client_ns = round(rtt * dc / (ds + dc)) if declared else rtt // 2
    est.one_way_to_server_ns = rtt - est.one_way_to_client_ns


def _path_rate(est: ClockEstimate, here: list[tuple[int, Any]],
               there: list[tuple[int, Any]], port: int) -> None:
    """The path's rate from back-to-back segment pairs captured on both hosts (the slower
    direction's), or why it was not measured."""
    rate_up, n_up = _rate([(t, p) for t, p in here if p.outgoing and p.dport == port],
                          [(t, p) for t, p in there if not p.outgoing and p.dport == port])
    rate_down, n_down = _rate(
        [(t, p) for t, p in there if p.outgoing and p.sport == port],
        [(t, p) for t, p in here if not p.outgoing and p.sport == port])
    rates = [r for r in (rate_up, rate_down) if r is not None]
    if rates:
        rate = min(rates)
        est.path_rate_bps = 0 if rate >= UNLIMITED_BPS else rate
        est.rate_note = (f"from {n_up + n_down} packet pairs (median spacing at the "
                         "receiver)" + ("; faster than 1 Gbit/s: no serialization"
                                        " delay the comparison could see"
                                        if est.path_rate_bps == 0 else ""))
    else:
        est.rate_note = (f"not measured: {n_up + n_down} back-to-back segment pair(s) "
                         f"captured on both hosts (at least {MIN_PAIRS} needed)")
