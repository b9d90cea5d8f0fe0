"""Issue 18: validating against a remote host, with two "hosts" on this machine.

Two network namespaces joined by a TUN link with a delaying relay (`realnet.netns`) stand
in for two machines: `nagle-sim realnet serve` runs in one, the client commands (`realnet
run --remote`, `compare --remote`, `validate --remote`) in the other, each as its own
process (``ip netns exec``), so nothing is shared but the wire and the control channel.
Both "hosts" read the same CLOCK_MONOTONIC, so the true clock offset is 0: the estimate's
error is measured, not guessed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from nagle_sim.model.events import Side
from nagle_sim.trace import Outcome, Trace

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TOKEN = "two-hosts-token-0123456789"
PORT = 7071

pytestmark = [pytest.mark.realnet, pytest.mark.usefixtures("requires_root_netns")]


@dataclass
class Hosts:
    client_ns: str
    server_ns: str
    address: str
    log: Path


SLOW_PERIOD_US, SLOW_QUOTA_US = 20_000, 4_000
"""The slowed serve's CPU: 4 ms in every 20 ms, shared with a busy loop that always
wants it, so each wake-up of the serve's side waits up to 16 ms (3-4 ms typical): a
slow host whose timing is off, on a kernel whose decisions are this machine's."""


def _cpu_cgroup_root() -> tuple[Path, str] | None:
    """(where CPU cgroups are made, "v1" | "v2"), or None when neither can throttle."""
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1, "v1"
    v2 = Path("/sys/fs/cgroup")
    if "cpu" in (v2 / "cgroup.controllers").read_text().split() \
            if (v2 / "cgroup.controllers").exists() else False:
        return v2, "v2"
    return None


@contextmanager
def slow_cgroup() -> Iterator[Path]:
    """A CPU cgroup throttled to `SLOW_QUOTA_US` per `SLOW_PERIOD_US`, with no real-time
    runtime (so the serve's SCHED_FIFO is refused: its sides run under the quota), and a
    busy loop in it; removed, loop and all, on the way out."""
    found = _cpu_cgroup_root()
    if found is None:
        pytest.skip("no CPU cgroup controller (v1 cpu or v2 cpu.max) to slow the serve with")
    root, version = found
    group = root / f"nsim-slow-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    hog = None
    try:
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text(str(SLOW_PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(SLOW_QUOTA_US))
        else:
            (group / "cpu.max").write_text(f"{SLOW_QUOTA_US} {SLOW_PERIOD_US}")
        hog = subprocess.Popen(["sh", "-c", f'echo $$ > {group}/cgroup.procs && '
                                f'exec {sys.executable} -c "while True: pass"'])
        yield group
    finally:
        if hog is not None:
            hog.kill()
            hog.wait(10)
        deadline = time.monotonic() + 10
        while True:
            try:
                group.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@contextmanager
def two_hosts(tmp_path: Path, to_server_ms: float, to_client_ms: float,
              as_user: int | None = None, congestion: str | None = None,
              slow: Path | None = None, server_sysctls: dict[str, str] | None = None
              ) -> Iterator[Hosts]:
    """A serve in the server namespace of a fresh emulated link (autocorking off in both,
    as local emulated runs do); ``as_user``: run the serve without root; ``congestion``:
    the congestion control the serve asks the kernel for, whatever the profile says;
    ``slow``: a CPU cgroup the serve runs in (`slow_cgroup`); ``server_sysctls``: the
    server namespace's own settings (a remote host configured differently)."""
    from realnet.netns import EmulatedLink
    from realnet.runner import NO_AUTOCORK

    link = EmulatedLink(round(to_server_ms * 1000), round(to_client_ms * 1000),
                        sysctls=NO_AUTOCORK,
                        side_sysctls={"server": server_sysctls} if server_sysctls else None)
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    with link:
        cmd = ["ip", "netns", "exec", link.ns("server")]
        if slow is not None:
            cmd = ["sh", "-c", f'echo $$ > {slow}/cgroup.procs && exec "$@"', "sh", *cmd]
        if as_user is not None:
            cmd += ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups"]
        if congestion is None:
            cmd += [sys.executable, "-m", "nagle_sim"]
        else:   # the serve's one rule for a profile's congestion control, overridden
            cmd += [sys.executable, "-c", "import sys, realnet.hostfacts as h; "
                    f"h.profile_congestion = lambda _p: {congestion!r}; "
                    "from nagle_sim.__main__ import main; sys.exit(main(sys.argv[1:]))"]
        cmd += ["realnet", "serve", "--listen", f"{link.server_addr}:{PORT}", "--token",
                TOKEN]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("NAGLE_SIM_REALNET_TOKEN", None)
        with open(log, "wb") as err:
            proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                    stderr=err)
        try:
            deadline = time.monotonic() + 20
            while b"listening on" not in log.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"serve did not start: {log.read_text()}")
                time.sleep(0.05)
            yield Hosts(link.ns("client"), link.ns("server"), f"{link.server_addr}:{PORT}",
                        log)
        finally:
            proc.terminate()
            proc.wait(10)


