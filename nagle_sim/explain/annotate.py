"""`explain CAPTURE --annotate OUT.pcapng`: the capture written back with explain's findings
as pcapng packet comments, for Wireshark.

Owns: the comments (a sentence for people and one ``nagle-sim: key=value; …`` line for the
Lua post-dissector shipped beside this module, `nagle_sim.lua`) on each stall's first
frame and releasing frame, and the copy itself: a pcap becomes pcapng (one interface,
its link type and timestamp resolution kept), a pcapng keeps every block as it was and
only the commented packets are rewritten (as enhanced packet blocks, their own options
kept). The file is streamed in chunks, never held whole; the original is never written
(OUT may not be the capture itself) and OUT appears only when complete.
Must not import rich, textual, simpy or realnet.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .advice import DEFAULT_RUNTIME, advise
from .causes import Stall
from .pcap import _PCAP_MAGIC, _PCAPNG_SHB, CHUNK, MAX_BLOCK, MAX_RECORD, CaptureError

if TYPE_CHECKING:
    from . import Explanation

LUA_SCRIPT = Path(__file__).with_name("nagle_sim.lua")
"""The Wireshark post-dissector that reads these comments (package data)."""
APPLICATION = "nagle-sim explain --annotate"
MAX_COMMENT = 16_000
"""A comment is cut at this many bytes (a pcapng option's length is 16 bits)."""


def _escape(value: str) -> str:
    """A value for the machine line: ``%``, ``;`` and line breaks as %XX."""
    return (value.replace("%", "%25").replace(";", "%3B").replace("\n", "%0A")
            .replace("\r", "%0D"))


def stall_comments(conn: int, stalls: list[Stall], runtime: str = DEFAULT_RUNTIME
                   ) -> dict[int, list[str]]:
    """Frame number → the comments explain puts on it for the stalls of connection
    ``conn``: one on the last frame before each stall, one on the frame that ended it."""
    out: dict[int, list[str]] = {}
    total = len(stalls)
    for i, st in enumerate(stalls, 1):
        if not st.end_frame:
            continue
        ms = st.duration / 1000
        fix = advise(st, runtime)
        alt = "; ".join(f"{a.cause} ({a.confidence:.1f}): {a.text}" for a in st.alternatives)
        common = {"conn": str(conn), "stall": str(i), "cause": st.cause,
                  "stall_ms": f"{ms:.3f}", "confidence": f"{st.confidence:.1f}",
                  "side": fix.side.value if fix.side else "",
                  "waiting": st.waiting.value if st.waiting else "",
                  "fix": fix.short(), "start_frame": str(st.first_frame),
                  "end_frame": str(st.end_frame), "text": st.text}
        if alt:
            common["alternative"] = alt
        release = (f"nagle-sim, connection {conn}, stall {i} of {total} ends here: {st.text} "
                   f"({ms:.1f} ms, {st.cause}, confidence {st.confidence:.1f}"
                   + (f"; or {alt}" if alt else "") + f"); fix: {fix.short()}")
        out.setdefault(st.end_frame, []).append(_comment(release, common, "release"))
        if st.first_frame:
            start = (f"nagle-sim, connection {conn}, stall {i} of {total} follows this frame: "
                     f"{ms:.1f} ms until frame {st.end_frame} ({st.cause})")
            out.setdefault(st.first_frame, []).append(_comment(start, common, "start"))
    return out


def _comment(sentence: str, fields: dict[str, str], role: str) -> str:
    line = "nagle-sim: " + "; ".join(f"{k}={_escape(v)}" for k, v in
                                     [("role", role), *fields.items()])
    text = f"{sentence}\n{line}"
    data = text.encode("utf-8")
    if len(data) > MAX_COMMENT:
        # keep the machine line whole: cut the sentence
        room = MAX_COMMENT - len(line.encode("utf-8")) - 5
        sentence = sentence.encode("utf-8")[:max(0, room)].decode("utf-8", "ignore") + "…"
        text = f"{sentence}\n{line}"
    return text


def comments_for(ex: Explanation, runtime: str = DEFAULT_RUNTIME) -> dict[int, list[str]]:
    """Every analysed connection's stalls as comments (the explained one's final word)."""
    out: dict[int, list[str]] = {}
    for c in ex.connections:
        stalls = ex.stalls if c is ex.chosen else c.found
        if not stalls:
            continue
        for frame, texts in stall_comments(c.number, stalls, runtime).items():
            out.setdefault(frame, []).extend(texts)
    return out


# ---------------------------------------------------------------- writing pcapng
def _options(e: str, comments: list[str], existing: bytes = b"") -> bytes:
    """Options of a packet block: those it had (without their end marker), then one
    opt_comment each, then the end marker."""
    if not comments and not existing:
        return b""
    out = bytearray(existing)
    for text in comments:
        data = text.encode("utf-8")[:MAX_COMMENT]
        out += struct.pack(e + "HH", 1, len(data)) + data + b"\0" * (-len(data) % 4)
    out += struct.pack(e + "HH", 0, 0)
    return bytes(out)


def _epb(e: str, iface: int, ticks: int, data: bytes, orig: int, options: bytes) -> bytes:
    body = struct.pack(e + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), orig) \
        + data + b"\0" * (-len(data) % 4) + options
    size = 12 + len(body)
    return struct.pack(e + "II", 6, size) + body + struct.pack(e + "I", size)


