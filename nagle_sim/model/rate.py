"""Rate and congestion control: RTT and RTO, the congestion window, delivery-rate samples,
pacing and TSO sizing (tcp_input.c's estimators, tcp_cong.c, tcp_rate.c, tcp_output.c's
pacing hooks; BBR itself lives in ``bbr.py``, CUBIC and Reno in ``cubic.py``).

Owns: how fast and how much may be in flight. Must not send or trace segments (that is
``output``); standard library and lower model modules only.
"""

from __future__ import annotations

from .bbr import Bbr, RateSample
from .config import (
    GSO_MAX_SIZE,
    MAX_TCP_HEADER,
    PACING_AFTER_SEGS,
    PACING_CA_RATIO,
    PACING_SS_RATIO,
    SK_PACING_SHIFT,
)
from .cubic import Cubic, Reno
from .events import Kind, Micros, Reason, Segment, Timer
from .sock import Sock
from .state import CA_STATE_NAMES, CaState, Chrono, Skb, State


# ---------------------------------------------------------------- time spent limited
def tcp_chrono_set(sk: Sock, now: Micros, new: int) -> None:
    """tcp_chrono_set: charge the time since the last change (jiffies) to the chrono
    that ran, and start ``new``."""
    snd = sk.snd
    now_j = sk.jiffies(now)
    if snd.chrono_type > Chrono.UNSPEC:
        snd.chrono_stat[snd.chrono_type - 1] += now_j - snd.chrono_start_j
    snd.chrono_start_j = now_j
    snd.chrono_type = new


def tcp_chrono_start(sk: Sock, now: Micros, kind: int) -> None:
    """tcp_chrono_start: a more interesting limit (a higher `Chrono`) takes over."""
    if kind > sk.snd.chrono_type:
        tcp_chrono_set(sk, now, kind)


def tcp_chrono_stop(sk: Sock, now: Micros, kind: int) -> None:
    """tcp_chrono_stop: with both queues empty nothing is timed; otherwise the limit
    that stopped, if it is the one running, gives way to plain busy time."""
    snd = sk.snd
    if snd.chrono_type == Chrono.UNSPEC:
        return          # nothing is timed: neither branch would change what is read
    if snd.snd_una == snd.write_seq:        # both queues empty (every byte and FIN ACKed)
        tcp_chrono_set(sk, now, Chrono.UNSPEC)
    elif kind == snd.chrono_type:
        tcp_chrono_set(sk, now, Chrono.BUSY)


def chrono_stats_us(sk: Sock, now: Micros) -> tuple[int, int, int]:
    """tcp_get_info_chrono_stats: (busy time — all three summed —, rwnd-limited,
    sndbuf-limited), each in µs (jiffies × USEC_PER_SEC / HZ)."""
    snd = sk.snd
    stats = list(snd.chrono_stat)
    if snd.chrono_type > Chrono.UNSPEC:
        stats[snd.chrono_type - 1] += sk.jiffies(now) - snd.chrono_start_j
    us = [j * sk.tick_us for j in stats]
    return sum(us), us[1], us[2]


