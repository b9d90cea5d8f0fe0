"""realnet.runner on the real kernel: S1-S4 reproduce what this kernel measured
(seed-scenarios.md), deadlocks end, and nothing is left behind even after SIGKILL.

Needs root + Linux (skipped otherwise, see conftest). Small sizes: a few seconds each.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from nagle_sim.model.events import Side
from nagle_sim.scenario import load, loads
from nagle_sim.trace import Outcome, Trace
from nagle_sim.trace.summary import iterations
from realnet import cleanup
from realnet.runner import run_real

pytestmark = [pytest.mark.realnet, pytest.mark.usefixtures("requires_root_netns")]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
S3_CORK = ('client.script="repeat 20 { set cork on; repeat 15 { write 2 }; set cork off; '
           'read 2 }"')
S4_DEFAULT = 'client.script="repeat 4 { write 1; read 1; sleep 300ms }"'

# Real-kernel timing is asserted in jiffies, on what the kernel decided (which segment,
# which timer), never in sub-millisecond wall time: a loaded VM runs a timer a jiffy or
# two late and stalls a few ms now and then.
JIFFY_MS = 4                   # HZ=250 on this kernel
DELACK_MIN_MS = 40             # TCP_DELACK_MIN: the shortest delayed-ACK timer
NO_TIMER_MS = DELACK_MIN_MS - 2 * JIFFY_MS
"""A wait shorter than this cannot have been a delayed-ACK (or longer) timer's."""
DELACK_MAX_MS = 44 + 2 * JIFFY_MS
"""The delayed-ACK timer fires 10-11 jiffies after arming (40-44 ms), here up to 2 late."""


def real(name: str, *overrides: str) -> Trace:
    trace = run_real(load(DATA / name, list(overrides)))
    assert trace.outcome is Outcome.OK, trace.message
    assert trace.segments, trace.meta.get("capture")
    return trace


def latencies_ms(trace: Trace) -> list[float]:
    return [it.latency / 1000 for it in iterations(trace)]


def data(trace: Trace, side: Side) -> list[int]:
    return [s.length for s in trace.segments if s.src is side and s.length]


def released_after_ms(trace: Trace, op: str, arg: str | None, count: int) -> list[float]:
    """For the client's first ``count`` ``op`` calls (with ``arg``, if given) paired in order
    with its first ``count`` data segments: how long after the call began the segment left.
    This is the kernel's decision (sent on the call, or held for an ACK or a timer);
    unlike an iteration's latency it does not grow when the VM stalls the process."""
    calls = [o for o in trace.ops if o.side is Side.CLIENT and o.op == op
             and (arg is None or o.arg == arg)][:count]
    segs = [s for s in trace.segments if s.src is Side.CLIENT and s.length][:count]
    assert len(calls) == len(segs) == count, (len(calls), len(segs))
    return [(seg.t - call.start) / 1000 for call, seg in zip(calls, segs, strict=True)]


def _ack_waits_ms(trace: Trace) -> list[float]:
    """Per 7-byte segment of S1: how long the server's pure ACK that released it came
    after the 6-byte segment before it."""
    segs = trace.segments
    out = []
    for i, seven in enumerate(segs):
        if seven.src is not Side.CLIENT or seven.length != 7:
            continue
        six = next(s for s in reversed(segs[:i]) if s.src is Side.CLIENT and s.length)
        ack = next(s for s in reversed(segs[:i]) if s.src is Side.SERVER)
        assert ack.length == 0 and ack.ack == six.seq + six.length, (six, ack)
        out.append((ack.t - six.t) / 1000)
    return out


