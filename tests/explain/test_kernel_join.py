"""``explain CAPTURE --kernel WATCH.json``: a capture joined with the kernel's own decisions.

The fixtures (tests/explain/kernel, re-made with ``sudo python -m
tests.explain.record_kernel_fixtures``) are real programs on this machine's kernel (6.18,
HZ=250), each captured by tcpdump on loopback while ``nagle-sim watch -o`` recorded the
same connection: the write-write-read Python client (both ends watched, and only the
client), and the C client that corks with TCP_CORK or sends with MSG_MORE. The last tests
run the same programs again on the running kernel (root, BPF, tcpdump; skipped elsewhere
with the reason).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nagle_sim.explain import ExplainError, explain_file, load_watch
from nagle_sim.explain.advice import advise
from nagle_sim.model.events import Side
from nagle_sim.trace import Trace

HERE = Path(__file__).resolve().parent
KERNEL = HERE / "kernel"
ROOT = HERE.parents[1]


def fx(name: str) -> tuple[str, str]:
    return str(KERNEL / f"{name}.pcap"), str(KERNEL / f"{name}.watch.json")


def joined(name: str, **kw: object):  # type: ignore[no-untyped-def]
    cap, watch = fx(name)
    return explain_file(cap, kernel=load_watch(watch), **kw)  # type: ignore[arg-type]


def kernel_lines(stall) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.note for e in stall.evidence if e.label == "kernel"]


def test_write_write_read_every_stall_is_nagle_and_the_servers_timer_by_the_kernel() -> None:
    """Both ends watched: each wire stall is the kernel's Nagle hold of the client's 7 B,
    released by the server's ACK from its delayed-ACK timer (armed, then fired) —
    confidence 1, decided by the kernel, the evidence placed inside the stall on the
    capture's clock."""
    wire = explain_file(fx("wwr")[0])
    ex = joined("wwr")
    held = [s for s in ex.stalls if s.cause == "nagle+delayed_ack"]
    assert len(held) == len(ex.stalls) >= 5
    assert [s.start for s in ex.stalls] == [s.start for s in wire.stalls]
    for s in held:
        assert s.decided_by == "kernel" and s.confidence == 1.0
        assert s.text.startswith("the kernel: the client's 7 B held")
        assert "snd_sml − snd_una = 6 B" in s.text
        lines = kernel_lines(s)
        assert any(ln.startswith("hold NAGLE_HOLD") for ln in lines), lines
        assert any(ln.startswith("ack_delayed DELACK_WAIT") for ln in lines), lines
        assert any(ln.startswith("timer_fired DELACK_FIRED") for ln in lines), lines
        assert any("ACK_RELEASE" in ln for ln in lines), lines
        sides = {e.note.split(" ")[0]: e.side for e in s.evidence if e.label == "kernel"}
        assert sides["hold"] is Side.CLIENT and sides["timer_fired"] is Side.SERVER
        for e in s.evidence:
            if e.label == "kernel":
                # on the capture's clock: between the gap's first segment and its release
                assert s.start - 1_000 <= e.t <= s.end + 1_000, (e.t, s.start, s.end)
        # the wire read it the same: no alternative left
        assert s.alternatives == []
    assert any("decided 5 of the 5 stall(s)" in n or "decided" in n for n in ex.notes)
    assert any("joined with the watch trace wwr.watch.json" in n and "client and server"
               in n for n in ex.notes)


def test_a_watched_cork_is_named_cork_with_the_setsockopt_that_set_it() -> None:
    """TCP_CORK never cleared: the wire says "TCP_CORK or MSG_MORE" at 0.6 with an idle
    application as the alternative; the kernel names the cork at 1.0, citing the
    setsockopt(TCP_CORK, 1), the hold and the probe timer that released it."""
    wire = explain_file(fx("cork")[0])
    assert all(s.causes == ["cork"] and s.confidence < 1 for s in wire.stalls)
    ex = joined("cork")
    assert len(ex.stalls) == 3
    for s in ex.stalls:
        assert s.causes == ["cork"] and s.confidence == 1.0 and s.decided_by == "kernel"
        assert "by TCP_CORK: TCP_CORK is set" in s.text
        assert s.alternatives == []          # the idle-application reading is gone
        lines = kernel_lines(s)
        assert any(ln.startswith("sockopt") and "TCP_CORK = 1" in ln for ln in lines)
        assert any(ln.startswith("hold CORK_HOLD") for ln in lines)
        assert any(ln.startswith("timer_fired PROBE0_RELEASE") for ln in lines)
        assert advise(s, "c").steps[0].kind == "uncork"


