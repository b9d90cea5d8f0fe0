"""Capture files written with dpkt from known segment lists (no network needed).

Owns: `write_capture`, which stamps each segment of a `Trace` with the time a capture at
``at`` ("client", "server" or "both") would have seen it and frames it for a link type
(Ethernet, SLL, SLL2, null, raw IP), in pcap or pcapng, over IPv4 or IPv6, optionally cut
to a snaplen. `nagle_sim.export.pcap` (used where it fits: the model round-trip test) writes
only Ethernet/IPv4 pcap stamped at send time, without SACK-permitted or timestamps in the
handshake, which the TLP rule and the capture-point tests need; hence this writer.
"""

from __future__ import annotations

import io
import socket
import struct
from pathlib import Path

import dpkt

from nagle_sim.model.events import Side
from nagle_sim.trace import SegmentRecord, Trace

EPOCH_US = 1_767_225_600_000_000
ADDR4 = {Side.CLIENT: "10.1.0.1", Side.SERVER: "10.1.0.2"}
ADDR6 = {Side.CLIENT: "fd00::1", Side.SERVER: "fd00::2"}
PORT = {Side.CLIENT: 43210, Side.SERVER: 8080}
ISN = {Side.CLIENT: 4_294_967_000, Side.SERVER: 123_456}   # the client's wraps soon
LINKTYPES = {"ethernet": 1, "sll": 113, "sll2": 276, "null": 0, "raw": 101}
_BITS = {"S": 0x02, "F": 0x01, "R": 0x04, "P": 0x08, "A": 0x10}


def tcp_bytes(seg: SegmentRecord, *, mss: int = 1448, wscale: int = 7, ts: bool = False,
              ports: dict[Side, int] | None = None, shift: int = 7) -> bytes:
    ports = ports or PORT
    opts = b""
    if "S" in seg.flags:
        opts = struct.pack("!BBH", 2, 4, mss + (12 if ts else 0)) + b"\x01\x03\x03" + \
            bytes([wscale]) + b"\x04\x02\x01\x01"
    win = seg.window if "S" in seg.flags else seg.window >> shift
    tcp = dpkt.tcp.TCP(sport=ports[seg.src], dport=ports[seg.src.peer],
                       seq=(ISN[seg.src] + seg.seq) & 0xFFFFFFFF,
                       ack=(ISN[seg.src.peer] + seg.ack) & 0xFFFFFFFF if "A" in seg.flags
                       else 0,
                       flags=sum(_BITS[f] for f in seg.flags), win=min(win, 0xFFFF),
                       opts=opts, data=b"x" * seg.length)
    tcp.off = (20 + len(opts)) // 4
    return bytes(tcp)


def ip_bytes(seg: SegmentRecord, v6: bool, ipid: int,
             addrs: dict[Side, str] | None = None, **kw: object) -> bytes:
    tcp = tcp_bytes(seg, **kw)  # type: ignore[arg-type]
    if v6:
        a6 = addrs or ADDR6
        ip6 = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, a6[seg.src]),
                           dst=socket.inet_pton(socket.AF_INET6, a6[seg.src.peer]),
                           nxt=6, hlim=64, plen=len(tcp))
        ip6.data = tcp
        return bytes(ip6.pack_hdr()) + tcp
    a4 = addrs or ADDR4
    ip = dpkt.ip.IP(src=socket.inet_aton(a4[seg.src]), dst=socket.inet_aton(a4[
        seg.src.peer]), p=6, ttl=64, id=ipid & 0xFFFF, data=tcp)
    ip.len = 20 + len(tcp)
    return bytes(ip)


def link_frame(linktype: str, ip: bytes, v6: bool, outgoing: bool = True) -> bytes:
    etype = 0x86DD if v6 else 0x0800
    if linktype == "ethernet":
        return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" + struct.pack("!H",
                                                                                  etype) + ip
    if linktype == "sll":
        return struct.pack("!HHH8sH", 4 if outgoing else 0, 1, 6, b"\x02" * 6 + b"\0\0",
                           etype) + ip
    if linktype == "sll2":
        return struct.pack("!HHIHBB8s", etype, 0, 1, 1, 4 if outgoing else 0, 6,
                           b"\x02" * 6 + b"\0\0") + ip
    if linktype == "null":
        return struct.pack("<I", 30 if v6 else 2) + ip
    return ip