def test_s1_split_writes_stall_on_delayed_ack() -> None:
    """in the first request the server ACKs at once (quick-ACK mode); in every
    later one Nagle holds the 7-byte write until the server's delayed-ACK timer fires."""
    trace = real("s1_write_write_read.toml")
    assert len(latencies_ms(trace)) == 12
    assert data(trace, Side.CLIENT) == [6, 7] * 12
    waits = _ack_waits_ms(trace)
    assert waits[0] < NO_TIMER_MS, waits
    assert all(DELACK_MIN_MS - JIFFY_MS <= w <= DELACK_MAX_MS for w in waits[1:]), waits


def test_s1_nodelay_is_fast() -> None:
    """TCP_NODELAY removes the stall: every write leaves on its call."""
    trace = real("s1_write_write_read.toml", "client.nodelay=true")
    assert data(trace, Side.CLIENT) == [6, 7] * 12
    released = released_after_ms(trace, "write", None, 24)
    assert max(released) < NO_TIMER_MS, released


def test_s3_default_fifteen_small_writes_then_two_plus_twenty_eight() -> None:
    """first message leaves as 15 × 2 B (quick ACKs), later ones as 2 B + 28 B."""
    trace = real("s3_cork_vs_nodelay.toml")
    lat = latencies_ms(trace)
    assert len(lat) == 20
    assert DELACK_MIN_MS - JIFFY_MS <= statistics.median(lat[1:]) <= DELACK_MAX_MS, lat
    sizes = data(trace, Side.CLIENT)
    assert sizes[:15] == [2] * 15, sizes[:20]
    assert sizes[15:] == [2, 28] * 19, sizes[15:]
    released = released_after_ms(trace, "write", None, 15)      # not stalled
    assert max(released) < NO_TIMER_MS, released


def test_s3_cork_one_thirty_byte_segment_per_message() -> None:
    """uncorking sends each message as one 30-byte segment, on the uncork call
    (not on the 200 ms cork ceiling, not after a delayed ACK)."""
    trace = real("s3_cork_vs_nodelay.toml", S3_CORK)
    assert data(trace, Side.CLIENT) == [30] * 20
    released = released_after_ms(trace, "set", "cork off", 20)
    assert max(released) < NO_TIMER_MS, released


def test_s3_nodelay_one_segment_per_write_loopback_does_not_autocork() -> None:
    """On loopback TX completion is immediate, so autocorking never merges writes: each
    write leaves as its own segment on its call."""
    trace = real("s3_cork_vs_nodelay.toml", "client.nodelay=true")
    assert data(trace, Side.CLIENT) == [2] * 300
    released = released_after_ms(trace, "write", None, 300)
    assert max(released) < NO_TIMER_MS, released
    assert trace.meta["tcp_autocorking"] == 1


def _pure_ack_delays_ms(trace: Trace) -> list[float]:
    """Client's pure ACK after each server data byte."""
    out = []
    for s in trace.segments:
        if s.src is Side.SERVER and s.length:
            ack = next(a for a in trace.segments if a.src is Side.CLIENT and a.t >= s.t
                       and a.ack >= s.seq + s.length)
            if not ack.length:
                out.append((ack.t - s.t) / 1000)
    return out


S4_SERVER_STAYS = 'server.script="repeat 4 { read 1; write 1 }; sleep 500ms"'


def test_s4_quickack_off_delays_the_ack_every_round() -> None:
    """TCP_QUICKACK=0 before each round → the pure ACK waits ≈ 40-44 ms.

    The server stays open after the last round: a FIN right behind the last byte would be
    re-sent by the tail-loss probe (~35 ms) and draw an early ACK (see test_compare)."""
    delays = _pure_ack_delays_ms(real("s4_quickack.toml", S4_SERVER_STAYS))
    assert len(delays) == 4, delays
    assert all(DELACK_MIN_MS - JIFFY_MS <= d <= DELACK_MAX_MS for d in delays), delays


def test_s4_default_acks_at_once() -> None:
    delays = _pure_ack_delays_ms(real("s4_quickack.toml", S4_DEFAULT, S4_SERVER_STAYS))
    assert len(delays) == 4 and all(d < NO_TIMER_MS for d in delays), delays


