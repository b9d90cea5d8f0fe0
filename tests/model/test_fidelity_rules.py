"""Model tests for the rules of issue 11 ("rules to fix"): each one drives the model where
the rule decides and asserts the kernel's decision. The real-kernel agreement tests on
the same shapes are in tests/realnet/test_fidelity_rules.py."""

from __future__ import annotations

from nagle_sim import scenario
from nagle_sim.model import PROFILES, Side, SocketOptions
from nagle_sim.model.events import Timer
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Trace

from .harness import Harness, connect, ms

LINUX = PROFILES["linux"]


def sim(text: str) -> Trace:
    trace = run_sim(scenario.loads(text))
    assert trace.outcome is Outcome.OK, trace.message
    return trace


def established_server(rtt_ms: float = 10, **kw: object) -> Harness:
    """A server whose SRTT is ``rtt_ms`` (the handshake's sample)."""
    h = Harness(side=Side.SERVER, mss=1000, **kw)  # type: ignore[arg-type]
    h.accept(0, ms(rtt_ms))
    return h


# ---------------------------------------------------------------- 1. TLP timeout
def _tlp_delay(h: Harness, nbytes: int) -> int:
    """Write ``nbytes`` (never ACKed) and return µs until the loss probe leaves."""
    t0 = h.now
    h.write(t0, nbytes)
    first = len(h.out)
    h.advance(t0 + ms(300))
    probes = [s for s in h.out[first:] if s.seg.why.name == "LOSS_PROBE"]
    assert probes, h.out
    return probes[0].t - t0


def test_tlp_adds_the_2_ms_floor_before_rounding_to_jiffies() -> None:
    """tcp_schedule_loss_probe since 1c2709cfff1d: usecs_to_jiffies(2·SRTT + 2000 µs)
    with two packets out. SRTT 10 ms: 22 ms → 6 jiffies (24 ms), plus the timer wheel's
    tick; the pre-2023 rule (5 jiffies + TCP_TIMEOUT_MIN = 7) probes one tick later."""
    new = _tlp_delay(established_server(10), 2000)
    old = _tlp_delay(established_server(
        10, profile=LINUX.with_overrides(tlp_timeout_in_us=False)), 2000)
    assert 24_000 <= new <= 28_000, new
    assert old - new == 4_000, (old, new)


def test_tlp_with_one_packet_out_adds_rto_min() -> None:
    """One packet out: 2·SRTT + TCP_RTO_MIN (for the peer's delayed ACK), but never later
    than the RTO (SRTT 10 ms: RTO 210 ms caps 220 ms)."""
    delay = _tlp_delay(established_server(10), 100)
    assert 208_000 <= delay <= 216_000, delay


# ---------------------------------------------------------------- 2. SYN-ACK in ping-pong
R2 = """
title = "SYN-ACK in ping-pong"
[link]
delay_ms = 50
[client]
quickack = false
script = "sleep 300ms; set quickack off; write 1; read 1; sleep 300ms"
[server]
script = "read 1; write 1; sleep 500ms"
"""


def test_synack_in_pingpong_leaves_it_and_the_timer_then_inflates_ato() -> None:
    """tcp_rcv_synsent_state_process → tcp_enter_quickack_mode leaves ping-pong; the ACK
    of the SYN-ACK waits TCP_DELACK_MAX (200 ms); that timer fires outside ping-pong and
    doubles ato to 80 ms, so the ACK of the first reply takes 80-84 ms (kernel: 83 ms)."""
    trace = sim(R2)
    client = [s for s in trace.segments if s.src is Side.CLIENT]
    synack = next(s for s in trace.segments if s.src is Side.SERVER and "S" in s.flags)
    assert synack.arrive is not None
    assert client[1].code == "DELACK_FIRED"
    assert 200_000 <= client[1].t - synack.arrive <= 208_000
    pong = next(s for s in trace.segments if s.src is Side.SERVER and s.length)
    ack = next(s for s in client if s.t > pong.t)
    assert pong.arrive is not None and ack.code == "DELACK_FIRED"
    assert 80_000 <= ack.t - pong.arrive <= 84_000, ack.t - pong.arrive


def test_synack_in_pingpong_clears_the_pingpong_count() -> None:
    h = Harness(side=Side.CLIENT, mss=1000, options=SocketOptions(quickack=False))
    connect(h, 0)
    assert h.ep.in_pingpong
    h.peer(ms(10), seq=0, ack=1, flags="SA")
    assert not h.ep.in_pingpong
    assert h.ep.deadline(Timer.DELACK) is not None
    assert h.ep.tcp_info().quick > 0


