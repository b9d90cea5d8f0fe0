"""Timers: which ones exist (a table, in the h11 manner) and when each is armed.

Owns: the timer table `TIMERS` and the arming rules for the transmit-side timers (RTO,
tail loss probe, zero-window probe). Every timer is a deadline in ``Sock.timers``; none
sleeps. What a timer does when it fires lives with its concern: the delayed-ACK handler
in ``recv``, the probe, loss-probe and retransmit handlers in ``send``; ``Endpoint``
dispatches. Standard library and lower model modules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .events import Micros, Reason, Timer
from .sock import Sock
from .state import CaState


@dataclass(frozen=True, slots=True)
class TimerSpec:
    kernel: str
    """The kernel timer and its handler."""
    clock: str
    """"jiffies" (a timer_list: fires on a tick) or "exact" (an hrtimer)."""
    fired: Reason
    """The reason traced when it fires."""
    handler: str
    """Where the model handles it (module.function)."""


TIMERS: Final[dict[Timer, TimerSpec]] = {
    Timer.DELACK: TimerSpec("icsk_delack_timer → tcp_delack_timer_handler", "jiffies",
                            Reason.DELACK_FIRED, "recv.tcp_delack_timer_handler"),
    Timer.PROBE0: TimerSpec("ICSK_TIME_PROBE0 → tcp_probe_timer", "jiffies",
                            Reason.PROBE0_RELEASE, "send.tcp_probe_timer"),
    Timer.RTO: TimerSpec("ICSK_TIME_RETRANS → tcp_retransmit_timer", "jiffies",
                         Reason.RETRANSMIT, "send.tcp_retransmit_timer"),
    Timer.TLP: TimerSpec("ICSK_TIME_LOSS_PROBE → tcp_send_loss_probe", "jiffies",
                         Reason.LOSS_PROBE, "send.tcp_send_loss_probe"),
    Timer.PACING: TimerSpec("tp->pacing_timer → tcp_pace_kick", "exact",
                            Reason.PACING_RELEASE, "send.tcp_push_pending_frames"),
    Timer.TSQ: TimerSpec("TX completion → tcp_tsq_handler", "exact",
                         Reason.TSQ_RELEASE, "send.tcp_push_pending_frames"),
}
"""Every timer of the model. RTO, TLP and PROBE0 share the kernel's one icsk_pending slot:
arming one clears the others."""

FIRED: Final[dict[Timer, Reason]] = {t: spec.fired for t, spec in TIMERS.items()}


def rto_at(sk: Sock, now: Micros) -> Micros:
    """inet_csk_reset_xmit_timer(ICSK_TIME_RETRANS): RTO (rounded up to jiffies, backed
    off, capped at TCP_RTO_MAX) is a timer_list, so it fires on a tick like the rest."""
    rto_j = min(sk.rto_j << sk.cc.backoff, sk.profile.us_to_jiffies(sk.profile.rto_max_us))
    return sk.jiffy_timer_at(now, sk.jiffies(now) + rto_j)


def tcp_rearm_rto(sk: Sock, now: Micros) -> None:
    """tcp_rearm_rto: RTO replaces the probe timer (one icsk_pending slot). Re-arming
    on every ACK is routine, so only the probe-timer cancellation is traced."""
    sk.cancel(now, Timer.PROBE0)
    sk.disarm(Timer.TLP)
    if sk.snd.rtx:
        sk.timers[Timer.RTO] = rto_at(sk, now)
    else:
        sk.disarm(Timer.RTO)


def tlp_timeout_j(sk: Sock) -> int:
    """The loss-probe timeout of tcp_schedule_loss_probe, in jiffies: 2·SRTT plus an extra
    (the minimum RTO when exactly one packet is out, for the peer's delayed ACK; else a
    small floor). Since 1c2709cfff1d (Oct 2023, "fix excessive TLP and RACK timeouts from
    HZ rounding") the floor is TCP_TIMEOUT_MIN_US (2 ms) and the sum is rounded up to
    jiffies once; before it, 2·SRTT was rounded up first and TCP_TIMEOUT_MIN (2 jiffies,
    8 ms at HZ=250) added after, which made a probe over a fast link 4-8 ms later."""
    p = sk.profile
    srtt2_us = 2 * sk.cc.srtt_us
    one_out = sk.packets_out == 1
    if p.tlp_timeout_in_us:
        return p.us_to_jiffies(srtt2_us + (p.rto_min_us if one_out else p.timeout_min_us))
    return p.us_to_jiffies(srtt2_us) + (
        p.us_to_jiffies(p.rto_min_us) if one_out else p.timeout_min_j)


def tcp_schedule_loss_probe(sk: Sock, now: Micros, advancing_rto: bool) -> bool:
    """tcp_schedule_loss_probe (RFC 8985 §7): probe after `tlp_timeout_j`, but no later
    than the RTO would fire. Re-armed after every send and every ACK, so it is not
    traced; only a probe that fires is. Returns False when no probe is scheduled."""
    p, rtx = sk.profile, sk.snd.rtx
    ca_state = sk.cc.ca_state
    if not p.tail_loss_probe or not rtx or (ca_state != CaState.OPEN and ca_state != CaState.CWR):
        return False
    # without an RTT sample: TCP_TIMEOUT_INIT
    timeout_j = tlp_timeout_j(sk) if sk.cc.srtt_us else p.us_to_jiffies(p.rto_initial_us)
    if advancing_rto:
        rto_delta = sk.rto_j * p.tick_us
    else:   # tcp_rto_delta_us: RTO measured from the oldest unACKed segment's send
        rto_delta = rtx[0].sent_at + sk.rto_j * p.tick_us - now
    if rto_delta > 0:
        timeout_j = min(timeout_j, p.us_to_jiffies(rto_delta))
    sk.disarm(Timer.RTO)
    sk.timers[Timer.TLP] = sk.jiffy_timer_at(now, sk.jiffies(now) + timeout_j)
    return True


def tcp_check_probe_timer(sk: Sock, now: Micros) -> None:
    """tcp_check_probe_timer: with nothing in flight and data held, arm the zero-window
    probe timer at tcp_probe0_base = max(RTO, TCP_RTO_MIN). This is tcp(7)'s "200 ms
    ceiling" on TCP_CORK, and what releases MSG_MORE data."""
    timers = sk.timers
    if sk.snd.rtx or Timer.PROBE0 in timers or Timer.RTO in timers or Timer.TLP in timers:
        return
    base_j = max(sk.rto_j, sk.profile.us_to_jiffies(sk.profile.probe0_min_us))
    when_j = base_j << sk.cc.backoff
    cc = sk.cc
    if cc.user_timeout_us and cc.probes_tstamp >= 0:
        # tcp_clamp_probe0_to_user_timeout: no probe later than the user timeout
        elapsed_j = max(sk.jiffies(now) - sk.jiffies(cc.probes_tstamp), 0)
        remaining_j = sk.profile.us_to_jiffies(cc.user_timeout_us) - elapsed_j
        when_j = min(max(remaining_j, sk.profile.timeout_min_j), when_j)
    at = sk.jiffy_timer_at(now, sk.jiffies(now) + when_j)
    sk.arm(now, Timer.PROBE0, at, Reason.PROBE0_ARMED, f"RTO {sk.cc.rto_us / 1000:g} ms")
