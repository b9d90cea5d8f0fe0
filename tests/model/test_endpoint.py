"""One rule at a time: each test pins a kernel behaviour the lessons rely on."""

from __future__ import annotations

import dataclasses

import pytest

from nagle_sim.model import PROFILES, Reason, Side, SocketOptions, SockOpt
from nagle_sim.model.events import Kind, Timer

from .harness import Harness, ms

LINUX = PROFILES["linux"]


def established(**kw: object) -> Harness:
    h = Harness(**kw)  # type: ignore[arg-type]
    h.accept(0, ms(1))
    h.take()
    return h


def lengths(h: Harness) -> list[int]:
    return [s.seg.length for s in h.take() if s.seg.length]


def reasons(h: Harness) -> list[Reason]:
    return [e.reason for e in h.ep.drain_events()]


# ---------------------------------------------------------------- Nagle (sender)
def test_minshall_unacked_full_segment_does_not_block_a_small_one() -> None:
    """tcp_minshall_check looks only at the last *small* segment sent."""
    h = established(mss=1000)
    h.write(ms(2), 1500)
    assert lengths(h) == [1000, 500]
    h.write(ms(3), 10)
    assert lengths(h) == [], "now the unACKed 500-byte segment blocks the next small one"
    assert Reason.NAGLE_HOLD in reasons(h)


def test_rfc896_nagle_holds_while_anything_is_unacked() -> None:
    h = established(mss=1000, profile=PROFILES["windows"])
    h.write(ms(2), 1500)
    assert lengths(h) == [1000], "classic Nagle: the 500-byte tail waits for an ACK"


def test_nagle_releases_on_the_ack_of_the_small_segment() -> None:
    h = established(mss=1000)
    h.write(ms(2), 6)
    h.write(ms(2), 7)
    assert lengths(h) == [6]
    h.peer(ms(5), seq=1, ack=7)
    sent = h.take()
    assert [(s.t, s.seg.length, s.seg.why) for s in sent] == [(ms(5), 7, Reason.ACK_RELEASE)]


def test_nodelay_is_not_one_packet_per_write_once_cwnd_is_full() -> None:
    """S5: with NODELAY, cwnd (10) still limits packets in flight; later writes coalesce."""
    h = established(mss=1000, options=SocketOptions(nodelay=True))
    for i in range(14):
        h.write(ms(2) + i, 100)
    assert lengths(h) == [100] * 10
    h.peer(ms(10), seq=1, ack=1001)
    assert lengths(h) == [400], "the four held writes leave as one segment"


def test_autocork_merges_writes_while_the_previous_packet_is_in_the_device_queue() -> None:
    h = established(mss=1000, options=SocketOptions(nodelay=True))
    h.ep.set_tx_complete(50)
    h.write(ms(2), 100)
    h.write(ms(2) + 10, 100)
    h.write(ms(2) + 20, 100)
    assert lengths(h) == [100]
    h.advance(ms(2) + 60)
    assert lengths(h) == [200]


def test_cork_ceiling_is_the_probe_timer_at_max_rto_200ms() -> None:
    """tcp(7)'s "200 ms ceiling": probe0 fires at max(RTO, 200 ms) with nothing in flight."""
    h = established(mss=1000)                      # handshake RTT 1 ms → RTO 201 ms
    h.setopt(ms(2), "cork", True)
    h.write(ms(2), 40)
    assert h.ep.deadline(Timer.PROBE0) == ms(210)   # 51 jiffies from jiffy 1, +1 tick
    h.advance(ms(300))
    sent = h.take()
    assert [(s.t, s.seg.summary(), s.seg.why) for s in sent] == [
        (ms(210), "P. 1:41(40) ack 1", Reason.PROBE0_RELEASE)]


def test_corked_data_is_not_released_while_data_is_in_flight() -> None:
    h = established(mss=1000)
    h.write(ms(2), 40)                              # in flight, never ACKed
    h.setopt(ms(3), "cork", True)
    h.write(ms(3), 40)
    assert h.ep.deadline(Timer.PROBE0) is None
    h.advance(ms(150))
    assert lengths(h) == [40]


