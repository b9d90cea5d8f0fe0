"""BBR (v1, as in mainline net/ipv4/tcp_bbr.c): the congestion control this project's
machines run (net.ipv4.tcp_congestion_control = bbr), and the rate samples it feeds on.

Owns: the delivery-rate sample of one ACK (net/ipv4/tcp_rate.c) and BBR's model of the
path — max-bandwidth filter, min RTT, STARTUP/DRAIN/PROBE_BW/PROBE_RTT — which sets the
congestion window and the pacing rate. Standard library only; time is integer µs.

For small-message traffic BBR matters little: samples are application-limited, so it stays
in STARTUP and paces at 2.885 × its estimate, which for a few bytes costs microseconds.
It shows in bulk transfers over a delayed link: after the first ten data segments the
sender is paced, two-segment TSO bursts at a time.

SIMPLIFICATION: no loss, so no recovery/long-term (policer) bandwidth logic; the ACK
aggregation allowance is left out; PROBE_BW starts its gain cycle at a fixed phase (the
kernel picks one at random).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from .events import Micros

HIGH_GAIN: Final = 2885 / 1000 + 1 / 256     # bbr_high_gain = BBR_UNIT * 2885 / 1000 + 1
DRAIN_GAIN: Final = 1000 / 2885              # bbr_drain_gain
CWND_GAIN: Final = 2.0                       # bbr_cwnd_gain
BBR_UNIT: Final = 256                        # BBR_SCALE 8: gains are fixed point in 1/256
PACING_GAINS: Final = (BBR_UNIT * 5 // 4, BBR_UNIT * 3 // 4, BBR_UNIT, BBR_UNIT, BBR_UNIT,
                       BBR_UNIT, BBR_UNIT, BBR_UNIT)
"""bbr_pacing_gain[], in BBR_UNIT as the kernel keeps it (each is exact as a float: 5/4, 3/4,
1). Integers, not floats: mypyc (1.x) compiles a Final tuple of floats into a static that
reads as "not set" (NameError: value for final name "PACING_GAINS" was not set), which
crashed the compiled build at PROBE_BW (issue 29.4; tests/model/test_compiled_constants.py)."""
BW_FILTER_ROUNDS: Final = 10                 # bbr_bw_rtts = CYCLE_LEN + 2
MIN_RTT_WINDOW_US: Final = 10_000_000        # bbr_min_rtt_win_sec
PROBE_RTT_US: Final = 200_000                # bbr_probe_rtt_mode_ms
CWND_MIN_TARGET: Final = 4                   # bbr_cwnd_min_target
FULL_BW_THRESH: Final = 5 / 4                # bbr_full_bw_thresh
FULL_BW_COUNT: Final = 3                     # bbr_full_bw_cnt
PACING_MARGIN: Final = 0.99                  # bbr_pacing_margin_percent = 1
MIN_TSO_RATE: Final = 1_200_000 / 8          # bbr_min_tso_rate, bytes per second
INIT_CWND: Final = 10                        # TCP_INIT_CWND
PROBE_BW_START_PHASE: Final = 2              # SIMPLIFICATION: kernel draws 1..7 at random


class Mode(Enum):
    STARTUP = "startup"
    DRAIN = "drain"
    PROBE_BW = "probe_bw"
    PROBE_RTT = "probe_rtt"


@dataclass(slots=True)
class RateSample:
    """tcp_rate_gen's rate_sample for one ACK."""

    delivered: int = -1          # packets delivered over the interval (-1: no sample)
    interval_us: int = -1
    acked: int = 0               # packets newly ACKed by this ACK
    prior_delivered: int = 0
    is_app_limited: bool = False
    rtt_us: int = -1             # RTT of the most recently sent ACKed segment
    is_ack_delayed: bool = False
    prior_in_flight: int = 0

    # Written out, as @dataclass would, for the compiled build (see `events.Segment`): one
    # is built for every ACK.
    def __init__(self, delivered: int = -1, interval_us: int = -1, acked: int = 0,
                 prior_delivered: int = 0, is_app_limited: bool = False, rtt_us: int = -1,
                 is_ack_delayed: bool = False, prior_in_flight: int = 0) -> None:
        self.delivered = delivered
        self.interval_us = interval_us
        self.acked = acked
        self.prior_delivered = prior_delivered
        self.is_app_limited = is_app_limited
        self.rtt_us = rtt_us
        self.is_ack_delayed = is_ack_delayed
        self.prior_in_flight = prior_in_flight


