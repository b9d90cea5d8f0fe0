"""A capture's TCP connections: who they join, what they carried, and a cheap triage.

Owns: the `Connection` record (both endpoints, which one is the client, its counts, its
longest quiet gap and the triage's suspect gaps, and its packets once loaded) and
`split_connections`, which groups a list of packets (the in-memory path; explain itself
streams: `scan`). A 4-tuple that is reused by a new SYN starts a new connection.
Must not import rich, textual or simpy.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .causes import probe_window
from .pcap import TH_FIN, Packet, PacketFields

Endpoint = tuple[bytes, int]


def format_endpoint(ep: Endpoint) -> str:
    addr, port = ep
    if len(addr) == 16:
        return f"[{socket.inet_ntop(socket.AF_INET6, addr)}]:{port}"
    return f"{socket.inet_ntop(socket.AF_INET, addr)}:{port}"


@dataclass(slots=True, eq=False)
class Connection:
    number: int                         # 1-based, in order of first packet
    client: Endpoint
    server: Endpoint
    packets: list[Packet] = field(default_factory=list)
    """Its packets when loaded (`load`), or all of them from `split_connections`; empty
    for a connection of a streamed capture that was never analysed."""
    client_known: bool = True
    """False when no SYN / SYN-ACK told who connected (the ports decided)."""
    client_how: str = "the handshake (the SYN's sender)"
    """What told which side is the client."""
    longest_stall: tuple[int, int, str] | None = None
    """(µs, capture time µs, cause) of its longest stall not caused by an idle application,
    filled when analysed; (0, 0, "") when it has none; None when not analysed."""
    stalls: tuple[int, int] | None = None
    """(number of stalls, µs in all) when analysed, else None."""
    found: list[Any] | None = field(default=None, repr=False)
    """Its stalls (`causes.Stall`) when analysed: what `--annotate` writes."""
    # --- counted as the packets went by (`Tally`)
    count: int = 0
    first_t: int = 0
    last_t: int = 0
    sent_client: int = 0
    sent_server: int = 0
    gap: tuple[int, int] = (0, 0)
    """(µs, start) of the longest quiet gap while the connection was open."""
    suspect: tuple[int, int, int] = (0, 0, 0)
    """The triage (`Tally`): (quiet gaps ≥ 10 ms that an idle application does not
    explain, the longest of them µs, their sum µs). Full analysis is spent on these."""
    load: Callable[[], list[Packet]] | None = field(default=None, repr=False)
    """Reads its packets back from the streamed capture's store."""

    def from_client(self, p: Packet) -> bool:
        return (p.src, p.sport) == self.client

    @property
    def start(self) -> int:
        return self.first_t

    @property
    def duration(self) -> int:
        return self.last_t - self.first_t

    def bytes_sent(self) -> tuple[int, int]:
        """Payload bytes (client → server, server → client), retransmissions included."""
        return self.sent_client, self.sent_server

    def longest_gap(self) -> tuple[int, int]:
        """(µs, start time) of the longest quiet gap while the connection was open; a
        cheap stand-in for the longest stall when listing many connections."""
        return self.gap

    def label(self) -> str:
        return f"{format_endpoint(self.client)} → {format_endpoint(self.server)}"

    def loaded(self) -> list[Packet]:
        """Its packets: those held, else read back from the store (not kept)."""
        if self.packets or self.load is None:
            return self.packets
        return self.load()


EPHEMERAL = 32768
"""Linux hands out source ports from 32768 up (ip_local_port_range; IANA's range starts at
49152): a port there is almost always the connecting side's."""
STALL_US = 10_000
"""A quiet gap this long is a stall candidate (`nagle_sim.trace.summary.STALL_MIN`)."""
REACT_US = 2_000
"""A send this soon after an arrival answers it (`causes.REACT_US`)."""
UNKNOWN_PROBE = (190_000, 1_300_000)
"""The triage's bounds on a probe-timer release when no handshake gives the round trip
(max(RTO, 200 ms), RTO up to its initial 1 s plus a round trip); with one, the window is
`causes.probe_window`'s: new data after such a gap may have been corked, not late."""