def _shb() -> bytes:
    app = APPLICATION.encode()
    opts = struct.pack("<HH", 4, len(app)) + app + b"\0" * (-len(app) % 4) + b"\0\0\0\0"
    size = 28 + len(opts)
    return (struct.pack("<IIIHHq", _PCAPNG_SHB, size, 0x1A2B3C4D, 1, 0, -1) + opts
            + struct.pack("<I", size))


def _idb(linktype: int, snaplen: int, nanos: bool) -> bytes:
    opts = struct.pack("<HHB3x", 9, 1, 9 if nanos else 6) + b"\0\0\0\0"
    size = 20 + len(opts)
    return struct.pack("<IIHHI", 1, size, linktype, 0, snaplen) + opts + struct.pack("<I", size)


def _from_pcap(f: BinaryIO, head: bytes, out: BinaryIO, comments: dict[int, list[str]],
               path: str) -> int:
    endian, nanos = _PCAP_MAGIC[head[:4]]
    rest = f.read(20)
    if len(rest) < 20:
        raise CaptureError(f"{path}: truncated file header")
    snaplen, linktype = struct.unpack(endian + "II", rest[12:20])
    out.write(_shb() + _idb(linktype & 0x0FFFFFFF, snaplen, nanos))
    rec = struct.Struct(endian + "IIII")
    unit = 1_000_000_000 if nanos else 1_000_000
    frame = 0
    written = 0
    while True:
        hdr = f.read(16)
        if len(hdr) < 16:
            break                       # the end (or a truncated record: not written)
        sec, frac, caplen, orig = rec.unpack(hdr)
        if caplen > MAX_RECORD:
            raise CaptureError(f"{path}: corrupt record {frame + 1}")
        data = f.read(caplen)
        if len(data) < caplen:
            break
        frame += 1
        mine = comments.get(frame, [])
        written += len(mine)
        out.write(_epb("<", 0, sec * unit + frac, data, orig, _options("<", mine)))
    return written


