"""Putting segments on the wire, and what every transmission does to the ACK state
(tcp_output.c: __tcp_transmit_skb, tcp_event_ack_sent, tcp_event_data_sent, tcp_send_ack).

Owns: building `Segment`s, the window we advertise, piggybacking (any segment carrying
ACK spends a quick ACK and cancels the delayed-ACK timer) and ping-pong *entry* (the
application replying within ato). Decides nothing about *whether* to send: that is
``send`` (data) and ``recv`` (ACKs). Standard library and lower model modules only.
"""

from __future__ import annotations

from .config import PINGPONG_MAX, AckStyle
from .events import ACK, FIN, PSH, RST, SYN, Kind, Micros, Reason, Segment, Timer
from .rate import tcp_ca_event_tx_start, tcp_rate_skb_sent, tcp_update_skb_after_send
from .sock import Sock
from .state import TCP_MAX_WSCALE, TCP_RMEM_TO_WIN_SCALE, AckPending, Skb, State


def skb_truesize(sk: Sock, length: int) -> int:
    """The truesize of a received skb carrying ``length`` payload bytes: a kmalloc'ed
    head (payload, headers, padding, skb_shared_info) rounded up to its size class, plus
    struct sk_buff (SKB_TRUESIZE). Measured here: 2304 for 1000-1448 bytes.
    SIMPLIFICATION: heads above 8 KB (loopback GSO) are charged their size, as page
    fragments are, not rounded up to a power of two.

    On loopback the receiver gets the sender's own skb: a small head plus the payload in
    page fragments (tcp_sendmsg_locked adds each copied byte to truesize), so its truesize
    is the payload plus `StackProfile.loopback_skb_overhead`."""
    p = sk.profile
    if sk.snd.rx_loopback:
        return length + p.loopback_skb_overhead
    head = length + p.skb_rx_overhead
    if head <= 8192:
        head = max(512, 1 << (head - 1).bit_length())
    return head + p.skb_struct_size


def tcp_win_from_space(sk: Sock, space: int) -> int:
    """tcp_win_from_space (dfa2f0483360, 2023): the window a buffer of ``space`` bytes of
    truesize holds, by the measured payload/truesize ratio (negative when overdrawn)."""
    return (space * sk.rcv.scaling_ratio) >> TCP_RMEM_TO_WIN_SCALE


def tcp_space_from_win(sk: Sock, win: int) -> int:
    """tcp_space_from_win: the buffer (truesize) a window of ``win`` bytes needs."""
    return (win << TCP_RMEM_TO_WIN_SCALE) // max(sk.rcv.scaling_ratio, 1)


def tcp_space(sk: Sock) -> int:
    """tcp_space: the window the buffer's free space (rcvbuf - rmem_alloc) holds."""
    return tcp_win_from_space(sk, sk.rcv.rcvbuf - sk.rcv.rmem_alloc)