def seen_time(seg: SegmentRecord, at: str) -> int:
    if at == "both" or at == seg.src.value:
        return seg.t
    return seg.arrive if seg.arrive is not None else seg.t


def frames(trace: Trace, *, at: str = "client", linktype: str = "ethernet",
           v6: bool = False, ts: bool = False, ports: dict[Side, int] | None = None,
           t0: int = 0, segments: list[SegmentRecord] | None = None,
           twice: bool = False, addrs: dict[Side, str] | None = None
           ) -> list[tuple[int, bytes]]:
    """(µs, frame) for every segment as a capture at ``at`` saw it; ``twice`` repeats
    every frame 5 µs later as ``-i any`` does (outgoing, then incoming)."""
    segs = segments if segments is not None else trace.segments
    mss = int(trace.meta.get("mss", 1448))
    rows = sorted(((seen_time(s, at), i, s) for i, s in enumerate(segs)),
                  key=lambda r: (r[0], r[1]))
    ids = {Side.CLIENT: 0, Side.SERVER: 0}
    out = []
    for t, _, s in rows:
        ids[s.src] += 1
        frame = link_frame(linktype, ip_bytes(s, v6, ids[s.src], addrs, mss=mss, ts=ts,
                                              ports=ports), v6)
        out.append((EPOCH_US + t0 + t, frame))
        if twice:      # -i any: the same packet outgoing, then incoming
            out.append((EPOCH_US + t0 + t + 5, link_frame(
                linktype, ip_bytes(s, v6, ids[s.src], addrs, mss=mss, ts=ts, ports=ports),
                v6, outgoing=False)))
    return out


def write_frames(rows: list[tuple[int, bytes]], path: Path, *, linktype: str = "ethernet",
                 fmt: str = "pcap", snaplen: int = 65535, nanos: bool = False) -> Path:
    buf = io.BytesIO()
    lt = LINKTYPES[linktype]
    if fmt == "pcap":
        # written by hand so that timestamps stay exact integers (dpkt's writer takes floats)
        buf.write(struct.pack("<IHHiIII", 0xA1B23C4D if nanos else 0xA1B2C3D4, 2, 4, 0, 0,
                              snaplen, lt))
    else:
        writer = dpkt.pcapng.Writer(buf, snaplen=snaplen, linktype=lt)
    for us, frame in sorted(rows, key=lambda r: r[0]):
        cut = frame[:snaplen]
        if fmt == "pcap":
            frac = (us % 1_000_000) * (1000 if nanos else 1)
            buf.write(struct.pack("<IIII", us // 1_000_000, frac, len(cut), len(frame)) + cut)
        else:
            writer.writepkt(cut, ts=us / 1_000_000)
    path.write_bytes(buf.getvalue())
    return path


def write_capture(trace: Trace, path: Path, *, at: str = "client", linktype: str = "ethernet",
                  fmt: str = "pcap", v6: bool = False, snaplen: int = 65535,
                  segments: list[SegmentRecord] | None = None, ts: bool = False,
                  nanos: bool = False, twice: bool = False,
                  addrs: dict[Side, str] | None = None) -> Path:
    """Write ``trace`` (or ``segments``) as a capture seen at ``at``; ``addrs`` replaces
    the default addresses (e.g. loopback)."""
    rows = frames(trace, at=at, linktype=linktype, v6=v6, ts=ts, segments=segments,
                  twice=twice, addrs=addrs)
    return write_frames(rows, path, linktype=linktype, fmt=fmt, snaplen=snaplen, nanos=nanos)


def seg(side: str, t_ms: float, flags: str, seq: int, length: int = 0, ack: int = 0, *,
        win: int = 65535, delay_ms: float = 0.0) -> SegmentRecord:
    """A hand-made segment; ``delay_ms`` is its one-way flight time."""
    t = round(t_ms * 1000)
    return SegmentRecord(t=t, src=Side(side), seq=seq, ack=ack, length=length, flags=flags,
                         window=win, arrive=t + round(delay_ms * 1000))  # type: ignore[arg-type]


def handshake(delay_ms: float = 0.0) -> list[SegmentRecord]:
    d = delay_ms
    return [seg("client", 0, "S", 0, delay_ms=d), seg("server", d, "SA", 0, ack=1, delay_ms=d),
            seg("client", 2 * d, "A", 1, ack=1, delay_ms=d)]


def hand_trace(segments: list[SegmentRecord], mss: int = 1448) -> Trace:
    return Trace(source="test", title="hand-made", segments=segments, meta={"mss": mss})
