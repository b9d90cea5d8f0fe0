"""watch on this machine's kernel (root, BTF; skipped elsewhere with the reason).

Each test runs realnet/watch/demo.py under watch — through the session API and, for
signals and leftovers, through ``python -m realnet.watch`` in a process of its own — and
checks what the kernel decided. Timers fire a jiffy or two late under load: durations are
checked against the kernel's rule with that jitter allowed, never against exact values.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nagle_sim.model.events import Reason

ROOT = Path(__file__).resolve().parents[2]


def _unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "watch needs Linux"
    if os.geteuid() != 0:
        return "watch tests need root (BPF)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    try:
        from realnet.watch.libbpf import lib
        lib()
    except Exception as exc:  # noqa: BLE001 - any failure: cannot run here
        return f"libbpf: {exc}"
    return None


pytestmark = [pytest.mark.realnet,
              pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))]


def watch(*args: str):
    from realnet.watch.loader import Config
    from realnet.watch.session import run
    r = run(Config(), [sys.executable, "-m", "realnet.watch.demo", "--quiet", *args])
    assert r.returncode == 0
    assert r.counters["lost"] == 0 and r.counters["rate_limited"] == 0
    assert not r.report.lost, r.report.lost
    return r


def test_write_write_read_every_stall_is_nagle_and_the_peers_delayed_ack():
    r = watch("--rounds", "10")
    stalls = r.stalls
    assert len(stalls) >= 8          # rounds 2-10 (round 1 has quick-ACK credit)
    for s in stalls:
        assert s.causes == ["nagle", "delayed_ack"], s.text
        assert s.side == "client"
        fired = [d for d in s.evidence if d.code == Reason.DELACK_FIRED.name]
        armed = [d for d in s.evidence if d.code == Reason.DELACK_WAIT.name]
        assert fired and armed and fired[0].side == armed[0].side == "server"
        # ato is 40 ms = 10 jiffies at HZ=250 (TCP_ATO_MIN); the timer may run late
        hz = r.host["hz"]
        assert armed[0].data["ato_j"] == hz // 25
        assert 39_000 <= s.end_us - s.start_us <= 40_000 + 3 * 1_000_000 // hz + 8_000
    # every client hold of 10 ms or more is one of these stalls
    holds = [d for d in r.decisions if d.kind == "hold"]
    assert len(holds) >= len(stalls)
    # why round 1 did not stall: the server's quick-ACK credit
    assert any("quick-ACK mode" in n and "ping-pong 0" in n for n in r.notes), r.notes
    first_stall = stalls[0].start_us
    quick = [d for d in r.decisions if d.side == "server"
             and d.code == Reason.QUICKACK_MODE.name and d.t_us < first_stall]
    assert quick and all(d.data["pingpong"] == 0 for d in quick)


def test_ipv6_write_write_read():
    r = watch("--rounds", "4", "--v6")
    assert r.stalls and all(s.cause == "nagle+delayed_ack" for s in r.stalls)
    assert all(s.conn.startswith("[::1]") for s in r.stalls)


def test_a_corked_writer_is_released_by_the_probe_timer():
    r = watch("--rounds", "2", "--cork")
    assert len(r.stalls) == 2
    for s in r.stalls:
        assert s.causes == ["cork"] and "probe timer" in s.text
        assert 199_000 <= s.end_us - s.start_us <= 260_000
    assert any(d.code == Reason.PROBE0_ARMED.name and d.timer == "probe0"
               for d in r.decisions)
    assert any(d.kind == "segment" and d.code == Reason.PROBE0_RELEASE.name
               for d in r.decisions)


def test_msg_more_is_named():
    r = watch("--rounds", "2", "--more")
    assert [s.cause for s in r.stalls] == ["msg_more", "msg_more"]


def test_the_nodelay_twin_has_no_stall():
    r = watch("--rounds", "10", "--nodelay")
    assert r.stalls == []
    assert not [d for d in r.decisions if d.kind == "hold"]


def test_quickack_after_each_read_removes_the_delayed_acks():
    r = watch("--rounds", "10", "--quickack")
    assert r.stalls == []
    server = {d.code for d in r.decisions if d.side == "server" and d.kind == "ack_now"}
    assert Reason.QUICKACK_OPT.name in server
    assert Reason.DELACK_FIRED.name not in server


def _ours() -> list[str]:
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [p.get("name", "") for p in json.loads(out) if p.get("name", "").startswith("nw_")]


def _wait_gone(limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool is not installed")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_nothing_is_left_attached_after_a_signal(sig):
    # the kernel frees a program after an RCU grace period once its last fd is closed:
    # the previous tests' programs may still be listed for a moment
    _wait_gone()
    assert _ours() == [], "a BPF program of watch was loaded before the test"
    proc = subprocess.Popen([sys.executable, "-m", "realnet.watch", "--json", "--",
                             "sleep", "30"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert json.loads(line)["type"] == "start", line
        assert len(_ours()) >= 10                 # loaded and attached now
        proc.send_signal(sig)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig != signal.SIGKILL:
        assert proc.returncode == 128 + sig
        assert proc.stderr.read().count("Traceback") == 0
    _wait_gone()
    assert _ours() == []
    maps = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True,
                          check=True).stdout
    assert not [m for m in json.loads(maps) if m.get("name") in
                ("events", "socks", "watch_tgids", "listen_ports", "counters")]


def test_bad_input_and_missing_privileges_are_one_line():
    def run(*args: str, pre: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*(pre or []), sys.executable, "-m", "realnet.watch", *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
    for args in (["--port", "70000"], [], ["--ring-mb", "3", "--port", "80"], ["--"],
                 ["--", "/nonexistent/program"]):
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)
    if shutil.which("setpriv"):
        done = run("--", "true", pre=["setpriv", "--bounding-set=-all", "--inh-caps=-all"])
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [done.stderr.strip()]
        assert "needs root" in done.stderr


def test_the_self_check_sees_every_feature():
    done = subprocess.run([sys.executable, "-m", "realnet.watch", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MISSING" not in done.stdout and done.stdout.count("  ok ") == 9
    assert done.stdout.strip().endswith("watch works here")


def test_rate_limits_are_counted_not_hidden():
    from realnet.watch.loader import Config
    from realnet.watch.session import run
    r = run(Config(rate=1, burst=3), [sys.executable, "-m", "realnet.watch.demo",
                                      "--quiet", "--rounds", "5"])
    assert r.returncode == 0
    assert r.counters["rate_limited"] > 0
    assert r.counters["lost"] == 0


def test_a_hook_that_cannot_attach_is_named_and_the_rest_works(monkeypatch):
    from realnet.watch import loader
    from realnet.watch.loader import Config, Hook
    from realnet.watch.session import run
    hooks = tuple(Hook(h.program, "no_such_tracepoint", h.feature)
                  if h.program == "nw_sendmsg" else h for h in loader.HOOKS)
    monkeypatch.setattr(loader, "HOOKS", hooks)
    r = run(Config(), [sys.executable, "-m", "realnet.watch.demo", "--quiet", "--rounds",
                       "3"])
    line = r.report.summary()
    assert "\n" not in line and "no_such_tracepoint (MSG_MORE" in line
    assert line.endswith("everything else works")
    assert any(s.cause == "nagle+delayed_ack" for s in r.stalls)


def test_ctrl_c_inside_the_record_callback_still_ends_the_session():
    """A KeyboardInterrupt raised while libbpf is calling back into Python (ctypes would
    print and drop it) ends the session, detaches everything and stops the program."""
    from realnet.watch.loader import Config
    from realnet.watch.session import run

    def interrupt(_d):
        raise KeyboardInterrupt

    t0 = time.monotonic()
    r = run(Config(), [sys.executable, "-m", "realnet.watch.demo", "--quiet", "--rounds",
                       "200"], on_decision=interrupt)
    assert r.signal == signal.SIGINT
    assert r.returncode is not None          # the program was stopped, not left running
    assert time.monotonic() - t0 < 5         # 200 rounds would take 8 s


def test_record_streams_a_fixture_the_engine_reads(tmp_path):
    out = tmp_path / "raw.jsonl"
    done = subprocess.run([sys.executable, "-m", "realnet.watch", "--quiet", "--record",
                           str(out), "--", sys.executable, "-m", "realnet.watch.demo",
                           "--quiet", "--rounds", "3"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    from realnet.watch import raw
    from realnet.watch.decide import Engine
    host, events = raw.read_fixture(out)
    eng = Engine(hz=host["hz"])
    for e in events:
        eng.feed(e)
    assert [s.cause for s in eng.stalls()] == ["nagle+delayed_ack"] * 2
    assert sum(line.startswith("stall ") for line in done.stdout.splitlines()) == 2