def _blocks(f: BinaryIO, head: bytes, path: str) -> Iterator[tuple[int, bytes, str]]:
    """Every block of a pcapng file as (type, raw bytes, the section's byte order)."""
    e = "<"
    pending = head
    while True:
        hdr = pending + f.read(8 - len(pending))
        pending = b""
        if len(hdr) < 8:
            return
        btype = struct.unpack_from("<I", hdr)[0]
        if btype == _PCAPNG_SHB:
            bom = f.read(4)
            e = ">" if bom == b"\x1a\x2b\x3c\x4d" else "<"
            size = struct.unpack_from(e + "I", hdr, 4)[0]
            if size < 28 or size % 4 or size > MAX_BLOCK:
                raise CaptureError(f"{path}: corrupt pcapng section header")
            rest = f.read(size - 12)
            if len(rest) < size - 12:
                return
            yield btype, hdr + bom + rest, e
            continue
        btype, size = struct.unpack_from(e + "II", hdr)
        if size < 12 or size % 4 or size > MAX_BLOCK:
            raise CaptureError(f"{path}: corrupt pcapng block")
        rest = f.read(size - 8)
        if len(rest) < size - 8:
            return                      # a truncated last block is left out
        yield btype, hdr + rest, e


def _packet_options(raw: bytes, e: str, at: int, end: int) -> bytes:
    """A packet block's own options (from ``at`` to ``end``), without the end marker."""
    out = bytearray()
    while at + 4 <= end:
        code, size = struct.unpack_from(e + "HH", raw, at)
        if code == 0:
            break
        step = 4 + size + (-size % 4)
        out += raw[at:at + step]
        at += step
    return bytes(out)


def _from_pcapng(f: BinaryIO, head: bytes, out: BinaryIO, comments: dict[int, list[str]],
                 path: str) -> int:
    frame = 0
    written = 0
    for btype, raw, e in _blocks(f, head, path):
        if btype not in (2, 3, 6):
            out.write(raw)
            continue
        frame += 1
        mine = comments.get(frame)
        if not mine:
            out.write(raw)
            continue
        written += len(mine)
        stop = len(raw) - 4
        if btype == 6:
            iface, hi, lo, caplen, orig = struct.unpack_from(e + "IIIII", raw, 8)
            data_at = 28
            existing = _packet_options(raw, e, data_at + caplen + (-caplen % 4), stop)
        elif btype == 2:
            iface, _drops, hi, lo, caplen, orig = struct.unpack_from(e + "HHIIII", raw, 8)
            data_at = 28
            existing = _packet_options(raw, e, data_at + caplen + (-caplen % 4), stop)
        else:
            iface, hi, lo, data_at = 0, 0, 0, 12
            orig = struct.unpack_from(e + "I", raw, 8)[0]
            caplen = min(orig, stop - data_at)
            existing = b""
        data = raw[data_at:data_at + caplen]
        out.write(_epb(e, iface, (hi << 32) | lo, data, orig, _options(e, mine, existing)))
    return written


def write_annotated(source: str, target: str, comments: dict[int, list[str]]) -> int:
    """Copy the capture at ``source`` to ``target`` as pcapng with ``comments`` (frame →
    texts); returns how many comments were written. ``target`` is written to a temporary
    name beside it and renamed when complete.

    Raises:
        CaptureError: ``target`` is the capture itself, or cannot be written, or the
            capture cannot be read again.
    """
    with contextlib.suppress(OSError):
        if os.path.samefile(source, target):
            raise CaptureError(f"--annotate {target}: that is the capture itself; explain "
                               "never modifies the original, give another file name")
    part = f"{target}.part"
    try:
        with open(source, "rb") as f, open(part, "wb", buffering=CHUNK) as out:
            head = f.read(4)
            if head in _PCAP_MAGIC:
                n = _from_pcap(f, head, out, comments, source)
            elif len(head) == 4 and struct.unpack("<I", head)[0] == _PCAPNG_SHB:
                n = _from_pcapng(f, head, out, comments, source)
            else:
                raise CaptureError(f"{source}: not a capture file")
        os.replace(part, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise CaptureError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
    return n


def annotate(ex: Explanation, target: str, runtime: str = DEFAULT_RUNTIME) -> int:
    """Write ``ex``'s capture to ``target`` with its stalls as packet comments."""
    return write_annotated(ex.capture.path, target, comments_for(ex, runtime))
