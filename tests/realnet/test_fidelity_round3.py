"""Real-kernel agreement for issue 26's rules (fidelity round 3), each on a scenario of our
own written in the scenario language's new statements (`shutdown`, `write N eor`, `set
sndbuf`): the kernel (realnet, over the emulated link) and the model at the real run's
jiffy phase must take the same decision at times that agree within the jiffy allowance
of tests/realnet/test_fidelity_rules.py. The packetdrill scripts for the same rules are
in tests/drill/, the model-only tests in tests/model/test_fidelity_round3.py. Needs root.
"""

from __future__ import annotations

import sys

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from test_fidelity_rules import _check_twice, _data, _kernel_info, _model_tcp_info, _near

from nagle_sim.compare import aligned_model_run
from nagle_sim.model.endpoint import TcpInfo
from nagle_sim.model.events import Side
from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, SegmentRecord, Trace
from realnet.runner import run_real

pytestmark = [pytest.mark.realnet, pytest.mark.usefixtures("requires_root_netns")]


def _near_wheel(real_us: int, model_us: int, what: str) -> None:
    """A timer 63 jiffies or more ahead sits on the wheel's level 1 and fires on its
    8-jiffy grid (calc_wheel_index); where that grid lies is the kernel's jiffies counter
    mod 8, which a real run does not report, so the model's grid may be up to 7 jiffies
    off the kernel's on top of the usual allowance."""
    slack = 7 * 4_000
    assert model_us - 4_000 - slack <= real_us <= model_us + 8_000 + slack, (
        f"{what}: kernel {real_us / 1000:.1f} ms, model {model_us / 1000:.1f} ms "
        "(allowed: 1 jiffy early, 2 late, and 7 for the wheel's grid)")


def _sent(trace: Trace, side: Side) -> list[SegmentRecord]:
    return [s for s in trace.segments if s.src is side]


def _shape(segs: list[SegmentRecord]) -> list[tuple[str, int, int]]:
    """(flags, relative seq, length) of each segment: what was decided, not when."""
    return [(s.flags, s.seq, s.length) for s in segs]


SHUT_WR = """
title = "shutdown wr: the FIN follows the data at once, the half-closed side still reads"
[link]
delay_ms = 5
[client]
script = "write 100; shutdown wr; read 50"
[server]
script = "read 100; write 50"
"""


def test_shutdown_wr_sends_the_fin_and_still_reads() -> None:
    """tcp_shutdown → tcp_send_fin: SHUT_WR queues the FIN behind the 100 B and pushes
    it (FIN_WAIT1), and the client then reads the server's reply; the client's segments
    and the FIN's time after the data agree."""
    def check(real: Trace, sim: Trace) -> None:
        shapes = []
        for trace in (real, sim):
            segs = [s for s in _sent(trace, Side.CLIENT) if s.length or "F" in s.flags]
            shapes.append(_shape(segs)[:2])
            fin = next(s for s in segs if "F" in s.flags)
            data = next(s for s in segs if s.length)
            assert fin.t - data.t < 4_000, f"{trace.source}: FIN {fin.t - data.t} µs late"
        assert shapes[0] == shapes[1] == [("PA", 1, 100), ("FA", 101, 0)], shapes
        assert [o.op for o in real.ops if o.side is Side.CLIENT][-1] == "read"
    _check_twice(loads(SHUT_WR), check)


SHUT_RDWR = """
title = "shutdown rdwr, then the peer's data: a reset"
[link]
delay_ms = 5
[client]
script = "write 100; shutdown rdwr; sleep 50ms"
[server]
script = "read 100; sleep 20ms; write 50; sleep 30ms"
"""


def test_data_after_shutdown_rdwr_is_answered_with_a_reset() -> None:
    """tcp_rcv_state_process in FIN_WAIT1/2 with RCV_SHUTDOWN: new data resets the
    connection (tcp_reset, LINUX_MIB_TCPABORTONDATA); the reset leaves as the 50 B
    arrive."""
    def check(real: Trace, sim: Trace) -> None:
        got = []
        for trace in (real, sim):
            rst = [s for s in _sent(trace, Side.CLIENT) if "R" in s.flags]
            reply = _data(trace, Side.SERVER)
            assert len(rst) == 1 and len(reply) == 1, f"{trace.source}: {rst} {reply}"
            got.append(rst[0].t - reply[0].t)
        _near(got[0], got[1], "reset after the reply was sent")
    _check_twice(loads(SHUT_RDWR), check)


