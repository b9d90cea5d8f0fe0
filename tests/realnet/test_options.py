"""Real-kernel agreement for the congestion controls, the socket/route/sysctl options and
the link rate: each test runs a scenario on real sockets and on the model (at the real
run's jiffy phase) and asserts the kernel's decisions — flights, which ACK is immediate,
how many packets the queue dropped, RTO values in whole jiffies — with jiffy tolerance,
never tight wall times. Needs root (namespaces, TUN, AF_PACKET).

A run that disagrees gets one more try (this shared VM can fire a timer a jiffy late);
the test fails only when two runs in a row disagree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from nagle_sim.compare import aligned_model_run, compare
from nagle_sim.model.events import Side
from nagle_sim.scenario import ScenarioError, loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace
from realnet.host import RealnetError
from realnet.runner import run_real

pytestmark = [pytest.mark.realnet, pytest.mark.usefixtures("requires_root_netns")]

JIFFY_MS = 4.0


def both(text: str, *overrides: str,
         check: Callable[[Trace, Trace], None] | None = None) -> tuple[Trace, Trace]:
    """(model, kernel) traces of one scenario; compare() must agree, and ``check`` (if
    given) must hold for both runs, within two attempts."""
    scenario = loads(text, "<test>", list(overrides))
    problems = []
    for _attempt in range(2):
        real = run_real(scenario)
        assert real.segments, real.meta.get("capture")
        sim = aligned_model_run(scenario, real, run_sim)
        result = compare(sim, real)
        try:
            assert result.agree, "\n".join(result.problems) or result.verdict
            if check is not None:
                check(sim, real)
            return sim, real
        except AssertionError as exc:
            problems.append(str(exc))
    raise AssertionError("two runs disagreed with the model:\n" + "\n---\n".join(problems))


def data_times(trace: Trace, side: Side) -> list[float]:
    return [s.t / 1000 for s in trace.segments if s.src is side and s.length]


def flights(times: list[float], gap_ms: float = 5.0) -> list[int]:
    out: list[int] = []
    last = None
    for t in times:
        if last is None or t - last > gap_ms:
            out.append(0)
        out[-1] += 1
        last = t
    return out


def pure_acks(trace: Trace, side: Side, after_ms: float = 0.0) -> list[float]:
    return [s.t / 1000 for s in trace.segments
            if s.src is side and s.is_pure_ack and s.t / 1000 > after_ms]


# ---------------------------------------------------------------- congestion control
BULK = """
[link]
delay_ms = 10
[client]
{client}
script = "write 100000\\nread 1"
[server]
script = "read 100000\\nwrite 1"
"""


def test_cubic_slow_start_flights_are_ten_twenty_forty() -> None:
    """The default profile is stock CUBIC; the kernel (set per socket) sends 10, 20 and
    the remaining 40 of 70 segments one RTT apart, as the model does."""
    def check(sim: Trace, real: Trace) -> None:
        assert real.meta["congestion_control"] == {"client": "cubic", "server": "cubic"}
        for trace in (sim, real):
            assert flights(data_times(trace, Side.CLIENT)) == [10, 20, 40]

    both(BULK.format(client=""), check=check)


def test_congestion_is_set_per_side() -> None:
    def check(sim: Trace, real: Trace) -> None:
        assert real.meta["congestion_control"] == {"client": "reno", "server": "bbr"}
        assert not real.meta.get("notes"), real.meta.get("notes")
        assert flights(data_times(real, Side.CLIENT)) == [10, 20, 40]

    both(BULK.format(client='congestion = "reno"'), "server.congestion=bbr", check=check)


# ---------------------------------------------------------------- socket options
PINGPONG_RECEIVER = """
[link]
delay_ms = 5
{link}
[client]
script = "sleep 50ms\\nwrite 100\\nread 1"
[server]
quickack = false
script = "{server}read 100\\nsleep 100ms\\nwrite 1"
"""


def _ack_delay_ms(trace: Trace) -> float:
    """How long the server held the ACK of the client's data (arrival to ACK)."""
    data = next(s for s in trace.segments if s.src is Side.CLIENT and s.length)
    ack = next(s for s in trace.segments if s.src is Side.SERVER and s.is_pure_ack
               and s.t > data.t)
    return (ack.t - data.t) / 1000 - 5.0


def test_delack_max_caps_the_delayed_ack() -> None:
    """TCP_DELACK_MAX_US = 5 ms is 2 jiffies at HZ=250: the ping-pong receiver's ACK goes
    ~8 ms after the data instead of ~40 ms (a loaded VM fires timers a jiffy or two late,
    hence the slack; the default is still 20 ms further away)."""
    def capped(sim: Trace, real: Trace) -> None:
        for trace in (sim, real):
            assert _ack_delay_ms(trace) <= 2 * JIFFY_MS + 3 * JIFFY_MS

    def default(sim: Trace, real: Trace) -> None:
        for trace in (sim, real):
            assert _ack_delay_ms(trace) >= 40 - JIFFY_MS

    both(PINGPONG_RECEIVER.format(link="", server="set delack_max 5ms\\n"), check=capped)
    both(PINGPONG_RECEIVER.format(link="", server=""), check=default)


