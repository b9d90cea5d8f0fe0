"""Model tests for issue 26's behaviours (fidelity round 3): each drives the model where a
kernel rule decides, and asserts the decision measured on this machine's kernel (6.18,
HZ=250) with packetdrill. The scripts that show the kernel's side are in tests/drill/
(their headers say how they were run); these tests pin the rule itself."""

from __future__ import annotations

import pytest

from nagle_sim.model import Side, SocketError, SockOpt, State
from nagle_sim.model.events import Reason

from .harness import Harness, ms


def server() -> Harness:
    h = Harness(side=Side.SERVER, mss=1000)
    h.accept(0, ms(10))
    h.take()
    return h


# ------------------------------------------------ shutdown (tcp_shutdown, tcp_send_fin)
def test_shut_wr_sends_the_fin_after_the_data_and_keeps_receiving() -> None:
    h = server()
    h.write(ms(10), 300)
    h.ep.shutdown(h.now, "wr")
    h._collect()
    assert [(s.flags, s.seg.seq, s.seg.length) for s in h.take()] == [
        ("PA", 1, 300), ("FA", 301, 0)]
    assert h.ep.state is State.FIN_WAIT1
    h.peer(ms(20), seq=1, ack=302)
    assert h.ep.state is State.FIN_WAIT2
    with pytest.raises(SocketError) as err:
        h.write(ms(20), 10)
    assert err.value.errno == "EPIPE"
    h.peer(ms(30), seq=1, ack=302, length=200, flags="PA")      # half close: taken in
    assert [(s.flags, s.seg.ack) for s in h.take()] == [("A", 201)]
    assert h.read(ms(30)) == 200


def test_shut_rd_reads_zero_but_still_takes_data() -> None:
    h = server()
    h.ep.shutdown(h.now, "rd")
    assert h.ep.eof and h.read(ms(10)) == 0
    h.peer(ms(20), seq=1, ack=1, length=200, flags="PA")
    assert [s.seg.ack for s in h.take()] == [201]      # ACKed, not reset
    assert not h.ep.eof and h.read(ms(20)) == 200 and h.read(ms(20)) == 0


def test_shut_rdwr_then_data_resets_and_the_read_reports_it_once() -> None:
    h = server()
    h.ep.shutdown(h.now, "rdwr")
    h._collect()
    h.peer(ms(20), seq=1, ack=2)                        # our FIN ACKed: FIN_WAIT2
    h.take()
    h.peer(ms(30), seq=1, ack=2, length=100, flags="PA")
    assert [(s.flags, s.seg.seq) for s in h.take()] == [("R", 2)]
    assert h.ep.state is State.CLOSED
    with pytest.raises(SocketError) as err:
        h.read(ms(30))
    assert err.value.errno == "ECONNRESET"
    assert h.read(ms(30)) == 0                          # sock_error clears it


def test_close_after_shut_wr_sends_nothing_more() -> None:
    h = server()
    h.ep.shutdown(h.now, "wr")
    h._collect()
    h.take()
    h.close(ms(15))
    assert h.take() == [] and h.ep.state is State.FIN_WAIT1
    h.peer(ms(20), seq=1, ack=2, length=100, flags="PA")   # now RCV_SHUTDOWN: reset
    assert [(s.flags, s.seg.seq) for s in h.take()] == [("R", 2)]


def test_shutdown_in_close_wait_goes_to_last_ack() -> None:
    h = server()
    h.peer(ms(20), seq=1, ack=1, flags="FA")
    assert h.ep.state is State.CLOSE_WAIT
    h.ep.shutdown(h.now, "wr")
    assert h.ep.state is State.LAST_ACK


