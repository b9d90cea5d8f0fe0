"""Stack profiles (one per OS / kernel generation) and initial socket options.

Owns: every number the model uses, each with its source. No literals for stack
behaviour may live anywhere else in the model. Standard library only.
Figures marked UNVERIFIED are inferred or from secondary sources; the real kernel wins.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final

# ---------------------------------------------------------------- kernel constants
# Sizes the kernel fixes at compile time, the same in every profile here.
TCP_MSS_DEFAULT: Final = 536
"""TCP_MSS_DEFAULT (include/net/tcp.h, RFC 1122): the MSS assumed without better news."""
TCP_MIN_MSS: Final = 88
"""TCP_MIN_MSS (include/net/tcp.h)."""
TCP_HEADER_WITH_TIMESTAMPS: Final = 32
"""20-byte TCP header + 12-byte timestamp option, as Linux sends by default."""
GSO_MAX_SIZE: Final = 65536
"""GSO_LEGACY_MAX_SIZE: the largest TSO/GSO skb (include/linux/netdevice.h)."""
MAX_TCP_HEADER: Final = 320
"""MAX_TCP_HEADER as tcp_xmit_size_goal subtracts it (include/net/tcp.h, order of)."""
TCP_BOUND_MIN: Final = 68 - TCP_HEADER_WITH_TIMESTAMPS
"""tcp_bound_to_half_wnd's floor: 68 bytes (RFC 791's minimum datagram) minus headers."""
PINGPONG_MAX: Final = 255
"""icsk_ack.pingpong is a u8: inet_csk_inc_pingpong_cnt saturates here."""
IPV4_HEADER: Final = 20
"""tcp_measure_rcv_mss compares segment sizes with the IPv4 header included."""
PACING_AFTER_SEGS: Final = 10
"""tcp_update_skb_after_send paces only once tp->data_segs_out >= 10."""
SK_PACING_SHIFT: Final = 10
"""sk_pacing_shift default: a TSO skb carries pacing_rate >> 10 bytes, about 1 ms."""
PACING_SS_RATIO: Final = 2.0
"""net.ipv4.tcp_pacing_ss_ratio = 200 %: pacing rate over cwnd/SRTT in slow start."""
PACING_CA_RATIO: Final = 1.2
"""net.ipv4.tcp_pacing_ca_ratio = 120 %: the same in congestion avoidance."""
MAX_PROBE_BACKOFF: Final = 6
"""SIMPLIFICATION: zero-window probes back off at most 2^6 (the kernel caps at TCP_RTO_MAX)."""
MAX_RTO_BACKOFF: Final = 15
"""net.ipv4.tcp_retries2 default 15 bounds the RTO backoff."""
TCP_RETRIES2: Final = 15
"""net.ipv4.tcp_retries2: an established connection gives up after the time 15 backed-off
RTOs from TCP_RTO_MIN would take (tcp_model_timeout: 924.6 s)."""
TCP_SYN_RETRIES: Final = 6
"""net.ipv4.tcp_syn_retries: a connect gives up after 6 retransmitted SYNs."""
TCP_RTO_MAX_US: Final = 120_000_000
"""TCP_RTO_MAX: tcp_model_timeout's linear part."""
TCP_INIT_CWND: Final = 10
"""TCP_INIT_CWND (include/net/tcp.h): tcp_sndbuf_expand's floor, whatever the route's cwnd."""
TCP_REORDERING: Final = 3
"""net.ipv4.tcp_reordering default: the duplicate-ACK threshold (tp->reordering)."""
SKB_SHINFO_SIZE: Final = 320
"""SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) on x86-64 (tcp_sndbuf_expand's per_mss)."""
SOCK_MIN_SNDBUF: Final = 2 * (2048 + 256)
"""SOCK_MIN_SNDBUF (include/net/sock.h): 2 × TCP_SKB_MIN_TRUESIZE, the smallest SO_SNDBUF."""
INFINITE_LOWAT: Final = 0xFFFFFFFF
"""net.ipv4.tcp_notsent_lowat's default (UINT_MAX): no limit on unsent bytes."""


class NagleStyle(Enum):
    MINSHALL = "minshall"   # Linux tcp_nagle_check + tcp_minshall_check
    RFC896 = "rfc896"       # hold while *any* data is unACKed