def test_s2_emulated_link_one_byte_then_nine_one_delay_later() -> None:
    """with ACKs 100 ms late, "0" leaves alone and "1".."9" one delay later."""
    trace = real("s2_node_ten_bytes.toml", "link.to_server_delay_ms=100",
                 'server.script="repeat 10 { write 1 }; sleep 300ms"')
    assert trace.meta["link"] == "emulated"
    sent = [s for s in trace.segments if s.src is Side.SERVER and s.length]
    assert [s.length for s in sent] == [1, 9]
    gap = (sent[1].t - sent[0].t) / 1000
    assert 99 <= gap <= 110, gap
    assert all(s.arrive is not None and s.arrive >= s.t for s in sent)
    reads = [o for o in trace.ops if o.side is Side.CLIENT and o.op == "read"]
    assert reads and reads[0].end is not None


def test_ops_and_tcp_info_are_recorded() -> None:
    trace = real("s4_quickack.toml")
    ops = [(o.side, o.op) for o in trace.ops]
    assert (Side.CLIENT, "connect") in ops and (Side.SERVER, "accept") in ops
    assert sum(1 for o in trace.ops if o.op == "set") == 4
    infos = [e for e in trace.events if e.kind == "tcp_info"]
    assert infos and {"ato", "rtt", "rcv_mss", "snd_cwnd", "pingpong"} <= set(infos[0].data)
    assert trace.meta["retransmissions"] == {"client": 0, "server": 0}
    # seq/ack relative to each side's ISN: SYN at 0, data from 1
    assert trace.segments[0].flags == "S" and trace.segments[0].seq == 0
    assert Trace.from_json(json.loads(trace.dumps())).ops  # JSON round trip


def test_getsockopt_quickack_result() -> None:
    sc = loads('[client]\nscript = "get quickack; set quickack off; get quickack"\n'
               '[server]\nscript = ""\n')
    trace = run_real(sc)
    assert [o.result for o in trace.ops if o.op == "get"] == ["1", "0"]


def test_deadlock_ends_with_the_simulators_message() -> None:
    sc = loads('[client]\nscript = "read 5"\n[server]\nscript = "read 5"\n', "dl.toml")
    start = time.monotonic()
    trace = run_real(sc)
    assert time.monotonic() - start < 10
    assert trace.outcome is Outcome.DEADLOCK
    assert "deadlock: " in trace.message and "client waits for 5 more of 5 bytes" in trace.message


def test_eof_is_an_error_like_the_simulator() -> None:
    sc = loads('[client]\nscript = "read 5"\n[server]\nscript = "write 2"\n', "eof.toml")
    trace = run_real(sc)
    assert trace.outcome is Outcome.ERROR
    assert "read 5 hit end of stream after 2 B" in trace.message


def test_timeout_limits_the_run() -> None:
    sc = loads('[client]\nscript = "sleep 5s"\n[server]\nscript = ""\n', "slow.toml")
    trace = run_real(sc, timeout_s=0.5)
    assert trace.outcome is Outcome.LIMIT


def _spawn_runner(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "realnet", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)


def _wait_for_namespaces(pid: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = cleanup.list_ours(owner_pid=pid).namespaces
        if len(names) == 2:
            return names
        time.sleep(0.02)
    raise AssertionError("the runner never created its namespaces")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[1]) == pid:
                out.append(int(entry))
    return out