@pytest.mark.parametrize("profile, fin_at", [("linux", 20.0), ("linux-6.6", 10.0)])
def test_the_fin_waits_for_the_congestion_window(profile: str, fin_at: float) -> None:
    """6.10 removed tcp_cwnd_test's FIN exception: a shutdown right after the initial
    window's 10 segments holds the FIN until an ACK frees room (tests/drill/
    fin_waits_for_cwnd.pkt, 3/3 on 6.18); linux-6.6 still sends it at once."""
    from nagle_sim.model import PROFILES
    h = Harness(side=Side.SERVER, mss=1000, profile=PROFILES[profile])
    h.accept(0, ms(10))
    h.write(ms(10), 10000)
    h.ep.shutdown(h.now, "wr")
    h._collect()
    h.peer(ms(20), seq=1, ack=1001)
    fins = [s.t for s in h.take() if "F" in s.flags]
    assert fins == [ms(fin_at)]


def test_a_received_reset_is_the_next_calls_error() -> None:
    h = server()
    h.peer(ms(20), seq=1, ack=1, flags="R")
    with pytest.raises(SocketError) as err:
        h.write(ms(20), 10)
    assert err.value.errno == "ECONNRESET"
    with pytest.raises(SocketError) as err:
        h.write(ms(20), 10)
    assert err.value.errno == "EPIPE"


def test_time_wait_reads_as_close_in_tcp_info() -> None:
    """tcp_time_wait closes the full socket; packetdrill's tcpi_state is TCP_CLOSE."""
    h = server()
    h.ep.shutdown(h.now, "wr")
    h.peer(ms(20), seq=1, ack=2)
    h.peer(ms(30), seq=1, ack=2, flags="FA")
    assert h.ep.state is State.TIME_WAIT
    assert h.ep.tcp_info().state is State.CLOSED


# ------------------------------------------------ tcp_info
def test_initial_ssthresh_is_the_kernels_infinity() -> None:
    """TCP_INFINITE_SSTHRESH (0x7fffffff) until a loss: packetdrill on 6.18 reads
    tcpi_snd_ssthresh == 2147483647 after the handshake (the model said 1 << 30)."""
    assert server().ep.tcp_info().snd_ssthresh == 0x7FFFFFFF


# ------------------------------------------------ MSG_EOR (tcp_skb_can_collapse_to)
def test_a_record_end_is_not_filled_by_the_next_write() -> None:
    """tests/drill/msg_eor.pkt, as on 6.18: the 300 B record leaves alone as soon as a
    later write makes it a non-tail skb; two writes without a record end join."""
    h = server()
    h.write(ms(10), 600)
    h.ep.app_write(h.now, 300, eor=True)
    h.write(ms(10), 200)
    assert [(s.seg.seq, s.seg.length) for s in h.take()] == [(1, 600), (601, 300)]
    h.peer(ms(20), seq=1, ack=601)
    h.peer(ms(30), seq=1, ack=901)
    assert [(s.seg.seq, s.seg.length) for s in h.take() if s.seg.length] == [(901, 200)]
    h.write(ms(30), 100)
    h.write(ms(30), 150)
    h.peer(ms(40), seq=1, ack=1101)
    assert [(s.seg.seq, s.seg.length) for s in h.take() if s.seg.length] == [(1101, 250)]


def test_a_record_end_is_never_autocorked() -> None:
    """tcp_should_autocork requires tcp_skb_can_collapse_to (b0de0cf4f57c): with a
    device queue busy, a plain small write is held, a MSG_EOR one is not."""
    for eor, sent in ((False, [1]), (True, [1, 101])):
        h = server()
        h.ep.set_tx_complete(500)
        h.ep.set_option(h.now, SockOpt.NODELAY, True)
        h.write(ms(10), 100)
        h.ep.app_write(h.now, 100, eor=eor)
        h._collect()
        assert [s.seg.seq for s in h.take() if s.seg.length] == sent