def test_close_pushes_corked_data_with_the_fin() -> None:
    h = established(mss=1000)
    h.setopt(ms(2), "cork", True)
    h.write(ms(2), 40)
    h.close(ms(3))
    (fin,) = h.take()
    assert fin.seg.summary() == "FP. 1:41(40) ack 1"


def test_close_with_unread_data_sends_a_reset() -> None:
    h = established(mss=1000)
    h.peer(ms(2), seq=1, ack=1, length=10, flags="PA")
    h.take()
    h.close(ms(3))
    assert [s.seg.summary() for s in h.take()] == ["R. seq 1 ack 11"]


# ---------------------------------------------------------------- delayed ACK (receiver)
def _quick_spent(h: Harness, t: int = ms(2)) -> int:
    """Spend the 16 quick ACKs with 16 one-byte segments; returns the next free seq."""
    for i in range(16):
        h.peer(t + i * 100, seq=1 + i, ack=1, length=1, flags="PA")
        h.read(t + i * 100 + 1)
    assert len([s for s in h.take() if not s.seg.length]) == 16
    assert h.ep.tcp_info().quick == 0
    return 17


def test_first_data_grants_16_quick_acks_then_acks_are_delayed() -> None:
    h = established(mss=1000)
    seq = _quick_spent(h)
    h.peer(ms(50), seq=seq, ack=1, length=1)          # no PSH: not "pushed"
    assert h.take() == []
    assert (h.ep.deadline(Timer.DELACK) or 0) > ms(50)


def test_read_acks_a_pushed_small_segment_outside_pingpong() -> None:
    """__tcp_cleanup_rbuf: the read empties the queue after a PSH'd small segment."""
    h = established(mss=1000)
    seq = _quick_spent(h)
    h.peer(ms(50), seq=seq, ack=1, length=1, flags="PA")
    assert h.take() == []
    h.read(ms(50) + 5)
    (ack,) = h.take()
    assert ack.seg.why is Reason.READ_ACK and ack.t == ms(50) + 5


def test_more_than_one_full_frame_is_acked_at_once_with_rcv_mss_536() -> None:
    """__tcp_ack_snd_check: rcv_nxt - rcv_wup > rcv_mss, and rcv_mss starts at 536."""
    h = established(mss=1448)
    h.setopt(ms(2), "quickack", False)                # ping-pong: no quick ACKs, no read ACK
    h.peer(ms(2), seq=1, ack=1, length=300, flags="PA")
    assert h.take() == []
    h.read(ms(2))        # read, so the window would not shrink (see test_fidelity_rules)
    assert h.take() == []
    h.peer(ms(3), seq=301, ack=1, length=300, flags="PA")
    (ack,) = h.take()
    assert ack.seg.why is Reason.FULL_FRAME and ack.seg.ack == 601


def test_delack_firing_outside_pingpong_doubles_ato() -> None:
    h = established(mss=1000)
    seq = _quick_spent(h)
    h.peer(ms(50), seq=seq, ack=1, length=1)
    before = h.ep.tcp_info().ato
    h.advance(ms(120))
    assert [s.seg.why for s in h.take()] == [Reason.DELACK_FIRED]
    assert h.ep.tcp_info().ato == 2 * before


