/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The record nagle_watch.bpf.c hands to user space, and the constants both sides share.
 * realnet/watch/raw.py decodes `struct nw_event` with the same layout (RECORD there);
 * tests/watch/test_raw.py checks the two against this object's BTF.
 */
#ifndef NAGLE_WATCH_H
#define NAGLE_WATCH_H

/* record types */
#define NW_EV_SOCK 1        /* a socket is watched from now on: addresses, owner */
#define NW_EV_STATE 2       /* TCP state change (a = old, b = new) */
#define NW_EV_SEND 3        /* a send returned with bytes still queued, or with MSG_MORE */
#define NW_EV_RECV 4        /* (reserved) */
#define NW_EV_IN 5          /* an ACK arrived while data was held */
#define NW_EV_OUT 6         /* a segment left: pure ACK, held data, SYN/FIN/RST, timer
                               (a = ACK of the previous segment, b = setsockopt as SOCKOPT) */
#define NW_EV_TIMER_ARM 7   /* delayed-ACK timer or probe timer armed (a = expires) */
#define NW_EV_TIMER_FIRE 8  /* delayed-ACK or write timer fired (a = expires) */
#define NW_EV_MODE 9        /* quick/pingpong/ato changed (a = previous, packed) */
#define NW_EV_SOCKOPT 10    /* setsockopt returned (a = optname | val << 32, b = ret) */

/* the context a decision was taken in */
#define NW_CTX_UNKNOWN 0
#define NW_CTX_PROCESS 1
#define NW_CTX_SOFTIRQ 2
#define NW_CTX_DELACK_TIMER 3
#define NW_CTX_WRITE_TIMER 4
#define NW_CTX_SETSOCKOPT 5
#define NW_CTX_READ 6       /* inside a read, after its copy (tcp_cleanup_rbuf) */

/* per-CPU counters */
#define NW_C_EMITTED 0
#define NW_C_LOST 1          /* ring buffer full */
#define NW_C_RATE_LIMITED 2  /* over a socket's token bucket */
#define NW_C_SOCKS_FULL 3    /* socket table full: a socket not watched */
#define NW_COUNTERS 4

/* kernel constants (stable ABI values) */
#define NW_AF_INET 2
#define NW_AF_INET6 10
#define NW_IPPROTO_TCP 6
#define NW_SOL_TCP 6
#define NW_TCP_NODELAY 1
#define NW_TCP_CORK 3
#define NW_TCP_QUICKACK 12
#define NW_MSG_MORE 0x8000
#define NW_TCP_ESTABLISHED 1
#define NW_TCP_SYN_SENT 2
#define NW_TCP_SYN_RECV 3
#define NW_TCP_CLOSE 7
#define NW_TCP_LISTEN 10
#define NW_ICSK_TIME_PROBE0 3
#define NW_TH_FIN 0x01
#define NW_TH_SYN 0x02
#define NW_TH_RST 0x04
#define NW_TH_ACK 0x10

struct nw_event {
	__u64 ts_ns;        /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 sk;           /* the socket's address: its identity while it lives */
	__u64 jiffies;      /* bpf_jiffies64() when recorded */
	__u64 a;            /* per type, see above */
	__u64 b;
	__u32 tgid;
	__u32 tid;
	/* the socket's state when recorded */
	__u32 snd_una;
	__u32 snd_nxt;
	__u32 snd_sml;
	__u32 write_seq;
	__u32 rcv_nxt;
	__u32 rcv_wup;
	__u32 packets_out;
	__u32 snd_cwnd;
	__u32 snd_wnd;
	__u32 mss_cache;
	__u32 srtt_us;
	__u32 rto_j;        /* icsk_rto, jiffies */
	/* the segment (IN / OUT) */
	__u32 seq;
	__u32 ack;
	__u32 len;
	__u16 win;
	__u16 rcv_mss;
	__u8 type;
	__u8 ctx;
	__u8 tcpflags;
	__u8 state;
	__u8 nonagle;
	__u8 ack_pending;
	__u8 quick;
	__u8 pingpong;
	__u8 ato;           /* jiffies */
	__u8 icsk_pending;
	__u8 timer;         /* NW_CTX_DELACK_TIMER / NW_CTX_WRITE_TIMER */
	__u8 pad1;
	__u16 family;       /* SOCK only, as the addresses below */
	__u16 sport;
	__u16 dport;
	__u16 pad2;
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[16];
};

/* per watched socket, in the socks map */
struct sockval {
	__u64 held_since_ns;
	__u64 tb_ns;        /* token bucket: last refill */
	__u64 tokens;
	__u32 owner;        /* tgid that made it watched (0: by port or listener) */
	__u32 send_flags;   /* msg_flags of the send in progress */
	__u32 last_ack;     /* ACK field of the last segment sent */
	__u32 reading_tid;  /* a thread inside tcp_recvmsg, past its copy */
	__u32 sockopt_tid;  /* a thread inside setsockopt on this socket */
	__u8 held;          /* bytes were left queued and have not all left */
	__u8 quick;
	__u8 pingpong;
	__u8 ato;
};

/* set by user space before load (realnet/watch/loader.py CONFIG) */
struct nw_config {
	__u32 rate;         /* events a second per socket (token bucket) */
	__u32 burst;        /* bucket depth */
	__u16 port;         /* watch sockets with this local or peer port (0: none) */
	__u8 pid_filter;    /* watch sockets of the tgids in watch_tgids */
	__u8 segments;      /* report every segment of a watched socket (a trace's wire) */
	__u8 pad[4];
};

struct sockopt_call {
	__u64 sk;
	__s32 optname;
	__s32 val;
};

struct cpu_ctx {
	__u64 sk;           /* the socket whose timer runs on this CPU now */
	__u8 kind;
	__u8 softirq;       /* serving softirq vector + 1, 0 outside softirqs */
	__u8 pad[6];
};

#endif