# ---------------------------------------------------------------- 3. probe timer
R3 = """
title = "corked data while the peer sends"
[link]
delay_ms = 5
[client]
script = "set cork on; write 100; repeat 8 { read 10 }; sleep 300ms"
[server]
script = "sleep 20ms; repeat 8 { write 10; sleep 40ms }; read 100; sleep 300ms"
"""


def test_incoming_data_by_header_prediction_does_not_postpone_the_cork_release() -> None:
    """The first data segment takes the slow path (header prediction is off after a
    handshake with window scaling) and re-arms the probe timer; the later ones are
    predicted, skip tcp_ack, and leave it alone: the corked 100 bytes leave max(RTO,
    200 ms) after the first data, while the peer still sends (kernel: 214 ms)."""
    trace = sim(R3)
    release = next(s for s in trace.segments if s.src is Side.CLIENT and s.length)
    assert release.code == "PROBE0_RELEASE"
    data = [s for s in trace.segments if s.src is Side.SERVER and s.length]
    assert data[0].arrive is not None
    assert 208_000 <= release.t - data[0].arrive <= 220_000, release.t - data[0].arrive
    assert sum(1 for s in data if s.t < release.t) >= 5, "the peer kept sending meanwhile"


def test_header_prediction_needs_nothing_new_acked_and_the_same_window() -> None:
    """A data segment that changes the window goes the slow path (tcp_ack →
    tcp_ack_probe → re-armed from now); one that only repeats it does not."""
    h = Harness(side=Side.CLIENT, mss=1000, options=SocketOptions(cork=True))
    connect(h, 0)
    h.peer(ms(10), seq=0, ack=1, flags="SA")
    h.write(ms(10), 100)
    h.peer(ms(20), seq=1, ack=1, length=10, flags="PA")    # slow path: re-arms
    armed = h.ep.deadline(Timer.PROBE0)
    assert armed is not None and armed > ms(220)
    h.peer(ms(60), seq=11, ack=1, length=10, flags="PA")   # predicted
    assert h.ep.deadline(Timer.PROBE0) == armed
    h.peer(ms(100), seq=21, ack=1, length=10, flags="PA", window=60000)   # new window
    moved = h.ep.deadline(Timer.PROBE0)
    assert moved is not None and moved > armed


# ---------------------------------------------------------------- 4. receive window
R4 = """
title = "a receiver that does not read"
[link]
delay_ms = 5
[client]
script = "sleep 2s; read 200000"
[server]
script = "write 200000; sleep 2s"
"""


def test_offered_window_grows_then_closes_as_unread_data_piles_up() -> None:
    """Measured on this kernel (tcp_rmem[1] = 131072, MSS 1448, nobody reading): the
    window grows by two segments per segment for the first four (tcp_grow_window), then
    shrinks by the no-shrink rule (each ACK offers what is left of the last window,
    rounded up to 1 KB) and reaches 0 at 90233 B unread; reading re-opens it."""
    trace = sim(R4)
    acks = [s for s in trace.segments if s.src is Side.CLIENT and "S" not in s.flags]
    assert [a.window for a in acks[1:7]] == [67584, 70656, 73728, 76800, 75776, 74752]
    closed = next(a for a in acks if a.window == 0)
    assert 85_000 <= closed.ack - 1 <= 95_000, closed.ack
    read_at = 2_000_000
    assert all(a.window == 0 for a in acks if closed.t <= a.t < read_at)
    assert any(a.window > 60_000 for a in acks if a.t >= read_at)


def test_full_frame_ack_waits_when_unread_data_would_shrink_the_window() -> None:
    """__tcp_ack_snd_check: two unread segments are more than one full frame, but
    __tcp_select_window() < rcv_wnd (their truesize shrinks the free space), so the ACK
    is delayed (in ping-pong: no quick ACKs)."""
    h = Harness(side=Side.SERVER, mss=1448)
    h.accept(0, ms(1))
    h.setopt(ms(2), "quickack", False)
    h.take()
    h.peer(ms(2), seq=1, ack=1, length=300, flags="PA")
    h.peer(ms(3), seq=301, ack=1, length=300, flags="PA")
    assert h.take() == []
    h.advance(ms(300))
    (ack,) = h.take()
    assert ack.seg.why.name == "DELACK_FIRED" and ack.seg.ack == 601


