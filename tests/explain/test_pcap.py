"""Reading captures: every link type, pcap and pcapng, IPv4 and IPv6, truncation, and
every kind of bad file (one line naming the file, never a traceback)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from nagle_sim.explain import CaptureError, explain_file
from nagle_sim.explain.pcap import read_capture
from nagle_sim.trace import Trace

from .captures import write_capture


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("linktype", ["ethernet", "sll", "sll2", "null", "raw"])
@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_every_link_type_reads_every_segment_and_finds_the_same_stalls(
        s1_trace: Trace, tmp_path: Path, fmt: str, linktype: str, v6: bool) -> None:
    """The classic write-write-read stall is found whatever framed the packets."""
    path = write_capture(s1_trace, tmp_path / f"c.{fmt}", at="client", linktype=linktype,
                         fmt=fmt, v6=v6)
    cap = read_capture(path)
    assert cap.fmt == fmt
    assert len(cap.packets) == len(s1_trace.segments)
    assert [p.plen for p in cap.packets if p.plen] == [s.length for s in sorted(
        s1_trace.segments, key=lambda s: s.t) if s.length]
    ex = explain_file(str(path))
    assert [s.cause for s in ex.stalls] == ["nagle+delayed_ack"] * 5
    assert ex.captured.trace.source == "capture"


def test_nanosecond_pcap_keeps_microseconds(s1_trace: Trace, tmp_path: Path) -> None:
    a = read_capture(write_capture(s1_trace, tmp_path / "us.pcap"))
    b = read_capture(write_capture(s1_trace, tmp_path / "ns.pcap", nanos=True))
    assert [p.t for p in a.packets] == [p.t for p in b.packets]


def test_truncated_snaplen_keeps_payload_lengths_from_the_ip_header(
        s1_trace: Trace, tmp_path: Path) -> None:
    """tcpdump -s 54: headers only, yet every segment's length is exact."""
    path = write_capture(s1_trace, tmp_path / "short.pcap", snaplen=54)
    cap = read_capture(path)
    assert sum(p.plen for p in cap.packets) == sum(s.length for s in s1_trace.segments)


def test_snaplen_inside_the_tcp_header_is_an_error_naming_the_cause(
        s1_trace: Trace, tmp_path: Path) -> None:
    path = write_capture(s1_trace, tmp_path / "tiny.pcap", snaplen=40)
    with pytest.raises(CaptureError, match="cut inside their headers"):
        read_capture(path)


def test_sequence_numbers_are_relative_across_a_32_bit_wrap(s1_trace: Trace,
                                                            tmp_path: Path) -> None:
    """The test client's ISN is 296 below 2^32: its data still starts at seq 1."""
    ex = explain_file(str(write_capture(s1_trace, tmp_path / "w.pcap")))
    data = [s for s in ex.captured.trace.segments if s.length and s.src.value == "client"]
    assert data[0].seq == 1
    assert data[-1].seq + data[-1].length == 1 + 13 * 6


def test_window_scale_from_the_handshake_scales_windows(s1_trace: Trace,
                                                        tmp_path: Path) -> None:
    ex = explain_file(str(write_capture(s1_trace, tmp_path / "w.pcap")))
    assert ex.captured.trace.meta["window_scale"] == {"client": 7, "server": 7}
    wins = [s.window for s in ex.captured.trace.segments if "S" not in s.flags]
    assert all(w % 128 == 0 for w in wins) and max(wins) > 65535 // 2


# ---------------------------------------------------------------- bad input
def _write(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def _pcap_header(linktype: int = 1) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)


@pytest.mark.parametrize(("name", "data", "message"), [
    ("empty.pcap", b"", "empty file"),
    ("text.pcap", b"hello, this is not a capture\n", "not a capture file"),
    ("header.pcap", _pcap_header()[:10], "truncated"),
    ("linktype.pcap", _pcap_header(147), "unsupported link type 147"),
    ("huge.pcap", _pcap_header() + struct.pack("<IIII", 0, 0, 0x7FFFFFFF, 0x7FFFFFFF),
     "larger than any real frame"),
    ("cut.pcap", _pcap_header() + struct.pack("<IIII", 0, 0, 100, 100) + b"x" * 10,
     "truncated"),
    ("notcp.pcap", _pcap_header(101) + struct.pack("<IIII", 0, 0, 28, 28)
     + bytes.fromhex("4500001c0000000040110000") + b"\x7f\0\0\1\x7f\0\0\1"
     + b"\0\x35\0\x35\0\x08\0\0", "no TCP segments"),
    ("ng.pcapng", struct.pack("<II", 0x0A0D0D0A, 0xFFFFFFF0) + b"\x4d\x3c\x2b\x1a",
     "corrupt pcapng section header"),
    ("ngblock.pcapng", struct.pack("<III", 0x0A0D0D0A, 28, 0x1A2B3C4D)
     + struct.pack("<HHq", 1, 0, -1) + struct.pack("<I", 28)
     + struct.pack("<II", 6, 4), "corrupt pcapng block"),
])
def test_bad_files_raise_one_line_naming_the_file(tmp_path: Path, name: str, data: bytes,
                                                  message: str) -> None:
    path = _write(tmp_path, name, data)
    with pytest.raises(CaptureError) as info:
        read_capture(path)
    text = str(info.value)
    assert text.startswith(path) and message in text and "\n" not in text


def test_a_capture_cut_mid_frame_is_refused(s1_trace: Trace, tmp_path: Path) -> None:
    whole = write_capture(s1_trace, tmp_path / "whole.pcap").read_bytes()
    path = _write(tmp_path, "half.pcap", whole[: len(whole) // 2 + 7])
    with pytest.raises(CaptureError, match="truncated"):
        read_capture(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="no such file"):
        read_capture(tmp_path / "nope.pcap")
    with pytest.raises(CaptureError, match="is a directory"):
        read_capture(tmp_path)


def test_pcapng_frame_naming_an_undescribed_interface(tmp_path: Path) -> None:
    shb = struct.pack("<III", 0x0A0D0D0A, 28, 0x1A2B3C4D) + struct.pack("<HHq", 1, 0, -1) \
        + struct.pack("<I", 28)
    epb = struct.pack("<IIIIIII", 6, 32, 3, 0, 0, 0, 0) + struct.pack("<I", 32)
    path = _write(tmp_path, "iface.pcapng", shb + epb)
    with pytest.raises(CaptureError, match="never describes"):
        read_capture(path)


def test_a_capture_beyond_the_packet_bound_is_refused_in_bounded_time(
        s1_trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound is what keeps a huge or hostile file from using unbounded memory."""
    from nagle_sim.explain import pcap
    monkeypatch.setattr(pcap, "MAX_TCP_PACKETS", 10)
    with pytest.raises(CaptureError, match="more than 10 TCP packets"):
        read_capture(write_capture(s1_trace, tmp_path / "big.pcap"))


def test_addresses_are_shared_between_packets(s1_trace: Trace, tmp_path: Path) -> None:
    cap = read_capture(write_capture(s1_trace, tmp_path / "a.pcap"))
    assert len({id(p.src) for p in cap.packets}) == 2