RTO_MIN = """
[link]
delay_ms = 5
[client]
script = "{set}repeat 5 {{ write 100; read 100 }}"
[server]
script = "repeat 5 {{ read 100; write 100 }}"
"""
RTO_DECAY_MS = [212, 176, 148, 128, 112]
"""tcpi_rto after each of the five 10 ms exchanges with rto_min 50 ms (13 jiffies): rttvar
starts at 200 ms from the handshake and decays a quarter of its excess per RTT. The model
test tests/model/test_profiles_cc.py checks the model against these same numbers."""


def _rto_after_reads(trace: Trace) -> list[float]:
    snaps = [e for e in trace.events if e.kind == "tcp_info" and e.side is Side.CLIENT
             and e.detail.startswith("after read")]
    return [e.data["rto"] / 1000 for e in snaps]


def test_rto_min_lowers_the_rto_over_a_few_round_trips() -> None:
    def lowered(sim: Trace, real: Trace) -> None:
        got = _rto_after_reads(real)
        assert len(got) == 5
        assert all(abs(g - w) <= JIFFY_MS for g, w in zip(got, RTO_DECAY_MS, strict=True)), got

    def default(sim: Trace, real: Trace) -> None:
        assert all(r >= 200 for r in _rto_after_reads(real))

    both(RTO_MIN.format(set="set rto_min 50ms\\n"), check=lowered)
    both(RTO_MIN.format(set=""), check=default)


# ---------------------------------------------------------------- route and sysctls
@pytest.mark.parametrize("delay", ["delay_ms = 5", "delay_ms = 0"], ids=["emulated", "loopback"])
def test_route_quickack_acks_at_once(delay: str) -> None:
    """`quickack 1` on the route makes every ACK immediate, even in ping-pong mode (the
    loopback run moves into a private namespace to set it)."""
    text = PINGPONG_RECEIVER.format(link="quickack = true", server="").replace(
        "delay_ms = 5", delay)
    offset = 5.0 if delay.endswith("5") else 0.0

    def check(sim: Trace, real: Trace) -> None:
        assert real.meta.get("route_quickack") is True
        for trace in (sim, real):
            # immediate, not delayed: well under one jiffy... but the VM may fire late, so
            # the bound is two jiffies, still ten times below a 40 ms delayed ACK
            assert _ack_delay_ms(trace) + 5.0 - offset <= 8.0

    _, real = both(text, check=check)
    if not offset:
        assert real.meta.get("netns", "").endswith("-l")


# The client closes 30 ms after the server's FIN arrives: with both closing at the same
# instant the two FINs raced (a pure ACK of the FIN, or not, by tens of µs).
PINGPONG_THRESH = """
[link]
delay_ms = 5
[client]
script = "repeat 4 { write 100; read 100 }\\nsleep 130ms"
[server]
tune = { pingpong_thresh = %d }
script = "repeat 4 { read 100; write 100 }\\nsleep 100ms"
"""


@pytest.mark.parametrize(("thresh", "separate_acks"), [(1, 1), (3, 3)])
def test_pingpong_thresh_sysctl_per_namespace(thresh: int, separate_acks: int) -> None:
    """net.ipv4.tcp_pingpong_thresh set in the server's namespace: with 3 the server needs
    three quick replies before it delays (and piggybacks) its ACKs."""
    def check(sim: Trace, real: Trace) -> None:
        assert real.meta["namespace_sysctls"] == {
            "server": {"net.ipv4.tcp_pingpong_thresh": str(thresh)}}
        for trace in (sim, real):
            before_close = [t for t in pure_acks(trace, Side.SERVER, after_ms=11) if t < 60]
            assert len(before_close) == separate_acks

    both(PINGPONG_THRESH % thresh, check=check)


def test_loopback_refuses_a_sysctl_on_one_side_only() -> None:
    scenario = loads((PINGPONG_THRESH % 3).replace("delay_ms = 5", "delay_ms = 0"), "<t>")
    with pytest.raises(RealnetError) as err:
        run_real(scenario)
    assert "\n" not in str(err.value) and "namespace" in str(err.value)


