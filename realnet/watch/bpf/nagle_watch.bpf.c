// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * nagle-sim watch: the kernel's own small-packet decisions, from static tracepoints.
 *
 * What this program owns: choosing the sockets to watch (a process tree, a port), reading
 * the TCP state that decides Nagle, cork, MSG_MORE, delayed ACKs and the probe timer at the
 * moments the kernel acts, and handing each decision to user space as one fixed-size
 * record in a ring buffer. It never decides a cause itself: realnet/watch/decide.py words
 * the records (docs/watch.md lists every hook and field).
 *
 * Built once (realnet/watch/build.py, clang -target bpf -g, CO-RE) and shipped as
 * nagle_watch.bpf.o: the struct definitions below are our own minimal ones, marked
 * preserve_access_index, so libbpf relocates every field by name against the running
 * kernel's BTF and no vmlinux.h of any particular kernel is needed to build.
 *
 * Hooks: raw tracepoints (no tracefs needed) for inet_sock_set_state, sock_send_length,
 * sock_recv_length, tcp_sendmsg_locked, tcp_probe, net_dev_start_xmit, timer_start,
 * timer_expire_entry/exit and sched_process_fork; classic tracepoints for
 * syscalls:sys_enter/exit_setsockopt (the only syscall whose arguments we need).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "nagle_watch.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- our own view of the kernel's structs (CO-RE: relocated by field name) ---------- */

struct in6_addr { __u8 bytes[16]; };   /* read whole: its members differ by arch and version */

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	unsigned short sk_protocol;
	int sk_wmem_queued;
} __attribute__((preserve_access_index));

struct timer_list {
	unsigned long expires;
	void (*function)(struct timer_list *);
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct timer_list icsk_retransmit_timer;
	struct timer_list icsk_delack_timer;
	__u32 icsk_rto;
	__u8 icsk_pending;
	__u8 icsk_probes_out;
	__u8 icsk_backoff;
	struct {
		__u8 pending;
		__u8 quick;
		__u8 pingpong;
		__u32 ato;           /* a bitfield (8 bits) since 6.8, a whole __u32 before */
		__u16 rcv_mss;
	} icsk_ack;
} __attribute__((preserve_access_index));

struct tcp_sock {
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
	__u8 nonagle;            /* a 4-bit field */
} __attribute__((preserve_access_index));

struct sk_buff {
	unsigned int len;
	unsigned char *head;
	unsigned char *data;
	__u16 transport_header;
	__u16 network_header;
	struct sock *sk;
} __attribute__((preserve_access_index));

struct msghdr {
	unsigned int msg_flags;
} __attribute__((preserve_access_index));

struct socket { struct sock *sk; } __attribute__((preserve_access_index));
struct file { void *private_data; } __attribute__((preserve_access_index));
struct fdtable { unsigned int max_fds; struct file **fd; } __attribute__((preserve_access_index));
struct files_struct { struct fdtable *fdt; } __attribute__((preserve_access_index));
struct task_struct {
	int pid;
	int tgid;
	struct files_struct *files;
} __attribute__((preserve_access_index));

struct tcphdr_raw { __be16 source, dest; __be32 seq, ack_seq; __u8 doff_res; __u8 flags; __be16 window; };

struct trace_event_raw_sys_enter { __u64 ent; long id; unsigned long args[6]; };
struct trace_event_raw_sys_exit { __u64 ent; long id; long ret; };

/* ---- the kernel's own symbols -------------------------------------------------------- */

/* Untyped ksyms: libbpf resolves them from /proc/kallsyms at load. Timer callbacks are
 * recognised by address, so the socket behind a timer is found without a map lookup per
 * timer on the machine. */
extern const void tcp_delack_timer __ksym __weak;
extern const void tcp_write_timer __ksym __weak;

/* ---- configuration, filled in by user space before load ------------------------------ */

/* In a section of its own so that it sits at offset 0 there (realnet/watch/loader.py). */
const volatile struct nw_config cfg SEC(".rodata.cfg") = {
	.rate = 100000,
	.burst = 20000,
};