def test_sigkilled_runner_leaves_nothing_even_without_another_run() -> None:
    """Issue 9: a SIGKILLed emulated-link run leaves no temp file (the side logs are
    memfds). Issue 29.10: its namespaces were left until the next run (or `realnet
    cleanup`); now its watchdog removes them within seconds with no further run, and
    then exits itself."""
    child = _spawn_runner(str(DATA / "s2_node_ten_bytes.toml"), "--json")
    try:
        names = _wait_for_namespaces(child.pid)
        time.sleep(0.3)
        kids = _children(child.pid)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    deadline = time.monotonic() + 5
    while any(cleanup.pid_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [k for k in kids if cleanup.pid_alive(k)], \
        "side, relay or watchdog processes outlived it"
    assert not list(Path(tempfile.gettempdir()).glob(f"nsim-{child.pid}-*"))
    assert not set(names) & set(cleanup.list_namespaces())   # no run in between
    assert not cleanup.list_ours(owner_pid=child.pid)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_realnet_cleanup_command_removes_stale_leftovers() -> None:
    from pyroute2 import netns

    dead = _dead_pid()
    name = cleanup.link_tag(dead, 1) + "-c"
    netns.create(name)
    stale_file = Path(tempfile.gettempdir()) / f"nsim-{dead}-client-abc123.json"
    stale_file.write_text("{}")
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "nagle_sim", "realnet", "cleanup"],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert name in proc.stdout and stale_file.name in proc.stdout
        assert name not in cleanup.list_namespaces() and not stale_file.exists()
    finally:
        cleanup.remove_namespace(name)
        stale_file.unlink(missing_ok=True)