def test_quick_ack_mode_ends_when_free_space_falls_below_half() -> None:
    """__tcp_select_window clears icsk_ack.quick once free space < half the full space
    (seen in /proc/net/tcp on this kernel). Spend the first budget, refill it after an
    idle RTO, and keep sending without reading: the refilled budget is dropped at about
    41 KB unread (half of the 81920-byte full space), long before it is spent."""
    h = Harness(side=Side.SERVER, mss=1448)
    h.accept(0, ms(1))
    seq, t = 1, ms(2)
    for _ in range(22):
        h.peer(t, seq=seq, ack=1, length=1448, flags="A")
        seq, t = seq + 1448, t + 100
    assert h.ep.tcp_info().quick == 0
    t += ms(1500)                                   # idle > RTO: tcp_incr_quickack refills
    h.peer(t, seq=seq, ack=1, length=1448, flags="A")
    seq, t = seq + 1448, t + 100
    assert h.ep.tcp_info().quick > 5
    h.ep.drain_events()
    while h.ep.tcp_info().quick:
        h.peer(t, seq=seq, ack=1, length=1448, flags="A")
        seq, t = seq + 1448, t + 100
    assert any(e.reason.name == "QUICK_DROPPED" for e in h.ep.drain_events())
    assert 38_000 <= h.ep.unread <= 46_000, h.ep.unread


# ---------------------------------------------------------------- 5. from packetdrill
def test_segment_for_a_closed_socket_gets_a_reset() -> None:
    """tcp_v4_send_reset (packetdrill close/close-on-syn-sent.pkt): close() in SYN_SENT,
    then the SYN-ACK arrives: the reset takes its ACK number, without ACK itself."""
    h = Harness(side=Side.CLIENT, mss=1000)
    connect(h, 0)
    h.close(ms(1))
    h.take()
    h.peer(ms(100), seq=0, ack=1, flags="SA")
    (rst,) = h.take()
    assert rst.flags == "R" and rst.seg.seq == 1 and rst.seg.window == 0
    h.peer(ms(110), seq=0, ack=0, flags="R")        # a reset is never answered
    assert h.take() == []


def test_reset_after_last_ack_and_for_a_segment_without_ack() -> None:
    """close-remote-fin-then-close.pkt: LAST_ACK → CLOSED; the next ACK gets R 2:2. A
    segment without ACK gets RST|ACK acknowledging what it occupied."""
    h = established_server(1)
    h.peer(ms(10), seq=1, ack=1, flags="FA")
    h.close(ms(20))
    h.peer(ms(30), seq=2, ack=2)
    assert h.ep.state.name == "CLOSED"
    h.take()
    h.peer(ms(40), seq=2, ack=2)
    (rst,) = h.take()
    assert rst.flags == "R" and rst.seg.seq == 2
    h.peer(ms(50), seq=2, ack=0, length=10, flags="P")
    (rst,) = h.take()
    assert rst.flags == "RA" and rst.seg.seq == 0 and rst.seg.ack == 12


def test_out_of_order_data_is_acked_at_once_and_so_is_the_filled_gap() -> None:
    """tcp_data_queue_ofo + __tcp_ack_snd_check: data beyond a gap draws an immediate
    duplicate ACK (even with quick ACKs spent: in ping-pong here); the segment that
    fills the gap is ACKed at once too (ICSK_ACK_NOW), covering both."""
    h = established_server(10)
    h.setopt(ms(11), "quickack", False)
    h.take()
    h.peer(ms(20), seq=1001, ack=1, length=1000)
    (dup,) = h.take()
    assert dup.seg.ack == 1 and dup.seg.why.name == "OUT_OF_ORDER"
    h.peer(ms(21), seq=1, ack=1, length=1000)
    (ack,) = h.take()
    assert ack.seg.ack == 2001 and h.ep.unread == 2000


def test_tail_loss_probe_may_send_one_segment_past_cwnd() -> None:
    """tcp_send_loss_probe → tcp_write_xmit(push_one = 2): a full congestion window
    still lets the probe send one new segment."""
    h = established_server(10, options=SocketOptions(nodelay=True))
    h.write(ms(10), 15_000)
    first = h.take()
    assert sum(s.seg.length for s in first) == 10_000     # initial cwnd 10
    h.advance(ms(60))
    probe = [s for s in h.take() if s.seg.length]
    assert probe and probe[0].seg.why.name == "LOSS_PROBE"
    assert probe[0].seg.seq == 10_001 and probe[0].seg.length == 1000
    assert h.ep.tcp_info().unacked == 11


def test_old_data_with_a_fin_keeps_the_fin() -> None:
    """tcp_data_queue: a retransmission of data already received, now carrying FIN, ends
    past rcv_nxt (the FIN is new): the old part is dropped, the FIN is taken."""
    h = established_server(10)
    h.peer(ms(20), seq=1, ack=1, length=100, flags="PA")
    h.peer(ms(30), seq=1, ack=1, length=100, flags="FPA")
    assert h.ep.peer_fin and h.ep.state.name == "CLOSE_WAIT"
    assert h.ep.unread == 100


