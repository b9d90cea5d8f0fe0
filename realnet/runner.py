"""Run a scenario over real kernel sockets and record it as a `Trace` (source "realnet").

Owns: `run_real`, the entry point of every real run, and the local run (loopback or an
emulated link between two network namespaces): choosing the link, the sockets and their
options, the captures, and cleanup on every exit path (Ctrl-C and SIGTERM included). The
machinery both local and remote runs share lives in its own modules: the side processes
(`realnet.side`, `realnet.child`), their records (`realnet.records`), supervision
(`realnet.supervise`), what this host can do (`realnet.host`) and trace assembly
(`realnet.assemble`); remote runs in `realnet.remote`. Imports flow runner -> remote ->
those, never back. Must not import simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from nagle_sim.model.config import NAMESPACE_SYSCTL_FIELDS
from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario, SetTiming, walk
from nagle_sim.trace import Trace
from realnet import cleanup, sockopts
from realnet.assemble import (
    base_meta,
    build_trace,
    report_retransmissions,
    segments_from_lo,
    segments_from_tuns,
    trace_origin_ns,
)
from realnet.host import (
    Progress,
    RealnetError,
    capture_unavailable,
    check_platform,
    maxseg_for,
    netns_unavailable,
    rt_priority_available,
)
from realnet.hostfacts import int_or_none as _int
from realnet.hostfacts import read_sysctl as _read_sysctl
from realnet.interrupt import check, sigterm_as_interrupt
from realnet.side import SideRunner
from realnet.supervise import rtt_s, run_timeout_s, stall_timeout_s, supervise

__all__ = ["RealnetError", "check_platform", "run_real"]

NO_AUTOCORK = {"net.ipv4.tcp_autocorking": "0"}
"""Sysctls of the emulated link's namespaces (see docs/realnet.md, "autocork")."""


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
    link = scenario.link
    emulated = link.emulated
    if remote and link.faults:
        raise RealnetError(f"{scenario.source}: [link] drop / hold are played by the relay of "
                           "an emulated link; a remote run crosses a real path, whose losses "
                           "cannot be scripted (run it locally, as root)")
    if emulated and not remote:
        missing = netns_unavailable()
        if missing:
            raise RealnetError(f"{scenario.source}: the link delays need an emulated link, and "
                               f"{missing}; run as root or set the link delays to 0")
    if not remote:
        refuse_unsupported(scenario)
    # Any run (loopback and remote too) first removes what runs killed by SIGKILL left.
    removed = cleanup.remove_stale_quietly()
    if removed:
        say(f"realnet: removed {len(removed)} leftovers of dead runs ({', '.join(removed[:3])}"
            + (", ..." if len(removed) > 3 else "") + ")")
    with sigterm_as_interrupt():
        if remote:
            from realnet.remote import run_remote
            return run_remote(scenario, remote, progress=say, timeout_s=timeout_s, token=token)
        return _LocalRun(scenario, say, emulated, timeout_s).run()


def namespace_sysctls(scenario: Scenario) -> dict[Side, dict[str, str]]:
    """Per-namespace sysctls each side's tuned profile asks for (e.g. `tune
    pingpong_thresh = 3` → net.ipv4.tcp_pingpong_thresh = 3 in that side's namespace)."""
    out: dict[Side, dict[str, str]] = {}
    for side in Side:
        spec = scenario.side(side)
        for field_name, key in NAMESPACE_SYSCTL_FIELDS.items():
            if field_name in spec.tune:
                out.setdefault(side, {})[key] = str(spec.tune[field_name])
    return out


def needs_private_namespace(scenario: Scenario) -> bool:
    """A loopback run must leave the host's namespace when it changes a per-namespace
    setting (a sysctl or a route metric)."""
    return bool(namespace_sysctls(scenario)) or scenario.link.quickack


