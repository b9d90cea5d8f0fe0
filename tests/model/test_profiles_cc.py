"""Congestion controls (CUBIC, Reno, BBR per side), cwnd validation, TSO sizing and the
kernel-version profiles: each test asserts a kernel decision (cwnd, ssthresh, burst
sizes), never wall time."""

from __future__ import annotations

import dataclasses

import pytest

from nagle_sim.model import PROFILES, Side, SocketOptions
from nagle_sim.model.config import LINUX
from nagle_sim.model.cubic import BETA, Cubic, Reno, cube_root, slow_start
from nagle_sim.model.state import ModelError
from nagle_sim.scenario import ScenarioError, describe, loads
from nagle_sim.sim.driver import run_sim

from .harness import Harness, ms

HZ = 250


# ---------------------------------------------------------------- CUBIC arithmetic
def test_cube_root_is_exact_on_cubes_and_floors_between() -> None:
    assert [cube_root(n) for n in (0, 1, 7, 8, 26, 27, 10**9, 10**9 - 1)] == \
        [0, 1, 1, 2, 2, 3, 1000, 999]


def test_cubic_ssthresh_is_beta_times_cwnd_with_fast_convergence() -> None:
    c = Cubic(HZ)
    assert c.ssthresh(100) == 100 * BETA // 1024 == 70
    assert c.last_max_cwnd == 100
    # a second loss below the last maximum releases bandwidth: W_max = cwnd (1 + β) / 2
    assert c.ssthresh(80) == 56
    assert c.last_max_cwnd == 80 * (1024 + BETA) // 2048 == 68
    assert c.ssthresh(2) == 2, "never below 2"


def test_reno_halves_and_grows_one_segment_per_window() -> None:
    r = Reno()
    assert r.ssthresh(30) == 15 and r.ssthresh(3) == 2
    cwnd = 20
    for _ in range(20):           # 20 ACKed segments at cwnd 20: one more segment
        cwnd = r.cong_avoid(cwnd, 10, 1, 0)
    assert cwnd == 21


def test_slow_start_stops_at_ssthresh_and_hands_the_rest_on() -> None:
    assert slow_start(10, 12, 5) == (12, 3)
    assert slow_start(10, 1 << 30, 5) == (15, 0)


