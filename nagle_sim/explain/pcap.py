"""Capture files in: pcap and pcapng framing, link layers, IPv4/IPv6 and TCP headers.

Owns: `read_capture(path)`, which turns a capture file into a list of `Packet` (one per
TCP segment, headers only) and the `CaptureError` one-line message for every way a file can
be bad. Framing is done here, not by dpkt's readers, because those follow only a file's
first interface and trust every length field; a hostile length here is an error, never a
huge read. Header parsing uses `struct` for speed (100,000 packets in well under a second).
Must not import rich, textual, simpy or realnet.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NoReturn

from ..errors import UserError

MAX_TCP_PACKETS = 1_000_000
"""More TCP packets than this in one file is refused: bounded memory (a `Packet` is about
200 bytes, and the chosen connection's trace as much again) and time (explain handles
about 25,000 segments a second)."""
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
    fp: int = 0            # fingerprint of the whole IP packet as captured (and iface)
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


def _parse_tcp_ip(data: bytes, off: int, t: int, frame: int, out: CaptureFile,
                  way: int = -1, iface: int = 0) -> None:
    """Parse IPv4/IPv6 + TCP at ``data[off:]``; append a Packet or count a skip. ``way``:
    the cooked header's packet type; ``iface``: the pcapng interface."""
    n = len(data)
    if off >= n:
        out.skipped += 1
        return
    version = data[off] >> 4
    if version == 4:
        if n - off < 20:
            out.truncated_headers += 1
            return
        ihl = (data[off] & 0x0F) * 4
        total, _ipid, frag, proto = _IP4.unpack_from(data, off + 2)
        if proto != _TCP or frag & 0x1FFF or ihl < 20:
            out.skipped += 1            # not TCP, or a later IP fragment
            return
        src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
        tcp = off + ihl
        # TSO on the capturing host: IP total length 0 means "as long as the frame"
        ip_payload = (total - ihl) if total else (n - tcp)
    elif version == 6:
        if n - off < 40:
            out.truncated_headers += 1
            return
        plen6, nxt = _IP6.unpack_from(data, off + 4)
        src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
        tcp = off + 40
        ip_payload = plen6 if plen6 else n - tcp   # jumbogram / BIG TCP: trust the frame
        hops = 0
        while nxt in _IP6_EXT and hops < 8:
            if n - tcp < 8:
                out.truncated_headers += 1
                return
            nxt2, hlen = data[tcp], data[tcp + 1]
            size = (hlen + 2) * 4 if nxt == 51 else (hlen + 1) * 8
            tcp += size
            ip_payload -= size
            nxt, hops = nxt2, hops + 1
        if nxt != _TCP:
            out.skipped += 1
            return
    else:
        out.skipped += 1
        return
    if n - tcp < 20:
        out.truncated_headers += 1
        return
    sport, dport, seq, ack, offflags, win = _TCPH.unpack_from(data, tcp)
    doff = (offflags >> 12) * 4
    if doff < 20:
        out.skipped += 1
        return
    plen = ip_payload - doff
    if plen < 0:
        out.skipped += 1
        return
    intern = out.addresses
    src = intern.setdefault(src, bytes(src))
    dst = intern.setdefault(dst, bytes(dst))
    pkt = Packet(t=t, src=src, dst=dst, sport=sport, dport=dport, seq=seq,
                 ack=ack, flags=offflags & 0x3F, win=win, plen=plen,
                 fp=hash((iface, data[off:])), way=way, frame=frame, olen=doff - 20)
    if doff > 20 and offflags & TH_SYN:    # only the handshake's options are used
        _syn_options(data, tcp + 20, min(tcp + doff, n), pkt)
    out.packets.append(pkt)
    if len(out.packets) > MAX_TCP_PACKETS:
        _too_many(out.path)


def _too_many(path: str) -> NoReturn:
    raise CaptureError(f"{path}: more than {MAX_TCP_PACKETS:,} TCP packets or "
                       f"{MAX_FRAMES:,} frames; cut the capture first (e.g. tcpdump -r IN "
                       "-w OUT 'port P')")


def _syn_options(data: bytes, i: int, end: int, pkt: Packet) -> None:
    while i < end:
        kind = data[i]
        if kind == 0:
            return
        if kind == 1:
            i += 1
            continue
        if i + 1 >= end:
            return
        size = data[i + 1]
        if size < 2 or i + size > end:
            return
        if kind == 2 and size == 4:
            pkt.mss = struct.unpack_from("!H", data, i + 2)[0]
        elif kind == 3 and size == 3:
            pkt.wscale = min(data[i + 2], 14)
        elif kind == 4:
            pkt.sack_ok = True
        elif kind == 8:
            pkt.ts = True
        i += size


