"""``python -m realnet.watch --check``: does watch see the kernel's decisions here?

Owns: the self-test a user on another kernel runs before trusting watch. It watches the
demo program (realnet.watch.demo) in four variants — write-write-read, write-write-read
with TCP_QUICKACK after each read, a corked write, a MSG_MORE write — and reports, one
line per feature, whether the kernel's decision was seen: the hooks attached, a Nagle hold
with Minshall's evidence, the peer's delayed-ACK timer armed and fired, quick-ACK credit,
the ACK that released the hold, the probe timer releasing corked and MSG_MORE data, and
TCP_QUICKACK's ACK from inside setsockopt. About 1.5 s. Exit 0 when every feature was
seen, 1 when some were not (each named), 2 when watch cannot run at all.

Must not import rich, textual or simpy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from nagle_sim.model.events import Reason

from .loader import Config
from .session import Result, run


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    variant: str
    test: Callable[[Result], bool]
    needs: str
    """The hooks and fields it rests on (docs/watch.md)."""


def _codes(r: Result, side: str | None = None) -> set[str]:
    return {d.code for d in r.decisions if side is None or d.side == side}


FEATURES: tuple[Feature, ...] = (
    Feature("Nagle hold with Minshall's evidence (snd_sml − snd_una)", "wwr",
            lambda r: any(d.code == Reason.NAGLE_HOLD.name and d.data.get("sml_unacked")
                          for d in r.decisions),
            "sock_send_length; tcp_sock.write_seq, snd_nxt, snd_sml, snd_una, nonagle"),
    Feature("the peer's delayed-ACK timer armed (ato, ping-pong, quick-ACK credit)", "wwr",
            lambda r: Reason.DELACK_WAIT.name in _codes(r, "server"),
            "timer_start + kallsyms tcp_delack_timer; icsk_ack.ato/pingpong/quick"),
    Feature("the delayed-ACK timer firing and its ACK", "wwr",
            lambda r: Reason.DELACK_FIRED.name in _codes(r, "server"),
            "timer_expire_entry/exit, net_dev_start_xmit"),
    Feature("the ACK that released held data", "wwr",
            lambda r: Reason.ACK_RELEASE.name in _codes(r, "client"),
            "tcp_probe, net_dev_start_xmit"),
    Feature("quick-ACK credit (why the first round does not stall)", "wwr",
            lambda r: Reason.QUICKACK_MODE.name in _codes(r, "server"),
            "softirq_entry/exit, icsk_ack.quick"),
    Feature("a stall named nagle+delayed_ack across both sockets", "wwr",
            lambda r: any(s.cause == "nagle+delayed_ack" for s in r.stalls),
            "all of the above, both ends watched"),
    Feature("TCP_QUICKACK sending the pending ACK from setsockopt", "quickack",
            lambda r: Reason.QUICKACK_OPT.name in _codes(r, "server"),
            "syscalls:sys_enter/exit_setsockopt (tracefs ids)"),
    Feature("TCP_CORK held, released by the probe timer", "cork",
            lambda r: any(s.cause == "cork" for s in r.stalls)
            and Reason.PROBE0_ARMED.name in _codes(r, "client"),
            "icsk_pending, tcp_write_timer (kallsyms), timer_start/expire"),
    Feature("MSG_MORE named", "more",
            lambda r: any(s.cause == "msg_more" for s in r.stalls),
            "tcp_sendmsg_locked (msghdr.msg_flags)"),
)

VARIANTS: dict[str, list[str]] = {
    "wwr": ["--rounds", "3"], "quickack": ["--rounds", "2", "--quickack"],
    "cork": ["--rounds", "1", "--cork"], "more": ["--rounds", "1", "--more"],
}


def main(out: Callable[[str], None] = print) -> int:
    results: dict[str, Result] = {}
    for name, args in VARIANTS.items():
        results[name] = run(Config(), [sys.executable, "-m", "realnet.watch.demo",
                                       "--quiet", *args])
    rep = results["wwr"].report
    out(rep.summary() + (f" (HZ {rep.hz})" if rep.hz else ""))
    missing = 0
    for f in FEATURES:
        ok = f.test(results[f.variant])
        missing += not ok
        out(f"  {'ok     ' if ok else 'MISSING'} {f.name}" + ("" if ok else f"  [{f.needs}]"))
    lost = sum(r.counters.get("lost", 0) + r.counters.get("rate_limited", 0)
               for r in results.values())
    if lost:
        out(f"  note: {lost} records lost or rate-limited")
    out("watch works here" if not missing else
        f"{missing} feature(s) not seen on this kernel: see docs/watch.md for the fields "
        "and hooks each needs")
    return 0 if not missing else 1
