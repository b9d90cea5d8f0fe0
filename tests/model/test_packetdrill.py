"""The packetdrill scripts of linux-tcp-rules.md §6, replayed against the model.

Each test injects the peer's segments at the script's times and checks what the model
sends and when: exactly (simulated time), and within packetdrill's own tolerance of the
time the .pkt file expects (the scripts assume HZ=1000; this machine runs HZ=250).
"""

from __future__ import annotations

import dataclasses

from nagle_sim.model import PROFILES, Side, SocketOptions, SockOpt

from .harness import Harness, Sent, connect, ms, within_packetdrill_tolerance


def summaries(sent: list[Sent]) -> list[str]:
    return [s.seg.summary() for s in sent]


def test_a_sockopt_cork_nodelay() -> None:
    """gtests/net/tcp/nagle/sockopt_cork_nodelay.pkt: uncork and NODELAY push corked data."""
    h = Harness(mss=1000)
    h.accept(0, ms(10))
    h.take()
    h.setopt(ms(10), "cork", True)
    h.write(ms(10), 40)
    h.write(ms(60), 40)
    assert h.data_sent() == [], "corked partial data must wait"
    h.setopt(ms(70), "cork", False)
    (first,) = h.take()
    assert (first.t, first.seg.summary()) == (ms(70), "P. 1:81(80) ack 1")

    h.peer(ms(80), seq=1, ack=81)
    h.setopt(ms(80), "cork", True)
    h.write(ms(80), 40)
    h.write(ms(130), 40)
    assert h.data_sent() == []
    h.setopt(ms(130), "nodelay", True)          # NODELAY pushes although CORK stays set
    (second,) = h.take()
    assert (second.t, second.seg.summary()) == (ms(130), "P. 81:161(80) ack 1")
    assert h.ep.get_option(SockOpt.CORK)

    h.peer(ms(140), seq=1, ack=161)
    h.write(ms(140), 40, more=True)
    h.write(ms(190), 40, more=True)
    assert h.data_sent() == [], "MSG_MORE data waits even with NODELAY on"
    h.setopt(ms(200), "nodelay", True)
    (third,) = h.take()
    assert (third.t, third.seg.summary()) == (ms(200), ". 161:241(80) ack 1"), "no PSH"


def test_b_sendmsg_msg_more() -> None:
    """gtests/net/tcp/nagle/sendmsg_msg_more.pkt: the probe timer releases MSG_MORE data at
    max(RTO, 200 ms); the ACK-triggered push ignores MSG_MORE."""
    h = Harness(mss=1000)
    h.accept(0, ms(10))                          # handshake RTT 10 ms → RTO 210 ms
    h.setopt(ms(10), "nodelay", True)
    h.take()
    h.write(ms(10), 40, more=True)
    h.advance(ms(10 + 216))                      # at HZ=250: (212, 216] ms after the write
    (probe,) = h.take()
    assert probe.seg.summary() == "P. 1:41(40) ack 1"
    # RTO 210 ms = 53 jiffies at HZ=250; armed in jiffy 3 (mid-tick phase), due at 56,
    # runs at the start of jiffy 57 = 226 ms
    assert probe.t == ms(226)
    assert within_packetdrill_tolerance(probe.t, ms(10 + 210), ms(10))

    t = probe.t + ms(10)
    h.peer(t, seq=1, ack=41)
    h.write(t, 100, more=True)
    h.write(t + ms(5), 160, more=True)
    h.write(t + ms(15), 495, more=True)
    assert h.data_sent() == []
    h.write(t + ms(23), 5)
    (burst,) = h.take()
    assert (burst.t, burst.seg.summary()) == (t + ms(23), "P. 41:801(760) ack 1")

    t = burst.t + ms(20)
    h.peer(t, seq=1, ack=801)
    h.write(t + ms(100), 3100, more=True)
    full = h.take()
    # packetdrill sees the TSO skbs whole (". 801:3801(3000)"); cut into segments they
    # are a 2-segment skb (PSH on its last) and a single one, as this machine's kernel
    # sends them over the emulated link (realnet: ". 1:1001", "P. 1001:2001", ". 2001:3001")
    assert [s.seg.summary() for s in full] == [
        ". 801:1801(1000) ack 1", "P. 1801:2801(1000) ack 1", ". 2801:3801(1000) ack 1"]
    assert all(s.t == t + ms(100) for s in full)
    h.write(t + ms(103), 50, more=True)
    assert h.data_sent() == [], "100 + 50 bytes stay corked by MSG_MORE"
    h.peer(t + ms(110), seq=1, ack=2801)
    (tail,) = h.take()
    assert (tail.t, tail.seg.summary()) == (t + ms(110), ". 3801:3951(150) ack 1")

    t = t + ms(110)
    for dt, n in ((1, 1), (3, 2), (6, 3), (10, 4)):
        h.write(t + ms(dt), n, more=True)
    assert h.data_sent() == []
    h.peer(t + ms(20), seq=1, ack=3951)
    (small,) = h.take()
    assert (small.t, small.seg.summary()) == (t + ms(20), ". 3951:3961(10) ack 1")

    t = t + ms(40)
    h.peer(t, seq=1, ack=3961)
    h.write(t, 20, more=True)
    h.write(t + ms(50), 20)
    (last,) = h.take()
    assert (last.t, last.seg.summary()) == (t + ms(50), "P. 3961:4001(40) ack 1")