# ---------------------------------------------------------------- RTT and RTO
def tcp_rtt_tsopt_us(sk: Sock, now: Micros, seg: Segment) -> int:
    """tcp_rtt_tsopt_us(tp, 1): the RTT from an ACK's timestamp echo, now − TSecr on the
    millisecond TS clock, 0 counted as 1 ms; -1 when timestamps are off or the ACK
    carries no echo (tcp_ack_update_rtt's rx_opt.saw_tstamp, rcv_tsecr)."""
    if not sk.rcv.ts_on or seg.tsecr < 0:
        return -1
    return max(now // 1000 - seg.tsecr, 1) * 1000


def tcp_rtt_estimator(sk: Sock, m: int) -> None:
    """tcp_rtt_estimator + tcp_set_rto (RFC 6298 as Linux does it): SRTT moves 1/8 toward
    each sample, mdev 1/4 (1/32 when the sample is below SRTT); rttvar jumps up to a larger
    mdev at once but decays only once per RTT, by a quarter of its excess over the largest
    mdev of that RTT, floored at rto_min (tcp_rto_min_us, so a lowered rto_min takes a few
    RTTs to show); rto = srtt + rttvar. The first sample sets mdev = 2·RTT (rto = 3·RTT)."""
    cc, snd = sk.cc, sk.snd
    m = max(m, 1)
    rto_min = sk.profile.rto_min_us
    if cc.srtt_us == 0:
        cc.srtt_us = m
        cc.mdev_us = m << 1
        cc.rttvar_us = cc.mdev_max_us = max(cc.mdev_us, rto_min)
        cc.rtt_seq = snd.snd_nxt
    else:
        err = m - cc.srtt_us
        cc.srtt_us = max(1, cc.srtt_us + (err >> 3 if err >= 0 else -((-err) >> 3)))
        if err < 0:
            err = -err - (cc.mdev_us >> 2)
            if err > 0:
                err >>= 3
        else:
            err -= cc.mdev_us >> 2
        cc.mdev_us += err
        if cc.mdev_us > cc.mdev_max_us:
            cc.mdev_max_us = cc.mdev_us
            cc.rttvar_us = max(cc.rttvar_us, cc.mdev_max_us)
        if snd.snd_una > cc.rtt_seq:
            if cc.mdev_max_us < cc.rttvar_us:
                cc.rttvar_us -= (cc.rttvar_us - cc.mdev_max_us) >> 2
            cc.rtt_seq = snd.snd_nxt
            cc.mdev_max_us = rto_min
    cc.rto_us = min(cc.srtt_us + cc.rttvar_us, sk.profile.rto_max_us)


# ---------------------------------------------------------------- congestion window
def tcp_cwnd_test(cwnd: int, in_flight: int, fin_exempt: bool) -> int:
    """tcp_cwnd_test: how many segments the next TSO skb may carry: 0 when cwnd is full
    (before 6.10 a one-segment skb with the FIN still could: ``fin_exempt``), else
    min(cwnd/2, free cwnd) (the cwnd/2 cap keeps one skb from taking the whole window)."""
    if in_flight >= cwnd:
        return 1 if fin_exempt else 0
    half, free = cwnd >> 1 or 1, cwnd - in_flight
    return half if half < free else free


def tcp_init_congestion_control(sk: Sock, now: Micros) -> None:
    """tcp_init_congestion_control: bbr_init (pacing from the handshake RTT), or
    cubictcp_init (HyStart's first round starts now; ssthresh stays infinite, as
    initial_ssthresh is 0), or Reno (nothing to set up)."""
    cc, p = sk.cc, sk.profile
    if p.congestion == "bbr":
        cc.bbr = Bbr(sk.mss, now, cc.srtt_us, cc.cwnd, cc.min_rtt_us)
        cc.pacing_rate = cc.bbr.pacing_rate
    elif p.congestion == "reno":
        cc.ca = Reno()
    else:
        cubic = Cubic(p.hz, hystart=p.hystart)
        cubic.hystart_reset(now, sk.snd.snd_nxt)
        cc.ca = cubic


def tcp_is_cwnd_limited(sk: Sock) -> bool:
    """tcp_is_cwnd_limited: the window was full in the current window of data, or, in
    slow start, cwnd is below twice the most packets out in that window (so cwnd keeps
    growing to twice what the application actually used)."""
    cc = sk.cc
    if cc.is_cwnd_limited:
        return True
    if cc.cwnd < cc.ssthresh:
        return cc.cwnd < 2 * cc.max_packets_out
    return False


def tcp_cwnd_validate(sk: Sock, now: Micros, is_cwnd_limited: bool) -> None:
    """tcp_cwnd_validate (as since f4ce91ce12a7, 2022, which keeps is_cwnd_limited for a
    whole window): remember, per window of data (until snd_una passes cwnd_usage_seq), whether the
    sender filled cwnd and the most packets it had out."""
    cc, snd = sk.cc, sk.snd
    packets_out = sk.packets_out
    if (snd.snd_una >= cc.cwnd_usage_seq or is_cwnd_limited
            or (not cc.is_cwnd_limited and packets_out > cc.max_packets_out)):
        cc.is_cwnd_limited = is_cwnd_limited
        cc.max_packets_out = packets_out
        cc.cwnd_usage_seq = snd.snd_nxt
    if (not tcp_is_cwnd_limited(sk) and not snd.queue and snd.nospace
            and (sk.state is State.ESTABLISHED or sk.state is State.CLOSE_WAIT)):
        # "the starvation is caused by insufficient sender buffer": everything queued
        # went out, cwnd is not full, and the application waits for room
        tcp_chrono_start(sk, now, Chrono.SNDBUF_LIMITED)


def tcp_cong_avoid(sk: Sock, now: Micros, acked: int) -> None:
    """tcp_cong_avoid → cubictcp_cong_avoid / tcp_reno_cong_avoid: grow cwnd only while
    the sender is cwnd-limited (tcp_is_cwnd_limited); slow start to ssthresh, then the
    congestion control's own growth."""
    cc = sk.cc
    if cc.ca is None or not tcp_is_cwnd_limited(sk):
        return
    new = cc.ca.cong_avoid(cc.cwnd, cc.ssthresh, acked, sk.jiffies(now))
    if new != cc.cwnd:
        phase = "slow start" if cc.cwnd < cc.ssthresh else f"{cc.ca.name} avoidance"
        sk.event(now, Kind.MODE, Reason.CWND_GROW, f"cwnd {cc.cwnd} → {new} ({phase})",
                 cwnd=new)
        cc.cwnd = new


def tcp_ca_ssthresh(sk: Sock) -> int:
    """icsk_ca_ops->ssthresh as tcp_enter_loss asks it after an RTO: CUBIC β·cwnd (717/1024),
    Reno cwnd/2, BBR leaves ssthresh alone (bbr_ssthresh only saves cwnd)."""
    cc = sk.cc
    if cc.ca is None:
        return cc.ssthresh
    return cc.ca.ssthresh(cc.cwnd)


def tcp_packets_in_flight(sk: Sock) -> int:
    """tcp_packets_in_flight: segments out, less those the duplicate ACKs say left the
    network and those marked lost, plus retransmissions still out."""
    cc = sk.cc
    return len(sk.snd.rtx) - cc.sacked_out - cc.lost_out + cc.retrans_out


def tcp_mark_skb_lost(sk: Sock, skb: Skb) -> None:
    """tcp_mark_skb_lost: a lost segment is no longer in flight; a retransmission of it
    that was counted is not either (it must go again)."""
    cc = sk.cc
    if skb.rexmit:
        skb.rexmit = False
        cc.retrans_out -= 1
    if not skb.lost:
        skb.lost = True
        cc.lost_out += 1


def tcp_enter_loss(sk: Sock, now: Micros) -> None:
    """tcp_enter_loss on an RTO: ssthresh from the congestion control (only when a new
    episode starts: repeated timeouts in TCP_CA_Loss keep it), every outstanding segment
    marked lost but those sent within the last RTT (tcp_timeout_mark_lost; the duplicate
    ACK count is dropped), cwnd = in flight + 1 = 1, the Loss state until what was
    outstanding is ACKed (high_seq), and CUBIC's state reset (cubictcp_state)."""
    cc, snd = sk.cc, sk.snd
    if (cc.ca_state <= CaState.DISORDER or cc.high_seq <= snd.snd_una
            or (cc.ca_state == CaState.LOSS and not cc.retransmits)):
        cc.prior_cwnd = cc.cwnd
        cc.ssthresh = tcp_ca_ssthresh(sk)
    cc.sacked_out = 0
    recent = now - (cc.srtt_us or 0)
    for i, skb in enumerate(snd.rtx):
        if i and skb.sent_at > recent:
            continue        # "don't mark recently sent ones lost yet" (RACK's timeout)
        tcp_mark_skb_lost(sk, skb)
    cc.cwnd = tcp_packets_in_flight(sk) + 1
    cc.ca_state = CaState.LOSS
    cc.high_seq = snd.snd_nxt
    if cc.ca is not None:
        cc.ca.on_loss(now, snd.snd_nxt)


def tcp_cwnd_reduction(sk: Sock, now: Micros, delivered: int, una_advanced: bool,
                       newly_lost: int) -> None:
    """tcp_cwnd_reduction, Proportional Rate Reduction (RFC 6937) in fast recovery: while
    more than ssthresh is in flight, send ssthresh/prior_cwnd segments per segment
    delivered; below it, grow back toward ssthresh at most as fast as slow start; at
    least one segment (the fast retransmission) on entering."""
    cc = sk.cc
    if delivered <= 0 or not cc.prior_cwnd:
        return
    in_flight = tcp_packets_in_flight(sk)
    delta = cc.ssthresh - in_flight
    cc.prr_delivered += delivered
    if delta < 0:
        sndcnt = (cc.ssthresh * cc.prr_delivered + cc.prior_cwnd - 1) // cc.prior_cwnd \
            - cc.prr_out
    else:
        sndcnt = max(cc.prr_delivered - cc.prr_out, delivered)
        if una_advanced and not newly_lost:
            sndcnt += 1
        sndcnt = min(delta, sndcnt)
    sndcnt = max(sndcnt, 0 if cc.prr_out else 1)
    new = in_flight + sndcnt
    if new != cc.cwnd:
        sk.event(now, Kind.MODE, Reason.CWND_PRR, f"cwnd {cc.cwnd} → {new} "
                 f"({CA_STATE_NAMES[cc.ca_state]}: ssthresh {cc.ssthresh})", cwnd=new)
        cc.cwnd = new


def tcp_ca_event_tx_start(sk: Sock, now: Micros) -> None:
    """CA_EVENT_TX_START (tcp_event_data_sent with nothing in flight): BBR notes an
    idle restart; CUBIC moves its epoch past the idle time."""
    cc = sk.cc
    if cc.bbr is not None:
        cc.bbr.on_transmit_start(bool(cc.app_limited))
    elif cc.ca is not None:
        cc.ca.on_tx_start(sk.jiffies(now), sk.snd.lsndtime_j)


def pacing_rate_estimate(sk: Sock) -> float:
    """tcp_update_pacing_rate (bytes/s): mss · max(cwnd, packets out) / srtt, times 200 %
    in the first half of slow start, 120 % after; unlimited before an RTT is known.
    Without BBR (or fq) nothing is paced, but TSO sizing and HyStart read this rate."""
    cc = sk.cc
    if not cc.srtt_us:
        return float(1 << 40)
    ratio = PACING_SS_RATIO if cc.cwnd < cc.ssthresh / 2 else PACING_CA_RATIO
    return sk.mss * max(cc.cwnd, sk.packets_out) * 1e6 / cc.srtt_us * ratio


def tcp_cwnd_restart(sk: Sock, now: Micros) -> None:
    """tcp_slow_start_after_idle_check → tcp_cwnd_restart (net.ipv4.tcp_slow_start_after_idle,
    RFC 2861): after more than one RTO without sending data (lsndtime), with nothing in
    flight, cwnd is halved once per RTO of idle time beyond the first, down to the initial
    window (restart_cwnd = min(init_cwnd, cwnd)); ssthresh becomes tcp_current_ssthresh.
    Not under BBR (a cong_control congestion control). Checked when a skb is queued
    (tcp_skb_entail) and when a window update arrives with data queued
    (tcp_ack_update_window): packetdrill's slow-start-after-win-update, cwnd 36 → 10 after
    2.1 s of zero window, 5 MSS sent (half the restarted window, tcp_cwnd_test)."""
    p, cc = sk.profile, sk.cc
    if not p.slow_start_after_idle or sk.snd.rtx or cc.bbr is not None or not cc.srtt_us:
        return
    rto_j = sk.rto_j
    delta = sk.jiffies(now) - sk.snd.lsndtime_j
    if delta <= rto_j:
        return
    restart = min(p.init_cwnd, cc.cwnd)
    # tcp_current_ssthresh (not in a cwnd reduction): at least 3/4 of the old window
    cc.ssthresh = max(cc.ssthresh, (cc.cwnd >> 1) + (cc.cwnd >> 2))
    cwnd = cc.cwnd
    delta -= rto_j
    while delta > 0 and cwnd > restart:
        cwnd >>= 1
        delta -= rto_j
    new = max(cwnd, restart)
    if new != cc.cwnd:
        sk.event(now, Kind.MODE, Reason.CWND_IDLE, f"cwnd {cc.cwnd} → {new}", cwnd=new)
        cc.cwnd = new


def tcp_cong_control(sk: Sock, now: Micros, acked_skbs: list[Skb], prior_packets: int,
                     delivered: int = -1, una_advanced: bool = True,
                     newly_lost: int = 0, retrans_rtt_us: int | None = None) -> None:
    """tcp_rate_gen + tcp_cong_control: a delivery-rate sample for BBR; otherwise, in fast
    recovery, Proportional Rate Reduction of ``delivered`` (segments ACKed or
    duplicate-ACKed; default: the ACKed ones), else slow start / congestion avoidance
    when data was ACKed (tcp_may_raise_cwnd). ``retrans_rtt_us``: retransmitted data was
    ACKed, so the sample (rs->rtt_us) is not the newest skb's timing but this, the
    timestamp echo's (-1: none; tcp_ack_update_rtt)."""
    cc = sk.cc
    acked = len(acked_skbs)
    cc.delivered += acked
    rs = RateSample(acked=acked, prior_in_flight=prior_packets)
    # the most recently sent of them (the first one, among equals), as
    # max(acked_skbs, key=lambda k: (k.sent_at, k.end)) would pick it, without a call
    # per skb
    newest: Skb | None = None
    for skb in acked_skbs:
        if newest is None or skb.sent_at > newest.sent_at or (
                skb.sent_at == newest.sent_at and skb.end > newest.end):
            newest = skb
    prior_mstamp = 0
    send_us = -1
    if newest is not None and newest.tx_delivered_mstamp:
        rs.prior_delivered = newest.tx_delivered
        prior_mstamp = newest.tx_delivered_mstamp
        rs.is_app_limited = newest.tx_app_limited
        cc.first_tx_mstamp = newest.sent_at
        send_us = newest.sent_at - newest.tx_first_tx
        if retrans_rtt_us is None:
            rs.rtt_us = now - newest.sent_at
        elif retrans_rtt_us >= 0:
            rs.rtt_us = retrans_rtt_us
        if rs.rtt_us >= 0:      # tcp_update_rtt_min
            cc.min_rtt_us = rs.rtt_us if not cc.min_rtt_us else min(cc.min_rtt_us, rs.rtt_us)
    if cc.app_limited and cc.delivered > cc.app_limited:
        cc.app_limited = 0
    if acked:
        cc.delivered_mstamp = now
    if prior_mstamp:
        rs.delivered = cc.delivered - rs.prior_delivered
        rs.interval_us = max(send_us, now - prior_mstamp)
        if rs.interval_us < cc.min_rtt_us:
            rs.interval_us = -1
    rs.is_ack_delayed = acked == 1
    if cc.bbr is None:
        if acked and cc.ca is not None:
            # pkts_acked (cubictcp_acked: min RTT, HyStart) runs before cong_avoid
            ssthresh = cc.ca.acked(rs.rtt_us, sk.jiffies(now), now, cc.cwnd, cc.ssthresh,
                                   sk.snd.snd_una, sk.snd.snd_nxt, pacing_rate_estimate(sk))
            if ssthresh is not None:
                sk.event(now, Kind.MODE, Reason.CWND_GROW,
                         f"HyStart: slow start ends at cwnd {cc.cwnd}", cwnd=cc.cwnd)
                cc.ssthresh = ssthresh
        if cc.ca is None:
            return
        if cc.ca_state == CaState.RECOVERY or cc.ca_state == CaState.CWR:
            tcp_cwnd_reduction(sk, now, acked if delivered < 0 else delivered,
                               una_advanced, newly_lost)
        elif acked:
            tcp_cong_avoid(sk, now, acked if delivered < 0 else delivered)
        return
    cwnd, mark = cc.bbr.on_ack(now, rs, cc.delivered, cc.cwnd, sk.packets_out, cc.srtt_us)
    if mark:
        cc.app_limited = (cc.delivered + sk.packets_out) or 1
    if cwnd != cc.cwnd:
        sk.event(now, Kind.MODE, Reason.BBR_CWND,
                 f"cwnd {cc.cwnd} → {cwnd} (BBR {cc.bbr.mode.value})", cwnd=cwnd)
        cc.cwnd = cwnd
    cc.pacing_rate = cc.bbr.pacing_rate


# ---------------------------------------------------------------- delivery rate
def tcp_rate_check_app_limited(sk: Sock, now: Micros) -> None:
    """tcp_rate_check_app_limited: less than a segment queued, nothing in the device
    queue, cwnd not full: later rate samples describe the application, not the path."""
    snd, cc = sk.snd, sk.cc
    in_flight = tcp_packets_in_flight(sk)
    if (snd.write_seq - snd.snd_nxt < sk.mss and snd.tx_busy_until <= now
            and in_flight < cc.cwnd):
        cc.app_limited = (cc.delivered + in_flight) or 1


def tcp_rate_skb_sent(sk: Sock, now: Micros, skb: Skb) -> None:
    """tcp_rate_skb_sent: snapshot delivery state in the segment as it leaves."""
    cc = sk.cc
    if not sk.snd.rtx:
        cc.first_tx_mstamp = cc.delivered_mstamp = now
    skb.tx_first_tx = cc.first_tx_mstamp
    skb.tx_delivered_mstamp = cc.delivered_mstamp
    skb.tx_delivered = cc.delivered
    skb.tx_app_limited = bool(cc.app_limited)
    skb.sent_at = now


# ---------------------------------------------------------------- pacing and TSO sizing
def tcp_update_skb_after_send(sk: Sock, now: Micros, nbytes: int, nsegs: int) -> None:
    """tcp_update_skb_after_send: once 10 data segments have left, each TSO skb pushes
    the next departure time back by its length at the pacing rate; time the socket sat
    idle is credit for up to half of that."""
    cc = sk.cc
    cc.data_segs_out += nsegs
    sk.snd.tx_busy_until = Micros(now + sk.snd.tx_complete_us)
    prior = cc.wstamp
    cc.wstamp = max(cc.wstamp, float(now))
    if cc.pacing_rate and cc.data_segs_out >= PACING_AFTER_SEGS:
        length_us = nbytes * 1_000_000 / cc.pacing_rate
        cc.wstamp += length_us - min(length_us / 2, cc.wstamp - prior)


def tcp_pacing_check(sk: Sock, now: Micros) -> bool:
    """tcp_pacing_check: hold the next segment until its departure time (an hrtimer, so
    exact, not on jiffies). True means hold."""
    cc = sk.cc
    if not cc.pacing_rate or cc.wstamp <= now:
        return False
    if Timer.PACING not in sk.timers:
        sk.timers[Timer.PACING] = Micros(int(-(-cc.wstamp // 1)))
    if sk.snd.last_hold is not Reason.PACING_HOLD:
        sk.hold(now, Reason.PACING_HOLD,
                f"{sk.snd.queued_bytes} B queued; next departure at "
                f"{cc.wstamp / 1000:.3f} ms ({cc.pacing_rate / 1e6:.2f} MB/s)")
    return True


def tcp_tso_autosize(sk: Sock) -> int:
    """tcp_tso_autosize: about 1 ms of data at the pacing rate per TSO skb, plus (since
    65466904b015, Nov 2021, sysctl tcp_tso_rtt_log = 9) gso_max_size >> (min_rtt >> 9 µs): a
    whole 64 KB skb below 512 µs of RTT, half below 1 ms...; at least tcp_min_tso_segs
    (BBR: bbr_tso_segs_goal; otherwise the rate of tcp_update_pacing_rate)."""
    cc, p = sk.cc, sk.profile
    if cc.bbr is not None:
        return cc.bbr.tso_segs_goal()
    gso_max = GSO_MAX_SIZE - 1 - MAX_TCP_HEADER
    budget = int(pacing_rate_estimate(sk)) >> SK_PACING_SHIFT
    if p.tso_rtt_log and cc.min_rtt_us:
        shift = cc.min_rtt_us >> p.tso_rtt_log
        if shift < 32:
            budget += gso_max >> shift
    return max(min(budget, gso_max) // sk.mss, p.min_tso_segs)