def tcp_select_window_now(sk: Sock, now: Micros) -> int:
    """__tcp_select_window (tcp_output.c, as of 6.x with dfa2f0483360's scaling ratio):
    the window we could offer now, before the no-shrink rule. Free space capped at
    rcv_ssthresh, rounded up to the window scale's unit. When free space falls below half
    of the full space, quick-ACK mode ends (icsk_ack.quick = 0), and the window is 0 once
    free space is below 1/16 of the full space or one rcv_mss."""
    rcv, p = sk.rcv, sk.profile
    mss = rcv.rcv_mss
    free = tcp_space(sk)
    allowed = tcp_win_from_space(sk, rcv.rcvbuf)
    full = min(rcv.window_clamp, allowed)
    wscale = min(p.rcv_wscale, TCP_MAX_WSCALE)
    unit = 1 << wscale
    if mss > full:
        mss = full
        if mss <= 0:
            return 0
    if free < full >> 1:
        if sk.ack.quick:
            sk.ack.quick = 0
            sk.event(now, Kind.MODE, Reason.QUICK_DROPPED,
                     f"free {max(free, 0)} B < half of {full} B", quick=0)
        free -= free % unit              # round_down: a new window must not grow by wscale
        if free < allowed >> 4 or free < mss:
            return 0
    free = min(free, rcv.rcv_ssthresh)
    if wscale:
        return -(-free // unit) * unit   # ALIGN: not scaled away to zero
    window = rcv.rcv_wnd                 # unscaled: whole segments, kept if close enough
    if window <= free - mss or window > free:
        window = free - free % mss
    elif mss == full and free > window + (full >> 1):
        window = free
    return window


def tcp_select_window(sk: Sock, now: Micros) -> int:
    """tcp_select_window: the window advertised on an outgoing segment, which moves
    rcv_wup to rcv_nxt. The offered right edge never moves left: if the new window is
    smaller than what is left of the last one, that remainder (rounded up to the scale
    unit) is offered again, so a receiver that stops reading closes its window only as
    the peer fills it (net.ipv4.tcp_shrink_window = 0, the default and this machine's).
    The SYN and SYN-ACK carry the initial window, unscaled.
    Measured here (tcp_rmem 4096 131072 33554432, MSS 1448, nobody reading): 64512 B,
    growing to 76800 B over the first four segments, then shrinking; 0 at 90233 B unread
    in a bulk transfer, at 91-93 KB with 1000-byte writes."""
    rcv, p = sk.rcv, sk.profile
    if p.ack_style is not AckStyle.LINUX:
        free = max(0, p.rcv_buf - rcv.unread)
        rcv.rcv_wnd = min(p.rcv_wnd, free)
        rcv.rcv_wup = rcv.rcv_nxt
        return rcv.rcv_wnd
    if sk.state is State.SYN_SENT or sk.state is State.SYN_RCVD:
        rcv.rcv_wup = rcv.rcv_nxt       # tcp_create_openreq_child / tcp_rcv_synsent
        return rcv.rcv_wnd
    cur = max(0, rcv.rcv_wup + rcv.rcv_wnd - rcv.rcv_nxt)
    new = tcp_select_window_now(sk, now)
    wscale = min(p.rcv_wscale, TCP_MAX_WSCALE)
    if new < cur:
        unit = 1 << wscale
        new = -(-cur // unit) * unit
    new = min(new, 65535 << wscale)
    rcv.rcv_wnd = new
    rcv.rcv_wup = rcv.rcv_nxt
    return new


def wire(sk: Sock, now: Micros, flags: int, seq: int, length: int, why: Reason) -> Segment:
    """Hand one segment to the link (the end of __tcp_transmit_skb)."""
    rcv = sk.rcv
    if rcv.ts_on or flags & (SYN | ACK) == SYN and sk.profile.timestamps:
        # the timestamp option: TSval is tcp_time_stamp_ms, TSecr our ts_recent
        tsval, tsecr = now // 1000, rcv.ts_recent
    else:
        tsval = tsecr = -1
    seg = Segment(src=sk.side, seq=seq, ack=rcv.rcv_nxt if flags & ACK else 0,
                  length=length, flags=flags, window=tcp_select_window(sk, now),
                  sent_at=now, why=why, tsval=tsval, tsecr=tsecr)
    sk.out.append(seg)
    return seg


def tcp_send_reset(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_v4_send_reset (tcp_ipv4.c): a segment for a socket that no longer exists
    (closed, or never listening) is answered with a reset, never a reset itself. If it
    carried an ACK the reset takes that number as its sequence and carries no ACK;
    otherwise it is RST|ACK from sequence 0, acknowledging everything the segment
    occupied. Window 0."""
    if seg.flags & RST:
        return
    if seg.flags & ACK:
        seq, flags, ack = seg.ack, RST, 0
    else:
        seq, flags, ack = 0, RST | ACK, seg.end_seq
    sk.event(now, Kind.ACK_NOW, Reason.RESET_NO_SOCKET, seg.summary())
    out = Segment(src=sk.side, seq=seq, ack=ack, length=0, flags=flags, window=0,
                  sent_at=now, why=Reason.RESET_NO_SOCKET)
    sk.out.append(out)


def tcp_transmit_control(sk: Sock, now: Micros, flags: int, seq: int, why: Reason) -> None:
    """__tcp_transmit_skb for a segment without data (SYN, SYN-ACK, ACK, RST, window
    probe). Every segment carrying ACK is also an ACK (piggyback)."""
    if sk.established or sk.state is not State.SYN_SENT and sk.state is not State.LISTEN:
        flags |= ACK
    wire(sk, now, flags, seq, 0, why)
    if flags & ACK:
        tcp_event_ack_sent(sk, now, data_segments=0)


def tcp_transmit_data(sk: Sock, now: Micros, skbs: list[Skb], why: Reason) -> None:
    """__tcp_transmit_skb for one TSO skb made of consecutive MSS pieces. Since
    051ba67447de a multi-segment skb carries PSH; software GSO (a TUN or real NIC path)
    keeps it on the last segment only, loopback passes the skb on whole."""
    for skb in skbs:
        tcp_rate_skb_sent(sk, now, skb)
    n, last = len(skbs), skbs[-1]
    tail_flags = (PSH if n > 1 or last.psh else 0) | (FIN if last.fin else 0) | ACK
    nbytes = sum(k.length for k in skbs)
    if sk.snd.gso_wire or n == 1:
        wire(sk, now, tail_flags, skbs[0].seq, nbytes, why)
    else:
        for skb in skbs[:-1]:
            wire(sk, now, ACK, skb.seq, skb.length, why)
        wire(sk, now, tail_flags, last.seq, last.length, why)
    tcp_event_ack_sent(sk, now, data_segments=n)
    if nbytes:                           # a bare FIN is not data to these hooks
        tcp_event_data_sent(sk, now)
    tcp_update_skb_after_send(sk, now, nbytes, n if nbytes else 0)


def tcp_send_ack(sk: Sock, now: Micros, reason: Reason, detail: str = "") -> None:
    """tcp_send_ack: a pure ACK; tcp_event_ack_sent clears the scheduled state."""
    sk.event(now, Kind.ACK_NOW, reason, detail)
    tcp_transmit_control(sk, now, ACK, sk.snd.snd_nxt, reason)


def tcp_event_ack_sent(sk: Sock, now: Micros, data_segments: int) -> None:
    """tcp_event_ack_sent: any segment carrying ACK spends the quick-ACK budget
    (tcp_dec_quickack_mode) and clears the delayed-ACK timer: piggybacking."""
    if sk.profile.ack_style is AckStyle.CLASSIC:
        sk.rcv.unacked_segs = 0
    ack = sk.ack
    if ack.quick:
        tcp_dec_quickack_mode(sk, now, data_segments)
    ack.pending = 0
    sk.cancel(now, Timer.DELACK, Reason.PIGGYBACK)


def tcp_dec_quickack_mode(sk: Sock, now: Micros, data_segments: int) -> None:
    """tcp_dec_quickack_mode: spend quick ACKs. Since 059217c18be6 (2023) one, and only
    for an ACK that was owed; before, one per data segment sent (at least one)."""
    ack = sk.ack
    if sk.profile.quickack_dec_only_if_scheduled:
        pkts = 1 if ack.pending & AckPending.SCHED else 0
    else:
        pkts = max(1, data_segments)
    if pkts >= ack.quick:
        ack.quick = 0
        ack.ato_j = sk.profile.delack_min_j
        sk.event(now, Kind.MODE, Reason.QUICK_SPENT, "quick = 0, ato = ATO_MIN", quick=0)
    else:
        ack.quick -= pkts


def tcp_event_data_sent(sk: Sock, now: Micros) -> None:
    """tcp_event_data_sent: data sent within ato of the last data received raises the
    ping-pong count (threshold 1 since 4d8f24eeedc5; 3, and only for a reply to newer data,
    in the 4a41f453bedf era). Also CA_EVENT_TX_START after idle (BBR, CUBIC)."""
    ack, p = sk.ack, sk.profile
    if not sk.snd.rtx:
        tcp_ca_event_tx_start(sk, now)
    now_j = sk.jiffies(now)
    if p.ack_style is AckStyle.LINUX and ack.ato_j and (now_j - ack.lrcvtime_j) < ack.ato_j:
        fresh = not p.pingpong_needs_new_data or sk.snd.lsndtime_j < ack.lrcvtime_j
        if fresh and ack.pingpong < PINGPONG_MAX:
            was = sk.in_pingpong
            ack.pingpong += 1
            if sk.in_pingpong and not was:
                sk.event(now, Kind.MODE, Reason.PINGPONG_ENTER,
                         f"{(now_j - ack.lrcvtime_j) * p.tick_us // 1000} ms"
                         f" after data, ato {ack.ato_j * p.tick_us / 1000:g} ms", pingpong=1)
            elif not was:
                sk.event(now, Kind.MODE, Reason.PINGPONG_COUNT,
                         f"count {ack.pingpong} of {p.pingpong_thresh}", pingpong=0)
    sk.snd.lsndtime_j = now_j
