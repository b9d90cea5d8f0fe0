"""Benchmark the emulated link and the capture (prints numbers, asserts nothing).

    sudo python -m benchmarks.bench_link [--delays-ms 10,100] [--segments 10000]
    sudo python -m benchmarks.bench_link --starvation    # only (3), see below

Owns: measuring (1) the relay's added-delay error -- capture timestamps of each
packet on the sending TUN vs the receiving TUN, minus the configured one-way
delay -- and (2) capture completeness: segments the kernel says it sent
(TCP_INFO tcpi_segs_out) vs segments captured, and PACKET_STATISTICS drops; (3) what a
real run's SCHED_FIFO side processes cost the rest of the machine: the longest a
normal-priority process pinned on the same CPU waits, while realnet runs scripts that spin
(`repeat 10000 { sleep 199us }`) or keep the CPU busy (`repeat 100000 { write 1 }`).

Must not import: textual, rich, simpy; nagle_sim only in (3) (a scenario to run).
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nagle_sim.trace import Outcome  # noqa: E402
from realnet.capture import Capture, CapturedPacket  # noqa: E402
from realnet.netns import EmulatedLink  # noqa: E402

PORT = 5003
# struct tcp_info offsets (include/uapi/linux/tcp.h), stable since Linux 4.6.
TCPI_SEGS_OUT = 136
TCPI_DATA_SEGS_OUT = 156
TCPI_TOTAL_RETRANS = 100


def tcp_info_counts(sock: socket.socket) -> dict[str, int]:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    (segs_out,) = struct.unpack_from("I", raw, TCPI_SEGS_OUT)
    (data_segs_out,) = struct.unpack_from("I", raw, TCPI_DATA_SEGS_OUT)
    (retrans,) = struct.unpack_from("I", raw, TCPI_TOTAL_RETRANS)
    return {"segs_out": segs_out, "data_segs_out": data_segs_out, "total_retrans": retrans}


def pace(gap_s: float) -> None:
    """Wait ~gap_s; short gaps spin because time.sleep overshoots by ~50-100 us."""
    if gap_s >= 0.0005:
        time.sleep(gap_s)  # overshoot is irrelevant here; spinning would load the box
        return
    end = time.perf_counter() + gap_s
    while time.perf_counter() < end:
        pass


def run_transfer(
    make_listener: Callable[[], socket.socket],
    make_client: Callable[[], socket.socket],
    server_addr: str,
    writes: int,
    size: int,
    gap_s: float,
) -> dict[str, int]:
    """Client does `writes` NODELAY writes of `size` bytes `gap_s` apart, then
    FIN; returns the client's TCP_INFO counters read after the close handshake."""
    listener = make_listener()
    listener.listen()
    client = make_client()
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.connect((server_addr, listener.getsockname()[1]))
    conn, _ = listener.accept()
    received: list[int] = []

    def reader() -> None:
        n = 0
        while chunk := conn.recv(1 << 20):
            n += len(chunk)
        received.append(n)
        conn.close()

    t = threading.Thread(target=reader)
    t.start()
    payload = b"b" * size
    for _ in range(writes):
        client.sendall(payload)
        if gap_s:
            pace(gap_s)
    client.shutdown(socket.SHUT_WR)
    t.join()
    while client.recv(1):  # wait for the server's FIN: our last ACK has gone out
        pass
    info = tcp_info_counts(client)
    client.close()
    listener.close()
    time.sleep(0.1)
    info["bytes"] = received[0]
    return info


def pct(vals: Sequence[float], q: float) -> float:
    s = sorted(vals)
    return s[min(len(s) - 1, int(q * len(s)))]


def _key(p: CapturedPacket) -> tuple[object, ...]:
    return (p.sport, p.seq, p.ack, p.payload_len, p.window, p.flags)