class AckStyle(Enum):
    LINUX = "linux"         # ato adaptation, quick-ACK budget, ping-pong, jiffies
    CLASSIC = "classic"     # RFC 1122: every Nth segment or a fixed timer


class Congestion(StrEnum):
    """The congestion controls the model has (net.ipv4.tcp_congestion_control /
    TCP_CONGESTION names; a `StrEnum`, so each is its name). A scenario's ``congestion``
    key becomes one of these; `StackProfile.congestion` stays typed ``str`` so that a
    plain name still builds a profile (a member is one)."""

    CUBIC = "cubic"
    """tcp_cubic.c: the kernel's default since 2.6.19."""
    RENO = "reno"
    """tcp_cong.c's NewReno (tcp_reno_cong_avoid)."""
    BBR = "bbr"
    """tcp_bbr.c, with pacing: what this project's machines run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StackProfile:
    """Parameters of one TCP stack. Times in µs unless the name says jiffies."""

    name: str
    description: str
    sources: tuple[str, ...]
    unverified: tuple[str, ...] = ()

    nagle_style: NagleStyle = NagleStyle.MINSHALL
    ack_style: AckStyle = AckStyle.LINUX
    supports_cork: bool = True
    """TCP_CORK and MSG_MORE exist (Linux only)."""
    supports_quickack: bool = True
    """TCP_QUICKACK exists (Linux only)."""

    hz: int = 250
    """Kernel tick rate; ato, delayed-ACK and probe timers run in jiffies (CONFIG_HZ)."""
    timer_wheel_round_up: bool = True
    """Timers run on the timer wheel's buckets (kernel/time/timer.c calc_index): a timer
    due at jiffy J fires at the start of J+1 if it was armed fewer than 63 jiffies ahead,
    at the next multiple of 8 jiffies if 63-503 ahead, and so on (False: exactly at J)."""
    jiffies_at_zero: int = 0
    """The kernel's jiffies counter at the model's jiffy 0, which places the coarser wheel
    levels' 8-, 64-, 512-jiffy boundaries. On a real host it is arbitrary (uniform), so a
    level-1 timer fires anywhere in 1-8 jiffies after its expiry; 0 is one such host."""
    jiffy_phase_us: int = -1
    """How far into a tick the SYN leaves (µs). On a real host it is arbitrary, so a lone
    delayed ACK lands anywhere in 40-44 ms; -1 (default) means half a tick, the expected
    value."""

    max_quickacks: int = 16
    """TCP_MAX_QUICKACKS (include/net/tcp.h)."""
    pingpong_thresh: int = 1
    """TCP_PINGPONG_THRESH / net.ipv4.tcp_pingpong_thresh."""
    pingpong_needs_new_data: bool = False
    """5.x threshold-3 era: count a reply only if the previous send was in an earlier jiffy
    than the last data received (before(lsndtime, lrcvtime))."""
    quickack_dec_only_if_scheduled: bool = True
    """059217c18be6 (2023): quick budget drops only for ACKs of new data."""
    pushed_on_full_psh: bool = True
    """4720852ed9af (2023): an exact-MSS segment with PSH counts as PUSHED."""

    rto_min_us: int = 200_000
    """TCP_RTO_MIN = HZ/5 (per socket: TCP_RTO_MIN_US, `set rto_min`)."""
    probe0_min_us: int = 200_000
    """tcp_probe0_base = max(RTO, TCP_RTO_MIN): the constant, not the socket's rto_min, so
    `set rto_min` leaves the 200 ms cork ceiling alone."""
    delack_max_us: int = 200_000
    """icsk_delack_max: TCP_DELACK_MAX = HZ/5 (per socket: TCP_DELACK_MAX_US,
    `set delack_max`); tcp_send_delayed_ack never waits longer (tcp_delack_max)."""
    delack_max_follows_rto_min: bool = True
    """tcp_delack_max = min(icsk_delack_max, max(tcp_rto_min, 2) - 1) jiffies ("derive
    delack_max with tcp_rto_min helper", 512bd0f9f926, June 2024): 49 jiffies by default at
    HZ=250. False: only a locked route rto_min lowers it (bbf80d713fe7, 2023), as in 6.6."""
    socket_timing_options: bool = True
    """TCP_RTO_MIN_US (f38805c5d26f) and TCP_DELACK_MAX_US (9552f90835ef), March 2025,
    about 6.15: `set rto_min` / `set delack_max` exist."""
    route_quickack: bool = False
    """The route to the peer has `quickack 1` (RTAX_QUICKACK): tcp_in_quickack_mode is true
    for every segment (set by a scenario's `[link] quickack`, on both hosts)."""
    pingpong_sysctl: bool = True
    """net.ipv4.tcp_pingpong_thresh exists (562b1fdf061b, October 2023, about 6.7; per
    network namespace). Only then may a scenario `tune pingpong_thresh` (the loader
    refuses it on a profile without the sysctl), and a real run applies it there."""
    rto_initial_us: int = 1_000_000
    """TCP_TIMEOUT_INIT (RFC 6298)."""
    rto_max_us: int = 120_000_000
    congestion: str = Congestion.CUBIC
    """net.ipv4.tcp_congestion_control / TCP_CONGESTION: "cubic" (the kernel default since
    2.6.19), "reno", or "bbr" (with pacing; what this project's machines run)."""
    hystart: bool = True
    """tcp_cubic's hystart module parameter (default 1): HyStart may end slow start early."""
    min_tso_segs: int = 2
    """net.ipv4.tcp_min_tso_segs (default 2): the smallest TSO skb tcp_tso_autosize allows."""
    tso_rtt_log: int = 9
    """net.ipv4.tcp_tso_rtt_log (65466904b015, 2021; default 9): TSO skbs grow by
    gso_max_size >> (min_rtt_us >> 9) on short paths. 0: the older rate-only sizing."""
    tcp_grow_skb: bool = True
    """8ee602c63520 ("tcp: try to send bigger TSO packets", v6.10): tcp_write_xmit lets a
    skb short of the cwnd quota take bytes from the next skb (tcp_grow_skb), so a burst may
    span two of the write queue's skbs. Seen here: after 60000 B were queued as two 25000 B
    skbs, a 5000-byte remainder left as one 10-segment burst with 5000 B of the next skb
    (ss -m: 3 skbs charged where splitting at skb boundaries gives 4)."""
    fin_cwnd_exempt: bool = False
    """Before "tcp: remove dubious FIN exception from tcp_cwnd_test()" (Eric Dumazet, net-next
    April 2024, so v6.10) a skb of one segment carrying the FIN was sent even with the
    congestion window full.
    6.18 holds it (seen with packetdrill: shutdown right after a 10-segment burst sends
    the FIN 27 ms later, as the tail loss probe, not at once)."""
    tail_loss_probe: bool = True
    """net.ipv4.tcp_early_retrans=3: tail loss probes (needs SACK, on between Linux hosts)."""
    timeout_min_j: int = 2
    """TCP_TIMEOUT_MIN (jiffies), added to 2·SRTT for a loss probe with >1 packet out."""
    init_cwnd: int = 10
    """TCP_INIT_CWND, RFC 6928."""
    slow_start_after_idle: bool = True
    """net.ipv4.tcp_slow_start_after_idle default 1."""
    autocorking: bool = True
    """net.ipv4.tcp_autocorking default 1."""
    rcv_wnd: int = 65535
    """Initial advertised receive window (tcp_select_initial_window, unscaled 64 KB)."""
    wmem_default: int = 16384
    """net.ipv4.tcp_wmem[1]: a new socket's send buffer, before tcp_init_buffer_space."""
    wmem_max: int = 4_194_304
    """net.ipv4.tcp_wmem[2]: how far tcp_sndbuf_expand may grow it (this machine: 4 MB)."""
    core_wmem_max: int = 4_194_304
    """net.core.wmem_max: SO_SNDBUF's cap before doubling (this machine: 4 MB; the kernel's
    own default is 212992)."""
    skb_tx_overhead: int = 832
    """Truesize of a sent skb beyond its payload (tcp_stream_alloc_skb's head: the payload
    sits in page fragments). Measured here with ss -m: each new 500-byte skb raised
    sk_wmem_queued by 1332, appended bytes by their count only; 60000 B in 4 skbs (two
    initial-window bursts, two queued skbs) read w63328."""
    notsent_lowat: int = INFINITE_LOWAT
    """net.ipv4.tcp_notsent_lowat (default UINT_MAX: off)."""
    rcv_buf: int = 131072
    """Receive buffer (net.ipv4.tcp_rmem[1])."""
    initial_rcv_mss: int = 536
    """TCP_MSS_DEFAULT: rcv_mss guess before a full segment is seen (tcp_initialize_rcv_mss)."""
    # --- the TLP timeout and the receive window (tcp_schedule_loss_probe, __tcp_select_window)
    tlp_timeout_in_us: bool = True
    """1c2709cfff1d (Oct 2023, tcp_schedule_loss_probe): the loss-probe extra is added in µs
    before rounding to jiffies (False: 2·SRTT rounded up, then + TCP_TIMEOUT_MIN jiffies)."""
    timeout_min_us: int = 2000
    """TCP_TIMEOUT_MIN_US (include/net/tcp.h, 1c2709cfff1d): the loss probe's extra with
    more than one packet out."""
    rcv_wscale: int = 10
    """The window scale we offer (tcp_select_initial_window: tcp_rmem[2] = 32 MB on this
    machine gives 10). Non-zero also keeps header prediction off on the connecting side
    until the first data (tcp_rcv_synsent_state_process)."""
    scaling_ratio: int = 128
    """tp->scaling_ratio before the first full segment (TCP_DEFAULT_SCALING_RATIO, 50 %,
    in 1/256: dfa2f0483360, 2023). tcp_measure_rcv_mss then sets it to len·256/truesize
    of the segment that changed rcv_mss; the window is free buffer space times it."""
    skb_rx_overhead: int = 438
    """Bytes of a received skb's kmalloc'ed head beyond the payload: 52 bytes of IP+TCP
    headers, NET_SKB_PAD + NET_IP_ALIGN (66) and skb_shared_info (320). With
    `skb_struct_size` this gives truesize 2304 for a 1448-byte segment, as measured here
    (ss -m: r177408 for 77 skbs; window growth 64512 → 76800 then shrinking from the 5th
    segment, which needs scaling_ratio 160/256 = 1448/2304)."""
    loopback_skb_overhead: int = 852
    """Truesize of a loopback skb beyond its payload (the sender's small head and struct
    sk_buff; the payload sits in page fragments). Measured here from the windows a
    loopback receiver advertises for 1 kB segments (lesson getting-immediate-acks, 6.18): 64512 →
    67584 → 69632, then 70656 after the first read, which needs scaling_ratio
    1000·256/truesize = 138, i.e. truesize 1847-1855 for 1000 bytes: 847-855 B."""
    skb_struct_size: int = 256
    """SKB_DATA_ALIGN(sizeof(struct sk_buff)), added to every truesize (x86-64)."""
    rcv_buf_max: int = 33_554_432
    """net.ipv4.tcp_rmem[2] (this machine): bounds __tcp_grow_window's search."""
    timestamps: bool = True
    """net.ipv4.tcp_timestamps=1: the SYN offers the timestamp option (RFC 7323), used when
    the peer's offers it too; the receiver then samples its RTT from each echo
    (tcp_rcv_rtt_measure_ts), which autotuning needs. Windows does not offer it."""
    syn_tstamp_bytes: int = 12
    """TCPOLEN_TSTAMP_ALIGNED: tcp_connect_init sizes the SYN's window in segments of
    mss + these bytes (measured: SYN window 64240 = 44 × 1460 for MSS 1448 payload; the
    SYN-ACK's 65160 = 45 × 1448)."""
    min_window_clamp: int = 2304
    """SOCK_MIN_RCVBUF / 2: the smallest window_clamp tcp_set_window_clamp allows."""
    grow_window_min_len: int = 128
    """tcp_event_data_recv calls tcp_grow_window only for segments of 128 bytes or more."""

    classic_delack_us: int = 200_000
    """CLASSIC receivers: the delayed-ACK timer."""
    classic_ack_every: int = 2
    """CLASSIC receivers: ACK at once when this many segments are unACKed."""
    classic_ack_psh_at_once: bool = False
    """CLASSIC receivers: a segment with PSH is ACKed at once (XNU tcp_cc_delay_ack)."""

    syscall_us: int = 2
    """Cost of one socket call to the application (measured order, loopback)."""
    tx_segment_us: int = 2
    """Extra cost of a send call per segment it transmits (loopback runs the receiver inline)."""
    host_latency_us: int = 1
    """This host's own stack latency per segment, added to the link delay."""
    wakeup_us: int = 5
    """Scheduler latency from data arriving to a blocked reader running."""

    # --- derived ----------------------------------------------------------------------
    @property
    def bbr(self) -> bool:
        """The congestion control is BBR (read-only shorthand for `congestion`)."""
        return self.congestion == "bbr"

    @property
    def tick_us(self) -> int:
        return 1_000_000 // self.hz

    @property
    def delack_min_j(self) -> int:
        """TCP_DELACK_MIN = TCP_ATO_MIN = HZ/25 for HZ >= 100, else 4 jiffies."""
        return self.hz // 25 if self.hz >= 100 else 4

    @property
    def ato_max_j(self) -> int:
        """HZ/2: tcp_send_delayed_ack's cap on ato outside ping-pong and pushed data."""
        return self.hz // 2

    @property
    def delack_max_j(self) -> int:
        """TCP_DELACK_MAX = HZ/5 (the constant the kernel uses for ping-pong's ato cap,
        the delayed-ACK timer's ato doubling and the SYN-ACK's delayed ACK)."""
        return self.hz // 5

    @property
    def tcp_delack_max_j(self) -> int:
        """tcp_delack_max(sk): this socket's ceiling on any delayed ACK, in jiffies."""
        j = self.us_to_jiffies(self.delack_max_us)
        if self.delack_max_follows_rto_min:
            j = min(j, max(self.us_to_jiffies(self.rto_min_us), 2) - 1)
        return j

    def us_to_jiffies(self, us: int) -> int:
        """usecs_to_jiffies rounds up."""
        return -(-us // self.tick_us)

    def with_overrides(self, **changes: Any) -> StackProfile:
        """A copy with some fields changed (scenario `tune` tables)."""
        return dataclasses.replace(self, **changes)


LINUX: Final = StackProfile(
    name="linux",
    description="Linux 6.x as shipped (6.12-6.18), HZ=250: CUBIC, autocorking, Minshall "
    "Nagle, 40 ms delayed ACK in jiffies, 16 quick ACKs at start, ping-pong threshold 1",
    sources=(
        "net/ipv4/tcp_output.c: tcp_nagle_check, tcp_minshall_check, tcp_write_xmit, "
        "tcp_send_delayed_ack, tcp_check_probe_timer",
        "net/ipv4/tcp_input.c: tcp_event_data_recv, __tcp_ack_snd_check, tcp_measure_rcv_mss",
        "net/ipv4/tcp.c: tcp_push, __tcp_cleanup_rbuf, __tcp_sock_set_quickack",
        "include/net/tcp.h: TCP_DELACK_MIN, TCP_MAX_QUICKACKS, TCP_INIT_CWND",
        "commit 4d8f24eeedc5 (2022): TCP_PINGPONG_THRESH back to 1",
        "net/ipv4/tcp_output.c: tcp_schedule_loss_probe, tcp_send_loss_probe (TLP)",
        "net/ipv4/tcp_cubic.c (default congestion control since 2.6.19), tcp_cong.c: "
        "tcp_slow_start, tcp_reno_cong_avoid, tcp_cong_avoid_ai",
        "net/ipv4/tcp_output.c: tcp_cwnd_validate, tcp_tso_autosize (tcp_min_tso_segs 2, "
        "tcp_tso_rtt_log 9)",
        "net/ipv4/tcp_bbr.c, tcp_rate.c; tcp_update_skb_after_send, tcp_pacing_check "
        "(congestion = \"bbr\", as this project's machines run)",
        "measured on this project's 6.18 kernel: shared/reference/seed-scenarios.md",
    ),
    unverified=("syscall_us, tx_segment_us, host_latency_us, wakeup_us are loopback orders "
                "of magnitude, not kernel constants",),
)

# ---------------------------------------------------------------- kernel-version profiles
# Deltas from LINUX, each with the commit that changed the rule. "As read" means the
# source tree named was checked for the rule; release numbers of mainline commits are
# inferred from their dates unless a tree of that release was read.

LINUX_6_6: Final = LINUX.with_overrides(
    name="linux-6.6",
    description="Linux 6.6 LTS (6.6.47 as read): as 'linux' but delayed ACKs are not capped "
    "by rto_min, no tcp_pingpong_thresh sysctl, no TCP_RTO_MIN_US/TCP_DELACK_MAX_US",
    sources=(
        "6.6.47 include/net/tcp.h (Salpadding/linux-6.6-strip): TCP_TIMEOUT_MIN_US (TLP "
        "fix 1c2709cfff1d present), tcp_delack_max() (bbf80d713fe7: locked route rto_min "
        "only), TCP_PINGPONG_THRESH 1 fixed (no sysctl)",
        "tcp_rto_min helper in tcp_delack_max: 512bd0f9f926 (June 2024, after 6.6)",
        "TCP_RTO_MIN_US f38805c5d26f / TCP_DELACK_MAX_US 9552f90835ef (March 2025, 6.15)",
        "net.ipv4.tcp_pingpong_thresh 562b1fdf061b (October 2023, 6.7)",
    ),
    unverified=("059217c18be6 and 4720852ed9af (October 2023) assumed present, as in "
                "6.1.166; not read in a 6.6 tree",),
    delack_max_follows_rto_min=False,
    socket_timing_options=False,
    pingpong_sysctl=False,
    tcp_grow_skb=False,
    fin_cwnd_exempt=True,
)

LINUX_6_1: Final = LINUX_6_6.with_overrides(
    name="linux-6.1",
    description="Linux 6.1 LTS as Debian 12 ships it (6.1.166 as read): the 2023 quick-ACK "
    "and PSH fixes and the µs TLP timeout backported; otherwise as linux-6.6",
    sources=(
        "6.1.166 (unifreq/linux-6.1.y): tcp_measure_rcv_mss sets ICSK_ACK_PUSHED for PSH "
        "(4720852ed9af), tcp_dec_quickack_mode(sk) without a packet count (059217c18be6), "
        "tcp_schedule_loss_probe with TCP_TIMEOUT_MIN_US (1c2709cfff1d), "
        "sysctl_tcp_tso_rtt_log in tcp_tso_autosize, TCP_PINGPONG_THRESH 1, no "
        "tcp_delack_max()",
    ),
    unverified=("Debian 12's exact stable patch level varies; 6.1.0 as first released "
                "lacked the 2023 backports (use linux-5.15 for that behaviour)",),
)

LINUX_5_15: Final = LINUX_6_1.with_overrides(
    name="linux-5.15",
    description="Linux 5.15 as first released (Ubuntu 22.04 GA): ping-pong needs 3 quick "
    "replies to newer data, quick-ACK budget spent per data segment, exact-MSS PSH segments "
    "wait, TLP timeout in jiffies",
    sources=(
        "commit 4a41f453bedf (2019): TCP_PINGPONG_THRESH 3 with before(lsndtime, lrcvtime) "
        "in tcp_event_data_sent (read in a 5.10.13-based tree: Rtoax/linux-5.10.13)",
        "same tree: tcp_dec_quickack_mode(sk, pkts), TLP timeout 2·srtt in jiffies + "
        "TCP_TIMEOUT_MIN (2 jiffies)",
        "reverted by 4d8f24eeedc5 (2022); fixes 059217c18be6, 4720852ed9af, 1c2709cfff1d "
        "(2023) not yet in; tcp_tso_rtt_log (65466904b015, Nov 2021) not yet in",
    ),
    unverified=("5.15.y stable later took some of these fixes (e.g. Ubuntu 5.15.0-93 has "
                "4720852ed9af); whether it took the 2022 revert is not verified",
                "HyStart as in 6.x (the µs-based rewrite of 2020 is assumed present)"),
    pingpong_thresh=3,
    pingpong_needs_new_data=True,
    quickack_dec_only_if_scheduled=False,
    pushed_on_full_psh=False,
    tso_rtt_log=0,
    tlp_timeout_in_us=False,
)

LINUX_5_4: Final = LINUX_5_15.with_overrides(
    name="linux-5.4",
    description="Linux 5.4 (5.1-5.18 era): ping-pong needs 3 quick replies; quick-ACK budget "
    "spent per data segment; exact-MSS PSH segments could wait 40 ms (S4's one-way stream "
    "goes delayed after the 16 quick ACKs)",
    sources=(
        "commit 4a41f453bedf (2019): TCP_PINGPONG_THRESH 3, inet_csk_inc_pingpong_cnt",
        "raspberrypi/linux 0373f2fb (5.x) include/net/inet_connection_sock.h",
        "reverted by 4d8f24eeedc5 (2022); fixes 059217c18be6, 4720852ed9af (2023) absent",
    ),
    unverified=("the exact first/last kernel versions with threshold 3",
                "HyStart: 5.4 has the older ms-granularity version (not modelled; 6.x HyStart "
                "stands in)"),
)

LINUX_4_18: Final = LINUX.with_overrides(
    name="linux-4.18",
    description="AlmaLinux/RHEL 8 (4.18.0-394.el8 as read): ping-pong threshold 1 without "
    "the newer-data test, quick-ACK budget spent per data segment, no PSH fix, TLP timeout "
    "in jiffies, no tcp_tso_rtt_log",
    sources=(
        "kernel-4.18.0-394.el8 (Seneca-CDOT/dynaccel-kernel-4.18.0): TCP_PINGPONG_THRESH 1 "
        "and inet_csk_enter_pingpong_mode in tcp_event_data_sent (RHEL backport of the "
        "pingpong API without 4a41f453bedf), tcp_dec_quickack_mode(sk, pkts), "
        "tcp_measure_rcv_mss without the PSH rule, tcp_schedule_loss_probe adding "
        "TCP_TIMEOUT_MIN jiffies, tcp_tso_autosize without the min_rtt term, CUBIC 2.3 "
        "with beta 717, TCP_MAX_QUICKACKS 16, no TCP_DEFAULT_INIT_RCVWND (a337531b942b "
        "backported: ~64 KB initial window)",
        "seed scenario S4: AlmaLinux 8 as the server",
    ),
    unverified=("HyStart in this kernel is the older ms-granularity version (ack train "
                "after delay_min/2 in ms); 6.x HyStart stands in",
                "tcp_cwnd_validate is the pre-2022 version (is_cwnd_limited may be "
                "forgotten within a window)"),
    quickack_dec_only_if_scheduled=False,
    pushed_on_full_psh=False,
    tso_rtt_log=0,
    tlp_timeout_in_us=False,
    delack_max_follows_rto_min=False,
    socket_timing_options=False,
    pingpong_sysctl=False,
    tcp_grow_skb=False,
    fin_cwnd_exempt=True,
)

WINDOWS: Final = LINUX.with_overrides(
    name="windows",
    description="Windows 10/Server: ACK every 2nd segment or after 200 ms; classic Nagle",
    sources=(
        "Microsoft KB 328890: TcpAckFrequency default 2; delayed-ACK timer 200 ms",
        "Windows 2000 TCP/IP docs (cc938206): TcpDelAckTicks default 2 (x100 ms)",
        "seed scenario S1: about 200 ms stall on Windows; S5: Windows NODELAY 100 % unbuffered",
    ),
    unverified=("Nagle variant (RFC 896 assumed, not Minshall)",
                "no quick-ACK or ping-pong logic", "timer granularity (exact 200 ms assumed)",
                "initial cwnd 10", "minimum RTO 300 ms (MinRto; Windows docs of the Vista era)",
                "no tail loss probe",
                "congestion control: Windows 10 1709+ defaults to CUBIC; Linux's CUBIC "
                "stands in for it"),
    nagle_style=NagleStyle.RFC896,
    timestamps=False,
    ack_style=AckStyle.CLASSIC,
    supports_cork=False,
    supports_quickack=False,
    classic_delack_us=200_000,
    classic_ack_every=2,
    autocorking=False,
    rto_min_us=300_000,
    probe0_min_us=300_000,
    tail_loss_probe=False,
    congestion=Congestion.CUBIC,
    socket_timing_options=False,
    pingpong_sysctl=False,
)

FREEBSD: Final = LINUX.with_overrides(
    name="freebsd",
    description="FreeBSD 13/14: ACK every 2nd segment or after net.inet.tcp.delacktime",
    sources=(
        "sys/netinet/tcp_timer.h TCPTV_DELACK; sysctl net.inet.tcp.delacktime",
        "seed scenario S4: FreeBSD 13.2 delayed ACK measured about 40 ms",
    ),
    unverified=("delacktime 40 ms taken from the S4 measurement; older headers say 100 ms",
                "Nagle variant (RFC 896 assumed)", "no quick-ACK budget modelled",
                "congestion control NewReno (FreeBSD 13's default; 14 moved to CUBIC); "
                "Linux's Reno stands in for it"),
    nagle_style=NagleStyle.RFC896,
    ack_style=AckStyle.CLASSIC,
    supports_cork=False,
    supports_quickack=False,
    classic_delack_us=40_000,
    autocorking=False,
    tail_loss_probe=False,
    congestion=Congestion.RENO,
    socket_timing_options=False,
    pingpong_sysctl=False,
)

MACOS: Final = LINUX.with_overrides(
    name="macos",
    description="macOS (XNU), net.inet.tcp.delayed_ack=3: ACK every other segment, PSH ACKed "
    "at once",
    sources=(
        "XNU bsd/netinet/tcp_input.c: tcp_delack_enabled default 3",
        "XNU bsd/netinet/tcp_cc.c: tcp_cc_delay_ack delays only without PSH and with one "
        "unACKed segment",
    ),
    unverified=("delayed-ACK timer 100 ms (old tcp_timer.h says 125 ms)",
                "stretch-ACK detection of mode 3 not modelled", "Nagle variant (RFC 896)",
                "congestion control CUBIC (XNU's default); Linux's CUBIC stands in for it"),
    nagle_style=NagleStyle.RFC896,
    ack_style=AckStyle.CLASSIC,
    supports_cork=False,
    supports_quickack=False,
    classic_delack_us=100_000,
    classic_ack_psh_at_once=True,
    autocorking=False,
    tail_loss_probe=False,
    congestion=Congestion.CUBIC,
    socket_timing_options=False,
    pingpong_sysctl=False,
)

PROFILES: Final[dict[str, StackProfile]] = {  # the TUI cycles in this order: OSes first
    p.name: p for p in (LINUX, LINUX_5_4, WINDOWS, FREEBSD, MACOS,
                        LINUX_6_6, LINUX_6_1, LINUX_5_15, LINUX_4_18)
}

TUNABLE: Final = frozenset(
    f.name for f in dataclasses.fields(StackProfile)
    if f.name not in {"name", "description", "sources", "unverified", "nagle_style",
                      "ack_style", "supports_cork", "supports_quickack", "congestion",
                      "route_quickack"}
)
"""Profile fields a scenario may override in its `tune` table."""

HOST_FIELDS: Final = frozenset({"syscall_us", "tx_segment_us", "host_latency_us", "wakeup_us",
                         "jiffy_phase_us"})
"""Tunable fields that describe the host's timing, not the kernel's rules."""

PER_SOCKET_FIELDS: Final = frozenset({"congestion"})
"""Kernel behaviour a real run can select per socket (TCP_CONGESTION)."""

NAMESPACE_SYSCTL_FIELDS: Final = {"pingpong_thresh": "net.ipv4.tcp_pingpong_thresh"}
"""Tunable fields a real run applies as per-network-namespace sysctls (in its own
namespaces, never the host's)."""

TIMING_OPTIONS: Final = {"delack_max": "TCP_DELACK_MAX_US", "rto_min": "TCP_RTO_MIN_US"}
"""Script options `set delack_max 5ms` / `set rto_min 50ms` and their socket options."""
TIMING_OPTION_FIELDS: Final = {"delack_max": "delack_max_us", "rto_min": "rto_min_us"}
"""The profile field each timing option overrides for its socket."""
TCP_TIMEOUT_MIN_J: Final = 2
"""TCP_TIMEOUT_MIN (jiffies): the smallest value TCP_RTO_MIN_US / TCP_DELACK_MAX_US take."""


def timing_option_error(profile: StackProfile, option: str, us: int) -> str:
    """Why do_tcp_setsockopt would refuse this TCP_RTO_MIN_US / TCP_DELACK_MAX_US value on
    this profile's kernel ("" if it accepts it): the option must exist, and its value in
    jiffies (usecs_to_jiffies, rounding up) must lie in [TCP_TIMEOUT_MIN, HZ/5]."""
    name = TIMING_OPTIONS[option]
    if not profile.socket_timing_options:
        return f"profile {profile.name!r} has no {name} (Linux 6.15+)"
    j = profile.us_to_jiffies(us)
    if not TCP_TIMEOUT_MIN_J <= j <= profile.hz // 5:
        lo = TCP_TIMEOUT_MIN_J * profile.tick_us / 1000
        return (f"{name} {us / 1000:g} ms is {j} jiffies at HZ={profile.hz}; the kernel "
                f"accepts {TCP_TIMEOUT_MIN_J} to {profile.hz // 5} ({lo:g} to 200 ms)")
    return ""

CONGESTION_CONTROLS: Final = tuple(c.value for c in Congestion)
"""Values of `StackProfile.congestion` (and of a scenario side's `congestion` key)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SocketOptions:
    """Options set before connect/accept."""

    nodelay: bool = False
    cork: bool = False
    quickack: bool | None = None
    """None: leave the default; False: TCP_QUICKACK=0 (ping-pong) before connecting."""