# ------------------------------------------------ the send buffer (sk_sndbuf)
def test_send_buffer_accounting_matches_the_kernels_ss_m() -> None:
    """The kernel's blocking-write shape (MSS 1000, window 50000, tcp_min_tso_segs 10,
    SO_SNDBUF 21000 → 42000), as measured here with ss -m after each event: 60000 B of a
    61000-byte write fit, sk_wmem_queued 63328 (4 skbs × 832 B + payload), then 53328,
    32496 (tcp_grow_skb took the next skb's bytes: 3 skbs, not 4), 27496, 26496; the
    writer may go on once at most 2/3 of the buffer is in use."""
    from nagle_sim.model import PROFILES
    from nagle_sim.model.send import sk_wmem_queued

    h = Harness(side=Side.SERVER, mss=1000,
                profile=PROFILES["linux"].with_overrides(min_tso_segs=10))
    h.ep.set_mss_clamp(1000)
    h.accept(ms(100), ms(200), window=50000)
    h.ep.set_sndbuf(21000)
    assert h.ep.sndbuf == 42000
    assert h.ep.app_write(h.now, 61000) == 60000
    sk = h.ep._sk
    seen = [sk_wmem_queued(sk)]
    woken = []
    for t, ack in ((300, 10001), (400, 30001), (500, 35001), (600, 36001)):
        h.peer(ms(t), seq=1, ack=ack, window=50000)
        seen.append(sk_wmem_queued(sk))
        woken.append(h.ep.take_write_wakeup())
    assert seen == [63328, 53328, 32496, 27496, 26496]
    assert woken == [False, False, True, False]


def test_before_tcp_grow_skb_a_burst_stops_at_a_skb_boundary() -> None:
    """linux-6.6 (no 8ee602c63520): the 5000-byte remainder leaves as a burst of its own,
    so one more skb stays charged after the same ACKs."""
    from nagle_sim.model import PROFILES
    from nagle_sim.model.send import sk_wmem_queued

    h = Harness(side=Side.SERVER, mss=1000,
                profile=PROFILES["linux-6.6"].with_overrides(min_tso_segs=10))
    h.ep.set_mss_clamp(1000)
    h.accept(ms(100), ms(200), window=50000)
    h.ep.set_sndbuf(21000)
    h.ep.app_write(h.now, 61000)
    h.peer(ms(300), seq=1, ack=10001, window=50000)
    h.peer(ms(400), seq=1, ack=30001, window=50000)
    assert sk_wmem_queued(h.ep._sk) == 33328


@pytest.mark.parametrize("sndbuf, copied", [(None, 42000), (5000, 42000), (40000, 106000)])
def test_a_non_blocking_write_takes_what_fits(sndbuf: int | None, copied: int) -> None:
    """Measured with packetdrill (peer window 65535, MSS 1000): the default buffer (46080)
    and SO_SNDBUF 5000 (10000) take 42000 B of a 1 MB write (the initial window, then
    one 32000-byte skb: the first skb is allocated whatever the buffer), SO_SNDBUF 40000
    takes 106000 (two more skbs)."""
    h = Harness(side=Side.SERVER, mss=1000)
    h.ep.set_mss_clamp(1000)
    h.accept(0, ms(10))
    if sndbuf is not None:
        h.ep.set_sndbuf(sndbuf)
    assert h.ep.app_write(h.now, 1_000_000) == copied


def test_the_default_buffer_is_two_windows_of_worst_case_skbs() -> None:
    """tcp_sndbuf_expand: 46080 with MSS 1000 (getsockopt here); 87040 for 1448-byte
    payload with timestamps (mss_clamp 1460 → 4096 + 256 per segment); BBR asks for 3."""
    assert server().ep.sndbuf == 46080
    h = Harness(side=Side.SERVER, mss=1448)
    h.accept(0, ms(10))
    assert h.ep.sndbuf == 87040
    from nagle_sim.model import PROFILES
    h = Harness(side=Side.SERVER, mss=1448, profile=PROFILES["linux"].with_overrides(
        congestion="bbr"))
    h.accept(0, ms(10))
    assert h.ep.sndbuf == 3 * 10 * 4352


