"""One captured connection → a `Trace` (source "capture") in the shared format.

Owns: relative sequence numbers (with 32-bit wrap-around), window scaling, retransmission
marking, duplicate removal (a frame seen twice, e.g. by ``-i any``), and the inference of
where the capture was taken. The handshake says it: on the client the SYN-ACK comes one
round trip after the SYN and the ACK follows at once; on the server the SYN-ACK follows
the SYN at once. In general the distance of each host from the capture point is half of
its "reaction" gap; every segment's send time is its capture time minus its sender's
distance, its arrival time the capture time plus its receiver's distance.
Must not import rich, textual or simpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.events import Micros, Side
from ..trace import SegmentRecord, Source, Trace
from ..trace.summary import STALL_MIN
from .causes import HIGH, LOW, MEDIUM, RetransmitMarker
from .connections import Connection, format_endpoint
from .pcap import TH_ACK, TH_FIN, TH_PUSH, TH_RST, TH_SYN, Packet

NEAR_US = 1_000
"""A host whose reaction gap in the handshake is under this, when the other's is not, is
where the capture was."""
HOST_US = 50
"""A distance under this is a host's own reaction time (kernel, softirq), not a path."""
RETRANSMIT_WHY = "captured: retransmission of bytes already sent"
ETHERNET_MSS = (1460, 1448, 1440, 1428, 1400, 1388, 1380, 1360, 1348)
"""MSS values of Ethernet-sized paths (1500 B MTU: IPv4/IPv6, with and without TCP
timestamps, and common tunnel overheads): what a capture without the handshake tests
super-segments against (`_infer_mss`)."""
MAX_PIECES = 512
"""A super-segment of more MSS-sized pieces than this is kept whole (BIG TCP reaches
185 KB: 128 pieces of 1448 B; more is not an offload)."""
MAX_SPLIT_RECORDS = 2_000_000
"""Pieces added by splitting, at most, per connection (bounded memory on a hostile file
whose every frame claims 64 KB)."""


def _letters(flags: int) -> str:
    return "".join(letter for bit, letter in ((TH_SYN, "S"), (TH_FIN, "F"), (TH_RST, "R"),
                                              (TH_PUSH, "P"), (TH_ACK, "A")) if flags & bit)


_FLAG_TEXT = [_letters(bits) for bits in range(64)]


def flag_letters(flags: int) -> str:
    """TCP flag bits as the trace format's letters ("SA", "PA", "FA")."""
    return _FLAG_TEXT[flags & 0x3F]


class _Unwrap:
    """32-bit sequence numbers → a monotone-ish integer relative to ``base``."""

    __slots__ = ("base", "last")

    def __init__(self, base: int) -> None:
        self.base = base
        self.last = 0

    def __call__(self, value: int) -> int:
        rel = (value - self.base) & 0xFFFFFFFF
        # pick the 2^32 lap closest to the last value seen
        lap = self.last - (self.last & 0xFFFFFFFF)
        cand = lap + rel
        if cand - self.last > 1 << 31:
            cand -= 1 << 32
        elif self.last - cand > 1 << 31:
            cand += 1 << 32
        self.last = max(self.last, cand)
        return cand


@dataclass(slots=True)
class Captured:
    """A captured connection as a trace plus what the analysis needs beside it."""

    trace: Trace
    seen: list[Micros]
    """Per segment: when the capture saw it (µs from the trace's origin)."""
    retransmit: list[bool]
    frames: list[int]
    captured_on: str            # "client", "server", "both" (same host), "between", "unknown"
    dist: dict[Side, Micros]    # each host's one-way distance from the capture point
    mss: int
    mss_known: bool
    handshake: bool
    notes: list[str] = field(default_factory=list)
    holes: list[Hole] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Hole:
    """Bytes of ``side``'s stream the capture never shows (relative sequence numbers
    [start, end)), noticed between capture times ``t_from`` and ``t_to``."""

    side: Side
    start: int
    end: int
    t_from: Micros
    t_to: Micros