def client(hosts: Hosts, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NAGLE_SIM_REALNET_TOKEN": TOKEN,
           "COLUMNS": "200"}
    return subprocess.run(["ip", "netns", "exec", hosts.client_ns, sys.executable, "-m",
                           "nagle_sim", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def remote_trace(hosts: Hosts, scenario: Path, *sets: str) -> Trace:
    out = client(hosts, "realnet", "run", str(scenario), "--remote", hosts.address,
                 "--json", *[a for s in sets for a in ("--set", s)])
    assert out.returncode == 0, out.stderr
    return Trace.loads(out.stdout)


def test_remote_trace_has_every_segment_from_both_captures(tmp_path: Path) -> None:
    with two_hosts(tmp_path, 2, 2) as hosts:
        trace = remote_trace(hosts, DATA / "s1_write_write_read.toml", "link.delay_ms=2")
    assert trace.outcome is Outcome.OK, trace.message
    meta = trace.meta
    sources = meta["segment_capture"]
    assert len(sources) == len(trace.segments) > 0
    # each segment timed by its sender's own capture: the client's here, the server's there
    assert all(letter == ("L" if seg.src is Side.CLIENT else "R")
               for letter, seg in zip(sources, trace.segments, strict=True)), sources
    # every byte both ways, the handshake and both FINs, every segment with its arrival
    for side in Side:
        data = sum(s.length for s in trace.segments if s.src is side)
        assert data == 12 * 13, (side, data)
        flags = [s.flags for s in trace.segments if s.src is side]
        assert any("S" in f for f in flags) and any("F" in f for f in flags)
    assert all(s.arrive is not None for s in trace.segments)
    clock = meta["clock_offset"]
    assert clock["method"].startswith("segments captured on both hosts"), clock
    print(f"clock offset estimate: {clock['used_us']} ± {clock['uncertainty_us']} µs from "
          f"{clock['bounding_segments']} segments, control channel "
          f"{clock['control_channel_us']} µs (true offset 0); segments "
          f"{sources.count('L')} local + {sources.count('R')} remote; path {meta['path']}")
    # The true offset is 0 (one clock): within the stated uncertainty, whatever the load
    assert abs(clock["used_us"]) <= clock["uncertainty_us"], clock
    assert clock["bounding_segments"] == len(trace.segments)
    _assert_causal_and_path(meta, len(trace.segments), 2_000)
    facts = meta["host_facts"]
    assert facts["client"]["interface"] == facts["server"]["interface"] == "nsimtun0"
    from nagle_sim.model.config import LINUX
    # the congestion control each socket really used, read back: the profile's (CUBIC)
    assert facts["server"]["congestion"] == {"server": LINUX.congestion}
    assert facts["client"]["congestion"] == {"client": LINUX.congestion}
    assert isinstance(facts["server"]["hz"], int)


def _assert_causal_and_path(meta: dict, segments: int, one_way_us: float) -> None:
    """Every merged segment arrives no earlier than it was sent; the path's one-way delays
    (the captures' minimum) are the relay's within 0.1 ms, never the handshake's round
    trip (which holds the serve's turnaround)."""
    causal = meta["causality"]
    assert causal["checked"] == segments and causal["arrive_before_sent"] == 0, causal
    path = meta["path"]
    for key in ("to_server_us", "to_client_us"):
        assert abs(path[key] - one_way_us) <= 100, path
    assert "minimum one-way" in path["from"]


SEEDS = [("s1_write_write_read.toml", None), ("s2_node_ten_bytes.toml", (500, 0)),
         ("s3_cork_vs_nodelay.toml", None), ("s4_quickack.toml", None)]


@pytest.mark.parametrize(("name", "delays"), SEEDS, ids=["S1", "S2", "S3", "S4"])
def test_compare_remote_agrees_with_the_model(tmp_path: Path, name: str,
                                              delays: tuple[float, float] | None) -> None:
    """The model's link is the path's: the scenario's delays where it has them (S2), else
    2 ms each way set on both. A second run is taken when the first disagrees (one late
    jiffy on this busy VM), as the local agreement tests do."""
    sets = [] if delays else ["--set", "link.delay_ms=2"]
    to_server, to_client = delays or (2, 2)
    with two_hosts(tmp_path, to_server, to_client) as hosts:
        runs = []
        for _ in range(2):
            out = client(hosts, "compare", str(DATA / name), "--remote", hosts.address,
                         "--json", *sets)
            assert out.returncode in (0, 1), out.stderr
            cmp = json.loads(out.stdout)
            runs.append(cmp)
            if cmp["agree"]:
                break
    print(f"{name}: {len(runs)} run(s), max error {runs[-1]['max_error_ms']} ms")
    assert runs[-1]["agree"], runs[-1]["problems"]
    # agreement on segments, not on ops alone: the capture was there and matched
    assert runs[-1]["segments_compared"] is True
    kinds = {m["kind"] for m in runs[-1]["matches"]}
    assert "match" in kinds and not kinds & {"missing", "extra"}, kinds


def test_validate_remote_runs_every_lesson(tmp_path: Path) -> None:
    """Every lesson gets a verdict from a real remote run (agree, DISAGREE, or n/a where
    this kernel cannot run it as the model does): none ends in an error. Agreement on
    every lesson is not claimed (docs/realnet.md): lessons written for a 500 ms link run
    over this 1 ms path with the path's delays."""
    from nagle_sim.lessons import load_lessons

    table = tmp_path / "validate.md"
    with two_hosts(tmp_path, 1, 1) as hosts:
        out = client(hosts, "validate", "--remote", hosts.address, "--markdown", str(table),
                     timeout=900)
    assert out.returncode in (0, 1), out.stderr
    assert "Traceback" not in out.stderr
    assert f"server side on {hosts.address}" in out.stdout.replace("\n", " ")
    verdicts = {cells[1]: cells[2] for line in table.read_text().splitlines()
                if len(cells := [c.strip() for c in line.split("|")]) > 3}
    for lesson in load_lessons():
        assert verdicts.get(lesson.slug) in ("agree", "DISAGREE", "n/a"), (lesson.slug,
                                                                           verdicts)


def _python_works_as(uid: int) -> bool:
    """Whether this interpreter and the project's dependencies load for ``uid``."""
    probe = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable,
         "-c", "import dpkt, pyroute2, rich, simpy"],
        capture_output=True, timeout=60, cwd="/", env={**os.environ, "PYTHONPATH": str(ROOT)})
    return probe.returncode == 0


