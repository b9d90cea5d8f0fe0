"""pcap export: a trace's segments as a standard pcap file that Wireshark/tshark/tcpdump read.

Owns: the synthetic addresses and ISNs, and building Ethernet/IPv4/TCP frames with dpkt
objects (dpkt computes lengths and checksums). Every frame is stamped with its segment's
*send* time, counted from a fixed epoch (2026-01-01T00:00:00Z), so the same trace always
gives the same bytes. Must not import textual, simpy or asyncio.

Addresses (fixed, see docs/exports.md): client 10.0.0.1:40000 (MAC 02:00:00:00:00:01,
ISN 1000) ↔ server 10.0.0.2:80 (MAC 02:00:00:00:00:02, ISN 5000).
"""

from __future__ import annotations

import io
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import dpkt

from ..model.events import Side
from ..trace import SegmentRecord, Trace


@dataclass(frozen=True, slots=True)
class Endpoint:
    mac: bytes
    ip: str
    port: int
    isn: int


ENDPOINTS: dict[Side, Endpoint] = {
    Side.CLIENT: Endpoint(mac=bytes.fromhex("020000000001"), ip="10.0.0.1", port=40000,
                          isn=1000),
    Side.SERVER: Endpoint(mac=bytes.fromhex("020000000002"), ip="10.0.0.2", port=80,
                          isn=5000),
}
EPOCH = 1_767_225_600
"""2026-01-01T00:00:00Z: trace time 0 (the client's SYN) in the pcap."""
PAYLOAD = b"nagle-sim "
"""The payload pattern: ``length`` bytes of it repeated (so captures show readable bytes)."""

_FLAG_BITS = {"S": dpkt.tcp.TH_SYN, "F": dpkt.tcp.TH_FIN, "R": dpkt.tcp.TH_RST,
              "P": dpkt.tcp.TH_PUSH, "A": dpkt.tcp.TH_ACK}


def _flags(letters: str) -> int:
    bits = 0
    for letter in letters:
        bits |= _FLAG_BITS.get(letter, 0)
    return bits


def _window_shift(trace: Trace) -> int:
    """Window scale needed for the largest advertised window (0 when it fits in 16 bits)."""
    biggest = max((s.window for s in trace.segments), default=0)
    shift = 0
    while (biggest >> shift) > 0xFFFF and shift < 14:
        shift += 1
    return shift


def payload(length: int) -> bytes:
    """The ``length`` payload bytes written for a data segment."""
    reps = length // len(PAYLOAD) + 1
    return (PAYLOAD * reps)[:length]


def frame(seg: SegmentRecord, ip_id: int, wscale: int = 0,
          mss: int = 1460) -> dpkt.ethernet.Ethernet:
    """One segment as an Ethernet/IPv4/TCP frame (dpkt objects; checksums computed on pack)."""
    src, dst = ENDPOINTS[seg.src], ENDPOINTS[seg.dst]
    opts = b""
    syn = "S" in seg.flags
    if syn:   # options are TLV bytes (dpkt parses but does not build them)
        opts = struct.pack("!BBH", dpkt.tcp.TCP_OPT_MSS, 4, mss)
        if wscale:
            opts += struct.pack("!BBBB", dpkt.tcp.TCP_OPT_NOP, dpkt.tcp.TCP_OPT_WSCALE, 3, wscale)
    window = seg.window if syn else seg.window >> wscale
    tcp = dpkt.tcp.TCP(
        sport=src.port, dport=dst.port,
        seq=(src.isn + seg.seq) & 0xFFFFFFFF,
        ack=(dst.isn + seg.ack) & 0xFFFFFFFF if "A" in seg.flags else 0,
        flags=_flags(seg.flags), win=min(window, 0xFFFF), opts=opts,
        data=payload(seg.length))
    tcp.off = (20 + len(opts)) // 4
    ip = dpkt.ip.IP(src=socket.inet_aton(src.ip), dst=socket.inet_aton(dst.ip),
                    p=dpkt.ip.IP_PROTO_TCP, ttl=64, id=ip_id & 0xFFFF, df=1, data=tcp)
    return dpkt.ethernet.Ethernet(src=src.mac, dst=dst.mac, type=dpkt.ethernet.ETH_TYPE_IP,
                                  data=ip)


def to_pcap(trace: Trace) -> bytes:
    """The whole pcap file (microsecond timestamps, link type Ethernet)."""
    buf = io.BytesIO()
    writer = dpkt.pcap.Writer(buf, snaplen=65535, linktype=dpkt.pcap.DLT_EN10MB)
    wscale = _window_shift(trace)
    mss = int(trace.meta.get("mss", 1460)) if str(trace.meta.get("mss", "")).isdigit() else 1460
    ids = {Side.CLIENT: 0, Side.SERVER: 0}
    for seg in sorted(trace.segments, key=lambda s: s.t):
        ids[seg.src] += 1
        pkt = bytes(frame(seg, ids[seg.src], wscale, mss))
        writer.writepkt(pkt, ts=EPOCH + seg.t / 1_000_000)
    return buf.getvalue()


def write_pcap(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` as pcap to ``path`` (OSError propagates)."""
    Path(path).write_bytes(to_pcap(trace))
