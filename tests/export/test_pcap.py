"""pcap export: dpkt reads back what we wrote; tshark (when installed) agrees."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import dpkt
import pytest

from nagle_sim.export import export_cli
from nagle_sim.export.pcap import ENDPOINTS, EPOCH, payload, to_pcap
from nagle_sim.model.events import Side
from nagle_sim.trace import Source, Trace


def _frames(data: bytes) -> list[tuple[float, dpkt.ethernet.Ethernet]]:
    import io
    return [(ts, dpkt.ethernet.Ethernet(buf)) for ts, buf in dpkt.pcap.Reader(io.BytesIO(data))]


def test_dpkt_reads_back_every_segment(s1: Trace) -> None:
    frames = _frames(to_pcap(s1))
    assert len(frames) == len(s1.segments)
    shift = 0       # windows above 64 KB go out scaled (RFC 7323), as the SYNs announce
    while max(s.window for s in s1.segments) >> shift > 0xFFFF:
        shift += 1
    for (ts, eth), seg in zip(frames, s1.segments, strict=True):
        src, dst = ENDPOINTS[seg.src], ENDPOINTS[seg.dst]
        ip, tcp = eth.data, eth.data.data
        assert round((ts - EPOCH) * 1_000_000) == seg.t
        assert socket.inet_ntoa(ip.src) == src.ip and socket.inet_ntoa(ip.dst) == dst.ip
        assert (tcp.sport, tcp.dport) == (src.port, dst.port)
        assert tcp.seq == src.isn + seg.seq
        assert tcp.ack == (dst.isn + seg.ack if "A" in seg.flags else 0)
        assert tcp.data == payload(seg.length) and len(tcp.data) == seg.length
        assert tcp.win == (seg.window if "S" in seg.flags else seg.window >> shift)
        assert bool(tcp.flags & dpkt.tcp.TH_SYN) == ("S" in seg.flags)
        assert bool(tcp.flags & dpkt.tcp.TH_PUSH) == ("P" in seg.flags)
        assert bool(tcp.flags & dpkt.tcp.TH_ACK) == ("A" in seg.flags)
        assert ip.len == 20 + tcp.off * 4 + seg.length


def test_pcap_is_reproducible(s1: Trace) -> None:
    assert to_pcap(s1) == to_pcap(s1)


def test_large_windows_are_scaled(s1: Trace) -> None:
    from dataclasses import replace
    big = Trace(source=Source.REALNET, title="big",
                segments=[replace(s, window=1_000_000) for s in s1.segments[:4]])
    frames = _frames(to_pcap(big))
    syn = frames[0][1].data.data
    assert bytes([dpkt.tcp.TCP_OPT_WSCALE, 3, 4]) in syn.opts    # 1e6 >> 4 fits 16 bits
    assert frames[3][1].data.data.win == 1_000_000 >> 4


def _tshark() -> str:
    path = shutil.which("tshark")
    if path is None:
        pytest.skip("tshark is not installed (CI installs it: apt-get install -y tshark)")
    return path


def test_tshark_reads_segments_lengths_seq_and_times(s1: Trace, tmp_path: Path) -> None:
    tshark = _tshark()
    [out] = export_cli(s1, pcap=tmp_path / "s1.pcap")
    fields = ["frame.time_relative", "ip.src", "tcp.srcport", "tcp.len", "tcp.flags",
              "tcp.seq", "tcp.ack", "tcp.window_size", "tcp.checksum.status"]
    cmd = [tshark, "-r", str(out), "-o", "tcp.relative_sequence_numbers:TRUE",
           "-o", "tcp.check_checksum:TRUE", "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    lines = [ln.split("\t") for ln in result.stdout.splitlines() if ln.strip()]
    assert len(lines) == len(s1.segments)
    bits = {"S": 0x02, "F": 0x01, "R": 0x04, "P": 0x08, "A": 0x10}
    for row, seg in zip(lines, s1.segments, strict=True):
        t, ip, port, length, flags, seq, ack, win, csum = row
        assert round(float(t) * 1_000_000) == seg.t
        assert ip == ENDPOINTS[seg.src].ip and int(port) == ENDPOINTS[seg.src].port
        assert int(length) == seg.length
        assert int(flags, 16) == sum(bits[f] for f in seg.flags)
        assert int(seq) == seg.seq            # tshark's relative seq == the trace's
        if "A" in seg.flags:
            assert int(ack) == seg.ack
        assert int(win) == seg.window         # tshark scales it by the SYNs' wscale
        assert csum == "1"                    # 1 = Good (0 = Bad, 2 = unverified)
    assert s1.segments[0].src is Side.CLIENT
