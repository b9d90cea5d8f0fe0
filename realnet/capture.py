"""Kernel-timestamped TCP packet capture on one interface (AF_PACKET).

Owns: an AF_PACKET/SOCK_RAW/ETH_P_ALL capture with SO_TIMESTAMPNS kernel receive
timestamps, read by a background thread, parsed (IPv4 + TCP, with dpkt) into
`CapturedPacket` records; drop accounting via PACKET_STATISTICS; conversion of
the kernel's CLOCK_REALTIME timestamps into `time.perf_counter_ns()` space.

Usage::

    cap = Capture(ifname="lo", filter_ports={port})            # or netns="nsim-..-c"
    cap.start(); ...; packets = cap.stop()
    t_perf = cap.to_perf_ns(packets[0].t_ns)

Semantics worth knowing:

* Timestamps are taken by the kernel when the frame passes the tap: for an
  outgoing frame that is the moment the stack hands it to the device (its *send*
  time); for an incoming TUN frame it is when the relay injected it.
* Loopback shows every frame twice (PACKET_OUTGOING on transmit, PACKET_HOST on
  receive). On ARPHRD_LOOPBACK we keep only the OUTGOING copy, so each segment
  appears exactly once whatever `outgoing_only` says.
* Loopback has a 64 KiB MTU (MSS 65483) and does TSO/GSO: with TCP_MAXSEG set,
  one captured "segment" may carry many MSS of payload (``payload_len`` > MSS),
  because lo passes GSO super-segments through unsplit. Compare byte counts /
  sequence coverage, not packet counts, on lo. (BIG TCP -- IP total length 0 --
  is not enabled on lo by default and is not handled.) TUN devices created by
  `realnet.netns` have no offloads: there every captured packet is a real wire
  segment <= MTU.
* TUN devices carry raw IP (ARPHRD_NONE, no link header); Ethernet-like links
  (ARPHRD_ETHER, ARPHRD_LOOPBACK) carry a 14-byte header. Both are handled.
* Only ``snaplen`` bytes are copied per frame (headers only); ``payload_len`` is
  computed from the IP total length, so it is exact for truncated frames.

Clock conversion: the kernel stamps with CLOCK_REALTIME; perf_counter_ns is
CLOCK_MONOTONIC on Linux. `clock_offset_ns()` samples both back-to-back (best
of several, narrowest bracket wins) and returns ``realtime - monotonic``; then
``perf_ns = t_ns - offset``. `Capture` samples it at start(); an NTP step during
a capture would shift everything after it -- runs are seconds long, so ignore.

Must not import: textual, rich, simpy or nagle_sim.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import dpkt

from realnet.netns import in_namespace

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_TIMESTAMPNS = 35  # == SCM_TIMESTAMPNS; not exported by the socket module
SO_RCVBUFFORCE = 33  # root may exceed net.core.rmem_max
SO_ATTACH_FILTER = 26
PACKET_HOST = 0
PACKET_OUTGOING = 4
ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772
ETH_HLEN = 14
_TIMESPEC = struct.Struct("@qq")
_TPACKET_STATS = struct.Struct("@II")

# TCP flag letters in the order the rest of nagle-sim prints them ("SPA", "FA").
_FLAG_LETTERS = (
    (dpkt.tcp.TH_SYN, "S"),
    (dpkt.tcp.TH_FIN, "F"),
    (dpkt.tcp.TH_RST, "R"),
    (dpkt.tcp.TH_PUSH, "P"),
    (dpkt.tcp.TH_ACK, "A"),
)


@dataclass(frozen=True, slots=True)
class CapturedPacket:
    t_ns: int  # kernel timestamp, CLOCK_REALTIME ns (see Capture.to_perf_ns)
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: str  # subset of "SFRPA", in that order
    payload_len: int
    window: int  # raw header value, NOT scaled by the window-scale option
    outgoing: bool = True  # False: received on this interface (PACKET_HOST etc.)


@dataclass(frozen=True, slots=True)
class CaptureStats:
    frames_read: int  # frames the thread read from the socket (after the BPF filter)
    kept: int  # TCP/IPv4 packets matching filter_ports
    kernel_packets: int  # PACKET_STATISTICS tp_packets (includes drops)
    kernel_drops: int  # PACKET_STATISTICS tp_drops: socket buffer overflowed


@dataclass(frozen=True, slots=True)
class _Raw:
    data: bytes
    t_ns: int
    pkttype: int
    hatype: int


def clock_offset_ns(samples: int = 16) -> int:
    """``CLOCK_REALTIME - perf_counter`` in ns; ``perf_ns = realtime_ns - offset``."""
    best: tuple[int, int] | None = None
    for _ in range(samples):
        a = time.perf_counter_ns()
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) // 2)
    assert best is not None
    return best[1]


def flags_str(tcp_flags: int) -> str:
    return "".join(letter for bit, letter in _FLAG_LETTERS if tcp_flags & bit)


def _attach_pkttype_filter(sock: socket.socket, pkttype: int, snaplen: int) -> None:
    """Classic BPF: accept (first `snaplen` bytes of) frames whose pkttype matches.

    Done in the kernel so loopback's duplicate PACKET_HOST copies never cost
    socket-buffer space or a wake-up.
    """
    skf_ad_pkttype = (-0x1000 + 4) & 0xFFFFFFFF  # SKF_AD_OFF + SKF_AD_PKTTYPE
    prog = [
        (0x20, 0, 0, skf_ad_pkttype),  # ld  [pkttype]
        (0x15, 0, 1, pkttype),  # jeq #pkttype, accept, drop
        (0x06, 0, 0, snaplen),  # ret #snaplen
        (0x06, 0, 0, 0),  # ret #0
    ]
    insns = b"".join(struct.pack("HBBI", *i) for i in prog)
    buf = ctypes.create_string_buffer(insns)
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def parse_frame(raw: _Raw) -> CapturedPacket | None:
    """IPv4/TCP frame -> CapturedPacket; None for anything else."""
    data = raw.data
    if raw.hatype in (ARPHRD_ETHER, ARPHRD_LOOPBACK):
        if len(data) < ETH_HLEN or struct.unpack_from("!H", data, 12)[0] != ETH_P_IP:
            return None
        data = data[ETH_HLEN:]
    elif not data or data[0] >> 4 != 4:  # raw-IP links (TUN: ARPHRD_NONE)
        return None
    try:
        ip = dpkt.ip.IP(data)
    except (dpkt.UnpackError, struct.error):
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None  # not TCP, or a TCP header cut by a too-small snaplen
    return CapturedPacket(
        t_ns=raw.t_ns,
        src=socket.inet_ntoa(ip.src),
        sport=tcp.sport,
        dst=socket.inet_ntoa(ip.dst),
        dport=tcp.dport,
        seq=tcp.seq,
        ack=tcp.ack,
        flags=flags_str(tcp.flags),
        payload_len=ip.len - ip.hl * 4 - tcp.off * 4,
        window=tcp.win,
        outgoing=raw.pkttype == PACKET_OUTGOING,
    )


class Capture:
    """Capture TCP/IPv4 on one interface, optionally inside a network namespace.

    `filter_ports`: keep packets whose source or destination port is in the set
    (None: all TCP). `outgoing_only`: keep only frames this host transmitted on
    the interface (always the case on loopback, see module docstring).
    """

    def __init__(
        self,
        ifname: str = "lo",
        netns: str | None = None,
        filter_ports: Iterable[int] | None = None,
        outgoing_only: bool = True,
        *,
        snaplen: int = 256,
        rcvbuf_bytes: int = 256 << 20,
    ) -> None:
        self.ifname = ifname
        self.netns = netns
        self.filter_ports = frozenset(filter_ports) if filter_ports is not None else None
        self.outgoing_only = outgoing_only
        self.snaplen = snaplen
        self.rcvbuf_bytes = rcvbuf_bytes
        self.clock_offset_ns = 0
        self.hatype = -1
        self._sock: socket.socket | None = None
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        self._raw: list[_Raw] = []
        self._error: BaseException | None = None
        self._kernel_packets = self._kernel_drops = 0
        self._packets: list[CapturedPacket] | None = None
        self.stats: CaptureStats | None = None

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> Self:
        """Open and bind the socket; capturing is live when this returns."""
        if self._sock is not None or self._packets is not None:
            raise RuntimeError("Capture can only be started once")
        self._sock = self._open()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
        self.clock_offset_ns = clock_offset_ns()
        self._thread = threading.Thread(
            target=self._reader, name=f"capture-{self.ifname}", daemon=True
        )
        self._thread.start()
        return self

    def _open(self) -> socket.socket:
        def make() -> socket.socket:
            # Protocol 0: receive nothing until bind(), so no frame from another
            # interface can slip in before we bind to ours.
            return socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)

        if self.netns is None:
            sock = make()
        else:
            with in_namespace(self.netns):
                sock = make()
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, self.rcvbuf_bytes)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            # bind() resolves ifname in the socket's own namespace.
            sock.bind((self.ifname, ETH_P_ALL))
            self.hatype = sock.getsockname()[3]
            if self.outgoing_only or self.hatype == ARPHRD_LOOPBACK:
                _attach_pkttype_filter(sock, PACKET_OUTGOING, self.snaplen)
            self._read_kernel_stats(sock)  # reset counters: count from here on
            self._kernel_packets = self._kernel_drops = 0
        except BaseException:
            sock.close()
            raise
        return sock

    def stop(self) -> list[CapturedPacket]:
        """Stop, drain what the kernel already queued, and return parsed packets.

        Frames still in flight in a qdisc when stop() is called are not seen;
        stop after the traffic of interest has finished (e.g. after close()).
        """
        if self._packets is not None:
            return self._packets
        if self._sock is None or self._thread is None:
            raise RuntimeError("Capture was not started")
        os.write(self._wake_w, b"x")
        self._thread.join()
        self._read_kernel_stats(self._sock)
        self._sock.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._error is not None:
            raise RuntimeError(f"capture on {self.ifname} failed") from self._error
        self._packets = [p for p in map(parse_frame, self._raw) if p and self._wanted(p)]
        self.stats = CaptureStats(
            frames_read=len(self._raw),
            kept=len(self._packets),
            kernel_packets=self._kernel_packets,
            kernel_drops=self._kernel_drops,
        )
        self._raw = []
        return self._packets

    @property
    def packets(self) -> list[CapturedPacket]:
        if self._packets is None:
            raise RuntimeError("call stop() first")
        return self._packets

    def to_perf_ns(self, t_ns: int) -> int:
        """Kernel CLOCK_REALTIME timestamp -> time.perf_counter_ns() space."""
        return t_ns - self.clock_offset_ns

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sock is not None and self._packets is None:
            self.stop()

    # -- internals ------------------------------------------------------------

    def _wanted(self, p: CapturedPacket) -> bool:
        if (self.hatype == ARPHRD_LOOPBACK or self.outgoing_only) and not p.outgoing:
            return False  # the BPF filter already did this; belt and braces
        ports = self.filter_ports
        return ports is None or p.sport in ports or p.dport in ports

    def _read_kernel_stats(self, sock: socket.socket) -> None:
        # PACKET_STATISTICS resets the kernel counters on every read: accumulate.
        packets, drops = _TPACKET_STATS.unpack(
            sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
        )
        self._kernel_packets += packets
        self._kernel_drops += drops

    def _reader(self) -> None:
        """Thread body: copy frames out of the kernel as fast as possible.

        Parsing is deferred to stop() so the per-frame cost here stays minimal
        and the socket buffer does not overflow under bursts.
        """
        assert self._sock is not None
        sock, wake = self._sock, self._wake_r
        sock.setblocking(False)
        cmsg_space = socket.CMSG_SPACE(_TIMESPEC.size)
        append = self._raw.append
        try:
            while True:
                ready, _, _ = select.select([sock.fileno(), wake], [], [])
                stopping = wake in ready
                while True:  # drain everything queued
                    try:
                        data, anc, _flags, addr = sock.recvmsg(self.snaplen, cmsg_space)
                    except BlockingIOError:
                        break
                    append(_Raw(data, _timestamp(anc), addr[2], addr[3]))
                if stopping:
                    return
        except BaseException as e:  # surfaced by stop()
            self._error = e


def _timestamp(ancdata: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack(data[: _TIMESPEC.size])
            return int(sec) * 1_000_000_000 + int(nsec)
    # Should not happen with SO_TIMESTAMPNS set; fall back to "now" rather than lose it.
    return time.clock_gettime_ns(time.CLOCK_REALTIME)