def test_a_serve_that_cannot_set_the_congestion_control_says_so(tmp_path: Path) -> None:
    """The serve asks for a congestion control no kernel has ("nosuchcc"), so the kernel
    refuses it whatever this host allows and whoever runs the serve. The run goes on, the
    trace says which congestion control the server really used and why, and compare flags
    it. The serve runs without root: it cannot capture either, so the server's segments
    come from this host's capture at arrival (letter A)."""
    # Without root the serve cannot capture either; that part needs an interpreter whose
    # packages the unprivileged user can read (CI's lives under /root, mode 700): without
    # one the serve runs as root and captures, and the congestion part is checked the same
    unprivileged = _python_works_as(65534)
    with two_hosts(tmp_path, 2, 2, as_user=65534 if unprivileged else None,
                   congestion="nosuchcc") as hosts:
        sets = ("link.delay_ms=2",)
        run = client(hosts, "realnet", "run", str(DATA / "s1_write_write_read.toml"),
                     "--remote", hosts.address, "--json", "--set", sets[0])
        assert run.returncode == 0, run.stderr
        trace = Trace.loads(run.stdout)
        out = client(hosts, "compare", str(DATA / "s1_write_write_read.toml"), "--remote",
                     hosts.address, "--json", *[a for s in sets for a in ("--set", s)])
    server = trace.meta["host_facts"]["server"]
    assert server["congestion"]["server"] not in (None, "nosuchcc")
    assert "cannot use congestion control 'nosuchcc'" in server["congestion_notes"]["server"]
    if unprivileged:
        assert trace.meta["server_capture"].startswith("unavailable")
        assert set(trace.meta["segment_capture"]) == {"L", "A"}
    else:
        assert "R" in trace.meta["segment_capture"]
    assert sum(s.length for s in trace.segments if s.src is Side.SERVER) == 12 * 13
    # issue 33.5: realnet run says what the remote refused as it happens (not only in
    # --json's meta)
    assert "realnet: remote server: cannot use congestion control 'nosuchcc'" in run.stderr, \
        run.stderr
    cmp = json.loads(out.stdout)
    assert out.returncode == 1
    assert any("server host: congestion control" in p and "nosuchcc" in p
               for p in cmp["problems"]), cmp["problems"]