@pytest.mark.parametrize("after_s", [0.0, 0.3, 1.5])
def test_sigterm_cleans_up(after_s: float) -> None:
    """SIGTERM while the link is being set up (0 s after both namespaces exist), as the
    sides start, and mid-run: exit 130 (realnet.interrupt), nothing left behind.
    tests/realnet/test_interrupt.py pins the two ways it once ended otherwise."""
    child = _spawn_runner(str(DATA / "s2_node_ten_bytes.toml"), "--json")
    try:
        names = _wait_for_namespaces(child.pid)
        time.sleep(after_s)
        kids = _children(child.pid)
        child.send_signal(signal.SIGTERM)
        assert child.wait(15) == 130
    finally:
        if child.poll() is None:
            child.kill()
        _, err = child.communicate()
    assert b"error: terminated (SIGTERM)" in err, err
    assert not set(names) & set(cleanup.list_namespaces())
    # the watchdog (a child too) ends once it has seen its owner exit
    deadline = time.monotonic() + 5
    while any(cleanup.pid_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [k for k in kids if cleanup.pid_alive(k)]
    assert not cleanup.list_ours(owner_pid=child.pid)


MEASURE_SIDES = """
import resource, sys
from nagle_sim.scenario import loads
from nagle_sim.trace import Outcome
from realnet.runner import run_real
trace = run_real(loads(sys.argv[1], "mem.toml"))
assert trace.outcome is Outcome.OK, trace.message
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _side_peak_mib(text: str) -> int:
    """Peak RSS of the larger side process of a run (MiB), measured in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", MEASURE_SIDES, text], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


def test_a_gigabyte_write_sends_from_a_bounded_buffer() -> None:
    """Issue 9: `write 1000000000` no longer allocates the gigabyte."""
    small = _side_peak_mib('[client]\nscript = "write 1000"\n[server]\nscript = "read 1000"')
    big = _side_peak_mib('[client]\nscript = "write 1000000000"\n'
                         '[server]\nscript = "read 1000000000"')
    assert big - small < 64, (small, big)


def test_the_longest_writev_the_loader_accepts_runs_on_real_sockets() -> None:
    """Issue 29.9: `realnet run` failed such a writev ("unreadable report: an op argument is
    not a short string"), though the loader accepts it and the model runs it. Here the
    server reads one byte and closes, so the client's writev of 1024 × 10^9 bytes ends in a
    reset: the run reports that (one short line) with the writev op and its whole
    argument."""
    sizes = " ".join(["1000000000"] * 1024)
    trace = run_real(loads(f'[client]\nscript = "writev {sizes}"\n'
                           '[server]\nscript = "read 1"\n', "wv.toml"))
    writev = [o for o in trace.ops if o.op == "writev"]
    assert len(writev) == 1 and writev[0].arg == sizes, trace.message
    assert "unreadable" not in trace.message
    assert "client writev 1000000000 1000000000" in trace.message
    assert len(trace.message) < 300 and "\n" not in trace.message, trace.message


def test_side_records_are_streamed_not_held() -> None:
    """Issue 9: 30,000 ops cost a side no more memory than 300 (records go to a memfd)."""
    few = _side_peak_mib('[client]\nscript = "repeat 300 { write 1 }"\n'
                         '[server]\nscript = "read 300"')
    many = _side_peak_mib('[client]\nscript = "repeat 30000 { write 1 }"\n'
                          '[server]\nscript = "read 30000"')
    assert many - few < 24, (few, many)


def test_ctrl_c_cleans_up() -> None:
    child = _spawn_runner(str(DATA / "s2_node_ten_bytes.toml"), "--json")
    try:
        names = _wait_for_namespaces(child.pid)
        time.sleep(0.3)
        child.send_signal(signal.SIGINT)
        assert child.wait(15) == 130
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert not set(names) & set(cleanup.list_namespaces())


def test_without_capture_privileges_app_timings_only() -> None:
    """No CAP_NET_RAW: loopback still runs; segments empty; meta says what is missing."""
    setpriv = "/usr/bin/setpriv"
    if not os.path.exists(setpriv):
        pytest.skip("setpriv (util-linux) is not installed")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [setpriv, "--bounding-set", "-net_raw,-net_admin,-sys_nice", "--inh-caps",
         "-net_raw,-net_admin", sys.executable, "-m", "realnet",
         str(DATA / "s4_quickack.toml"), "--json"],
        env=env, capture_output=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    doc = json.loads(proc.stdout)
    assert doc["meta"]["capture"].startswith("unavailable: AF_PACKET capture needs CAP_NET_RAW")
    assert doc["segments"] == [] and doc["ops"]
    assert b"no packet capture" in proc.stderr


def test_sockets_use_the_profiles_congestion_control() -> None:
    """Each side's `congestion` is applied per socket (TCP_CONGESTION), whatever this
    host's default is."""
    trace = real("s1_write_write_read.toml", "client.congestion=bbr")
    assert trace.meta["congestion_control"] == {"client": "bbr", "server": "cubic"}
    assert not trace.meta.get("notes"), trace.meta.get("notes")


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


def _starved_ms(text: str, cpu: int = 0) -> float:
    """Longest wait (ms) of a normal process pinned to ``cpu`` while the run's side
    processes are pinned there too."""
    saved = os.sched_getaffinity(0)
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(cpu)], stdout=subprocess.PIPE,
                             text=True)
    assert probe.stdout is not None
    probe.stdout.readline()
    try:
        os.sched_setaffinity(0, {cpu})
        trace = run_real(loads(text, "spin.toml"))
    finally:
        os.sched_setaffinity(0, saved)
        probe.send_signal(signal.SIGUSR1)
    worst = float(probe.stdout.readline())
    probe.wait()
    assert trace.outcome is Outcome.OK, trace.message
    return worst


def test_a_run_of_short_sleeps_does_not_starve_the_machine() -> None:
    """Issue 8: `repeat 10000 { sleep 199us }` at SCHED_FIFO kept a normal process on the
    same CPU waiting up to 950 ms (the kernel's RT throttling limit); with the short spin
    and the real-time budget it waits tens of ms at most (benchmarks/bench_link.py
    --starvation). Another load on this VM can stall the probe too, so one clean run of
    two is required (before: every run ≈ 950 ms)."""
    text = '[client]\nscript = "repeat 10000 { sleep 199us }"\n[server]\nscript = "sleep 1ms"'
    waits = []
    for _ in range(2):
        waits.append(_starved_ms(text))
        if waits[-1] < 250:
            break
    assert min(waits) < 250, waits