def _link_offset(linktype: int, data: bytes) -> int | None:
    """Offset of the IP header in a frame of ``linktype``, or None (not IP)."""
    if linktype == LINKTYPE_ETHERNET:
        if len(data) < 14:
            return None
        off, etype = 14, struct.unpack_from("!H", data, 12)[0]
        while etype in _ETHERTYPE_VLAN and len(data) >= off + 4:
            etype = struct.unpack_from("!H", data, off + 2)[0]
            off += 4
        return off if etype in (_ETHERTYPE_IP, _ETHERTYPE_IP6) else None
    if linktype == LINKTYPE_LINUX_SLL:
        if len(data) < 16:
            return None
        return 16 if struct.unpack_from("!H", data, 14)[0] in (_ETHERTYPE_IP,
                                                                 _ETHERTYPE_IP6) else None
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(data) < 20:
            return None
        return 20 if struct.unpack_from("!H", data, 0)[0] in (_ETHERTYPE_IP,
                                                                _ETHERTYPE_IP6) else None
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        # 4 bytes of address family whose byte order varies by OS; the IP version nibble
        # that follows is what we trust
        return 4 if len(data) >= 4 else None
    if linktype in (LINKTYPE_RAW, LINKTYPE_RAW_OPENBSD, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return 0
    return None


def _way(linktype: int, data: bytes) -> int:
    """The packet type of a Linux cooked header (SLL, SLL2): 0 to this host, 4 outgoing
    — ``-i any`` sees a loopback packet once each way; -1 for other link types."""
    if linktype == LINKTYPE_LINUX_SLL:
        return int(struct.unpack_from("!H", data, 0)[0])
    if linktype == LINKTYPE_LINUX_SLL2:
        return data[10]
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


def _read_pcap(f: BinaryIO, head: bytes, out: CaptureFile) -> None:
    endian, nanos = _PCAP_MAGIC[head[:4]]
    rest = _read_exact(f, 20, out.path, "the file header", 0)
    _major, _minor, _zone, _sig, snaplen, linktype = struct.unpack(endian + "HHiIII", rest)
    linktype &= 0x0FFFFFFF           # upper bits may carry FCS information
    _check_linktype(out.path, linktype)
    out.link_types.append(LINK_NAMES[linktype])
    out.snaplen = snaplen
    rec = struct.Struct(endian + "IIII")
    frames = 0
    while True:
        hdr = f.read(16)
        if not hdr:
            break
        if len(hdr) < 16:
            raise TruncatedCapture(out.path, f"the record header of frame {frames + 1}",
                                   frames)
        sec, frac, caplen, _orig = rec.unpack(hdr)
        if caplen > MAX_RECORD:
            raise CaptureError(f"{out.path}: corrupt record {frames + 1}: captured length "
                               f"{caplen} is larger than any real frame")
        data = _read_exact(f, caplen, out.path, f"frame {frames + 1}", frames)
        frames += 1
        if frames > MAX_FRAMES:
            _too_many(out.path)
        t = sec * 1_000_000 + (frac // 1000 if nanos else frac)
        off = _link_offset(linktype, data)
        if off is None:
            out.skipped += 1
            continue
        _parse_tcp_ip(data, off, t, frames, out, _way(linktype, data))
    out.frames = frames


def _opts(body: bytes, start: int, e: str) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    i = start
    while i + 4 <= len(body):
        code, size = struct.unpack_from(e + "HH", body, i)
        if code == 0:
            break
        found.setdefault(code, body[i + 4:i + 4 + size])
        i += 4 + ((size + 3) & ~3)
    return found


def _read_pcapng(f: BinaryIO, head: bytes, out: CaptureFile) -> None:
    e = "<"
    ifaces: list[tuple[int, int, int]] = []     # (linktype, units per second, offset s)
    frames = 0
    first = True
    pending = head
    while True:
        hdr = pending if pending else f.read(8)
        pending = b""
        if not hdr:
            break
        if len(hdr) < 8:
            raise TruncatedCapture(out.path, "a block header", frames)
        btype = struct.unpack_from(e + "I", hdr)[0]
        if btype == _PCAPNG_SHB:
            bom = _read_exact(f, 4, out.path, "a section header", frames)
            if bom == b"\x4d\x3c\x2b\x1a":
                e = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                e = ">"
            else:
                raise CaptureError(f"{out.path}: not a capture file (bad pcapng byte-order "
                                   "magic)")
            blen = struct.unpack_from(e + "I", hdr, 4)[0]
            if blen < 28 or blen % 4 or blen > MAX_BLOCK:
                raise CaptureError(f"{out.path}: corrupt pcapng section header (length "
                                   f"{blen})")
            _read_exact(f, blen - 12, out.path, "a section header", frames)
            ifaces = []                 # interface ids restart in every section
            first = False
            continue
        if first:
            raise CaptureError(f"{out.path}: not a capture file")
        blen = struct.unpack_from(e + "I", hdr, 4)[0]
        if blen < 12 or blen % 4 or blen > MAX_BLOCK:
            raise CaptureError(f"{out.path}: corrupt pcapng block after frame {frames} "
                               f"(length {blen})")
        body = _read_exact(f, blen - 8, out.path, "a block", frames)[:-4]
        if btype == 1:                               # Interface Description Block
            if len(body) < 8:
                raise CaptureError(f"{out.path}: corrupt interface description block")
            linktype, _res, snaplen = struct.unpack_from(e + "HHI", body)
            options = _opts(body, 8, e)
            units = 1_000_000
            if 9 in options and options[9]:
                r = options[9][0]
                units = 2 ** (r & 0x7F) if r & 0x80 else 10 ** (r & 0x7F)
                if units <= 0 or units > 10**12:
                    raise CaptureError(f"{out.path}: unsupported timestamp resolution")
            offset = struct.unpack_from(e + "q", options[14])[0] if len(
                options.get(14, b"")) == 8 else 0
            ifaces.append((linktype, units, offset))
            if linktype in LINK_NAMES:
                name = LINK_NAMES[linktype]
                if name not in out.link_types:
                    out.link_types.append(name)
            out.snaplen = max(out.snaplen, snaplen)
            continue
        if btype in (6, 3, 2):
            if btype == 6:                           # Enhanced Packet Block
                if len(body) < 20:
                    raise CaptureError(f"{out.path}: corrupt packet block after frame "
                                       f"{frames}")
                iface, hi, lo, caplen, _orig = struct.unpack_from(e + "IIIII", body)
                data_at, ticks = 20, (hi << 32) | lo
            elif btype == 2:                         # obsolete Packet Block
                if len(body) < 20:
                    raise CaptureError(f"{out.path}: corrupt packet block")
                iface, _drops, hi, lo, caplen, _orig = struct.unpack_from(e + "HHIIII", body)
                data_at, ticks = 20, (hi << 32) | lo
            else:                                    # Simple Packet Block: no timestamp
                iface, ticks, data_at = 0, 0, 4
                caplen = min(struct.unpack_from(e + "I", body)[0], len(body) - 4)
            frames += 1
            if frames > MAX_FRAMES:
                _too_many(out.path)
            if iface >= len(ifaces):
                raise CaptureError(f"{out.path}: frame {frames} names interface {iface}, "
                                   "which the file never describes")
            linktype, units, offset = ifaces[iface]
            _check_linktype(out.path, linktype)
            if caplen > len(body) - data_at:
                raise CaptureError(f"{out.path}: corrupt frame {frames}: captured length "
                                   "exceeds its block")
            data = body[data_at:data_at + caplen]
            t = offset * 1_000_000 + (ticks * 1_000_000) // units
            off = _link_offset(linktype, data)
            if off is None:
                out.skipped += 1
                continue
            _parse_tcp_ip(data, off, t, frames, out, _way(linktype, data), iface)
            continue
        # any other block (name resolution, statistics, journal…) is skipped
    out.frames = frames
    if first:
        raise CaptureError(f"{out.path}: not a capture file")


def _truncation(reader: Callable[[BinaryIO, bytes, CaptureFile], None], f: BinaryIO,
                head: bytes, out: CaptureFile, truncated_ok: bool) -> None:
    """Run ``reader``; a truncated file keeps its complete frames when ``truncated_ok``,
    else the refusal says how to explain them."""
    try:
        reader(f, head, out)
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


def read_capture(path: str | os.PathLike[str], *, truncated_ok: bool = False
                 ) -> CaptureFile:
    """Read every TCP segment of a pcap or pcapng file. ``truncated_ok``: a file that ends
    inside a frame (or a record or block header) yields its complete frames, and says
    where it ends in `CaptureFile.truncated`.

    Raises:
        CaptureError: the file is missing, not a capture, truncated (without
            ``truncated_ok``, or before its first complete frame), corrupt, uses a link
            type we cannot read, or holds no TCP at all.
    """
    p = str(Path(path))
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise CaptureError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise CaptureError(f"{p}: is a directory, not a capture file") from None
    except OSError as exc:
        raise CaptureError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        head = f.read(4)
        if head in _PCAP_MAGIC:
            out = CaptureFile(path=p, fmt="pcap")
            _truncation(_read_pcap, f, head, out, truncated_ok)
        elif len(head) == 4 and struct.unpack("<I", head)[0] == _PCAPNG_SHB:
            out = CaptureFile(path=p, fmt="pcapng")
            _truncation(_read_pcapng, f, head + f.read(4), out, truncated_ok)
        elif not head:
            raise CaptureError(f"{p}: empty file, not a capture")
        else:
            raise CaptureError(f"{p}: not a capture file (expected pcap or pcapng; tcpdump "
                               "-w and Wireshark write these)")
    except OSError as exc:
        raise CaptureError(f"{p}: cannot read: {exc.strerror or exc}") from None
    finally:
        f.close()
    if not out.packets:
        why = (f"{out.truncated_headers} TCP frame(s) are cut inside their headers (snaplen "
               f"{out.snaplen})" if out.truncated_headers else
               f"{out.frames} frame(s), none of them TCP")
        raise CaptureError(f"{p}: no TCP segments: {why}")
    return out