def _port_guess(a: Endpoint, b: Endpoint) -> tuple[Endpoint, Endpoint, str]:
    """(client, server, how) without a handshake, from the ports: a well-known port
    (< 1024) or a port below the ephemeral range facing one inside it is the service's;
    otherwise the lower port, a guess the exchanges may overrule."""
    lo, hi = (b, a) if a[1] > b[1] else (a, b)
    if lo[1] < 1024 <= hi[1]:
        return hi, lo, f"port {lo[1]} is a well-known service port"
    if lo[1] < EPHEMERAL <= hi[1]:
        return hi, lo, f"port {hi[1]} is in the ephemeral range, {lo[1]} is not"
    return hi, lo, "a guess: the higher port is usually the connecting side's"


class Tally:
    """One connection's counts as its packets go by, in one pass and O(1) memory: the
    listing's numbers, who is the client, and the triage.

    The triage names the quiet gaps (≥ 10 ms, while open) worth a full analysis: all but
    those an idle application explains. New data from a side with nothing unACKed is
    the application's (unless the gap is the probe timer's, when it may have been
    corked); a gap ended by a pure ACK is suspect only when the peer sent data as soon as
    it could have arrived (held data released: Nagle, a window); a retransmission, or
    data sent while earlier data was unACKed, is suspect. Each side's last sequence and
    ACK numbers stand for the highest (compared modulo 2³²): the triage only chooses what
    to analyse.

    `add` is the reference; `scanner` inlines it (the per-packet path is the few lines
    below `add`'s first test: everything else runs only when `watch` says so)."""

    __slots__ = ("conn", "a", "b", "count", "first_t", "last_t", "watch", "best",
                 "best_at", "closed_at", "fins", "syn_seq", "syn_from", "synack_from",
                 "syn_t", "react", "probe", "opens", "last_data", "end", "ack", "sent",
                 "pend", "pend_d", "n_sus", "sus_max", "sus_sum")

    def __init__(self, conn: Connection, a: Endpoint, b: Endpoint, t: int) -> None:
        self.conn = conn
        self.a, self.b = a, b
        self.count = 0
        self.first_t = self.last_t = t
        self.watch = -1
        """A gap longer than this takes the slow path (`gap`): the longest so far, below
        `STALL_US`; -1 while a pure ACK's gap or the handshake awaits the next packet."""
        self.best, self.best_at = 0, t
        self.closed_at = 1 << 62        # capture time after which gaps do not count
        self.fins = 0
        self.syn_seq = self.syn_from = self.synack_from = self.syn_t = -1
        self.react = REACT_US           # grows by the handshake's round trip
        self.probe = UNKNOWN_PROBE
        self.opens = [0, 0]
        self.last_data = -STALL_US
        self.end = [-1, -1]             # each side's last data end (sequence number)
        self.ack = [-1, -1]             # each side's last ACK (of the other's data)
        self.sent = [0, 0]
        self.pend = self.pend_d = 0     # a gap ended by a pure ACK, judged by what follows
        self.n_sus = self.sus_max = self.sus_sum = 0

    def add(self, d: int, t: int, seq: int, ack: int, flags: int, plen: int) -> None:
        """A packet from side ``d`` (0: a, 1: b)."""
        gap = t - self.last_t
        if gap > self.watch:
            self.gap(d, gap, seq, flags, plen, t)
        self.count += 1
        self.last_t = t
        if plen:
            self.sent[d] += plen
            self.end[d] = seq + plen
            if t - self.last_data >= STALL_US:
                self.opens[d] += 1
            self.last_data = t
        if flags & 0x10:
            self.ack[d] = ack
        if flags & 0x07:
            self.control(d, flags, seq, t)

    def gap(self, d: int, gap: int, seq: int, flags: int, plen: int, t: int) -> None:
        """The slow path of `add`: a gap longer than any before, a stall candidate, a
        pure ACK's gap to judge, or the handshake's ACK to time."""
        if self.pend:
            # a pure ACK after a quiet gap released held data when the peer sent at once
            # (Nagle, a window): suspect; else it was a delayed ACK nobody needed
            if d != self.pend_d and plen and gap <= self.react:
                self._count(self.pend)
            self.pend = 0
        if self.syn_t >= 0 and self.synack_from >= 0 and d == self.syn_from and \
                flags & 0x12 == 0x10:
            # the handshake's ACK: SYN to it is one round trip wherever the capture was
            rtt = max(0, t - self.syn_t)
            self.react = REACT_US + rtt
            self.probe = probe_window(rtt)
            self.syn_t = -1
        if self.count and self.last_t <= self.closed_at:
            if gap > self.best:
                self.best, self.best_at = gap, self.last_t
            if gap >= STALL_US:
                if not plen and not flags & 0x07:
                    self.pend, self.pend_d = gap, d
                elif self._suspect(d, gap, seq, flags, plen):
                    self._count(gap)
        self.watch = -1 if self.pend or self.syn_t >= 0 else min(self.best, STALL_US - 1)

    def control(self, d: int, flags: int, seq: int, t: int) -> None:
        """A SYN, FIN or RST: the handshake's roles, and when the connection closed (the
        second FIN or a RST: later quiet gaps are not stalls)."""
        if flags & 0x02:
            if not flags & 0x10:
                if self.syn_seq == -1:
                    self.syn_seq, self.syn_from, self.syn_t = seq, d, t
                    self.watch = -1
            elif self.synack_from == -1:
                self.synack_from = d
        if flags & 0x01:
            self.fins += 1
        if (flags & 0x04 or self.fins >= 2) and self.closed_at > t:
            self.closed_at = t

    def _count(self, gap: int) -> None:
        self.n_sus += 1
        self.sus_sum += gap
        if gap > self.sus_max:
            self.sus_max = gap

    def _suspect(self, d: int, gap: int, seq: int, flags: int, plen: int) -> bool:
        if not plen:
            return not flags & TH_FIN          # a SYN or RST sent again
        end, acked = self.end[d], self.ack[1 - d]
        if end < 0:
            return True
        if not 0 < ((seq + plen - end) & 0xFFFFFFFF) < 1 << 31:
            return True                        # a retransmission
        if acked >= 0 and 0 < ((end - acked) & 0xFFFFFFFF) < 1 << 31:
            return True                        # data waited while earlier data was unACKed
        return self.probe[0] <= gap <= self.probe[1]   # perhaps corked until the probe timer

    def finish(self) -> Connection:
        """Settle the client and fill the connection's counts."""
        conn = self.conn
        a, b = self.a, self.b
        if self.syn_from >= 0 or self.synack_from >= 0:
            client_is_a = self.syn_from == 0 if self.syn_from >= 0 else self.synack_from == 1
            conn.client_known = True
            conn.client_how = ("the handshake (the SYN's sender)" if self.syn_from >= 0
                               else "the handshake (the SYN-ACK's receiver)")
        else:
            client, _server, how = _port_guess(a, b)
            client_is_a = client == a
            conn.client_known = False
            conn.client_how = how
            if how.startswith("a guess"):
                # the side that opens more exchanges (sends data first after both were
                # quiet ≥ 10 ms, or first in the capture) is the client: requests open
                # turns, responses close them
                mine, theirs = (self.opens[0], self.opens[1]) if client_is_a else (
                    self.opens[1], self.opens[0])
                if theirs > mine:
                    client_is_a = not client_is_a
                if mine != theirs:
                    conn.client_how = ("a guess from the exchanges: the side that opens "
                                       "them (sends first after a quiet spell) is taken "
                                       "for the client")
        conn.client, conn.server = (a, b) if client_is_a else (b, a)
        c, s = (0, 1) if client_is_a else (1, 0)
        conn.sent_client, conn.sent_server = self.sent[c], self.sent[s]
        conn.count, conn.first_t, conn.last_t = self.count, self.first_t, self.last_t
        conn.gap = (self.best, self.best_at)
        conn.suspect = (self.n_sus, self.sus_max, self.sus_sum)
        return conn