/* ---- maps ---------------------------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);          /* resized by user space (--ring-mb) */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} watch_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u16);
	__type(value, __u8);
} listen_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);             /* resized by user space (--max-sockets) */
	__type(key, __u64);
	__type(value, struct sockval);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);                    /* tid inside setsockopt */
	__type(value, struct sockopt_call);
} sockopt_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_ctx);
} cpu_ctx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NW_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* ---- helpers ------------------------------------------------------------------------- */

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += 1;
}

static __always_inline __u8 context_of(struct sock *sk, struct sockval *v)
{
	__u32 zero = 0;
	struct cpu_ctx *cc = bpf_map_lookup_elem(&cpu_ctx, &zero);
	if (cc && cc->sk == (__u64)sk && cc->kind)
		return cc->kind;
	if (cc && cc->softirq)
		return NW_CTX_SOFTIRQ;
	if (v) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		if (v->reading_tid == tid)
			return NW_CTX_READ;
		if (v->sockopt_tid == tid)
			return NW_CTX_SETSOCKOPT;
	}
	return cc ? NW_CTX_PROCESS : NW_CTX_UNKNOWN;
}

static __always_inline int rate_ok(struct sockval *v, __u64 now)
{
	/* token bucket per socket: cfg.rate tokens a second, at most cfg.burst */
	__u64 elapsed = now - v->tb_ns;
	__u64 add = elapsed * cfg.rate / 1000000000ULL;
	if (add) {
		__u64 t = v->tokens + add;
		v->tokens = t > cfg.burst ? cfg.burst : t;
		v->tb_ns = now;
	}
	if (!v->tokens) {
		count(NW_C_RATE_LIMITED);
		return 0;
	}
	v->tokens -= 1;
	return 1;
}

static __always_inline void fill_state(struct nw_event *e, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	e->snd_una = BPF_CORE_READ(tp, snd_una);
	e->snd_nxt = BPF_CORE_READ(tp, snd_nxt);
	e->snd_sml = BPF_CORE_READ(tp, snd_sml);
	e->write_seq = BPF_CORE_READ(tp, write_seq);
	e->rcv_nxt = BPF_CORE_READ(tp, rcv_nxt);
	e->rcv_wup = BPF_CORE_READ(tp, rcv_wup);
	e->packets_out = BPF_CORE_READ(tp, packets_out);
	e->snd_cwnd = BPF_CORE_READ(tp, snd_cwnd);
	e->snd_wnd = BPF_CORE_READ(tp, snd_wnd);
	e->mss_cache = BPF_CORE_READ(tp, mss_cache);
	e->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
	e->nonagle = BPF_CORE_READ_BITFIELD_PROBED(tp, nonagle);
	e->ack_pending = BPF_CORE_READ(icsk, icsk_ack.pending);
	e->quick = BPF_CORE_READ(icsk, icsk_ack.quick);
	e->pingpong = BPF_CORE_READ(icsk, icsk_ack.pingpong);
	e->ato = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ack.ato);
	e->rcv_mss = BPF_CORE_READ(icsk, icsk_ack.rcv_mss);
	e->icsk_pending = BPF_CORE_READ(icsk, icsk_pending);
	e->rto_j = BPF_CORE_READ(icsk, icsk_rto);
	e->state = BPF_CORE_READ(sk, __sk_common.skc_state);
	e->jiffies = bpf_jiffies64();
}

static __always_inline struct nw_event *reserve(struct sock *sk, struct sockval *v, __u8 type,
						__u8 ctx)
{
	__u64 now = bpf_ktime_get_ns();
	if (v && !rate_ok(v, now))
		return 0;
	struct nw_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(NW_C_LOST);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	__u64 id = bpf_get_current_pid_tgid();
	e->ts_ns = now;
	e->sk = (__u64)sk;
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->type = type;
	e->ctx = ctx;
	count(NW_C_EMITTED);
	return e;
}

/* A MODE event whenever the receive side's quick-ACK credit, ping-pong count or ato
 * changed since this socket was last looked at: the model's QUICK_*, PINGPONG_*, ATO_*. */