# ------------------------------------------------ tcp_info chronos (tcp_chrono_start/stop)
def test_rwnd_limited_and_busy_time_count_jiffies() -> None:
    """The shape of packetdrill's tcp-info-rwnd-limited: a zero window for 200 ms, then
    30 ms busy, then a 10-byte window for 100 ms: 200 ms → 300 ms rwnd-limited, 330 ms
    busy (the upstream script passes on this kernel with these bounds)."""
    h = Harness(side=Side.CLIENT, mss=1000)
    h.ep.connect(h.now)
    h.peer(ms(10), seq=0, ack=1, flags="SA", window=0)
    h.write(ms(10), 1000)
    assert h.ep.tcp_info(h.now + ms(100)).rwnd_limited in range(98000, 110001)
    h.peer(ms(210), seq=1, ack=1, window=2000)
    assert h.ep.tcp_info(h.now).rwnd_limited in range(198000, 210001)
    h.peer(ms(240), seq=1, ack=1001, window=10)
    h.write(ms(240), 1000)
    h.peer(ms(340), seq=1, ack=1001, window=2000)
    info = h.ep.tcp_info(h.now)
    assert info.rwnd_limited in range(298000, 310001)
    assert info.busy_time in range(328000, 340001)


def test_last_data_recv_counts_from_the_handshake() -> None:
    h = Harness(side=Side.CLIENT, mss=1000)
    h.ep.connect(h.now)
    h.peer(ms(30), seq=0, ack=1, flags="SA", window=10000)
    assert h.ep.tcp_info(ms(1030)).last_data_recv in range(990, 1011)
    h.peer(ms(1030), seq=1, ack=1, length=1000, window=300)
    assert h.ep.tcp_info(h.now).last_data_recv <= 10


# ------------------------------------------------ cwnd restart on a window update
def test_a_window_update_after_idle_restarts_cwnd() -> None:
    """tcp_ack_update_window → tcp_slow_start_after_idle_check (packetdrill's
    slow-start-after-win-update, which passes on 6.18 and now on the model): cwnd 36, the
    window closes for 2.1 s with data queued; the window update restarts cwnd to 10
    (36 → 18 → 9, at least the initial window): 10 segments leave (as two TSO skbs of
    half the window each, tcp_cwnd_test), not 36."""
    from nagle_sim.model import PROFILES

    h = Harness(side=Side.SERVER, mss=1000, profile=PROFILES["linux"].with_overrides(
        min_tso_segs=10))
    h.accept(0, ms(100), window=65535)
    h.ep.set_sndbuf(200_000)
    h.write(ms(100), 26000)
    h.peer(ms(200), seq=1, ack=10001, window=65535)
    h.peer(ms(300), seq=1, ack=26001, window=0)
    assert h.ep.tcp_info().snd_cwnd == 36
    h.write(ms(300), 20000)
    h.take()
    h.peer(ms(2400), seq=1, ack=26001, window=65535)
    assert h.ep.tcp_info().snd_cwnd == 10
    assert sum(s.seg.length for s in h.take()) == 10000


def test_bbr_has_no_restart_after_idle() -> None:
    """tcp_slow_start_after_idle_check returns for a cong_control congestion control."""
    from nagle_sim.model import PROFILES

    h = Harness(side=Side.SERVER, mss=1000, profile=PROFILES["linux"].with_overrides(
        congestion="bbr"))
    h.accept(0, ms(100))
    h.write(ms(100), 5000)
    h.peer(ms(200), seq=1, ack=5001)
    cwnd = h.ep.tcp_info().snd_cwnd
    h.write(ms(5000), 1000)
    assert h.ep.tcp_info().snd_cwnd == cwnd