def test_c_https_client_nodelay_sends_tail_at_once() -> None:
    """gtests/net/tcp/nagle/https_client.pkt (client, NODELAY, peer MSS 974, RTT 100 ms)."""
    h = Harness(side=Side.CLIENT, mss=974, options=SocketOptions(nodelay=True))
    connect(h, 0)
    h.peer(ms(100), seq=0, ack=1, flags="SA", window=5792)
    h.write(ms(100), 517)
    assert summaries(h.take()) == ["S seq 0 ack 0", ". seq 1 ack 1", "P. 1:518(517) ack 1"]
    h.peer(ms(200), seq=1, ack=518, window=29312)
    h.peer(ms(200), seq=1, ack=518, length=143, flags="PA", window=29312)
    (ack,) = h.take()
    assert (ack.t, ack.seg.summary()) == (ms(200), ". seq 518 ack 144"), "first data: quick ACK"
    assert h.read(ms(200)) == 143
    h.write(ms(200), 51)
    h.write(ms(230), 2002)
    sent = h.take()
    # "P. 1543:2517": the write leaves as a 2-segment TSO skb (tcp_tso_autosize at this
    # pacing rate), which carries PSH (051ba67447de) on its last segment after GSO; the
    # current selftest and this machine's kernel (realnet) both show it.
    assert [(s.t, s.seg.summary()) for s in sent] == [
        (ms(200), "P. 518:569(51) ack 144"),
        (ms(230), ". 569:1543(974) ack 144"),
        (ms(230), "P. 1543:2517(974) ack 144"),
        (ms(230), "P. 2517:2571(54) ack 144"),
    ]


def test_c_https_client_with_nagle_holds_the_tail_until_acked() -> None:
    """The .pkt comment: without NODELAY the 54-byte tail waits for the ACK of 518:569."""
    h = Harness(side=Side.CLIENT, mss=974)
    connect(h, 0)
    h.peer(ms(100), seq=0, ack=1, flags="SA", window=5792)
    h.write(ms(100), 517)
    h.peer(ms(200), seq=1, ack=518, window=29312)
    h.write(ms(200), 51)
    h.write(ms(230), 2002)
    sent = h.take()
    assert [s.seg.length for s in sent if s.seg.length] == [517, 51, 974, 974]
    h.peer(ms(300), seq=1, ack=569, window=29312)
    (tail,) = h.take()
    assert (tail.t, tail.seg.summary()) == (ms(300), "P. 2517:2571(54) ack 1")