static __always_inline void check_mode(struct sock *sk, struct sockval *v, __u8 ctx)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	__u8 quick = BPF_CORE_READ(icsk, icsk_ack.quick);
	__u8 pp = BPF_CORE_READ(icsk, icsk_ack.pingpong);
	__u8 ato = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ack.ato);
	if (quick == v->quick && pp == v->pingpong && ato == v->ato)
		return;
	struct nw_event *e = reserve(sk, v, NW_EV_MODE, ctx);
	if (e) {
		fill_state(e, sk);
		e->a = v->quick | (v->pingpong << 8) | (v->ato << 16);
		bpf_ringbuf_submit(e, 0);
	}
	v->quick = quick;
	v->pingpong = pp;
	v->ato = ato;
}

static __always_inline void fill_addrs(struct nw_event *e, struct sock *sk)
{
	e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	e->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (e->family == NW_AF_INET6) {
		BPF_CORE_READ_INTO(&e->saddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&e->daddr, sk, __sk_common.skc_v6_daddr);
	} else {
		__u32 s = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(e->saddr, &s, 4);
		__builtin_memcpy(e->daddr, &d, 4);
	}
}

static __always_inline void emit_sock(struct sock *sk, struct sockval *v)
{
	struct nw_event *e = reserve(sk, 0, NW_EV_SOCK, NW_CTX_UNKNOWN);
	if (!e)
		return;
	fill_state(e, sk);
	fill_addrs(e, sk);
	e->a = v->owner;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int port_match(struct sock *sk)
{
	if (!cfg.port)
		return 0;
	__u16 sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	__u16 dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	return sport == cfg.port || dport == cfg.port;
}

static __always_inline int tgid_watched(void)
{
	if (!cfg.pid_filter)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&watch_tgids, &tgid) != 0;
}

/* Start watching sk (once). Returns its value, or 0 when the table is full. */
static __always_inline struct sockval *watch(struct sock *sk, __u32 owner)
{
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (v)
		return v;
	if (BPF_CORE_READ(sk, sk_protocol) != NW_IPPROTO_TCP)
		return 0;
	struct sockval init = {};
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	init.owner = owner;
	init.tokens = cfg.burst;
	init.tb_ns = bpf_ktime_get_ns();
	init.quick = BPF_CORE_READ(icsk, icsk_ack.quick);
	init.pingpong = BPF_CORE_READ(icsk, icsk_ack.pingpong);
	init.ato = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ack.ato);
	if (bpf_map_update_elem(&socks, &key, &init, BPF_NOEXIST)) {
		count(NW_C_SOCKS_FULL);
		return 0;
	}
	v = bpf_map_lookup_elem(&socks, &key);
	if (v)
		emit_sock(sk, v);
	return v;
}

/* The socket's value if it is watched, registering it on the way when this task or the
 * port says it should be. */
static __always_inline struct sockval *lookup_or_watch(struct sock *sk, int process_ctx)
{
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (v)
		return v;
	if ((process_ctx && tgid_watched()) || port_match(sk))
		return watch(sk, process_ctx ? bpf_get_current_pid_tgid() >> 32 : 0);
	return 0;
}

/* ---- socket life: registration and state changes ------------------------------------- */

SEC("raw_tp/inet_sock_set_state")
int nw_set_state(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	int oldstate = (int)ctx->args[1];
	int newstate = (int)ctx->args[2];
	if (BPF_CORE_READ(sk, sk_protocol) != NW_IPPROTO_TCP)
		return 0;
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (!v) {
		__u16 sport = BPF_CORE_READ(sk, __sk_common.skc_num);
		if (newstate == NW_TCP_LISTEN) {
			if (tgid_watched() || port_match(sk)) {
				__u8 one = 1;
				bpf_map_update_elem(&listen_ports, &sport, &one, BPF_ANY);
			}
			return 0;
		}
		if (newstate == NW_TCP_SYN_SENT && tgid_watched())
			v = watch(sk, bpf_get_current_pid_tgid() >> 32);
		else if (port_match(sk) || ((newstate == NW_TCP_SYN_RECV ||
					      newstate == NW_TCP_ESTABLISHED) &&
					     bpf_map_lookup_elem(&listen_ports, &sport)))
			v = watch(sk, 0);
		if (!v)
			return 0;
	}
	struct nw_event *e = reserve(sk, 0, NW_EV_STATE, context_of(sk, v));
	if (e) {
		fill_state(e, sk);
		fill_addrs(e, sk);     /* a connecting socket has its local port only now */
		e->a = oldstate;
		e->b = newstate;
		bpf_ringbuf_submit(e, 0);
	}
	if (newstate == NW_TCP_CLOSE)
		bpf_map_delete_elem(&socks, &key);
	return 0;
}

