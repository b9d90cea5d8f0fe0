"""Connection state: opening, segment input, the ACK of our data, closing (tcp_input.c's
tcp_rcv_state_process, tcp_rcv_synsent_state_process, tcp_rcv_established, tcp_ack;
tcp.c's tcp_close).

Owns: the handshake, which concern an arriving segment goes to, what an ACK of our data
does (snd_una, RTT, cwnd, timers) and the closing sequence. State changes go through
``state.TRANSITIONS``. Standard library and lower model modules only.
"""

from __future__ import annotations

from typing import Final

from .config import AckStyle
from .events import ACK, FIN, PSH, RST, SYN, Kind, Micros, Reason, Segment, Timer
from .output import tcp_send_reset, tcp_transmit_control
from .rate import (
    tcp_chrono_start,
    tcp_chrono_stop,
    tcp_cong_control,
    tcp_cwnd_restart,
    tcp_init_congestion_control,
    tcp_rtt_estimator,
    tcp_rtt_tsopt_us,
)
from .recovery import tcp_fastretrans_alert, tcp_remove_reno_sacks, tcp_xmit_retransmit_queue
from .recv import (
    classic_ack_check,
    tcp_ack_snd_check,
    tcp_data_queue,
    tcp_fast_path_check,
    tcp_init_rcv_space,
    tcp_rcv_rtt_measure_ts,
    tcp_store_ts_recent,
    tcp_synack_delayed_ack,
)
from .send import tcp_check_space, tcp_init_buffer_space, tcp_push_pending_frames
from .sock import Sock
from .state import (
    TRANSITIONS,
    AckPending,
    CaState,
    Chrono,
    ConnEvent,
    ModelError,
    Nonagle,
    Shutdown,
    Skb,
    SocketError,
    State,
)
from .timers import rto_at, tcp_rearm_rto, tcp_schedule_loss_probe

_SYN_ACK: Final = SYN | ACK


# ---------------------------------------------------------------- opening
def tcp_connect(sk: Sock, now: Micros) -> None:
    """tcp_connect: active open, send SYN (isn 0) and arm its retransmission."""
    if sk.state is not State.CLOSED:
        raise ModelError("connect on a socket that is not closed")
    sk.transition(now, ConnEvent.CONNECT)
    snd = sk.snd
    snd.snd_nxt = snd.write_seq = snd.pushed_seq = 1
    sk.handshake_sent_at = now
    tcp_transmit_control(sk, now, SYN, 0, Reason.HANDSHAKE)
    sk.arm(now, Timer.RTO, rto_at(sk, now), Reason.RTO_ARMED, "SYN")


