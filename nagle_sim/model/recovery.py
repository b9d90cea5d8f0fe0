"""Loss recovery without SACK (tcp_input.c's tcp_fastretrans_alert for a Reno-style,
non-SACK connection, tcp_output.c's tcp_xmit_retransmit_queue): duplicate ACKs, limited
transmit, fast retransmit, NewReno partial ACKs, and the Loss state after an RTO.

Owns: the ``icsk_ca_state`` machine (Open → Disorder → Recovery, and Loss out of an RTO),
the duplicate-ACK count (``sacked_out``: the peer sends no SACK blocks, so each duplicate
ACK stands for one segment that left the network, tcp_add_reno_sack), marking segments
lost, and retransmitting them. The cwnd arithmetic (PRR, RTO) lives in ``rate``; the RTO
itself in ``send``. Standard library and lower model modules only.

- RFC 3042 limited transmit is not a rule of its own in Linux: a duplicate ACK raises
  sacked_out, so tcp_packets_in_flight falls by one and one new segment may go.
- With RACK on (net.ipv4.tcp_recovery = 1, the default), a non-SACK connection marks the
  first unACKed segment lost once ``reordering`` (3) duplicate ACKs arrived
  (tcp_newreno_mark_lost), which starts fast recovery (tcp_time_to_recover: lost_out).
- In recovery each partial ACK marks the new first unACKed segment lost and it is
  retransmitted (NewReno, RFC 6582); recovery ends once high_seq (snd_nxt at its start)
  is ACKed — for Reno only once something above it is (tcp_try_undo_recovery's hold).
SIMPLIFICATION: no undo (the model sends no timestamps or D-SACKs to prove a
retransmission spurious), no F-RTO after an RTO, no SACK/RACK (the model's receiver sends
no SACK blocks).
"""

from __future__ import annotations

from .events import Kind, Micros, Reason
from .output import tcp_transmit_data
from .rate import tcp_mark_skb_lost, tcp_packets_in_flight
from .sock import Sock
from .state import CA_STATE_NAMES, CaState
from .timers import tcp_rearm_rto


def tcp_set_ca_state(sk: Sock, now: Micros, state: int) -> None:
    """tcp_set_ca_state, traced when it changes."""
    cc = sk.cc
    if cc.ca_state != state:
        sk.event(now, Kind.MODE, Reason.RECOVERY_EXIT if state == CaState.OPEN
                 else Reason.DUPACK if state == CaState.DISORDER else Reason.RECOVERY_ENTER,
                 f"{CA_STATE_NAMES[cc.ca_state]} → {CA_STATE_NAMES[state]}")
        cc.ca_state = state


def tcp_add_reno_sack(sk: Sock, dupacks: int) -> int:
    """tcp_add_reno_sack: each duplicate ACK counts one more segment as delivered
    (sacked_out), never so many that no hole is left (tcp_limit_reno_sacked, which also
    raises reordering: tcp_check_reno_reordering). Returns the segments delivered."""
    cc = sk.cc
    if not dupacks:
        return 0
    prior = cc.sacked_out
    cc.sacked_out += dupacks
    packets_out = len(sk.snd.rtx)
    holes = min(max(cc.lost_out, 1), packets_out)
    if cc.sacked_out + holes > packets_out:
        cc.sacked_out = packets_out - holes
        cc.reordering = max(cc.reordering, packets_out + 0)
    return max(cc.sacked_out - prior, 0)


def tcp_remove_reno_sacks(sk: Sock, acked: int) -> int:
    """tcp_remove_reno_sacks: a cumulative ACK of ``acked`` segments filled one hole; the
    rest had been counted by duplicate ACKs already. Returns the segments newly
    delivered by it."""
    cc = sk.cc
    if acked <= 0:
        return 0
    delivered = max(acked - cc.sacked_out, 1)
    cc.sacked_out = 0 if acked - 1 >= cc.sacked_out else cc.sacked_out - (acked - 1)
    return delivered


def tcp_newreno_mark_lost(sk: Sock, una_advanced: bool) -> int:
    """tcp_newreno_mark_lost: before recovery, once reordering (3) duplicate ACKs
    arrived, or in recovery on every partial ACK, the first unACKed segment is lost.
    Returns how many were newly marked."""
    cc, rtx = sk.cc, sk.snd.rtx
    if not rtx:
        return 0
    if (cc.ca_state < CaState.RECOVERY and cc.sacked_out >= cc.reordering) or (
            cc.ca_state == CaState.RECOVERY and una_advanced):
        head = rtx[0]
        if not head.lost:
            tcp_mark_skb_lost(sk, head)
            return 1
    return 0


