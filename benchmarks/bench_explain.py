"""Benchmark: `nagle-sim explain` on a busy server's capture (goal: 1,000,000 packets over
2,000 connections in at most 15 s and 400 MB).

The capture is synthetic, written with struct (headers only, as ``tcpdump -s 54`` would),
seen at a server on a LAN (0.2 ms round trip) during about a minute. Connections of five
kinds are interleaved in time, each 500 packets long:

- ``wwr`` (100): write-write-read clients, every request after the first held by Nagle
  until the server's delayed ACK (40 ms);
- ``cork`` (40): small corked requests released by the probe timer (204 ms);
- ``fast`` (1,200): NODELAY request/response, with an idle client now and then (50-150 ms
  or 0.4-2 s of think time; its delayed ACK after 40 ms);
- ``bulk`` (460): 20 KB replies in full segments, ACKed every second one;
- ``idle`` (200): a request every 2-5 s.

The benchmark writes the capture, then runs ``python -m nagle_sim explain FILE --json``
in a child process and reports that process's wall time, CPU time and peak RSS
(``wait4``), the connections analysed in full and what explain named.

    python benchmarks/bench_explain.py [--packets N] [--connections N] [--keep FILE]
    python benchmarks/bench_explain.py --single 100000    # one long write-write-read run
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = bytes([10, 1, 0, 1])
MSS = 1448
HALF_RTT = 100            # µs between the server and its clients (LAN)

Row = tuple[int, int, int, int, int, int, int]
"""(µs, 0 client→server / 1 server→client, flags, seq, ack, payload, window)."""
FIN, SYN, PSH, ACK = 0x01, 0x02, 0x08, 0x10


def _conversation(kind: str, rng: random.Random, budget: int) -> Iterator[Row]:
    """The rows of one connection as seen at the server, times from its first SYN."""
    c_seq, s_seq = 1, 1
    t = 0
    n = 0

    def row(dt: int, d: int, flags: int, plen: int = 0) -> Row:
        nonlocal n
        n += 1
        seq = c_seq if d == 0 else s_seq
        ack = s_seq if d == 0 else c_seq
        return (t + dt, d, flags, seq, ack, plen, 502)

    yield (0, 0, SYN, 0, 0, 0, 64240)
    yield (HALF_RTT * 2 // 2, 1, SYN | ACK, 0, 1, 0, 65160)
    yield (HALF_RTT * 2, 0, ACK, 1, 1, 0, 502)
    n = 3
    t = HALF_RTT * 2 + 500
    while n < budget - 4:
        if kind == "wwr":
            yield row(0, 0, PSH | ACK, 6)
            c_seq += 6
            yield row(40_000, 1, ACK)                      # the delayed ACK of 6 B
            yield row(40_000 + 2 * HALF_RTT, 0, PSH | ACK, 7)
            c_seq += 7
            yield row(40_000 + 2 * HALF_RTT + 50, 1, PSH | ACK, 13)
            s_seq += 13
            t += 40_000 + 4 * HALF_RTT + 50
        elif kind == "cork":
            yield row(0, 0, PSH | ACK, 30)                 # corked: out at the probe timer
            c_seq += 30
            yield row(50, 1, PSH | ACK, 20)
            s_seq += 20
            t += 204_000 + rng.randrange(0, 4_000)
        elif kind == "fast":
            yield row(0, 0, PSH | ACK, 20)
            c_seq += 20
            yield row(500, 1, PSH | ACK, 100)
            s_seq += 100
            if rng.random() < 0.1:
                think = rng.choice((rng.randrange(50_000, 150_000),
                                    rng.randrange(400_000, 2_000_000)))
                if think > 40_000:                         # the client's delayed ACK
                    yield row(500 + HALF_RTT * 2 + 40_000, 0, ACK)
                t += 500 + think
            else:
                t += 500 + 2 * HALF_RTT + 1_000
        elif kind == "bulk":
            yield row(0, 0, PSH | ACK, 100)
            c_seq += 100
            t0 = t
            for k in range(14):
                t = t0 + 300 + k * 12
                size = MSS if k < 13 else 20_000 - 13 * MSS
                yield row(0, 1, (PSH | ACK) if k == 13 else ACK, size)
                s_seq += size
                if k % 2 == 1 or k == 13:
                    yield row(2 * HALF_RTT, 0, ACK)
            t = t0 + 300 + 14 * 12 + 5_000
        else:   # idle
            yield row(0, 0, PSH | ACK, 50)
            c_seq += 50
            yield row(1_000, 1, PSH | ACK, 400)
            s_seq += 400
            yield row(1_000 + 2 * HALF_RTT + 40_000, 0, ACK)
            t += rng.randrange(2_000_000, 5_000_000)
    yield row(0, 0, FIN | ACK)
    c_seq += 1
    yield row(2 * HALF_RTT, 1, FIN | ACK)
    s_seq += 1
    yield row(4 * HALF_RTT, 0, ACK)


def write_busy_capture(path: Path, packets: int, connections: int, seed: int = 1) -> int:
    """Write the busy server's capture; returns the number of frames."""
    rng = random.Random(seed)
    per = packets // connections
    kinds = (["wwr"] * 5 + ["cork"] * 2 + ["fast"] * 60 + ["bulk"] * 23 + ["idle"] * 10)
    streams = []
    epoch = 1_767_225_600_000_000
    for i in range(connections):
        kind = kinds[i % len(kinds)]
        start = epoch + rng.randrange(0, 50_000_000)
        client = bytes([10, 2, (i >> 8) & 0xFF, i & 0xFF])
        cport = 32768 + i
        isn = (rng.getrandbits(32), rng.getrandbits(32))
        rows = ((start + r[0], i, r) for r in _conversation(kind, rng, per))
        streams.append(_stamped(rows, client, cport, isn))
    eth = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
    ip = struct.Struct("!BBHHHBBH4s4s")
    tcp = struct.Struct("!HHIIBBHHH")
    rec = struct.Struct("<IIII")
    frames = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 1))
        out = []
        for t, _i, (_, d, flags, seq, ack, plen, win), client, cport, isn in heapq.merge(
                *streams):
            src, dst = (client, SERVER) if d == 0 else (SERVER, client)
            sport, dport = (cport, 8080) if d == 0 else (8080, cport)
            opts = b""
            if flags & SYN:
                opts = struct.pack("!BBHBBBB", 2, 4, MSS, 1, 3, 3, 7) + b"\x04\x02\x01\x01"
            hdr = tcp.pack(sport, dport, (isn[d] + seq) & 0xFFFFFFFF,
                           (isn[1 - d] + ack) & 0xFFFFFFFF if flags & ACK else 0,
                           (20 + len(opts)) // 4 << 4, flags, win, 0, 0) + opts
            total = 20 + len(hdr) + plen
            frame = eth + ip.pack(0x45, 0, total, frames & 0xFFFF, 0x4000, 64, 6, 0, src,
                                  dst) + hdr
            frames += 1
            out.append(rec.pack(t // 1_000_000, t % 1_000_000, len(frame),
                                len(frame) + plen) + frame)
            if len(out) >= 65536:
                f.write(b"".join(out))
                out.clear()
        f.write(b"".join(out))
    return frames


def _stamped(rows: Iterator[tuple[int, int, Row]], client: bytes, cport: int,
             isn: tuple[int, int]) -> Iterator[tuple[int, int, Row, bytes, int,
                                                     tuple[int, int]]]:
    for t, i, r in rows:
        yield t, i, r, client, cport, isn


def run_explain(path: Path, extra: list[str]) -> tuple[float, float, int, dict]:
    """(wall s, CPU s, peak RSS bytes, the JSON document) of one explain process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "explain", str(path),
                             "--json", *extra], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"explain failed with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, json.loads(out)


def busy(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "busy.pcap"
        t0 = time.perf_counter()
        frames = write_busy_capture(path, args.packets, args.connections)
        made = time.perf_counter() - t0
        print(f"capture: {frames:,} packets over {args.connections:,} connections, "
              f"{path.stat().st_size / 1e6:.1f} MB (written in {made:.1f} s)")
        wall, cpu, rss, doc = run_explain(path, [])
    conns = doc["connections"]
    analysed = [c for c in conns if c["longest_stall_ms"] is not None]
    stalled = [c for c in analysed if c["longest_stall_ms"]]
    causes: dict[str, int] = {}
    for c in stalled:
        causes[c["longest_stall_cause"]] = causes.get(c["longest_stall_cause"], 0) + 1
    print(f"explain: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss / 1e6:.0f} MB "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"  {len(analysed):,} connections with a stall analysed in full or cleared "
          f"by their gaps, {len(stalled):,} with a stall not an idle app's: "
          + ", ".join(f"{n} {c}" for c, n in sorted(causes.items(), key=lambda x: -x[1])))
    print(f"  explained connection {doc['connection']['number']}: "
          f"{len(doc['stalls'])} stalls, "
          + ", ".join(sorted({s['cause'] for s in doc['stalls']})))
    ok = wall <= 15 and rss <= 400e6
    print(f"goal ≤ 15 s and ≤ 400 MB: {'met' if ok else 'NOT met'}")


def single(target: int) -> None:
    """The old benchmark: one write-write-read connection of ``target`` segments."""
    from nagle_sim.scenario import loads
    from nagle_sim.sim.driver import run_sim
    from tests.explain.captures import write_capture
    text = """title = "bench"
[client]
script = "repeat {n} {{ write 6; write 7; read 13 }}"
[server]
script = "repeat {n} {{ read 13; write 13 }}"
"""
    probe = run_sim(loads(text.format(n=100), "bench"))
    rounds = int(target / ((len(probe.segments) - 10) / 100)) + 1
    trace = run_sim(loads(text.format(n=rounds), "bench"), time_limit=10**13,
                    segment_limit=10 * target)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_capture(trace, Path(tmp) / "bench.pcap", at="client")
        wall, cpu, rss, doc = run_explain(path, [])
    print(f"capture: {len(trace.segments):,} segments of one connection")
    print(f"explain: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss / 1e6:.0f} MB, "
          f"{len(doc['stalls']):,} stalls "
          f"({sum(1 for s in doc['stalls'] if s['reproduced']):,} reproduced by the model)")
    print(f"goal ≤ 10 s: {'met' if wall <= 10 else 'NOT met'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--packets", type=int, default=1_000_000)
    p.add_argument("--connections", type=int, default=2_000)
    p.add_argument("--keep", metavar="FILE", help="write the capture here and keep it")
    p.add_argument("--single", type=int, metavar="SEGMENTS",
                   help="explain one write-write-read connection of SEGMENTS instead")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.single:
        single(args.single)
    else:
        busy(args)


if __name__ == "__main__":
    main()