def delay_errors_us(
    sent: Sequence[CapturedPacket], arrived: Sequence[CapturedPacket], delay_us: int
) -> list[float]:
    """(arrival - send - delay) per packet matched by header fields (unique keys only)."""
    first_sent: dict[tuple[object, ...], int] = {}
    dup: set[tuple[object, ...]] = set()
    for p in sent:
        k = _key(p)
        if k in first_sent:
            dup.add(k)
        first_sent[k] = p.t_ns
    return [
        (p.t_ns - first_sent[k]) / 1000 - delay_us
        for p in arrived
        if (k := _key(p)) in first_sent and k not in dup
    ]


def bench_delay(delay_ms: float, writes: int) -> None:
    delay_us = int(delay_ms * 1000)
    with EmulatedLink(delay_us, delay_us) as link:
        caps = {
            side: Capture(link.ifname, netns=link.ns(side), outgoing_only=False).start()
            for side in ("client", "server")
        }

        def listener() -> socket.socket:
            s = link.socket_in("server")
            s.bind((link.server_addr, PORT))
            return s

        run_transfer(listener, lambda: link.socket_in("client"), link.server_addr, writes, 64, 1e-3)
        pk = {side: cap.stop() for side, cap in caps.items()}
    c_out = [p for p in pk["client"] if p.outgoing]
    c_in = [p for p in pk["client"] if not p.outgoing]
    s_out = [p for p in pk["server"] if p.outgoing]
    s_in = [p for p in pk["server"] if not p.outgoing]
    print(f"\n== one-way delay {delay_ms} ms each direction, {writes} paced 64-byte writes ==")
    for name, errs in (
        ("client->server", delay_errors_us(c_out, s_in, delay_us)),
        ("server->client", delay_errors_us(s_out, c_in, delay_us)),
    ):
        print(
            f"  {name}: n={len(errs):5d}  added-delay error us: "
            f"min={min(errs):7.1f} p50={statistics.median(errs):7.1f} "
            f"p99={pct(errs, 0.99):7.1f} max={max(errs):7.1f}"
        )
    drops = {side: cap.stats.kernel_drops for side, cap in caps.items() if cap.stats}
    print(f"  capture drops: {drops}")
    print(f"  relay stats: {link.relay_stats}")


def bench_completeness_link(segments: int, gap_s: float, autocork: bool) -> None:
    sysctls = {"net.ipv4.tcp_autocorking": "1" if autocork else "0"}
    with EmulatedLink(1_000, 1_000, sysctls=sysctls) as link:
        cap = Capture(link.ifname, netns=link.client_ns, filter_ports={PORT}).start()

        def listener() -> socket.socket:
            s = link.socket_in("server")
            s.bind((link.server_addr, PORT))
            return s

        t0 = time.perf_counter()
        info = run_transfer(
            listener, lambda: link.socket_in("client"), link.server_addr, segments, 100, gap_s
        )
        elapsed = time.perf_counter() - t0
        pkts = cap.stop()
    data = [p for p in pkts if p.payload_len]
    seqs = {(p.seq, p.payload_len) for p in data}
    print(
        f"\n== completeness, emulated link (1 ms each way), {segments} writes of 100 B, "
        f"gap {gap_s * 1e6:.0f} us, tcp_autocorking={int(autocork)}, {elapsed:.1f} s =="
    )
    print(
        f"  kernel segs_out={info['segs_out']} captured={len(pkts)}  "
        f"data_segs_out={info['data_segs_out']} captured data={len(data)} "
        f"(distinct {len(seqs)})  retrans={info['total_retrans']}"
    )
    print(
        f"  bytes received={info['bytes']} captured payload={sum(p.payload_len for p in data)}  "
        f"stats={cap.stats}"
    )


