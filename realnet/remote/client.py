"""The client half of a remote run: this host runs the client side, a serve the server's.

Owns: `run_remote` (connect, prove the token, sample the clocks, send the scenario text,
run the client side here while polling the serve's state, read its log and packets back
with every field bounded) and `RemoteSide` (the serve's side as the supervisor sees it),
then the trace: the serve's times on this host's clock (`realnet.remote.clock`), both
captures merged (`realnet.remote.merge`). Must not import simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario
from nagle_sim.scenario.steps import steps
from nagle_sim.trace import Outcome, Trace
from realnet import hostfacts, sockopts
from realnet.assemble import (
    Seg,
    base_meta,
    build_trace,
    report_retransmissions,
    segments_from_lo,
)
from realnet.host import (
    Progress,
    RealnetError,
    capture_unavailable,
    maxseg_for,
    rt_priority_available,
)
from realnet.records import LogReader, SideLog
from realnet.remote.clock import estimate_offset
from realnet.remote.merge import SOURCE_KEY, causality, merge_captures
from realnet.remote.protocol import (
    CLOCK_SAMPLES,
    CONNECT_TIMEOUT_S,
    MAX_PACKET_FLAGS,
    MAX_PACKET_LEN,
    MAX_REMOTE_PACKETS,
    MAX_REPLY_LINE_BYTES,
    MAX_RESULT_NOTES,
    PROTOCOL,
    REPLY_DEADLINE_S,
    REPLY_TIMEOUT_S,
    SEND_TIMEOUT_S,
    STATUS_INTERVAL_S,
    TOKEN_ENV,
    Channel,
    ProtocolError,
    check_token,
    nonce_ok,
    printable,
    scenario_name,
    scenario_text,
    token_proof,
)
from realnet.side import SideRunner
from realnet.supervise import (
    RunEnd,
    run_timeout_s,
    script_size,
    stall_timeout_s,
    supervise,
)


class RemoteSide:
    """The remote server side as `supervise` sees it (polled over the control channel)."""

    def __init__(self, chan: Channel, max_ops: int) -> None:
        self.chan = chan
        self.reader = LogReader(max_ops=max_ops)
        self.log = SideLog()
        self.meta: dict[str, Any] = {}
        self.packets: list[Any] = []
        self._streaming = False
        self._finished = False
        self._blocked = False
        self._progress = 0
        self._waiting = ("", 0)
        self._last = 0.0

    def _refresh(self) -> None:
        now = time.monotonic()
        if self._finished or now - self._last < STATUS_INTERVAL_S:
            return
        self._last = now
        self.chan.send({"type": "status"})
        self._receive_reply()

    def _receive_reply(self) -> None:
        """One status reply, or the whole streamed result, within `REPLY_DEADLINE_S` (a
        serve that keeps streaming must not keep the client reading forever)."""
        deadline = time.monotonic() + REPLY_DEADLINE_S
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise ProtocolError("reply deadline")
                msg = self.chan.recv(min(REPLY_TIMEOUT_S, left))
            except ProtocolError:
                if time.monotonic() < deadline:
                    raise
                raise ProtocolError(f"the server's reply did not end within "
                                    f"{REPLY_DEADLINE_S:g} s (timeout)") from None
            if self._handle(msg):
                return

    def _handle(self, msg: dict[str, Any]) -> bool:
        """Take one message; True once a reply is complete (a status or the result)."""
        kind = msg.get("type")
        if kind in ("log", "packets"):
            # the result stream has begun: only more of it, then the result, may follow
            self._streaming = True
        if kind == "log":
            records = msg.get("records")
            if not isinstance(records, list) or not records:
                raise ProtocolError("malformed log chunk (not a non-empty list)")
            try:
                for rec in records:
                    self.reader.add(rec)
            except ValueError as exc:
                raise ProtocolError(f"malformed log record: {exc}") from None
            return False
        if kind == "packets":
            self._add_packets(msg.get("packets"))
            return False
        if kind == "result":
            if not self.reader.ended:
                raise ProtocolError("the result came without the server side's end record")
            meta = msg.get("meta")
            if not isinstance(meta, dict):
                raise ProtocolError("malformed result (no meta)")
            self.meta = {k: printable(v, 500) if isinstance(v, str) else
                         [printable(x, 500) for x in v[:MAX_RESULT_NOTES]
                          if isinstance(x, str)]
                         for k, v in meta.items()
                         if k in _RESULT_TEXT and isinstance(v, str | list)}
            for key in ("capture_clock_offset_ns", "server_capture_drops",
                        "server_capture_truncated"):
                if type(meta.get(key)) is int and abs(meta[key]) < 1 << 63:
                    self.meta[key] = meta[key]
            self.log = self.reader.log
            if self.log.error:
                self.log.error = printable(self.log.error, 2000)
            self._finished = True
            return True
        if kind == "status":
            if self._streaming:
                raise ProtocolError("a status reply in the middle of the streamed result")
            blocked, progress = msg.get("blocked"), msg.get("progress")
            waiting, line = msg.get("waiting", ""), msg.get("line", 0)
            if not (isinstance(blocked, bool) and type(progress) is int
                    and isinstance(waiting, str) and type(line) is int):
                raise ProtocolError("malformed status reply")
            self._blocked, self._progress = blocked, progress
            self._waiting = (printable(waiting, 200), line)
            return True
        if kind == "error":
            raise RealnetError(f"remote server: {printable(msg.get('error'), 2000)}")
        raise ProtocolError(f"unexpected reply type {printable(repr(kind), 40)}")

    def _add_packets(self, rows: Any) -> None:
        """The serve's captured packets (compact rows), every field checked and bounded;
        more than `MAX_REMOTE_PACKETS` in all is refused (an honest serve cuts its
        capture there and says so)."""
        from realnet.capture import CapturedPacket

        if not isinstance(rows, list) or not rows:
            raise ProtocolError("malformed packets chunk (not a non-empty list)")
        if len(self.packets) + len(rows) > MAX_REMOTE_PACKETS:
            raise ProtocolError(f"the server sent more than {MAX_REMOTE_PACKETS} captured "
                                "packets (the limit)")
        for row in rows:
            if not (isinstance(row, list) and len(row) == 9 and _row_ok(row)):
                raise ProtocolError("malformed captured packet from the server")
            t, sport, dport, seq, ack, flags, length, win, out = row
            self.packets.append(CapturedPacket(t, "", sport, "", dport, seq, ack,
                                               _FLAGS.setdefault(flags, flags), length, win,
                                               bool(out)))

    @property
    def finished(self) -> bool:
        self._refresh()
        return self._finished

    @property
    def blocked(self) -> bool:
        return self._blocked

    @property
    def progress(self) -> int:
        return self._progress

    def waiting_text(self) -> tuple[str, int]:
        return self._waiting

    def abort(self) -> None:
        if self._finished:
            return
        with contextlib.suppress(OSError, ProtocolError, RealnetError):
            self.chan.send({"type": "abort"})
            self._receive_reply()


_FLAGS: dict[str, str] = {}
"""One string per flags value: ~50 B saved on each of up to `MAX_REMOTE_PACKETS` rows."""
_ROW_LIMITS = (1 << 63, 1 << 16, 1 << 16, 1 << 32, 1 << 32, None, MAX_PACKET_LEN + 1,
               1 << 16, 2)
"""Exclusive upper bound of each field of a packet row (t_ns, sport, dport, seq, ack,
flags, payload_len, window, outgoing); all are ≥ 0."""


def _row_ok(row: list[Any]) -> bool:
    for value, limit in zip(row, _ROW_LIMITS, strict=True):
        if limit is None:
            if not (isinstance(value, str) and len(value) <= MAX_PACKET_FLAGS
                    and set(value) <= set("SFRPA")):
                return False
        elif type(value) is not int or not 0 <= value < limit:
            return False
    return True


_RESULT_TEXT = ("server_kernel", "server_sched", "server_notes", "server_congestion",
                "server_congestion_note", "server_capture")


def parse_remote(remote: str) -> tuple[str | None, str, int]:
    """``[TOKEN@]HOST:PORT`` -> (token or None, host, port)."""
    token, _, address = remote.rpartition("@")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise RealnetError("--remote: use HOST:PORT (or TOKEN@HOST:PORT), "
                           "e.g. 127.0.0.1:7070")
    return token or None, host.strip("[]"), int(port)


def _clock_offset(chan: Channel) -> tuple[int, int]:
    """(server perf - client perf, best round trip) in ns, NTP-style over the channel."""
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_SAMPLES):
        t1 = time.perf_counter_ns()
        chan.send({"type": "clock"})
        reply = chan.recv(REPLY_TIMEOUT_S)
        t3 = time.perf_counter_ns()
        _raise_error(reply)
        perf = reply.get("perf_ns")
        if reply.get("type") != "clock" or type(perf) is not int:
            raise ProtocolError("malformed clock reply")
        rtt = t3 - t1
        if best is None or rtt < best[1]:
            best = (perf - (t1 + t3) // 2, rtt)
    assert best is not None
    return best


def _raise_error(msg: dict[str, Any]) -> None:
    if msg.get("type") == "error":
        raise RealnetError(f"remote server: {printable(msg.get('error'), 2000)}")


def run_remote(scenario: Scenario, remote: str, *, progress: Progress | None = None,
               timeout_s: float | None = None, token: str | None = None) -> Trace:
    """Client side here, server side on ``remote``; both sides' records merged into one trace.

    Raises:
        RealnetError: the remote cannot be reached, refuses the token, the protocol or the
            scenario, sends something malformed, goes silent or away. One line each.
    """
    from realnet.capture import Capture

    say = progress or (lambda _msg: None)
    in_address, host, port = parse_remote(remote)
    token = token or in_address or os.environ.get(TOKEN_ENV) or None
    shown = f"{host}:{port}"
    if token is not None:
        check_token(token, "--token")
    try:
        ctl = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except (OSError, OverflowError) as exc:
        raise RealnetError(f"--remote {shown}: cannot connect: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    ctl.settimeout(SEND_TIMEOUT_S)
    chan = Channel(ctl, MAX_REPLY_LINE_BYTES)
    try:
        return _run_remote(scenario, shown, host, token, chan, ctl, say, timeout_s, Capture)
    except RealnetError as exc:
        text = printable(exc, 2000)
        raise RealnetError(text if text.startswith("--remote") else
                           f"--remote {shown}: {text}") from None
    except ProtocolError as exc:
        raise RealnetError(f"--remote {shown}: {_explain(exc)}") from None
    except OSError as exc:
        raise RealnetError(f"--remote {shown}: the control connection failed (peer gone?): "
                           f"{exc.strerror or exc}") from None
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise RealnetError(f"--remote {shown}: malformed reply from the server: "
                           f"{printable(exc, 200)}") from None
    finally:
        with contextlib.suppress(OSError):
            chan.send({"type": "bye"})
        ctl.close()


def _explain(exc: ProtocolError) -> str:
    text = printable(exc, 500)
    if "closed the control connection" in text:
        return f"the remote server went away ({text})"
    if "timeout" in text:
        return f"the remote server did not answer ({text})"
    return f"bad reply from the remote server: {text}"


def _run_remote(scenario: Scenario, remote: str, host: str, token: str | None,
                chan: Channel, ctl: socket.socket, say: Progress, timeout_s: float | None,
                capture_cls: Any) -> Trace:
    challenge = chan.recv(REPLY_TIMEOUT_S)
    _raise_error(challenge)
    nonce, auth = challenge.get("nonce"), challenge.get("auth")
    if challenge.get("type") != "challenge" or challenge.get("protocol") != PROTOCOL \
            or not nonce_ok(nonce) or auth not in ("token", "none"):
        raise ProtocolError("this is not a nagle-sim realnet serve (no valid challenge)")
    nonce = str(nonce)
    if auth == "token" and token is None:
        raise RealnetError(f"--remote {remote}: the server needs its token: pass --token, "
                           f"TOKEN@HOST:PORT or set {TOKEN_ENV} (serve prints it at start)")
    client_nonce = secrets.token_hex(16)
    hello_msg: dict[str, Any] = {"type": "hello", "protocol": PROTOCOL, "nonce": client_nonce}
    if auth == "token" and token is not None:
        hello_msg["proof"] = token_proof(token, "client", nonce, client_nonce)
    chan.send(hello_msg)
    hello = chan.recv(REPLY_TIMEOUT_S)
    _raise_error(hello)
    if hello.get("type") != "hello":
        raise ProtocolError("expected the server's hello")
    if auth == "token" and token is not None:
        proof = hello.get("proof")
        if not isinstance(proof, str) or not hmac.compare_digest(
                proof, token_proof(token, "server", nonce, client_nonce)):
            raise ProtocolError("the server could not prove it knows the token")
    offset_ns, rtt_ns = _clock_offset(chan)
    # the data socket is bound before the run is asked for: the serve accepts the data
    # connection from this address and port only (named on the authenticated channel)
    local_addr = ctl.getsockname()[0]
    client = socket.socket(ctl.family, socket.SOCK_STREAM)
    try:
        client.bind((local_addr, 0))
        chan.send({"type": "run", "scenario": scenario_text(scenario),
                   # the serve names the scenario in its errors and log by the file's
                   # name only: this host's directories are none of its business
                   "where": scenario_name(scenario.source),
                   "data_from": [local_addr, client.getsockname()[1]]})
        return _run_data(scenario, remote, host, hello, chan, client, local_addr, say,
                         timeout_s, capture_cls, offset_ns, rtt_ns)
    finally:
        client.close()


def _run_data(scenario: Scenario, remote: str, host: str, hello: dict[str, Any],
              chan: Channel, client: socket.socket, local_addr: str, say: Progress,
              timeout_s: float | None, capture_cls: Any, offset_ns: int,
              rtt_ns: int) -> Trace:
    """The run after its request: wait for the serve's data port, run the client side on
    ``client`` (bound, unconnected) and merge both sides."""
    ready = chan.recv(REPLY_TIMEOUT_S)
    _raise_error(ready)
    data_port = ready.get("port")
    if ready.get("type") != "ready" or type(data_port) is not int or not 0 < data_port < 65536:
        raise ProtocolError("malformed ready reply")
    server_facts = hostfacts.clean_facts(hello.get("facts"))
    meta = _remote_meta(scenario, remote, hello)
    client_facts = _prepare_client(scenario, client, local_addr, meta)
    rt = rt_priority_available()
    meta["sched"] = f"SCHED_FIFO {rt}" if rt else "normal (not root)"
    runner = SideRunner(Side.CLIENT, scenario.client, scenario.source, sock=client,
                        address=(host, data_port), rt_priority=rt)
    far = RemoteSide(chan, max_ops=script_size(scenario.server.script).statements + 2)
    ifname = client_facts.get("interface")
    outcome, packets, local_off = _run_sides(
        scenario, runner, far, _Capturing(capture_cls, ifname, local_addr, data_port),
        meta, say, timeout_s, rtt_ns)
    meta.update(far.meta)
    _host_facts(meta, far, server_facts, client_facts, say)
    segs, server_log = _both_captures(scenario, meta, far, packets, local_off, data_port,
                                      same_host_lo=ifname == "lo", offset_ns=offset_ns,
                                      rtt_ns=rtt_ns)
    outcome = _name_remote_failure(scenario, outcome)
    if outcome.outcome is Outcome.OK and server_log.error:
        outcome = RunEnd(Outcome.ERROR, server_log.error)
    for key, log in (("sched", runner.log), ("server_sched", server_log)):
        if log.rt_refused:
            meta[key] = "normal (SCHED_FIFO refused)"
    trace = build_trace(scenario, {Side.CLIENT: runner.log, Side.SERVER: server_log}, segs,
                        meta, outcome)
    report_retransmissions(trace, say)
    return trace


def _remote_meta(scenario: Scenario, remote: str, hello: dict[str, Any]) -> dict[str, Any]:
    """The trace's meta for a run against ``remote``: its kernel, and that the scenario's
    link is not emulated (the real path's apply)."""
    kernel = hello.get("kernel")
    meta = base_meta(scenario, remote=True)
    meta.update(link="remote", remote=remote,
                server_kernel=printable(kernel, 100) if isinstance(kernel, str) else None)
    if scenario.link.to_server_delay or scenario.link.to_client_delay or scenario.link.rate_bps:
        meta.setdefault("notes", []).append(
            "the scenario's link (delays, rate, queue) is not emulated on a remote run: the "
            "real path's apply (meta.path: measured from the captures; compare gives the "
            "model the path's delays and rate)")
    return meta


def _prepare_client(scenario: Scenario, client: socket.socket, local_addr: str,
                    meta: dict[str, Any]) -> dict[str, Any]:
    """The client socket's MSS and options set; this host's facts (with the congestion
    control the socket got, and why not the profile's when it could not)."""
    sockopts.set_maxseg(client, maxseg_for(scenario.link.mss))
    opts = scenario.client.options
    note = sockopts.apply_initial(client, nodelay=opts.nodelay, cork=opts.cork,
                                  quickack=opts.quickack,
                                  congestion=hostfacts.profile_congestion(
                                      scenario.client.profile))
    client_facts = hostfacts.collect(local_addr=local_addr)
    client_facts["congestion"] = {"client": hostfacts.congestion_of(client)}
    if note:
        meta.setdefault("notes", []).append(note)
        client_facts["congestion_notes"] = {"client": note}
    return client_facts


@dataclass(frozen=True, slots=True)
class _Capturing:
    """How this host captures the data connection: the capture class (AF_PACKET, or a
    test's), the interface holding ``local_addr`` (None: none does) and the data port."""

    capture_cls: Any
    ifname: str | None
    local_addr: str
    data_port: int


def _run_sides(scenario: Scenario, runner: SideRunner, far: RemoteSide, capturing: _Capturing,
               meta: dict[str, Any], say: Progress, timeout_s: float | None,
               rtt_ns: int) -> tuple[RunEnd, list[Any], int]:
    """Run the client side here under supervision with the serve's, capturing where this
    host can: (how the run ended, this host's packets, their clock offset)."""
    cap = None
    try:
        runner.start()
        ifname = capturing.ifname
        why_not = capture_unavailable() or (None if ifname else
                                            f"no interface holds {capturing.local_addr}")
        if why_not:
            meta["capture"] = f"unavailable: {why_not}"
            say(f"realnet: no packet capture here ({why_not})")
        else:
            cap = capturing.capture_cls(ifname, filter_ports={capturing.data_port},
                                        outgoing_only=False).start()
            meta["capture"] = f"AF_PACKET on {ifname} (this host: send and arrival times)"
        runner.go()
        limit = timeout_s if timeout_s is not None else run_timeout_s(scenario)
        outcome = supervise(scenario, {Side.CLIENT: runner, Side.SERVER: far},
                            timeout_s=limit, stall_s=stall_timeout_s(scenario) + 1.0)
        runner.join(5.0)
        far.abort()
        time.sleep(min(2.0, 2 * rtt_ns / 1e9 + 0.03))   # the last ACK / FIN reaches us
        packets = cap.stop() if cap is not None else []
    finally:
        runner.cleanup()
        if cap is not None:
            with contextlib.suppress(Exception):
                cap.stop()
    return outcome, packets, cap.clock_offset_ns if cap is not None else 0


def _host_facts(meta: dict[str, Any], far: RemoteSide, server_facts: dict[str, Any],
                client_facts: dict[str, Any], say: Progress) -> None:
    """Both hosts' facts into ``meta``, with what the serve said of its congestion
    control and of packets its capture could not send."""
    server_facts["congestion"] = {"server": far.meta.get("server_congestion")}
    if far.meta.get("server_congestion_note"):
        server_facts["congestion_notes"] = {"server": far.meta["server_congestion_note"]}
        said = (f"remote server: {far.meta['server_congestion_note']}; it used "
                f"{far.meta.get('server_congestion', 'unknown')}")
        meta.setdefault("notes", []).append(said)
        say(f"realnet: {said}")
    meta["host_facts"] = {"client": client_facts, "server": server_facts}
    if far.meta.get("server_capture_truncated"):
        meta.setdefault("notes", []).append(
            f"the serve's capture had {far.meta['server_capture_truncated']} packets beyond "
            f"the {MAX_REMOTE_PACKETS} it may send; their times come from this host's "
            "capture")


def _both_captures(scenario: Scenario, meta: dict[str, Any], far: RemoteSide,
                   packets: list[Any], local_off: int, data_port: int, *, same_host_lo: bool,
                   offset_ns: int, rtt_ns: int) -> tuple[list[Seg], SideLog]:
    """The two hosts' clocks related (`estimate_offset`), the serve's log on this host's
    clock, and the segments from both captures merged (each sender's from its own host;
    one capture when both ends are this host's loopback), their causality checked."""
    remote_off = far.meta.get("capture_clock_offset_ns")
    remote_packets = far.packets if type(remote_off) is int and not same_host_lo else []
    clock = estimate_offset(packets, local_off, remote_packets,
                             remote_off if type(remote_off) is int else 0, data_port,
                             scenario, offset_ns, rtt_ns)
    meta["clock_offset"] = clock.to_meta()
    meta["path"] = clock.path_meta()
    server_log = _align(far.log, clock.offset_ns, scenario)
    if same_host_lo or not (packets or remote_packets):
        segs = segments_from_lo(packets, local_off, data_port) if packets else []
        sources = "L" * len(segs)
    else:
        segs, sources = merge_captures(packets, local_off, remote_packets,
                                       (remote_off or 0) + clock.offset_ns, data_port,
                                       clock.one_way_to_client_ns,
                                       clock.one_way_to_server_ns)
    meta["segment_capture"] = sources
    if segs and not same_host_lo:
        meta["causality"] = checked = causality(segs)
        if checked["arrive_before_sent"]:
            meta.setdefault("notes", []).append(
                f"{checked['arrive_before_sent']} of {checked['checked']} segments arrive "
                f"before they were sent on the merged clock (worst {checked['worst_us']} "
                f"µs; the offset is ±{clock.uncertainty_ns / 1000:.0f} µs): their order "
                "on the ladder is not the wire's")
    meta["segment_capture_key"] = dict(SOURCE_KEY)
    if not segs:
        meta.setdefault("notes", []).append(
            "no segment was captured on either host: stalls on the wire are unknown")
    return segs, server_log


def _name_remote_failure(scenario: Scenario, outcome: RunEnd) -> RunEnd:
    """A "deadlock" where the client waits in a read while the remote server is stuck in a
    write is none: the client *is* reading, so the peer-not-reading sentence would be
    wrong. Say what is known, no more: the serve was alive (it answered every status poll)
    and blocked in the write with a full send buffer, and the client received no byte (or
    some) of it. So the bytes were queued there but did not get through: the path stalled,
    or this host did not receive them. Read from the deadlock's own sentence, which
    supervision wrote while both sides were still blocked."""
    if outcome.outcome is not Outcome.DEADLOCK:
        return outcome
    client = re.search(r"client waits for (\d+) more of (\d+) bytes", outcome.message)
    server = re.search(r"server waits for the client to read \(a (\d+)-byte write fills "
                       r"the send buffer\)(?: \(line (\d+)\))?", outcome.message)
    if not client or not server:
        return outcome
    line = f":{server.group(2)}" if server.group(2) else ""
    remaining, total = int(client.group(1)), int(client.group(2))
    got = ("received no byte" if remaining == total else
           f"received {total - remaining} of the {total} bytes it reads")
    return RunEnd(Outcome.ERROR, (
        f"{scenario.source}{line}: the client {got} while the remote server, alive, was "
        f"blocked in its write of {server.group(1)} bytes with a full send buffer: the "
        "bytes did not get through (the path stalled, or this host did not receive them); "
        "not a deadlock"))


def _align(log: SideLog, offset_ns: int, scenario: Scenario) -> SideLog:
    """Server times onto this machine's perf clock; line / iteration from our own parse
    (the text we sent may number lines differently from the original file)."""
    statements = steps(scenario.server.script)
    for i, op in enumerate(log.ops):
        op.start_ns -= offset_ns
        if op.end_ns is not None:
            op.end_ns -= offset_ns
        if i == 0 and op.op == "accept":
            continue
        step = next(statements, None)
        if step is not None:
            op.line, op.iteration, op.loop = step.line, step.iteration, step.loop
    for info in log.infos:
        info.t_ns -= offset_ns
    return log
