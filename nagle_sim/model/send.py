"""The send path: when written data may leave (tcp.c's sendmsg and push, tcp_output.c's
tcp_write_xmit and its Nagle, CORK, MSG_MORE, cwnd and TSO rules) and the timers that
force it out (zero-window probe, tail loss probe, retransmission).

Owns: the Nagle rule (`tcp_nagle_check`, once, used by both `tcp_write_xmit` and the
TSO split `tcp_mss_split_point`), CORK/MSG_MORE/NODELAY, autocork, size_goal and TSO
bursts. Must not decide ACKs (``recv``); standard library and lower model modules only.
"""

from __future__ import annotations

from .config import (
    GSO_MAX_SIZE,
    MAX_PROBE_BACKOFF,
    MAX_RTO_BACKOFF,
    MAX_TCP_HEADER,
    TCP_BOUND_MIN,
    TCP_MSS_DEFAULT,
    AckStyle,
    NagleStyle,
)
from .events import ACK, SYN, Micros, Reason, Timer
from .output import tcp_transmit_control, tcp_transmit_data
from .rate import (
    tcp_cwnd_restart,
    tcp_cwnd_test,
    tcp_cwnd_validate,
    tcp_enter_loss,
    tcp_pacing_check,
    tcp_rate_check_app_limited,
    tcp_tso_autosize,
)
from .sock import Sock
from .state import ModelError, Nonagle, SendState, Shutdown, Skb, SocketError, State
from .timers import rto_at, tcp_check_probe_timer, tcp_rearm_rto, tcp_schedule_loss_probe


# ---------------------------------------------------------------- the rules
def tcp_minshall_check(snd: SendState) -> bool:
    """tcp_minshall_check: the last sub-MSS segment sent (ending at snd_sml) is still
    unACKed. Minshall's variant of Nagle: unACKed full-sized segments do not count."""
    return snd.snd_una < snd.snd_sml <= snd.snd_nxt


def tcp_nagle_check(partial: bool, snd: SendState, nonagle: int, in_flight: int,
                    style: NagleStyle, more: bool = False) -> Reason | None:
    """THE NAGLE RULE. tcp_nagle_check (RFC 896, Minshall's variant): hold a partial
    segment if corked, or if Nagle is on, data is in flight and the last small segment
    sent is unACKed. The kernel returns true for "hold"; here the hold's `Reason`, None to
    send. ``in_flight`` counts the segments already out (plus, for a TSO skb's tail, the
    skb's own). RFC 896 stacks (``NagleStyle.RFC896``) hold while anything is unACKed."""
    if not partial:
        return None
    if nonagle & Nonagle.CORK:
        return Reason.MORE_HOLD if more else Reason.CORK_HOLD
    if nonagle or not in_flight:
        return None
    if style is NagleStyle.RFC896:
        return Reason.NAGLE_HOLD_CLASSIC
    return Reason.NAGLE_HOLD if tcp_minshall_check(snd) else None


def tcp_nagle_test(sk: Sock, skb: Skb, nonagle: int, in_flight: int,
                   more: bool = False) -> Reason | None:
    """tcp_nagle_test: TCP_NAGLE_PUSH and a FIN always go; otherwise tcp_nagle_check on
    a partial (sub-MSS) skb. None means the skb may go."""
    if nonagle & Nonagle.PUSH or skb.fin:
        return None
    return tcp_nagle_check(skb.length < sk.mss, sk.snd, nonagle, in_flight,
                           sk.profile.nagle_style, more)


def tcp_should_autocork(sk: Sock, now: Micros, tail: Skb) -> bool:
    """tcp_should_autocork (f54b311142a9, v3.14): a partial tail waits while an earlier
    data packet is still in the device queue (net.ipv4.tcp_autocorking)."""
    return (sk.profile.autocorking and tail.length < sk.mss and bool(sk.snd.rtx)
            and sk.snd.tx_busy_until > now)


