"""The five published experiments (shared/reference/seed-scenarios.md), reproduced by the
model with the figures this project's 6.18 kernel measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim import scenario
from nagle_sim.model import Side
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Trace
from nagle_sim.trace.summary import summarize

DATA = Path(__file__).parent.parent / "data"


def sim(name: str, *overrides: str) -> Trace:
    trace = run_sim(scenario.load(DATA / name, list(overrides)))
    assert trace.outcome is Outcome.OK, trace.message
    return trace


def latencies_ms(trace: Trace) -> list[float]:
    return [it.latency / 1000 for it in summarize(trace).iterations]


def data_lengths(trace: Trace, side: Side) -> list[int]:
    return [s.length for s in trace.segments if s.src is side and s.length]


# ---------------------------------------------------------------- S1
def test_s1_first_request_fast_then_each_stalls_40_to_44_ms() -> None:
    """Lesson: the write-write-read stall (Nagle holds write 2, the server delays its ACK)."""
    lat = latencies_ms(sim("s1_write_write_read.toml"))
    assert len(lat) == 12
    assert lat[0] < 1.0, "a new connection starts in quick-ACK mode"
    assert all(40.0 <= v <= 44.1 for v in lat[1:]), lat
    assert lat[2:] == [pytest.approx(44.0, abs=0.01)] * 10, "phase-locked to the 4 ms jiffy"


def test_s1_every_stall_is_nagle_released_by_the_delayed_ack() -> None:
    trace = sim("s1_write_write_read.toml")
    stalls = summarize(trace).stalls
    assert len(stalls) == 11
    assert {s.ended_code for s in stalls} == {"DELACK_FIRED"}
    assert all("Nagle" in s.held_by for s in stalls)


@pytest.mark.parametrize("variant", [
    ["client.nodelay=true"],
    ['client.script="repeat 12 { write 13; read 13 }"'],
    ['client.script="repeat 12 { writev 6 7; read 13 }"'],
])
def test_s1_fixes_stay_below_one_ms(variant: list[str]) -> None:
    lat = latencies_ms(sim("s1_write_write_read.toml", *variant))
    assert max(lat) < 1.0, lat


def test_s1_windows_server_stalls_200_ms() -> None:
    """S1's published Windows figure: the stall is the 200 ms Windows delayed-ACK timer."""
    lat = latencies_ms(sim("s1_write_write_read.toml", 'server.profile="windows"'))
    assert all(v == pytest.approx(200.0, abs=0.1) for v in lat[1:]), lat


# ---------------------------------------------------------------- S2
def test_s2_first_byte_alone_then_nine_together_one_rtt_later() -> None:
    """Lesson: Nagle basics. The ACK of "0" needs 500 ms to reach the server."""
    trace = sim("s2_node_ten_bytes.toml")
    data = [s for s in trace.segments if s.src is Side.SERVER and s.length]
    assert [s.length for s in data] == [1, 9]
    assert data[1].t - data[0].t == pytest.approx(500_000, abs=100)
    assert data[1].code == "ACK_RELEASE"


def test_s2_nodelay_sends_every_byte_at_once() -> None:
    trace = sim("s2_node_ten_bytes.toml", "server.nodelay=true")
    data = [s for s in trace.segments if s.src is Side.SERVER and s.length]
    assert [s.length for s in data] == [1] * 10
    assert data[-1].t - data[0].t < 1000


def test_s2_without_link_delay_acks_return_before_each_write() -> None:
    """Measured on loopback: each byte its own segment, all within 0.5 ms."""
    trace = sim("s2_node_ten_bytes.toml", "link.to_server_delay_ms=0")
    data = [s for s in trace.segments if s.src is Side.SERVER and s.length]
    assert [s.length for s in data] == [1] * 10
    assert data[-1].t - data[0].t < 500


# ---------------------------------------------------------------- S3
def test_s3_default_first_message_15_segments_then_2_per_message() -> None:
    trace = sim("s3_cork_vs_nodelay.toml")
    lengths = data_lengths(trace, Side.CLIENT)
    assert lengths[:15] == [2] * 15, "receiver in quick-ACK mode ACKs each at once"
    assert lengths[15:] == [2, 28] * 19
    lat = latencies_ms(trace)
    assert lat[0] < 1.0 and all(40.0 <= v <= 44.1 for v in lat[1:])