def test_remote_run_of_100k_operations_over_the_link(tmp_path: Path) -> None:
    with two_hosts(tmp_path, 1, 1) as hosts:
        scenario = tmp_path / "big.toml"
        scenario.write_text('[client]\nscript = "write 100000; read 1"\n'
                            '[server]\nscript = "repeat 100000 { read 1 }; write 1"\n')
        started = time.monotonic()
        trace = remote_trace(hosts, scenario)
        took = time.monotonic() - started
    assert trace.outcome is Outcome.OK, trace.message
    server_ops = [o for o in trace.ops if o.side is Side.SERVER]
    assert len(server_ops) == 1 + 100_000 + 1
    assert sum(s.length for s in trace.segments if s.src is Side.CLIENT) == 100_000
    print(f"100k-operation remote run over the link: {took:.1f} s")


def test_sweep_real_remote_runs_every_cell_on_the_remote_host(tmp_path: Path) -> None:
    with two_hosts(tmp_path, 1, 1) as hosts:
        out = client(hosts, "sweep", str(DATA / "s1_write_write_read.toml"), "--real",
                     "--remote", hosts.address, "--vary", "client.nodelay=false,true",
                     "--metric", "latency_p50_ms", "--csv", str(tmp_path / "sweep.csv"))
        log = hosts.log.read_text()
    assert out.returncode == 0, out.stderr
    rows = (tmp_path / "sweep.csv").read_text().splitlines()
    assert len(rows) == 3, rows                       # header + two cells
    assert log.count("running the server side") == 2  # both real cells ran there


# ---------------------------------------------------------------- issue 33: a slow remote
CI_LESSONS = ("05-quick-acks-and-ping-pong", "07-write-write-read", "11-nodelay-vs-cork")
"""The lessons CI runs against a slowed serve, three times each (about 2 minutes): quick
ACKs and ping-pong, Nagle against delayed ACKs (write-write-read), NODELAY and cork. Every
lesson was run by hand against the same serve, three rounds (the issue-33 report); all of
them take 2.5-3.5 minutes per round here."""


def _layers(out: subprocess.CompletedProcess[str]) -> dict:
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)["layers"]