def test_partly_old_segment_keeps_its_new_part() -> None:
    h = established_server(10)
    h.peer(ms(20), seq=1, ack=1, length=100, flags="PA")
    h.peer(ms(30), seq=51, ack=1, length=100, flags="PA")
    assert h.ep.unread == 150


LOOPBACK_STREAM = '''
[server]
script = "repeat 30 { write 1000; sleep 40ms }"
[client]
script = "repeat 6 { sleep 200ms; read 5000 }"
'''


def _client_acks(trace: Trace) -> list[tuple[int, int, str]]:
    return [(s.ack, s.window, s.why) for s in trace.segments
            if s.src is Side.CLIENT and "S" not in s.flags and "F" not in s.flags]


def test_loopback_skbs_cost_payload_plus_a_small_head_and_coalesce() -> None:
    """tcp_grow_window on loopback (lessons/23): the receiver gets the sender's head-less
    skb (truesize = 1000 + loopback_skb_overhead, scaling_ratio 138) and later skbs
    coalesce into the queue's tail at their payload's cost, so rcv_ssthresh grows on the
    1st, 2nd and first-after-a-read segments, as the kernel's windows show: 64512 →
    67584 → 69632, 70656 after the first read."""
    trace = run_sim(scenario.loads(LOOPBACK_STREAM, "loopback.toml"))
    assert trace.outcome is Outcome.OK
    windows = [w for _, w, _ in _client_acks(trace)]
    assert windows[:7] == [64512, 67584, 69632, 69632, 69632, 69632, 70656]
    assert set(windows[7:]) == {70656}


def test_loopback_window_growth_grants_two_more_quick_acks() -> None:
    """Each growth sets icsk_ack.quick |= 1: after the 16-ACK budget of the first segment
    the 1st and 2nd growths add one each (the third finds an odd count): 18 quick ACKs,
    as the kernel sent for lessons/23. A TUN link (2304-byte truesize) grows nothing."""
    quick = [ack for ack, _, why in _client_acks(run_sim(scenario.loads(
        LOOPBACK_STREAM, "loopback.toml"))) if "quick" in why.lower()]
    assert len(quick) == 18 and quick[-1] == 18001
    tun = scenario.loads(LOOPBACK_STREAM + "[link]\ndelay_ms = 1\n", "tun.toml")
    windows = {w for _, w, _ in _client_acks(run_sim(tun))}
    assert windows == {64512}


def test_aligned_run_follows_each_real_sleep_where_the_median_would_drift() -> None:
    """compare's aligned run (lessons/22): when the median run of a sleep, repeated, would
    drift from the real run's total, each run of it is as long as its real twin,
    counting the executor's idle time around it and the write's cost beyond syscall_us."""
    from nagle_sim.compare import measured_sleep_runs
    from nagle_sim.model.events import Micros
    from nagle_sim.trace import OpRecord

    sc = scenario.loads('[client]\nscript = """\nrepeat 3 {\n  write 1\n  sleep 2ms\n}\n"""\n'
                        '[server]\nscript = "read 3"\n', "s.toml")
    ops, t = [], 0
    for took in (2_000, 2_300, 2_000):          # write 20 µs, 30 µs gaps, then the sleep
        ops.append(OpRecord(side=Side.CLIENT, op="write", arg="1", start=Micros(t),
                            end=Micros(t + 20), line=4))
        ops.append(OpRecord(side=Side.CLIENT, op="sleep", arg="2ms", start=Micros(t + 50),
                            end=Micros(t + 50 + took), line=5))
        t += 50 + took + 30
    real = Trace(source="realnet", title="t", ops=ops)
    runs = measured_sleep_runs(real)
    assert runs == {(Side.CLIENT, 5): [2_078, 2_378, 2_048]}   # the last has no next call
    sim = run_sim(sc, sleeps=runs)
    starts = [o.start for o in sim.ops if o.side is Side.CLIENT and o.op == "write"]
    first = starts[0]
    # a write that sends costs syscall_us + tx_segment_us = 4 µs in the model
    assert [s - first for s in starts] == [0, 4 + 2_078, 4 + 2_078 + 4 + 2_378]
    steady = Trace(source="realnet", title="t", ops=ops[:2])
    assert measured_sleep_runs(steady) == {}