def test_s3_cork_sends_one_segment_per_message() -> None:
    trace = sim("s3_cork_vs_nodelay.toml", 'client.script="""repeat 20 { set cork on; '
                'repeat 15 { write 2 }; set cork off; read 2 }"""')
    assert data_lengths(trace, Side.CLIENT) == [30] * 20
    assert max(latencies_ms(trace)) < 1.0


def test_s3_nodelay_sends_one_segment_per_write() -> None:
    trace = sim("s3_cork_vs_nodelay.toml", "client.nodelay=true")
    assert data_lengths(trace, Side.CLIENT) == [2] * 300
    assert max(latencies_ms(trace)) < 1.0


def test_s3_cork_is_faster_than_nodelay() -> None:
    """The RHEL figures: cork about twice as fast as NODELAY (one packet per message)."""
    cork = sum(latencies_ms(sim("s3_cork_vs_nodelay.toml", 'client.script="""repeat 20 { set '
                                'cork on; repeat 15 { write 2 }; set cork off; read 2 }"""')))
    nodelay = sum(latencies_ms(sim("s3_cork_vs_nodelay.toml", "client.nodelay=true")))
    assert cork < nodelay


# ---------------------------------------------------------------- S4
def _client_ack_delays(trace: Trace) -> list[int]:
    """For each server data byte, µs from its arrival to the client's next segment."""
    segs = trace.segments
    out = []
    for i, seg in enumerate(segs):
        if seg.src is Side.SERVER and seg.length:
            reply = next(s for s in segs[i + 1:] if s.src is Side.CLIENT)
            assert seg.arrive is not None
            out.append(reply.t - seg.arrive)
    return out


def test_s4_quickack_off_before_each_round_delays_the_ack_40_to_44_ms() -> None:
    delays = _client_ack_delays(sim("s4_quickack.toml"))
    assert len(delays) == 4
    assert all(40_000 <= d <= 44_000 for d in delays), delays


def test_s4_a_fin_behind_the_byte_is_probed_before_the_delayed_ack() -> None:
    """Kernel 6.18 (realnet): with the byte and a FIN unACKed, the server's tail loss probe
    re-sends the FIN after usecs_to_jiffies(2·SRTT + 2 ms) (~33 ms, SRTT inflated by the
    delayed ACKs; 1c2709cfff1d), and the duplicate is ACKed at once — before the client's
    40 ms timer."""
    trace = sim("s4_quickack.toml", 'server.script="repeat 4 { read 1; write 1 }"')
    probes = [s for s in trace.segments if s.code == "LOSS_PROBE"]
    assert len(probes) == 1 and probes[0].src is Side.SERVER and "F" in probes[0].flags
    delays = _client_ack_delays(trace)
    assert all(40_000 <= d <= 44_000 for d in delays[:3]), delays
    assert 30_000 <= delays[3] <= 37_000, delays


def test_s4_by_default_the_ack_is_immediate_every_round() -> None:
    trace = sim("s4_quickack.toml", 'client.script="repeat 4 { write 1; read 1; sleep 300ms }"')
    assert _client_ack_delays(trace) == [0, 0, 0, 0]


def test_s4_getsockopt_quickack_reads_not_pingpong() -> None:
    """getsockopt(TCP_QUICKACK) reads 1 on a new socket and while the quick-ACK budget is
    spent (visibly delaying ACKs); 0 only in ping-pong mode."""
    trace = sim("s4_quickack.toml", 'client.script="get quickack; set quickack off; '
                'get quickack; write 1; read 1; set quickack on; get quickack"',
                'server.script="read 1; write 1"')
    assert [o.result for o in trace.ops if o.op == "get"] == ["1", "0", "1"]


def test_s4_quickack_on_is_not_sticky() -> None:
    """tcp(7): TCP_QUICKACK=1 is undone by the next reply within ato (ping-pong again)."""
    trace = sim("s4_quickack.toml",
                'client.script="set quickack on; get quickack; write 1; read 1; write 1; '
                'get quickack"', 'server.script="read 1; write 1; read 1"')
    assert [o.result for o in trace.ops if o.op == "get"] == ["1", "0"]


def test_a_run_stops_between_events_once_cancelled() -> None:
    """A superseded run (the app started a newer one, or is quitting) stops when asked,
    instead of running to the end of a long scenario."""
    from nagle_sim.sim.driver import RunCancelled

    sc = scenario.loads("[client]\nscript = 'repeat 100000 { write 1; read 1 }'\n"
                        "[server]\nscript = 'repeat 100000 { read 1; write 1 }'", "long.toml")
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(RunCancelled):
        run_sim(sc, cancelled=cancelled)
    assert len(asked) == 3