Entry = tuple[Tally, int, bytearray]
"""What a 4-tuple's key finds: the connection's tally, the side the key's source is (0:
its first endpoint), and the buffer its packets are kept in (`scan.PacketStore`)."""


def flow_key(src: bytes, sport: int, dst: bytes, dport: int) -> bytes:
    """A 4-tuple as bytes: source and destination address, then the two ports — an IPv4
    header's addresses followed by a TCP header's ports read as one slice."""
    return src + dst + sport.to_bytes(2, "big") + dport.to_bytes(2, "big")


class Splitter:
    """Groups segments into connections as they stream by (one dictionary lookup per
    packet); a SYN with a new sequence number on a used 4-tuple starts a new connection.
    ``buffer(tally)`` gives the bytearray a new connection's packets are kept in."""

    __slots__ = ("current", "tallies", "buffer")

    def __init__(self, buffer: Callable[[Tally], bytearray] | None = None) -> None:
        self.current: dict[bytes, Entry] = {}
        self.tallies: list[Tally] = []
        self.buffer = buffer

    def new(self, key: bytes, seq: int, flags: int, t: int) -> Entry:
        """The connection a packet with ``key`` starts (``key``: `flow_key` layout)."""
        half = (len(key) - 4) // 2
        src, dst = key[:half], key[half:2 * half]
        sport = int.from_bytes(key[2 * half:2 * half + 2], "big")
        dport = int.from_bytes(key[2 * half + 2:], "big")
        a, b = (src, sport), (dst, dport)
        tally = Tally(Connection(number=len(self.tallies) + 1, client=a, server=b), a, b, t)
        self.tallies.append(tally)
        buf = self.buffer(tally) if self.buffer is not None else bytearray()
        entry = (tally, 0, buf)
        self.current[key] = entry
        self.current[dst + src + key[2 * half + 2:] + key[2 * half:2 * half + 2]] = (
            tally, 1, buf)
        return entry

    def feed(self, segments: Iterable[PacketFields]) -> list[Tally]:
        """Count ``segments``; the tally of each, in order."""
        current = self.current
        owners = []
        for f in segments:
            seq, flags, t = f[5], f[7], f[0]
            key = flow_key(f[1], f[3], f[2], f[4])
            entry = current.get(key)
            if entry is None or (flags & 0x12 == 0x02 and entry[0].syn_seq not in (-1, seq)):
                entry = self.new(key, seq, flags, t)
            tally, d, _buf = entry
            tally.add(d, t, seq, f[6], flags, f[9])
            owners.append(tally)
        return owners

    def finish(self) -> list[Connection]:
        return [t.finish() for t in self.tallies]


def fields_of(p: Packet) -> PacketFields:
    return (p.t, p.src, p.dst, p.sport, p.dport, p.seq, p.ack, p.flags, p.win, p.plen, p.fp,
            p.way, p.mss, p.wscale, p.sack_ok, p.ts, p.olen, p.frame)


def split_connections(packets: list[Packet]) -> list[Connection]:
    """Group packets (held in memory) by 4-tuple; a SYN with a new sequence number on a
    used 4-tuple starts a new connection. Each connection holds its packets."""
    splitter = Splitter()
    owners = splitter.feed(fields_of(p) for p in packets)
    for p, tally in zip(packets, owners, strict=True):
        tally.conn.packets.append(p)
    return splitter.finish()


def longest_stalled(conns: list[Connection]) -> Connection:
    """The default connection to explain: the one with the longest stall whose cause is
    not ``app`` (an idle application is rarely the question), then the longest quiet gap,
    then the one with more packets."""
    return max(conns, key=lambda c: ((c.longest_stall or (0, 0, ""))[0], c.gap[0],
                                     c.count))
