"""The receive path: taking in data and deciding when to ACK it (tcp_input.c's
tcp_data_queue, tcp_event_data_recv, __tcp_ack_snd_check, tcp_send_delayed_ack;
tcp_timer.c's tcp_delack_timer_handler; tcp.c's __tcp_cleanup_rbuf and TCP_QUICKACK).

Owns: the delayed-ACK rule, the quick-ACK budget, ato adaptation, ping-pong *exit*, the
ACK on read, TCP_QUICKACK, and the RFC 1122 receiver of non-Linux profiles. Ping-pong
*entry* and piggybacking happen when we transmit: see ``output``. Must not decide when
data is sent (``send``); standard library and lower model modules only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from .config import IPV4_HEADER, TCP_HEADER_WITH_TIMESTAMPS, TCP_MIN_MSS, AckStyle
from .events import FIN, PSH, SYN, Kind, Micros, Reason, Segment, Timer
from .output import (
    skb_truesize,
    tcp_select_window_now,
    tcp_send_ack,
    tcp_space,
    tcp_space_from_win,
    tcp_win_from_space,
)
from .sock import Sock
from .state import TCP_RMEM_TO_WIN_SCALE, AckPending, ConnEvent, SocketError, State

LOOPBACK_COALESCE_MAX: Final = 65536
"""SIMPLIFICATION of skb_try_coalesce's MAX_SKB_FRAGS limit: a loopback skb joins the
queue's tail while the tail holds less than 64 KB (1 kB writes share page fragments)."""


# ---------------------------------------------------------------- data arrives
def tcp_data_queue(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_data_queue, in the kernel's order: in sequence → queue (dropped and re-ACKed
    at once if our window is closed); all old (a retransmit) → immediate duplicate ACK
    (tcp_enter_quickack_mode); beyond the window → the same; partly old → the new part
    is queued, and a FIN on it counts (a retransmitted "old data + FIN" must not lose the
    FIN); otherwise out of order → tcp_data_queue_ofo.
    SIMPLIFICATION: the link never reorders, so out-of-order data comes only from
    packetdrill scripts; no SACK blocks are sent."""
    rcv, p = sk.rcv, sk.profile
    linux = p.ack_style is AckStyle.LINUX
    end_seq = seg.seq + seg.length + (1 if seg.flags & FIN else 0)
    if end_seq == seg.seq:
        return
    window = rcv.rcv_wup + rcv.rcv_wnd - rcv.rcv_nxt
    if seg.seq == rcv.rcv_nxt:
        if seg.length and linux and window <= 0:
            _out_of_window(sk, now)         # e.g. a zero-window probe
            return
        _queue_in_order(sk, now, seg)
        return
    if end_seq <= rcv.rcv_nxt:
        if linux:
            tcp_enter_quickack_mode(sk, now, p.max_quickacks)
        sk.ack.pending |= AckPending.SCHED | AckPending.NOW
        tcp_send_ack(sk, now, Reason.DUPLICATE)
        return
    if linux and seg.seq >= rcv.rcv_nxt + max(window, 0):
        _out_of_window(sk, now)
        return
    if seg.seq < rcv.rcv_nxt:               # partial: seq < rcv_nxt < end_seq
        if linux and window <= 0:
            _out_of_window(sk, now)
            return
        cut = rcv.rcv_nxt - seg.seq
        _queue_in_order(sk, now, replace(seg, seq=rcv.rcv_nxt, length=seg.length - cut))
        return
    tcp_data_queue_ofo(sk, now, seg)


def _out_of_window(sk: Sock, now: Micros) -> None:
    """tcp_data_queue's out_of_window: drop, enter quick-ACK mode, schedule an ACK
    (tcp_ack_snd_check then sends it at once)."""
    if sk.profile.ack_style is AckStyle.LINUX:
        tcp_enter_quickack_mode(sk, now, sk.profile.max_quickacks)
    sk.ack.pending |= AckPending.SCHED | AckPending.NOW


def _queue_in_order(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_data_queue's queue_and_out: take the data, then whatever the out-of-order
    queue now continues (tcp_ofo_queue; filling a gap ACKs at once, RFC 5681 §4.2)."""
    rcv = sk.rcv
    if _take(sk, now, seg):
        return
    if rcv.ofo:
        tcp_ofo_queue(sk, now)
        if not rcv.ofo:
            sk.ack.pending |= AckPending.NOW
    if sk.profile.ack_style is AckStyle.LINUX:
        tcp_fast_path_check(sk)