# ------------------------------------------------ the timer wheel (calc_wheel_index)
def test_wheel_levels_round_up_by_their_granularity() -> None:
    from nagle_sim.model.sock import wheel_bucket_expiry

    assert wheel_bucket_expiry(10, 0) == 11            # level 0: the next jiffy
    assert wheel_bucket_expiry(62, 0) == 63
    assert wheel_bucket_expiry(63, 0) == 64            # level 1 from 63 ahead: × 8
    assert wheel_bucket_expiry(76, 0) == 80
    assert wheel_bucket_expiry(8 + 152, 8) == 168      # armed on a multiple of 8: +160
    assert wheel_bucket_expiry(504, 0) == 512          # level 2: × 64
    assert wheel_bucket_expiry(1000, 400) == 1024


@pytest.mark.parametrize("offset", range(8))
def test_zero_window_probes_fire_on_the_wheels_grid(offset: int) -> None:
    """tests/drill/timer_wheel_level1.pkt (measured on 6.18: 640.0 ms, then 1248 ms, in
    every run; the first probe 307-335 ms after the write, by alignment): whatever the
    jiffies counter's alignment, a probe re-armed from a level-1 run fires a multiple of
    8 jiffies later."""
    from nagle_sim.model import PROFILES

    h = Harness(side=Side.SERVER, mss=1000,
                profile=PROFILES["linux"].with_overrides(jiffies_at_zero=offset))
    h.peer(0, seq=0, ack=0, flags="S", window=65535)
    h.peer(ms(100.5), seq=1, ack=1, window=0)
    h.write(ms(100.6), 100)
    h.advance(ms(3000))
    probes = [ms(100.5)] + [s.t for s in h.out if s.seg.why.name == "WINDOW_PROBE"]
    gaps = [b - a for a, b in zip(probes, probes[1:], strict=False)]
    assert 304_000 <= gaps[0] <= 340_000
    assert gaps[1:3] == [640_000, 1_248_000]


# ------------------------------------------------ the offered window from tcp_rmem
@pytest.mark.parametrize("rmem, client, server", [
    (131072, 64240, 65160), (540000, 65535, 65535)])
def test_the_syn_window_comes_from_tcp_rmem(rmem: int, client: int, server: int) -> None:
    """tcp_select_initial_window rounds the buffer's window down to whole segments before
    capping it at 65535: this machine's tcp_rmem[1] gives 64240 / 65160; packetdrill's
    defaults.sh (tcp_rmem[1] 540000) gives 65535 on the kernel, where the model said
    64240 (it capped first, then rounded)."""
    from nagle_sim.model import PROFILES

    profile = PROFILES["linux"].with_overrides(rcv_buf=rmem)
    for side, want in ((Side.CLIENT, client), (Side.SERVER, server)):
        assert Harness(side=side, mss=1448, profile=profile).ep._sk.rcv.rcv_wnd == want


# ------------------------------------------------ TCP_USER_TIMEOUT
def test_user_timeout_counts_from_the_first_retransmission() -> None:
    """tests/drill/user_timeout.pkt's shape (measured: retransmissions at 431.3 and
    1071.3 ms; alive at 1.17 s, ETIMEDOUT at 1.57 s; no reset sent)."""
    from nagle_sim.model import PROFILES

    h = Harness(side=Side.SERVER, mss=1000,
                profile=PROFILES["linux"].with_overrides(tail_loss_probe=False))
    h.peer(0, seq=0, ack=0, flags="S", window=65535)
    h.peer(ms(100), seq=1, ack=1, window=65535)
    h.take()
    h.ep.set_user_timeout(1000)
    h.write(ms(100), 100)
    h.write(ms(1170), 100)
    assert h.ep.state is State.ESTABLISHED
    h.advance(ms(1570))
    out = h.take()
    # RTO 300 ms (75 jiffies; the kernel's 76 came from a 100.5 ms RTT): level 1, then 152
    assert [round(s.t / 1000) for s in out] == [100, 414, 1022]
    assert all(s.flags != "R" for s in out)
    assert h.ep.state is State.CLOSED
    with pytest.raises(SocketError) as err:
        h.write(ms(1570), 100)
    assert err.value.errno == "ETIMEDOUT"


