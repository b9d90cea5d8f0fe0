"""Run a scenario over real kernel sockets and record it as a `Trace` (source "realnet").

Owns: `run_real`, the entry point of every real run, and the local run (loopback or an
emulated link between two network namespaces): choosing the link, the sockets and their
options, the captures, and cleanup on every exit path (Ctrl-C and SIGTERM included). The
machinery both local and remote runs share (side processes, supervision, trace assembly)
lives in `realnet.core`; remote runs in `realnet.remote`. Imports flow runner -> remote ->
core, never back. Must not import simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario
from nagle_sim.trace import Trace
from realnet import cleanup, sockopts
from realnet.core import (
    NO_AUTOCORK,
    Progress,
    RealnetError,
    SideRunner,
    _int,
    _read_sysctl,
    base_meta,
    build_trace,
    capture_unavailable,
    check_platform,
    maxseg_for,
    netns_unavailable,
    report_retransmissions,
    rt_priority_available,
    rtt_s,
    run_timeout_s,
    segments_from_lo,
    segments_from_tuns,
    stall_timeout_s,
    supervise,
)

__all__ = ["RealnetError", "check_platform", "run_real"]


def run_real(scenario: Scenario, *, remote: str | None = None,
             progress: Progress | None = None, timeout_s: float | None = None,
             token: str | None = None) -> Trace:
    """Run ``scenario`` over real kernel sockets and return its trace.

    Loopback when both link delays are 0, else an `EmulatedLink` (root). With ``remote``
    ("HOST:PORT" of a ``nagle-sim realnet serve``) the server side runs there.

    Args:
        scenario: the scenario; its ``mss`` is applied with TCP_MAXSEG on both sides.
        remote: run the server side on a remote serve process.
        progress: called with one-line status messages (what is captured, what is missing).
        timeout_s: whole-run limit (default `run_timeout_s`).
        token: the remote serve's shared secret (default: ``$NAGLE_SIM_REALNET_TOKEN``).

    Returns:
        A `Trace` with ``source="realnet"``: ops with real start/end, captured segments
        (seq/ack relative to each side's ISN), TCP_INFO snapshots as ``tcp_info`` events.

    Raises:
        RealnetError: not Linux, delays without root, a remote that cannot be used.
    """
    check_platform()
    say = progress or (lambda _msg: None)
    emulated = bool(scenario.link.to_server_delay or scenario.link.to_client_delay)
    if emulated and not remote:
        missing = netns_unavailable()
        if missing:
            raise RealnetError(f"{scenario.source}: the link delays need an emulated link, and "
                               f"{missing}; run as root or set the link delays to 0")
    # Any run (loopback and remote too) first removes what runs killed by SIGKILL left.
    removed = cleanup.remove_stale_quietly()
    if removed:
        say(f"realnet: removed {len(removed)} leftovers of dead runs ({', '.join(removed[:3])}"
            + (", ..." if len(removed) > 3 else "") + ")")
    with _sigterm_as_interrupt():
        if remote:
            from realnet.remote import run_remote
            return run_remote(scenario, remote, progress=say, timeout_s=timeout_s, token=token)
        return _LocalRun(scenario, say, emulated, timeout_s).run()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds the run like Ctrl-C, so every ``finally`` (side processes, captures,
    namespaces, relay) runs. Only the main thread can install handlers; a run in a worker
    thread (the TUI) relies on PDEATHSIG and the next run's stale cleanup instead."""
    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:          # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _LocalRun:
    def __init__(self, scenario: Scenario, say: Progress, emulated: bool,
                 timeout_s: float | None) -> None:
        self.scenario = scenario
        self.say = say
        self.emulated = emulated
        self.timeout_s = timeout_s if timeout_s is not None else run_timeout_s(scenario)
        self.meta: dict[str, Any] = base_meta(scenario)

    def run(self) -> Trace:
        from realnet.capture import Capture

        sc = self.scenario
        with contextlib.ExitStack() as stack:
            captures: list[tuple[Side, Any]] = []
            if self.emulated:
                from realnet.netns import EmulatedLink

                mtu = max(1500, min(65535, maxseg_for(sc.link.mss, True) + 40))
                # A packet stays charged to its socket until the relay reads it from the
                # TUN queue, which autocork sees as a busy device queue. Keep autocork only
                # when the scenario models such a queue (tx_complete_us); otherwise it would
                # merge writes the model (a queue-less link) sends one by one.
                autocork = sc.link.tx_complete > 0
                self.say(f"realnet: emulated link, {sc.link.to_server_delay / 1000:g} ms to "
                         f"server / {sc.link.to_client_delay / 1000:g} ms to client, autocorking "
                         + ("on (the scenario models a device queue)" if autocork
                            else "off in both namespaces"))
                link = stack.enter_context(EmulatedLink(
                    sc.link.to_server_delay, sc.link.to_client_delay, mtu=mtu,
                    sysctls=None if autocork else NO_AUTOCORK))
                listener = link.socket_in("server")
                client = link.socket_in("client")
                server_addr = link.server_addr
                self.meta.update(link="emulated", link_mtu=mtu,
                                 tcp_autocorking=1 if autocork else 0)
                if link.relay_pid:
                    self.meta["relay_pid"] = link.relay_pid
            else:
                listener = socket.socket()
                client = socket.socket()
                server_addr = "127.0.0.1"
                self.meta.update(link="loopback",
                                 tcp_autocorking=_int(_read_sysctl("net.ipv4.tcp_autocorking")))
            stack.callback(listener.close)
            stack.callback(client.close)
            for s in (listener, client):
                sockopts.set_maxseg(s, maxseg_for(sc.link.mss, self.emulated))
            listener.bind((server_addr, 0))
            listener.listen(1)
            port = listener.getsockname()[1]
            # The model's congestion control (CUBIC by default, or the side's
            # `congestion`) is set per socket so both executors agree.
            notes = [sockopts.apply_initial(
                listener, nodelay=sc.server.options.nodelay, cork=False,
                quickack=sc.server.options.quickack,
                congestion=sockopts.congestion_for(sc.server.profile.congestion))]
            notes.append(sockopts.apply_initial(
                client, nodelay=sc.client.options.nodelay, cork=sc.client.options.cork,
                quickack=sc.client.options.quickack,
                congestion=sockopts.congestion_for(sc.client.profile.congestion)))
            self.meta["congestion_control"] = {
                side.value: sockopts.congestion_for(sc.side(side).profile.congestion)
                for side in Side}
            for note in filter(None, notes):
                self.say(f"realnet: {note}")
                self.meta.setdefault("notes", []).append(note)

            rt = rt_priority_available()
            self.meta["sched"] = f"SCHED_FIFO {rt}" if rt else "normal (not root)"
            sides = {
                Side.SERVER: SideRunner(Side.SERVER, sc.server, sc.source, listener=listener,
                                        rt_priority=rt),
                Side.CLIENT: SideRunner(Side.CLIENT, sc.client, sc.source, sock=client,
                                        address=(server_addr, port), rt_priority=rt),
            }
            for r in sides.values():
                stack.callback(r.cleanup)
            sides[Side.SERVER].start(foreign=(client,))
            sides[Side.CLIENT].start(foreign=(listener,))
            why_not = capture_unavailable()
            if why_not:
                self.meta["capture"] = f"unavailable: {why_not}"
                self.say(f"realnet: no packet capture ({why_not}): recording application "
                         "timings and TCP_INFO only")
            elif self.emulated:
                for side in Side:
                    cap = Capture(link.ifname, netns=link.ns(side.value), filter_ports={port},
                                  outgoing_only=False)
                    captures.append((side, cap))
                self.meta["capture"] = (f"AF_PACKET on {link.ifname} in each namespace "
                                        "(send and arrival times)")
            else:
                captures.append((Side.CLIENT, Capture("lo", filter_ports={port})))
                self.meta["capture"] = "AF_PACKET on lo (outgoing copies, port-filtered)"
                self.meta["gso"] = ("loopback passes GSO super-segments unsplit: a captured "
                                    "segment may carry several MSS; compare bytes")
            for _, cap in captures:
                cap.start()
                stack.callback(_stop_quietly, cap)

            # The server is in accept() before the client connects, as in the simulator.
            sides[Side.SERVER].go()
            sides[Side.SERVER].ready()
            time.sleep(0.001)
            sides[Side.CLIENT].go()
            outcome = supervise(sc, sides, timeout_s=self.timeout_s,
                                stall_s=stall_timeout_s(sc))
            for r in sides.values():
                r.join(5.0)
            # Let the last FIN / ACK cross the link before the captures stop.
            time.sleep(rtt_s(sc) + (0.03 if self.emulated else 0.01))
            packets = {side: cap.stop() for side, cap in captures}
            for side, cap in captures:
                if cap.stats is not None and cap.stats.kernel_drops:
                    self.meta.setdefault("capture_drops", {})[side.value] = cap.stats.kernel_drops
            offset = {side: cap.clock_offset_ns for side, cap in captures}
        logs = {side: r.log for side, r in sides.items()}
        if self.emulated and packets:
            segs = segments_from_tuns(packets, offset, port)
        elif packets:
            segs = segments_from_lo(packets[Side.CLIENT], offset[Side.CLIENT], port)
        else:
            segs = []
        trace = build_trace(sc, logs, segs, self.meta, outcome)
        report_retransmissions(trace, self.say)
        return trace


def _stop_quietly(cap: Any) -> None:
    with contextlib.suppress(Exception):
        cap.stop()