def test_a_slow_remote_decides_as_the_model_and_its_timing_is_its_own(
        tmp_path: Path) -> None:
    """Issue 33's two-host test: the serve runs CPU-throttled (4 ms per 20 ms, shared with
    a busy loop: its calls start up to 16 ms late) behind a 2 ms link. Every merged segment
    is causal, the path's delays are the link's within 0.1 ms, the trace says how each side
    was scheduled, and compare says the decisions agree and the timing does not (the
    host's)."""
    with slow_cgroup() as group, two_hosts(tmp_path, 2, 2, slow=group) as hosts:
        trace = remote_trace(hosts, DATA / "s1_write_write_read.toml", "link.delay_ms=2")
        out = client(hosts, "compare", str(DATA / "s1_write_write_read.toml"), "--remote",
                     hosts.address, "--json", "--set", "link.delay_ms=2")
    assert trace.outcome is Outcome.OK, trace.message
    meta = trace.meta
    _assert_causal_and_path(meta, len(trace.segments), 2_000)
    assert abs(meta["clock_offset"]["used_us"]) <= meta["clock_offset"]["uncertainty_us"]
    # both sides' scheduling: this host's, and the serve's (its SCHED_FIFO refused by the
    # cgroup, which has no real-time runtime)
    assert meta["sched"].startswith(("SCHED_FIFO", "normal"))
    assert meta["server_sched"] == "normal (SCHED_FIFO refused)"
    layers = _layers(out)
    print(layers["summary"])
    # one account of the model's link: the path's (issue 33.5: two notes contradicted)
    notes = json.loads(out.stdout)["notes"]
    assert sum("the model's link is the path's" in n for n in notes) == 1, notes
    assert not any("the model uses the scenario's" in n for n in notes), notes
    assert layers["decisions"]["agree"], layers["decisions"]["differences"]
    assert not layers["timing"]["agree"]
    assert layers["timing"]["causes"].get("host", 0) >= 1, layers["timing"]


def test_compare_remote_decisions_agree_on_a_slow_remote(tmp_path: Path) -> None:
    """validate --remote's promise on a slow host, for `CI_LESSONS`, three rounds: every
    round either agrees on every decision or shows only "ACK now vs delayed" where the
    kernel ACKed at once and the host-timed model waited for its timer. One cause of that
    is found and fixed (the kernel's read took the data and ACKed it at once, its return
    to the program was late, and the host-timed model put that lateness before the read:
    `nagle_sim.compare.layers.host_delays`, tests/test_layers.py); the same kind still
    appears without that cause (lesson 11 here in 1 of 3 rounds on a loaded machine,
    lesson 24 at a harder throttle: docs/realnet.md), so the test holds differences to
    that one kind and prints how many rounds agree; any other decision difference fails
    it. The issue's "stable over 3 runs" is not met until that is found too."""
    known = "ACK now vs delayed: the model's ACK waited for its delayed-ACK timer"
    verdicts: dict[str, list[bool]] = {}
    with slow_cgroup() as group, two_hosts(tmp_path, 1, 1, slow=group) as hosts:
        for _ in range(3):
            for slug in CI_LESSONS:
                out = client(hosts, "compare", str(ROOT / "lessons" / slug / "scenario.toml"),
                             "--remote", hosts.address, "--json")
                layers = _layers(out)
                agree = bool(layers["decisions"]["agree"])
                verdicts.setdefault(slug, []).append(agree)
                if not agree:
                    other = [d for d in layers["decisions"]["differences"] if known not in d]
                    assert not other, (slug, other)
    for slug, rounds in verdicts.items():
        print(f"{slug}: decisions agree in {sum(rounds)} of {len(rounds)} rounds")


PINGPONG_SCENARIO = '''
title = "two exchanges, then a one-way message"
[client]
script = "write 100; read 100; write 100; read 100; sleep 100ms; write 10; sleep 300ms"
[server]
script = "read 100; write 100; read 100; write 100; read 10; sleep 300ms"
'''


def test_a_remote_that_decides_differently_is_a_decision_difference(tmp_path: Path) -> None:
    """The remote's namespace has tcp_pingpong_thresh = 3 where the model's Linux has 1:
    after two quick answers the model's server is in ping-pong mode and delays the ACK of
    the last one-way message (its timer); the kernel's is not, and ACKs at once. compare
    reports that as a decision ("ACK now vs delayed"), not as timing."""
    scenario = tmp_path / "pingpong.toml"
    scenario.write_text(PINGPONG_SCENARIO)
    with two_hosts(tmp_path, 1, 1,
                   server_sysctls={"net.ipv4.tcp_pingpong_thresh": "3"}) as hosts:
        out = client(hosts, "compare", str(scenario), "--remote", hosts.address, "--json")
    layers = _layers(out)
    decisions = layers["decisions"]["differences"]
    assert not layers["decisions"]["agree"]
    assert any("ACK now vs delayed: the model's ACK waited for its delayed-ACK timer" in d
               for d in decisions), decisions
    # and the host fact that explains it is named with the decisions
    assert any("tcp_pingpong_thresh = 3" in h for h in layers["decisions"]["host_facts"])