SEC("raw_tp/sched_process_fork")
int nw_fork(struct bpf_raw_tracepoint_args *ctx)
{
	if (!cfg.pid_filter)
		return 0;
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid || !bpf_map_lookup_elem(&watch_tgids, &ptgid))
		return 0;
	__u8 one = 1;
	bpf_map_update_elem(&watch_tgids, &ctgid, &one, BPF_ANY);
	return 0;
}

/* ---- the sender: what a send left queued --------------------------------------------- */

SEC("raw_tp/tcp_sendmsg_locked")
int nw_sendmsg(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	struct msghdr *msg = (struct msghdr *)ctx->args[1];
	struct sockval *v = lookup_or_watch(sk, 1);
	if (!v)
		return 0;
	v->send_flags = BPF_CORE_READ(msg, msg_flags);
	return 0;
}

SEC("raw_tp/sock_send_length")
int nw_send_len(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	int ret = (int)ctx->args[1];
	struct sockval *v = lookup_or_watch(sk, 1);
	if (!v)
		return 0;
	check_mode(sk, v, NW_CTX_PROCESS);
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 queued = BPF_CORE_READ(tp, write_seq) - BPF_CORE_READ(tp, snd_nxt);
	__u32 flags = v->send_flags;
	v->send_flags = 0;
	if (!queued && !(flags & NW_MSG_MORE) && !v->held)
		return 0;                      /* everything left: no decision to report */
	if (queued && !v->held) {
		v->held = 1;
		v->held_since_ns = bpf_ktime_get_ns();
	} else if (!queued) {
		v->held = 0;           /* whatever was held has left (this record says so) */
	}
	struct nw_event *e = reserve(sk, v, NW_EV_SEND, NW_CTX_PROCESS);
	if (!e)
		return 0;
	fill_state(e, sk);
	e->a = (__u64)(__s64)ret;
	e->b = flags;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* tcp_recvmsg calls tcp_rcv_space_adjust after copying and before tcp_cleanup_rbuf, the
 * read's own ACK: an ACK this thread sends between the two is a read's (READ_ACK). */
SEC("raw_tp/tcp_rcv_space_adjust")
int nw_reading(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	struct sockval *v = lookup_or_watch(sk, 1);
	if (v)
		v->reading_tid = (__u32)bpf_get_current_pid_tgid();
	return 0;
}

SEC("raw_tp/sock_recv_length")
int nw_recv_len(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	struct sockval *v = lookup_or_watch(sk, 1);
	if (!v)
		return 0;
	v->reading_tid = 0;
	return 0;
}

/* ---- segments in and out -------------------------------------------------------------- */

SEC("raw_tp/tcp_probe")
int nw_seg_in(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	struct sk_buff *skb = (struct sk_buff *)ctx->args[1];
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	/* report an arriving ACK only while data waits (it may release it), or every
	 * segment when user space records the wire (cfg.segments) */
	if (!v || (!v->held && !cfg.segments))
		return 0;
	struct tcphdr_raw th;
	if (bpf_probe_read_kernel(&th, sizeof(th), BPF_CORE_READ(skb, data)))
		return 0;
	__u32 ack = bpf_ntohl(th.ack_seq);
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 una = BPF_CORE_READ(tp, snd_una);
	if (!cfg.segments && (!(th.flags & NW_TH_ACK) || (__s32)(ack - una) <= 0))
		return 0;
	__u8 c = context_of(sk, v);
	check_mode(sk, v, c);
	struct nw_event *e = reserve(sk, v, NW_EV_IN, c);
	if (!e)
		return 0;
	fill_state(e, sk);
	e->seq = bpf_ntohl(th.seq);
	e->ack = ack;
	e->tcpflags = th.flags;
	e->len = BPF_CORE_READ(skb, len) - ((th.doff_res >> 4) << 2);
	e->win = bpf_ntohs(th.window);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("raw_tp/net_dev_start_xmit")
int nw_seg_out(struct bpf_raw_tracepoint_args *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx->args[0];
	struct sock *sk = BPF_CORE_READ(skb, sk);
	if (!sk)
		return 0;
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (!v)
		return 0;
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 thoff = BPF_CORE_READ(skb, transport_header);
	struct tcphdr_raw th;
	if (bpf_probe_read_kernel(&th, sizeof(th), head + thoff))
		return 0;
	unsigned char *data = BPF_CORE_READ(skb, data);
	__u32 hdrs = (__u32)(head + thoff - data) + ((th.doff_res >> 4) << 2);
	__u32 len = BPF_CORE_READ(skb, len) - hdrs;
	__u32 seq = bpf_ntohl(th.seq);
	__u32 ack = bpf_ntohl(th.ack_seq);
	__u32 prev_ack = v->last_ack;
	v->last_ack = ack;
	__u8 c = context_of(sk, v);
	int pure_ack = !len && !(th.flags & (NW_TH_SYN | NW_TH_FIN | NW_TH_RST));
	int report = pure_ack || v->held || (th.flags & (NW_TH_SYN | NW_TH_FIN | NW_TH_RST)) ||
		     c == NW_CTX_DELACK_TIMER || c == NW_CTX_WRITE_TIMER || c == NW_CTX_SETSOCKOPT ||
		     cfg.segments;
	if (!report)
		return 0;      /* a data segment nothing held: no decision (modes: next look) */
	check_mode(sk, v, c);
	if (len && v->held) {
		struct tcp_sock *tp = (struct tcp_sock *)sk;
		if (BPF_CORE_READ(tp, write_seq) == seq + len)
			v->held = 0;           /* the last queued byte leaves now */
	}
	struct nw_event *e = reserve(sk, v, NW_EV_OUT, c);
	if (!e)
		return 0;
	fill_state(e, sk);
	e->seq = seq;
	e->ack = ack;
	e->len = len;
	e->tcpflags = th.flags;
	e->win = bpf_ntohs(th.window);
	e->a = prev_ack;
	if (c == NW_CTX_SETSOCKOPT) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct sockopt_call *so = bpf_map_lookup_elem(&sockopt_calls, &tid);
		if (so)
			e->b = (__u32)so->optname | ((__u64)(__u32)so->val << 32);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* ---- timers: delayed ACK and the write timer (probe0, RTO, loss probe) ---------------- */

static __always_inline struct sock *timer_sock(struct timer_list *t, __u8 *kind)
{
	void *fn = BPF_CORE_READ(t, function);
	if (fn == &tcp_delack_timer) {
		*kind = NW_CTX_DELACK_TIMER;
		return (struct sock *)((void *)t - bpf_core_field_offset(struct inet_connection_sock,
									  icsk_delack_timer));
	}
	if (fn == &tcp_write_timer) {
		*kind = NW_CTX_WRITE_TIMER;
		return (struct sock *)((void *)t - bpf_core_field_offset(struct inet_connection_sock,
									  icsk_retransmit_timer));
	}
	return 0;
}

SEC("raw_tp/timer_start")
int nw_timer_start(struct bpf_raw_tracepoint_args *ctx)
{
	struct timer_list *t = (struct timer_list *)ctx->args[0];
	__u8 kind = 0;
	struct sock *sk = timer_sock(t, &kind);
	if (!sk)
		return 0;
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (!v)
		return 0;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	__u8 pending = BPF_CORE_READ(icsk, icsk_pending);
	/* The retransmission and loss-probe timers are re-armed by nearly every ACK; only
	 * the probe timer (what releases corked and MSG_MORE data) is a decision here. */
	if (kind == NW_CTX_WRITE_TIMER && pending != NW_ICSK_TIME_PROBE0)
		return 0;
	__u8 c = context_of(sk, v);
	check_mode(sk, v, c);
	struct nw_event *e = reserve(sk, v, NW_EV_TIMER_ARM, c);
	if (!e)
		return 0;
	fill_state(e, sk);
	e->timer = kind;
	e->a = BPF_CORE_READ(t, expires);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("raw_tp/timer_expire_entry")
int nw_timer_fire(struct bpf_raw_tracepoint_args *ctx)
{
	struct timer_list *t = (struct timer_list *)ctx->args[0];
	__u8 kind = 0;
	struct sock *sk = timer_sock(t, &kind);
	if (!sk)
		return 0;
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (!v)
		return 0;
	__u32 zero = 0;
	struct cpu_ctx *cc = bpf_map_lookup_elem(&cpu_ctx, &zero);
	if (cc) {
		cc->sk = key;
		cc->kind = kind;
	}
	check_mode(sk, v, kind);
	struct nw_event *e = reserve(sk, v, NW_EV_TIMER_FIRE, kind);
	if (!e)
		return 0;
	fill_state(e, sk);
	e->timer = kind;
	e->a = BPF_CORE_READ(t, expires);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("raw_tp/timer_expire_exit")
int nw_timer_done(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct cpu_ctx *cc = bpf_map_lookup_elem(&cpu_ctx, &zero);
	if (!cc || !cc->sk)
		return 0;
	struct sock *sk = (struct sock *)cc->sk;
	__u8 kind = cc->kind;
	cc->sk = 0;
	cc->kind = 0;
	__u64 key = (__u64)sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	/* what the timer changed and sent nothing to show (a delayed-ACK fire outside
	 * ping-pong inflates ato) is the timer's: stamped with its context */
	if (v)
		check_mode(sk, v, kind ? kind : NW_CTX_SOFTIRQ);
	return 0;
}

/* ---- softirq or process context ------------------------------------------------------
 * An ACK sent while this CPU serves a softirq answers an arriving segment (or a timer);
 * one sent in process context comes from a system call (a read, setsockopt, or the
 * segments the kernel queued while the application held the socket). */

SEC("raw_tp/softirq_entry")
int nw_softirq_entry(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct cpu_ctx *cc = bpf_map_lookup_elem(&cpu_ctx, &zero);
	if (cc)
		cc->softirq = (__u8)ctx->args[0] + 1;
	return 0;
}

SEC("raw_tp/softirq_exit")
int nw_softirq_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct cpu_ctx *cc = bpf_map_lookup_elem(&cpu_ctx, &zero);
	if (cc)
		cc->softirq = 0;
	return 0;
}

/* ---- options: setsockopt(TCP_NODELAY / TCP_CORK / TCP_QUICKACK) ----------------------- */

static __always_inline struct sock *sock_of_fd(int fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	struct socket *so = BPF_CORE_READ(f, private_data);
	if (!so)
		return 0;
	return BPF_CORE_READ(so, sk);
}

SEC("tracepoint/syscalls/sys_enter_setsockopt")
int nw_setsockopt_enter(struct trace_event_raw_sys_enter *ctx)
{
	int level = (int)ctx->args[1];
	int optname = (int)ctx->args[2];
	if (level != NW_SOL_TCP || (optname != NW_TCP_NODELAY && optname != NW_TCP_CORK &&
				    optname != NW_TCP_QUICKACK))
		return 0;
	struct sock *sk = sock_of_fd((int)ctx->args[0]);
	if (!sk)
		return 0;
	struct sockval *v = lookup_or_watch(sk, 1);
	if (!v)
		return 0;
	struct sockopt_call call = {};
	call.sk = (__u64)sk;
	call.optname = optname;
	int val = 0;
	if (ctx->args[4] >= sizeof(int))
		bpf_probe_read_user(&val, sizeof(val), (void *)ctx->args[3]);
	call.val = val;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	bpf_map_update_elem(&sockopt_calls, &tid, &call, BPF_ANY);
	v->sockopt_tid = tid;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_setsockopt")
int nw_setsockopt_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sockopt_call *call = bpf_map_lookup_elem(&sockopt_calls, &tid);
	if (!call)
		return 0;
	struct sock *sk = (struct sock *)call->sk;
	__u64 key = call->sk;
	struct sockval *v = bpf_map_lookup_elem(&socks, &key);
	if (v) {
		v->sockopt_tid = 0;
		check_mode(sk, v, NW_CTX_SETSOCKOPT);
		struct nw_event *e = reserve(sk, v, NW_EV_SOCKOPT, NW_CTX_SETSOCKOPT);
		if (e) {
			fill_state(e, sk);
			e->a = call->optname | ((__u64)(__u32)call->val << 32);
			e->b = (__u64)ctx->ret;
			bpf_ringbuf_submit(e, 0);
		}
	}
	bpf_map_delete_elem(&sockopt_calls, &tid);
	return 0;
}
