"""`Sock`: one endpoint's state and the primitives every rule uses (struct sock + helpers).

Owns: the state groups of ``state.py`` in one object, the jiffy clock, the timer slots
(deadlines, never sleeps), the TCP state machine step (driven by ``TRANSITIONS``), the
trace of decisions and the list of segments sent. The rule modules (``send``, ``recv``,
``output``, ``timers``, ``rate``, ``connection``) are functions over a `Sock`, as the
kernel's are over ``struct sock *sk``. Standard library and lower model modules only.
"""

from __future__ import annotations

from typing import Final

from .config import AckStyle, SocketOptions, StackProfile
from .events import Kind, Micros, Reason, Segment, Side, Timer, TraceEvent
from .state import (
    TCP_RMEM_TO_WIN_SCALE,
    TRANSITIONS,
    AckState,
    CongestionState,
    ConnEvent,
    ModelError,
    Nonagle,
    RecvState,
    SendState,
    State,
)


def _initial_recv_state(side: Side, profile: StackProfile, mss: int,
                        advmss: int) -> RecvState:
    """tcp_select_initial_window and tcp_init_buffer_space: the SYN's window is the whole
    buffer's window (tcp_full_space: tcp_rmem[1] at the default scaling ratio), rounded
    down to whole segments (the connecting side counts the 12 timestamp bytes, which it
    does not know yet will be used: tcp_connect_init), then capped at 65535 (the SYN's
    window is not scaled) and at `StackProfile.rcv_wnd`; rcv_ssthresh starts there;
    window_clamp is the whole buffer's window. Rounding comes before the cap: tcp_rmem[1]
    131072 gives 64240 / 65160 (44 × 1460, 45 × 1448), packetdrill's defaults.sh
    (540000) gives 65535. CLASSIC stacks keep a plain cap (no scaling model)."""
    rcv_mss = min(profile.initial_rcv_mss, mss)
    if profile.ack_style is not AckStyle.LINUX:
        return RecvState(rcv_wnd=profile.rcv_wnd, window_clamp=profile.rcv_buf,
                         rcv_mss=rcv_mss, rcvbuf=profile.rcv_buf)
    syn_mss = advmss + (profile.syn_tstamp_bytes if side is Side.CLIENT else 0)
    clamp = max(profile.rcv_buf * profile.scaling_ratio >> TCP_RMEM_TO_WIN_SCALE,
                profile.min_window_clamp)
    space = clamp
    if space > syn_mss:
        space -= space % syn_mss
    initial = min(space, 65535, profile.rcv_wnd)
    return RecvState(rcv_wnd=initial, window_clamp=clamp, rcv_mss=rcv_mss,
                     rcv_ssthresh=min(initial, clamp), scaling_ratio=profile.scaling_ratio,
                     rcvbuf=profile.rcv_buf)


WHEEL_LVL_CLK_SHIFT: Final = 3
"""kernel/time/timer.c LVL_CLK_SHIFT: each level of the wheel is 8 times coarser."""
WHEEL_LVL_SIZE: Final = 64
"""LVL_SIZE: buckets per level."""
WHEEL_LVL_DEPTH: Final = 9
"""LVL_DEPTH for HZ > 100."""


def wheel_bucket_expiry(expires_j: int, clk_j: int) -> int:
    """calc_wheel_index / calc_index (kernel/time/timer.c, the 4.8 wheel): the jiffy at
    which a timer due at ``expires_j``, armed when the wheel's clock reads ``clk_j``,
    runs. A timer less than LVL_START(1) = 63 jiffies ahead sits on level 0 and runs on
    the jiffy after its expiry; 63-503 jiffies ahead, on level 1, rounded up to the next
    multiple of 8 jiffies; each further level 8 times coarser (LVL_START(n) = 63 <<
    3(n-1)). Rounding up, never down: "the timer wheel has to guarantee that a timer does
    not fire early". Measured here: a 76-jiffy probe timer (RTO 301.5 ms) fired 307-335 ms
    after it was armed over 12 runs, in 4 ms steps; level 0 would give 304-308 ms."""
    delta = expires_j - clk_j
    if delta < WHEEL_LVL_SIZE - 1:
        return expires_j + 1                # level 0 (most timers: delayed ACKs, RTOs)
    lvl = 0
    start = WHEEL_LVL_SIZE - 1
    while lvl < WHEEL_LVL_DEPTH - 1 and delta >= start:
        lvl += 1
        start <<= WHEEL_LVL_CLK_SHIFT
    shift = lvl * WHEEL_LVL_CLK_SHIFT
    return ((expires_j >> shift) + 1) << shift


