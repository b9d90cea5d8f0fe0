"""A capture streamed once: its connections counted and triaged, their packets stored
compactly, so explaining a file of millions of packets needs the memory of its largest
connection, not of the file.

Owns: `scan` (one pass over the file: `pcap.stream` → `connections.Splitter`, each
packet packed into 42 bytes in its connection's store) and `PacketStore` (per-connection
buffers, spilled to an unlinked temporary file past `STORE_MEMORY`, read back one
connection at a time as `Packet` objects). Must not import rich, textual or simpy.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from .connections import Connection, Splitter, Tally
from .pcap import (
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    Batch,
    CaptureError,
    CaptureFile,
    Packet,
    _link_offset,
    _syn_options,
    _way,
    batches,
    no_tcp,
    parse_tcp_ip,
)

STORE_MEMORY = 32 << 20
"""Bytes of packed packets held in memory; past this every connection's buffer is
written to the temporary file (so memory stays this plus the connection analysed)."""
MAX_CONNECTION_PACKETS = 1_000_000
"""A connection longer than this is analysed on its first packets only (a note says so):
its `Packet` objects and trace cost about 400 bytes a packet."""
_REC = struct.Struct("<qIIBHIIhHbBBIH")
"""One stored packet: time, seq, ack, flags (bit 7: sent by the connection's second
endpoint), window, payload length, a 32-bit print of the packet (IPv4: its IP id and TCP
checksum, which covers the payload; else a hash of its bytes), cooked direction, MSS,
window scale, SACK/timestamps bits, option bytes, frame number, pcapng interface: 40
bytes. The fingerprint `totrace` compares to find a packet captured twice is made from
it and the header fields when the packet is read back."""

Progress = Callable[[str, int, int], None]
"""progress(stage, done, of): ``("reading", bytes read, file size)`` as the file streams
by, ``("analysing", connections done, to do)`` as suspect connections are analysed,
``("explaining", 0, 0)`` once the chosen connection is being explained."""


@dataclass(slots=True)
class _Held:
    """One connection's stored packets: chunks in the spill file, then memory."""

    a: tuple[bytes, int]
    b: tuple[bytes, int]
    buf: bytearray = field(default_factory=bytearray)
    chunks: list[tuple[int, int]] = field(default_factory=list)


class PacketStore:
    """Every packet of a streamed capture, packed and grouped by connection. The scan
    appends to each connection's buffer itself (`buffer`) and calls `spill` when more
    than `memory` bytes are held."""

    def __init__(self, memory: int = STORE_MEMORY) -> None:
        self.memory = memory
        self.held: dict[int, _Held] = {}
        self.spill_file: IO[bytes] | None = None
        self.spilled = 0
        self.cut: set[int] = set()
        """Connections longer than `MAX_CONNECTION_PACKETS` (their first are kept)."""

    def buffer(self, tally: Tally) -> bytearray:
        held = self.held[tally.conn.number] = _Held(a=tally.a, b=tally.b)
        return held.buf

    def spill(self) -> None:
        """Write every connection's buffer to the temporary file and empty it (in place:
        the scan holds the buffers)."""
        if self.spill_file is None:
            # unlinked at once (Linux): gone with the process, even after SIGKILL
            self.spill_file = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
                prefix="nagle-sim-explain-")
        out = self.spill_file
        for held in self.held.values():
            if held.buf:
                at = out.seek(0, os.SEEK_END)
                out.write(held.buf)
                held.chunks.append((at, len(held.buf)))
                self.spilled += len(held.buf)
                held.buf.clear()

    def packets(self, number: int) -> list[Packet]:
        """Connection ``number``'s packets, in capture order."""
        held = self.held.get(number)
        if held is None:
            return []
        parts = []
        if held.chunks:
            assert self.spill_file is not None
            for at, size in held.chunks:
                self.spill_file.seek(at)
                parts.append(self.spill_file.read(size))
        parts.append(bytes(held.buf))
        ends = (held.a, held.b), (held.b, held.a)
        out = []
        for (t, seq, ack, flags, win, plen, fp32, way, mss, wscale, bits, olen, frame,
             iface) in _REC.iter_unpack(b"".join(parts)):
            (src, sport), (dst, dport) = ends[flags >> 7]
            fp = hash((fp32, seq, ack, flags, win, plen, olen, iface))
            out.append(Packet(t, src, dst, sport, dport, seq, ack, flags & 0x3F, win, plen,
                              fp, way, mss, wscale, bool(bits & 1), bool(bits & 2), olen,
                              frame))
        return out

    def truncated(self, number: int) -> bool:
        return number in self.cut

    def close(self) -> None:
        if self.spill_file is not None:
            self.spill_file.close()
            self.spill_file = None


_IP4 = struct.Struct("!HHHxB")
_TCPH = struct.Struct("!HHIIHHH")           # ports, seq, ack, offset+flags, window, checksum
_COOKED = (LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2)