def bench_completeness_lo(segments: int) -> None:
    listener_port: list[int] = []

    def listener() -> socket.socket:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        listener_port.append(s.getsockname()[1])
        return s

    # The port is only known once the listener exists; capture on all lo TCP
    # traffic and filter afterwards.
    cap = Capture("lo").start()
    info = run_transfer(listener, socket.socket, "127.0.0.1", segments, 100, 0.0)
    pkts = [p for p in cap.stop() if listener_port[0] in (p.dport,)]
    data = [p for p in pkts if p.payload_len]
    print(f"\n== completeness, loopback (MTU 64 KiB, TSO/GSO), {segments} unpaced 100 B writes ==")
    print(
        f"  kernel segs_out={info['segs_out']} (GSO-segment count) captured={len(pkts)} "
        f"(writes coalesce: max payload {max(p.payload_len for p in data)} B)"
    )
    print(
        f"  bytes received={info['bytes']} captured payload={sum(p.payload_len for p in data)}  "
        f"stats={cap.stats}"
    )


STARVATION_SCRIPTS = {
    "repeat 10000 { sleep 199us }":
        '[client]\nscript = "repeat 10000 { sleep 199us }"\n[server]\nscript = "sleep 1ms"\n',
    "repeat 100000 { write 1 }":
        '[client]\nscript = "repeat 100000 { write 1 }"\n'
        '[server]\nscript = "read 100000"\n',
}

PROBE = """
import os, signal, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
print("ready", flush=True)
last = time.perf_counter()
worst = 0.0
while not stop:
    now = time.perf_counter()
    worst = max(worst, now - last)
    last = now
print(worst * 1000, flush=True)
"""


def starvation(text: str | None, cpu: int = 0) -> tuple[float, float]:
    """(longest wait in ms of a normal process on ``cpu``, run seconds) while realnet runs
    the scenario ``text`` with its side processes pinned to the same CPU (None: while
    nothing runs, the machine's own noise)."""
    import os
    import subprocess

    from nagle_sim.scenario import loads
    from realnet.runner import run_real

    scenario = loads(text, "starvation.toml") if text is not None else None
    saved = os.sched_getaffinity(0)
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(cpu)],
                             stdout=subprocess.PIPE, text=True)
    assert probe.stdout is not None
    probe.stdout.readline()
    try:
        os.sched_setaffinity(0, {cpu})      # the side processes inherit it
        start = time.monotonic()
        if scenario is None:
            time.sleep(3)
        else:
            trace = run_real(scenario)
            if trace.outcome is not Outcome.OK:
                raise RuntimeError(trace.message)
        took = time.monotonic() - start
    finally:
        os.sched_setaffinity(0, saved)
        probe.send_signal(signal.SIGUSR1)
    worst = float(probe.stdout.readline())
    probe.wait()
    return worst, took


def bench_starvation() -> None:
    for name, text in {"nothing (3 s)": None, **STARVATION_SCRIPTS}.items():
        worst, took = starvation(text)
        print(f"starvation: {name}: run {took:.2f} s, a normal process on the same CPU "
              f"waited at most {worst:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--starvation", action="store_true",
                    help="only measure what the real-time side processes cost others")
    ap.add_argument("--delays-ms", default="10,100")
    ap.add_argument("--writes", type=int, default=2000, help="paced writes per delay run")
    ap.add_argument("--segments", type=int, default=10_000)
    # Long enough that NODELAY writes never queue behind cwnd: one write, one segment.
    ap.add_argument("--gap-us", type=float, default=300.0)
    args = ap.parse_args()
    if args.starvation:
        bench_starvation()
        return
    for d in args.delays_ms.split(","):
        bench_delay(float(d), args.writes)
    # Autocorking off first: then every write is its own segment (10,000 segments);
    # on (the kernel default), writes issued while the previous skb still sits in
    # the TUN ring get merged -- see the report.
    bench_completeness_link(args.segments, args.gap_us / 1e6, autocork=False)
    bench_completeness_link(args.segments, args.gap_us / 1e6, autocork=True)
    bench_completeness_lo(args.segments)


if __name__ == "__main__":
    main()
