"""Capture files in: pcap and pcapng framing, link layers, IPv4/IPv6 and TCP headers.

Owns: `read_capture(path)`, which turns a capture file into a list of `Packet` (one per
TCP segment, headers only) and the `CaptureError` one-line message for every way a file can
be bad. Framing is done here, not by dpkt's readers, because those follow only a file's
first interface and trust every length field; a hostile length here is an error, never a
huge read. Header parsing uses `struct` for speed (100,000 packets in well under a second).
Must not import rich, textual, simpy or realnet.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NoReturn

from ..errors import UserError

MAX_TCP_PACKETS = 1_000_000
MAX_TIME_US = 1 << 62
"""Frame times beyond ±146,000 years from 1970 are refused: no clock wrote them, and the
streaming store packs a time into 63 bits."""
"""More TCP packets than this are refused by `read_capture`, which holds them all as
`Packet` objects (about 200 bytes each). explain streams the file instead and holds at
most this many of one connection (`explain.scan.MAX_CONNECTION_PACKETS`)."""
MAX_FRAMES = 20_000_000
"""More frames than this (TCP or not) is refused: reading stays within about a minute."""
MAX_RECORD = 1 << 18
"""Largest captured frame accepted (tcpdump's maximum snaplen is 262144)."""
MAX_BLOCK = 1 << 24
"""Largest pcapng block accepted (16 MiB; real blocks are a frame plus options)."""

# Link-layer header types (https://www.tcpdump.org/linktypes.html)
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_RAW_OPENBSD = 12
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINK_NAMES = {
    LINKTYPE_NULL: "BSD loopback (null)", LINKTYPE_ETHERNET: "Ethernet",
    LINKTYPE_RAW: "raw IP", LINKTYPE_RAW_OPENBSD: "raw IP", LINKTYPE_LOOP: "OpenBSD loopback",
    LINKTYPE_LINUX_SLL: "Linux cooked (SLL)", LINKTYPE_LINUX_SLL2: "Linux cooked v2 (SLL2)",
    LINKTYPE_IPV4: "raw IPv4", LINKTYPE_IPV6: "raw IPv6",
}

TH_FIN, TH_SYN, TH_RST, TH_PUSH, TH_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

_ETHERTYPE_IP, _ETHERTYPE_IP6 = 0x0800, 0x86DD
_ETHERTYPE_VLAN = (0x8100, 0x88A8, 0x9100)
_PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", False), b"\xa1\xb2\xc3\xd4": (">", False),
               b"\x4d\x3c\xb2\xa1": ("<", True), b"\xa1\xb2\x3c\x4d": (">", True)}
"""pcap magic → (byte order, fractions are nanoseconds)."""
_PCAPNG_SHB = 0x0A0D0D0A
_TCP = 6
_IP4 = struct.Struct("!HHHxB")          # total length, id, flags+fragment, protocol
_IP6 = struct.Struct("!HB")             # payload length, next header
_TCPH = struct.Struct("!HHIIHH")        # ports, seq, ack, offset+flags, window
_U16 = struct.Struct("!H")
# IPv6 extension headers we step over on the way to TCP
_IP6_EXT = {0, 43, 60, 51}


class CaptureError(UserError, ValueError):
    """A capture that cannot be read. ``str(err)`` is one line naming the file."""


TRUNCATED_OK = "--truncated-ok"
"""The `nagle-sim explain` option that reads a truncated file's complete frames."""


class TruncatedCapture(CaptureError):
    """The file ends inside ``what`` (a frame, a record header, a block) after ``frames``
    complete frames: a capture copied while tcpdump was still writing, or cut with head."""

    def __init__(self, path: str, what: str, frames: int) -> None:
        self.what, self.frames = what, frames
        super().__init__(f"{path}: truncated: the file ends inside {what} after {frames} "
                         "complete frame(s)")