def refuse_unsupported(scenario: Scenario) -> None:
    """One clear `RealnetError` for anything the scenario asks of this host's kernel that
    it cannot do: a sysctl it lacks, a socket option it lacks or refuses, root where a
    namespace is needed."""
    src = scenario.source
    emulated = scenario.link.emulated
    wanted = namespace_sysctls(scenario)
    for side, settings in wanted.items():
        for key in settings:
            if _read_sysctl(key) is None:
                raise RealnetError(f"{src}: {side.value} tunes {key.rsplit('.', 1)[1]}, but this "
                                   f"kernel ({os.uname().release}) has no {key} (it came with "
                                   "562b1fdf061b, Linux 6.7)")
    if (not emulated and wanted and len({tuple(sorted(v.items())) for v in wanted.values()}) > 1
            or not emulated and len(wanted) == 1):
        raise RealnetError(f"{src}: on loopback both sides share one network namespace, so "
                           "they cannot have different sysctls; give the link a delay "
                           "(each side then has its own namespace) or tune both sides alike")
    if not emulated and needs_private_namespace(scenario):
        missing = netns_unavailable()
        if missing:
            raise RealnetError(f"{src}: a loopback run with per-namespace settings (quickack "
                               f"route, sysctls) runs in a private namespace, and {missing}")
    for side in Side:
        why = sockopts.congestion_missing(
            scenario.side(side).profile.congestion)
        if why:
            raise RealnetError(f"{src}: {side.value}: {why}")
        for stmt in walk(scenario.side(side).script):
            if isinstance(stmt, SetTiming):
                why = sockopts.timing_unsupported(stmt.option, stmt.duration)
                if why:
                    raise RealnetError(f"{src}:{stmt.line}: {side.value}: {why}")


@dataclass(slots=True)
class _Path:
    """The path a local run crosses: its two sockets and the server's address, and the
    emulated link or private namespace they live in (None for this host's loopback)."""

    listener: socket.socket
    client: socket.socket
    server_addr: str
    link: Any = None
    private: Any = None


