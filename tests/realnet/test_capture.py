"""Tests for realnet.capture: completeness, de-duplication, timestamps, flags.

Parsing tests need only Linux; capture tests need root (see conftest).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import dpkt
import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux (netns, TUN, AF_PACKET)", allow_module_level=True)

from realnet import sockopts
from realnet.capture import (
    ARPHRD_LOOPBACK,
    PACKET_HOST,
    PACKET_OUTGOING,
    Capture,
    CapturedPacket,
    _Raw,
    clock_offset_ns,
    parse_frame,
)
from realnet.netns import EmulatedLink

ARPHRD_NONE = 0xFFFE
N_WRITES = 200
WRITE_SIZE = 100
PORT = 5002


# --------------------------------------------------------------------------- parsing


def _tcp_ipv4(flags: int, payload: bytes = b"") -> bytes:
    tcp = dpkt.tcp.TCP(sport=1234, dport=80, seq=1000, ack=2000, flags=flags, win=512)
    tcp.data = payload
    ip = dpkt.ip.IP(src=socket.inet_aton("10.0.0.1"), dst=socket.inet_aton("10.0.0.2"), p=6)
    ip.data = tcp
    ip.len = len(bytes(ip))
    return bytes(ip)


def test_parse_raw_ip_frame_from_tun() -> None:
    frame = _tcp_ipv4(dpkt.tcp.TH_PUSH | dpkt.tcp.TH_ACK, b"hello")
    p = parse_frame(_Raw(frame, 42, PACKET_OUTGOING, ARPHRD_NONE))
    assert p == CapturedPacket(42, "10.0.0.1", 1234, "10.0.0.2", 80, 1000, 2000, "PA", 5, 512)


def test_parse_loopback_frame_truncated_to_headers() -> None:
    ip = _tcp_ipv4(dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK, b"x" * 3000)
    frame = b"\0" * 12 + struct.pack("!H", 0x0800) + ip
    p = parse_frame(_Raw(frame[:96], 7, PACKET_HOST, ARPHRD_LOOPBACK))
    assert p is not None
    # Length comes from the IP header, not from the (truncated) capture.
    assert (p.flags, p.payload_len, p.outgoing) == ("SFA", 3000, False)


def test_parse_ignores_non_tcp() -> None:
    udp = dpkt.ip.IP(src=b"\1\2\3\4", dst=b"\1\2\3\5", p=17, data=dpkt.udp.UDP())
    assert parse_frame(_Raw(bytes(udp), 0, PACKET_OUTGOING, ARPHRD_NONE)) is None
    assert parse_frame(_Raw(b"\x60" + b"\0" * 50, 0, PACKET_OUTGOING, ARPHRD_NONE)) is None


def test_clock_offset_maps_realtime_to_perf_counter() -> None:
    offset = clock_offset_ns()
    now_perf = time.clock_gettime_ns(time.CLOCK_REALTIME) - offset
    assert abs(now_perf - time.perf_counter_ns()) < 1_000_000


# --------------------------------------------------------------------------- traffic


@dataclass
class Transfer:
    client_port: int
    server_port: int
    sent: int
    t_start_perf: int
    t_end_perf: int
    retransmitted: int = 0
    """tcpi_total_retrans of the sending socket: segments TCP itself sent twice."""


async def _paced_transfer(
    listener: socket.socket, client: socket.socket, server_addr: str
) -> Transfer:
    """N_WRITES small NODELAY writes with short sleeps, then FIN; one asyncio loop."""
    loop = asyncio.get_running_loop()
    listener.listen()
    for s in (listener, client):
        s.setblocking(False)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.perf_counter_ns()
    accept = asyncio.ensure_future(loop.sock_accept(listener))
    await loop.sock_connect(client, (server_addr, listener.getsockname()[1]))
    conn, _ = await accept

    async def reader() -> int:
        got = 0
        while chunk := await loop.sock_recv(conn, 65536):
            got += len(chunk)
        return got

    client_port = client.getsockname()[1]
    with conn:
        reading = asyncio.ensure_future(reader())
        for _ in range(N_WRITES):
            await loop.sock_sendall(client, b"d" * WRITE_SIZE)
            await asyncio.sleep(0.0005)
        client.shutdown(socket.SHUT_WR)
        received = await reading
    retransmitted = sockopts.tcp_info(client).get("total_retrans", 0)
    client.close()
    await asyncio.sleep(0.05)  # let the final FIN/ACK exchange finish
    assert received == N_WRITES * WRITE_SIZE
    return Transfer(
        client_port=client_port,
        server_port=listener.getsockname()[1],
        sent=received,
        t_start_perf=t0,
        t_end_perf=time.perf_counter_ns(),
        retransmitted=retransmitted,
    )


def _from(packets: Sequence[CapturedPacket], sport: int) -> list[CapturedPacket]:
    return [p for p in packets if p.sport == sport]


def _assert_exact_stream(packets: Sequence[CapturedPacket], nbytes: int,
                         retransmitted: int = 0) -> None:
    """One sender's packets cover its byte stream exactly once: SYN, then data
    with no gaps and no duplicates, then FIN right after the last byte. A segment seen
    twice is allowed only as often as TCP itself retransmitted (a VM scheduling stall can
    make it do so); a capture duplicate beyond that fails."""
    syns = [p for p in packets if "S" in p.flags]
    assert len(syns) == 1, syns
    isn = syns[0].seq
    assert packets[0] is syns[0], "first packet of a sender must be its SYN"

    def rel(p: CapturedPacket) -> int:
        return (p.seq - isn) % 2**32

    expected = 1
    repeats = 0
    for p in sorted((p for p in packets if p.payload_len), key=rel):
        if rel(p) < expected and rel(p) + p.payload_len <= expected:
            repeats += 1                       # bytes already seen: sent again
            continue
        assert rel(p) == expected, f"gap at relative seq {rel(p)}: {p}"
        expected += p.payload_len
    assert repeats <= retransmitted, f"{repeats} repeated segments, TCP retransmitted " \
        f"{retransmitted}: the capture duplicated packets"
    assert expected - 1 == nbytes
    fins = [p for p in packets if "F" in p.flags]
    assert len(fins) == 1 and rel(fins[0]) == expected, fins
    times = [p.t_ns for p in packets]
    assert times == sorted(times), "kernel timestamps must not go backwards"


@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
async def test_loopback_capture_sees_each_segment_once() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = socket.socket()
    with Capture("lo", filter_ports={port}) as cap:
        result = await _paced_transfer(listener, client, "127.0.0.1")
    listener.close()
    packets = cap.packets
    assert cap.stats is not None and cap.stats.kernel_drops == 0
    ours = _from(packets, result.client_port)
    _assert_exact_stream(ours, result.sent, result.retransmitted)
    # Server side: only a SYN-ACK, ACKs and FIN; lo's duplicate HOST copies are gone.
    server = _from(packets, port)
    assert server[0].flags == "SA"
    assert all(p.outgoing for p in packets)
    assert len({(p.sport, p.seq, p.ack, p.flags, p.payload_len, p.t_ns) for p in packets}) == len(
        packets
    )
    # Timestamps convert into the perf_counter window of the transfer.
    perf = [cap.to_perf_ns(p.t_ns) for p in packets]
    assert result.t_start_perf - 1_000_000 <= min(perf)
    assert max(perf) <= result.t_end_perf + 1_000_000


@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
async def test_emulated_link_capture_per_sender() -> None:
    """Client's packets on the client TUN, server's on the server TUN: each at its
    send time, each segment exactly once, no GSO super-segments."""
    # Autocorking would merge a write issued while the previous skb still sits in
    # the TUN ring (until the relay reads it); turn it off so writes == segments.
    no_autocork = {"net.ipv4.tcp_autocorking": "0"}
    async with EmulatedLink(2_000, 1_000, sysctls=no_autocork) as link:
        listener = link.socket_in("server")
        listener.bind((link.server_addr, PORT))
        client = link.socket_in("client")
        cap_c = Capture(link.ifname, netns=link.client_ns, filter_ports={PORT}).start()
        cap_s = Capture(link.ifname, netns=link.server_ns, filter_ports={PORT}).start()
        both = Capture(link.ifname, netns=link.client_ns, outgoing_only=False).start()
        result = await _paced_transfer(listener, client, link.server_addr)
        listener.close()
        sent_by_client, sent_by_server, everything = cap_c.stop(), cap_s.stop(), both.stop()

    for cap in (cap_c, cap_s, both):
        assert cap.stats is not None and cap.stats.kernel_drops == 0
    assert all(p.sport != PORT and p.src == link.client_addr for p in sent_by_client)
    assert all(p.sport == PORT and p.src == link.server_addr for p in sent_by_server)
    _assert_exact_stream(sent_by_client, result.sent, result.retransmitted)
    assert sent_by_server[0].flags == "SA"
    assert [p.flags for p in sent_by_server].count("FA") == 1
    # NODELAY + idle link + paced writes: every write is its own wire segment.
    data = [p for p in sent_by_client if p.payload_len]
    assert len(data) == N_WRITES + result.retransmitted
    assert {p.payload_len for p in data} == {WRITE_SIZE}
    # outgoing_only=False on the client TUN: client's packets out, server's in.
    out = [p for p in everything if p.outgoing]
    inc = [p for p in everything if not p.outgoing]
    assert len(out) == len(sent_by_client) and len(inc) == len(sent_by_server)
    assert all(p.dst == link.client_addr for p in inc)
    # The server's SYN-ACK reaches the client TUN one to_client delay after it left.
    synack_sent = next(p for p in sent_by_server if p.flags == "SA").t_ns
    synack_recv = next(p for p in inc if p.flags == "SA").t_ns
    assert 1_000_000 <= synack_recv - synack_sent <= 2_000_000


def test_capture_requires_start() -> None:
    with pytest.raises(RuntimeError):
        Capture("lo").stop()
