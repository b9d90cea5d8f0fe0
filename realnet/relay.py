"""Delay relay between two TUN devices; runs as its own process.

Usage (started by `realnet.netns.EmulatedLink`, not by hand)::

    python -m realnet.relay --tag nsim-<pid>-<n> --owner-pid <pid> \
        --client-fd 5 --server-fd 6 --to-server-delay-us 20000 --to-client-delay-us 5000

Owns: moving raw IP packets between the client-namespace TUN fd and the
server-namespace TUN fd, delaying each direction by a fixed one-way delay with
per-direction FIFO order, and optionally a bandwidth (``--rate-bps``): each packet then
waits for the ones ahead of it, takes len × 8 / rate to "leave", and is dropped when the
link already holds ``--queue`` packets (a drop-tail FIFO). Scripted faults (``--fault``,
from a scenario's `[link] drop` / `hold`) lose the Nth segment of a kind (data, pure ACK,
FIN) in one direction, or hold it back by an extra delay so later ones overtake it;
segments are counted as `nagle_sim.sim.link` counts them in the model. The delay is
counted from each packet's kernel send timestamp, taken from an AF_PACKET tap on the
sending TUN (`open_tap`, opened by the owner and passed in as an fd), not from when the
relay got around to reading it; without a tap, read time is used. It prints ``READY`` on
stdout once it is polling, and a one-line JSON stats record on stdout when it exits.

Why a separate process: the caller runs asyncio plus Python-level TCP endpoints;
sharing its GIL would add millisecond-scale jitter to the emulated delay.

Must not import: anything beyond the standard library (fast start-up, no
pyroute2), and never textual, rich, simpy or nagle_sim.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import heapq
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29
# Sleep until this long before a deadline, then spin: a select() wake-up is typically
# 5-50 us late even at SCHED_FIFO with a 1 ns timer slack, so 200 us of spinning absorbs it.
SPIN_NS = 200_000
# The spin's duty cycle is bounded (a token bucket, as for the side processes): with
# packets due every < 200 us the relay would otherwise keep a CPU busy at SCHED_FIFO and
# starve every normal task on it. It may spin 10 ms in a row and 50 % in the long run;
# with the bucket empty it sleeps to each deadline (then ~5-50 us late).
SPIN_BUDGET_NS = 10_000_000
SPIN_SHARE = 0.5
# Bound on packets read per fd per loop turn, so a burst on one side cannot
# delay due writes (or the other side's arrival timestamps) for long.
READ_BATCH = 64
MAX_PACKET = 65_536
MAX_LATENESS_SAMPLES = 2_000_000
# Bytes of each packet the send-time tap keeps: enough to tell packets apart
# (IP id, TCP seq/ack, options) when matching tap entries to TUN reads.
TAP_SNAP = 96

# Deadlines live in CLOCK_REALTIME because the send-time tap's kernel timestamps
# do (SO_TIMESTAMPNS). A clock *step* during a run would shift queued packets;
# slewing (NTP's normal mode) is harmless at these time scales.
clock_ns = time.time_ns

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
SO_ATTACH_FILTER = 26
PACKET_OUTGOING = 4
_TIMESPEC = struct.Struct("@qq")


class _Stop(Exception):
    """Raised from signal handlers to break out of select()."""


Late = tuple[int, int, bytes]
"""A held-back packet: (due time ns, arrival order, packet)."""


@dataclass(slots=True)
class Direction:
    name: str
    in_fd: int
    out_fd: int
    delay_ns: int
    tap: socket.socket | None = None
    queue: deque[tuple[int, bytes]] = field(default_factory=deque)
    taps: deque[tuple[int, bytes]] = field(default_factory=deque)
    packets: int = 0
    stamped: int = 0  # send time from the kernel tap
    unstamped: int = 0  # tap entry not found: fell back to our read time
    bytes: int = 0
    write_errors: int = 0
    max_queue: int = 0
    rate_bps: int = 0  # 0: no bandwidth limit
    queue_limit: int = 1000
    link_free_ns: int = 0  # when the emulated transmitter is next idle
    link_held: deque[int] = field(default_factory=deque)  # leave times of held packets
    dropped: int = 0
    faults: list[Fault] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # segments seen per kind
    late: list[Late] = field(default_factory=list)  # heap of packets held back
    lost: int = 0  # by a scripted drop
    held: int = 0  # by a scripted hold


@dataclass(frozen=True, slots=True)
class Fault:
    """One ``--fault`` entry: segments `first`..`last` of `kind` are lost (`extra_ns`
    None) or delivered `extra_ns` later."""

    kind: str
    first: int
    last: int
    extra_ns: int | None


FAULT_KINDS = ("data", "ack", "fin")
TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10


def parse_fault(spec: str) -> tuple[str, Fault]:
    """``"to_server data 3"``, ``"to_client ack 2-4"``, ``"to_client data 2 5000us"`` →
    (direction name, Fault). Raises ValueError on anything else."""
    parts = spec.split()
    if len(parts) not in (3, 4) or parts[0] not in ("to_server", "to_client") \
            or parts[1] not in FAULT_KINDS:
        raise ValueError(f"bad --fault {spec!r}")
    first, _, last = parts[2].partition("-")
    lo, hi = int(first), int(last or first)
    if not 1 <= lo <= hi:
        raise ValueError(f"bad --fault range {spec!r}")
    extra = None
    if len(parts) == 4:
        if not parts[3].endswith("us"):
            raise ValueError(f"bad --fault delay {spec!r}")
        extra = int(parts[3][:-2]) * 1000
    return parts[0], Fault(parts[1], lo, hi, extra)


def packet_kinds(pkt: bytes) -> tuple[str, ...]:
    """The fault kinds of a raw IPv4/TCP packet (as `nagle_sim.sim.link.segment_kinds`):
    "data" with payload, "fin" with FIN, "ack" for a bare ACK; () for anything else."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4 or pkt[9] != socket.IPPROTO_TCP:
        return ()
    ihl = (pkt[0] & 0x0F) * 4
    if len(pkt) < ihl + 20:
        return ()
    total = struct.unpack_from("!H", pkt, 2)[0]
    doff = (pkt[ihl + 12] >> 4) * 4
    flags = pkt[ihl + 13]
    payload = total - ihl - doff
    kinds = []
    if payload > 0:
        kinds.append("data")
    if flags & TCP_FIN:
        kinds.append("fin")
    if payload <= 0 and flags & TCP_ACK and not flags & (TCP_SYN | TCP_FIN | TCP_RST):
        kinds.append("ack")
    return tuple(kinds)