def tcp_rcv_state_process(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_v4_rcv → tcp_rcv_state_process / tcp_rcv_established."""
    snd = sk.snd
    sk.rcv.mstamp = now         # tcp_mstamp_refresh as the segment is processed
    if sk.state is State.CLOSED:
        # no socket matches any more: tcp_v4_rcv → tcp_v4_send_reset (packetdrill
        # close-on-syn-sent, close-remote-fin-then-close)
        tcp_send_reset(sk, now, seg)
        return
    if seg.flags & RST:
        tcp_reset(sk, now)
        return
    if sk.state is State.LISTEN:
        if seg.flags & SYN:
            sk.rcv.rcv_nxt = seg.seq + 1
            tcp_ts_negotiate(sk, seg)
            snd.snd_wnd = seg.window
            snd.snd_nxt = snd.write_seq = snd.pushed_seq = 1
            sk.transition(now, ConnEvent.RECV_SYN)
            sk.handshake_sent_at = now
            tcp_transmit_control(sk, now, _SYN_ACK, 0, Reason.HANDSHAKE)
            sk.arm(now, Timer.RTO, rto_at(sk, now), Reason.RTO_ARMED, "SYN-ACK")
        return
    if sk.state is State.SYN_SENT:
        if seg.flags & _SYN_ACK == _SYN_ACK and seg.ack == 1:
            tcp_rcv_synsent_state_process(sk, now, seg)
        return
    if sk.state is State.SYN_RCVD:
        if not (seg.flags & ACK and seg.ack >= 1):
            return
        snd.snd_una = 1
        tcp_rtt_estimator(sk, now - sk.handshake_sent_at)
        sk.ack.lrcvtime_j = sk.jiffies(now)
        sk.cancel(now, Timer.RTO)
        sk.transition(now, ConnEvent.RECV_HANDSHAKE_ACK)
        sk.rcv.pred_flags = True    # tcp_rcv_state_process (SYN_RECV): tcp_fast_path_on
        tcp_init_congestion_control(sk, now)
        tcp_init_buffer_space(sk)
        tcp_init_rcv_space(sk, now)
        snd.snd_wnd = seg.window
        snd.max_window = max(snd.max_window, seg.window)
    if (sk.state in (State.FIN_WAIT1, State.FIN_WAIT2) and sk.shutdown & Shutdown.RCV
            and seg.length > 0 and seg.seq + seg.length > sk.rcv.rcv_nxt):
        # tcp_rcv_state_process, "process the segment text": after close() or
        # shutdown(SHUT_RDWR) (RCV_SHUTDOWN) new data resets the connection (RFC 1122;
        # TCPAbortOnData: tcp_reset, and the caller answers with tcp_v4_send_reset);
        # after shutdown(SHUT_WR) alone it is taken in (a half close). Measured here:
        # SHUT_RDWR then 100 B in FIN_WAIT2 → R 502:502, read() → ECONNRESET; SHUT_WR then
        # 200 B → ACKed and read.
        if seg.flags & ACK:
            tcp_ack(sk, now, seg, len(sk.snd.rtx))
        tcp_send_reset(sk, now, seg)
        tcp_reset(sk, now)
        return
    tcp_rcv_established(sk, now, seg)


def tcp_ts_negotiate(sk: Sock, seg: Segment) -> None:
    """tcp_parse_options on the peer's SYN or SYN-ACK: timestamps are on when our SYN
    offered them (net.ipv4.tcp_timestamps) and the peer's carries them
    (rx_opt.tstamp_ok); its TSval is the first ts_recent."""
    if sk.profile.timestamps and seg.tsval >= 0:
        sk.rcv.ts_on = True
        sk.rcv.ts_recent = seg.tsval


def tcp_rcv_synsent_state_process(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_rcv_synsent_state_process: ACK the SYN-ACK now, or delay it in ping-pong."""
    snd = sk.snd
    snd.snd_una = 1
    sk.rcv.rcv_nxt = seg.seq + 1
    tcp_ts_negotiate(sk, seg)
    snd.snd_wnd = seg.window
    snd.max_window = max(snd.max_window, seg.window)
    tcp_rtt_estimator(sk, now - sk.handshake_sent_at)
    sk.cancel(now, Timer.RTO)
    sk.ack.lrcvtime_j = sk.jiffies(now)
    sk.transition(now, ConnEvent.RECV_SYNACK)
    # With window scaling (Linux's default) pred_flags stays 0 here: the first data or
    # window change turns header prediction on (tcp_fast_path_check).
    sk.rcv.pred_flags = not sk.profile.rcv_wscale
    tcp_init_congestion_control(sk, now)
    tcp_init_buffer_space(sk)
    tcp_init_rcv_space(sk, now)
    if sk.in_pingpong and sk.profile.ack_style is AckStyle.LINUX:
        tcp_synack_delayed_ack(sk, now)
    else:
        tcp_transmit_control(sk, now, ACK, snd.snd_nxt, Reason.HANDSHAKE)


def tcp_header_predicted(sk: Sock, seg: Segment) -> bool:
    """tcp_rcv_established's header prediction, for a data segment: fast path on
    (tp->pred_flags), only ACK (and PSH) set, the next expected sequence number, the
    window last seen, and nothing new ACKed (ack_seq == snd_una). Such a segment is
    queued without tcp_ack() and without tcp_data_snd_check(): it neither clears nor
    re-arms ICSK_TIME_PROBE0, so incoming data does not postpone the release of corked
    data (linux-tcp-rules.md §9; tcp_input.c, the fast path as it stands since the
    2.x header-prediction code, unchanged by 1c2709cfff1d's era)."""
    snd = sk.snd
    return (sk.rcv.pred_flags and seg.length > 0 and seg.flags & ~PSH == ACK
            and sk.state is State.ESTABLISHED and seg.seq == sk.rcv.rcv_nxt
            and seg.window == snd.snd_wnd and seg.ack == snd.snd_una)


def tcp_rcv_established(sk: Sock, now: Micros, seg: Segment) -> None:
    """tcp_rcv_established: tcp_ack, tcp_data_queue, tcp_data_snd_check, ack check; a
    data segment that header prediction accepts skips the first and the third."""
    if sk.profile.ack_style is AckStyle.LINUX and tcp_header_predicted(sk, seg):
        # the fast path: seq == rcv_nxt, so "seq <= rcv_wup" is rcv_nxt == rcv_wup
        tcp_store_ts_recent(sk, seg)
        tcp_rcv_rtt_measure_ts(sk, now, seg)
        tcp_data_queue(sk, now, seg)
        if sk.ack.pending & AckPending.SCHED:
            tcp_ack_snd_check(sk, now)
        return
    prior_packets = len(sk.snd.rtx)
    if seg.flags & ACK:
        tcp_ack(sk, now, seg, prior_packets)
    tcp_store_ts_recent(sk, seg)        # tcp_ack's FLAG_UPDATE_TS_RECENT
    if seg.length > 0 or seg.flags & FIN:
        tcp_rcv_rtt_measure_ts(sk, now, seg)
        tcp_data_queue(sk, now, seg)
    if seg.flags & ACK:
        # tcp_data_snd_check pushes with tp->nonagle, never with MSG_MORE's cork, then
        # tcp_check_space wakes a writer waiting for send-buffer room
        if sk.snd.queue:
            tcp_push_pending_frames(sk, now, sk.snd.nonagle, Reason.ACK_RELEASE)
        tcp_check_space(sk, now)
    if sk.ack.pending & AckPending.SCHED and sk.state is not State.CLOSED:
        if sk.profile.ack_style is AckStyle.LINUX:
            tcp_ack_snd_check(sk, now)
        else:
            classic_ack_check(sk, now, seg)


# ---------------------------------------------------------------- the ACK of our data
def tcp_ack(sk: Sock, now: Micros, seg: Segment, prior_packets: int) -> None:
    """tcp_ack: advance snd_una (tcp_clean_rtx_queue), sample RTT (oldest ACKed, never a
    retransmission: Karn), loss recovery for a duplicate ACK or outside Open
    (tcp_fastretrans_alert), congestion control (PRR in recovery, else growth when data
    was ACKed), retransmit what is marked lost (tcp_xmit_recovery), end a loss-probe
    episode, re-arm TLP or RTO, update the window; an ACK of our FIN moves the closing
    states on."""
    snd, cc = sk.snd, sk.cc
    win_update = seg.window != snd.snd_wnd
    if win_update:
        # tcp_ack_update_window: "the only place where fast path is recovered for
        # sending TCP" (tcp_fast_path_check); with data queued, a window update after an
        # idle spell restarts cwnd (tcp_slow_start_after_idle_check)
        snd.snd_wnd = seg.window
        tcp_fast_path_check(sk)
        if snd.queue:
            tcp_cwnd_restart(sk, now)
    snd.max_window = max(snd.max_window, seg.window)
    if snd.snd_una < seg.ack <= snd.snd_nxt:
        rtx = snd.rtx
        acked_skbs: list[Skb] = []
        retrans_acked = False       # tcp_clean_rtx_queue's FLAG_RETRANS_DATA_ACKED
        while rtx and rtx[0].end <= seg.ack:
            done = rtx.popleft()
            acked_skbs.append(done)
            if done.retransmitted:
                retrans_acked = True
            if done.lost:
                cc.lost_out -= 1
            if done.rexmit:
                cc.retrans_out -= 1
            if done.head:       # tcp_clean_rtx_queue frees the skb, or trims its head
                if rtx and not rtx[0].head:
                    rtx[0].head = True
                else:
                    snd.skbs -= 1
        first = acked_skbs[0] if acked_skbs else None
        snd.snd_una = seg.ack
        cc.retransmits = 0                  # new data ACKed: "something worked"
        cc.probes_tstamp = Micros(-1)
        if first is not None and first.retransmitted:
            cc.retrans_stamp = Micros(0)    # the retransmitted segment got through
        if snd.snd_una == snd.snd_nxt:      # the rtx queue is empty (no deque truth test)
            tcp_chrono_stop(sk, now, Chrono.BUSY)  # tcp_clean_rtx_queue: all ACKed
        ts_rtt: int | None = None
        if first is not None and not retrans_acked:
            tcp_rtt_estimator(sk, now - first.sent_at)   # seq_rtt_us: oldest ACKed
        elif first is not None:
            # Karn forbids the ACK's timing once retransmitted data is ACKed, but
            # tcp_ack_update_rtt then takes the timestamp echo (RTTM, RFC 7323 §4):
            # now − TSecr in whole ms, at least 1 ms (tcp_rtt_tsopt_us(tp, 1)), for SRTT
            # and for the congestion control's sample alike. Measured (validate --random
            # seed 3, 1 Mbit/s): the kernel's SRTT went 5258 → ~8860 µs on the ACK of a
            # segment its loss probe had re-sent; without this sample the model's stayed
            # at 5243 and its next probes fired a round early.
            ts_rtt = tcp_rtt_tsopt_us(sk, now, seg)
            if ts_rtt >= 0:
                tcp_rtt_estimator(sk, ts_rtt)
        cc.backoff = 0
        delivered = tcp_remove_reno_sacks(sk, len(acked_skbs))
        rexmit, lost = False, 0
        if cc.ca_state != CaState.OPEN:
            rexmit, lost, _ = tcp_fastretrans_alert(sk, now, 0, True)
        tcp_cong_control(sk, now, acked_skbs, prior_packets, delivered, True, lost, ts_rtt)
        if rexmit:
            tcp_xmit_retransmit_queue(sk, now)
        if snd.tlp_high_seq and seg.ack >= snd.tlp_high_seq:
            snd.tlp_high_seq = 0          # the probe's episode is over
        if not tcp_schedule_loss_probe(sk, now, advancing_rto=True):   # tcp_set_xmit_timer
            tcp_rearm_rto(sk, now)
        if snd.fin_queued and snd.snd_una == snd.write_seq \
                and (sk.state, ConnEvent.OUR_FIN_ACKED) in TRANSITIONS:
            sk.transition(now, ConnEvent.OUR_FIN_ACKED)
            if sk.state is State.CLOSED:
                sk.timers.clear()
    elif prior_packets == 0 and snd.queue:
        # tcp_ack_probe: a usable window clears the probe timer; the following
        # tcp_data_snd_check re-arms it from now if the data is still held.
        head = snd.queue[0]
        if head.seq + head.length <= snd.snd_una + snd.snd_wnd:
            cc.backoff = 0
            cc.probes_tstamp = Micros(-1)
            sk.cancel(now, Timer.PROBE0, Reason.ACK_RELEASE)
    elif seg.ack == snd.snd_una and prior_packets:
        # a duplicate ACK (FLAG_NOT_DUP: no data, no window update, nothing ACKed), or any
        # ACK outside Open, goes to tcp_fastretrans_alert (tcp_ack_is_dubious)
        dup = not seg.length and not seg.flags & FIN and not win_update
        if dup or cc.ca_state != CaState.OPEN:
            if dup:
                sk.event(now, Kind.ACK_NOW, Reason.DUPACK,
                         f"ack {seg.ack} again ({cc.sacked_out + 1} so far)")
            rexmit, lost, delivered = tcp_fastretrans_alert(sk, now, 1 if dup else 0, False)
            tcp_cong_control(sk, now, [], prior_packets, delivered, False, lost)
            if rexmit:
                tcp_xmit_retransmit_queue(sk, now)
        elif cc.bbr is not None:
            tcp_cong_control(sk, now, [], prior_packets)


# ---------------------------------------------------------------- closing
def tcp_reset(sk: Sock, now: Micros) -> None:
    """tcp_reset (a reset received, or one we send for data after close): the error the
    next call reports (ECONNREFUSED in SYN_SENT, EPIPE in CLOSE_WAIT, else ECONNRESET),
    both directions shut (tcp_done), every timer stopped, CLOSED."""
    if sk.state is State.CLOSED:
        return
    sk.err = ("ECONNREFUSED" if sk.state is State.SYN_SENT
              else "EPIPE" if sk.state is State.CLOSE_WAIT else "ECONNRESET")
    sk.shutdown = Shutdown.MASK
    sk.timers.clear()
    sk.transition(now, ConnEvent.ABORT)


def tcp_send_fin(sk: Sock, now: Micros, why: Reason) -> None:
    """tcp_send_fin: the FIN rides on the last unsent skb, or goes in a skb of its own,
    and everything queued is pushed with Nagle off."""
    snd = sk.snd
    tail = snd.queue[-1] if snd.queue else None
    if tail is not None and not tail.fin:
        tail.fin = True
    else:
        tcp_chrono_start(sk, now, Chrono.BUSY)     # tcp_queue_skb → write queue tail
        snd.queue.append(Skb(seq=snd.write_seq, length=0, fin=True, head=True))
        snd.skb_start = snd.write_seq
        snd.skbs += 1
    snd.write_seq += 1
    snd.fin_queued = True
    tcp_push_pending_frames(sk, now, Nonagle.OFF, why)


def tcp_shutdown(sk: Sock, now: Micros, how: int) -> None:
    """inet_shutdown → tcp_shutdown (``how``: `Shutdown` bits). RCV only marks the socket
    (reads return 0 once the queue is empty; data still arrives, is ACKed and can be read:
    measured here); SEND sends the FIN after the queued data, as close() does, moving
    ESTABLISHED to FIN_WAIT1 and CLOSE_WAIT to LAST_ACK (tcp_close_state), and later
    writes fail with EPIPE. In a closed socket it fails with ENOTCONN; a connect still in
    progress is abandoned (tcp_disconnect, nothing sent)."""
    if sk.state is State.SYN_SENT:
        sk.timers.clear()
        sk.transition(now, ConnEvent.CLOSE)
        return
    if sk.state is State.CLOSED or sk.state is State.LISTEN:
        sk.shutdown |= how
        raise SocketError("ENOTCONN", "shutdown on a socket that is not connected")
    sk.shutdown |= how
    if how & Shutdown.SEND and (sk.state, ConnEvent.SHUTDOWN_WR) in TRANSITIONS:
        sk.transition(now, ConnEvent.SHUTDOWN_WR)
        tcp_send_fin(sk, now, Reason.SHUTDOWN_PUSH)


def tcp_close(sk: Sock, now: Micros) -> None:
    """tcp_close: both directions shut; unread data means RST; otherwise a FIN after the
    queued data (tcp_send_fin), unless shutdown(SHUT_WR) sent it already (FIN_WAIT1/2,
    LAST_ACK, CLOSING: nothing more is sent; new data for the orphan is reset)."""
    if sk.state in (State.CLOSED, State.LISTEN, State.SYN_SENT):
        sk.transition(now, ConnEvent.CLOSE)
        return
    sk.shutdown = Shutdown.MASK
    if sk.rcv.unread > 0:
        tcp_transmit_control(sk, now, RST, sk.snd.snd_nxt, Reason.RESET)
        sk.timers.clear()
        sk.transition(now, ConnEvent.ABORT)
        return
    if (sk.state, ConnEvent.CLOSE) not in TRANSITIONS:
        return      # already closing
    sk.transition(now, ConnEvent.CLOSE)
    tcp_send_fin(sk, now, Reason.CLOSE_PUSH)
