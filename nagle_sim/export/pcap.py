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
from typing import BinaryIO

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

MAX_PAYLOAD = 65_495
"""Most payload bytes a frame carries: the largest TCP payload of an IPv4 packet. A longer
segment (only in a hand-made trace, or a BIG TCP capture) is written truncated."""
FULL_FILE_BYTES = 256 * 1_048_576
"""Above this file size (frames with their whole payload), every frame keeps only
`SHORT_PAYLOAD` payload bytes, as a capture with a short snap length would."""
SHORT_PAYLOAD = 64
SNAPLEN = 65_535
_FILE_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, dpkt.pcap.DLT_EN10MB)
_RECORD = struct.Struct("<IIII")    # seconds, µs, bytes in the file, bytes on the wire

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
    """The ``length`` payload bytes written for a data segment (at most `MAX_PAYLOAD`)."""
    length = max(0, min(length, MAX_PAYLOAD))
    reps = length // len(PAYLOAD) + 1
    return (PAYLOAD * reps)[:length]


def frame(seg: SegmentRecord, ip_id: int, wscale: int = 0, mss: int = 1460,
          cap: int = MAX_PAYLOAD) -> dpkt.ethernet.Ethernet:
    """One segment as an Ethernet/IPv4/TCP frame (dpkt objects; checksums computed on pack)
    carrying at most ``cap`` payload bytes (see `to_frames` for the lengths on the wire)."""
    src, dst = ENDPOINTS[seg.src], ENDPOINTS[seg.dst]
    opts = b""
    syn = seg.has_syn
    if syn:   # options are TLV bytes (dpkt parses but does not build them)
        opts = struct.pack("!BBH", dpkt.tcp.TCP_OPT_MSS, 4, mss)
        if wscale:
            opts += struct.pack("!BBBB", dpkt.tcp.TCP_OPT_NOP, dpkt.tcp.TCP_OPT_WSCALE, 3, wscale)
    window = seg.window if syn else seg.window >> wscale
    tcp = dpkt.tcp.TCP(
        sport=src.port, dport=dst.port,
        seq=(src.isn + seg.seq) & 0xFFFFFFFF,
        ack=(dst.isn + seg.ack) & 0xFFFFFFFF if seg.has_ack else 0,
        flags=_flags(seg.flags), win=min(max(window, 0), 0xFFFF), opts=opts,
        data=payload(min(seg.length, cap)))
    tcp.off = (20 + len(opts)) // 4
    ip = dpkt.ip.IP(src=socket.inet_aton(src.ip), dst=socket.inet_aton(dst.ip),
                    p=dpkt.ip.IP_PROTO_TCP, ttl=64, id=ip_id & 0xFFFF, df=1, data=tcp)
    return dpkt.ethernet.Ethernet(src=src.mac, dst=dst.mac, type=dpkt.ethernet.ETH_TYPE_IP,
                                  data=ip)


def _frame_bytes(seg: SegmentRecord, ip_id: int, wscale: int, mss: int, cap: int
                 ) -> tuple[bytes, int]:
    """(the frame's bytes in the file, its length on the wire). A frame cut short of its
    segment keeps the segment's length in its IP header (as a capture with a short snap
    length does: Wireshark then shows the true TCP length and "packet size limited")."""
    eth = frame(seg, ip_id, wscale, mss, cap)
    data = bytes(eth)
    kept = min(seg.length, cap)
    if kept == seg.length:
        return data, len(data)
    ip_len = 20 + eth.data.data.off * 4 + seg.length
    if ip_len <= 0xFFFF:
        header = bytearray(data[14:34])
        header[2:4] = struct.pack("!H", ip_len)
        header[10:12] = b"\0\0"
        header[10:12] = struct.pack("!H", dpkt.in_cksum(bytes(header)))
        data = data[:14] + bytes(header) + data[34:]
    return data, min(14 + ip_len, 0xFFFFFFFF)


def write_pcap_to(trace: Trace, out: BinaryIO) -> None:
    """Write ``trace`` as a pcap file to ``out``, one frame at a time (memory does not grow
    with the run). Frames carry their whole payload (up to `MAX_PAYLOAD`) unless that would
    make the file bigger than `FULL_FILE_BYTES`; then each keeps `SHORT_PAYLOAD` bytes."""
    wscale = _window_shift(trace)
    mss = int(trace.meta.get("mss", 1460)) if str(trace.meta.get("mss", "")).isdigit() else 1460
    mss = min(mss, 0xFFFF)
    full = sum(70 + min(max(s.length, 0), MAX_PAYLOAD) for s in trace.segments)
    cap = MAX_PAYLOAD if full <= FULL_FILE_BYTES else SHORT_PAYLOAD
    out.write(_FILE_HEADER)
    ids = {Side.CLIENT: 0, Side.SERVER: 0}
    for seg in sorted(trace.segments, key=lambda s: s.t):
        ids[seg.src] += 1
        data, wire = _frame_bytes(seg, ids[seg.src], wscale, mss, cap)
        sec, usec = divmod(EPOCH * 1_000_000 + seg.t, 1_000_000)
        out.write(_RECORD.pack(max(0, sec), usec, len(data), wire))
        out.write(data)


def to_pcap(trace: Trace) -> bytes:
    """The whole pcap file (microsecond timestamps, link type Ethernet)."""
    buf = io.BytesIO()
    write_pcap_to(trace, buf)
    return buf.getvalue()

