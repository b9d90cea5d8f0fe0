"""Putting segments on the wire, and what every transmission does to the ACK state
(tcp_output.c: __tcp_transmit_skb, tcp_event_ack_sent, tcp_event_data_sent, tcp_send_ack).

Owns: building `Segment`s, the window we advertise, piggybacking (any segment carrying
ACK spends a quick ACK and cancels the delayed-ACK timer) and ping-pong *entry* (the
application replying within ato). Decides nothing about *whether* to send: that is
``send`` (data) and ``recv`` (ACKs). Standard library and lower model modules only.
"""

from __future__ import annotations

from .config import PINGPONG_MAX, AckStyle
from .events import ACK, FIN, PSH, Kind, Micros, Reason, Segment, Timer
from .rate import tcp_ca_event_tx_start, tcp_rate_skb_sent, tcp_update_skb_after_send
from .sock import Sock
from .state import AckPending, Skb, State


def tcp_select_window(sk: Sock) -> int:
    """tcp_select_window: free receive space, capped at the initial window; advertising it
    moves rcv_wup to rcv_nxt. SIMPLIFICATION: no window scaling growth."""
    rcv = sk.rcv
    free = max(0, sk.profile.rcv_buf - rcv.unread)
    rcv.rcv_wnd = min(sk.profile.rcv_wnd, free)
    rcv.rcv_wup = rcv.rcv_nxt
    return rcv.rcv_wnd


def wire(sk: Sock, now: Micros, flags: int, seq: int, length: int, why: Reason) -> Segment:
    """Hand one segment to the link (the end of __tcp_transmit_skb)."""
    seg = Segment(src=sk.side, seq=seq, ack=sk.rcv.rcv_nxt if flags & ACK else 0,
                  length=length, flags=flags, window=tcp_select_window(sk),
                  sent_at=now, why=why)
    sk.out.append(seg)
    return seg


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