def tcp_enter_recovery(sk: Sock, now: Micros) -> None:
    """tcp_enter_recovery → tcp_init_cwnd_reduction: remember snd_nxt (high_seq) and cwnd,
    ssthresh from the congestion control (CUBIC 0.7 × cwnd, Reno half), PRR from zero."""
    cc = sk.cc
    cc.high_seq = sk.snd.snd_nxt
    sk.snd.tlp_high_seq = 0
    cc.prior_cwnd = cc.cwnd
    cc.prr_delivered = cc.prr_out = 0
    if cc.ca is not None:
        cc.ssthresh = cc.ca.ssthresh(cc.cwnd)
        cc.ca.ai.cwnd_cnt = 0
    tcp_set_ca_state(sk, now, CaState.RECOVERY)


def tcp_end_cwnd_reduction(sk: Sock, now: Micros) -> None:
    """tcp_end_cwnd_reduction: leaving recovery, cwnd = ssthresh (not under BBR)."""
    cc = sk.cc
    if cc.bbr is None and cc.ssthresh < 0x7FFFFFFF and cc.cwnd != cc.ssthresh:
        sk.event(now, Kind.MODE, Reason.CWND_PRR,
                 f"cwnd {cc.cwnd} → {cc.ssthresh} (recovery done)", cwnd=cc.ssthresh)
        cc.cwnd = cc.ssthresh


def tcp_try_to_open(sk: Sock, now: Micros) -> None:
    """tcp_try_to_open → tcp_try_keep_open: Disorder while duplicate ACKs, lost or
    retransmitted segments are counted, else Open."""
    cc = sk.cc
    state = CaState.DISORDER if (cc.sacked_out or cc.lost_out or cc.retrans_out) \
        else CaState.OPEN
    if cc.ca_state != state:
        tcp_set_ca_state(sk, now, state)
        cc.high_seq = sk.snd.snd_nxt


def tcp_fastretrans_alert(sk: Sock, now: Micros, dupacks: int, una_advanced: bool) -> tuple[
        bool, int, int]:
    """tcp_fastretrans_alert for a non-SACK connection, on a duplicate ACK or any ACK
    outside Open. Returns (retransmit the lost segments now, segments newly marked lost,
    segments the duplicate ACK delivered)."""
    cc, snd = sk.cc, sk.snd
    delivered = 0
    if not snd.rtx and cc.sacked_out:
        cc.sacked_out = 0
    # D. state exit: recovery or loss is over once high_seq is ACKed
    if (cc.ca_state == CaState.RECOVERY or cc.ca_state == CaState.LOSS) \
            and snd.snd_una >= cc.high_seq:
        cc.sacked_out = 0                               # tcp_reset_reno_sack
        if snd.snd_una == cc.high_seq:
            return False, 0, 0          # Reno holds until something above it is ACKed
        if cc.ca_state == CaState.RECOVERY:
            tcp_end_cwnd_reduction(sk, now)
        tcp_set_ca_state(sk, now, CaState.OPEN)
    # E. process the state
    if cc.ca_state == CaState.RECOVERY:
        if not una_advanced:
            delivered = tcp_add_reno_sack(sk, dupacks)
        lost = tcp_newreno_mark_lost(sk, una_advanced)
        return True, lost, delivered
    if cc.ca_state == CaState.LOSS:
        if una_advanced:
            cc.sacked_out = 0
        elif snd.snd_nxt > cc.high_seq and dupacks:
            delivered = tcp_add_reno_sack(sk, dupacks)
        return True, 0, delivered
    if una_advanced:
        cc.sacked_out = 0                               # tcp_reset_reno_sack
    delivered = tcp_add_reno_sack(sk, dupacks)
    lost = tcp_newreno_mark_lost(sk, una_advanced)
    if not cc.lost_out:                                 # tcp_time_to_recover
        tcp_try_to_open(sk, now)
        return False, lost, delivered
    tcp_enter_recovery(sk, now)
    return True, lost, delivered


def tcp_xmit_retransmit_queue(sk: Sock, now: Micros) -> int:
    """tcp_xmit_retransmit_queue: resend the segments marked lost, oldest first, while
    the congestion window has room (counting them in prr_out during recovery). Returns
    how many were sent."""
    cc, rtx = sk.cc, sk.snd.rtx
    sent = 0
    if not cc.lost_out:
        return 0
    for i, skb in enumerate(rtx):
        if not skb.lost or skb.rexmit:
            continue
        if tcp_packets_in_flight(sk) >= cc.cwnd:
            break
        skb.rexmit = True
        skb.retransmitted = True
        cc.retrans_out += 1
        if cc.ca_state == CaState.RECOVERY:
            cc.prr_out += 1
        tcp_transmit_data(sk, now, [skb], Reason.FAST_RETRANSMIT
                          if cc.ca_state == CaState.RECOVERY else Reason.RETRANSMIT)
        if i == 0:
            tcp_rearm_rto(sk, now)      # the head's retransmission restarts the RTO
        sent += 1
    return sent