@dataclass(slots=True)
class Packet:
    """One captured TCP segment (headers only; the payload is never kept)."""

    t: int                 # capture time, µs since the epoch
    src: bytes             # packed address (4 or 16 bytes)
    dst: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int             # TH_* bits
    win: int               # raw header value (not scaled)
    plen: int              # payload length from the IP length (exact under truncation)
    fp: int = 0            # the packet's fingerprint: IPv4 id, TCP checksum and header
                           # fields; IPv6 its bytes (and the pcapng interface)
    way: int = -1          # Linux cooked capture's packet type (0 to us, 4 outgoing), -1
    mss: int = 0           # SYN options
    wscale: int = -1
    sack_ok: bool = False
    ts: bool = False       # timestamps option present (SYN and SYN-ACK only)
    olen: int = 0          # TCP option bytes (12 on a data segment: timestamps, likely)
    frame: int = 0         # 1-based frame number in the file (as Wireshark counts)


@dataclass(slots=True)
class CaptureFile:
    path: str
    fmt: str                                  # "pcap" or "pcapng"
    link_types: list[str] = field(default_factory=list)
    packets: list[Packet] = field(default_factory=list)
    frames: int = 0
    skipped: int = 0                          # frames that were not TCP (or unreadable)
    truncated_headers: int = 0                # TCP frames cut inside their headers
    snaplen: int = 0
    truncated: str = ""
    """Where the file ends early, when read with ``truncated_ok`` ("" for a whole file)."""
    addresses: dict[bytes, bytes] = field(default_factory=dict, repr=False)
    """One bytes object per address (interned: millions of packets share a few)."""
    tcp: int = 0
    """TCP segments read (`packets` holds them only when read with `read_capture`)."""
    size: int = 0
    """The file's size in bytes (0 when unknown)."""
    bytes_read: int = 0
    """How far reading has got (for progress)."""


PacketFields = tuple[int, bytes, bytes, int, int, int, int, int, int, int, int, int, int,
                     int, bool, bool, int, int]
"""A TCP segment's fields in `Packet`'s order (``Packet(*fields)``): what the streaming
readers pass on without building an object per packet."""


def parse_tcp_ip(buf: bytes, off: int, end: int, t: int, frame: int, out: CaptureFile,
                 way: int = -1, iface: int = 0) -> PacketFields | None:
    """IPv4/IPv6 + TCP at ``buf[off:end]`` → the segment's fields, or None (not TCP, or
    cut inside its headers: counted in ``out``). ``way``: the cooked header's packet
    type; ``iface``: the pcapng interface."""
    n = end
    if off >= n:
        out.skipped += 1
        return None
    version = buf[off] >> 4
    if version == 4:
        if n - off < 20:
            out.truncated_headers += 1
            return None
        ihl = (buf[off] & 0x0F) * 4
        total, ipid, frag, proto = _IP4.unpack_from(buf, off + 2)
        if proto != _TCP or frag & 0x1FFF or ihl < 20:
            out.skipped += 1            # not TCP, or a later IP fragment
            return None
        src, dst = buf[off + 12:off + 16], buf[off + 16:off + 20]
        tcp = off + ihl
        # TSO on the capturing host: IP total length 0 means "as long as the frame"
        ip_payload = (total - ihl) if total else (n - tcp)
    elif version == 6:
        ipid = -1
        if n - off < 40:
            out.truncated_headers += 1
            return None
        plen6, nxt = _IP6.unpack_from(buf, off + 4)
        src, dst = buf[off + 8:off + 24], buf[off + 24:off + 40]
        tcp = off + 40
        ip_payload = plen6 if plen6 else n - tcp   # jumbogram / BIG TCP: trust the frame
        hops = 0
        while nxt in _IP6_EXT and hops < 8:
            if n - tcp < 8:
                out.truncated_headers += 1
                return None
            nxt2, hlen = buf[tcp], buf[tcp + 1]
            size = (hlen + 2) * 4 if nxt == 51 else (hlen + 1) * 8
            tcp += size
            ip_payload -= size
            nxt, hops = nxt2, hops + 1
        if nxt != _TCP:
            out.skipped += 1
            return None
    else:
        out.skipped += 1
        return None
    if n - tcp < 20:
        out.truncated_headers += 1
        return None
    sport, dport, seq, ack, offflags, win = _TCPH.unpack_from(buf, tcp)
    doff = (offflags >> 12) * 4
    if doff < 20:
        out.skipped += 1
        return None
    plen = ip_payload - doff
    if plen < 0:
        out.skipped += 1
        return None
    intern = out.addresses
    src = intern.setdefault(src, src)
    dst = intern.setdefault(dst, dst)
    mss = wscale_ = -1
    sack_ok = ts = False
    if doff > 20 and offflags & TH_SYN:    # only the handshake's options are used
        mss, wscale_, sack_ok, ts = _syn_options(buf, tcp + 20, min(tcp + doff, n))
    if ipid >= 0:
        # IPv4: the same packet is the same TCP header, IP id and TCP checksum (which
        # covers the payload) — a forwarding host's second copy differs in TTL only
        csum = int.from_bytes(buf[tcp + 16:tcp + 18], "big")
        fp = hash((ipid, csum, src, sport, seq, ack, offflags, win, plen, iface))
    else:
        fp = hash(buf[off:n]) if not iface else hash((iface, buf[off:n]))
    return (t, src, dst, sport, dport, seq, ack, offflags & 0x3F, win, plen, fp, way,
            max(mss, 0), wscale_, sack_ok, ts, doff - 20, frame)