class Sock:
    """One side's TCP state. Rules read and change it; only `Endpoint` is public."""

    __slots__ = ("side", "profile", "mss", "advmss", "state", "established", "snd", "rcv",
                 "ack", "cc", "timers", "events", "out", "tick_us", "phase", "handshake_sent_at",
                 "shutdown", "err")

    def __init__(self, side: Side, profile: StackProfile, options: SocketOptions,
                 mss: int, advmss: int = 0) -> None:
        self.side = side
        self.profile = profile
        self.mss = mss
        self.advmss = advmss or mss
        """tp->advmss: the MSS we announce (our MTU's; the link MSS in a scenario)."""
        self.state = State.CLOSED if side is Side.CLIENT else State.LISTEN
        self.established = False
        """ESTABLISHED or CLOSE_WAIT (the application may write); kept by `transition`."""
        self.events: list[TraceEvent] = []
        self.out: list[Segment] = []
        self.timers: dict[Timer, Micros] = {}
        """Armed timers and when they are due; `Endpoint.next_deadline` is their minimum."""
        self.tick_us = profile.tick_us
        """µs per jiffy (cached: the clock is read on every segment)."""
        self.phase = profile.jiffy_phase_us % self.tick_us if profile.jiffy_phase_us >= 0 \
            else self.tick_us // 2
        """Where in a tick time 0 falls (µs)."""
        self.handshake_sent_at = Micros(0)
        """When our SYN or SYN-ACK left (the first RTT sample)."""
        self.shutdown = 0
        """sk->sk_shutdown: `Shutdown` bits (shutdown(), close(), a reset)."""
        self.err = ""
        """sk->sk_err as its errno name ("" none): set by a reset or a timeout, reported
        (and cleared) by the next call that fails on it (sock_error)."""

        nonagle = (Nonagle.OFF if options.nodelay else 0) | (Nonagle.CORK if options.cork else 0)
        self.snd = SendState(nonagle=nonagle, sndbuf=profile.wmem_default,
                             mss_clamp=mss + profile.syn_tstamp_bytes)
        self.rcv = _initial_recv_state(side, profile, mss, self.advmss)
        self.ack = AckState(pingpong=profile.pingpong_thresh if options.quickack is False else 0)
        self.cc = CongestionState(cwnd=profile.init_cwnd, rto_us=profile.rto_initial_us)

    # ---------------------------------------------------------------- derived state
    @property
    def packets_out(self) -> int:
        return len(self.snd.rtx)

    @property
    def in_pingpong(self) -> bool:
        """inet_csk_in_pingpong_mode: the ping-pong count reached the threshold."""
        return self.ack.pingpong >= self.profile.pingpong_thresh

    @property
    def in_quickack_mode(self) -> bool:
        """tcp_in_quickack_mode: the route says quickack, or quick ACKs left and not in
        ping-pong."""
        return self.profile.route_quickack or (self.ack.quick > 0 and not self.in_pingpong)

    @property
    def rto_j(self) -> int:
        return self.profile.us_to_jiffies(self.cc.rto_us)

    # ---------------------------------------------------------------- trace
    def event(self, now: Micros, kind: Kind, reason: Reason, detail: str = "",
              timer: Timer | None = None, deadline: Micros | None = None, **data: int) -> None:
        self.events.append(TraceEvent(
            at=now, side=self.side, kind=kind, reason=reason, detail=detail,
            timer=timer, deadline=deadline, data=data))

    def hold(self, now: Micros, reason: Reason, detail: str) -> None:
        """Trace a send-side hold once per reason: later writes joining it say nothing new."""
        if reason is self.snd.last_hold:
            return
        self.snd.last_hold = reason
        self.event(now, Kind.HOLD, reason, detail, length=self.snd.queued_bytes)

    # ---------------------------------------------------------------- state machine
    def transition(self, now: Micros, event: ConnEvent) -> None:
        """Take ``event`` through `TRANSITIONS`; a pair it does not list is a model bug."""
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise ModelError(f"{event.value} in state {self.state.value}")
        if new is not self.state:
            self.event(now, Kind.STATE, Reason.STATE_CHANGE,
                       f"{self.state.value} → {new.value}")
            self.state = new
            self.established = new is State.ESTABLISHED or new is State.CLOSE_WAIT

    # ---------------------------------------------------------------- jiffy clock
    def jiffies(self, now: Micros) -> int:
        return (now + self.phase) // self.tick_us

    def jiffy_timer_at(self, now: Micros, expires_j: int) -> Micros:
        """When a timer_list due at jiffy ``expires_j`` runs: the timer wheel's bucket
        (`wheel_bucket_expiry`) on the kernel's jiffies counter, of which the model's jiffy
        0 is `StackProfile.jiffies_at_zero`."""
        now_j = self.jiffies(now)
        if self.profile.timer_wheel_round_up:
            off = self.profile.jiffies_at_zero
            fire_j = wheel_bucket_expiry(expires_j + off, now_j + off) - off
        else:
            fire_j = expires_j
        fire_j = max(fire_j, now_j + 1)
        return Micros(fire_j * self.tick_us - self.phase)

    # ---------------------------------------------------------------- timer slots
    def arm(self, now: Micros, timer: Timer, at: Micros, reason: Reason,
            detail: str = "") -> None:
        self.timers[timer] = at
        self.event(now, Kind.TIMER_ARMED, reason, detail, timer=timer, deadline=at)

    def cancel(self, now: Micros, timer: Timer, reason: Reason = Reason.TIMER_CLEARED) -> None:
        if self.disarm(timer):
            self.event(now, Kind.TIMER_CANCELLED, reason, timer=timer)

    def sock_error(self, default: str) -> str:
        """sock_error: take the pending error, if any, else ``default``."""
        err = self.err or default
        self.err = ""
        return err

    def disarm(self, timer: Timer) -> bool:
        """Clear ``timer``'s slot without tracing it; whether it was armed. (``in`` and
        ``del``, not ``dict.pop``: compiled, a method call on a dict is a generic call.)"""
        timers = self.timers
        if timer in timers:
            del timers[timer]
            return True
        return False