def test_cubic_grows_at_most_five_percent_per_rtt_before_any_loss() -> None:
    """bictcp_update caps cnt at 20 while last_max_cwnd is 0 (HyStart left slow start)."""
    c = Cubic(HZ)
    cwnd, now_j = 40, 1000
    for i in range(40):           # one window of ACKs, spread over 10 jiffies
        cwnd = c.cong_avoid(cwnd, 30, 1, now_j + i // 4)
    assert cwnd == 42             # 40 ACKs / cnt 20


def test_cubic_returns_to_w_max_along_the_concave_curve() -> None:
    """After a loss at W_max = 100 (ssthresh 70), K = cbrt(W_max·(1-β)/C) ≈ 4.2 s: cwnd
    creeps back and plateaus near W_max around t = K, then probes beyond it."""
    c = Cubic(HZ)
    c.delay_min_us = 100_000
    ssthresh = c.ssthresh(100)
    cwnd, now_j, acked_per_jiffy = ssthresh, 10_000, 2
    at: dict[float, int] = {}
    for j in range(0, 7 * HZ):
        cwnd = c.cong_avoid(cwnd, ssthresh, acked_per_jiffy, now_j + j)
        at[j / HZ] = cwnd
    k = c.k / 1024
    assert 4.0 < k < 4.4
    assert at[1.0] < at[2.0] < at[3.0] <= 100      # concave: approaching W_max
    assert 95 <= at[4.0] <= 101                    # near W_max at t ≈ K
    assert at[6.9] > 101                           # convex: probing past it


def test_cubic_is_never_slower_than_reno_with_the_same_beta() -> None:
    """TCP friendliness: with a huge K the cubic target is flat, yet cwnd still grows at
    Reno's rate (3β/(2-β) segments per window)."""
    c = Cubic(HZ)
    c.last_max_cwnd = 10_000          # W_max far above: cubic alone would barely move
    cwnd, start = 100, 100
    for i in range(1000):            # ten windows of ACKs
        cwnd = c.cong_avoid(cwnd, 50, 1, 5000 + i)
    assert cwnd - start >= 4


def test_hystart_ack_train_ends_slow_start() -> None:
    """ACKs closer than 2 ms apart for longer than delay_min/2 after the round started:
    ssthresh = cwnd (hystart_update's ack-train test, not paced)."""
    c = Cubic(HZ)
    c.hystart_reset(0, 0)
    verdict = None
    t = 20_000                        # first ACK one RTT (20 ms) after the round began
    c.round_start_us = c.last_ack_us = t
    for _ in range(20):
        verdict = c.acked(20_000, t // 4000, t, 32, 1 << 30, 1, 100, 1e9) or verdict
        t += 1000                     # one ACK per ms: a train
        if verdict:
            break
    assert verdict == 32
    assert 10_000 < t - 20_000 <= 12_000, "found once the train is longer than RTT/2"


def test_hystart_ignores_small_windows() -> None:
    c = Cubic(HZ)
    c.hystart_reset(0, 0)
    assert all(c.acked(20_000, 0, t, 15, 1 << 30, 1, 100, 1e9) is None
               for t in range(0, 50_000, 500))


# ---------------------------------------------------------------- endpoint behaviour
def _bulk(profile=LINUX, mss: int = 1000, rtt: float = 100) -> Harness:
    h = Harness(mss=mss, profile=profile)
    h.accept(0, ms(rtt))
    h.take()
    return h


def test_rto_under_cubic_sets_ssthresh_to_seven_tenths_of_cwnd() -> None:
    h = _bulk()
    h.write(ms(200), 60_000)
    h.take()
    acked = 1
    for i in range(10):               # ten ACKs of one segment: cwnd 10 -> 20
        acked += 1000
        h.peer(ms(300 + i), seq=1, ack=acked)
    assert h.ep.tcp_info().snd_cwnd == 20
    h.take()
    h.advance(ms(2000))               # no more ACKs: the RTO fires
    info = h.ep.tcp_info()
    assert info.snd_ssthresh == 20 * 717 // 1024 == 14
    assert info.snd_cwnd <= 2         # cwnd 1 (+1 if the retransmission was ACK-clocked)
    sent = [s for s in h.take() if s.seg.length]
    # the tail loss probe comes first: new data, one segment past cwnd if need be
    # (tcp_send_loss_probe); then the RTO retransmits the oldest unACKed segment
    assert sent and sent[0].seg.seq > acked
    assert [s.seg.seq for s in sent[1:2]] == [acked]


@pytest.mark.parametrize("congestion", ["reno", "bbr"])
def test_rto_ssthresh_per_congestion_control(congestion: str) -> None:
    """Reno halves; BBR's ssthresh hook only saves cwnd, so ssthresh stays infinite."""
    h = _bulk(dataclasses.replace(LINUX, congestion=congestion))
    h.write(ms(200), 60_000)
    h.take()
    acked = 1
    for i in range(10):
        acked += 1000
        h.peer(ms(300 + i), seq=1, ack=acked)
    cwnd = h.ep.tcp_info().snd_cwnd
    h.advance(ms(2000))
    info = h.ep.tcp_info()
    if congestion == "reno":
        assert info.snd_ssthresh == max(cwnd // 2, 2)
    else:
        assert info.snd_ssthresh >= 1 << 30


def test_slow_start_grows_to_twice_what_an_app_limited_sender_used() -> None:
    """tcp_is_cwnd_limited: in slow start cwnd grows while cwnd < 2 x max_packets_out of
    the window, so six segments ACKed one by one take cwnd 10 -> 12 (not 11, as a test
    on the packets still in flight would give)."""
    h = _bulk()
    h.write(ms(200), 6000)
    assert len(h.take()) == 6
    for i in range(6):
        h.peer(ms(300 + i), seq=1, ack=1 + 1000 * (i + 1))
    assert h.ep.tcp_info().snd_cwnd == 12


def test_cwnd_limited_sender_doubles_per_round() -> None:
    h = _bulk()
    h.write(ms(200), 200_000)
    assert len([s for s in h.take() if s.seg.length]) == 10
    acked = 1
    for i in range(10):
        acked += 1000
        h.peer(ms(300) + i * 10, seq=1, ack=acked)
    assert h.ep.tcp_info().snd_cwnd == 20
    assert len([s for s in h.take() if s.seg.length]) == 20


def test_tso_bursts_are_two_segments_at_wan_rtt_and_min_tso_segs_raises_them() -> None:
    """tcp_tso_autosize: at 20 ms RTT the unpaced CUBIC rate gives < 1 segment per ms,
    so each skb is tcp_min_tso_segs (2); tuning it to 4 gives bursts of 4 (PSH marks
    the end of each)."""
    for segs in (2, 4):
        h = _bulk(dataclasses.replace(LINUX, min_tso_segs=segs), mss=1448, rtt=20)
        h.write(ms(21), 20 * 1448)
        data = [s for s in h.take() if s.seg.length]
        psh = [i for i, s in enumerate(data) if "P" in s.flags]
        assert len(data) == 10
        assert psh[0] == segs - 1, f"first TSO skb of {segs}"


def test_tso_skb_takes_half_the_window_on_a_sub_ms_path() -> None:
    """tcp_tso_autosize on a 200 µs path (rate and tcp_tso_rtt_log both allow a 64 KB skb):
    the IW leaves as two skbs of cwnd/2 (tcp_cwnd_test's cap)."""
    h = _bulk(mss=1448, rtt=0.2)
    h.write(ms(1), 20 * 1448)
    data = [s for s in h.take() if s.seg.length]
    psh = [i for i, s in enumerate(data) if "P" in s.flags]
    assert psh == [4, 9]


# ---------------------------------------------------------------- scenarios
BASE = """
[link]
delay_ms = 10
[client]
{client}
script = "write 100000\\nread 1"
[server]
script = "read 100000\\nwrite 1"
"""


def test_default_linux_profile_is_cubic() -> None:
    assert LINUX.congestion == "cubic" and not LINUX.bbr
    sc = loads(BASE.format(client=""))
    assert sc.client.profile.congestion == sc.server.profile.congestion == "cubic"


def test_congestion_per_side_from_the_file_and_from_set() -> None:
    sc = loads(BASE.format(client='congestion = "bbr"'))
    assert sc.client.profile.congestion == "bbr" and sc.server.profile.congestion == "cubic"
    sc = loads(BASE.format(client=""), overrides=["server.congestion=reno"])
    assert sc.server.profile.congestion == "reno"


@pytest.mark.parametrize("value", ['"vegas"', "1", "true"])
def test_unknown_congestion_is_one_clear_line(value: str) -> None:
    with pytest.raises(ScenarioError) as err:
        loads(BASE.format(client=f"congestion = {value}"))
    msg = str(err.value)
    assert "\n" not in msg and "client.congestion" in msg and "cubic" in msg


def test_lesson_nine_flights_are_ten_twenty_forty_under_cubic() -> None:
    """The kernel (6.18, cubic) sends 10, 20, then the last 40 of 70 segments."""
    trace = run_sim(loads(BASE.format(client="")))
    times = sorted(s.t for s in trace.segments if s.src.value == "client" and s.length)
    flights, last = [], None
    for t in times:
        if last is None or t - last > ms(5):
            flights.append(0)
        flights[-1] += 1
        last = t
    assert flights == [10, 20, 40]


def test_bbr_side_paces_cubic_side_does_not() -> None:
    for congestion, paced in (("bbr", True), ("cubic", False)):
        trace = run_sim(loads(BASE.format(client=f'congestion = "{congestion}"')))
        holds = [e for e in trace.events if e.code == "PACING_HOLD"]
        assert bool(holds) is paced


# ---------------------------------------------------------------- version profiles
def test_every_profile_names_a_known_congestion_control() -> None:
    for p in PROFILES.values():
        assert p.congestion in ("cubic", "reno", "bbr"), p.name


def test_every_version_profile_cites_its_sources() -> None:
    for name in ("linux-6.6", "linux-6.1", "linux-5.15", "linux-5.4", "linux-4.18"):
        p = PROFILES[name]
        assert p.sources and p.congestion == "cubic", name


@pytest.mark.parametrize(("name", "delayed_after"), [
    ("linux", None), ("linux-6.6", None), ("linux-6.1", None),
    ("linux-5.15", 16), ("linux-5.4", 16), ("linux-4.18", 16)])
def test_s4_one_way_stream_goes_delayed_after_sixteen_on_old_kernels(
        name: str, delayed_after: int | None) -> None:
    """Seed S4: a server writing 1 kB every 40 ms. Kernels without 059217c18be6 spend the
    quick-ACK budget per segment and, 40 ms apart, never refill it: from the 17th segment
    the ACK waits ~40 ms. 6.x keeps ACKing at once."""
    text = f"""
[link]
delay_ms = 1
[client]
profile = "{name}"
script = "read 25000"
[server]
script = "repeat 25 {{ write 1000; sleep 40ms }}"
"""
    trace = run_sim(loads(text))
    data = [s for s in trace.segments if s.src.value == "server" and s.length]
    acks = [s for s in trace.segments if s.src.value == "client" and s.is_pure_ack]
    delays = []
    for d in data[:24]:
        ack = next(a for a in acks if d.arrive is not None and a.t >= d.arrive)
        delays.append((ack.t - (d.arrive or 0)) / 1000)
    if delayed_after is None:
        assert max(delays) < 1
    else:
        assert max(delays[:delayed_after]) < 1
        assert all(36 <= x <= 44 for x in delays[delayed_after:]), delays


def test_pingpong_threshold_three_needs_replies_to_newer_data() -> None:
    p = PROFILES["linux-5.4"]
    assert (p.pingpong_thresh, p.pingpong_needs_new_data) == (3, True)
    assert PROFILES["linux-4.18"].pingpong_thresh == 1


# ---------------------------------------------------------------- timing options
RTO_DECAY_MS = [212, 176, 148, 128, 112]
"""Measured on this project's 6.18 kernel (tests/realnet/test_options.py): tcpi_rto after
each 10 ms request/response once TCP_RTO_MIN_US = 50 ms is set after the handshake."""


def test_rto_min_option_decays_the_rto_as_the_kernel_does() -> None:
    h = Harness(side=Side.SERVER, mss=1000)
    h.accept(0, ms(10))
    h.ep.set_timing_option(h.now, "rto_min", 50_000)
    got, seq, t = [], 1, ms(20)
    for i in range(5):
        h.write(t, 100)
        h.peer(t + ms(10), seq=1 + 100 * i, ack=seq + 100, length=100, flags="PA")
        seq += 100
        rto = h.ep.tcp_info().rto
        got.append(-(-rto // 4000) * 4)            # icsk_rto is whole jiffies
        t += ms(20)
    assert all(abs(g - w) <= 4 for g, w in zip(got, RTO_DECAY_MS, strict=True)), got


def test_delack_max_option_caps_a_ping_pong_delayed_ack() -> None:
    """TCP_DELACK_MAX_US 5 ms = 2 jiffies: the ACK leaves 2 jiffies (+ timer slack) after
    the data, not 10."""
    h = Harness(side=Side.SERVER, mss=1000, options=SocketOptions(quickack=False))
    h.accept(0, ms(10))
    h.ep.set_timing_option(h.now, "delack_max", 5_000)
    h.peer(ms(50), seq=1, ack=1, length=100, flags="PA")
    h.advance(ms(200))
    (ack,) = [s for s in h.take() if not s.seg.length and s.t >= ms(50)]
    assert ms(4) < ack.t - ms(50) <= ms(12)


@pytest.mark.parametrize(("option", "us", "why"), [
    ("rto_min", 500_000, "accepts 2 to 50"), ("delack_max", 1_000, "accepts 2 to 50")])
def test_timing_options_out_of_range_are_refused(option: str, us: int, why: str) -> None:
    h = Harness(side=Side.SERVER)
    h.accept(0, ms(10))
    with pytest.raises(ModelError, match=why):
        h.ep.set_timing_option(h.now, option, us)


def test_timing_options_need_a_6_15_kernel() -> None:
    h = Harness(side=Side.SERVER, profile=PROFILES["linux-6.6"])
    h.accept(0, ms(10))
    with pytest.raises(ModelError, match="6.15"):
        h.ep.set_timing_option(h.now, "rto_min", 50_000)


def test_delack_max_follows_rto_min_on_new_kernels_only() -> None:
    assert LINUX.tcp_delack_max_j == 49 and LINUX.delack_max_j == 50
    assert PROFILES["linux-6.6"].tcp_delack_max_j == 50
    assert dataclasses.replace(LINUX, rto_min_us=52_000).tcp_delack_max_j == 12


def test_script_timing_statements_parse_and_validate() -> None:
    sc = loads('[client]\nscript = "set delack_max 5ms\\nset rto_min 50ms"\n')
    assert [describe(s) for s in sc.client.script] == [("set", "delack_max 5ms"),
                                                       ("set", "rto_min 50ms")]
    for bad, msg in (('set rto_min 1s', "TCP_RTO_MIN_US"), ('set delack_max 1us', "jiffies"),
                     ('set delack_max soon', "bad duration")):
        with pytest.raises(ScenarioError, match=msg) as err:
            loads(f'[client]\nscript = "{bad}"\n')
        assert "\n" not in str(err.value)


# ---------------------------------------------------------------- route quickack, link
def test_route_quickack_acks_every_segment_even_in_ping_pong() -> None:
    text = """
[link]
delay_ms = 5
quickack = true
[client]
script = "sleep 50ms\\nwrite 100\\nread 1"
[server]
quickack = false
script = "read 100\\nsleep 100ms\\nwrite 1"
"""
    for quick, immediate in ((True, True), (False, False)):
        trace = run_sim(loads(text.replace("quickack = true", f"quickack = {str(quick).lower()}")))
        data = next(s for s in trace.segments if s.src.value == "client" and s.length)
        ack = next(s for s in trace.segments if s.src.value == "server" and s.is_pure_ack
                   and s.t > data.t)
        assert ((ack.t - (data.arrive or 0)) < 1000) is immediate


LINK = """
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


def test_link_rate_adds_serialization_delay() -> None:
    """An idle 1 Mbit/s link: 452 bytes on the wire take 3.616 ms, on top of the 5 ms
    delay (and the profile's 1 µs of host latency)."""
    trace = run_sim(loads(LINK % (100, "sleep 10ms\\nwrite 400", 400)))
    data = next(s for s in trace.segments if s.src.value == "client" and s.length)
    assert data.arrive is not None
    assert data.arrive - data.t == 5000 + 1 + (400 + 52) * 8


def test_drop_tail_queue_drops_the_overflow() -> None:
    trace = run_sim(loads(LINK % (4, "write 14480", 14480)))
    first = [s for s in trace.segments if s.src.value == "client" and s.length][:10]
    assert [s.arrive is None for s in first] == [False] * 3 + [True] * 7
    assert trace.meta["link_drops"] == 7


@pytest.mark.parametrize(("key", "value", "msg"), [
    ("rate", '"fast"', "expected a rate"), ("rate", '"1tbit"', "expected a rate"),
    ("rate", '"10bit"', "from 1kbit"), ("queue", "0", "must be"),
    ("queue", "2.5", "whole number")])
def test_bad_link_rate_or_queue_is_one_line(key: str, value: str, msg: str) -> None:
    extra = "" if key == "rate" else 'rate = "1mbit"\n'
    with pytest.raises(ScenarioError, match=msg) as err:
        loads(f"[link]\n{extra}{key} = {value}\n")
    assert "\n" not in str(err.value) and f"link.{key}" in str(err.value)


def test_queue_without_rate_is_refused() -> None:
    with pytest.raises(ScenarioError, match="needs a rate"):
        loads("[link]\nqueue = 10\n")


def test_rto_min_option_leaves_the_cork_ceiling_at_200_ms() -> None:
    """tcp_probe0_base uses the constant TCP_RTO_MIN: with rto_min 50 ms and the RTO
    down to ~112 ms, corked data still waits max(RTO, 200 ms)."""
    h = Harness(side=Side.SERVER, mss=1000)
    h.accept(0, ms(10))
    h.ep.set_timing_option(h.now, "rto_min", 50_000)
    seq, t = 1, ms(20)
    for i in range(5):
        h.write(t, 100)
        h.peer(t + ms(10), seq=1 + 100 * i, ack=seq + 100, length=100, flags="PA")
        seq += 100
        t += ms(20)
    assert h.ep.tcp_info().rto < 130_000
    h.take()
    h.setopt(t, "cork", True)
    h.write(t, 10)
    h.advance(t + ms(300))
    probe = next(s for s in h.take() if s.seg.length)   # (unACKed, it is re-sent later)
    assert ms(200) <= probe.t - t <= ms(208)


@pytest.mark.parametrize("name", [p.name for p in PROFILES.values() if not p.pingpong_sysctl])
def test_pingpong_thresh_tune_is_refused_where_the_sysctl_does_not_exist(name: str) -> None:
    """net.ipv4.tcp_pingpong_thresh came with 562b1fdf061b (Linux 6.7): a profile of an
    older kernel (or another OS) has a fixed threshold, so tuning it is one clear line
    naming the file, the line of the key, the profile and the commit."""
    text = f'[server]\nprofile = "{name}"\n[server.tune]\npingpong_thresh = 2\n'
    with pytest.raises(ScenarioError) as err:
        loads(text, "x.toml")
    msg = str(err.value)
    assert msg.startswith("x.toml:4: server.tune.pingpong_thresh: ") and "\n" not in msg
    assert f"profile {name!r}" in msg and "562b1fdf061b" in msg
    inline = f'[server]\nprofile = "{name}"\ntune = {{ pingpong_thresh = 2 }}\n'
    with pytest.raises(ScenarioError, match=r"^x\.toml:3: server\.tune\.pingpong_thresh"):
        loads(inline, "x.toml")


def test_pingpong_thresh_tune_is_accepted_where_the_sysctl_exists() -> None:
    assert PROFILES["linux"].pingpong_sysctl
    sc = loads('[server]\ntune = { pingpong_thresh = 3 }\n', "x.toml")
    assert sc.server.profile.pingpong_thresh == 3