def _too_many(path: str) -> NoReturn:
    raise CaptureError(f"{path}: more than {MAX_TCP_PACKETS:,} TCP packets or "
                       f"{MAX_FRAMES:,} frames; cut the capture first (e.g. tcpdump -r IN "
                       "-w OUT 'port P')")


def _syn_options(data: bytes, i: int, end: int) -> tuple[int, int, bool, bool]:
    """(MSS, window-scale shift or -1, SACK permitted, timestamps) of a SYN's options."""
    mss, wscale, sack_ok, ts = 0, -1, False, False
    while i < end:
        kind = data[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= end:
            break
        size = data[i + 1]
        if size < 2 or i + size > end:
            break
        if kind == 2 and size == 4:
            mss = struct.unpack_from("!H", data, i + 2)[0]
        elif kind == 3 and size == 3:
            wscale = min(data[i + 2], 14)
        elif kind == 4:
            sack_ok = True
        elif kind == 8:
            ts = True
        i += size
    return mss, wscale, sack_ok, ts


def _link_offset(linktype: int, buf: bytes, start: int, end: int) -> int | None:
    """Offset in ``buf`` of the IP header of the frame ``buf[start:end]`` of
    ``linktype``, or None (not IP)."""
    n = end - start
    if linktype == LINKTYPE_ETHERNET:
        if n < 14:
            return None
        off, etype = start + 14, _U16.unpack_from(buf, start + 12)[0]
        while etype in _ETHERTYPE_VLAN and end >= off + 4:
            etype = _U16.unpack_from(buf, off + 2)[0]
            off += 4
        return off if etype in (_ETHERTYPE_IP, _ETHERTYPE_IP6) else None
    if linktype == LINKTYPE_LINUX_SLL:
        if n < 16:
            return None
        return start + 16 if _U16.unpack_from(buf, start + 14)[0] in (
            _ETHERTYPE_IP, _ETHERTYPE_IP6) else None
    if linktype == LINKTYPE_LINUX_SLL2:
        if n < 20:
            return None
        return start + 20 if _U16.unpack_from(buf, start)[0] in (
            _ETHERTYPE_IP, _ETHERTYPE_IP6) else None
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        # 4 bytes of address family whose byte order varies by OS; the IP version nibble
        # that follows is what we trust
        return start + 4 if n >= 4 else None
    if linktype in (LINKTYPE_RAW, LINKTYPE_RAW_OPENBSD, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return start
    return None


def _way(linktype: int, buf: bytes, start: int) -> int:
    """The packet type of a Linux cooked header (SLL, SLL2): 0 to this host, 4 outgoing
    — ``-i any`` sees a loopback packet once each way; -1 for other link types."""
    if linktype == LINKTYPE_LINUX_SLL:
        return int(_U16.unpack_from(buf, start)[0])
    if linktype == LINKTYPE_LINUX_SLL2:
        return buf[start + 10]
    return -1


def _check_linktype(path: str, linktype: int) -> None:
    if linktype not in LINK_NAMES:
        raise CaptureError(f"{path}: unsupported link type {linktype} (explain reads "
                           "Ethernet, Linux cooked SLL/SLL2, loopback/null and raw IP)")


def _read_exact(f: BinaryIO, size: int, path: str, what: str, frames: int) -> bytes:
    data = f.read(size)
    if len(data) != size:
        raise TruncatedCapture(path, what, frames)
    return data


CHUNK = 1 << 20
"""Bytes read from the file at a time: records are parsed in place in the chunk (one read
per megabyte, not two per frame), so memory stays a chunk whatever the file's size."""

Item = tuple[int, int, int, int, int, int]
"""(frame number, capture time µs, link type, start, end, pcapng interface): one frame,
``buffer[start:end]`` of the batch it comes in."""
Batch = tuple[bytes, list[Item]]
"""A buffer and the frames in it: a batch is valid until the next one is asked for."""


def _pcap_frames(f: BinaryIO, head: bytes, out: CaptureFile) -> Iterator[Batch]:
    endian, nanos = _PCAP_MAGIC[head[:4]]
    rest = _read_exact(f, 20, out.path, "the file header", 0)
    _major, _minor, _zone, _sig, snaplen, linktype = struct.unpack(endian + "HHiIII", rest)
    linktype &= 0x0FFFFFFF           # upper bits may carry FCS information
    _check_linktype(out.path, linktype)
    out.link_types.append(LINK_NAMES[linktype])
    out.snaplen = snaplen
    unpack = struct.Struct(endian + "IIII").unpack_from
    frames = 0
    buf, pos = b"", 0
    read = f.read
    items: list[Item] = []
    add = items.append
    div = 1000 if nanos else 1
    while True:
        size = len(buf)
        if size - pos < 16:
            if items:
                yield buf, items
                items = []
                add = items.append
            buf, pos = buf[pos:] + read(CHUNK), 0
            out.bytes_read = f.tell()
            out.frames = frames
            if frames > MAX_FRAMES:
                _too_many(out.path)
            size = len(buf)
            if size < 16:
                if not buf:
                    break
                raise TruncatedCapture(out.path, f"the record header of frame {frames + 1}",
                                       frames)
        sec, frac, caplen, _orig = unpack(buf, pos)
        if caplen > MAX_RECORD:
            raise CaptureError(f"{out.path}: corrupt record {frames + 1}: captured length "
                               f"{caplen} is larger than any real frame")
        start = pos + 16
        pos = start + caplen
        if pos > size:
            if items:
                yield buf, items
                items = []
                add = items.append
            buf = buf[start - 16:] + read(max(CHUNK, caplen + 16))
            out.bytes_read = f.tell()
            out.frames = frames
            start, pos = 16, 16 + caplen
            if pos > len(buf):
                raise TruncatedCapture(out.path, f"frame {frames + 1}", frames)
        frames += 1
        add((frames, sec * 1_000_000 + frac // div, linktype, start, pos, 0))
    out.frames = frames
    if frames > MAX_FRAMES:
        _too_many(out.path)
    if items:
        yield buf, items


def _opts(body: bytes, start: int, stop: int, e: str) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    i = start
    while i + 4 <= stop:
        code, size = struct.unpack_from(e + "HH", body, i)
        if code == 0:
            break
        found.setdefault(code, body[i + 4:min(i + 4 + size, stop)])
        i += 4 + ((size + 3) & ~3)
    return found


def _pcapng_frames(f: BinaryIO, head: bytes, out: CaptureFile) -> Iterator[Batch]:
    """A pcapng file's frames in batches: section headers (each sets the byte order and
    restarts the interface numbers), interface descriptions (link type, timestamp units
    and offset) and packet blocks; any other block is skipped. The Enhanced Packet Block,
    nearly every block of a capture, is read here inline (once per frame)."""
    e = "<"
    ifaces: list[tuple[int, int, int]] = []     # (linktype, units per second, offset s)
    frames = 0
    first = True
    buf, pos = head, 0
    u32 = struct.Struct("<I")
    items: list[Item] = []
    while True:
        if len(buf) - pos < 8:
            buf, pos, items = yield from _refill(f, out, buf, pos, items, CHUNK)
            if len(buf) < 8:
                if not buf:
                    break
                raise TruncatedCapture(out.path, "a block header", frames)
        btype = u32.unpack_from(buf, pos)[0]
        if btype == _PCAPNG_SHB:
            if len(buf) - pos < 12:
                buf, pos, items = yield from _refill(f, out, buf, pos, items, CHUNK, tell=False)
                if len(buf) < 12:
                    raise TruncatedCapture(out.path, "a section header", frames)
            e, blen = _section_header(buf, pos, out.path)
            u32 = struct.Struct(e + "I")
            if len(buf) - pos < blen:
                buf, pos, items = yield from _refill(f, out, buf, pos, items, max(CHUNK, blen))
                if len(buf) < blen:
                    raise TruncatedCapture(out.path, "a section header", frames)
            pos += blen
            ifaces = []                 # interface ids restart in every section
            first = False
            continue
        if first:
            raise CaptureError(f"{out.path}: not a capture file")
        blen = u32.unpack_from(buf, pos + 4)[0]
        if blen < 12 or blen % 4 or blen > MAX_BLOCK:
            raise CaptureError(f"{out.path}: corrupt pcapng block after frame {frames} "
                               f"(length {blen})")
        if len(buf) - pos < blen:
            buf, pos, items = yield from _refill(f, out, buf, pos, items, max(CHUNK, blen))
            if len(buf) < blen:
                raise TruncatedCapture(out.path, "a block", frames)
        body, stop = pos + 8, pos + blen - 4          # the block's body: buf[body:stop]
        pos += blen
        if btype == 6:                               # Enhanced Packet Block
            if stop - body < 20:
                raise CaptureError(f"{out.path}: corrupt packet block after frame "
                                   f"{frames}")
            iface, hi, lo, caplen, _orig = struct.unpack_from(e + "IIIII", buf, body)
            data_at, ticks = body + 20, (hi << 32) | lo
        elif btype == 2 or btype == 3:
            iface, ticks, data_at, caplen = _old_packet_block(btype, buf, body, stop, e,
                                                              out.path)
        else:
            if btype == 1:                           # Interface Description Block
                ifaces.append(_interface(buf, body, stop, e, out))
            continue    # any other block (name resolution, statistics, journal…) is skipped
        frames += 1
        out.frames = frames
        if frames > MAX_FRAMES:
            _too_many(out.path)
        if iface >= len(ifaces):
            raise _undescribed(out.path, frames, iface)
        linktype, units, offset = ifaces[iface]
        _check_linktype(out.path, linktype)
        if caplen > stop - data_at:
            raise CaptureError(f"{out.path}: corrupt frame {frames}: captured length "
                               "exceeds its block")
        t = offset * 1_000_000 + (ticks * 1_000_000) // units
        if not -MAX_TIME_US <= t < MAX_TIME_US:
            raise _beyond_any_clock(out.path, frames, t)
        items.append((frames, t, linktype, data_at, data_at + caplen, iface))
    if items:
        yield buf, items
    if first:
        raise CaptureError(f"{out.path}: not a capture file")


def _undescribed(path: str, frame: int, iface: int) -> CaptureError:
    return CaptureError(f"{path}: frame {frame} names interface {iface}, which the file "
                        "never describes")


def _beyond_any_clock(path: str, frame: int, t: int) -> CaptureError:
    """A frame's time out of range: a coarse resolution or an interface offset can put a
    64-bit count of ticks beyond any clock (the packed store holds 63 bits of µs)."""
    return CaptureError(f"{path}: frame {frame}: its timestamp is "
                        f"{t // 1_000_000 // 31_557_600:,} years from 1970")


def _refill(f: BinaryIO, out: CaptureFile, buf: bytes, pos: int, items: list[Item],
            size: int, tell: bool = True) -> Generator[Batch, None, tuple[bytes, int,
                                                                       list[Item]]]:
    """Hand on the frames found so far (their buffer is about to go), then read on:
    (the unread rest of ``buf`` with up to ``size`` more bytes, 0, a new item list)."""
    if items:
        yield buf, items
        items = []
    buf = buf[pos:] + f.read(size)
    if tell:
        out.bytes_read = f.tell()
    return buf, 0, items


def _section_header(buf: bytes, pos: int, path: str) -> tuple[str, int]:
    """A Section Header Block's byte order (struct's "<" or ">") and length; its first
    12 bytes are in ``buf``."""
    bom = buf[pos + 8:pos + 12]
    if bom == b"\x4d\x3c\x2b\x1a":
        e = "<"
    elif bom == b"\x1a\x2b\x3c\x4d":
        e = ">"
    else:
        raise CaptureError(f"{path}: not a capture file (bad pcapng byte-order magic)")
    blen = struct.unpack_from(e + "I", buf, pos + 4)[0]
    if blen < 28 or blen % 4 or blen > MAX_BLOCK:
        raise CaptureError(f"{path}: corrupt pcapng section header (length {blen})")
    return e, blen


def _interface(buf: bytes, body: int, stop: int, e: str, out: CaptureFile
               ) -> tuple[int, int, int]:
    """An Interface Description Block (``buf[body:stop]``): (link type, timestamp units
    per second, offset in seconds); its link type and snap length noted in ``out``."""
    if stop - body < 8:
        raise CaptureError(f"{out.path}: corrupt interface description block")
    linktype, _res, snaplen = struct.unpack_from(e + "HHI", buf, body)
    options = _opts(buf, body + 8, stop, e)
    units = 1_000_000
    if 9 in options and options[9]:
        r = options[9][0]
        units = 2 ** (r & 0x7F) if r & 0x80 else 10 ** (r & 0x7F)
        if units <= 0 or units > 10**12:
            raise CaptureError(f"{out.path}: unsupported timestamp resolution")
    offset = struct.unpack_from(e + "q", options[14])[0] if len(
        options.get(14, b"")) == 8 else 0
    if linktype in LINK_NAMES:
        name = LINK_NAMES[linktype]
        if name not in out.link_types:
            out.link_types.append(name)
    out.snaplen = max(out.snaplen, snaplen)
    return linktype, units, offset


def _old_packet_block(btype: int, buf: bytes, body: int, stop: int, e: str, path: str
                      ) -> tuple[int, int, int, int]:
    """(interface, timestamp ticks, start of the data, captured length) of an obsolete
    Packet Block (type 2) or a Simple Packet Block (type 3: interface 0, no timestamp)."""
    if btype == 2:
        if stop - body < 20:
            raise CaptureError(f"{path}: corrupt packet block")
        iface, _drops, hi, lo, caplen, _orig = struct.unpack_from(e + "HHIIII", buf, body)
        return iface, (hi << 32) | lo, body + 20, caplen
    caplen = min(struct.unpack_from(e + "I", buf, body)[0], stop - body - 4)
    return 0, 0, body + 4, caplen


def _open(path: str | os.PathLike[str]) -> tuple[str, BinaryIO]:
    p = str(Path(path))
    try:
        f = open(p, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise CaptureError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise CaptureError(f"{p}: is a directory, not a capture file") from None
    except OSError as exc:
        raise CaptureError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return p, f


def frames_of(f: BinaryIO, out: CaptureFile) -> Iterator[Batch]:
    """Every frame of an open capture file, in batches, whichever its format (``out.fmt``
    is set)."""
    head = f.read(4)
    try:
        out.size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError, io.UnsupportedOperation):
        out.size = 0
    if head in _PCAP_MAGIC:
        out.fmt = "pcap"
        return _pcap_frames(f, head, out)
    if len(head) == 4 and struct.unpack("<I", head)[0] == _PCAPNG_SHB:
        out.fmt = "pcapng"
        return _pcapng_frames(f, head, out)
    if not head:
        raise CaptureError(f"{out.path}: empty file, not a capture")
    raise CaptureError(f"{out.path}: not a capture file (expected pcap or pcapng; tcpdump "
                       "-w and Wireshark write these)")


def tcp_segments(batches: Iterator[Batch], out: CaptureFile) -> Iterator[PacketFields]:
    """The TCP segments of ``batches`` (each as `PacketFields`); other frames are counted
    in ``out``."""
    link_offset, parse = _link_offset, parse_tcp_ip
    cooked = (LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2)
    for buf, items in batches:
        for frame, t, linktype, start, end, iface in items:
            off = link_offset(linktype, buf, start, end)
            if off is None:
                out.skipped += 1
                continue
            fields = parse(buf, off, end, t, frame, out,
                           _way(linktype, buf, start) if linktype in cooked else -1, iface)
            if fields is not None:
                out.tcp += 1
                yield fields


def batches(path: str | os.PathLike[str], *, truncated_ok: bool = False
            ) -> tuple[CaptureFile, Iterator[Batch]]:
    """A capture read as it is consumed, in batches of frames: its `CaptureFile`
    (counters fill in as frames go by) and the batches. Bad input raises `CaptureError`
    (the file's first bytes are checked at once, the rest as they are read); a truncated
    file ends the iterator after its complete frames when ``truncated_ok``
    (``CaptureFile.truncated`` says so). Memory is a chunk of the file whatever its
    size."""
    p, f = _open(path)
    out = CaptureFile(path=p, fmt="")
    try:
        frames = frames_of(f, out)
    except OSError as exc:
        f.close()
        raise CaptureError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except BaseException:
        f.close()
        raise

    def run() -> Iterator[Batch]:
        try:
            yield from frames
        except TruncatedCapture as exc:
            if not exc.frames:
                raise
            if not truncated_ok:
                # the message names explain's option: this reader is explain's alone
                raise CaptureError(f"{exc}; add {TRUNCATED_OK} to explain the {exc.frames} "
                                   "complete frame(s)") from None
            out.frames = exc.frames
            out.truncated = (f"the file is truncated (it ends inside {exc.what}): explained "
                             f"from its {exc.frames} complete frame(s)")
        except OSError as exc:
            raise CaptureError(f"{p}: cannot read: {exc.strerror or exc}") from None
        finally:
            f.close()
    return out, run()


def stream(path: str | os.PathLike[str], *, truncated_ok: bool = False
           ) -> tuple[CaptureFile, Iterator[PacketFields]]:
    """The TCP segments of a capture as they are read (`batches`), each as
    `PacketFields`; raises `CaptureError` at the end when there were none."""
    out, frames = batches(path, truncated_ok=truncated_ok)

    def run() -> Iterator[PacketFields]:
        yield from tcp_segments(frames, out)
        if not out.tcp:
            raise no_tcp(out)
    return out, run()


def no_tcp(out: CaptureFile) -> CaptureError:
    """The error for a capture without a single TCP segment."""
    why = (f"{out.truncated_headers} TCP frame(s) are cut inside their headers (snaplen "
           f"{out.snaplen})" if out.truncated_headers else
           f"{out.frames} frame(s), none of them TCP")
    return CaptureError(f"{out.path}: no TCP segments: {why}")


def read_capture(path: str | os.PathLike[str], *, truncated_ok: bool = False
                 ) -> CaptureFile:
    """Read every TCP segment of a pcap or pcapng file into `CaptureFile.packets` (at
    most `MAX_TCP_PACKETS`: explain itself streams the file, see `explain.scan`).
    ``truncated_ok``: a file that ends inside a frame (or a record or block header) yields
    its complete frames, and says where it ends in `CaptureFile.truncated`.

    Raises:
        CaptureError: the file is missing, not a capture, truncated (without
            ``truncated_ok``, or before its first complete frame), corrupt, uses a link
            type we cannot read, holds no TCP at all, or more than `MAX_TCP_PACKETS`.
    """
    out, segments = stream(path, truncated_ok=truncated_ok)
    packets = out.packets
    for fields in segments:
        packets.append(Packet(*fields))
        if len(packets) > MAX_TCP_PACKETS:
            _too_many(out.path)
    return out
