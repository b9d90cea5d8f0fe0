"""Remote runs: the server side of a scenario on another machine's kernel.

Owns: ``nagle-sim realnet serve`` (`serve_forever`), the client half (`run_remote`) and the
control protocol between them. The server receives the scenario *text*, parses it with
`nagle_sim.scenario.loads` and runs only its server script; it never executes anything
else. Must not import simpy, textual or rich.

Protocol ``nagle-sim-realnet/1``: one JSON object per line, each with ``"v": 1``.

    client -> server                      server -> client
    {"type": "hello"}                     {"type": "hello", "kernel": ...}
    {"type": "clock"}            (×N)     {"type": "clock", "perf_ns": ...}
    {"type": "run", "scenario": TEXT,     {"type": "ready", "port": P}   (data listener)
     "where": NAME}
    {"type": "status"}        (polling)   {"type": "status", "finished": false, ...}
                                          or, once the server side is done,
                                          {"type": "result", "log": {...}, "meta": {...}}
    {"type": "abort"}                     {"type": "result", ...}
    any problem                           {"type": "error", "error": "one line"}

Lines from a client are limited to `MAX_REQUEST_BYTES`, replies to `MAX_REPLY_BYTES`; a
version other than `PROTOCOL_VERSION` is refused with a clear error. The server handles one
control connection at a time and binds loopback unless told otherwise.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import platform
import select
import socket
import sys
import time
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario, ScenarioError, flatten, loads, outermost_loops
from realnet import sockopts
from realnet.runner import (
    Outcome,
    Progress,
    RealnetError,
    SideLog,
    SideRunner,
    base_meta,
    build_trace,
    capture_unavailable,
    check_platform,
    maxseg_for,
    report_retransmissions,
    rt_priority_available,
    run_timeout_s,
    segments_from_lo,
    stall_timeout_s,
    supervise,
)

PROTOCOL = "nagle-sim-realnet"
PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 1 << 20       # a scenario text and its envelope
MAX_REPLY_BYTES = 64 << 20        # a result with every op and TCP_INFO snapshot
CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 120.0
MAX_RUN_S = 3600.0
CLOCK_SAMPLES = 8
STATUS_INTERVAL_S = 0.05


class ProtocolError(Exception):
    """A broken or refused control exchange; ``str`` is the one-line reason."""


# ---------------------------------------------------------------- framing
class Channel:
    """JSON lines over a TCP socket with a size limit and timeouts."""

    def __init__(self, sock: socket.socket, max_line: int) -> None:
        self.sock = sock
        self.max_line = max_line
        self._buf = bytearray()

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps({"v": PROTOCOL_VERSION, **msg}, separators=(",", ":")).encode()
        self.sock.sendall(data + b"\n")

    def recv(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[:nl + 1]
                return self._decode(line)
            if len(self._buf) > self.max_line:
                raise ProtocolError(f"message too large (limit {self.max_line} bytes)")
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"no reply within {timeout:g} s")
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                continue
            chunk = self.sock.recv(min(1 << 20, self.max_line + 2 - len(self._buf)))
            if not chunk:
                raise ProtocolError("the peer closed the control connection")
            self._buf += chunk

    def _decode(self, line: bytes) -> dict[str, Any]:
        if len(line) > self.max_line:
            raise ProtocolError(f"message too large (limit {self.max_line} bytes)")
        try:
            msg = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            raise ProtocolError("malformed message (not JSON)") from None
        if not isinstance(msg, dict):
            raise ProtocolError("malformed message (not a JSON object)")
        if msg.get("v") != PROTOCOL_VERSION:
            raise ProtocolError(f"protocol version mismatch: this side speaks {PROTOCOL} "
                                f"v{PROTOCOL_VERSION}, the peer sent v{msg.get('v')!r}")
        return msg


# ---------------------------------------------------------------- scenario text
def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def scenario_text(scenario: Scenario) -> str:
    """TOML text of a scenario (its parsed document, ``--set`` overrides included)."""
    doc = scenario.raw
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items()
             if not isinstance(v, dict)]
    for key, value in doc.items():
        if isinstance(value, dict):
            lines.append(f"[{_toml_key(key)}]")
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- server
def _parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise RealnetError(f"--listen {listen!r}: use HOST:PORT, e.g. 127.0.0.1:7070")
    return host.strip("[]") or "127.0.0.1", int(port)


def serve_forever(listen: str = "127.0.0.1:7070", *, once: bool = False,
                  log: Progress | None = None) -> int:
    """Serve the server side of scenarios to remote ``realnet run --remote`` clients.

    Args:
        listen: ``HOST:PORT`` to bind (loopback by default; say 0.0.0.0 to expose it).
        once: return after one control connection (tests).
        log: where to print one-line status messages (default stderr).

    Returns:
        0 (on Ctrl-C or after ``once``).
    """
    check_platform()
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    host, port = _parse_listen(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind((host, port))
    except OSError as exc:
        srv.close()
        raise RealnetError(f"--listen {listen}: cannot bind: {exc.strerror or exc}") from None
    srv.listen(4)
    bound = srv.getsockname()
    with contextlib.suppress(ValueError):
        if not ipaddress.ip_address(host).is_loopback:
            say(f"realnet serve: WARNING: listening on {host}, reachable from other machines")
    say(f"realnet serve: listening on {bound[0]}:{bound[1]} "
        f"(protocol {PROTOCOL} v{PROTOCOL_VERSION})")
    try:
        while True:
            conn, peer = srv.accept()
            say(f"realnet serve: control connection from {peer[0]}:{peer[1]}")
            try:
                _serve_connection(conn, say)
            except (ProtocolError, OSError) as exc:
                say(f"realnet serve: {peer[0]}:{peer[1]}: {exc}")
            finally:
                conn.close()
            if once:
                return 0
    except KeyboardInterrupt:
        return 0
    finally:
        srv.close()


def _serve_connection(conn: socket.socket, say: Progress) -> None:
    chan = Channel(conn, MAX_REQUEST_BYTES)
    try:
        hello = chan.recv(IDLE_TIMEOUT_S)
    except ProtocolError as exc:
        with contextlib.suppress(OSError):
            chan.send({"type": "error", "error": str(exc)})
        raise
    if hello.get("type") != "hello":
        chan.send({"type": "error", "error": "expected hello"})
        return
    chan.send({"type": "hello", "protocol": PROTOCOL, "kernel": platform.release(),
               "system": platform.system()})
    while True:
        try:
            msg = chan.recv(IDLE_TIMEOUT_S)
        except ProtocolError as exc:
            if "closed" not in str(exc):
                with contextlib.suppress(OSError):
                    chan.send({"type": "error", "error": str(exc)})
                raise
            return
        kind = msg.get("type")
        if kind == "clock":
            chan.send({"type": "clock", "perf_ns": time.perf_counter_ns()})
        elif kind == "run":
            _serve_run(chan, conn, msg, say)
        elif kind == "bye":
            return
        else:
            chan.send({"type": "error", "error": f"unexpected message type {kind!r}"})


def _serve_run(chan: Channel, conn: socket.socket, msg: dict[str, Any], say: Progress) -> None:
    text, where = msg.get("scenario"), str(msg.get("where", "<remote>"))[:200]
    if not isinstance(text, str):
        chan.send({"type": "error", "error": "run: 'scenario' must be the scenario text"})
        return
    try:
        scenario = loads(text, where)
    except ScenarioError as exc:
        chan.send({"type": "error", "error": f"scenario rejected: {exc}"})
        return
    addr = conn.getsockname()[0]
    listener = socket.socket(conn.family, socket.SOCK_STREAM)
    try:
        sockopts.set_maxseg(listener, maxseg_for(scenario.link.mss))
        listener.bind((addr, 0))
        listener.listen(1)
        sockopts.apply_initial(listener, nodelay=scenario.server.options.nodelay, cork=False,
                               quickack=scenario.server.options.quickack,
                               congestion=sockopts.congestion_for(scenario.server.profile.bbr))
    except OSError as exc:
        listener.close()
        chan.send({"type": "error", "error": f"cannot listen on {addr}: {exc.strerror}"})
        return
    port = listener.getsockname()[1]
    say(f"realnet serve: running the server side of {where} on {addr}:{port}")
    runner = SideRunner(Side.SERVER, scenario.server, where, listener=listener,
                        rt_priority=rt_priority_available())
    try:
        runner.start()
        runner.go()
        runner.ready()          # in accept() before the client is told to connect
        chan.send({"type": "ready", "port": port})
        limit = time.monotonic() + min(MAX_RUN_S, run_timeout_s(scenario))
        while not runner.finished:
            if time.monotonic() > limit:
                runner.abort()
                runner.join(2.0)
                break
            ready, _, _ = select.select([conn], [], [], 0.005)
            if not ready and not chan._buf:
                continue
            req = chan.recv(REPLY_TIMEOUT_S)
            if req.get("type") == "abort":
                runner.abort()
                runner.join(2.0)
                break
            if req.get("type") == "status":
                if runner.finished:
                    break
                what, line = runner.waiting_text()
                chan.send({"type": "status", "finished": False, "blocked": runner.blocked,
                           "progress": runner.progress, "waiting": what, "line": line})
        runner.join(5.0)
        chan.send({"type": "result", "log": runner.log.to_json(),
                   "meta": {"server_kernel": platform.release(),
                            "server_sched": "SCHED_FIFO" if runner.rt_priority else "normal"}})
    finally:
        runner.cleanup()


# ---------------------------------------------------------------- client
class RemoteSide:
    """The remote server side as `supervise` sees it (polled over the control channel)."""

    def __init__(self, chan: Channel) -> None:
        self.chan = chan
        self.log = SideLog()
        self.meta: dict[str, Any] = {}
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
        self._handle(self.chan.recv(REPLY_TIMEOUT_S))

    def _handle(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "result":
            self.log = SideLog.from_json(msg.get("log", {}))
            self.meta = dict(msg.get("meta", {}))
            self._finished = True
        elif kind == "status":
            self._blocked = bool(msg.get("blocked"))
            self._progress = int(msg.get("progress", 0))
            self._waiting = (str(msg.get("waiting", "")), int(msg.get("line", 0)))
        elif kind == "error":
            raise RealnetError(f"remote server: {msg.get('error')}")
        else:
            raise RealnetError(f"remote server sent an unexpected {kind!r}")

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
            while not self._finished:
                self._handle(self.chan.recv(REPLY_TIMEOUT_S))


def _parse_remote(remote: str) -> tuple[str, int]:
    host, sep, port = remote.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RealnetError(f"--remote {remote!r}: use HOST:PORT, e.g. 127.0.0.1:7070")
    return host.strip("[]"), int(port)


def _clock_offset(chan: Channel) -> tuple[int, int]:
    """(server perf - client perf, best round trip) in ns, NTP-style over the channel."""
    best: tuple[int, int] | None = None
    for _ in range(CLOCK_SAMPLES):
        t1 = time.perf_counter_ns()
        chan.send({"type": "clock"})
        reply = chan.recv(REPLY_TIMEOUT_S)
        t3 = time.perf_counter_ns()
        if reply.get("type") != "clock":
            raise RealnetError(f"remote server: unexpected reply {reply.get('type')!r}")
        rtt = t3 - t1
        if best is None or rtt < best[1]:
            best = (int(reply["perf_ns"]) - (t1 + t3) // 2, rtt)
    assert best is not None
    return best


def run_remote(scenario: Scenario, remote: str, *, progress: Progress | None = None,
               timeout_s: float | None = None) -> Any:
    """Client side here, server side on ``remote``; both sides' records merged into one trace.

    Raises:
        RealnetError: the remote cannot be reached, refuses the protocol or the scenario.
    """
    from realnet.capture import Capture

    say = progress or (lambda _msg: None)
    host, port = _parse_remote(remote)
    try:
        ctl = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise RealnetError(f"--remote {remote}: cannot connect: {exc.strerror or exc}") from None
    ctl.settimeout(None)
    chan = Channel(ctl, MAX_REPLY_BYTES)
    try:
        return _run_remote(scenario, remote, host, chan, ctl, say, timeout_s, Capture)
    except ProtocolError as exc:
        raise RealnetError(f"--remote {remote}: {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            chan.send({"type": "bye"})
        ctl.close()


def _run_remote(scenario: Scenario, remote: str, host: str, chan: Channel,
                ctl: socket.socket, say: Progress, timeout_s: float | None,
                capture_cls: Any) -> Any:
    chan.send({"type": "hello", "protocol": PROTOCOL})
    hello = chan.recv(REPLY_TIMEOUT_S)
    if hello.get("type") == "error":
        raise RealnetError(f"--remote {remote}: {hello.get('error')}")
    offset_ns, rtt_ns = _clock_offset(chan)
    chan.send({"type": "run", "scenario": scenario_text(scenario), "where": scenario.source})
    ready = chan.recv(REPLY_TIMEOUT_S)
    if ready.get("type") == "error":
        raise RealnetError(f"--remote {remote}: {ready.get('error')}")
    data_port = int(ready["port"])
    meta = base_meta(scenario)
    meta.update(link="remote", remote=remote, server_kernel=hello.get("kernel"),
                clock_offset_rtt_us=round(rtt_ns / 1000, 1))
    if scenario.link.to_server_delay or scenario.link.to_client_delay:
        meta.setdefault("notes", []).append(
            "link delays are not emulated on a remote run: the real path's delays apply")
    client = socket.socket(ctl.family, socket.SOCK_STREAM)
    sockopts.set_maxseg(client, maxseg_for(scenario.link.mss))
    opts = scenario.client.options
    note = sockopts.apply_initial(client, nodelay=opts.nodelay, cork=opts.cork,
                                  quickack=opts.quickack,
                                  congestion=sockopts.congestion_for(scenario.client.profile.bbr))
    if note:
        meta.setdefault("notes", []).append(note)
    rt = rt_priority_available()
    runner = SideRunner(Side.CLIENT, scenario.client, scenario.source, sock=client,
                        address=(host, data_port), rt_priority=rt)
    far = RemoteSide(chan)
    cap = None
    try:
        runner.start()
        loopback = ipaddress.ip_address(ctl.getpeername()[0]).is_loopback
        why_not = capture_unavailable() or (None if loopback else
                                            "capture is implemented for loopback remotes only")
        if why_not:
            meta["capture"] = f"unavailable: {why_not}"
            say(f"realnet: no packet capture ({why_not}): application timings and TCP_INFO only")
        else:
            cap = capture_cls("lo", filter_ports={data_port}).start()
            meta["capture"] = "AF_PACKET on lo (outgoing copies, port-filtered)"
        runner.go()
        limit = timeout_s if timeout_s is not None else run_timeout_s(scenario)
        outcome = supervise(scenario, {Side.CLIENT: runner, Side.SERVER: far},
                            timeout_s=limit, stall_s=stall_timeout_s(scenario) + 1.0)
        runner.join(5.0)
        far.abort()
        time.sleep(0.01)
        packets = cap.stop() if cap is not None else []
    finally:
        runner.cleanup()
        if cap is not None:
            with contextlib.suppress(Exception):
                cap.stop()
    server_log = _align(far.log, offset_ns, scenario)
    meta.update(far.meta)
    segs = segments_from_lo(packets, cap.clock_offset_ns, data_port) if cap else []
    if outcome.outcome == "ok" and server_log.error:
        outcome = Outcome("error", server_log.error)
    trace = build_trace(scenario, {Side.CLIENT: runner.log, Side.SERVER: server_log}, segs,
                        meta, outcome)
    report_retransmissions(trace, say)
    return trace


def _align(log: SideLog, offset_ns: int, scenario: Scenario) -> SideLog:
    """Server times onto this machine's perf clock; line / iteration from our own parse
    (the text we sent may number lines differently from the original file)."""
    statements = flatten(scenario.server.script)
    loops = outermost_loops(scenario.server.script)
    for i, op in enumerate(log.ops):
        op.start_ns -= offset_ns
        if op.end_ns is not None:
            op.end_ns -= offset_ns
        if i == 0 and op.op == "accept":
            continue
        item = next(statements, None)
        if item is not None:
            op.line, op.iteration, op.loop = item[0].line, item[1], loops[id(item[0])]
    for info in log.infos:
        info.t_ns -= offset_ns
    return log


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve_forever(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070"))