def test_a_watched_msg_more_is_named_msg_more_not_cork() -> None:
    """MSG_MORE on every send: the wire cannot tell it from a cork (PSH is set on the
    probe timer's release); the kernel saw the flag: ``msg_more`` at 1.0, the wire's
    "cork" kept as the alternative, and the fix drops MSG_MORE."""
    wire = explain_file(fx("more")[0])
    assert [s.cause for s in wire.stalls if s.duration > 100_000] == ["cork"] * 3
    ex = joined("more")
    held = [s for s in ex.stalls if s.duration > 100_000]
    assert len(held) == 3
    for s in held:
        assert s.causes == ["msg_more"] and s.confidence == 1.0
        assert "by MSG_MORE: the send carried MSG_MORE" in s.text
        assert [a.cause for a in s.alternatives] == ["cork"]
        assert any(ln.startswith("hold MORE_HOLD") for ln in kernel_lines(s))
        advice = advise(s, "c")
        assert "MSG_MORE" in advice.summary and "cork" not in advice.summary.lower()
        assert [st.kind for st in advice.steps][0] == "last_write"


def test_a_sender_that_held_nothing_is_an_idle_application_by_the_kernel() -> None:
    """A gap the watched sender held nothing in (no hold, no record lost) is its
    application's time, at confidence 1: the server thread's reply after 12 ms."""
    ex = joined("more")
    idle = [s for s in ex.stalls if s.duration < 100_000]
    assert idle and all(s.causes == ["app"] and s.decided_by == "kernel" for s in idle)
    assert "the kernel held none of the server's data" in idle[0].text


def test_only_the_client_watched_keeps_the_delayed_ack_as_inferred() -> None:
    """``watch -- PROGRAM`` watches the client only: the Nagle hold is the kernel's, but
    that the server delayed the ACK is the watch's reading of the timing, so the
    stall keeps the wire's confidence; the server's own stalls keep the wire's reading,
    and a note says the server was not watched."""
    ex = joined("wwr_client")
    held = [s for s in ex.stalls if "nagle" in s.causes]
    assert len(held) >= 5
    for s in held:
        assert s.causes == ["nagle", "delayed_ack"] and s.decided_by == "kernel"
        assert s.confidence == pytest.approx(0.9)
        assert "the peer is not watched" in s.text
    assert all(s.decided_by == "wire" for s in ex.stalls if s.key and s.key[0] == "server")
    assert any("the server was not watched" in n for n in ex.notes)


def test_the_join_survives_another_clock_and_sequence_origin(tmp_path: Path) -> None:
    """A watch that began mid-connection numbers sequence space from the first segment
    it saw, and its clock is not the capture's: both are found from the segments the
    two saw (shift per side, median offset), and the verdicts are the same."""
    cap, watch = fx("cork")
    doc = json.loads(Path(watch).read_text("utf-8"))
    for s in doc["segments"]:
        s["t_ms"] = round(s["t_ms"] + 5000.0, 3)
        s["seq"] += 1000 if s["from"] == "client" else 0
        s["ack"] += 1000 if s["from"] == "server" and s["ack"] else 0
    for e in doc["events"]:
        e["t_ms"] = round(e["t_ms"] + 5000.0, 3)
        if "deadline_ms" in e:
            e["deadline_ms"] = round(e["deadline_ms"] + 5000.0, 3)
    for st in doc["meta"]["stalls"]:
        st["start_ms"] += 5000.0
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(doc), "utf-8")
    word = load_watch(str(moved))
    ex = explain_file(cap, kernel=word)
    assert word.shift == {Side.CLIENT: -1000, Side.SERVER: 0}   # capture − watch
    assert word.offset is not None and abs(word.offset + 5_000_000) < 1_000
    assert [s.cause for s in ex.stalls] == ["cork"] * 3
    assert all(s.decided_by == "kernel" for s in ex.stalls)