# ---------------------------------------------------------------- the delayed-ACK timer's ato
def test_missed_delayed_ack_doubles_ato_past_delack_max_and_it_shows_later() -> None:
    """tcp_delack_timer_handler inflates ato as min(ato << 1, icsk_rto) only; the 200 ms
    ceiling (TCP_DELACK_MAX, tcp_delack_max) applies to the timeout tcp_send_delayed_ack
    arms, not to the stored ato. With SRTT 500 ms (RTO 1.5 s) three missed ACKs take ato
    10 → 20 → 40 → 80 jiffies. Two half-MSS segments then arrive, 52 ms and 92 ms after
    that ACK: tcp_event_data_recv halves ato (40 + 13 = 53, then 26 + 10 = 36 with the
    old 50-jiffy cap, 46 + 10 = 56 without), so the second one either keeps the first
    one's deadline (kernel: 196 ms after it, tcp_delack_max) or pulls it in to 36 jiffies
    after itself (the old model: 184 ms)."""
    h = established_server(500)
    assert h.ep.tcp_info().rto >= 1_000_000
    seq, t = 1, ms(600)
    for _ in range(20):                              # spend the quick ACKs
        h.peer(t, seq=seq, ack=1, length=1000)
        seq, t = seq + 1000, t + ms(1)
        h.read(t)
    h.take()
    for expect_ms in (40, 80, 160):                  # three missed ACKs: ato 20, 40, 80
        t += ms(900)                                 # idle < RTO: no quick-ACK refill
        h.peer(t, seq=seq, ack=1, length=1000)
        seq += 1000
        h.read(t + 1)
        h.advance(t + ms(170))
        (ack,) = h.take()
        assert ack.seg.why.name == "DELACK_FIRED"
        assert expect_ms * 1000 <= ack.t - t <= (expect_ms + 4) * 1000, (expect_ms, ack)
    first = ack.t + ms(48)
    h.peer(first, seq=seq, ack=1, length=500, flags="PA")
    h.peer(first + ms(40), seq=seq + 500, ack=1, length=500, flags="PA")
    h.advance(first + ms(400))
    (ack,) = h.take()
    assert ack.seg.why.name == "DELACK_FIRED" and ack.seg.ack == seq + 1000
    assert 196_000 <= ack.t - first <= 200_000, ack.t - first


# ---------------------------------------------------------------- 5. found on the real kernel
def test_new_data_for_a_closed_socket_in_fin_wait_gets_a_reset() -> None:
    """tcp_rcv_state_process ("process the segment text"): after close() the socket has
    RCV_SHUTDOWN, so in FIN_WAIT1/2 new data resets the connection, answered as
    tcp_v4_send_reset answers (the segment carried an ACK: R from its ack number)."""
    h = established_server(10)
    h.take()
    h.close(ms(20))
    (fin,) = h.take()
    assert fin.flags == "FA"
    h.peer(ms(30), seq=1, ack=2)                     # our FIN ACKed: FIN_WAIT2
    assert h.ep.state.name == "FIN_WAIT2"
    h.peer(ms(40), seq=1, ack=2, length=100, flags="PA")
    (rst,) = h.take()
    assert rst.flags == "R" and rst.seg.seq == 2 and h.ep.state.name == "CLOSED"


def test_fin_wait_still_takes_a_pure_ack_and_the_peer_fin() -> None:
    h = established_server(10)
    h.close(ms(20))
    h.peer(ms(30), seq=1, ack=2)
    h.peer(ms(40), seq=1, ack=2, flags="FA")
    assert h.ep.state.name == "TIME_WAIT"
    assert all("R" not in s.flags for s in h.take())


def test_rto_retransmission_collapses_data_and_a_separate_fin() -> None:
    """tcp_retrans_try_collapse: 100 bytes, then the FIN 5 ms later (two segments), none
    ACKed: the RTO re-sends both as one FP. 1:101(100)."""
    h = established_server(10)
    h.take()
    h.write(ms(20), 100)
    h.close(ms(25))
    assert [s.flags for s in h.take()] == ["PA", "FA"]
    h.advance(ms(700))
    rtx = [s for s in h.take() if s.seg.why.name == "RETRANSMIT"]
    assert rtx and rtx[0].flags == "FPA" and rtx[0].seg.seq == 1 and rtx[0].seg.length == 100


def test_rto_collapse_stops_at_one_mss() -> None:
    h = established_server(10, options=SocketOptions(nodelay=True))
    h.write(ms(20), 600)
    h.write(ms(21), 600)
    h.close(ms(22))
    h.advance(ms(700))
    rtx = [s for s in h.take() if s.seg.why.name == "RETRANSMIT"]
    assert rtx[0].seg.length == 600 and "F" not in rtx[0].flags