def _pingpong_run(profile_name: str) -> tuple[list[Sent], list[Sent], Harness]:
    """psp-rx-rcv-clear-or-cipher.pkt as plain TCP (Linux server, 500-byte exchanges)."""
    h = Harness(mss=1000, profile=PROFILES[profile_name])
    h.accept(ms(100), ms(200))
    h.write(ms(200), 500)
    h.peer(ms(200), seq=1, ack=501)
    h.take()
    h.peer(ms(300), seq=1, ack=501, length=500, flags="PA")
    first = h.take()
    h.read(ms(300))
    h.write(ms(300), 500)
    h.take()
    h.peer(ms(400), seq=501, ack=1001, length=500, flags="PA")
    h.advance(ms(400) + 1)
    second = h.take()
    h.advance(ms(444))                          # end of the 40-44 ms window
    second += h.take()
    return first, second, h


def test_d_pingpong_delays_the_ack_then_leaves_pingpong() -> None:
    """psp-rx-rcv-clear-or-cipher.pkt: ACK at once (quick), then delayed 40 ms in ping-pong,
    then the timer firing leaves ping-pong and the next ACK is immediate again."""
    first, second, h = _pingpong_run("linux")
    assert [(s.t, s.seg.summary()) for s in first] == [(ms(300), ". seq 501 ack 501")]
    (delayed,) = second
    assert delayed.seg.summary() == ". seq 1001 ack 1001"
    assert delayed.t == ms(442)                  # jiffy 100 + ato 10 → runs at jiffy 111
    assert within_packetdrill_tolerance(delayed.t, ms(440), ms(400))
    assert not h.ep.in_pingpong
    h.read(h.now)
    h.write(h.now, 500)                          # 44 ms after the data: not a quick reply
    assert not h.ep.in_pingpong
    h.take()
    h.peer(ms(540), seq=1001, ack=1501, length=500, flags="PA")
    (immediate,) = h.take()
    assert (immediate.t, immediate.seg.summary()) == (ms(540), ". seq 1501 ack 1501")


def test_d_with_threshold_three_the_second_ack_is_immediate() -> None:
    """Kernels with TCP_PINGPONG_THRESH 3 (about v5.1 to the 2022 revert) ACK at once."""
    _, second, h = _pingpong_run("linux-5.4")
    assert [(s.t, s.seg.summary()) for s in second] == [(ms(400), ". seq 1001 ack 1001")]


def test_f_slow_start_each_ack_of_two_releases_four() -> None:
    """slow-start-ack-per-2pkt.pkt: IW10, then every ACK of two segments releases four.
    The script assumes slow start without pacing (CUBIC), not this machine's BBR."""
    h = Harness(mss=1000, profile=PROFILES["linux"])
    h.accept(0, ms(100))
    h.take()
    h.write(ms(200), 30000)
    burst = h.take()
    assert [s.seg.length for s in burst] == [1000] * 10 and h.ep.tcp_info().snd_cwnd == 10
    acked = 1
    t: int = ms(305)
    while acked < 10001:                         # 30000 B = IW10 + 5 ACKs x 4 segments
        acked += 2000
        h.peer(t, seq=1, ack=acked)
        assert sum(s.seg.length for s in h.take()) == 4000
        t += ms(5)
    assert h.ep.tcp_info().snd_cwnd == 20


def test_hz_changes_the_delayed_ack_granularity() -> None:
    """At HZ=1000 the delayed ACK is 40-41 ms; at HZ=250 40-44 ms (one jiffy of slack)."""
    for hz, expected in ((1000, ms(440.5)), (250, ms(442))):   # mid-tick phase
        profile = dataclasses.replace(PROFILES["linux"], hz=hz)
        h = Harness(mss=1000, profile=profile)
        h.accept(ms(100), ms(200))
        h.write(ms(200), 500)
        h.peer(ms(200), seq=1, ack=501)
        h.peer(ms(300), seq=1, ack=501, length=500, flags="PA")
        h.read(ms(300))
        h.write(ms(300), 500)
        h.take()
        h.peer(ms(400), seq=501, ack=1001, length=500, flags="PA")
        h.advance(ms(600))
        (ack,) = h.take()
        assert ack.t == expected, hz