def test_ato_adapts_to_the_inter_arrival_gap() -> None:
    """tcp_event_data_recv: a gap m < ato gives ato = ato/2 + m (jiffies)."""
    h = established(mss=1000)
    jiffy = ms(4)                                      # HZ=250
    h.peer(ms(4), seq=1, ack=1, length=1)              # first data: ato = 10 jiffies
    assert h.ep.tcp_info().ato == 10 * jiffy
    h.peer(ms(4) + ms(28), seq=2, ack=1, length=1)     # m = 7 jiffies > 5, < 10
    assert h.ep.tcp_info().ato == (10 // 2 + 7) * jiffy


def test_quick_acks_refill_after_idle_longer_than_rto() -> None:
    h = established(mss=1000)
    seq = _quick_spent(h)
    h.peer(ms(1000), seq=seq, ack=1, length=1)         # idle ≫ RTO (≈ 201 ms)
    assert h.ep.tcp_info().quick == 15 and [s.seg.why for s in h.take()] == [Reason.QUICKACK_MODE]


def test_quick_reply_enters_pingpong_and_delayed_ack_timer_leaves_it() -> None:
    h = established(mss=1000)
    h.peer(ms(2), seq=1, ack=1, length=10, flags="PA")
    h.read(ms(2) + 5)
    h.write(ms(2) + 10, 10)                           # reply within ato
    assert h.ep.in_pingpong
    h.peer(ms(4), seq=11, ack=11, length=10, flags="PA")
    assert h.take()[-1].seg.length == 10, "only the reply so far; the new data waits"
    h.advance(ms(60))
    assert [s.seg.why for s in h.take()] == [Reason.DELACK_FIRED]
    assert not h.ep.in_pingpong


def test_quickack_option_is_one_shot_and_reads_not_pingpong() -> None:
    h = established(mss=1000)
    assert h.ep.get_option(SockOpt.QUICKACK) == 1
    h.setopt(ms(2), "quickack", False)
    assert h.ep.get_option(SockOpt.QUICKACK) == 0
    h.peer(ms(3), seq=1, ack=1, length=10, flags="PA")
    assert h.take() == [], "ping-pong: the ACK is delayed despite 16 quick ACKs in hand"
    h.read(ms(3) + 5)
    assert h.take() == [], "no read ACK in ping-pong"
    quick = h.ep.tcp_info().quick
    h.setopt(ms(4), "quickack", True)
    (ack,) = h.take()
    assert ack.seg.why is Reason.QUICKACK_OPT
    assert h.ep.tcp_info().quick == quick - 1, "the budget is spent, not refilled"
    assert h.ep.get_option(SockOpt.QUICKACK) == 1


def test_quickack_on_with_unread_data_does_not_ack() -> None:
    h = established(mss=1000)
    h.setopt(ms(2), "quickack", False)
    h.peer(ms(3), seq=1, ack=1, length=10, flags="PA")
    h.setopt(ms(4), "quickack", True)
    assert h.take() == [], "tcp_cleanup_rbuf needs an empty receive queue"


def test_pingpong_threshold_three_needs_three_quick_replies() -> None:
    """4a41f453bedf: each reply within ato counts once, if the previous send was in an
    earlier jiffy than the data it answers; the third one enters ping-pong."""
    h = established(mss=1000, profile=PROFILES["linux-5.4"])
    for i in range(3):           # a jiffy or more apart: before(lsndtime, lrcvtime)
        t = ms(2 + 10 * i)
        h.peer(t, seq=1 + 10 * i, ack=1 + 10 * i, length=10, flags="PA")
        h.read(t + 5)
        h.write(t + 10, 10)
        assert h.ep.in_pingpong is (i == 2)


def test_windows_acks_every_second_segment_or_after_200_ms() -> None:
    h = established(mss=1000, profile=PROFILES["windows"])
    h.peer(ms(2), seq=1, ack=1, length=10, flags="PA")
    assert h.take() == []
    h.peer(ms(3), seq=11, ack=1, length=10, flags="PA")
    assert [s.seg.why for s in h.take()] == [Reason.EVERY_2ND]
    h.peer(ms(10), seq=21, ack=1, length=10, flags="PA")
    h.advance(ms(300))
    (late,) = h.take()
    assert late.t == ms(210) and late.seg.why is Reason.DELACK_FIRED


def test_on_deadline_with_nothing_due_does_nothing() -> None:
    h = established(mss=1000)
    h.setopt(ms(2), "quickack", False)
    h.peer(ms(2), seq=1, ack=1, length=1)
    h.ep.drain_events()
    h.ep.on_deadline(ms(2))
    assert h.ep.segments_to_send() == [] and h.ep.drain_events() == []


def test_every_decision_has_a_reason_and_time() -> None:
    h = established(mss=1000)
    h.write(ms(2), 5)
    h.write(ms(2), 5)
    events = h.ep.drain_events()
    hold = next(e for e in events if e.kind is Kind.HOLD)
    assert hold.reason is Reason.NAGLE_HOLD and hold.at == ms(2) and hold.side is Side.SERVER
    assert "unACKed" in hold.text()


def test_jiffy_phase_shifts_the_delayed_ack_within_40_to_44_ms() -> None:
    fired = []
    for phase in range(0, 4000, 500):
        profile = dataclasses.replace(LINUX, jiffy_phase_us=phase)
        h = established(mss=1000, profile=profile)
        h.setopt(ms(10), "quickack", False)
        h.peer(ms(10), seq=1, ack=1, length=1)
        h.advance(ms(100))
        (ack,) = h.take()
        fired.append(ack.t - ms(10))
    assert min(fired) > ms(40) and max(fired) <= ms(44)
    assert len(set(fired)) == 8


# ---------------------------------------------------------------- BBR pacing
def test_bbr_paces_after_ten_segments_in_two_segment_bursts() -> None:
    """tcp_update_skb_after_send paces from the 10th data segment; BBR's STARTUP rate is
    2.885 × cwnd × MSS / RTT and tso_segs_goal is 2 at that rate (the real 6.18 trace
    sends pairs 1.39 ms apart on a 20 ms RTT)."""
    h = Harness(mss=1448, profile=dataclasses.replace(LINUX, congestion="bbr"))
    h.accept(0, ms(20))                       # handshake RTT 20 ms
    h.take()
    rate = h.ep.tcp_info().pacing_rate
    assert rate == pytest.approx(2.885 * 10 * 1448 / 0.020 * 0.99, rel=0.01)
    h.write(ms(21), 30 * 1448)
    first = h.take()
    assert len(first) == 10 and {s.t for s in first} == {ms(21)}, "IW10 leaves as a burst"
    h.peer(ms(41), seq=1, ack=1 + 4 * 1448)   # ACK of four: cwnd 14, eight may go
    h.advance(ms(60))
    times = [s.t for s in h.take() if s.seg.length]
    assert len(times) == 8
    assert all(times[i] == times[i + 1] for i in range(0, 8, 2)), "TSO bursts of two"
    pair_us = 2 * 1448 / h.ep.tcp_info().pacing_rate * 1e6
    # the first burst after idle is charged half (tcp_update_skb_after_send's credit),
    # as the kernel's 0.72 ms then 1.41 ms gaps show
    assert times[2] - times[0] == pytest.approx(pair_us / 2, abs=2)
    assert times[4] - times[2] == pytest.approx(pair_us, abs=2)
    assert times[6] - times[4] == pytest.approx(pair_us, abs=2)


def test_cubic_profile_does_not_pace() -> None:
    profile = dataclasses.replace(LINUX, congestion="cubic")
    h = Harness(mss=1448, profile=profile)
    h.accept(0, ms(20))
    h.take()
    h.write(ms(21), 30 * 1448)
    h.take()
    h.peer(ms(41), seq=1, ack=1 + 2 * 1448)
    assert {s.t for s in h.take()} == {ms(41)}


def test_threshold_three_counts_a_multi_segment_reply_once() -> None:
    """All segments of one reply leave in the same jiffy: only the first counts."""
    h = established(mss=1000, profile=PROFILES["linux-5.4"])
    h.peer(ms(2), seq=1, ack=1, length=10, flags="PA")
    h.read(ms(2) + 5)
    h.write(ms(2) + 10, 3000)
    assert h.ep.tcp_info().pingpong == 1


def test_a_write_ending_on_a_full_segment_carries_psh() -> None:
    """tcp_sendmsg_locked: the last chunk goes through tcp_push even when it fills the
    segment, so it is PSH'd, and the receiver ACKs it on read (realnet S1-style check)."""
    h = established(mss=1000)
    h.write(ms(2), 3000)
    assert [s.seg.summary() for s in h.take()] == [
        ". 1:1001(1000) ack 1", ". 1001:2001(1000) ack 1", "P. 2001:3001(1000) ack 1"]