EOR = """
title = "MSG_EOR: the next write does not join the held record"
[link]
delay_ms = 5
[client]
script = "write 1000; write 100 eor; write 100; read 1"
[server]
script = "read 1200; write 1"
"""


def test_a_record_end_keeps_the_next_write_out_of_the_held_skb() -> None:
    """tcp_skb_can_collapse_to: the 100 B held by Nagle behind the unACKed 1000 B ends a
    record, so the next 100 B start a skb of their own: two segments, not one of 200 B.
    The initial ssthresh is TCP_INFINITE_SSTHRESH (0x7fffffff) on both."""
    snaps: list[TcpInfo] = []

    def check(real: Trace, sim: Trace) -> None:
        shapes = [_shape(_data(t, Side.CLIENT)) for t in (real, sim)]
        assert shapes[0] == shapes[1] == [("PA", 1, 1000), ("PA", 1001, 100),
                                          ("PA", 1101, 100)], shapes
        kernel = _kernel_info(real, Side.CLIENT, "snd_ssthresh")
        assert kernel and kernel[0] == 0x7FFFFFFF == snaps[0].snd_ssthresh, (kernel, snaps)
    _check_twice(loads(EOR), check, _model_tcp_info(Side.CLIENT, snaps))


SNDBUF = """
title = "a 4 kB send buffer: the write blocks and the flights stay the kernel's"
[link]
delay_ms = 5
quickack = true
[client]
script = "set sndbuf 4k; write 100000; read 1"
[server]
script = "read 100000; write 1"
"""


def test_a_small_send_buffer_blocks_the_write_as_the_kernel_does() -> None:
    """SO_SNDBUF (sock_setsockopt: doubled, no more tcp_sndbuf_expand), checked by
    sk_stream_memory_free per skb in tcp_sendmsg_locked: the 100 kB write blocks and is
    copied as ACKs free the queue, so each round trip carries what the buffer lets in;
    the data segments of the first four round trips and the write's return agree.

    The route is quick-ACK (every segment ACKed on arrival) to keep a receiver race out
    of a test about the sender. Without it the kernel parts two ways (18 runs: 13 sent
    10, 20, 36, 4 segments per round trip, as the model does, and 5 sent 10, 20, 2, 33):
    the quick-ACK budget runs out inside the second flight, and whether its last
    segment is ACKed at once depends on whether it arrived before the reader's last read
    of the flight (__tcp_cleanup_rbuf ACKs more than one rcv_mss unACKed) or after it
    (one full segment alone: no ACK on arrival or on the read, the delayed-ACK timer),
    microseconds either way. In the second case that segment's skb and the 2 segments
    the writer added keep the queue above the mark an ACK must bring it under to wake
    the writer (2/3 of sk_sndbuf, sk_stream_write_space; 2280 + 3728 B against 5461 B
    by the model's truesize), so the write waits a round trip more. The model's
    rate-less link delivers a flight at one instant, so its reader always takes the
    tail at once: the first case. With the quick-ACK route 22 runs of 22 agreed
    (docs/model.md, "the burst-arrival race")."""
    def check(real: Trace, sim: Trace) -> None:
        rounds = []
        for trace in (real, sim):
            data = _data(trace, Side.CLIENT)
            t0 = data[0].t
            per = [0] * 4
            for s in data:
                k = (s.t - t0 + 2_000) // 10_000       # 10 ms round trips
                if k < 4:
                    per[k] += 1
            rounds.append(per)
        assert rounds[0] == rounds[1], rounds
        ends = [next(o.end for o in t.ops if o.side is Side.CLIENT and o.op == "write")
                for t in (real, sim)]
        _near(ends[0], ends[1], "the blocking write returned")
    _check_twice(loads(SNDBUF), check)


FIN_CWND = """
title = "close after a full initial window: the FIN waits for the congestion window"
[link]
delay_ms = 10
[client]
script = "write 14480; close"
[server]
script = "read 14480"
"""


