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
    SKB_SHINFO_SIZE,
    SOCK_MIN_SNDBUF,
    TCP_BOUND_MIN,
    TCP_INIT_CWND,
    TCP_MSS_DEFAULT,
    TCP_REORDERING,
    TCP_RETRIES2,
    TCP_RTO_MAX_US,
    TCP_SYN_RETRIES,
    AckStyle,
    NagleStyle,
)
from .events import ACK, SYN, Kind, Micros, Reason, Timer
from .output import tcp_transmit_control, tcp_transmit_data
from .rate import (
    tcp_chrono_start,
    tcp_chrono_stop,
    tcp_cwnd_restart,
    tcp_cwnd_test,
    tcp_cwnd_validate,
    tcp_enter_loss,
    tcp_pacing_check,
    tcp_packets_in_flight,
    tcp_rate_check_app_limited,
    tcp_tso_autosize,
)
from .sock import Sock
from .state import (
    CaState,
    Chrono,
    ConnEvent,
    ModelError,
    Nonagle,
    SendState,
    Shutdown,
    Skb,
    SocketError,
    State,
)
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
    """tcp_should_autocork (f54b311142a9, v3.14): the tail skb, while shorter than
    size_goal, waits while an earlier data packet is still in the device queue
    (net.ipv4.tcp_autocorking); never a MSG_EOR record's end (b0de0cf4f57c,
    tcp_skb_can_collapse_to)."""
    snd = sk.snd
    return (sk.profile.autocorking and not tail.eor and bool(snd.rtx)
            and snd.tx_busy_until > now
            and snd.write_seq - snd.skb_start < tcp_xmit_size_goal(snd, sk.mss))


def forced_push(snd: SendState) -> bool:
    """forced_push: more than half the peer's largest window written since the last PSH."""
    return snd.write_seq > snd.pushed_seq + (snd.max_window >> 1)