def test_pingpong_thresh_is_refused_on_a_kernel_without_the_sysctl(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pre-6.7 host (no /proc/sys/net/ipv4/tcp_pingpong_thresh): one line naming the
    side, the sysctl and the commit that added it, before any namespace is made."""
    from realnet import runner

    real_read = runner._read_sysctl

    def pre_6_7(key: str) -> str | None:
        return None if key == "net.ipv4.tcp_pingpong_thresh" else real_read(key)

    monkeypatch.setattr(runner, "_read_sysctl", pre_6_7)
    with pytest.raises(RealnetError) as err:
        run_real(loads(PINGPONG_THRESH % 3, "<t>"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("<t>: server tunes tcp_pingpong_thresh")
    assert "net.ipv4.tcp_pingpong_thresh" in msg and "562b1fdf061b" in msg


# ---------------------------------------------------------------- link rate
TINYGRAMS = """
[link]
delay_ms = 5
rate = "1mbit"
queue = %d
[client]
nodelay = true
script = "%s\\nread 1"
[server]
script = "read %d\\nwrite 1"
"""


def test_link_rate_serializes_packets() -> None:
    """At 1 Mbit/s each 62-byte ACK (10 B of data + 52 B of headers for the data, 52 B for
    an ACK) takes 0.416-0.5 ms on the wire: the server's ten quick ACKs of ten tinygrams
    arrive spaced by the data's serialization time, in the kernel and in the model."""
    def check(sim: Trace, real: Trace) -> None:
        for trace in (sim, real):
            acks = pure_acks(trace, Side.SERVER, after_ms=15)[:10]
            gaps = [b - a for a, b in zip(acks, acks[1:], strict=False)]
            assert len(gaps) == 9
            # spaced by the data's serialization (0.496 ms), not bunched: the median gap
            # within 0.1 ms, and none a jiffy long (the relay is a userspace process)
            assert abs(sorted(gaps)[len(gaps) // 2] - 62 * 8 / 1000) < 0.1, gaps
            assert all(0 < g < 4.0 for g in gaps), gaps

    both(TINYGRAMS % (100, "repeat 10 { write 10 }", 100), check=check)


def test_drop_tail_queue_drops_what_does_not_fit() -> None:
    """Ten back-to-back full segments into an idle link with a 4-packet queue at 1 Mbit/s
    (the write waits until the handshake's ACK has left, so nothing else is queued): the
    relay and the model both keep 4 and drop 6. (Recovery afterwards differs: the model
    has no SACK recovery, see docs/model.md.)"""
    scenario = loads(TINYGRAMS % (4, "sleep 5ms\\nwrite 14480", 14480), "<t>")
    real = run_real(scenario)
    sim = run_sim(scenario)
    assert real.meta.get("link_drops") == sim.meta.get("link_drops") == 6


def test_timing_options_are_validated_at_load() -> None:
    with pytest.raises(ScenarioError) as err:
        loads('[client]\nscript = "set rto_min 500ms"\n', "<t>")
    assert "TCP_RTO_MIN_US" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ScenarioError):
        loads('[client]\nprofile = "linux-6.6"\nscript = "set delack_max 5ms"\n', "<t>")


def test_an_unavailable_congestion_control_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without the module (ENOENT): one line naming the side and the module."""
    from realnet import sockopts

    def missing(name: str) -> str:
        return f"this kernel has no congestion control {name!r}" if name == "reno" else ""

    monkeypatch.setattr(sockopts, "congestion_missing", missing)
    with pytest.raises(RealnetError) as err:
        run_real(loads(BULK.format(client='congestion = "reno"'), "<t>"))
    msg = str(err.value)
    assert "\n" not in msg and "client" in msg and "'reno'" in msg


def test_initial_window_leaves_as_two_half_window_tso_skbs_on_loopback() -> None:
    """tcp_tso_autosize on loopback (min RTT < 512 µs, so tcp_tso_rtt_log allows a 64 KB
    skb) and tcp_cwnd_test's cwnd/2 cap: IW10 leaves as two 5-segment skbs, which lo
    passes whole to the capture — in the kernel and in the model."""
    scenario = loads(BULK.format(client="").replace("delay_ms = 10", "delay_ms = 0"), "<t>")
    real = run_real(scenario)
    sim = aligned_model_run(scenario, real, run_sim)
    for trace in (sim, real):
        sizes = [s.length for s in trace.segments if s.src is Side.CLIENT and s.length]
        assert sizes[:2] == [5 * 1448, 5 * 1448], sizes[:4]


def test_rto_min_leaves_the_cork_ceiling_alone() -> None:
    """tcp_probe0_base = max(RTO, TCP_RTO_MIN) uses the constant: after rto_min 50 ms has
    pulled the RTO down to ~112 ms, a corked write still waits ~200 ms."""
    text = """
[link]
delay_ms = 5
[client]
script = "set rto_min 50ms\\nrepeat 5 { write 100; read 100 }\\nset cork on\\nwrite 10\\nread 1"
[server]
script = "repeat 5 { read 100; write 100 }\\nread 10\\nwrite 1"
"""

    def check(sim: Trace, real: Trace) -> None:
        for trace in (sim, real):
            write = next(op for op in trace.ops if op.side is Side.CLIENT
                         and op.op == "write" and op.arg == "10")
            sent = next(s for s in trace.segments if s.src is Side.CLIENT and s.length == 10)
            assert 200 - JIFFY_MS <= (sent.t - write.start) / 1000 <= 200 + 3 * JIFFY_MS

    both(text, check=check)