def test_the_fin_waits_for_the_congestion_window() -> None:
    """tcp_cwnd_test has no FIN exception since 6.10 ("tcp: remove dubious FIN exception
    from tcp_cwnd_test()"): ten full segments fill cwnd 10, so the FIN leaves with the
    first ACK, a round trip later, not with the burst."""
    def check(real: Trace, sim: Trace) -> None:
        got = []
        for trace in (real, sim):
            segs = _sent(trace, Side.CLIENT)
            fin = next(s for s in segs if "F" in s.flags)
            last = _data(trace, Side.CLIENT)[-1]
            assert fin.length == 0 and fin.t - last.t > 15_000, (trace.source, fin, last)
            got.append(fin.t - last.t)
        _near(got[0], got[1], "FIN after the last data segment")
    _check_twice(loads(FIN_CWND), check)


DROP = """
title = "one segment lost in 60 kB: fast retransmit"
[link]
delay_ms = 10
drop = ["to_server data 20"]
[client]
script = "write 60000; read 1"
[server]
script = "read 60000; write 1"
"""


def test_one_lost_segment_is_fast_retransmitted_a_round_trip_later() -> None:
    """tcp_fastretrans_alert: the duplicate ACKs of the segments behind the hole mark it
    lost (the kernel by SACK and RACK, the model by three duplicate ACKs without SACK);
    either way the one retransmission leaves as they arrive, a round trip after the
    original, and nothing else is resent."""
    def check(real: Trace, sim: Trace) -> None:
        got = []
        for trace in (real, sim):
            first: dict[int, int] = {}
            again = []
            for s in _data(trace, Side.CLIENT):
                if s.seq in first:
                    again.append((s.seq, s.t - first[s.seq]))
                first.setdefault(s.seq, s.t)
            assert len(again) == 1, f"{trace.source}: retransmitted {again}"
            got.append(again[0])
        assert got[0][0] == got[1][0], got
        _near(got[0][1], got[1][1], "retransmission after the original")
    _check_twice(loads(DROP), check)


ZERO_WINDOW = """
title = "nobody reads for 3 s on a 100 ms path: zero-window probes, then a restart"
[link]
delay_ms = 50
[client]
script = "write 300000; read 1"
[server]
script = "sleep 3s; read 300000; write 1"
"""


def test_zero_window_probe_then_cwnd_restart_on_the_window_update() -> None:
    """The first zero-window probe (tcp_probe0_when, RTO ~300 ms: 75 jiffies, on timer
    wheel level 1 and so rounded up to 8 jiffies, calc_wheel_index) after the zero
    window arrives; when the reader opens the window 2 s idle later,
    tcp_ack_update_window → tcp_slow_start_after_idle_check restarts cwnd, so the first
    flight is ten segments, not the pre-idle window."""
    def check(real: Trace, sim: Trace) -> None:
        probes, flights = [], []
        for trace in (real, sim):
            zero = next(s for s in _sent(trace, Side.SERVER) if s.window == 0)
            assert zero.arrive is not None
            after = [s for s in _sent(trace, Side.CLIENT) if s.t > zero.arrive]
            probe = after[0]
            assert probe.length == 0 and "F" not in probe.flags, (trace.source, probe)
            probes.append(probe.t - zero.arrive)
            burst = [s for s in after if s.length]
            flights.append(len([s for s in burst if s.t - burst[0].t < 20_000]))
        _near(probes[0], probes[1], "first zero-window probe after the zero window")
        assert flights[0] == flights[1] == 10, flights
    _check_twice(loads(ZERO_WINDOW), check)


USER_TIMEOUT = """
title = "TCP_USER_TIMEOUT: retransmissions unanswered for 1 s drop the connection"
[link]
delay_ms = 50
drop = ["to_server data 2-100"]
[client]
script = "set user_timeout 1s; write 100; sleep 200ms; write 2000; read 1"
[server]
script = "read 2100; write 1"
"""