def _take(sk: Sock, now: Micros, seg: Segment) -> bool:
    """Queue in-order data for the application; True when it ended with a FIN."""
    rcv, p = sk.rcv, sk.profile
    if seg.length:
        rcv.rcv_nxt += seg.length
        rcv.unread += seg.length
        truesize = skb_truesize(sk, seg.length)
        tail = rcv.rmem[-1] if sk.snd.rx_loopback and rcv.rmem else None
        if tail is not None and tail[0] + seg.length <= LOOPBACK_COALESCE_MAX:
            # tcp_try_coalesce: a head-less (loopback) skb's fragments join the queue's
            # tail skb and only their payload is charged (skb_try_coalesce's delta)
            tail[0] += seg.length
            tail[1] += seg.length
            rcv.rmem_alloc += seg.length
        else:
            rcv.rmem.append([seg.length, truesize])  # tcp_queue_rcv: charged to the socket
            rcv.rmem_alloc += truesize
        if p.ack_style is AckStyle.LINUX:
            tcp_event_data_recv(sk, now, seg)
        else:
            sk.ack.pending |= AckPending.SCHED
            rcv.unacked_segs += max(1, -(-seg.length // sk.mss))
    if seg.flags & FIN:
        # loopback: the queued skb is the sender's clone until our ACK lets the sender
        # free its original, and skb_try_coalesce refuses a cloned skb
        shared = sk.snd.rx_loopback and rcv.rcv_wup < rcv.rcv_nxt
        if not seg.length and (not rcv.rmem or shared):
            # tcp_queue_rcv: a FIN alone is a skb of its own, charged to the socket; it
            # joins a data skb still queued (tcp_try_coalesce) and is freed with it, else
            # it stays until a read with room left (or at EOF) reaches it (tcp_recvmsg's
            # found_fin_ok), keeping sk_rmem_alloc above 0 for tcp_cleanup_rbuf
            truesize = skb_truesize(sk, 0)
            rcv.rmem.append([0, truesize])
            rcv.rmem_alloc += truesize
        tcp_fin(sk, now)
        rcv.ofo.clear()
        return True
    return False


def tcp_ofo_queue(sk: Sock, now: Micros) -> None:
    """tcp_ofo_queue: move out-of-order segments that now continue the stream into the
    receive queue (their rmem charge moves with them)."""
    rcv = sk.rcv
    while rcv.ofo:
        seq = min(rcv.ofo)
        if seq > rcv.rcv_nxt:
            return
        held = rcv.ofo.pop(seq)
        rcv.rmem_alloc -= skb_truesize(sk, held.length)
        end = held.seq + held.length + (1 if held.flags & FIN else 0)
        if end <= rcv.rcv_nxt:
            continue
        cut = rcv.rcv_nxt - held.seq
        if _take(sk, now, replace(held, seq=rcv.rcv_nxt, length=held.length - cut)):
            return


def tcp_data_queue_ofo(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_data_queue_ofo: keep a segment that leaves a gap and schedule an ACK; then
    __tcp_ack_snd_check (ofo_possible) sends the first TCP_FASTRETRANS_THRESH (3)
    duplicate ACKs for one rcv_nxt at once. (6.x compresses later ones into one after
    min(1 ms, RTT/20): SIMPLIFICATION, they go at once too.) A new connection's
    measure of rcv_mss and its window growth see the segment, as in the kernel."""
    rcv = sk.rcv
    if seg.seq not in rcv.ofo:
        rcv.ofo[seg.seq] = seg
        rcv.rmem_alloc += skb_truesize(sk, seg.length)
    sk.ack.pending |= AckPending.SCHED | AckPending.NOW
    if sk.profile.ack_style is AckStyle.LINUX and seg.length:
        tcp_measure_rcv_mss(sk, seg)
    sk.event(now, Kind.ACK_NOW, Reason.OUT_OF_ORDER,
             f"{seg.seq}:{seg.seq + seg.length} arrived, expected {rcv.rcv_nxt}")


def tcp_fast_path_check(sk: Sock) -> None:
    """tcp_fast_path_check (include/net/tcp.h): header prediction back on when the
    receive window is open and the buffer has room (no out-of-order queue, no urgent
    data: never here). Called after in-order data is queued and when the peer's window
    changes; with window scaling it is off until then (tcp_rcv_synsent_state_process)."""
    rcv = sk.rcv
    rcv.pred_flags = rcv.rcv_wnd > 0 and rcv.rmem_alloc < rcv.rcvbuf


def tcp_fin(sk: Sock, now: Micros) -> None:
    """tcp_fin: schedule an ACK; ESTABLISHED → CLOSE_WAIT enters ping-pong
    (inet_csk_enter_pingpong_mode); in FIN_WAIT the ACK goes at once."""
    rcv = sk.rcv
    rcv.rcv_nxt += 1
    rcv.peer_fin = True
    sk.ack.pending |= AckPending.SCHED
    sk.event(now, Kind.MODE, Reason.FIN_ACK, "peer closed its side")
    if sk.state is State.ESTABLISHED:
        sk.transition(now, ConnEvent.RECV_FIN)
        sk.ack.pingpong = max(sk.ack.pingpong, sk.profile.pingpong_thresh)
    elif sk.state is State.FIN_WAIT1:
        tcp_send_ack(sk, now, Reason.FIN_ACK)
        sk.transition(now, ConnEvent.RECV_FIN if sk.snd.snd_una < sk.snd.write_seq
                      else ConnEvent.RECV_FIN_OURS_ACKED)
    elif sk.state is State.FIN_WAIT2:
        tcp_send_ack(sk, now, Reason.FIN_ACK)
        sk.transition(now, ConnEvent.RECV_FIN)
        sk.timers.clear()


def tcp_event_data_recv(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_event_data_recv: schedule an ACK, measure rcv_mss, adapt ato (jiffies): the
    first data grants quick ACKs; a gap m ≤ ATO_MIN/2 gives ato/2 + ATO_MIN/2, m < ato
    gives ato/2 + m (capped at the RTO), m > RTO refills the quick-ACK budget."""
    ack, p = sk.ack, sk.profile
    ack.pending |= AckPending.SCHED
    tcp_measure_rcv_mss(sk, seg)
    now_j = sk.jiffies(now)
    ato_min = p.delack_min_j
    if not ack.ato_j:
        tcp_incr_quickack(sk, now, p.max_quickacks, Reason.QUICK_START)
        ack.ato_j = ato_min
    else:
        m = now_j - ack.lrcvtime_j
        old = ack.ato_j
        if m <= ato_min // 2:
            ack.ato_j = (ack.ato_j >> 1) + ato_min // 2
        elif m < ack.ato_j:
            ack.ato_j = min((ack.ato_j >> 1) + m, sk.rto_j)
        elif m > sk.rto_j:
            tcp_incr_quickack(sk, now, p.max_quickacks, Reason.QUICK_REFILL)
        if ack.ato_j != old:
            sk.event(now, Kind.MODE, Reason.ATO_UPDATE,
                     f"gap {m} jiffies: ato {old} → {ack.ato_j} jiffies", ato=ack.ato_j)
    ack.lrcvtime_j = now_j
    tcp_rcv_rtt_measure(sk, now)
    if seg.length >= p.grow_window_min_len:
        tcp_grow_window(sk, seg.length)


# ---------------------------------------------------------------- receive-buffer autotuning
def tcp_init_rcv_space(sk: Sock, now: Micros) -> None:
    """tcp_init_buffer_space, the receive side: the first estimate of what the reader
    takes per RTT is min(rcv_ssthresh, rcv_wnd, 10 × advmss) (measured: tcpi_rcv_space
    14600 with a 1460-byte advmss), counted from now."""
    rcv = sk.rcv
    rcv.rcvq_space = min(min(rcv.rcv_ssthresh, rcv.rcv_wnd), 10 * sk.advmss)
    rcv.rcvq_seq = rcv.copied
    rcv.rcvq_time = now


def tcp_rcv_rtt_update(sk: Sock, sample_us: int, win_dep: bool) -> None:
    """tcp_rcv_rtt_update: the receiver's RTT estimate (×8): a lower sample replaces it;
    a higher one from a whole window's timing is ignored (it overestimates), and a higher
    timestamp sample is averaged in (1/8) only while nothing waits unread (6.16)."""
    rcv = sk.rcv
    m = sample_us << 3
    if not rcv.rtt8 or m < rcv.rtt8:
        rcv.rtt8 = m
    elif not win_dep and not rcv.unread:
        rcv.rtt8 = rcv.rtt8 - (rcv.rtt8 >> 3) + sample_us


def tcp_store_ts_recent(sk: Sock, seg: Segment) -> None:
    """tcp_replace_ts_recent (RFC 7323 §4.3): with timestamps on, remember the peer's
    TSval of a segment that starts at or before the last window we advertised from
    (rcv_wup): with an ACK owed, that keeps the first unACKed segment's, so our echo
    covers the delay. Our segments carry it back as TSecr."""
    rcv = sk.rcv
    if rcv.ts_on and seg.tsval >= 0 and seg.seq <= rcv.rcv_wup:
        rcv.ts_recent = seg.tsval


def tcp_rcv_rtt_measure_ts(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_rcv_rtt_measure_ts (before the segment is queued): a data segment of at least
    rcv_mss echoing a TSecr not used before gives a receive RTT sample, now − TSecr in
    whole ms (tcp_rtt_tsopt_us; 0 ms is no sample since 6.16). This is how a Linux
    receiver knows its RTT after the first round trip and starts autotuning; without
    timestamps it must time a whole window (tcp_rcv_rtt_measure)."""
    rcv = sk.rcv
    if not rcv.ts_on or seg.tsecr < 0 or seg.tsecr == rcv.rtt_last_tsecr:
        return
    rcv.rtt_last_tsecr = seg.tsecr
    if seg.length >= rcv.rcv_mss:
        delta = now // 1000 - seg.tsecr
        if delta > 0:
            tcp_rcv_rtt_update(sk, delta * 1000, False)


def tcp_rcv_rtt_measure(sk: Sock, now: Micros) -> None:
    """tcp_rcv_rtt_measure (tcp_event_data_recv): without timestamps the receiver times
    how long a whole window takes to arrive (from the first data: rcv_nxt + rcv_wnd).
    Measured on 6.18: 40.9 ms when windows of 64 KB came in 20 ms rounds.
    With timestamps, tcp_rcv_rtt_measure_ts samples too (and sooner)."""
    rcv = sk.rcv
    if rcv.rtt_time:
        if rcv.rcv_nxt < rcv.rtt_seq:
            return
        tcp_rcv_rtt_update(sk, max(now - rcv.rtt_time, 1), True)
    rcv.rtt_seq = rcv.rcv_nxt + rcv.rcv_wnd
    rcv.rtt_time = now


def tcp_rcvbuf_grow(sk: Sock, now: Micros, newval: int) -> None:
    """tcp_rcvbuf_grow (dynamic right-sizing): the reader took ``newval`` bytes in the
    last RTT; the buffer should hold twice that, plus room for a sender still doubling
    its rate (2 × rcvwin × growth ratio), at most tcp_rmem[2]; window_clamp follows."""
    rcv, p = sk.rcv, sk.profile
    old = rcv.rcvq_space or 1
    rcv.rcvq_space = newval
    rcvwin = newval << 1
    rcvwin += (rcvwin * (newval - old) // old) << 1
    if rcv.ofo:
        rcvwin += max(s.seq + s.length for s in rcv.ofo.values()) - rcv.rcv_nxt
    rcvbuf = min(tcp_space_from_win(sk, rcvwin), p.rcv_buf_max)
    if rcvbuf > rcv.rcvbuf:
        rcv.rcvbuf = rcvbuf
        rcv.window_clamp = tcp_win_from_space(sk, rcvbuf)
        sk.event(now, Kind.MODE, Reason.RCVBUF_GROW,
                 f"{newval} B read in an RTT: buffer {rcvbuf} B, window up to "
                 f"{rcv.window_clamp} B", rcvbuf=rcvbuf)


def tcp_rcv_space_adjust(sk: Sock) -> None:
    """tcp_rcv_space_adjust, as a read begins: once per receiver RTT (timed from the last
    measurement, at the last segment's arrival: tcp_mstamp is not refreshed), the bytes
    the reader took since then, less what still waits unread, become the new estimate;
    if it grew, so does the buffer (tcp_rcvbuf_grow). Measured on 6.18 (20 ms rounds of
    40 kB, read after each): no growth at the reads 80 and 100 ms into the connection
    although a 40.9 ms RTT was known, the buffer grown at the 120 ms read (tcpi_rcv_space
    14600 → 41000), the window growing from the next segment on; the model, checking
    before the read's copy with the unread bytes subtracted, grows one read later."""
    rcv = sk.rcv
    if not rcv.rtt8 or sk.profile.ack_style is not AckStyle.LINUX:
        return
    now = rcv.mstamp
    if now - rcv.rcvq_time < rcv.rtt8 >> 3:
        return
    copied = rcv.copied - rcv.rcvq_seq - rcv.unread
    if copied > rcv.rcvq_space:
        tcp_rcvbuf_grow(sk, now, copied)
    rcv.rcvq_seq = rcv.copied
    rcv.rcvq_time = now


def tcp_grow_window(sk: Sock, length: int) -> None:
    """tcp_grow_window (tcp_input.c; truesize check by dfa2f0483360's scaling ratio):
    while the buffer has room beyond rcv_ssthresh, a segment whose truesize is worth no
    more window than its payload raises rcv_ssthresh by two segments (at least twice its
    length), and sets one quick ACK (icsk_ack.quick |= 1) so the bigger window is
    announced at once. A costlier segment grows it only while rcv_ssthresh is small
    next to tcp_rmem[2] (__tcp_grow_window). Measured: 64512 → 67584 → 70656 → 73728 →
    76800 over the first four 1448-byte segments, then no more (room used up)."""
    rcv, p = sk.rcv, sk.profile
    room = min(rcv.window_clamp, tcp_space(sk)) - rcv.rcv_ssthresh
    if room <= 0:
        return
    # truesize_adjust: a head-less (loopback) skb counts only its fragments, its payload
    truesize = length if sk.snd.rx_loopback else skb_truesize(sk, length)
    if tcp_win_from_space(sk, truesize) <= length:
        incr = 2 * sk.advmss
    else:                                   # __tcp_grow_window
        incr = 0
        half_truesize = tcp_win_from_space(sk, truesize) >> 1
        window = tcp_win_from_space(sk, p.rcv_buf_max) >> 1
        while rcv.rcv_ssthresh <= window:
            if half_truesize <= length:
                incr = 2 * rcv.rcv_mss
                break
            half_truesize >>= 1
            window >>= 1
    if incr:
        rcv.rcv_ssthresh += min(room, max(incr, 2 * length))
        sk.ack.quick |= 1


def tcp_measure_rcv_mss(sk: Sock, seg: Segment) -> None:
    """tcp_measure_rcv_mss: learn the peer's MSS (a GSO skb counts as its gso_size) and,
    when it changes, the scaling ratio; small segments set PUSHED/PUSHED2 (and, since
    4720852ed9af, an exact-MSS segment with PSH sets PUSHED)."""
    rcv, ack, p = sk.rcv, sk.ack, sk.profile
    lss = rcv.last_seg_size
    rcv.last_seg_size = 0
    length = seg.length
    # len = gso_size ?: skb->len: a loopback GSO skb is measured by its MSS, so only the
    # first full one re-measures the scaling ratio (from its whole length and truesize);
    # later multi-segment skbs leave it alone (examples/fuzz/seed-18.toml: the kernel's window
    # settles at 99 KB units, re-measuring each one kept the model's at 98)
    gso = min(length, sk.mss)
    if gso >= rcv.rcv_mss:
        if gso != rcv.rcv_mss and p.ack_style is AckStyle.LINUX:
            tcp_update_scaling_ratio(sk, length)
        rcv.rcv_mss = min(length, sk.mss)
        # 4720852ed9af: an exact-MSS segment with PSH; a GSO super-segment is skipped
        if p.pushed_on_full_psh and seg.flags & PSH and length <= sk.mss:
            ack.pending |= AckPending.PUSHED
        return
    with_hdr = length + TCP_HEADER_WITH_TIMESTAMPS
    remnant = seg.flags & (FIN | SYN | PSH)
    if with_hdr >= p.initial_rcv_mss + IPV4_HEADER or (
            with_hdr >= TCP_MIN_MSS + IPV4_HEADER and not remnant):
        rcv.last_seg_size = length
        if length == lss:
            rcv.rcv_mss = length
            return
    if ack.pending & AckPending.PUSHED:
        ack.pending |= AckPending.PUSHED2
    ack.pending |= AckPending.PUSHED


def tcp_update_scaling_ratio(sk: Sock, length: int) -> None:
    """tcp_measure_rcv_mss when rcv_mss changes (dfa2f0483360, 2023): scaling_ratio =
    payload / truesize of this segment, and window_clamp follows the buffer's window at
    the new ratio (tcp_set_window_clamp: a lower clamp lowers rcv_ssthresh, a higher one
    lets it rise to the last advertised window). Needed to reproduce this kernel: the
    window grows past the initial 64 KB cap to 76800 B with 1448-byte segments."""
    rcv, p = sk.rcv, sk.profile
    ratio = (length << TCP_RMEM_TO_WIN_SCALE) // skb_truesize(sk, length)
    rcv.scaling_ratio = min(max(ratio, 1), (1 << TCP_RMEM_TO_WIN_SCALE) - 1)   # a u8
    clamp = max(tcp_win_from_space(sk, rcv.rcvbuf), p.min_window_clamp)
    if clamp == rcv.window_clamp:
        return
    if clamp < rcv.window_clamp:
        rcv.rcv_ssthresh = min(rcv.rcv_ssthresh, clamp)
    else:
        rcv.rcv_ssthresh = max(min(rcv.rcv_wnd, clamp), rcv.rcv_ssthresh)
    rcv.window_clamp = clamp


# ---------------------------------------------------------------- quick-ACK budget
def tcp_incr_quickack(sk: Sock, now: Micros, max_quickacks: int, reason: Reason) -> None:
    """tcp_incr_quickack: budget = min(max, rcv_wnd / (2·rcv_mss)), never lowered."""
    quickacks = sk.rcv.rcv_wnd // (2 * sk.rcv.rcv_mss) or 2
    quickacks = min(quickacks, max_quickacks)
    if quickacks > sk.ack.quick:
        sk.ack.quick = quickacks
        sk.event(now, Kind.MODE, reason, f"quick = {quickacks}", quick=quickacks)


def tcp_enter_quickack_mode(sk: Sock, now: Micros, max_quickacks: int) -> None:
    """tcp_enter_quickack_mode: refill, leave ping-pong, ato = ATO_MIN."""
    tcp_incr_quickack(sk, now, max_quickacks, Reason.QUICK_REFILL)
    sk.ack.pingpong = 0
    sk.ack.ato_j = sk.profile.delack_min_j


# ---------------------------------------------------------------- ACK now, or later
def tcp_ack_snd_check(sk: Sock, now: Micros) -> None:
    """THE DELAYED-ACK DECISION. __tcp_ack_snd_check: ACK at once when more than one
    full frame (rcv_mss) is unACKed and the window would not shrink, in quick-ACK mode,
    or when an ACK is due now (duplicates); otherwise tcp_send_delayed_ack."""
    rcv = sk.rcv
    if rcv.rcv_nxt - rcv.rcv_wup > rcv.rcv_mss and tcp_window_would_grow(sk, now):
        tcp_send_ack(sk, now, Reason.FULL_FRAME,
                     f"{rcv.rcv_nxt - rcv.rcv_wup} B unACKed > rcv_mss {rcv.rcv_mss}")
    elif sk.in_quickack_mode:
        tcp_send_ack(sk, now, Reason.QUICKACK_MODE, "route quickack 1"
                     if sk.profile.route_quickack else f"{sk.ack.quick} quick ACKs left")
    elif sk.ack.pending & AckPending.NOW:
        tcp_send_ack(sk, now, Reason.OUT_OF_ORDER if sk.rcv.ofo else Reason.DUPLICATE)
    else:
        tcp_send_delayed_ack(sk, now)


def tcp_window_would_grow(sk: Sock, now: Micros) -> bool:
    """__tcp_select_window() >= tp->rcv_wnd (__tcp_ack_snd_check): the "more than one
    full frame" ACK goes at once only if the window we could offer now is at least the
    one last advertised, so it stops as soon as unread data shrinks the free space
    (linux-tcp-rules.md §9: a non-reading receiver then ACKs by the delayed-ACK timer)."""
    if sk.profile.ack_style is not AckStyle.LINUX:
        p = sk.profile
        return min(p.rcv_wnd, p.rcv_buf - sk.rcv.unread) >= sk.rcv.rcv_wnd
    return tcp_select_window_now(sk, now) >= sk.rcv.rcv_wnd


_DELACK_DETAILS: Final[dict[tuple[int, bool, int], str]] = {}
_DELACK_DETAILS_MAX: Final = 1024


def _delack_detail(ato_ms: int, pingpong: bool, fires_in_us: int) -> str:
    """The words of a delayed-ACK decision. Cached: a big run repeats a few dozen of them
    tens of thousands of times, and formatting them was a few % of its time. A plain dict,
    not ``functools.lru_cache``: compiled, a call through that wrapper is a generic one."""
    key = (ato_ms, pingpong, fires_in_us)
    words = _DELACK_DETAILS.get(key)
    if words is None:
        if len(_DELACK_DETAILS) >= _DELACK_DETAILS_MAX:
            _DELACK_DETAILS.clear()
        mode = "ping-pong" if pingpong else "no quick ACKs left"
        # the number on its own: compiled, an f-string with a format spec formats every
        # one of its fields through str.format; without one it is joined natively
        fires_ms = f"{fires_in_us / 1000:.1f}"
        words = f"ato {ato_ms} ms, {mode}; fires in {fires_ms} ms"
        _DELACK_DETAILS[key] = words
    return words


def tcp_send_delayed_ack(sk: Sock, now: Micros) -> None:
    """tcp_send_delayed_ack: deadline = now + ato jiffies (ato capped by HZ/2, by
    TCP_DELACK_MAX in ping-pong or after a pushed segment, by the SRTT), keeping an
    earlier deadline; if that one is within ato/4, ACK now instead."""
    p, ack = sk.profile, sk.ack
    ato = ack.ato_j
    if ato > p.delack_min_j:
        max_ato = p.ato_max_j
        if sk.in_pingpong or ack.pending & AckPending.PUSHED:
            max_ato = p.delack_max_j
        if sk.cc.srtt_us:
            rtt = max(p.us_to_jiffies(sk.cc.srtt_us), p.delack_min_j)
            max_ato = min(max_ato, rtt)
        ato = min(ato, max_ato)
    ato = min(ato, p.tcp_delack_max_j)
    now_j = sk.jiffies(now)
    timeout_j = now_j + ato
    if ack.pending & AckPending.TIMER:
        if ack.timeout_j <= now_j + (ato >> 2):
            tcp_send_ack(sk, now, Reason.DELACK_DUE)
            return
        timeout_j = min(timeout_j, ack.timeout_j)
    ack.pending |= AckPending.SCHED | AckPending.TIMER
    ack.timeout_j = timeout_j
    at = sk.jiffy_timer_at(now, timeout_j)
    armed = sk.timers.get(Timer.DELACK)
    if armed is not None and armed == at:   # typed: compiled, an int compare, not a generic one
        return  # already waiting for this deadline: nothing new to say
    detail = _delack_detail(ato * p.tick_us // 1000, sk.in_pingpong, at - now)
    sk.event(now, Kind.ACK_DELAYED, Reason.DELACK_WAIT, detail, ato=ato)
    sk.arm(now, Timer.DELACK, at, Reason.DELACK_WAIT, detail)


def tcp_delack_timer_handler(sk: Sock, now: Micros) -> None:
    """tcp_delack_timer_handler: outside ping-pong the missed ACK doubles ato, capped by
    the RTO only (`min(ato << 1, icsk_rto)` in every tcp_timer.c read, up to the 2023
    min_t() rewrite and since); in ping-pong, leave it (ato = ATO_MIN). Then ACK.

    The stored ato may so grow past TCP_DELACK_MAX: only tcp_send_delayed_ack caps the
    timeout it arms (HZ/2, TCP_DELACK_MAX, the SRTT, tcp_delack_max), never ato itself,
    and the larger ato shows later when tcp_event_data_recv halves it (ato/2 + m)."""
    ack, p = sk.ack, sk.profile
    if p.ack_style is AckStyle.CLASSIC:
        if ack.pending & AckPending.SCHED:
            tcp_send_ack(sk, now, Reason.DELACK_FIRED)
        return
    if not ack.pending & AckPending.TIMER:
        return
    ack.pending &= ~AckPending.TIMER
    if not ack.pending & AckPending.SCHED:
        return
    if not sk.in_pingpong:
        old = ack.ato_j
        ack.ato_j = min(ack.ato_j << 1, sk.rto_j)
        if ack.ato_j != old:
            sk.event(now, Kind.MODE, Reason.ATO_INFLATE,
                     f"ato {old} → {ack.ato_j} jiffies", ato=ack.ato_j)
    else:
        ack.pingpong = 0
        ack.ato_j = p.delack_min_j
        sk.event(now, Kind.MODE, Reason.PINGPONG_EXIT, "ato = ATO_MIN", pingpong=0)
    tcp_send_ack(sk, now, Reason.DELACK_FIRED)


def tcp_synack_delayed_ack(sk: Sock, now: Micros) -> None:
    """tcp_rcv_synsent_state_process with ping-pong set (TCP_QUICKACK=0 before connect):
    schedule the ACK, tcp_enter_quickack_mode, and delay the ACK of the SYN-ACK by
    TCP_DELACK_MAX. tcp_enter_quickack_mode always leaves ping-pong (tcp_input.c; so in
    every kernel since 2.6, read on torvalds/linux master), so when that timer fires
    it is outside ping-pong and doubles ato: the next delayed ACK takes about 80 ms, not 40
    (linux-tcp-rules.md §9, captured here: 83 ms over a 100 ms RTT)."""
    p, ack = sk.profile, sk.ack
    ack.pending |= AckPending.SCHED
    was = sk.in_pingpong
    tcp_enter_quickack_mode(sk, now, p.max_quickacks)
    if was:
        sk.event(now, Kind.MODE, Reason.PINGPONG_EXIT, "SYN-ACK: tcp_enter_quickack_mode",
                 pingpong=0)
    at = sk.jiffy_timer_at(now, sk.jiffies(now) + p.delack_max_j)
    ack.pending |= AckPending.TIMER
    ack.timeout_j = sk.jiffies(now) + p.delack_max_j
    sk.event(now, Kind.ACK_DELAYED, Reason.SYNACK_DELAYED)
    sk.arm(now, Timer.DELACK, at, Reason.SYNACK_DELAYED, "TCP_DELACK_MAX")


# ---------------------------------------------------------------- the application reads
def tcp_recvmsg(sk: Sock, now: Micros, max_bytes: int) -> int:
    """tcp_recvmsg: copy what is queued (up to ``max_bytes``), freeing each skb read to
    its end, and a FIN's own skb when the read still has room (found_fin_ok); then
    tcp_cleanup_rbuf."""
    rcv = sk.rcv
    if not rcv.unread and not rcv.peer_fin and sk.err:
        # tcp_recvmsg with nothing queued: a FIN (SOCK_DONE) reads as 0, else the pending
        # error (a reset: ECONNRESET) is returned once (sock_error), then RCV_SHUTDOWN → 0
        raise SocketError(sk.sock_error("ECONNRESET"), "read on a reset connection")
    if rcv.unread:
        tcp_rcv_space_adjust(sk)
    copied = min(rcv.unread, max_bytes)
    rcv.unread -= copied
    rcv.copied += copied
    left, rmem = copied, rcv.rmem
    while left and rmem:                     # a skb read to its end is freed
        skb = rmem[0]
        take = min(left, skb[0])
        skb[0] -= take
        left -= take
        if not skb[0]:
            rcv.rmem_alloc -= skb[1]
            rmem.popleft()
    if copied < max_bytes and rmem and not rmem[0][0]:
        rcv.rmem_alloc -= rmem.popleft()[1]     # found_fin_ok: the FIN's own skb
    tcp_cleanup_rbuf(sk, now, copied)
    return copied


def tcp_cleanup_rbuf(sk: Sock, now: Micros, copied: int, why: Reason = Reason.READ_ACK) -> None:
    """__tcp_cleanup_rbuf: the ACK a read (or TCP_QUICKACK=1) can trigger: more than one
    frame unACKed, or the queue emptied (!sk_rmem_alloc: a lone FIN's skb not yet read
    keeps it non-empty) after a pushed segment (outside ping-pong, or two of them); or a
    window update when the read at least doubles the window."""
    if sk.profile.ack_style is not AckStyle.LINUX or (
            not sk.established and sk.state not in (State.FIN_WAIT1, State.FIN_WAIT2)):
        return
    rcv, ack = sk.rcv, sk.ack
    if ack.pending & AckPending.SCHED:
        if rcv.rcv_nxt - rcv.rcv_wup > rcv.rcv_mss:
            tcp_send_ack(sk, now, Reason.FULL_FRAME)
            return
        pushed = bool(ack.pending & AckPending.PUSHED2) or (
            bool(ack.pending & AckPending.PUSHED) and not sk.in_pingpong)
        if copied > 0 and pushed and not rcv.rmem_alloc:
            tcp_send_ack(sk, now, why)
            return
    if copied > 0 and not rcv.peer_fin:
        window_now = max(0, rcv.rcv_wup + rcv.rcv_wnd - rcv.rcv_nxt)
        if 2 * window_now <= rcv.window_clamp:
            new_window = tcp_select_window_now(sk, now) \
                if sk.profile.ack_style is AckStyle.LINUX \
                else min(sk.profile.rcv_wnd, sk.profile.rcv_buf - rcv.unread)
            if new_window and new_window >= 2 * window_now:
                tcp_send_ack(sk, now, Reason.WINDOW_UPDATE)


def tcp_sock_set_quickack(sk: Sock, now: Micros, on: bool) -> None:
    """__tcp_sock_set_quickack: 0 enters ping-pong; 1 leaves it and may ACK now. The
    quick-ACK budget is not refilled and nothing is sticky (tcp(7))."""
    ack = sk.ack
    if not on:
        if not sk.in_pingpong:
            sk.event(now, Kind.MODE, Reason.QUICKACK_OFF, "ping-pong on", pingpong=1)
        ack.pingpong = max(ack.pingpong, sk.profile.pingpong_thresh)
        return
    if sk.in_pingpong:
        sk.event(now, Kind.MODE, Reason.QUICKACK_ON, "ping-pong off", pingpong=0)
    ack.pingpong = 0
    if sk.established and ack.pending & AckPending.SCHED:
        ack.pending |= AckPending.PUSHED
        tcp_cleanup_rbuf(sk, now, 1, Reason.QUICKACK_OPT)


# ---------------------------------------------------------------- RFC 1122 receivers
def classic_ack_check(sk: Sock, now: Micros, seg: Segment) -> None:
    """RFC 1122 §4.2.3.2 (Windows, FreeBSD, macOS profiles): ACK every Nth segment, PSH
    at once on XNU, else a fixed timer."""
    p, rcv = sk.profile, sk.rcv
    if sk.ack.pending & AckPending.NOW:
        return
    if rcv.unacked_segs >= p.classic_ack_every:
        tcp_send_ack(sk, now, Reason.EVERY_2ND, f"{rcv.unacked_segs} segments unACKed")
    elif p.classic_ack_psh_at_once and seg.flags & PSH:
        tcp_send_ack(sk, now, Reason.PSH_ACK)
    elif seg.flags & FIN and not seg.length:
        tcp_send_ack(sk, now, Reason.FIN_ACK)
    elif Timer.DELACK not in sk.timers:
        at = Micros(now + p.classic_delack_us)
        detail = f"timer {p.classic_delack_us // 1000} ms"
        sk.event(now, Kind.ACK_DELAYED, Reason.DELACK_WAIT, detail)
        sk.arm(now, Timer.DELACK, at, Reason.DELACK_WAIT, detail)