class _LocalRun:
    def __init__(self, scenario: Scenario, say: Progress, emulated: bool,
                 timeout_s: float | None) -> None:
        self.scenario = scenario
        self.say = say
        self.emulated = emulated
        self.timeout_s = timeout_s if timeout_s is not None else run_timeout_s(scenario)
        self.meta: dict[str, Any] = base_meta(scenario)

    def run(self) -> Trace:
        """In phases: the path (an emulated link, a private loopback namespace or this
        host's loopback) and its two sockets; their options; the two sides forked; the
        captures; the run supervised; then the trace assembled from the sides' logs and
        the captured segments. Everything opened is closed on the way out."""
        sc = self.scenario
        with contextlib.ExitStack() as stack:
            # check(): a SIGTERM whose exception Python swallowed (realnet.interrupt)
            # stops the run at the next phase rather than at its end.
            path = self._open_path(stack)
            check()
            port = self._prepare_sockets(stack, path)
            sides = self._start_sides(stack, path, port)
            check()
            captures = self._start_captures(stack, path, port)
            recorder = _kernel_recorder(port, self.say)
            if recorder is not None:
                stack.callback(recorder.stop)
            check()
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
            if recorder is not None:
                recorder.stop()
            for side, cap in captures:
                if cap.stats is not None and cap.stats.kernel_drops:
                    self.meta.setdefault("capture_drops", {})[side.value] = cap.stats.kernel_drops
            offset = {side: cap.clock_offset_ns for side, cap in captures}
        if self.emulated:
            self._relay_counts(path.link)
        logs = {side: r.log for side, r in sides.items()}
        if self.emulated and packets:
            segs = segments_from_tuns(packets, offset, port)
        elif packets:
            segs = segments_from_lo(packets[Side.CLIENT], offset[Side.CLIENT], port)
        else:
            segs = []
        trace = build_trace(sc, logs, segs, self.meta, outcome)
        if recorder is not None:
            _add_kernel_decisions(trace, recorder, trace_origin_ns(logs, segs))
        report_retransmissions(trace, self.say)
        return trace

    def _open_path(self, stack: contextlib.ExitStack[Any]) -> _Path:
        if self.emulated:
            return self._emulated_link(stack)
        if needs_private_namespace(self.scenario):
            return self._private_loopback(stack)
        self.meta.update(link="loopback",
                         tcp_autocorking=_int(_read_sysctl("net.ipv4.tcp_autocorking")))
        return _Path(socket.socket(), socket.socket(), "127.0.0.1")

    def _emulated_link(self, stack: contextlib.ExitStack[Any]) -> _Path:
        """Two namespaces joined by TUN devices and the relay (delays, rate, faults)."""
        from realnet.netns import EmulatedLink

        sc = self.scenario
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
        if sc.link.faults:
            self.say("realnet: scripted faults in the relay: "
                     + ", ".join(f.spec() for f in sc.link.faults))
        if sc.link.rate_bps:
            self.say(f"realnet: link rate {sc.link.rate_bps / 1e6:g} Mbit/s each way, "
                     f"drop-tail queue of {sc.link.queue} packets (in the relay)")
        link = stack.enter_context(EmulatedLink(
            sc.link.to_server_delay, sc.link.to_client_delay, mtu=mtu,
            sysctls=None if autocork else NO_AUTOCORK,
            side_sysctls={side.value: v for side, v in namespace_sysctls(sc).items()},
            rate_bps=sc.link.rate_bps, queue=sc.link.queue,
            quickack=sc.link.quickack,
            faults=[f.spec() for f in sc.link.faults]))
        self.meta.update(link="emulated", link_mtu=mtu,
                         tcp_autocorking=1 if autocork else 0)
        if link.relay_pid:
            self.meta["relay_pid"] = link.relay_pid
        return _Path(link.socket_in("server"), link.socket_in("client"), link.server_addr,
                     link=link)

    def _private_loopback(self, stack: contextlib.ExitStack[Any]) -> _Path:
        """Loopback in a namespace of its own, for per-namespace sysctls or a route's
        quickack."""
        from realnet.netns import PrivateLoopback, in_namespace

        sc = self.scenario
        sysctls = next(iter(namespace_sysctls(sc).values()), {})
        private = stack.enter_context(PrivateLoopback(
            sysctls={"net.ipv4.tcp_autocorking": _read_sysctl(
                "net.ipv4.tcp_autocorking") or "1", **sysctls},
            quickack=sc.link.quickack))
        self.say(f"realnet: loopback in a private namespace ({private.ns_name}): "
                 + ", ".join([*(f"{k} = {v}" for k, v in sysctls.items()),
                              *(["route quickack 1"] if sc.link.quickack else [])]))
        listener = private.socket()
        client = private.socket()
        with in_namespace(private.ns_name):
            autocorking = _int(_read_sysctl("net.ipv4.tcp_autocorking"))
        self.meta.update(link="loopback", netns=private.ns_name,
                         tcp_autocorking=autocorking)
        return _Path(listener, client, "127.0.0.1", private=private)

    def _prepare_sockets(self, stack: contextlib.ExitStack[Any], path: _Path) -> int:
        """Both sockets' MSS and initial options (the model's congestion control per
        socket, so both executors agree); the listener bound. Returns its port."""
        sc = self.scenario
        listener, client = path.listener, path.client
        applied = namespace_sysctls(sc)
        if applied:
            self.meta["namespace_sysctls"] = {side.value: v for side, v in applied.items()}
        if sc.link.quickack:
            self.meta["route_quickack"] = True
        stack.callback(listener.close)
        stack.callback(client.close)
        for s in (listener, client):
            sockopts.set_maxseg(s, maxseg_for(sc.link.mss, self.emulated))
        listener.bind((path.server_addr, 0))
        listener.listen(1)
        port: int = listener.getsockname()[1]
        # The model's congestion control (CUBIC by default, or the side's
        # `congestion`) is set per socket so both executors agree.
        notes = [sockopts.apply_initial(
            listener, nodelay=sc.server.options.nodelay, cork=False,
            quickack=sc.server.options.quickack,
            congestion=sc.server.profile.congestion)]
        notes.append(sockopts.apply_initial(
            client, nodelay=sc.client.options.nodelay, cork=sc.client.options.cork,
            quickack=sc.client.options.quickack,
            congestion=sc.client.profile.congestion))
        self.meta["congestion_control"] = {
            side.value: sc.side(side).profile.congestion
            for side in Side}
        for note in filter(None, notes):
            self.say(f"realnet: {note}")
            self.meta.setdefault("notes", []).append(note)
        return port

    def _start_sides(self, stack: contextlib.ExitStack[Any], path: _Path,
                     port: int) -> dict[Side, SideRunner]:
        """Both sides forked, each closing the other's socket, waiting for `go`."""
        sc = self.scenario
        rt = rt_priority_available()
        self.meta["sched"] = f"SCHED_FIFO {rt}" if rt else "normal (not root)"
        sides = {
            Side.SERVER: SideRunner(Side.SERVER, sc.server, sc.source, listener=path.listener,
                                    rt_priority=rt),
            Side.CLIENT: SideRunner(Side.CLIENT, sc.client, sc.source, sock=path.client,
                                    address=(path.server_addr, port), rt_priority=rt),
        }
        for r in sides.values():
            stack.callback(r.cleanup)
        sides[Side.SERVER].start(foreign=(path.client,))
        sides[Side.CLIENT].start(foreign=(path.listener,))
        return sides

    def _start_captures(self, stack: contextlib.ExitStack[Any], path: _Path,
                        port: int) -> list[tuple[Side, Any]]:
        """AF_PACKET captures of the run's port (none where capture is unavailable)."""
        from realnet.capture import Capture

        captures: list[tuple[Side, Any]] = []
        why_not = capture_unavailable()
        if why_not:
            self.meta["capture"] = f"unavailable: {why_not}"
            self.say(f"realnet: no packet capture ({why_not}): recording application "
                     "timings and TCP_INFO only")
        elif self.emulated:
            link = path.link
            for side in Side:
                cap = Capture(link.ifname, netns=link.ns(side.value), filter_ports={port},
                              outgoing_only=False)
                captures.append((side, cap))
            self.meta["capture"] = (f"AF_PACKET on {link.ifname} in each namespace "
                                    "(send and arrival times)")
        else:
            private = path.private
            captures.append((Side.CLIENT, Capture(
                "lo", netns=private.ns_name if private else None, filter_ports={port})))
            self.meta["capture"] = "AF_PACKET on lo (outgoing copies, port-filtered)"
            self.meta["gso"] = ("loopback passes GSO super-segments unsplit: a captured "
                                "segment may carry several MSS; compare bytes")
        for _, cap in captures:
            cap.start()
            stack.callback(_stop_quietly, cap)
        return captures

    def _relay_counts(self, link: Any) -> None:
        """The relay's drop-tail drops and scripted losses, reported when it exits (after
        the run's ``with`` block)."""
        sc = self.scenario
        if not isinstance(link.relay_stats, dict):
            return
        dirs = link.relay_stats.get("directions")
        if isinstance(dirs, dict) and sc.link.rate_bps:
            self.meta["link_drops"] = sum(int(d.get("dropped", 0)) for d in dirs.values()
                                          if isinstance(d, dict))
        if isinstance(dirs, dict) and sc.link.faults:
            self.meta["link_lost"] = sum(int(d.get("lost", 0)) for d in dirs.values()
                                         if isinstance(d, dict))


def _kernel_recorder(port: int, say: Progress) -> Any:
    """watch attached to the run's port (the kernel's own decisions, `"by": "kernel"` in
    the trace), or None with the reason said once when it cannot load here."""
    from realnet.watch.record import KernelRecorder
    recorder = KernelRecorder(port)
    why = recorder.start()
    if why is not None:
        say(f"realnet: the kernel's decisions are not recorded ({why})")
    return recorder


def _add_kernel_decisions(trace: Trace, recorder: Any, t0_ns: int) -> None:
    events = recorder.events(t0_ns)
    trace.meta["kernel_decisions"] = recorder.meta(len(events))
    if events:
        trace.events = sorted([*trace.events, *events], key=lambda e: e.t)


def _stop_quietly(cap: Any) -> None:
    with contextlib.suppress(Exception):
        cap.stop()