class Bbr:
    """BBR's state for one socket. Rates are bytes per second."""

    def __init__(self, mss: int, now: Micros, srtt_us: int, cwnd: int, min_rtt_us: int) -> None:
        self.mss = mss
        self.mode = Mode.STARTUP
        self.pacing_gain = HIGH_GAIN
        self.cwnd_gain = HIGH_GAIN
        self.rtt_cnt = 0
        self.next_rtt_delivered = 0
        self.round_start = False
        self.bw_samples: list[tuple[int, float]] = []   # (round, packets per µs)
        self.full_bw = 0.0
        self.full_bw_cnt = 0
        self.full_bw_reached = False
        self.min_rtt_us = min_rtt_us if min_rtt_us > 0 else -1
        self.min_rtt_stamp: Micros = now
        self.probe_rtt_done_stamp = Micros(0)
        self.probe_rtt_round_done = False
        self.prior_cwnd = 0
        self.idle_restart = False
        self.cycle_idx = 0
        self.cycle_stamp = Micros(0)
        self.has_seen_rtt = False
        self.pacing_rate = self._init_rate(srtt_us, cwnd)

    # -------------------------------------------------------------- helpers
    def _init_rate(self, srtt_us: int, cwnd: int) -> float:
        """bbr_init_pacing_rate_from_rtt: high_gain × cwnd / RTT (1 ms if none yet)."""
        if srtt_us:
            rtt = max(srtt_us, 1)
            self.has_seen_rtt = True
        else:
            rtt = 1000
        return self._rate(cwnd / rtt, HIGH_GAIN)

    def _rate(self, bw: float, gain: float) -> float:
        """bbr_rate_bytes_per_sec: packets/µs → bytes/s with gain and a 1 % margin."""
        return bw * self.mss * gain * 1_000_000 * PACING_MARGIN

    @property
    def max_bw(self) -> float:
        """Windowed max of recent delivery rates, packets per µs (the filter keeps its
        samples in decreasing order, so the first one is the max)."""
        return self.bw_samples[0][1] if self.bw_samples else 0.0

    def tso_segs_goal(self) -> int:
        """bbr_tso_segs_goal: about 1 ms of data per TSO burst, at least 2 (1 when slow)."""
        min_segs = 1 if self.pacing_rate < MIN_TSO_RATE else 2
        budget = min(int(self.pacing_rate) >> 10, 65536 - 1 - 320)
        return min(max(budget // self.mss, min_segs), 0x7F)

    def bdp(self, bw: float, gain: float) -> int:
        """bbr_bdp: ceil(bw × min_rtt × gain); the initial window before any RTT sample."""
        if self.min_rtt_us < 0:
            return INIT_CWND
        return int(-(-(bw * self.min_rtt_us * gain) // 1))

    def _quantization_budget(self, cwnd: int) -> int:
        cwnd += 3 * self.tso_segs_goal()
        cwnd = (cwnd + 1) & ~1
        if self.mode is Mode.PROBE_BW and self.cycle_idx == 0:
            cwnd += 2
        return cwnd

    def inflight(self, bw: float, gain: float) -> int:
        return self._quantization_budget(self.bdp(bw, gain))

    # -------------------------------------------------------------- events
    def on_transmit_start(self, app_limited: bool) -> None:
        """bbr_cwnd_event(CA_EVENT_TX_START): restarting from idle while app-limited."""
        if not app_limited:
            return
        self.idle_restart = True
        if self.mode is Mode.PROBE_BW:
            self.pacing_rate = self._rate(self.max_bw, 1.0)

    def on_ack(self, now: Micros, rs: RateSample, delivered: int, cwnd: int,
               in_flight: int, srtt_us: int) -> tuple[int, bool]:
        """bbr_main: update the model, pacing rate and cwnd. Returns (cwnd, app_limit):
        app_limit is True when PROBE_RTT asks the socket to mark itself app-limited."""
        self._update_bw(rs, delivered)
        self._update_cycle_phase(now, rs)
        self._check_full_bw_reached(rs)
        self._check_drain(now, in_flight)
        cwnd, mark_app_limited = self._update_min_rtt(now, rs, delivered, in_flight, cwnd)
        self._update_gains()
        bw = self.max_bw
        self._set_pacing_rate(bw, srtt_us, cwnd)
        return self._set_cwnd(rs, cwnd, bw, delivered), mark_app_limited

    def _update_bw(self, rs: RateSample, delivered: int) -> None:
        self.round_start = False
        if rs.delivered < 0 or rs.interval_us <= 0:
            return
        if rs.prior_delivered >= self.next_rtt_delivered:
            self.next_rtt_delivered = delivered
            self.rtt_cnt += 1
            self.round_start = True
        bw = rs.delivered / rs.interval_us
        if not rs.is_app_limited or bw >= self.max_bw:
            # minmax_running_max over bbr_bw_rtts rounds: a monotonic queue, newest last
            samples = [(r, b) for r, b in self.bw_samples
                       if self.rtt_cnt - r < BW_FILTER_ROUNDS and b > bw]
            samples.append((self.rtt_cnt, bw))
            self.bw_samples = samples       # (samples only age when a new one is taken)

    def _update_cycle_phase(self, now: Micros, rs: RateSample) -> None:
        if self.mode is not Mode.PROBE_BW:
            return
        full_length = now - self.cycle_stamp > self.min_rtt_us
        gain = self.pacing_gain
        if gain == 1.0:
            advance = full_length
        elif gain > 1.0:
            advance = full_length and rs.prior_in_flight >= self.inflight(self.max_bw, gain)
        else:
            advance = full_length or rs.prior_in_flight <= self.inflight(self.max_bw, 1.0)
        if advance:
            self.cycle_idx = (self.cycle_idx + 1) % len(PACING_GAINS)
            self.cycle_stamp = now

    def _check_full_bw_reached(self, rs: RateSample) -> None:
        if self.full_bw_reached or not self.round_start or rs.is_app_limited:
            return
        if self.max_bw >= self.full_bw * FULL_BW_THRESH:
            self.full_bw = self.max_bw
            self.full_bw_cnt = 0
            return
        self.full_bw_cnt += 1
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_COUNT

    def _check_drain(self, now: Micros, in_flight: int) -> None:
        if self.mode is Mode.STARTUP and self.full_bw_reached:
            self.mode = Mode.DRAIN
        if self.mode is Mode.DRAIN and in_flight <= self.inflight(self.max_bw, 1.0):
            self._enter_probe_bw(now)

    def _enter_probe_bw(self, now: Micros) -> None:
        """bbr_reset_probe_bw_mode (phase fixed instead of random, see module doc)."""
        self.mode = Mode.PROBE_BW
        self.cycle_idx = PROBE_BW_START_PHASE
        self.cycle_stamp = now

    def _update_min_rtt(self, now: Micros, rs: RateSample, delivered: int, in_flight: int,
                        cwnd: int) -> tuple[int, bool]:
        """bbr_update_min_rtt: a 10 s min-RTT filter; when it expires, PROBE_RTT holds
        cwnd at 4 for max(200 ms, one round), then restores it (bbr_check_probe_rtt_done)."""
        expired = now - self.min_rtt_stamp > MIN_RTT_WINDOW_US
        # strictly lower (1b9e2a8c99a5, v5.10): equal samples must not postpone PROBE_RTT
        if rs.rtt_us >= 0 and (self.min_rtt_us < 0 or rs.rtt_us < self.min_rtt_us
                               or (expired and not rs.is_ack_delayed)):
            self.min_rtt_us = rs.rtt_us
            self.min_rtt_stamp = now
        mark = False
        if expired and not self.idle_restart and self.mode is not Mode.PROBE_RTT:
            self.mode = Mode.PROBE_RTT
            self.prior_cwnd = cwnd            # bbr_save_cwnd
            self.probe_rtt_done_stamp = Micros(0)
        if self.mode is Mode.PROBE_RTT:
            mark = True
            if not self.probe_rtt_done_stamp and in_flight <= CWND_MIN_TARGET:
                self.probe_rtt_done_stamp = Micros(now + PROBE_RTT_US)
                self.probe_rtt_round_done = False
                self.next_rtt_delivered = delivered
            elif self.probe_rtt_done_stamp:
                if self.round_start:
                    self.probe_rtt_round_done = True
                if self.probe_rtt_round_done and now > self.probe_rtt_done_stamp:
                    self.min_rtt_stamp = now
                    cwnd = max(cwnd, self.prior_cwnd)
                    if self.full_bw_reached:
                        self._enter_probe_bw(now)
                    else:
                        self.mode = Mode.STARTUP
        if rs.delivered > 0:
            self.idle_restart = False
        return cwnd, mark

    def _update_gains(self) -> None:
        if self.mode is Mode.STARTUP:
            self.pacing_gain, self.cwnd_gain = HIGH_GAIN, HIGH_GAIN
        elif self.mode is Mode.DRAIN:
            self.pacing_gain, self.cwnd_gain = DRAIN_GAIN, HIGH_GAIN
        elif self.mode is Mode.PROBE_BW:
            self.pacing_gain = PACING_GAINS[self.cycle_idx] / BBR_UNIT
            self.cwnd_gain = CWND_GAIN
        else:
            self.pacing_gain, self.cwnd_gain = 1.0, 1.0

    def _set_pacing_rate(self, bw: float, srtt_us: int, cwnd: int) -> None:
        """bbr_set_pacing_rate: in STARTUP the rate only ever rises."""
        if not self.has_seen_rtt and srtt_us:
            self.pacing_rate = self._init_rate(srtt_us, cwnd)
        rate = self._rate(bw, self.pacing_gain)
        if self.full_bw_reached or rate > self.pacing_rate:
            self.pacing_rate = rate

    def _set_cwnd(self, rs: RateSample, cwnd: int, bw: float, delivered: int) -> int:
        """bbr_set_cwnd: slow-start toward gain × BDP (+ TSO budget), never below 4."""
        if rs.acked:
            target = self._quantization_budget(self.bdp(bw, self.cwnd_gain))
            if self.full_bw_reached:
                cwnd = min(cwnd + rs.acked, target)
            elif cwnd < target or delivered < INIT_CWND:
                cwnd += rs.acked
            cwnd = max(cwnd, CWND_MIN_TARGET)
        if self.mode is Mode.PROBE_RTT:
            cwnd = min(cwnd, CWND_MIN_TARGET)
        return cwnd