def tcp_xmit_size_goal(snd: SendState, mss: int) -> int:
    """tcp_xmit_size_goal: an skb grows to half the peer's largest window, at most a
    64 KB GSO packet, in whole segments (TCP always builds GSO skbs now)."""
    half = snd.max_window >> 1 if snd.max_window > TCP_MSS_DEFAULT else snd.max_window
    goal = min(GSO_MAX_SIZE - 1 - MAX_TCP_HEADER, max(half, TCP_BOUND_MIN))
    return max(goal // mss, 1) * mss


# ---------------------------------------------------------------- the send buffer
def sk_wmem_queued(sk: Sock) -> int:
    """sk_wmem_queued: every queued and unACKed byte (tcp_trim_head frees ACKed bytes
    exactly) plus each kernel skb's head (`StackProfile.skb_tx_overhead`)."""
    snd = sk.snd
    payload = snd.write_seq - snd.snd_una
    if snd.fin_queued and snd.snd_una < snd.write_seq:
        payload -= 1
    return max(payload, 0) + snd.skbs * sk.profile.skb_tx_overhead


def tcp_notsent_lowat(sk: Sock) -> int:
    """tcp_notsent_lowat: TCP_NOTSENT_LOWAT if set, else net.ipv4.tcp_notsent_lowat."""
    return sk.snd.notsent_lowat or sk.profile.notsent_lowat


def tcp_stream_memory_free(sk: Sock, wake: int) -> bool:
    """sk_stream_memory_free → tcp_stream_memory_free: room for another skb while the
    queued truesize is under sk_sndbuf, and (TCP_NOTSENT_LOWAT) the bytes not yet sent are
    under the low-water mark (half of it for a wake-up)."""
    snd = sk.snd
    if sk_wmem_queued(sk) >= snd.sndbuf:
        return False
    return (snd.write_seq - snd.snd_nxt) << wake < tcp_notsent_lowat(sk)


def tcp_sndbuf_expand(sk: Sock) -> None:
    """tcp_sndbuf_expand: room for twice the congestion window (three times under BBR,
    bbr_sndbuf_expand) in worst-case skbs of one segment each: per segment the MSS, the
    headers and skb_shared_info rounded up to a power of two, plus struct sk_buff; at
    least TCP_INIT_CWND segments; at most tcp_wmem[2]. Measured: 46080 B with MSS 1000
    (2 × 10 × 2304), as getsockopt(SO_SNDBUF) reads after the handshake."""
    snd, p = sk.snd, sk.profile
    per_mss = max(snd.mss_clamp, sk.mss) + MAX_TCP_HEADER + SKB_SHINFO_SIZE
    per_mss = (1 << (per_mss - 1).bit_length()) + p.skb_struct_size
    nr_segs = max(max(TCP_INIT_CWND, sk.cc.cwnd), TCP_REORDERING + 1)
    sndmem = (3 if sk.cc.bbr is not None else 2) * nr_segs * per_mss
    if snd.sndbuf < sndmem:
        snd.sndbuf = min(sndmem, p.wmem_max)


def tcp_init_buffer_space(sk: Sock) -> None:
    """tcp_init_buffer_space (tcp_init_transfer, as the connection is established): the
    send buffer grows to tcp_sndbuf_expand's size unless SO_SNDBUF fixed it."""
    if not sk.snd.sndbuf_locked:
        tcp_sndbuf_expand(sk)


def sock_set_sndbuf(sk: Sock, value: int) -> None:
    """setsockopt(SO_SNDBUF): the value, capped at net.core.wmem_max, doubled (for the
    kernel's own overhead), at least SOCK_MIN_SNDBUF; the kernel stops resizing it."""
    snd = sk.snd
    value = min(max(value, 0), sk.profile.core_wmem_max)
    snd.sndbuf = max(value * 2, SOCK_MIN_SNDBUF)
    snd.sndbuf_locked = True


def tcp_check_space(sk: Sock, now: Micros) -> None:
    """tcp_check_space → tcp_new_space → sk_stream_write_space, after an ACK: a writer
    waiting for room (SOCK_NOSPACE) may first get a bigger buffer (tcp_sndbuf_expand, if
    SO_SNDBUF did not fix it and the congestion window is not full), and is woken once
    the free space is at least half of what is queued (sk_stream_wspace >=
    sk_stream_min_wspace, i.e. at most 2/3 of the buffer in use) and another skb fits."""
    snd = sk.snd
    if not snd.nospace:
        return
    if not snd.sndbuf_locked and tcp_packets_in_flight(sk) < sk.cc.cwnd:
        tcp_sndbuf_expand(sk)
    wmem = sk_wmem_queued(sk)
    if snd.sndbuf - wmem >= wmem >> 1 and tcp_stream_memory_free(sk, 1):
        snd.nospace = False
        snd.write_wakeup = True
        tcp_chrono_stop(sk, now, Chrono.SNDBUF_LIMITED)
        sk.event(now, Kind.MODE, Reason.SNDBUF_ROOM,
                 f"{wmem} B of {snd.sndbuf} B in use", sndbuf=snd.sndbuf)


# ---------------------------------------------------------------- sendmsg and push
def tcp_sendmsg(sk: Sock, now: Micros, nbytes: int, more: bool, eor: bool = False,
                resume: bool = False) -> int:
    """tcp_sendmsg_locked: data fills the tail skb up to size_goal (a new one after a
    MSG_EOR record, tcp_skb_can_collapse_to); a skb full at size_goal while the write goes
    on is pushed at once; the last piece always goes through tcp_push. A new skb needs
    room in the send buffer (sk_stream_memory_free): without it the write stops, pushes
    what it queued (with PSH, Nagle overridden) and returns how much it copied — the
    caller blocks (``resume`` then continues the same call) or, non-blocking, returns
    that count (EAGAIN when nothing was copied). Returns the bytes copied."""
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
    snd, mss = sk.snd, sk.mss
    if not resume:
        tcp_rate_check_app_limited(sk, now)
    queue = snd.queue
    size_goal = tcp_xmit_size_goal(snd, mss)
    left = nbytes
    copied = 0
    while left:
        tail = queue[-1] if queue else None
        skb_len = snd.write_seq - snd.skb_start
        if tail is None or skb_len >= size_goal or tail.eor or tail.fin:
            if not tcp_stream_memory_free(sk, 0):
                break                                   # wait_for_space
            tcp_skb_entail(sk, now)
            tail = queue[-1]
        elif tail.length >= mss:
            # the next MSS piece of the same skb: the skb's PSH stays at its end
            piece = Skb(seq=snd.write_seq, length=0, psh=tail.psh)
            tail.psh = False
            queue.append(piece)
            tail = piece
        if not copied and not resume:
            tail.psh = False    # "if (!copied) ... &= ~TCPHDR_PSH": the skb grows again
        # (nested two-argument min: mypyc calls the generic builtin for three)
        take = min(min(left, mss - tail.length), size_goal - (snd.write_seq - snd.skb_start))
        tail.length += take
        snd.queued_bytes += take
        snd.write_seq += take
        left -= take
        copied += take
        if not left:
            tail.eor = eor      # "if (unlikely(flags & MSG_EOR)) TCP_SKB_CB(skb)->eor = 1"
            break               # the last chunk always goes through tcp_push (PSH), even full
        if snd.write_seq - snd.skb_start < size_goal:
            continue            # the skb is full only at size_goal
        # A full skb: a forced push of everything, or tcp_push_one if it is the send head
        if forced_push(snd):
            tcp_mark_push(snd, tail)
            tcp_push_pending_frames(sk, now, Nonagle.PUSH, Reason.FULL_SEGMENT)
        elif snd.skb_start == queue[0].seq:
            tcp_write_xmit(sk, now, Nonagle.PUSH, Reason.FULL_SEGMENT, push_one=True)
    if left:
        # wait_for_space: SOCK_NOSPACE; push what this call queued, PSH set, Nagle off
        snd.nospace = True
        if snd.last_hold is not Reason.SNDBUF_HOLD:
            sk.hold(now, Reason.SNDBUF_HOLD, f"{sk_wmem_queued(sk)} B of {snd.sndbuf} B "
                    f"in use; {left} B left to write")
        if copied:
            tcp_push(sk, now, False, Nonagle.PUSH)
        return copied
    tcp_push(sk, now, more)
    return copied


def tcp_skb_entail(sk: Sock, now: Micros) -> None:
    """tcp_skb_entail: a new skb, charged to the send buffer; it clears the one-shot
    TCP_NAGLE_PUSH override and, after idle, may restart cwnd
    (tcp_slow_start_after_idle_check)."""
    snd = sk.snd
    snd.nonagle &= ~Nonagle.PUSH
    tcp_cwnd_restart(sk, now)
    if not snd.queue:
        tcp_chrono_start(sk, now, Chrono.BUSY)     # tcp_add_write_queue_tail
    snd.queue.append(Skb(seq=snd.write_seq, length=0, head=True))
    snd.skb_start = snd.write_seq
    snd.skbs += 1


def tcp_mark_push(snd: SendState, skb: Skb) -> None:
    skb.psh = True
    snd.pushed_seq = snd.write_seq


def tcp_push(sk: Sock, now: Micros, more: bool, nonagle: int = -1) -> None:
    """tcp_push at the end of sendmsg: PSH on the tail unless MSG_MORE, the autocork
    check (the tail skb shorter than size_goal), then push with the socket's Nagle state
    (or corked, for MSG_MORE, this once; ``nonagle``: the caller's, TCP_NAGLE_PUSH when
    a write stops for buffer space)."""
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
    if more:
        nonagle = Nonagle.CORK
    elif nonagle < 0:
        nonagle = snd.nonagle
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
    sent = sent_pkts = 0
    cwnd_limited = rwnd_limited = False
    cc = sk.cc
    left_out = cc.sacked_out + cc.lost_out - cc.retrans_out   # tcp_packets_in_flight
    while queue:
        skb = queue[0]
        if tcp_pacing_check(sk, now):
            break
        in_flight = len(rtx) - left_out
        quota = tcp_cwnd_test(sk.cc.cwnd, in_flight, skb.fin and skb.length <= sk.mss
                              and sk.profile.fin_cwnd_exempt)
        if not quota and loss_probe:
            quota = 1       # tcp_write_xmit(push_one = 2): "force out a loss probe pkt"
        if not quota:
            cwnd_limited = True
            if snd.last_hold is not Reason.CWND_HOLD:
                sk.hold(now, Reason.CWND_HOLD, f"cwnd {sk.cc.cwnd}, in flight {in_flight}")
            break
        if skb.seq + skb.length > snd.snd_una + snd.snd_wnd:   # tcp_snd_wnd_test
            sk.hold(now, Reason.RWND_HOLD, f"window {snd.snd_wnd}")
            rwnd_limited = True
            break
        hold = tcp_nagle_test(sk, skb, nonagle if len(queue) == 1 else Nonagle.PUSH,
                              in_flight, more)
        if hold is not None:
            if hold is not snd.last_hold:
                sk.hold(now, hold, _hold_detail(snd, hold))
            break
        burst = tcp_mss_split_point(sk, skb, quota, nonagle, more)
        tcp_send_skb(sk, now, burst, why)
        sent += 1
        sent_pkts += len(burst)
        if push_one:
            break
    if sent_pkts and (cc.ca_state == CaState.RECOVERY or cc.ca_state == CaState.CWR):
        cc.prr_out += sent_pkts         # tcp_write_xmit: new data sent in a reduction
    if sent and not loss_probe:
        tcp_schedule_loss_probe(sk, now, advancing_rto=False)
    cwnd_limited = cwnd_limited or len(rtx) - left_out >= cc.cwnd
    if rwnd_limited:
        tcp_chrono_start(sk, now, Chrono.RWND_LIMITED)
    else:
        tcp_chrono_stop(sk, now, Chrono.RWND_LIMITED)
    if sent or cwnd_limited:
        tcp_cwnd_validate(sk, now, cwnd_limited)
    return not rtx and bool(queue)


def _hold_detail(snd: SendState, reason: Reason) -> str:
    if reason is Reason.NAGLE_HOLD:
        return f"{snd.queued_bytes} B queued; small segment ending at {snd.snd_sml} unACKed"
    return f"{snd.queued_bytes} B queued"


def tcp_mss_split_point(sk: Sock, head: Skb, quota: int, nonagle: int,
                        more: bool) -> list[Skb]:
    """The TSO skb tcp_write_xmit builds from the queue head: full segments up to the
    cwnd quota (tcp_cwnd_test) and tcp_tso_autosize's goal; a partial tail joins only if
    the Nagle rule lets it go (tcp_mss_split_point, with the skb's own segments counted as
    in flight). Since 8ee602c63520 (v6.10, tcp_grow_skb) a skb short of the cwnd quota
    first takes bytes from the next one, unless it ends a MSG_EOR record: a burst may
    span two kernel skbs. Before it, a burst is cut from one skb only (at most
    size_goal).
    SIMPLIFICATION: no tcp_tso_should_defer (waiting for a bigger cwnd opening)."""
    burst = [head]
    mss = sk.mss
    if head.length < mss or head.fin:
        return burst
    snd = sk.snd
    queue = snd.queue
    grow = sk.profile.tcp_grow_skb
    limit = min(quota, tcp_tso_autosize(sk))
    if not grow:
        limit = min(limit, tcp_xmit_size_goal(snd, mss) // mss)
    window_end = snd.snd_una + snd.snd_wnd
    last = len(queue) - 1
    crossed = False
    i = 1
    while len(burst) < limit and i <= last:
        nxt = queue[i]
        if nxt.head:
            if not grow or crossed or burst[-1].eor:
                break       # tcp_grow_skb takes from the next skb only, never past a record
            crossed = True
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


def tso_fragment(snd: SendState, burst: list[Skb] | None = None) -> None:
    """The kernel skbs after a transmission: a skb whose bytes the burst took whole
    (tcp_grow_skb, tcp_eat_one_skb) is freed; what stays of a skb after part of it left
    is a skb of its own (tso_fragment / tcp_fragment), charged its head again (and the
    write queue's tail if it was)."""
    if burst is not None:
        for piece in burst[1:]:
            if piece.head:
                piece.head = False
                snd.skbs -= 1
    queue = snd.queue
    if queue and not queue[0].head:
        head = queue[0]
        head.head = True
        snd.skbs += 1
        if snd.skb_start < head.seq:
            snd.skb_start = head.seq


def tcp_send_skb(sk: Sock, now: Micros, burst: list[Skb], why: Reason) -> None:
    """The transmit step of tcp_write_xmit: dequeue, transmit, tcp_minshall_update,
    tcp_event_new_data_sent (arm the RTO when the first packet goes out)."""
    snd = sk.snd
    queue = snd.queue
    for skb in burst:
        queue.popleft()
        snd.queued_bytes -= skb.length
    tso_fragment(snd, burst)
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
    snd, cc = sk.snd, sk.cc
    if snd.rtx or not snd.queue:
        return
    # RFC 1122 4.2.2.17: probe a closed window for ever, unless TCP_USER_TIMEOUT is set:
    # then give up that long after the first probe of the spell (icsk_probes_tstamp)
    if cc.probes_tstamp < 0:
        cc.probes_tstamp = now
    elif cc.user_timeout_us and now - cc.probes_tstamp >= cc.user_timeout_us:
        tcp_write_err(sk, now)
        return
    head = snd.queue[0]
    if head.seq + min(head.length, 1) > snd.snd_una + snd.snd_wnd:
        tcp_transmit_control(sk, now, ACK, snd.snd_una - 1, Reason.WINDOW_PROBE)
        cc.backoff = min(cc.backoff + 1, MAX_PROBE_BACKOFF)
        tcp_check_probe_timer(sk, now)
        return
    room = snd.snd_una + snd.snd_wnd - head.seq
    if room < head.length and not head.fin:
        # tcp_write_wakeup: a head bigger than the window is cut to what fits
        # (tcp_fragment); the rest stays queued
        rest = Skb(seq=head.seq + room, length=head.length - room, psh=head.psh,
                   eor=head.eor)
        head.length = room
        head.eor = False
        snd.queue.insert(1, rest)
    head.psh = True
    snd.last_hold = None
    snd.queue.popleft()
    snd.queued_bytes -= head.length
    tso_fragment(snd)
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
        if to.eor or nxt.length > space or nxt.end > snd.snd_una + snd.snd_wnd:
            break       # tcp_skb_can_collapse: never across a MSG_EOR record's end
        space -= nxt.length
        to.length += nxt.length
        to.fin, to.psh, to.eor = nxt.fin, to.psh or nxt.psh, nxt.eor
        if nxt.head:
            snd.skbs -= 1       # its skb is freed into the one retransmitted
        if nxt.lost:
            sk.cc.lost_out -= 1
        if nxt.rexmit:
            sk.cc.retrans_out -= 1
        del rtx[1]


def tcp_model_timeout(boundary: int, rto_base_us: int) -> int:
    """tcp_model_timeout: how long ``boundary`` retransmissions backing off from
    ``rto_base`` take, doubling up to TCP_RTO_MAX, then linear (µs)."""
    thresh = (TCP_RTO_MAX_US // rto_base_us).bit_length() - 1        # ilog2
    if boundary <= thresh:
        return ((2 << boundary) - 1) * rto_base_us
    return ((2 << thresh) - 1) * rto_base_us + (boundary - thresh) * TCP_RTO_MAX_US


def retransmits_timed_out(sk: Sock, now: Micros, boundary: int) -> bool:
    """retransmits_timed_out: after at least one retransmission, the time since the first
    retransmission of this episode (retrans_stamp) reaches TCP_USER_TIMEOUT, or without
    it the time ``boundary`` backed-off RTOs from TCP_RTO_MIN would take."""
    cc = sk.cc
    if not cc.retransmits:
        return False
    timeout = cc.user_timeout_us or tcp_model_timeout(boundary, sk.profile.rto_min_us)
    return now - cc.retrans_stamp >= timeout


def tcp_write_err(sk: Sock, now: Micros) -> None:
    """tcp_write_err → tcp_done_with_error: the connection is dropped without a reset,
    its queues purged; the next call reports ETIMEDOUT (then EPIPE)."""
    snd = sk.snd
    sk.err = "ETIMEDOUT"
    sk.shutdown = Shutdown.MASK
    sk.event(now, Kind.MODE, Reason.WRITE_TIMEOUT,
             f"TCP_USER_TIMEOUT {sk.cc.user_timeout_us // 1000} ms"
             if sk.cc.user_timeout_us else "tcp_retries2")
    snd.queue.clear()
    snd.rtx.clear()
    snd.queued_bytes = 0
    snd.skbs = 0
    snd.snd_una = snd.write_seq
    sk.timers.clear()
    sk.transition(now, ConnEvent.TIMEOUT)


def tcp_clamp_rto_to_user_timeout(sk: Sock, now: Micros, at: Micros) -> Micros:
    """tcp_clamp_rto_to_user_timeout: with TCP_USER_TIMEOUT the next retransmission timer
    fires no later than the timeout (msecs_to_jiffies of what remains; at once if
    passed), so the connection is dropped on time, not an RTO later."""
    uto = sk.cc.user_timeout_us
    if not uto:
        return at
    remaining = uto - (now - sk.cc.retrans_stamp)
    if remaining <= 0:
        return sk.jiffy_timer_at(now, sk.jiffies(now) + 1)
    clamped = sk.jiffy_timer_at(now, sk.jiffies(now) + sk.profile.us_to_jiffies(remaining))
    return clamped if clamped < at else at


def tcp_retransmit_timer(sk: Sock, now: Micros) -> None:
    """tcp_retransmit_timer (RFC 6298 §5): unless the retransmissions have timed out
    (tcp_write_timeout: tcp_syn_retries for a handshake; TCP_USER_TIMEOUT or
    tcp_retries2 after it → tcp_write_err), resend the SYN / SYN-ACK, or the oldest
    unACKed segment; back off; cwnd 1 (tcp_enter_loss); the next timer is clamped to the
    user timeout."""
    cc = sk.cc
    if sk.state is State.SYN_SENT or sk.state is State.SYN_RCVD:
        if cc.retransmits >= TCP_SYN_RETRIES:
            tcp_write_err(sk, now)
            return
        cc.backoff += 1
        cc.retransmits += 1
        flags = SYN if sk.state is State.SYN_SENT else SYN | ACK
        tcp_transmit_control(sk, now, flags, 0, Reason.RETRANSMIT)
        sk.arm(now, Timer.RTO, rto_at(sk, now), Reason.RTO_ARMED)
        return
    rtx = sk.snd.rtx
    if not rtx:
        return
    if retransmits_timed_out(sk, now, TCP_RETRIES2):
        tcp_write_err(sk, now)
        return
    skb = rtx[0]
    if not cc.retrans_stamp:
        # tcp_retransmit_skb, the first time: the skb's timestamp, which its
        # retransmission has just refreshed, so the user timeout counts from now
        cc.retrans_stamp = now
    skb.retransmitted = True
    if len(rtx) > 1 and not rtx[1].head:
        rtx[1].head = True      # __tcp_retransmit_skb: tcp_fragment to one MSS
        sk.snd.skbs += 1
    if sk.profile.ack_style is AckStyle.LINUX:
        tcp_retrans_try_collapse(sk, skb)
    tcp_enter_loss(sk, now)
    cc.retransmits += 1
    if not skb.rexmit:
        skb.rexmit = True       # tcp_retransmit_skb: TCPCB_SACKED_RETRANS, retrans_out
        cc.retrans_out += 1
    tcp_transmit_data(sk, now, [skb], Reason.RETRANSMIT)
    cc.backoff = min(cc.backoff + 1, MAX_RTO_BACKOFF)
    sk.arm(now, Timer.RTO, tcp_clamp_rto_to_user_timeout(sk, now, rto_at(sk, now)),
           Reason.RTO_ARMED)
