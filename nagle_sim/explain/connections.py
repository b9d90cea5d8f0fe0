"""Split a capture's TCP packets into connections and list them.

Owns: the `Connection` record (both endpoints, which one is the client, its packets) and
its one-line listing numbers (duration, bytes each way, longest quiet gap). A 4-tuple that
is reused by a new SYN starts a new connection. Must not import rich, textual or simpy.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from .pcap import TH_ACK, TH_FIN, TH_RST, TH_SYN, Packet

Endpoint = tuple[bytes, int]


def format_endpoint(ep: Endpoint) -> str:
    addr, port = ep
    if len(addr) == 16:
        return f"[{socket.inet_ntop(socket.AF_INET6, addr)}]:{port}"
    return f"{socket.inet_ntop(socket.AF_INET, addr)}:{port}"


@dataclass(slots=True)
class Connection:
    number: int                         # 1-based, in order of first packet
    client: Endpoint
    server: Endpoint
    packets: list[Packet] = field(default_factory=list)
    client_known: bool = True
    """False when no SYN / SYN-ACK told who connected (the ports decided)."""
    client_how: str = "the handshake (the SYN's sender)"
    """What told which side is the client."""
    longest_stall: tuple[int, int, str] | None = None
    """(µs, capture time µs, cause) of its longest stall not caused by an idle application,
    filled by `rank`; (0, 0, "") when it has none; None when not analysed."""

    def from_client(self, p: Packet) -> bool:
        return (p.src, p.sport) == self.client

    @property
    def start(self) -> int:
        return self.packets[0].t

    @property
    def duration(self) -> int:
        return self.packets[-1].t - self.packets[0].t

    def bytes_sent(self) -> tuple[int, int]:
        """Payload bytes (client → server, server → client), retransmissions included."""
        c = s = 0
        for p in self.packets:
            if self.from_client(p):
                c += p.plen
            else:
                s += p.plen
        return c, s

    def longest_gap(self) -> tuple[int, int]:
        """(µs, start time) of the longest quiet gap while the connection was open; a
        cheap stand-in for the longest stall when listing many connections."""
        best, at = 0, self.start
        fins = 0
        prev = self.packets[0]
        for p in self.packets[1:]:
            if fins < 2 and p.t - prev.t > best:
                best, at = p.t - prev.t, prev.t
            if prev.flags & TH_FIN:
                fins += 1
            if prev.flags & TH_RST:
                fins = 2
            prev = p
        return best, at

    def label(self) -> str:
        return f"{format_endpoint(self.client)} → {format_endpoint(self.server)}"


EPHEMERAL = 32768
"""Linux hands out source ports from 32768 up (ip_local_port_range; IANA's range starts at
49152): a port there is almost always the connecting side's."""


def _port_guess(a: Endpoint, b: Endpoint) -> tuple[Endpoint, Endpoint, str]:
    """(client, server, how) without a handshake, from the ports: a well-known port
    (< 1024) or a port below the ephemeral range facing one inside it is the service's;
    otherwise the lower port, a guess `_turn_guess` may overrule."""
    lo, hi = (b, a) if a[1] > b[1] else (a, b)
    if lo[1] < 1024 <= hi[1]:
        return hi, lo, f"port {lo[1]} is a well-known service port"
    if lo[1] < EPHEMERAL <= hi[1]:
        return hi, lo, f"port {hi[1]} is in the ephemeral range, {lo[1]} is not"
    return hi, lo, "a guess: the higher port is usually the connecting side's"


def _turn_guess(conn: Connection) -> None:
    """When the ports do not tell, the side that opens more exchanges (sends data first
    after both sides were quiet ≥ 10 ms, or first in the capture) is the client: requests
    open turns, responses close them."""
    opens = {True: 0, False: 0}
    last = None
    for p in conn.packets:
        if not p.plen:
            continue
        if last is None or p.t - last >= 10_000:
            opens[conn.from_client(p)] += 1
        last = p.t
    if opens[False] > opens[True]:
        conn.client, conn.server = conn.server, conn.client
    if opens[False] != opens[True]:
        conn.client_how = ("a guess from the exchanges: the side that opens them (sends "
                           "first after a quiet spell) is taken for the client")


def split_connections(packets: list[Packet]) -> list[Connection]:
    """Group packets by 4-tuple; a SYN with a new sequence number on a used 4-tuple starts
    a new connection."""
    current: dict[tuple[Endpoint, Endpoint], Connection] = {}
    syn_seq: dict[int, int] = {}
    out: list[Connection] = []
    for p in packets:
        a, b = (p.src, p.sport), (p.dst, p.dport)
        key = (a, b) if a <= b else (b, a)
        conn = current.get(key)
        is_syn = p.flags & TH_SYN and not p.flags & TH_ACK
        if conn is not None and is_syn and syn_seq.get(conn.number, p.seq) != p.seq:
            conn = None                 # the 4-tuple is reused by a new connection
        if conn is None:
            if is_syn:
                client, server, known = a, b, True
            elif p.flags & TH_SYN:      # a SYN-ACK comes from the server
                client, server, known = b, a, True
            else:
                client, server, how = _port_guess(a, b)
                known = False
            conn = Connection(number=len(out) + 1, client=client, server=server,
                              client_known=known)
            if not known:
                conn.client_how = how
            out.append(conn)
            current[key] = conn
        if is_syn:
            syn_seq.setdefault(conn.number, p.seq)
            if not conn.client_known:
                conn.client, conn.server, conn.client_known = a, b, True
                conn.client_how = "the handshake (the SYN's sender)"
        elif p.flags & TH_SYN and not conn.client_known:
            conn.client, conn.server, conn.client_known = b, a, True
            conn.client_how = "the handshake (the SYN-ACK's receiver)"
        conn.packets.append(p)
    for conn in out:
        if not conn.client_known and conn.client_how.startswith("a guess"):
            _turn_guess(conn)
    return out


def longest_stalled(conns: list[Connection]) -> Connection:
    """The default connection to explain: the one with the longest stall whose cause is
    not ``app`` (an idle application is rarely the question), then the longest quiet gap,
    then the one with more packets."""
    return max(conns, key=lambda c: ((c.longest_stall or (0, 0, ""))[0],
                                     c.longest_gap()[0], len(c.packets)))
