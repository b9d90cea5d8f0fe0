"""CUBIC and Reno: the loss-based congestion controls of a stock Linux kernel.

Owns: the per-socket state of net/ipv4/tcp_cubic.c (struct bictcp, HyStart) and of
tcp_cong.c's Reno (tcp_reno_cong_avoid, tcp_reno_ssthresh), and the additive-increase
counter they share (snd_cwnd_cnt, tcp_cong_avoid_ai). Decides how cwnd grows per ACK once
slow start is over, when HyStart ends slow start, and what ssthresh becomes on a loss.
Must not send, trace or read a `Sock`: ``rate`` calls in with plain numbers and applies the
results. Standard library only; time is µs and jiffies as the kernel keeps them.

CUBIC as in a mainline 6.x tcp_cubic.c (MODULE_VERSION 2.3: the epoch shifted after idle by
cubictcp_cwnd_event, the 5 %-per-RTT cap while no maximum is known, HyStart's ack-train
threshold with hystart_ack_delay's TSO cushion, halved without pacing): cwnd follows
W(t) = C·(t − K)³ + W_max with C = 0.4 (bic_scale 41/1024 · 10, the kernel's fixed-point
form, scaled to a 100 ms reference RTT), β = 717/1024 on a loss, fast convergence
(W_max ·= (1 + β)/2 when the window shrank since the last loss) and TCP-friendliness
(never slower than Reno with the same β).

SIMPLIFICATION: only the fixed-point arithmetic the decisions depend on is kept
(the cube root is computed exactly rather than by the kernel's table + one Newton step,
which errs by ~0.2 %); no undo of a spurious loss (tcp_reno_undo_cwnd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

BICTCP_BETA_SCALE: Final = 1024
BETA: Final = 717                 # beta: 717/1024 ≈ 0.7 (RFC 8312), module parameter default
BIC_SCALE: Final = 41             # bic_scale: C = 41·10/1024 ≈ 0.4 with the 100 ms reference RTT
BICTCP_HZ: Final = 10             # time in the cubic function counts 2^10 units per second
CUBE_RTT_SCALE: Final = BIC_SCALE * 10
CUBE_FACTOR: Final = (1 << (10 + 3 * BICTCP_HZ)) // (BIC_SCALE * 10)
BETA_SCALE: Final = 8 * (BICTCP_BETA_SCALE + BETA) // 3 // (BICTCP_BETA_SCALE - BETA)
"""beta_scale: Reno-equivalent growth per ACK, used by TCP-friendliness."""
HYSTART_LOW_WINDOW: Final = 16    # hystart_low_window: HyStart looks only from cwnd 16 up
HYSTART_ACK_DELTA_US: Final = 2000   # hystart_ack_delta_us: ACKs this close form a train
HYSTART_MIN_SAMPLES: Final = 8
HYSTART_DELAY_MIN_US: Final = 4000
HYSTART_DELAY_MAX_US: Final = 16000
GSO_MAX_SIZE: Final = 65536       # sk_gso_max_size in hystart_ack_delay's TSO cushion
MAX_ACK_CUSHION_US: Final = 1000  # hystart_ack_delay caps the cushion at 1 ms


def cube_root(a: int) -> int:
    """The integer cube root the kernel approximates (cubic_root)."""
    if a <= 0:
        return 0
    x = int(round(a ** (1 / 3)))
    while x ** 3 > a:
        x -= 1
    while (x + 1) ** 3 <= a:
        x += 1
    return x


@dataclass(slots=True)
class AdditiveIncrease:
    """snd_cwnd_cnt and tcp_cong_avoid_ai: one more segment of cwnd per `w` ACKed."""

    cwnd_cnt: int = 0

    def grow(self, cwnd: int, w: int, acked: int) -> int:
        """tcp_cong_avoid_ai: returns the new cwnd (a credit of ≥ w first adds one)."""
        if self.cwnd_cnt >= w:
            self.cwnd_cnt = 0
            cwnd += 1
        self.cwnd_cnt += acked
        if self.cwnd_cnt >= w:
            delta = self.cwnd_cnt // w
            self.cwnd_cnt -= delta * w
            cwnd += delta
        return cwnd


def slow_start(cwnd: int, ssthresh: int, acked: int) -> tuple[int, int]:
    """tcp_slow_start (RFC 5681 §3.1 with appropriate byte counting in packets): cwnd grows
    by the segments ACKed but stops at ssthresh. Returns (cwnd, ACKed segments left over for
    congestion avoidance)."""
    new = min(cwnd + acked, ssthresh)
    return new, acked - (new - cwnd)


class Reno:
    """tcp_reno_cong_avoid / tcp_reno_ssthresh (net/ipv4/tcp_cong.c)."""

    name = "reno"

    def __init__(self) -> None:
        self.ai = AdditiveIncrease()

    def cong_avoid(self, cwnd: int, ssthresh: int, acked: int, now_j: int) -> int:
        """After slow start: one segment per cwnd ACKed."""
        if cwnd < ssthresh:
            cwnd, acked = slow_start(cwnd, ssthresh, acked)
            if not acked:
                return cwnd
        return self.ai.grow(cwnd, cwnd, acked)

    def ssthresh(self, cwnd: int) -> int:
        return max(cwnd >> 1, 2)

    def on_loss(self, now_us: int, snd_nxt: int) -> None:
        """tcp_enter_loss: snd_cwnd_cnt = 0."""
        self.ai.cwnd_cnt = 0

    def on_tx_start(self, now_j: int, lsndtime_j: int) -> None:
        """Reno keeps no clock."""

    def acked(self, rtt_us: int, now_j: int, now_us: int, cwnd: int, ssthresh: int,
              snd_una: int, snd_nxt: int, pacing_rate: float) -> int | None:
        """Reno has no pkts_acked hook."""
        return None


class Cubic:
    """struct bictcp and HyStart for one socket (cubictcp_* in tcp_cubic.c)."""

    name = "cubic"

    def __init__(self, hz: int, hystart: bool = True) -> None:
        self.hz = hz
        self.hystart = hystart
        self.ai = AdditiveIncrease()
        self.reset()
        self.round_start_us = 0
        self.last_ack_us = 0
        self.end_seq = 0
        self.curr_rtt_us = 0
        self.sample_cnt = 0

    def reset(self) -> None:
        """bictcp_reset: forget the epoch, W_max and HyStart's verdict."""
        self.cnt = 0
        self.last_max_cwnd = 0
        self.last_cwnd = 0
        self.last_time_j = 0
        self.origin_point = 0
        self.k = 0
        self.delay_min_us = 0
        self.epoch_start_j = 0
        self.epoch_started = False
        self.ack_cnt = 0
        self.tcp_cwnd = 0
        self.found = False

    def hystart_reset(self, now_us: int, snd_nxt: int) -> None:
        """bictcp_hystart_reset: a new round starts with the data not yet sent."""
        self.round_start_us = self.last_ack_us = now_us
        self.end_seq = snd_nxt
        self.curr_rtt_us = 1 << 32
        self.sample_cnt = 0

    # ------------------------------------------------------------------ hooks
    def on_tx_start(self, now_j: int, lsndtime_j: int) -> None:
        """cubictcp_cwnd_event(CA_EVENT_TX_START): time spent idle does not count on the
        cubic curve, so the epoch moves forward by it (never past now)."""
        delta = now_j - lsndtime_j
        if self.epoch_started and delta > 0:
            self.epoch_start_j = min(self.epoch_start_j + delta, now_j)

    def ssthresh(self, cwnd: int) -> int:
        """cubictcp_recalc_ssthresh: end the epoch, remember W_max (fast convergence
        releases bandwidth when the window shrank since the last loss), cut to β·cwnd."""
        self.epoch_started = False
        if cwnd < self.last_max_cwnd:
            self.last_max_cwnd = cwnd * (BICTCP_BETA_SCALE + BETA) // (2 * BICTCP_BETA_SCALE)
        else:
            self.last_max_cwnd = cwnd
        return max(cwnd * BETA // BICTCP_BETA_SCALE, 2)

    def on_loss(self, now_us: int, snd_nxt: int) -> None:
        """cubictcp_state(TCP_CA_Loss) after an RTO: start over (bictcp_reset, which also
        drops the W_max just computed) and restart HyStart; tcp_enter_loss zeroes
        snd_cwnd_cnt."""
        self.reset()
        self.hystart_reset(now_us, snd_nxt)
        self.ai.cwnd_cnt = 0

    def acked(self, rtt_us: int, now_j: int, now_us: int, cwnd: int, ssthresh: int,
              snd_una: int, snd_nxt: int, pacing_rate: float) -> int | None:
        """cubictcp_acked: track the minimum RTT and run HyStart while in slow start.
        Returns a new ssthresh when HyStart ends slow start, else None."""
        if rtt_us < 0:
            return None
        if self.epoch_started and now_j - self.epoch_start_j < self.hz:
            return None     # delay samples right after a reduction are discarded
        delay = max(rtt_us, 1)
        if self.delay_min_us == 0 or self.delay_min_us > delay:
            self.delay_min_us = delay
        if (not self.found and cwnd < ssthresh and self.hystart
                and self._hystart_update(delay, now_us, cwnd, snd_una, snd_nxt, pacing_rate)):
            return cwnd
        return None

    def _hystart_update(self, delay: int, now_us: int, cwnd: int, snd_una: int,
                        snd_nxt: int, pacing_rate: float) -> bool:
        """hystart_update: leave slow start when the ACKs of one round keep arriving as a
        train for longer than half the minimum RTT (ack train), or when the round's
        smallest RTT rises by an eighth of the minimum, clamped to 4-16 ms (delay)."""
        if snd_una > self.end_seq:
            self.hystart_reset(now_us, snd_nxt)
        if cwnd < HYSTART_LOW_WINDOW:
            return False
        if now_us - self.last_ack_us <= HYSTART_ACK_DELTA_US:
            self.last_ack_us = now_us
            # hystart_ack_delay: room for TSO/GRO aggregation, at most 1 ms
            cushion = (min(MAX_ACK_CUSHION_US, int(GSO_MAX_SIZE * 4 * 1e6 / pacing_rate))
                       if pacing_rate else 0)
            threshold = (self.delay_min_us + cushion) >> 1   # not paced: delay_min / 2
            if now_us - self.round_start_us > threshold:
                self.found = True
        if not self.found:
            self.curr_rtt_us = min(self.curr_rtt_us, delay)
            if self.sample_cnt < HYSTART_MIN_SAMPLES:
                self.sample_cnt += 1
            else:
                thresh = min(max(self.delay_min_us >> 3, HYSTART_DELAY_MIN_US),
                             HYSTART_DELAY_MAX_US)
                if self.curr_rtt_us > self.delay_min_us + thresh:
                    self.found = True
        return self.found

    def cong_avoid(self, cwnd: int, ssthresh: int, acked: int, now_j: int) -> int:
        """cubictcp_cong_avoid (the caller checked tcp_is_cwnd_limited): slow start below
        ssthresh, then grow toward the cubic target."""
        if cwnd < ssthresh:
            cwnd, acked = slow_start(cwnd, ssthresh, acked)
            if not acked:
                return cwnd
        self._update(cwnd, acked, now_j)
        return self.ai.grow(cwnd, self.cnt, acked)

    def _update(self, cwnd: int, acked: int, now_j: int) -> None:
        """bictcp_update: cnt = ACKs per one-segment increase, recomputed at most once per
        jiffy (and left alone for HZ/32 while cwnd is unchanged)."""
        self.ack_cnt += acked
        if self.last_cwnd == cwnd and now_j - self.last_time_j <= self.hz // 32:
            return
        if not (self.epoch_started and now_j == self.last_time_j):
            self.last_cwnd = cwnd
            self.last_time_j = now_j
            if not self.epoch_started:
                self.epoch_started = True
                self.epoch_start_j = now_j
                self.ack_cnt = acked
                self.tcp_cwnd = cwnd
                if self.last_max_cwnd <= cwnd:
                    self.k = 0
                    self.origin_point = cwnd
                else:
                    self.k = cube_root(CUBE_FACTOR * (self.last_max_cwnd - cwnd))
                    self.origin_point = self.last_max_cwnd
            # t in 2^-10 s, including one minimum RTT ahead (the window takes effect then)
            t = now_j - self.epoch_start_j + -(-self.delay_min_us * self.hz // 1_000_000)
            t = (t << BICTCP_HZ) // self.hz
            offs = abs(t - self.k)
            delta = (CUBE_RTT_SCALE * offs ** 3) >> (10 + 3 * BICTCP_HZ)
            target = self.origin_point - delta if t < self.k else self.origin_point + delta
            self.cnt = cwnd // (target - cwnd) if target > cwnd else 100 * cwnd
            if self.last_max_cwnd == 0 and self.cnt > 20:
                self.cnt = 20      # no W_max known yet: at most 5 % growth per RTT
        # TCP friendliness: at least as fast as Reno with the same β would grow
        delta = (cwnd * BETA_SCALE) >> 3
        while self.ack_cnt > delta:
            self.ack_cnt -= delta
            self.tcp_cwnd += 1
        if self.tcp_cwnd > cwnd:
            self.cnt = min(self.cnt, cwnd // (self.tcp_cwnd - cwnd))
        self.cnt = max(self.cnt, 2)     # at most 1.5x per RTT


CongestionOps = Cubic | Reno
"""A loss-based congestion control (BBR, model-based, lives in ``bbr``)."""