def test_zero_window_probes_give_up_at_the_user_timeout() -> None:
    """tcp_probe_timer: with TCP_USER_TIMEOUT, probing a closed window stops that long
    after the first probe (icsk_probes_tstamp), the probe timer clamped to it."""
    h = server()
    h.ep.set_user_timeout(2000)
    h.peer(ms(20), seq=1, ack=1, window=0)
    h.write(ms(20), 100)
    h.advance(ms(10_000))
    probes = [s.t for s in h.out if s.seg.why.name == "WINDOW_PROBE"]
    assert h.ep.state is State.CLOSED
    assert probes and probes[-1] < ms(20 + 300 + 2000 + 40)


# ------------------------------------------------ loss recovery without SACK
def _bulk_server(mss: int, window: int) -> Harness:
    from nagle_sim.model import PROFILES

    h = Harness(side=Side.SERVER, mss=mss,
                profile=PROFILES["linux"].with_overrides(tail_loss_probe=False))
    h.peer(ms(100), seq=0, ack=0, flags="S", window=32792)
    h.peer(ms(200), seq=1, ack=1, window=window)
    h.take()
    return h


def _sent(h: Harness) -> list[int]:
    return [s.seg.seq for s in h.take() if s.seg.length]


def test_limited_transmit_then_reordering_not_loss() -> None:
    """packetdrill's limited-transmit-no-sack (passes on 6.18): each of two duplicate ACKs
    releases one new segment (sacked_out lowers the packets in flight); the cumulative
    ACK of 3001 shows reordering: back to Open, cwnd 10 → 11 (one segment newly
    delivered: the other two were counted by the duplicates), two more segments."""
    h = _bulk_server(1000, 320 << 7)
    h.write(ms(200), 15000)
    assert len(_sent(h)) == 10
    h.peer(ms(310), seq=1, ack=1, window=320 << 7)
    assert _sent(h) == [10001]
    h.peer(ms(320), seq=1, ack=1, window=320 << 7)
    assert _sent(h) == [11001]
    h.peer(ms(330), seq=1, ack=3001, window=320 << 7)
    assert _sent(h) == [12001, 13001]
    assert h.ep.tcp_info().snd_cwnd == 11 and h.ep._sk.cc.ca_state == 0


def test_three_duplicate_acks_retransmit_the_first_unacked_segment() -> None:
    """packetdrill's fr-4pkt (no SACK, passes on 6.18): the third duplicate ACK marks the
    head lost (tcp_newreno_mark_lost: sacked_out reached reordering 3) and it is resent
    at once; ssthresh becomes CUBIC's 0.7 × 10 = 7."""
    h = _bulk_server(1460, 257 << 7)
    h.write(ms(200), 5840)
    assert len(_sent(h)) == 4
    for _ in range(2):
        h.peer(ms(300), seq=1, ack=1, window=257 << 7)
        assert _sent(h) == []
    h.peer(ms(300), seq=1, ack=1, window=257 << 7)
    out = h.take()
    assert [(s.seg.seq, s.seg.why.name) for s in out] == [(1, "FAST_RETRANSMIT")]
    assert h.ep.tcp_info().snd_ssthresh == 7