def _feed(batches: Iterator[Batch], out: CaptureFile, splitter: Splitter,
          store: PacketStore, progress: Progress | None) -> None:
    """The scan's loop: every frame parsed in place, its connection found, counted
    (`Tally.add`) and its packet stored. IPv4 over Ethernet (or any link) is parsed
    inline here; other frames go through `pcap.parse_tcp_ip`. One dictionary lookup per
    packet: the key is the IPv4 header's addresses and the TCP header's ports."""
    current, new = splitter.current, splitter.new
    pack, ip4, tcph = _REC.pack, _IP4.unpack_from, _TCPH.unpack_from
    link_offset, parse, syn_options = _link_offset, parse_tcp_ip, _syn_options
    limit, memory = MAX_CONNECTION_PACKETS, store.memory
    size = _REC.size
    held = 0
    tcp_count = out.tcp
    next_progress = PROGRESS_EVERY
    for buf, items in batches:
        for frame, t, lt, start, end, iface in items:
            if lt == 1 and end - start >= 34 and buf[start + 12] == 8 and \
                    buf[start + 13] == 0:
                off, way = start + 14, -1           # Ethernet, IPv4: the common case
            else:
                o = link_offset(lt, buf, start, end)
                if o is None:
                    out.skipped += 1
                    continue
                off, way = o, (_way(lt, buf, start) if lt in _COOKED else -1)
            if end - off >= 20 and buf[off] >> 4 == 4:
                ihl = (buf[off] & 0x0F) * 4
                total, ipid, frag, proto = ip4(buf, off + 2)
                if proto != 6 or frag & 0x1FFF or ihl < 20:
                    out.skipped += 1            # not TCP, or a later IP fragment
                    continue
                tcp = off + ihl
                if end - tcp < 20:
                    out.truncated_headers += 1
                    continue
                sport, dport, seq, ack, offflags, win, csum = tcph(buf, tcp)
                doff = (offflags >> 12) * 4
                plen = ((total - ihl) if total else (end - tcp)) - doff
                if doff < 20 or plen < 0:
                    out.skipped += 1
                    continue
                key = buf[off + 12:tcp + 4] if ihl == 20 else \
                    buf[off + 12:off + 20] + buf[tcp:tcp + 4]
                flags = offflags & 0x3F
                mss, wscale, bits = 0, -1, 0
                if doff > 20 and flags & 0x02:
                    mss, wscale, sack_ok, ts = syn_options(buf, tcp + 20, min(tcp + doff, end))
                    bits = sack_ok | (ts << 1)
                fp32 = (ipid << 16) | csum
                olen = doff - 20
            else:
                fields = parse(buf, off, end, t, frame, out, way, iface)
                if fields is None:
                    continue
                (_t, src, dst, sport, dport, seq, ack, flags, win, plen, fp, way, mss,
                 wscale, sack_ok, ts, olen, _frame) = fields
                fp32 = fp & 0xFFFFFFFF
                key = src + dst + sport.to_bytes(2, "big") + dport.to_bytes(2, "big")
                bits = sack_ok | (ts << 1)
            tcp_count += 1
            entry = current.get(key)
            if entry is None or (flags & 0x12 == 0x02 and entry[0].syn_seq not in (-1, seq)):
                entry = new(key, seq, flags, t)
            tally, d, kept = entry
            tally.add(d, t, seq, ack, flags, plen)
            if tally.count > limit:
                store.cut.add(tally.conn.number)
                continue
            kept += pack(t, seq, ack, flags | (d << 7), win, plen, fp32, way, mss, wscale,
                         bits, olen, frame, iface if iface < 65536 else 65535)
            held += size
            if held > memory:
                store.spill()
                held = 0
        out.tcp = tcp_count
        if progress is not None and out.frames >= next_progress:
            progress("reading", out.bytes_read, out.size)
            next_progress = out.frames + PROGRESS_EVERY
    out.tcp = tcp_count


@dataclass(slots=True)
class Scan:
    capture: CaptureFile
    connections: list[Connection]
    store: PacketStore


PROGRESS_EVERY = 1 << 16
"""Frames between two progress calls."""


def scan(path: str, *, truncated_ok: bool = False, progress: Progress | None = None,
         memory: int = STORE_MEMORY) -> Scan:
    """Read ``path`` once: every TCP connection counted and triaged (`connections.Tally`)
    and its packets stored (`PacketStore`), loaded back one connection at a time
    (`Connection.load`). Raises `CaptureError` (one line) for a bad file."""
    capture, frames = batches(path, truncated_ok=truncated_ok)
    store = PacketStore(memory)
    splitter = Splitter(store.buffer)
    try:
        _feed(frames, capture, splitter, store, progress)
        if progress is not None:
            progress("reading", capture.size or capture.bytes_read, capture.size)
    except MemoryError:
        store.close()
        raise CaptureError(f"{capture.path}: too large to explain in memory") from None
    except BaseException:
        store.close()
        raise
    if not capture.tcp:
        store.close()
        raise no_tcp(capture)
    conns = splitter.finish()
    for c in conns:
        c.load = (lambda n=c.number: store.packets(n))
    return Scan(capture=capture, connections=conns, store=store)