def test_the_user_timeout_drops_the_connection_as_the_kernel_does() -> None:
    """Two segments lost for good: the loss probe, then RTOs (backed off, on the timer
    wheel), and tcp_write_timeout gives up once TCP_USER_TIMEOUT has passed since the
    first RTO retransmission (retrans_stamp), the next timer clamped to it
    (tcp_clamp_rto_to_user_timeout): the blocked read fails with ETIMEDOUT. Every
    retransmission, and the moment the read fails, agree."""
    failures: list[str] = []
    for _attempt in range(2):
        real = run_real(loads(USER_TIMEOUT))
        sim = aligned_model_run(loads(USER_TIMEOUT), real, run_sim)
        try:
            for trace in (real, sim):
                assert trace.outcome is Outcome.ERROR, (trace.source, trace.outcome)
                assert "timed out" in trace.message, trace.message
            sent = [[s.t for s in _data(t, Side.CLIENT)] for t in (real, sim)]
            assert len(sent[0]) == len(sent[1]) == 6, sent
            _near(sent[0][3] - sent[0][2], sent[1][3] - sent[1][2], "the loss probe")
            for i in range(4, 6):
                _near_wheel(sent[0][i] - sent[0][i - 1], sent[1][i] - sent[1][i - 1],
                            f"RTO retransmission {i - 3} after the one before")
            read = next(o for o in real.ops if o.side is Side.CLIENT and o.op == "read")
            assert read.end is not None
            gave_up = next(e.t for e in sim.events
                           if e.side is Side.CLIENT and e.code == "WRITE_TIMEOUT")
            _near_wheel(read.end, gave_up, "the read failed (ETIMEDOUT)")
            return
        except AssertionError as e:
            failures.append(str(e))
    pytest.fail("two real runs disagree with the model:\n  " + "\n  --\n  ".join(failures))


TS_RTT = """
title = "a loss probe over 1 Mbit/s: the ACK of the probed segment is timed by its echo"
[link]
delay_ms = 0
rate = "1mbit"
[client]
nodelay = true
script = "write 4011; read 2; sleep 20ms"
[server]
script = "read 4011; sleep 20ms; write 2"
"""


def test_an_ack_of_probed_data_is_timed_by_its_timestamp_echo() -> None:
    """Three segments take 35 ms to cross 1 Mbit/s; the tail loss probe (2·SRTT + 2 ms
    after a 1 ms handshake) re-sends the last one long before the original arrives. Its
    ACK covers retransmitted data, so Karn bars the ACK's own timing, and
    tcp_ack_update_rtt takes now − TSecr instead (~34 ms, the original's echo): TCP_INFO's
    SRTT after the read is ~8.9 ms on the kernel (5.3 ms without that sample), and the
    model's, read at the same moment, agrees within 1.5 ms."""
    snaps: list[TcpInfo] = []

    def check(real: Trace, sim: Trace) -> None:
        probes = [s for s in _data(real, Side.CLIENT) if s.seq == 2897]
        assert len(probes) == 2, ("the kernel sent no loss probe", probes)
        kernel = _kernel_info(real, Side.CLIENT, "rtt")
        read_at = next(i for i, e in enumerate(
            e for e in real.events if e.kind == "tcp_info" and e.side is Side.CLIENT)
            if "read" in e.detail)
        assert kernel[read_at] > 7_000, kernel
        assert abs(snaps[read_at].rtt - kernel[read_at]) <= 1_500, (kernel, snaps)
    _check_twice(loads(TS_RTT), check, _model_tcp_info(Side.CLIENT, snaps))


def test_the_model_takes_the_emulated_paths_latency_and_the_kernels_probe_timing() -> None:
    """validate --random seed 51 (1 Mbit/s, no delay): the server's loss probe timeout,
    2·SRTT + 2 ms after a ~1 ms handshake, sits on the 4 ms line. The kernels' handshake
    RTTs (TCP_INFO) are 100-150 µs longer than the link's two packets (the TUN devices and
    the relay), enough for two jiffies where the bare model took one; its early probe
    took the server out of ping-pong and it ACKed what the kernel delayed. compare gives
    the model the measured latency per packet, and the runs agree."""
    from nagle_sim.compare import compare, profiles_of
    from nagle_sim.scenario.generator import random_scenario

    scenario = loads(random_scenario(51).text)

    def check(real: Trace, sim: Trace) -> None:
        assert 20 <= sim.meta.get("path_latency_us", 0) <= 300, sim.meta
        result = compare(sim, real, profiles=profiles_of(scenario))
        assert result.agree, result.problems
    _check_twice(scenario, check)