def test_an_rto_marks_everything_lost_and_resends_it_as_cwnd_grows() -> None:
    """tcp_enter_loss → tcp_timeout_mark_lost: after an RTO every outstanding segment is
    lost; the first goes on the timer, and each ACK then lets the congestion window's
    worth of lost segments go again (tcp_xmit_retransmit_queue), not one per RTO."""
    h = _bulk_server(1000, 512 << 7)
    h.write(ms(200), 10000)
    h.take()
    h.advance(ms(600))                        # RTO 300 ms (75 jiffies, level 1)
    assert [s.seg.why.name for s in h.take()] == ["RETRANSMIT"]
    assert h.ep._sk.cc.lost_out == 10 and h.ep._sk.cc.ca_state == 4
    h.peer(ms(650), seq=1, ack=1001, window=512 << 7)
    assert _sent(h) == [1001, 2001]           # cwnd 2 in slow start: two lost segments
    h.peer(ms(700), seq=1, ack=3001, window=512 << 7)
    assert _sent(h) == [3001, 4001, 5001, 6001]


# ------------------------------------------------ receive-buffer autotuning
def test_autotuning_grows_the_window_as_the_kernel_did() -> None:
    """tests/drill/receive_autotuning.pkt's shape (20 ms rounds of 10, 20, 40… segments,
    each read whole; advmss 1460, MSS 1000): the offered window (×1024) was 62, then 56
    until 120 ms, then 59, 62, 65, 67, 70 … one ACK per segment, as captured on 6.18."""
    from nagle_sim.model import Endpoint

    h = Harness(side=Side.SERVER, mss=1000)
    h.ep = Endpoint(Side.SERVER, h.profile, h.options, 1000, 1460)
    h.clock.ep = h.ep
    h.peer(0, seq=0, ack=0, flags="S", window=65535)
    h.peer(ms(20), seq=1, ack=1, window=512 << 7)
    h.take()
    seq, t, windows = 1, 20, []
    for burst in (10, 20, 40, 40, 40, 40):
        t += 20
        for _ in range(burst):
            h.peer(ms(t), seq=seq, ack=1, length=1000, window=512 << 7)
            seq += 1000
        h.read(ms(t))
        windows.append([s.seg.window >> 10 for s in h.take()])
    assert windows[0] == [62] * 10
    assert windows[2] == windows[3] == windows[4] == [56]
    assert windows[5][:5] == [59, 62, 65, 67, 70] and len(windows[5]) == 40
    assert h.ep.tcp_info().rcv_space > 14600


# ------------------------------------------------ timestamps: the receiver's RTT from echoes
def _bulk(timestamps: bool) -> list[int]:
    """Lesson 19's 100 kB over a 20 ms RTT: how many segments each server ACK covers."""
    from dataclasses import replace
    from pathlib import Path

    from nagle_sim import scenario as scenarios
    from nagle_sim.sim.driver import run_sim
    path = Path(__file__).resolve().parents[2] / "lessons/19-bulk-transfer/scenario.toml"
    sc = scenarios.loads(path.read_text("utf-8"), str(path))
    sides = {side.value: replace(sc.side(side), profile=sc.side(side).profile
                                 .with_overrides(timestamps=timestamps)) for side in Side}
    trace = run_sim(replace(sc, **sides))
    covered, prev = [], 1
    for s in trace.segments:
        if s.src is Side.SERVER and not s.length and not {"S", "F"} & set(s.flags):
            covered.append(round((s.ack - prev) / 1448))
            prev = s.ack
    return covered


def test_timestamp_echoes_let_the_receiver_grow_its_buffer_a_round_trip_in() -> None:
    """tcp_rcv_rtt_measure_ts: with timestamps the receiver knows its RTT from the first
    echoed data, so autotuning grows the buffer after one round trip of reading; after 22
    quick ACKs only 5 ACKs cover two segments before every segment is ACKed again (the
    kernel, three realnet runs of lesson 19: 3-4, 55-60 ACKs). Timing a whole window
    instead (no timestamps) leaves 12 such pairs."""
    with_ts, without = _bulk(True), _bulk(False)
    assert with_ts[:22] == [1] * 22 and with_ts[22:27] == [2] * 5 and with_ts[27] == 1
    assert len(with_ts) == 60
    assert without[22:34] == [2] * 12 and without[34] == 1