def forced_push(snd: SendState) -> bool:
    """forced_push: more than half the peer's largest window written since the last PSH."""
    return snd.write_seq > snd.pushed_seq + (snd.max_window >> 1)


def tcp_xmit_size_goal(snd: SendState, mss: int) -> int:
    """tcp_xmit_size_goal: an skb grows to half the peer's largest window, at most a
    64 KB GSO packet, in whole segments (TCP always builds GSO skbs now)."""
    half = snd.max_window >> 1 if snd.max_window > TCP_MSS_DEFAULT else snd.max_window
    goal = min(GSO_MAX_SIZE - 1 - MAX_TCP_HEADER, max(half, TCP_BOUND_MIN))
    return max(goal // mss, 1) * mss


# ---------------------------------------------------------------- sendmsg and push
def tcp_sendmsg(sk: Sock, now: Micros, nbytes: int, more: bool) -> None:
    """tcp_sendmsg_locked: data fills the tail skb; a skb full at size_goal while the
    write goes on is pushed at once; the last piece always goes through tcp_push."""
    if nbytes <= 0:
        raise ModelError("write size must be positive")
    if not sk.established:
        # sk_stream_wait_connect: the pending error, else EPIPE
        raise SocketError(sk.sock_error("EPIPE"),
                          f"write on a socket in state {sk.state.value}")
    if sk.err or sk.shutdown & Shutdown.SEND:
        # "if (sk->sk_err || (sk->sk_shutdown & SEND_SHUTDOWN)) goto do_error"
        raise SocketError(sk.sock_error("EPIPE"), "write after shutdown(SHUT_WR)")
    if more and not sk.profile.supports_cork:
        raise ModelError(f"profile {sk.profile.name} has no MSG_MORE")
    tcp_rate_check_app_limited(sk, now)
    snd, mss = sk.snd, sk.mss
    queue = snd.queue
    left = nbytes
    if queue and not queue[-1].fin:
        queue[-1].psh = False   # "if (!copied) ... &= ~TCPHDR_PSH": it grows again
    size_goal = tcp_xmit_size_goal(snd, mss)
    while left:
        tail = queue[-1] if queue else None
        if tail is None or tail.length >= mss or tail.fin:
            tcp_skb_entail(sk, now)
            tail = queue[-1]
        take = min(left, mss - tail.length)
        tail.length += take
        snd.queued_bytes += take
        snd.write_seq += take
        left -= take
        if not left:
            break           # the last chunk always goes through tcp_push (PSH), even full
        if tail.length < mss or snd.write_seq - snd.snd_nxt < size_goal:
            continue        # the kernel's skb is full only at size_goal
        # A full skb: tcp_push_one, or a forced push of everything
        if forced_push(snd):
            tcp_mark_push(snd, tail)
            tcp_push_pending_frames(sk, now, Nonagle.PUSH, Reason.FULL_SEGMENT)
        elif snd.write_seq - snd.snd_nxt <= size_goal:     # skb == tcp_send_head
            tcp_write_xmit(sk, now, Nonagle.PUSH, Reason.FULL_SEGMENT, push_one=True)
    tcp_push(sk, now, more)


def tcp_skb_entail(sk: Sock, now: Micros) -> None:
    """tcp_skb_entail: a new skb clears the one-shot TCP_NAGLE_PUSH override (and, as in
    tcp_sendmsg_locked's first allocation after idle, may restart cwnd)."""
    snd = sk.snd
    snd.nonagle &= ~Nonagle.PUSH
    tcp_cwnd_restart(sk, now)
    snd.queue.append(Skb(seq=snd.write_seq, length=0))


def tcp_mark_push(snd: SendState, skb: Skb) -> None:
    skb.psh = True
    snd.pushed_seq = snd.write_seq


def tcp_push(sk: Sock, now: Micros, more: bool) -> None:
    """tcp_push at the end of sendmsg: PSH on the tail unless MSG_MORE, the autocork
    check, then push with the socket's Nagle state (or corked, for MSG_MORE, this once)."""
    snd = sk.snd
    if not snd.queue:
        return
    tail = snd.queue[-1]
    if not more or forced_push(snd):
        tcp_mark_push(snd, tail)
    if tcp_should_autocork(sk, now, tail):
        sk.hold(now, Reason.AUTOCORK_HOLD, f"{snd.queued_bytes} B queued")
        if Timer.TSQ not in sk.timers:
            sk.arm(now, Timer.TSQ, snd.tx_busy_until, Reason.AUTOCORK_HOLD,
                   "TX completion of the previous packet")
        return
    nonagle = Nonagle.CORK if more else snd.nonagle
    tcp_push_pending_frames(sk, now, nonagle, Reason.APP_WRITE, more=more)


def tcp_push_pending_frames(sk: Sock, now: Micros, nonagle: int, why: Reason,
                            more: bool = False) -> None:
    """__tcp_push_pending_frames: write, and arm the probe timer if stuck with nothing
    in flight (tcp_check_probe_timer)."""
    if not sk.snd.queue:
        return
    if tcp_write_xmit(sk, now, nonagle, why, more=more):
        tcp_check_probe_timer(sk, now)


def tcp_write_xmit(sk: Sock, now: Micros, nonagle: int, why: Reason, push_one: bool = False,
                   more: bool = False, loss_probe: bool = False) -> bool:
    """tcp_write_xmit: per skb, pacing → cwnd → receive window → Nagle (on the tail skb
    only) → send a TSO skb. Returns True if nothing is in flight and data stays queued."""
    snd = sk.snd
    queue, rtx = snd.queue, snd.rtx
    sent = 0
    cwnd_limited = False
    while queue:
        skb = queue[0]
        if tcp_pacing_check(sk, now):
            break
        in_flight = len(rtx)
        quota = tcp_cwnd_test(sk.cc.cwnd, in_flight, skb.fin and skb.length == 0)
        if not quota and loss_probe:
            quota = 1       # tcp_write_xmit(push_one = 2): "force out a loss probe pkt"
        if not quota:
            cwnd_limited = True
            if snd.last_hold is not Reason.CWND_HOLD:
                sk.hold(now, Reason.CWND_HOLD, f"cwnd {sk.cc.cwnd}, in flight {in_flight}")
            break
        if skb.seq + skb.length > snd.snd_una + snd.snd_wnd:   # tcp_snd_wnd_test
            sk.hold(now, Reason.RWND_HOLD, f"window {snd.snd_wnd}")
            break
        hold = tcp_nagle_test(sk, skb, nonagle if len(queue) == 1 else Nonagle.PUSH,
                              in_flight, more)
        if hold is not None:
            if hold is not snd.last_hold:
                sk.hold(now, hold, _hold_detail(snd, hold))
            break
        tcp_send_skb(sk, now, tcp_mss_split_point(sk, skb, quota, nonagle, more), why)
        sent += 1
        if push_one:
            break
    if sent and not loss_probe:
        tcp_schedule_loss_probe(sk, now, advancing_rto=False)
    cwnd_limited = cwnd_limited or len(rtx) >= sk.cc.cwnd
    if sent or cwnd_limited:
        tcp_cwnd_validate(sk, cwnd_limited)
    return not rtx and bool(queue)


def _hold_detail(snd: SendState, reason: Reason) -> str:
    if reason is Reason.NAGLE_HOLD:
        return f"{snd.queued_bytes} B queued; small segment ending at {snd.snd_sml} unACKed"
    return f"{snd.queued_bytes} B queued"


def tcp_mss_split_point(sk: Sock, head: Skb, quota: int, nonagle: int,
                        more: bool) -> list[Skb]:
    """The TSO skb tcp_write_xmit builds from the queue head: full segments up to the
    cwnd quota (tcp_cwnd_test), tcp_tso_autosize's goal and size_goal; a partial tail
    joins only if the Nagle rule lets it go (tcp_mss_split_point, with the skb's own
    segments counted as in flight).
    SIMPLIFICATION: no tcp_tso_should_defer (waiting for a bigger cwnd opening)."""
    burst = [head]
    mss = sk.mss
    if head.length < mss or head.fin:
        return burst
    snd = sk.snd
    queue = snd.queue
    limit = min(quota, tcp_tso_autosize(sk), tcp_xmit_size_goal(snd, mss) // mss)
    window_end = snd.snd_una + snd.snd_wnd
    last = len(queue) - 1
    i = 1
    while len(burst) < limit and i <= last:
        nxt = queue[i]
        if nxt.seq + nxt.length > window_end:
            break
        if nxt.length < mss or nxt.fin:
            if tcp_nagle_test(sk, nxt, nonagle if i == last else Nonagle.PUSH,
                              len(snd.rtx) + len(burst), more) is None:
                burst.append(nxt)
            break
        burst.append(nxt)
        i += 1
    return burst


def tcp_send_skb(sk: Sock, now: Micros, burst: list[Skb], why: Reason) -> None:
    """The transmit step of tcp_write_xmit: dequeue, transmit, tcp_minshall_update,
    tcp_event_new_data_sent (arm the RTO when the first packet goes out)."""
    snd = sk.snd
    queue = snd.queue
    for skb in burst:
        queue.popleft()
        snd.queued_bytes -= skb.length
    prior = len(snd.rtx)
    snd.last_hold = None
    tcp_transmit_data(sk, now, burst, why)
    snd.rtx.extend(burst)
    last = burst[-1]
    snd.snd_nxt = max(snd.snd_nxt, last.end)
    if last.length < sk.mss:
        snd.snd_sml = last.end   # tcp_minshall_update: len < pcount * mss
    if prior == 0 or Timer.TLP in sk.timers:
        tcp_rearm_rto(sk, now)


# ---------------------------------------------------------------- socket options
def tcp_sock_set_nodelay(sk: Sock, now: Micros, on: bool) -> None:
    """__tcp_sock_set_nodelay: on pushes queued data at once, even if corked (one-shot
    TCP_NAGLE_PUSH); off clears TCP_NAGLE_OFF only."""
    snd = sk.snd
    if on:
        snd.nonagle |= Nonagle.OFF | Nonagle.PUSH
        tcp_push_pending_frames(sk, now, snd.nonagle, Reason.NODELAY_PUSH)
    else:
        snd.nonagle &= ~Nonagle.OFF


def tcp_sock_set_cork(sk: Sock, now: Micros, on: bool) -> None:
    """__tcp_sock_set_cork: off pushes, overriding Nagle only if NODELAY is set, so a
    partial tail may still wait for Nagle."""
    snd = sk.snd
    if on:
        snd.nonagle |= Nonagle.CORK
        return
    snd.nonagle &= ~Nonagle.CORK
    if snd.nonagle & Nonagle.OFF:
        snd.nonagle |= Nonagle.PUSH
    tcp_push_pending_frames(sk, now, snd.nonagle, Reason.UNCORK_PUSH)


# ---------------------------------------------------------------- timers that send
def tcp_probe_timer(sk: Sock, now: Micros) -> None:
    """tcp_probe_timer → tcp_send_probe0 → tcp_write_wakeup: send the head, PSH set,
    regardless of Nagle and CORK; no Minshall update. A closed window gets a probe."""
    snd = sk.snd
    if snd.rtx or not snd.queue:
        return
    head = snd.queue[0]
    if head.seq + min(head.length, 1) > snd.snd_una + snd.snd_wnd:
        tcp_transmit_control(sk, now, ACK, snd.snd_una - 1, Reason.WINDOW_PROBE)
        sk.cc.backoff = min(sk.cc.backoff + 1, MAX_PROBE_BACKOFF)
        tcp_check_probe_timer(sk, now)
        return
    room = snd.snd_una + snd.snd_wnd - head.seq
    if room < head.length and not head.fin:
        # tcp_write_wakeup: a head bigger than the window is cut to what fits
        # (tcp_fragment); the rest stays queued
        rest = Skb(seq=head.seq + room, length=head.length - room, psh=head.psh)
        head.length = room
        snd.queue.insert(1, rest)
    head.psh = True
    snd.last_hold = None
    snd.queue.popleft()
    snd.queued_bytes -= head.length
    tcp_transmit_data(sk, now, [head], Reason.PROBE0_RELEASE)
    snd.rtx.append(head)
    snd.snd_nxt = max(snd.snd_nxt, head.end)
    tcp_rearm_rto(sk, now)


def tcp_send_loss_probe(sk: Sock, now: Micros) -> None:
    """tcp_send_loss_probe (RFC 8985 §7.3): one probe per tail-loss episode. New data goes
    first, with Nagle off (TCP_NAGLE_OFF) and even if the congestion window is full
    (tcp_write_xmit's push_one == 2 forces a one-segment quota, so a probe may go one
    segment past cwnd); otherwise the last sent segment is sent again."""
    snd = sk.snd
    if not snd.tlp_high_seq:
        head = snd.queue[0] if snd.queue else None
        if head is not None and head.seq + head.length <= snd.snd_una + snd.snd_wnd:
            before = len(snd.rtx)
            tcp_write_xmit(sk, now, Nonagle.OFF, Reason.LOSS_PROBE, push_one=True,
                           loss_probe=True)
            if len(snd.rtx) > before:
                snd.tlp_high_seq = snd.snd_nxt
        elif snd.rtx:
            last = snd.rtx[-1]
            last.retransmitted = True
            tcp_transmit_data(sk, now, [last], Reason.LOSS_PROBE)
            snd.tlp_high_seq = snd.snd_nxt
    tcp_rearm_rto(sk, now)


def tcp_retrans_try_collapse(sk: Sock, to: Skb) -> None:
    """tcp_retrans_try_collapse (__tcp_retransmit_skb, sysctl tcp_retrans_collapse = 1):
    a retransmitted segment takes the sent segments behind it along while together they
    fit in one MSS and the peer's window, their flags included. So an RTO re-sends data
    and a FIN that first left separately as one segment, old data + FIN (captured here:
    100 bytes, then the FIN 5 ms later, both lost: the RTO sent FP. 1:101(100))."""
    snd = sk.snd
    rtx, space = snd.rtx, sk.mss - to.length
    while len(rtx) > 1:
        nxt = rtx[1]
        if nxt.length > space or nxt.end > snd.snd_una + snd.snd_wnd:
            break
        space -= nxt.length
        to.length += nxt.length
        to.fin, to.psh = nxt.fin, to.psh or nxt.psh
        del rtx[1]


def tcp_retransmit_timer(sk: Sock, now: Micros) -> None:
    """tcp_retransmit_timer (RFC 6298 §5): resend the SYN / SYN-ACK, or the oldest
    unACKed segment; back off; cwnd 1 (tcp_enter_loss)."""
    cc = sk.cc
    if sk.state is State.SYN_SENT or sk.state is State.SYN_RCVD:
        cc.backoff += 1
        flags = SYN if sk.state is State.SYN_SENT else SYN | ACK
        tcp_transmit_control(sk, now, flags, 0, Reason.RETRANSMIT)
        sk.arm(now, Timer.RTO, rto_at(sk, now), Reason.RTO_ARMED)
        return
    rtx = sk.snd.rtx
    if not rtx:
        return
    skb = rtx[0]
    skb.retransmitted = True
    if sk.profile.ack_style is AckStyle.LINUX:
        tcp_retrans_try_collapse(sk, skb)
    tcp_enter_loss(sk, now)
    tcp_transmit_data(sk, now, [skb], Reason.RETRANSMIT)
    cc.backoff = min(cc.backoff + 1, MAX_RTO_BACKOFF)
    sk.arm(now, Timer.RTO, rto_at(sk, now), Reason.RTO_ARMED)