def _fate(d: Direction, pkt: bytes) -> int | None:
    """Count the packet; None if a scripted drop loses it, else its extra delay (ns)."""
    extra = 0
    lost = False
    for kind in packet_kinds(pkt):
        n = d.counts.get(kind, 0) + 1
        d.counts[kind] = n
        for f in d.faults:
            if f.kind == kind and f.first <= n <= f.last:
                if f.extra_ns is None:
                    lost = True
                else:
                    extra = max(extra, f.extra_ns)
    return None if lost else extra


def _prctl(option: int, arg: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _install_signals(owner_pid: int) -> None:
    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    def parent_death(signum: int, frame: FrameType | None) -> None:
        # PDEATHSIG fires when the *thread* that forked us exits, not the process.
        # If the owner process is still our parent it was just a thread: keep going.
        if os.getppid() != owner_pid:
            raise _Stop("parent died")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, parent_death)
    # Ctrl-C reaches the whole foreground process group; the owner's __exit__ will
    # stop us in order, so dying first would only cut the link under live sockets.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _prctl(PR_SET_PDEATHSIG, signal.SIGUSR1)
    # The owner may have died before prctl() took effect.
    if os.getppid() != owner_pid:
        raise _Stop("parent died before start")


def open_tap(ifname: str, rcvbuf_bytes: int = 32 << 20) -> socket.socket:
    """AF_PACKET socket seeing frames *sent* on `ifname`, with kernel timestamps.

    Call it inside the namespace that owns `ifname` (the socket stays there).
    Why: our select() wake-up after a packet reaches the TUN ring takes 20-100 us
    and sometimes much more; the tap timestamp is taken when the stack hands the
    packet to the device, so delaying from it makes the emulated delay exact
    regardless of how late the relay reads.
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf_bytes)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        # Classic BPF: accept TAP_SNAP bytes of PACKET_OUTGOING frames, drop the rest
        # (the relay's own injected packets show up as incoming).
        prog = [
            (0x20, 0, 0, (-0x1000 + 4) & 0xFFFFFFFF),  # ld [SKF_AD_PKTTYPE]
            (0x15, 0, 1, PACKET_OUTGOING),  # jeq #OUTGOING
            (0x06, 0, 0, TAP_SNAP),  # ret #TAP_SNAP
            (0x06, 0, 0, 0),  # ret #0
        ]
        buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
        fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        sock.bind((ifname, ETH_P_ALL))
    except BaseException:
        sock.close()
        raise
    return sock


def _read_taps(d: Direction) -> bool:
    """Move everything queued on the tap socket into d.taps; False if none."""
    assert d.tap is not None
    got = False
    space = socket.CMSG_SPACE(_TIMESPEC.size)
    while True:
        try:
            head, anc, _flags, _addr = d.tap.recvmsg(TAP_SNAP, space)
        except BlockingIOError:
            return got
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack(data[: _TIMESPEC.size])
                d.taps.append((sec * 1_000_000_000 + nsec, head))
                got = True


def _sent_at(d: Direction, pkt: bytes, read_ns: int) -> int:
    """Kernel send timestamp of `pkt`, matched FIFO against the tap by content.

    The tap sees a packet before it enters the TUN ring, so its entry is always
    queued by the time we read the packet. Tap entries skipped over belong to
    packets the TUN ring dropped (or were sent before we started).
    """
    if d.tap is None:
        return read_ns
    head = pkt[:TAP_SNAP]
    while True:
        for i, (ts, h) in enumerate(d.taps):
            if h == head:
                for _ in range(i + 1):
                    d.taps.popleft()
                d.stamped += 1
                return ts
        if not _read_taps(d):
            d.unstamped += 1
            return read_ns


def _drain(d: Direction) -> None:
    """Read what is queued on d.in_fd, stamping each packet with its due time."""
    for _ in range(READ_BATCH):
        try:
            pkt = os.read(d.in_fd, MAX_PACKET)
        except BlockingIOError:
            return
        sent = _sent_at(d, pkt, clock_ns())
        extra = _fate(d, pkt) if d.faults else 0
        if extra is None:
            d.lost += 1
            continue
        if d.rate_bps:
            leaves = _serialize(d, sent, len(pkt))
            if leaves is None:
                continue
            sent = leaves
        if extra:
            # off the FIFO, so the packets behind it are not held too (reordering)
            d.held += 1
            heapq.heappush(d.late, (sent + d.delay_ns + extra, d.packets, pkt))
        else:
            d.queue.append((sent + d.delay_ns, pkt))
        d.packets += 1
        d.bytes += len(pkt)
        d.max_queue = max(d.max_queue, len(d.queue))


def _serialize(d: Direction, sent_ns: int, size: int) -> int | None:
    """Bandwidth and drop-tail queue: when the packet sent at `sent_ns` has finished
    leaving the emulated transmitter, or None if the link already holds `queue_limit`
    packets (it is dropped, as a full pfifo would)."""
    held = d.link_held
    while held and held[0] <= sent_ns:
        held.popleft()
    if len(held) >= d.queue_limit:
        d.dropped += 1
        return None
    start = max(sent_ns, d.link_free_ns)
    d.link_free_ns = start + -(-size * 8_000_000_000 // d.rate_bps)
    held.append(d.link_free_ns)
    return d.link_free_ns


def _flush_due(dirs: tuple[Direction, ...], lateness: array[int]) -> None:
    now = clock_ns()
    for d in dirs:
        q = d.queue
        while d.late and d.late[0][0] <= now:
            due, _n, pkt = heapq.heappop(d.late)
            _deliver(d, due, pkt, lateness)
        while q and q[0][0] <= now:
            due, pkt = q.popleft()
            _deliver(d, due, pkt, lateness)


def _deliver(d: Direction, due: int, pkt: bytes, lateness: array[int]) -> None:
    """Write a due packet to the peer TUN, recording how late it is."""
    # Scheduling error only: the write itself runs the receiver's IP/TCP input path
    # inline, which is part of the emulated wire, not lateness.
    if len(lateness) < MAX_LATENESS_SAMPLES:
        lateness.append(clock_ns() - due)
    try:
        os.write(d.out_fd, pkt)
    except OSError:
        # EIO when the peer TUN is going away, EINVAL for a malformed packet: count
        # it, a relay must not die on one bad packet.
        d.write_errors += 1


def _next_timeout(dirs: tuple[Direction, ...], spin: bool = True) -> float | None:
    heads = [d.queue[0][0] for d in dirs if d.queue] + [d.late[0][0] for d in dirs if d.late]
    if not heads:
        return None
    wait = min(heads) - clock_ns() - (SPIN_NS if spin else 0)
    return wait / 1e9 if wait > 0 else 0.0


def run(dirs: tuple[Direction, ...], lateness: array[int]) -> None:
    """Forward until a _Stop signal. Deadline-driven: sleep, then spin the last bit."""
    for d in dirs:
        os.set_blocking(d.in_fd, False)
    by_fd = {d.in_fd: d for d in dirs}
    fds = list(by_fd)
    budget, last, spinning = float(SPIN_BUDGET_NS), clock_ns(), False
    while True:
        _flush_due(dirs, lateness)
        now = clock_ns()
        budget = min(SPIN_BUDGET_NS,
                     budget + (now - last) * SPIN_SHARE - (now - last if spinning else 0))
        last = now
        timeout = _next_timeout(dirs, spin=budget > 0)
        spinning = timeout == 0.0
        ready, _, _ = select.select(fds, [], [], timeout)
        for fd in ready:
            _drain(by_fd[fd])


def _percentile(sorted_vals: list[int], q: float) -> int:
    if not sorted_vals:
        return 0
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def stats(dirs: tuple[Direction, ...], lateness: array[int], reason: str) -> dict[str, object]:
    late = sorted(lateness)
    return {
        "reason": reason,
        "directions": {
            d.name: {
                "packets": d.packets,
                "bytes": d.bytes,
                "write_errors": d.write_errors,
                "max_queue": d.max_queue,
                "dropped": d.dropped,
                "lost": d.lost,
                "held": d.held,
                "unsent": len(d.queue) + len(d.late),
                "stamped": d.stamped,
                "unstamped": d.unstamped,
            }
            for d in dirs
        },
        "lateness_ns": {
            "n": len(late),
            "p50": _percentile(late, 0.50),
            "p99": _percentile(late, 0.99),
            "max": late[-1] if late else 0,
        },
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m realnet.relay", description=__doc__)
    p.add_argument("--tag", required=True, help="link tag (marker for stale cleanup)")
    p.add_argument("--owner-pid", type=int, required=True)
    p.add_argument("--client-fd", type=int, required=True)
    p.add_argument("--server-fd", type=int, required=True)
    p.add_argument("--client-tap-fd", type=int, default=-1, help="open_tap() socket, client")
    p.add_argument("--server-tap-fd", type=int, default=-1, help="open_tap() socket, server")
    p.add_argument("--to-server-delay-us", type=int, default=0)
    p.add_argument("--to-client-delay-us", type=int, default=0)
    p.add_argument("--rate-bps", type=int, default=0, help="bandwidth per direction (0: none)")
    p.add_argument("--queue", type=int, default=1000, help="packets the link may hold")
    p.add_argument("--fault", action="append", default=[], type=parse_fault,
                   help='scripted loss or hold, e.g. "to_server data 3", '
                        '"to_client data 2 5000us" (repeatable)')
    p.add_argument(
        "--rt-priority", type=int, default=0, help="SCHED_FIFO priority (0: normal scheduling)"
    )
    return p.parse_args(argv)


def _go_realtime(priority: int) -> None:
    """SCHED_FIFO so the relay preempts the (busy) endpoints when a packet arrives
    or a deadline is due; on a 2-CPU box this is what keeps p99 wake-up latency
    down. Safe: the relay sleeps in select() except for <= SPIN_NS per packet,
    and RT throttling (sched_rt_runtime_us) still bounds it."""
    if priority <= 0:
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as e:
        print(f"realnet.relay: no SCHED_FIFO ({e}); delays will be less precise", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    client_tap, server_tap = (
        socket.socket(fileno=fd) if fd >= 0 else None
        for fd in (args.client_tap_fd, args.server_tap_fd)
    )
    for tap in (client_tap, server_tap):
        if tap is not None:
            tap.setblocking(False)
    dirs = (
        Direction(
            "to_server", args.client_fd, args.server_fd, args.to_server_delay_us * 1000, client_tap,
            rate_bps=max(0, args.rate_bps), queue_limit=max(1, args.queue),
        ),
        Direction(
            "to_client", args.server_fd, args.client_fd, args.to_client_delay_us * 1000, server_tap,
            rate_bps=max(0, args.rate_bps), queue_limit=max(1, args.queue),
        ),
    )
    for name, fault in args.fault:
        next(d for d in dirs if d.name == name).faults.append(fault)
    lateness: array[int] = array("q")
    reason = "eof"
    try:
        _install_signals(args.owner_pid)
        # Default timer slack is 50 us; we want select() to wake as asked.
        _prctl(PR_SET_TIMERSLACK, 1)
        _go_realtime(args.rt_priority)
        print("READY", flush=True)
        run(dirs, lateness)
    except _Stop as e:
        reason = str(e)
    # Block further signals so a second SIGTERM cannot truncate the stats line.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})
    with contextlib.suppress(OSError):  # incl. BrokenPipe: owner gone, nobody to tell
        print(json.dumps(stats(dirs, lateness, reason)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