@pytest.mark.parametrize("peer_ts, ours", [(True, True), (False, False)])
def test_timestamps_are_on_only_when_both_syns_carry_them(peer_ts: bool, ours: bool) -> None:
    """tcp_parse_options: the SYN-ACK carries TSval and echoes the SYN's, and every later
    segment does, only if the peer's SYN offered timestamps; ts_recent follows the
    peer's segments that start at or before rcv_wup (RFC 7323)."""
    h = Harness(side=Side.SERVER, mss=1000)
    h.peer(0, seq=0, ack=0, flags="S", tsval=500 if peer_ts else -1)
    synack = h.take()[0].seg
    assert (synack.tsval, synack.tsecr) == ((0, 500) if ours else (-1, -1))
    h.peer(ms(10), seq=1, ack=1, tsval=510 if peer_ts else -1, tsecr=0 if peer_ts else -1)
    h.peer(ms(20), seq=1, ack=1, length=1000, flags="PA", tsval=520 if peer_ts else -1,
           tsecr=0 if peer_ts else -1)
    ack = h.take()[0].seg
    assert (ack.tsval, ack.tsecr) == ((20, 520) if ours else (-1, -1))
    # the receiver's RTT from the echo: 20 ms since our SYN-ACK's TSval 0
    assert h.ep._sk.rcv.rtt8 == (20_000 << 3 if ours else 0)


# ------------------------------- RTT from the timestamp echo (tcp_ack_update_rtt, RTTM)
def test_an_ack_of_retransmitted_data_samples_the_rtt_from_its_timestamp_echo() -> None:
    """Karn's rule bars the ACK's own timing once it ACKs data that was sent twice (here
    by the tail loss probe), but with timestamps tcp_ack_update_rtt takes now − TSecr
    (whole ms) instead: SRTT moves 1/8 towards the 29 ms echo of the probed segment. The
    kernel did so (validate --random seed 3: SRTT 5258 → ~8860 µs after such an ACK over
    1 Mbit/s); before this rule the model took no sample and its next loss probes fired
    a round early."""
    h = Harness(side=Side.CLIENT, mss=1000)
    h.ep.connect(h.now)
    h.peer(ms(1), seq=0, ack=1, flags="SA", window=65535, tsval=7, tsecr=0)
    assert h.ep.tcp_info(h.now).rtt == 1000
    h.write(ms(1), 3000)
    h.advance(ms(15))
    probes = [s for s in h.out if s.seg.why is Reason.LOSS_PROBE]
    assert [p.seg.seq for p in probes] == [2001] and probes[0].seg.tsval > 1, h.out
    h.peer(ms(20), seq=1, ack=2001, window=65535, tsval=8, tsecr=1)
    srtt = 1000 + (19_000 - 1000) // 8          # the ACK's own timing: 19 ms
    assert h.ep.tcp_info(h.now).rtt == srtt
    h.peer(ms(30), seq=1, ack=3001, window=65535, tsval=9, tsecr=1)
    assert h.ep.tcp_info(h.now).rtt == srtt + (29_000 - srtt) // 8


def test_without_timestamps_an_ack_of_retransmitted_data_gives_no_rtt_sample() -> None:
    """The same without the option (a Windows peer): Karn's rule alone, SRTT unchanged."""
    h = Harness(side=Side.CLIENT, mss=1000)
    h.ep.connect(h.now)
    h.peer(ms(1), seq=0, ack=1, flags="SA", window=65535)
    h.write(ms(1), 3000)
    h.advance(ms(15))
    assert any(s.seg.why is Reason.LOSS_PROBE for s in h.out), h.out
    h.peer(ms(20), seq=1, ack=2001, window=65535)
    srtt = 1000 + (19_000 - 1000) // 8
    assert h.ep.tcp_info(h.now).rtt == srtt
    h.peer(ms(30), seq=1, ack=3001, window=65535)
    assert h.ep.tcp_info(h.now).rtt == srtt