def find_holes(segments: list[SegmentRecord], seen: list[Micros]) -> list[Hole]:
    """Sequence holes: data that starts beyond the highest byte seen so far, or an ACK
    for bytes never seen (the capture dropped them: tcpdump's "packets dropped by
    kernel", or a snap of a busy interface). A later segment covering a hole fills it."""
    high = {Side.CLIENT: -1, Side.SERVER: -1}
    last_t = {Side.CLIENT: Micros(0), Side.SERVER: Micros(0)}
    open_: list[Hole] = []
    for s, t in zip(segments, seen, strict=True):
        side = s.src
        if "S" in s.flags:
            high[side] = max(high[side], s.seq + 1)
        elif s.length:
            if high[side] >= 0 and s.seq > high[side]:
                open_.append(Hole(side, high[side], s.seq, last_t[side], t))
            high[side] = max(high[side], s.seq + s.length)
            last_t[side] = t
            if open_ and any(h.side is side and h.start < s.seq + s.length and s.seq < h.end
                             for h in open_):
                open_ = [h for h in open_ if not (h.side is side and s.seq <= h.start
                                                  and s.seq + s.length >= h.end)]
        peer = side.peer
        if "A" in s.flags and high[peer] >= 0 and s.ack > high[peer] and \
                not any(h.side is peer and h.end >= s.ack for h in open_):
            fin = 0
            if s.ack == high[peer] + 1:
                fin = 1        # the peer's FIN, if this ACKs one we have not seen: 1 byte
            if s.ack - fin > high[peer]:
                open_.append(Hole(peer, high[peer], s.ack, last_t[peer], t))
                high[peer] = s.ack
        if "F" in s.flags:
            high[side] = max(high[side], s.seq + s.length + 1)
    return open_


def same_host(conn: Connection) -> bool:
    """Both ends on one host: the same address, or both loopback (127/8, ::1)."""
    a, b = conn.client[0], conn.server[0]
    return a == b or (_loopback(a) and _loopback(b))


def _loopback(addr: bytes) -> bool:
    if len(addr) == 4:
        return addr[0] == 127
    return addr == bytes(15) + b"\x01" or (addr[:12] == bytes(10) + b"\xff\xff"
                                            and addr[12] == 127)


def _handshake(conn: Connection, raw: list[Packet]
               ) -> tuple[Packet | None, Packet | None, Packet | None]:
    syn = synack = ack = None
    for p in raw[:64]:
        c = conn.from_client(p)
        if p.flags & TH_SYN and not p.flags & TH_ACK and c and syn is None:
            syn = p
        elif p.flags & TH_SYN and p.flags & TH_ACK and not c and synack is None:
            synack = p
        elif (synack is not None and c and p.flags & TH_ACK and not p.flags & TH_SYN
              and ack is None):
            ack = p
            break
    return syn, synack, ack


RELEASE_SLACK_US = 1_000
"""How far a release (below) may lower a side's quickest ACK: the application time a
piggybacked ACK carries is usually well under a millisecond or a quarter of the gap."""


def _ahead(a: int, b: int) -> bool:
    """Sequence number ``a`` is after ``b`` (mod 2³²)."""
    return 0 < ((a - b) & 0xFFFFFFFF) < 1 << 31


