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


def _port_guess(a: Endpoint, b: Endpoint) -> tuple[Endpoint, Endpoint]:
    """(client, server) without a handshake: the lower port is usually the service."""
    return (a, b) if a[1] > b[1] else (b, a)


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
                (client, server), known = _port_guess(a, b), False
            conn = Connection(number=len(out) + 1, client=client, server=server,
                              client_known=known)
            out.append(conn)
            current[key] = conn
        if is_syn:
            syn_seq.setdefault(conn.number, p.seq)
            if not conn.client_known:
                conn.client, conn.server, conn.client_known = a, b, True
        elif p.flags & TH_SYN and not conn.client_known:
            conn.client, conn.server, conn.client_known = b, a, True
        conn.packets.append(p)
    return out


def longest_stalled(conns: list[Connection]) -> Connection:
    """The default connection to explain: the one with the longest stall whose cause is
    not ``app`` (an idle application is rarely the question), then the longest quiet gap,
    then the one with more packets."""
    return max(conns, key=lambda c: ((c.longest_stall or (0, 0, ""))[0],
                                     c.longest_gap()[0], len(c.packets)))