def test_lost_records_keep_the_wire_reading_where_no_hold_was_named(tmp_path: Path) -> None:
    """A watch that lost records cannot say nothing was held: the idle-application
    verdict is not given, the named holds still are."""
    cap, watch = fx("more")
    doc = json.loads(Path(watch).read_text("utf-8"))
    doc["meta"]["watch_counters"]["lost"] = 3
    lossy = tmp_path / "lossy.json"
    lossy.write_text(json.dumps(doc), "utf-8")
    ex = explain_file(cap, kernel=load_watch(str(lossy)))
    assert [s.decided_by for s in ex.stalls if s.duration < 100_000] == ["wire"]
    assert [s.cause for s in ex.stalls if s.decided_by == "kernel"] == ["msg_more"] * 3
    assert any("lost, rate-limited or dropped" in n for n in ex.notes)


def test_the_watch_trace_picks_the_connection_and_refuses_another() -> None:
    """The watch trace names its connection: explain explains that one; a watch trace of
    another connection, or --conn/--port of another, is one line naming both."""
    cap, _ = fx("wwr")
    with pytest.raises(ExplainError) as err:
        explain_file(cap, kernel=load_watch(fx("cork")[1]))
    msg = str(err.value)
    assert "\n" not in msg and "the watch trace is of 127.0.0.1:" in msg
    assert "no connection of" in msg and "wwr.pcap" in msg
    word = load_watch(fx("wwr")[1])
    port = word.server[1]
    ex = explain_file(cap, kernel=word, port=port)
    assert ex.chosen.number == 1
    with pytest.raises(ExplainError, match="no connection uses port 1$"):
        explain_file(cap, kernel=load_watch(fx("wwr")[1]), port=1)


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d.__setitem__("events", [{**e, "by": ""} for e in d["events"]]),
     "not a watch trace"),
    (lambda d: d["meta"].pop("connection"), "names no connection"),
    (lambda d: d["meta"].__setitem__("connection", "a:b → c:d"), "is not an address:port"),
    (lambda d: d["meta"].__setitem__("connection", "10.0.0.1:99999 → 10.0.0.2:80"),
     "is not an address:port"),
    (lambda d: d["meta"].__setitem__("stalls", {"x": 1}), "meta.stalls: expected a list"),
    (lambda d: d["meta"]["stalls"][0].__setitem__("start_ms", "soon"),
     "meta.stalls[0].start_ms: expected a number"),
    (lambda d: d["meta"]["stalls"][0].__setitem__("side", "both"),
     "meta.stalls[0]: side 'both'"),
    (lambda d: d["meta"]["stalls"][0].__setitem__("cause", 7), "must be text"),
])
def test_a_bad_watch_trace_is_one_line(tmp_path: Path, mutate, expected: str) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(Path(fx("cork")[1]).read_text("utf-8"))
    mutate(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(ExplainError) as err:
        load_watch(str(bad))
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert str(bad) in str(err.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "nagle_sim", "explain", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_the_command_line(tmp_path: Path) -> None:
    """``--kernel`` on the command line: JSON says which stalls the kernel decided; the
    report says "the kernel's decision"; a watch trace of another connection, a model
    trace, a capture given as the watch trace and a missing file are one line, exit 2."""
    cap, watch = fx("more")
    done = _cli(cap, "--kernel", watch, "--json")
    assert done.returncode == 0, done.stderr
    stalls = json.loads(done.stdout)["stalls"]
    assert [s["cause"] for s in stalls if s["duration_ms"] > 100] == ["msg_more"] * 3
    assert all(s["decided_by"] == "kernel" and s["confidence"] == 1.0 for s in stalls)
    text = _cli(cap, "--kernel", watch)
    assert text.returncode == 0 and "msg_more (the kernel's decision, confidence 1.0)" in \
        " ".join(text.stdout.split())
    model = tmp_path / "model.json"
    model.write_text(Trace.load(watch).dumps().replace('"by": "kernel"', '"by": ""'), "utf-8")
    for args, words in (((fx("wwr")[0], "--kernel", watch), "the watch trace is of"),
                        ((cap, "--kernel", str(model)), "not a watch trace"),
                        ((cap, "--kernel", cap), "--kernel: "),
                        ((cap, "--kernel", str(tmp_path / "none.json")), "no such file")):
        bad = _cli(*args)
        assert bad.returncode == 2, (args, bad.stderr)
        assert words in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


# ---------------------------------------------------------------- on the running kernel
def _unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "watch and tcpdump need Linux"
    if os.geteuid() != 0:
        return "capturing and watching need root (tcpdump on lo, BPF)"
    for tool in ("tcpdump", "gcc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/run installs it)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux): watch cannot run"
    try:
        from realnet.watch.libbpf import lib
        lib()
    except Exception as exc:  # noqa: BLE001 - any failure: watch cannot run here
        return f"libbpf: {exc}"
    return None


real = pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))


@pytest.mark.realnet
@real
def test_real_programs_joined_on_this_kernel(tmp_path: Path) -> None:
    """The programs run again here: tcpdump and ``nagle-sim watch -o`` on the same
    connection, then ``explain --kernel``. Every Nagle stall of write-write-read is the
    kernel's Nagle hold and the server's delayed-ACK timer (the timer fires a jiffy or
    two late under load: 40-60 ms allowed); the corked writer's stalls are cork and the
    MSG_MORE writer's msg_more, each released by the probe timer (200 ms floor, the
    wheel's rounding and load: 195-260 ms), all at confidence 1."""
    from .watchcap import PROGRAMS, capture_and_watch
    corked = tmp_path / "corked"
    subprocess.run(["gcc", "-O1", "-o", str(corked), str(PROGRAMS / "corked.c")],
                   check=True, timeout=120)
    runs = {"wwr": ([sys.executable, str(PROGRAMS / "wwr.py"), "before"], 13, 13, 6),
            "cork": ([str(corked), "cork"], 30, 20, 3),
            "more": ([str(corked), "more"], 30, 20, 3)}
    for name, (argv, request, reply, rounds) in runs.items():
        pcap, trace, err = capture_and_watch(tmp_path, argv, request=request, reply=reply,
                                             rounds=rounds, name=name)
        assert "Traceback" not in err
        ex = explain_file(str(pcap), kernel=load_watch(str(trace)))
        decided = [s for s in ex.stalls if s.decided_by == "kernel"]
        if name == "wwr":
            held = [s for s in ex.stalls if "nagle" in s.causes]
            # every round after the first (the server ACKs it at once: quick-ACK credit)
            assert len(held) >= rounds - 2, [(s.cause, s.duration) for s in ex.stalls]
            for s in held:
                assert s.causes == ["nagle", "delayed_ack"] and s.confidence == 1.0
                assert s.decided_by == "kernel"
                assert 38 <= held_ms(s, "Nagle") <= 60, s.text
                assert any(ln.startswith("timer_fired DELACK_FIRED")
                           for ln in kernel_lines(s))
        else:
            cause = "cork" if name == "cork" else "msg_more"
            long = [s for s in ex.stalls if cause in s.causes]
            # one a round; on a loaded machine the server's reply can be late too, which
            # the kernel shows as the server's idle application, not as a hold
            assert len(long) == rounds, [(s.cause, s.duration) for s in ex.stalls]
            for s in long:
                assert s.causes == [cause]
                assert s.confidence == 1.0 and s.decided_by == "kernel"
                words = "TCP_CORK" if name == "cork" else "MSG_MORE"
                assert 195 <= held_ms(s, words) <= 260, s.text
                assert any(ln.startswith("timer_fired PROBE0_RELEASE")
                           for ln in kernel_lines(s))
            assert all(s.causes == ["app"] for s in ex.stalls if s not in long)
        assert decided, name


def held_ms(stall, by: str) -> float:  # type: ignore[no-untyped-def]
    """How long the kernel held the data ("… held 208.6 ms by TCP_CORK …"): the probe
    timer's or the delayed-ACK timer's own time, without the scheduling delay before
    the write that a loaded machine adds to the quiet gap on the wire."""
    m = re.search(r"held ([0-9.]+) ms by " + by, stall.text)
    assert m is not None, stall.text
    return float(m.group(1))