def _reaction_from_data(conn: Connection, raw: list[Packet]) -> tuple[int | None, int | None]:
    """Without a handshake: the quickest reaction of each side (µs at the capture point),
    client first; a host's distance from the capture point is at most half of it.

    Two kinds of reaction are measured. (1) Data → the ACK that covers it: a pure ACK is
    the kernel's reaction, but an ACK that rides on data also carries the application's
    time to answer, so on a request/response connection whose ACKs all ride on replies
    that bound is a little too long — and a distance too long puts a held segment's
    release *before* the ACK that released it arrived, so the cause rules cannot see the
    release (a capture cut mid-connection then blamed an idle application where the whole
    capture shows Nagle and a delayed ACK). (2) An ACK of new data → that side's next
    data, after it was quiet for a stall (≥ 10 ms): held data released by the ACK, a
    kernel reaction with no application time in it. A release may lower the bound of (1)
    by at most `RELEASE_SLACK_US` or a quarter (beyond that it is likelier a write that
    happened to come then), never stand alone."""
    best: dict[bool, int | None] = {True: None, False: None}
    release: dict[bool, int | None] = {True: None, False: None}
    pending: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    last_sent: dict[bool, int | None] = {True: None, False: None}
    acked: dict[bool, int | None] = {True: None, False: None}    # highest ACK of a side
    woke: dict[bool, int | None] = {True: None, False: None}     # ACK of new data, seen at
    # a side not seen sending yet has been quiet since the capture began, at least
    last_sent[True] = last_sent[False] = raw[0].t if raw else None
    for p in raw:
        c = conn.from_client(p)
        if p.plen:
            w = woke[c]
            if w is not None:
                gap = p.t - w
                cur = release[c]
                release[c] = gap if cur is None else min(cur, gap)
            pending[c].append(((p.seq + p.plen) & 0xFFFFFFFF, p.t))
            del pending[c][:-8]
        woke[c] = None
        last_sent[c] = p.t
        if p.flags & TH_ACK:
            mine = pending[not c]
            covered = False
            for end, t in mine:
                if ((p.ack - end) & 0xFFFFFFFF) < 1 << 31:
                    covered = True
                    gap = p.t - t
                    cur = best[not c]
                    best[not c] = gap if cur is None else min(cur, gap)
            if covered:
                pending[not c] = [(e, t) for e, t in mine
                                  if ((p.ack - e) & 0xFFFFFFFF) >= 1 << 31]
            prev_ack = acked[not c]
            quiet = last_sent[not c]
            if (covered or (prev_ack is not None and _ahead(p.ack, prev_ack))) and \
                    quiet is not None and p.t - quiet >= STALL_MIN:
                woke[not c] = p.t
            if prev_ack is None or _ahead(p.ack, prev_ack):
                acked[not c] = p.ack
    out: dict[bool, int | None] = {}
    for side in (True, False):
        # the ACK of the other side's data comes from this side: it measures this side
        b, r = best[not side], release[side]
        if b is not None and r is not None and r < b and \
                b - r <= max(RELEASE_SLACK_US, b // 4):
            b = r
        out[side] = b
    return out[True], out[False]


def to_trace(conn: Connection, source_name: str) -> Captured:
    """Build the trace of ``conn``; ``source_name`` goes into the title and meta: where
    each host is from the capture point, the sequence bases, window scaling and MSS,
    then every segment (super-segments cut, retransmissions marked) in send-time order."""
    notes: list[str] = []
    raw = conn.loaded()
    packets = _dedupe(raw, notes)
    syn, synack, ack = _handshake(conn, raw)
    handshake = syn is not None and synack is not None
    reacts = _reaction_from_data(conn, raw)
    dist, how = _distances(syn, synack, ack, reacts, notes)
    captured_on, how = _capture_point(conn, dist, how, handshake, packets)
    seq_of, ack_of = _sequence_bases(conn, packets, syn, synack)
    shift = {Side.CLIENT: 0, Side.SERVER: 0}
    if handshake and syn is not None and synack is not None:
        if syn.wscale >= 0 and synack.wscale >= 0:
            shift = {Side.CLIENT: syn.wscale, Side.SERVER: synack.wscale}
    elif not handshake:
        shift = _infer_wscale(conn, packets)
    ts = any(p.ts for p in (syn, synack) if p is not None)
    mss, mss_known, mss_how, mss_conf = _mss(conn, packets, syn, synack, ts, notes)
    origin_cap = syn.t if syn is not None else packets[0].t
    origin = origin_cap - (dist[Side.CLIENT] if syn is not None else 0)
    rows, supers, whole, retrans_count = _segment_rows(
        conn, packets, _Reading(dist=dist, seq_of=seq_of, ack_of=ack_of, shift=shift,
                                mss=mss, origin=origin))
    segments = [r[2] for r in rows]
    seen_list = [Micros(r[2].t + dist[r[2].src]) for r in rows]
    holes = find_holes(segments, seen_list)
    _segment_notes(notes, mss, supers, whole, holes, retrans_count)
    client_ep, server_ep = format_endpoint(conn.client), format_endpoint(conn.server)
    meta: dict[str, Any] = {
        "capture": source_name, "connection": conn.number,
        "client": client_ep, "server": server_ep,
        "captured_on": captured_on, "captured_on_how": how,
        "client_distance_ms": round(dist[Side.CLIENT] / 1000, 3),
        "server_distance_ms": round(dist[Side.SERVER] / 1000, 3),
        "rtt_ms": round(2 * (dist[Side.CLIENT] + dist[Side.SERVER]) / 1000, 3),
        "mss": mss, "mss_known": mss_known, "window_scale": {s.value: shift[s] for s in Side},
        "timestamps_option": ts, "sack_permitted": bool(
            syn is not None and synack is not None and syn.sack_ok and synack.sack_ok),
        "start_epoch_us": origin, "super_segments": supers,
        "retransmitted_segments": retrans_count, "notes": notes,
        "link": "loopback" if captured_on == "both" else "captured",
    }
    if not handshake:
        _cap_without_handshake(meta, _inferred(conn, segments, dist, reacts, mss, mss_how,
                                               mss_conf, shift), notes)
    trace = Trace(source=Source.CAPTURE, title=f"{source_name}: {client_ep} → {server_ep}",
                  segments=segments, meta=meta)
    return Captured(trace=trace, seen=seen_list, retransmit=[r[3] for r in rows],
                    frames=[r[4] for r in rows], captured_on=captured_on,
                    dist={s: Micros(d) for s, d in dist.items()}, mss=mss,
                    mss_known=mss_known, handshake=handshake, notes=notes, holes=holes)


def _distances(syn: Packet | None, synack: Packet | None, ack: Packet | None,
               reacts: tuple[int | None, int | None], notes: list[str]
               ) -> tuple[dict[Side, int], str]:
    """Each host's distance (µs) from the capture point, and how it was found: half of
    its reaction gap in the handshake (bounded by the quickest reaction seen anywhere),
    or without one half of its quickest ACK or release (``reacts``, client first)."""
    c_react, s_react = reacts
    dist = {Side.CLIENT: 0, Side.SERVER: 0}
    if syn is not None and synack is not None:
        g1 = synack.t - syn.t
        g2 = (ack.t - synack.t) if ack is not None else 0
        # the quickest reaction seen anywhere bounds the distance: jitter on the path
        # must never make an answer appear to leave before its question arrived
        if s_react is not None:
            g1 = min(g1, s_react)
        if c_react is not None and ack is not None:
            g2 = min(g2, c_react)
        dist[Side.SERVER], dist[Side.CLIENT] = max(0, g1) // 2, max(0, g2) // 2
        return dist, "handshake timing"
    dist[Side.CLIENT] = (c_react or 0) // 2
    dist[Side.SERVER] = (s_react or 0) // 2
    notes.append("the capture starts mid-connection: sequence numbers are relative to "
                 "the first byte seen, and what the handshake would have said is "
                 "inferred from the traffic (below)")
    return dist, "the quickest ACKs and releases (no handshake in the capture)"


def _capture_point(conn: Connection, dist: dict[Side, int], how: str, handshake: bool,
                   packets: list[Packet]) -> tuple[str, str]:
    """Where the capture was taken ("client", "server", "both", "between", "unknown") and
    how that is known; a host's own reaction time is no distance (set to 0 in ``dist``)."""
    # Both ends on one host is a fact of the addresses, not of timing: two hosts on a LAN
    # answer each other in a fraction of a millisecond too, and their distance is real.
    one_host = same_host(conn)
    near = {side: d * 2 < NEAR_US for side, d in dist.items()}
    for side in Side:
        if one_host or dist[side] < HOST_US or (near[side] and not near[side.peer]):
            dist[side] = 0            # the capturing host's own reaction time, not a path
    if one_host:
        return "both", "the addresses (both ends on one host)"
    if not handshake and not any(p.plen for p in packets):
        return "unknown", how
    if dist[Side.CLIENT] == 0 and dist[Side.SERVER] > 0:
        return "client", how
    if dist[Side.SERVER] == 0 and dist[Side.CLIENT] > 0:
        return "server", how
    return "between", how       # two hosts, the capture somewhere on the path


def _sequence_bases(conn: Connection, packets: list[Packet], syn: Packet | None,
                    synack: Packet | None) -> tuple[dict[Side, _Unwrap], dict[Side, _Unwrap]]:
    """Each side's sequence and acknowledgement numbers made relative to its initial
    sequence number (the SYN's, or one before the first byte seen)."""
    c_syn = syn.seq if syn is not None else None
    s_syn = synack.seq if synack is not None else None
    c_first = next((p for p in packets if conn.from_client(p)), None)
    s_first = next((p for p in packets if not conn.from_client(p)), None)
    if c_syn is None:
        c_syn = (c_first.seq - 1) if c_first is not None else (
            (s_first.ack - 1) if s_first is not None else 0)
    if s_syn is None:
        s_syn = (s_first.seq - 1) if s_first is not None else (
            (c_first.ack - 1) if c_first is not None else 0)
    return ({Side.CLIENT: _Unwrap(c_syn), Side.SERVER: _Unwrap(s_syn)},
            {Side.CLIENT: _Unwrap(s_syn), Side.SERVER: _Unwrap(c_syn)})


def _mss(conn: Connection, packets: list[Packet], syn: Packet | None,
         synack: Packet | None, ts: bool, notes: list[str]) -> tuple[int, bool, str, float]:
    """(MSS, from the SYN's option?, how, confidence): the smaller SYN option less the
    timestamps option's 12 B, else inferred from the traffic; kept within 88-65495 B."""
    mss_opts = [p.mss for p in (syn, synack) if p is not None and p.mss]
    mss_how, mss_conf = "", HIGH
    if mss_opts:
        mss, mss_known = min(mss_opts) - (12 if ts else 0), True
        mss_how = f"MSS {mss} B from the SYN's option"
    else:
        mss, mss_how, mss_conf = _infer_mss(conn, packets)
        mss_known = False
    if not 88 <= mss <= 65495:
        notes.append(f"MSS {mss} is outside 88-65495 bytes: using the nearest of those")
        mss = min(max(mss, 88), 65495)
    return mss, mss_known, mss_how, mss_conf


@dataclass(frozen=True, slots=True)
class _Reading:
    """How a connection's packets are read into segments: each host's distance from the
    capture point, sequence unwrapping, window shifts, the MSS, the trace's time zero
    (capture-point µs)."""

    dist: dict[Side, int]
    seq_of: dict[Side, _Unwrap]
    ack_of: dict[Side, _Unwrap]
    shift: dict[Side, int]
    mss: int
    origin: int


Row = tuple[int, int, SegmentRecord, bool, int]
"""(send time, arrival order, segment, retransmitted, frame number)."""


def _segment_rows(conn: Connection, packets: list[Packet], how: _Reading
                  ) -> tuple[list[Row], int, int, int]:
    """Every packet as segments in send-time order (a super-segment cut into the
    MSS-sized ones the wire carried), with (super-segments, kept whole, retransmissions)."""
    dist, seq_of, ack_of, shift, mss, origin = (how.dist, how.seq_of, how.ack_of, how.shift,
                                                how.mss, how.origin)
    rows: list[Row] = []
    marker = RetransmitMarker()
    supers = retrans_count = whole = 0
    budget = MAX_SPLIT_RECORDS
    for p in packets:
        side = Side.CLIENT if conn.from_client(p) else Side.SERVER
        seq = seq_of[side](p.seq)
        ack_no = ack_of[side](p.ack) if p.flags & TH_ACK else 0
        letters = flag_letters(p.flags)
        win = p.win if p.flags & TH_SYN else p.win << shift[side]
        seen = p.t - origin
        t = seen - dist[side]
        arrive = seen + dist[side.peer]
        pieces = [(seq, p.plen, letters)]
        if p.plen > mss and not p.flags & TH_SYN:
            supers += 1
            count = -(-p.plen // mss)
            if count <= MAX_PIECES and count <= budget:
                # a TSO/GSO super-segment (captured before the NIC or the stack cut it)
                # or a GRO merge (captured after the receiver joined them): the wire
                # carried MSS-sized segments with the same ACK and window, PSH and FIN
                # on the last
                budget -= count
                inner = letters.replace("P", "").replace("F", "")
                pieces = [(seq + k * mss, min(mss, p.plen - k * mss),
                           letters if k == count - 1 else inner) for k in range(count)]
            else:
                whole += 1
        for piece_seq, length, flags in pieces:
            retrans = marker(side, piece_seq, length, flags)
            retrans_count += retrans
            rec = SegmentRecord(t=Micros(t), src=side, seq=piece_seq, ack=ack_no,
                                length=length, flags=flags, window=win,
                                arrive=Micros(arrive),
                                why=RETRANSMIT_WHY if retrans else "")
            rows.append((t, len(rows), rec, retrans, p.frame))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows, supers, whole, retrans_count


def _segment_notes(notes: list[str], mss: int, supers: int, whole: int, holes: list[Hole],
                   retrans_count: int) -> None:
    """The notes on what the segments showed: super-segments, holes, retransmissions."""
    if supers:
        notes.append(f"{supers} segment(s) are longer than the MSS ({mss} B): super-segments "
                     "of TSO/GSO (captured on the sender before they were cut) or of GRO "
                     "(captured on the receiver after they were merged); each is explained "
                     "as the MSS-sized segments the wire carried (ACK and window copied, PSH "
                     "and FIN on the last)"
                     + (f"; {whole} too large to split are kept whole" if whole else ""))
    for side in Side:
        mine = [h for h in holes if h.side is side]
        if mine:
            notes.append(f"{sum(h.end - h.start for h in mine)} B of the {side.value}'s data "
                         f"never appear in the capture ({len(mine)} hole(s), the first "
                         f"between {mine[0].t_from / 1000:.3f} and {mine[0].t_to / 1000:.3f} "
                         "ms): packets the capture dropped; stalls there are less certain and "
                         "the rebuild writes the missing bytes (up to as many as the capture "
                         "holds: beyond that they are a gap)")
    if retrans_count:
        notes.append(f"{retrans_count} retransmission(s) in the capture")


def _cap_without_handshake(meta: dict[str, Any], inferred: dict[str, dict[str, Any]],
                           notes: list[str]) -> None:
    """Without the handshake every rule leans on inferred facts (the distances above
    all): no stall is surer than they are (``meta["confidence_cap"]``)."""
    cap = min(MEDIUM, inferred["distances"]["confidence"])
    meta["inferred"] = inferred
    meta["confidence_cap"] = cap
    notes.append("inferred without the handshake: " + "; ".join(
        f"{fact['text']} (confidence {fact['confidence']:.1f})"
        for fact in inferred.values()) + f"; so no stall is named with a confidence "
        f"above {cap:.1f}")


def _infer_mss(conn: Connection, packets: list[Packet]) -> tuple[int, str, float]:
    """(MSS, how, confidence) without the SYN's option. A write longer than the MSS leaves
    as full segments without PSH followed at once by more of the same write: their most
    common size is the MSS. Without any, the MSS is only known to be at least the largest
    segment: assume Ethernet's (1460 B over IPv4, 1440 over IPv6, 12 less when the data
    segments carry timestamps) unless a segment was larger."""
    sizes: dict[int, int] = {}
    last: dict[bool, Packet | None] = {True: None, False: None}
    opts: list[int] = []
    for p in packets:
        if not p.plen:
            continue
        c = conn.from_client(p)
        prev = last[c]
        if prev is not None and not prev.flags & TH_PUSH and prev.plen >= 88 and \
                (prev.seq + prev.plen) & 0xFFFFFFFF == p.seq:
            sizes[prev.plen] = sizes.get(prev.plen, 0) + 1
        last[c] = p
        opts.append(p.olen)
    if sizes:
        mss = max(sizes, key=lambda n: (sizes[n], n))
        return (mss, f"MSS {mss} B: the size of the full segments a longer write was cut "
                f"into ({sizes[mss]} seen)", MEDIUM)
    biggest = max((p.plen for p in packets), default=0)
    v6 = bool(packets) and len(packets[0].src) == 16
    stamps = bool(opts) and sorted(opts)[len(opts) // 2] >= 12
    default = (1440 if v6 else 1460) - (12 if stamps else 0)
    if biggest > default:
        # TSO/GSO at the sender, GRO at the receiver: super-segments are whole multiples
        # of the MSS they will be (were) cut into — 7,240 B is 5 × 1,448
        counts = {m: sum(1 for p in packets if p.plen >= 2 * m and p.plen % m == 0)
                  for m in sorted(set(ETHERNET_MSS) | {default})}
        best = max(counts, key=lambda m: (counts[m], m))
        if counts[best]:
            return (best, f"MSS {best} B: {counts[best]} segment(s) are whole multiples of it "
                    "(super-segments of TSO/GSO or GRO)", MEDIUM if counts[best] > 1 else LOW)
        return (biggest, f"MSS {biggest} B: the largest segment (no write was seen cut into "
                "full segments)", LOW)
    return (default, f"MSS {default} B assumed (Ethernet{', with timestamps' if stamps else ''}"
            f"): no write was seen cut into full segments, the largest was {biggest} B", LOW)


def _infer_wscale(conn: Connection, packets: list[Packet]) -> dict[Side, int]:
    """Each side's window-scale shift without the handshake: the smallest shift under
    which the peer's data in flight (as the capture saw it) never passed the window the
    side last advertised. A lower bound; 0 when the traffic never needed more."""
    shift = {Side.CLIENT: 0, Side.SERVER: 0}
    last: dict[bool, tuple[int, int] | None] = {True: None, False: None}   # (ack, raw win)
    for p in packets:
        c = conn.from_client(p)
        if p.flags & TH_ACK:
            last[c] = (p.ack, p.win)
        peer = last[not c]
        if p.plen and peer is not None and peer[1] > 0:
            flight = (p.seq + p.plen - peer[0]) & 0xFFFFFFFF
            if flight < 1 << 31:
                side = Side.SERVER if c else Side.CLIENT     # the advertiser
                while shift[side] < 14 and peer[1] << shift[side] < flight:
                    shift[side] += 1
    return shift


def _inferred(conn: Connection, segments: list[SegmentRecord], dist: dict[Side, int],
              reacts: tuple[int | None, int | None], mss: int, mss_how: str,
              mss_conf: float, shift: dict[Side, int]) -> dict[str, dict[str, Any]]:
    """The facts a handshake would have given, as inferred from the traffic: what,
    how and with what confidence (for the notes and ``meta["inferred"]``)."""
    how = conn.client_how
    role_conf = HIGH if "well-known" in how else MEDIUM if "ephemeral" in how else LOW
    out: dict[str, dict[str, Any]] = {
        "client": {"value": format_endpoint(conn.client), "confidence": role_conf,
                   "text": f"the client is {format_endpoint(conn.client)} ({how})"}}
    measured = all(r is not None for r in reacts)
    rtt = 2 * (dist[Side.CLIENT] + dist[Side.SERVER])
    out["distances"] = {
        "value": {s.value: round(d / 1000, 3) for s, d in dist.items()},
        "confidence": MEDIUM if measured else LOW,
        "text": (f"round trip {rtt / 1000:.1f} ms, {dist[Side.CLIENT] / 1000:.1f} ms from the "
                 f"client and {dist[Side.SERVER] / 1000:.1f} ms from the server (from each "
                 "side's quickest ACK of data and quickest release of held data"
                 + ("" if measured else "; one side never answered: taken as 0") + ")")}
    out["mss"] = {"value": mss, "confidence": mss_conf, "text": mss_how}
    scaled = {s.value: n for s, n in shift.items()}
    out["window_scale"] = {
        "value": scaled, "confidence": LOW,
        "text": ("window scale unknown: raw window values used (the traffic never filled "
                 "them)" if not any(shift.values()) else
                 "window scale at least " + ", ".join(f"{n} ({s})" for s, n in scaled.items())
                 + " (the smallest that holds the data seen in flight)")}
    for side in Side:
        acks = [s.ack for s in segments if s.src is side.peer and "A" in s.flags]
        early = 1 - min(acks) if acks else 0
        if early > 0:
            out[f"unacked_{side.value}"] = {
                "value": early, "confidence": MEDIUM,
                "text": (f"{early} B of the {side.value}'s data sent before the capture "
                         "began were still unACKed (from the first ACKs seen)")}
    return out


DUP_US = 1_000
"""The two copies of one packet that ``-i any`` records (outgoing, then incoming) are
this close in time at most."""


def _dedupe(packets: list[Packet], notes: list[str]) -> list[Packet]:
    """Drop the second copy of a frame where a capture really records one packet twice:
    a Linux cooked (``-i any``) capture's outgoing and incoming copies of the same bytes
    within `DUP_US`, or identical bytes at the identical time on the same interface. A
    repeat of the same bytes later (a real duplicate ACK, IPv6 has no IP id to tell them
    apart) is a packet of its own."""
    out: list[Packet] = []
    dropped = 0
    recent: dict[int, Packet] = {}
    for p in packets:
        last = recent.get(p.fp)
        if last is not None and (
                (p.way >= 0 and last.way >= 0 and p.way != last.way
                 and p.t - last.t <= DUP_US)
                or p.t == last.t):
            dropped += 1
            del recent[p.fp]            # a third copy would be a new packet
            continue
        recent[p.fp] = p
        if len(recent) > 4096:
            recent.clear()
        out.append(p)
    if dropped:
        notes.append(f"{dropped} duplicate frame(s) dropped (the same packet captured twice, "
                     "e.g. outgoing and incoming on -i any)")
    return out
