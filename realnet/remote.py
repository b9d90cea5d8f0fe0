"""Remote runs: the server side of a scenario on another machine's kernel.

Owns: ``nagle-sim realnet serve`` (`serve_forever`), the client half (`run_remote`) and the
control protocol between them, including its security model (docs/realnet.md, "Remote
runs"). The server receives the scenario *text*, parses it with `nagle_sim.scenario.loads`,
checks its size against `Limits` and runs only its server script; it never executes
anything else. Imports `realnet.core` (never `realnet.runner`). Must not import simpy,
textual or rich.

Protocol ``nagle-sim-realnet/2``: one JSON object per line, each with ``"v": 2``.

    server -> client on connect: {"type": "challenge", "auth": "token"|"none", "nonce": N}
    client -> server                      server -> client
    {"type": "hello", "nonce": C,         {"type": "hello", "proof": P', "kernel": ...}
     "proof": P}                          (P, P' = HMAC-SHA256 of the token over both nonces)
    {"type": "clock"}            (×N)     {"type": "clock", "perf_ns": ...}
    {"type": "run", "scenario": TEXT,     {"type": "ready", "port": P}   (data listener)
     "where": NAME}
    {"type": "status"}        (polling)   {"type": "status", "blocked": ..., ...}
                                          or, once the server side is done,
                                          {"type": "log", "records": [...]}  (×k, chunked)
                                          {"type": "result", "meta": {...}}
    {"type": "abort"}                     the log chunks and the result
    any problem                           {"type": "error", "error": "one line"}, then close

One run per connection. Nothing about the host (kernel, limits) is sent before the client
has proved it knows the token.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import hmac
import ipaddress
import json
import math
import os
import platform
import re
import secrets
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario, ScenarioError, loads
from nagle_sim.script import steps
from nagle_sim.trace import Outcome, Trace
from realnet import cleanup, hostfacts, sockopts
from realnet.core import (
    LogReader,
    Progress,
    RealnetError,
    RunEnd,
    SideLog,
    SideRunner,
    _Seg,
    base_meta,
    build_trace,
    capture_unavailable,
    check_platform,
    maxseg_for,
    report_retransmissions,
    rt_priority_available,
    rtt_s,
    run_timeout_s,
    script_size,
    segments_from_lo,
    stall_timeout_s,
    supervise,
)

PROTOCOL = "nagle-sim-realnet"
PROTOCOL_VERSION = 2
TOKEN_ENV = "NAGLE_SIM_REALNET_TOKEN"

MAX_HELLO_BYTES = 4096            # any line before authentication
MAX_REQUEST_BYTES = 1 << 20       # a scenario text and its envelope
MAX_REPLY_LINE_BYTES = 8 << 20    # one reply line (log chunks are ~1 MiB)
LOG_CHUNK_BYTES = 1 << 20
CONNECT_TIMEOUT_S = 5.0
HANDSHAKE_TIMEOUT_S = 2.0         # connect to authenticated (a real client needs ms)
SETUP_TIMEOUT_S = 30.0            # connect to the run request
REQUEST_TIMEOUT_S = 10.0          # between two requests before the run
STATUS_SILENCE_S = 10.0           # a run whose client stops polling this long is aborted
SEND_TIMEOUT_S = 30.0             # one reply to a client that does not read
REPLY_TIMEOUT_S = 30.0            # the client's wait for one reply
MAX_CLIENTS = 16                  # connections at once (pre-run); more are told "busy"
MAX_CLOCKS = 64
CLOCK_SAMPLES = 8
STATUS_INTERVAL_S = 0.05
REPLY_DEADLINE_S = 300.0          # one whole reply (a status, or the streamed result)
MAX_REMOTE_PACKETS = 500_000
"""Captured packets a serve may send. The client keeps ~390 B per packet (a slotted
`CapturedPacket`: its ints and flags; measured with tracemalloc), so the cap is ~200 MB at
most. A 100k-op run of small writes captures ~300k packets on the serve (data and ACKs,
both directions); a longer capture is cut there by the serve (meta
``server_capture_truncated``: the rest is timed from this host's capture), and a serve that
sends more is refused."""
PACKETS_PER_CHUNK = 12_000        # ~0.7 MiB of compact packet rows per message
MAX_PACKET_FLAGS = 6              # "SFRPA" at most; a longer string is malformed
MAX_PACKET_LEN = 1 << 20          # a captured segment's payload (GRO / BIG TCP stay under)
MAX_RESULT_NOTES = 32


@dataclass(frozen=True, slots=True)
class Limits:
    """What the serve accepts, checked before anything runs."""

    run_s: float = 600.0
    """Longest run (its sleeps alone must fit; the run is stopped there)."""
    statements: int = 1_000_000
    """Server statements executed, loop iterations included."""
    write_bytes: int = 4 << 30
    """Bytes the server script writes in total."""
    depth: int = 32
    """Deepest `repeat` nesting."""

    def to_json(self) -> dict[str, Any]:
        return {"run_s": self.run_s, "statements": self.statements,
                "write_bytes": self.write_bytes, "depth": self.depth}


class ProtocolError(Exception):
    """A broken or refused control exchange; ``str`` is the one-line reason."""


def printable(text: object, limit: int = 500) -> str:
    """One line of text safe for a terminal: every character Python does not call
    printable (C0/C1 controls such as ESC, CR, LF; format characters such as bidi
    overrides and soft hyphens; line separators) becomes ``?``; long text is cut."""
    s = str(text)
    out = "".join(ch if ch.isprintable() else "?" for ch in s[:limit])
    return out + ("..." if len(s) > limit else "")


def _proof(token: str, role: str, server_nonce: str, client_nonce: str) -> str:
    msg = f"{PROTOCOL}/{PROTOCOL_VERSION}|{role}|{server_nonce}|{client_nonce}".encode()
    return hmac.new(token.encode(), msg, hashlib.sha256).hexdigest()


def _nonce_ok(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value) is not None


# ---------------------------------------------------------------- framing
class Channel:
    """JSON lines over a TCP socket with a size limit and deadlines."""

    def __init__(self, sock: socket.socket, max_line: int) -> None:
        self.sock = sock
        self.max_line = max_line
        self._buf = bytearray()

    @property
    def buffered(self) -> bool:
        return b"\n" in self._buf

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps({"v": PROTOCOL_VERSION, **msg}, separators=(",", ":")).encode()
        self.sock.sendall(data + b"\n")

    def send_raw(self, head: bytes, items: list[bytes], tail: bytes) -> None:
        """One line built from already-encoded JSON values (the streamed log records)."""
        self.sock.sendall(head + b",".join(items) + tail + b"\n")

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
                raise ProtocolError(f"no message within {timeout:g} s (timeout)")
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                continue
            chunk = self.sock.recv(min(1 << 20, self.max_line + 2 - len(self._buf)))
            if not chunk:
                raise ProtocolError("the peer closed the control connection"
                                    + (" in the middle of a message" if self._buf else ""))
            self._buf += chunk

    def _decode(self, line: bytes) -> dict[str, Any]:
        if len(line) > self.max_line:
            raise ProtocolError(f"message too large (limit {self.max_line} bytes)")
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError, MemoryError):
            # ValueError covers bad UTF-8 and integers over 4300 digits; RecursionError deep
            # nesting ([[[...).
            raise ProtocolError("malformed message (not a JSON object of a sane shape)") \
                from None
        if not isinstance(msg, dict):
            raise ProtocolError("malformed message (not a JSON object)")
        if msg.get("v") != PROTOCOL_VERSION:
            raise ProtocolError(f"protocol version mismatch: this side speaks {PROTOCOL} "
                                f"v{PROTOCOL_VERSION}, the peer sent "
                                f"v{printable(repr(msg.get('v')), 20)}")
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


def check_limits(scenario: Scenario, limits: Limits) -> str | None:
    """Why the server side of ``scenario`` is too big for this serve (None: it fits)."""
    size = script_size(scenario.server.script)
    if size.depth > limits.depth:
        return f"the server script nests `repeat` {size.depth} deep (limit {limits.depth})"
    if size.statements > limits.statements:
        return (f"the server script executes {size.statements} statements "
                f"(limit {limits.statements})")
    if size.write_bytes > limits.write_bytes:
        return (f"the server script writes {size.write_bytes} bytes "
                f"(limit {limits.write_bytes})")
    if size.sleep_s > limits.run_s:
        return f"the server script sleeps {size.sleep_s:g} s (limit {limits.run_s:g} s)"
    return None


# ---------------------------------------------------------------- server
def _parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise RealnetError(f"--listen {printable(listen, 100)!r}: use HOST:PORT, "
                           "e.g. 127.0.0.1:7070")
    return host.strip("[]") or "127.0.0.1", int(port)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_token(token: str, where: str) -> str:
    if not 8 <= len(token) <= 256 or not all(33 <= ord(c) <= 126 for c in token):
        raise RealnetError(f"{where}: a token is 8 to 256 printable ASCII characters "
                           "without spaces")
    return token


def serve_forever(listen: str = "127.0.0.1:7070", *, token: str | None = None,
                  no_auth: bool = False, once: bool = False, log: Progress | None = None,
                  limits: Limits | None = None) -> int:
    """Serve the server side of scenarios to remote ``realnet run --remote`` clients.

    Args:
        listen: ``HOST:PORT`` to bind (loopback by default; say 0.0.0.0 to expose it).
        token: the shared secret clients must prove they know (default:
            ``$NAGLE_SIM_REALNET_TOKEN``, else a random one, printed at start).
        no_auth: accept clients without a token; refused unless ``listen`` is loopback.
        once: return after one control connection (tests).
        log: where to print one-line status messages (default stderr).
        limits: what a scenario may ask of this host (default `Limits()`).

    Returns:
        0 (on Ctrl-C or after ``once``).

    Raises:
        RealnetError: a bad ``listen``, a bad token, ``no_auth`` off loopback, a bind error.
    """
    check_platform()
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    host, port = _parse_listen(listen)
    if no_auth and not _is_loopback(host):
        raise RealnetError(f"--no-auth is allowed on a loopback address only, not on {host}: "
                           "anyone who can reach the port could run scenarios here")
    if no_auth:
        token = None
    else:
        token = token or os.environ.get(TOKEN_ENV) or None
        if token is None:
            token = secrets.token_urlsafe(18)
            say(f"realnet serve: token {token} (clients: --token {token}, "
                f"or {TOKEN_ENV}={token})")
        check_token(token, "--token")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind((host, port))
    except (OSError, OverflowError) as exc:
        srv.close()
        raise RealnetError(f"--listen {listen}: cannot bind: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    srv.listen(16)
    bound = srv.getsockname()
    if not _is_loopback(host):
        say(f"realnet serve: WARNING: listening on {host}, reachable from other machines; "
            "the token is the only protection (see docs/realnet.md)")
    say(f"realnet serve: listening on {bound[0]}:{bound[1]} "
        f"(protocol {PROTOCOL} v{PROTOCOL_VERSION}, "
        f"{'no authentication' if token is None else 'token required'})")
    removed = cleanup.remove_stale_quietly()
    if removed:
        say(f"realnet serve: removed {len(removed)} leftovers of dead runs")
    hostfacts.estimate_hz()     # counted once (0.2 s) before any client waits for it
    server = _Server(token, say, limits or Limits())
    try:
        return server.accept_loop(srv, once)
    except KeyboardInterrupt:
        return 0
    finally:
        srv.close()


class _Server:
    def __init__(self, token: str | None, say: Progress, limits: Limits) -> None:
        self.token = token
        self.say = say
        self.limits = limits
        self.run_lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(MAX_CLIENTS)
        # sessions not yet authenticated, oldest first: when every slot is taken, the
        # oldest of these gives its slot to the newcomer, so idle or trickling strangers
        # cannot lock out a client that has the token
        self.unauthenticated: dict[int, _Session] = {}
        self.lock = threading.Lock()

    def _take_slot(self, name: str) -> bool:
        if self.slots.acquire(blocking=False):
            return True
        with self.lock:
            victim = next(iter(self.unauthenticated.values()), None)
        if victim is None:
            return False
        self.say(f"realnet serve: {victim.name}: dropped before authenticating, for {name}")
        victim.evict()
        return self.slots.acquire(timeout=1.0)

    def accept_loop(self, srv: socket.socket, once: bool) -> int:
        while True:
            try:
                conn, peer = srv.accept()
            except OSError as exc:      # e.g. EMFILE: wait a little instead of spinning
                self.say(f"realnet serve: accept failed: {exc.strerror or exc}")
                time.sleep(0.1)
                continue
            name = printable(f"{peer[0]}:{peer[1]}", 80)
            if not self._take_slot(name):
                self.say(f"realnet serve: {name}: refused (busy: {MAX_CLIENTS} connections)")
                _refuse(conn, f"busy: this server already has {MAX_CLIENTS} connections; "
                        "try again later")
                continue
            thread = threading.Thread(target=self.session, args=(conn, name), daemon=True,
                                      name=f"realnet-serve {name}")
            try:
                thread.start()
            except RuntimeError:        # no more threads: refuse, never end the serve
                self.slots.release()
                _refuse(conn, "busy: the server cannot take another connection now")
                continue
            if once:
                thread.join()
                return 0

    def session(self, conn: socket.socket, name: str) -> None:
        session = _Session(self, conn, name)
        with self.lock:
            self.unauthenticated[id(session)] = session
        try:
            conn.settimeout(SEND_TIMEOUT_S)     # sends; receives wait in select()
            session.run()
        except (ProtocolError, OSError) as exc:
            self.say(f"realnet serve: {name}: {printable(exc)}")
        except Exception as exc:  # never let one client end the server
            self.say(f"realnet serve: {name}: internal error: {printable(repr(exc))}")
        finally:
            session.authenticated()
            _close_gently(conn)
            self.slots.release()


def _close_gently(conn: socket.socket) -> None:
    """FIN, then discard what the client still sends (at most 1 s / 16 MiB): closing with
    unread data would send a RST, and a RST can destroy our last reply (the error) before
    the client reads it."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + 1.0
        drained = 0
        while drained < 16 << 20:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([conn], [], [], left)[0]:
                break
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            drained += len(chunk)
    with contextlib.suppress(OSError):
        conn.close()


def _refuse(conn: socket.socket, why: str) -> None:
    """Tell a client we cannot take at once (in the accept loop: never waits on it)."""
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(json.dumps({"v": PROTOCOL_VERSION, "type": "error", "error": why})
                  .encode() + b"\n")
    with contextlib.suppress(OSError):
        conn.close()


class _Session:
    """One control connection: authenticate, clock samples, one run, the result."""

    def __init__(self, server: _Server, conn: socket.socket, name: str) -> None:
        self.server = server
        self.conn = conn
        self.name = name
        self.say = server.say
        self.chan = Channel(conn, MAX_HELLO_BYTES)
        self.opened = time.monotonic()

    def authenticated(self) -> None:
        """Leave the evictable set (authenticated, or ending)."""
        with self.server.lock:
            self.server.unauthenticated.pop(id(self), None)

    def evict(self) -> None:
        """End this unauthenticated session now: its pending receive fails."""
        self.authenticated()
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)

    def error(self, why: str) -> None:
        with contextlib.suppress(OSError):
            self.chan.send({"type": "error", "error": printable(why, 2000)})

    def recv(self, deadline: float) -> dict[str, Any]:
        """The next message before ``deadline``; any failure is answered, then raised."""
        try:
            return self.chan.recv(max(0.0, deadline - time.monotonic()))
        except ProtocolError as exc:
            if "closed" not in str(exc):
                self.error(str(exc))
            raise

    def run(self) -> None:
        token = self.server.token
        nonce = secrets.token_hex(16)
        self.chan.send({"type": "challenge", "protocol": PROTOCOL,
                        "auth": "none" if token is None else "token", "nonce": nonce})
        hello = self.recv(self.opened + HANDSHAKE_TIMEOUT_S)
        if hello.get("type") == "bye":     # e.g. a client without the token we ask for
            return
        if hello.get("type") != "hello":
            self.error("expected hello")
            raise ProtocolError("expected hello")
        client_nonce = hello.get("nonce")
        if not _nonce_ok(client_nonce):
            self.error("hello: 'nonce' must be 32 hex digits")
            raise ProtocolError("hello without a valid nonce")
        client_nonce = str(client_nonce)
        reply: dict[str, Any] = {"type": "hello", "protocol": PROTOCOL}
        if token is not None:
            proof = hello.get("proof")
            expected = _proof(token, "client", nonce, client_nonce)
            if not isinstance(proof, str) or not hmac.compare_digest(proof, expected):
                self.error("authentication failed: wrong or missing token")
                raise ProtocolError("authentication failed")
            reply["proof"] = _proof(token, "server", nonce, client_nonce)
        # Authenticated: host facts and longer messages from here on.
        self.authenticated()
        self.chan.max_line = MAX_REQUEST_BYTES
        reply.update(kernel=platform.release(), system=platform.system(),
                     limits=self.server.limits.to_json(),
                     facts=hostfacts.collect(local_addr=self.conn.getsockname()[0]))
        self.chan.send(reply)
        clocks = 0
        setup_deadline = self.opened + SETUP_TIMEOUT_S
        while True:
            msg = self.recv(min(setup_deadline, time.monotonic() + REQUEST_TIMEOUT_S))
            kind = msg.get("type")
            if kind == "clock":
                clocks += 1
                if clocks > MAX_CLOCKS:
                    self.error(f"too many clock samples (limit {MAX_CLOCKS})")
                    return
                self.chan.send({"type": "clock", "perf_ns": time.perf_counter_ns()})
            elif kind == "run":
                self.run_request(msg)
                return
            elif kind == "bye":
                return
            else:
                self.error(f"unexpected message type {printable(repr(kind), 40)}")
                return

    def run_request(self, msg: dict[str, Any]) -> None:
        text, where = msg.get("scenario"), msg.get("where")
        where = printable(where, 200) if isinstance(where, str) and where else "<remote>"
        if not isinstance(text, str):
            self.error("run: 'scenario' must be the scenario text")
            return
        try:
            scenario = loads(text, where)
        except ScenarioError as exc:
            self.error(f"scenario rejected: {exc}")
            return
        except RecursionError:
            self.error(f"scenario rejected: {where}: nested too deeply")
            return
        except Exception as exc:  # the loader's bugs must not end the session badly
            self.error(f"scenario rejected: {where}: {type(exc).__name__}: {exc}")
            return
        try:
            too_big = check_limits(scenario, self.server.limits)
        except Exception as exc:
            too_big = f"cannot size the server script: {type(exc).__name__}"
        if too_big:
            self.error(f"scenario rejected: {where}: {too_big}")
            return
        if not self.server.run_lock.acquire(blocking=False):
            self.error("busy: another run is in progress on this server; try again later")
            return
        try:
            self.execute(scenario, where)
        finally:
            self.server.run_lock.release()

    def execute(self, scenario: Scenario, where: str) -> None:
        addr = self.conn.getsockname()[0]
        listener = socket.socket(self.conn.family, socket.SOCK_STREAM)
        try:
            sockopts.set_maxseg(listener, maxseg_for(scenario.link.mss))
            listener.bind((addr, 0))
            listener.listen(1)
            note = sockopts.apply_initial(
                listener, nodelay=scenario.server.options.nodelay, cork=False,
                quickack=scenario.server.options.quickack,
                congestion=hostfacts.profile_congestion(scenario.server.profile))
        except OSError as exc:
            listener.close()
            self.error(f"cannot listen on {addr}: {exc.strerror or exc}")
            return
        port = listener.getsockname()[1]
        # what the kernel really gave the listener (accepted sockets inherit it)
        congestion = hostfacts.congestion_of(listener)
        self.say(f"realnet serve: {self.name}: running the server side of {where} "
                 f"on {addr}:{port}")
        rt = rt_priority_available()
        runner = SideRunner(Side.SERVER, scenario.server, where, listener=listener,
                            rt_priority=rt, keep_records=False)
        meta: dict[str, Any] = {"server_kernel": platform.release(),
                                "server_sched": f"SCHED_FIFO {rt}" if rt else "normal",
                                "server_congestion": congestion or "unknown"}
        if note:
            meta["server_notes"] = [note]
            meta["server_congestion_note"] = note
        cap = None
        try:
            runner.start()          # fork before the capture thread starts
            cap, meta["server_capture"] = _start_capture(addr, port)
            runner.go()
            runner.ready()          # in accept() before the client is told to connect
            self.chan.send({"type": "ready", "port": port})
            self.supervise_run(runner, min(self.server.limits.run_s, run_timeout_s(scenario)))
            runner.join(5.0)
            packets: list[Any] = []
            if cap is not None:
                time.sleep(min(2.0, rtt_s(scenario) + 0.05))   # the last ACK / FIN
                packets = cap.stop()
                if len(packets) > MAX_REMOTE_PACKETS:       # the client refuses more
                    meta["server_capture_truncated"] = len(packets) - MAX_REMOTE_PACKETS
                    packets = packets[:MAX_REMOTE_PACKETS]
                meta["capture_clock_offset_ns"] = cap.clock_offset_ns
                if cap.stats is not None and cap.stats.kernel_drops:
                    meta["server_capture_drops"] = cap.stats.kernel_drops
            self.stream_result(runner, meta, packets)
        finally:
            runner.cleanup()
            if cap is not None:
                with contextlib.suppress(Exception):
                    cap.stop()

    def supervise_run(self, runner: SideRunner, limit_s: float) -> None:
        """Answer status polls until the side finishes; abort it if the client asks, goes
        silent or the run's time is up."""
        start = last_heard = time.monotonic()
        while not runner.finished:
            now = time.monotonic()
            if now - start > limit_s or now - last_heard > STATUS_SILENCE_S:
                self.say(f"realnet serve: {self.name}: "
                         + ("run time limit reached" if now - start > limit_s
                            else f"client silent for {STATUS_SILENCE_S:g} s")
                         + ": server side aborted")
                runner.abort()
                runner.join(2.0)
                return
            if not self.chan.buffered:
                ready, _, _ = select.select([self.conn], [], [], 0.005)
                if not ready:
                    continue
            req = self.recv(now + STATUS_SILENCE_S)
            last_heard = time.monotonic()
            kind = req.get("type")
            if kind == "abort":
                runner.abort()
                runner.join(2.0)
                return
            if kind != "status":
                runner.abort()
                runner.join(2.0)
                self.error(f"unexpected message type {printable(repr(kind), 40)} during a run")
                raise ProtocolError("unexpected message during a run")
            if runner.finished:
                return
            what, line = runner.waiting_text()
            self.chan.send({"type": "status", "finished": False, "blocked": runner.blocked,
                            "progress": runner.progress, "waiting": what, "line": line})

    def stream_result(self, runner: SideRunner, meta: dict[str, Any],
                      packets: list[Any] | None = None) -> None:
        """The side's records in chunks of about `LOG_CHUNK_BYTES`, the captured packets in
        chunks of `PACKETS_PER_CHUNK`, then the result: no reply is ever larger than a
        chunk, whatever the run's length."""
        head = b'{"v":%d,"type":"log","records":[' % PROTOCOL_VERSION
        chunk: list[bytes] = []
        size = 0
        for raw in runner.raw_records():
            chunk.append(raw)
            size += len(raw) + 1
            if size >= LOG_CHUNK_BYTES:
                self.chan.send_raw(head, chunk, b"]}")
                chunk, size = [], 0
        if chunk:
            self.chan.send_raw(head, chunk, b"]}")
        packets = packets or []
        for i in range(0, len(packets), PACKETS_PER_CHUNK):
            self.chan.send({"type": "packets", "packets": [
                [p.t_ns, p.sport, p.dport, p.seq, p.ack, p.flags, p.payload_len, p.window,
                 int(p.outgoing)] for p in packets[i:i + PACKETS_PER_CHUNK]]})
        self.chan.send({"type": "result", "meta": meta})


def _start_capture(addr: str, port: int) -> tuple[Any, str]:
    """The serve's own capture of the data connection (root only): (capture or None,
    what ``meta.server_capture`` says)."""
    from realnet.capture import Capture

    why = capture_unavailable()
    ifname = hostfacts.interface_for(addr) if why is None else None
    if why is None and ifname is None:
        why = f"no interface holds {addr}"
    if why is not None or ifname is None:
        return None, f"unavailable: {why}"
    if ifname == "lo":
        return None, "not needed: loopback (the client's capture has every segment)"
    try:
        cap = Capture(ifname, filter_ports={port}, outgoing_only=False).start()
    except OSError as exc:
        return None, f"unavailable: AF_PACKET on {ifname}: {exc.strerror or exc}"
    return cap, f"AF_PACKET on {ifname} (send and arrival times)"


# ---------------------------------------------------------------- client
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
            or not _nonce_ok(nonce) or auth not in ("token", "none"):
        raise ProtocolError("this is not a nagle-sim realnet serve (no valid challenge)")
    nonce = str(nonce)
    if auth == "token" and token is None:
        raise RealnetError(f"--remote {remote}: the server needs its token: pass --token, "
                           f"TOKEN@HOST:PORT or set {TOKEN_ENV} (serve prints it at start)")
    client_nonce = secrets.token_hex(16)
    hello_msg: dict[str, Any] = {"type": "hello", "protocol": PROTOCOL, "nonce": client_nonce}
    if auth == "token" and token is not None:
        hello_msg["proof"] = _proof(token, "client", nonce, client_nonce)
    chan.send(hello_msg)
    hello = chan.recv(REPLY_TIMEOUT_S)
    _raise_error(hello)
    if hello.get("type") != "hello":
        raise ProtocolError("expected the server's hello")
    if auth == "token" and token is not None:
        proof = hello.get("proof")
        if not isinstance(proof, str) or not hmac.compare_digest(
                proof, _proof(token, "server", nonce, client_nonce)):
            raise ProtocolError("the server could not prove it knows the token")
    offset_ns, rtt_ns = _clock_offset(chan)
    chan.send({"type": "run", "scenario": scenario_text(scenario), "where": scenario.source})
    ready = chan.recv(REPLY_TIMEOUT_S)
    _raise_error(ready)
    data_port = ready.get("port")
    if ready.get("type") != "ready" or type(data_port) is not int or not 0 < data_port < 65536:
        raise ProtocolError("malformed ready reply")
    kernel = hello.get("kernel")
    server_facts = hostfacts.clean_facts(hello.get("facts"))
    meta = base_meta(scenario)
    meta.update(link="remote", remote=remote,
                server_kernel=printable(kernel, 100) if isinstance(kernel, str) else None)
    if scenario.link.to_server_delay or scenario.link.to_client_delay:
        meta.setdefault("notes", []).append(
            "link delays are not emulated on a remote run: the real path's delays apply "
            "(the model uses the scenario's)")
    client = socket.socket(ctl.family, socket.SOCK_STREAM)
    sockopts.set_maxseg(client, maxseg_for(scenario.link.mss))
    opts = scenario.client.options
    note = sockopts.apply_initial(client, nodelay=opts.nodelay, cork=opts.cork,
                                  quickack=opts.quickack,
                                  congestion=hostfacts.profile_congestion(
                                      scenario.client.profile))
    local_addr = ctl.getsockname()[0]
    client_facts = hostfacts.collect(local_addr=local_addr)
    client_facts["congestion"] = {"client": hostfacts.congestion_of(client)}
    if note:
        meta.setdefault("notes", []).append(note)
        client_facts["congestion_notes"] = {"client": note}
    rt = rt_priority_available()
    runner = SideRunner(Side.CLIENT, scenario.client, scenario.source, sock=client,
                        address=(host, data_port), rt_priority=rt)
    far = RemoteSide(chan, max_ops=script_size(scenario.server.script).statements + 2)
    cap = None
    try:
        runner.start()
        ifname = client_facts.get("interface")
        why_not = capture_unavailable() or (None if ifname else
                                            f"no interface holds {local_addr}")
        if why_not:
            meta["capture"] = f"unavailable: {why_not}"
            say(f"realnet: no packet capture here ({why_not})")
        else:
            cap = capture_cls(ifname, filter_ports={data_port}, outgoing_only=False).start()
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
    meta.update(far.meta)
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
    local_off = cap.clock_offset_ns if cap is not None else 0
    remote_off = far.meta.get("capture_clock_offset_ns")
    same_host_lo = ifname == "lo"
    remote_packets = far.packets if type(remote_off) is int and not same_host_lo else []
    clock = _estimate_offset(packets, local_off, remote_packets,
                             remote_off if type(remote_off) is int else 0, data_port,
                             scenario, offset_ns, rtt_ns)
    meta["clock_offset"] = clock.to_meta()
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
    meta["segment_capture_key"] = dict(SOURCE_KEY)
    if not segs:
        meta.setdefault("notes", []).append(
            "no segment was captured on either host: stalls on the wire are unknown")
    outcome = _name_remote_failure(scenario, outcome)
    if outcome.outcome is Outcome.OK and server_log.error:
        outcome = RunEnd(Outcome.ERROR, server_log.error)
    trace = build_trace(scenario, {Side.CLIENT: runner.log, Side.SERVER: server_log}, segs,
                        meta, outcome)
    report_retransmissions(trace, say)
    return trace


SOURCE_KEY = (("L", "this host's capture, at the sender (the client)"),
              ("R", "the serve's capture, at the sender (the server), moved onto this "
                    "host's clock by the estimated offset"),
              ("A", "this host's capture at arrival, minus the estimated one-way delay "
                    "(the serve did not capture this segment)"),
              ("B", "the serve's capture at arrival, minus the estimated one-way delay "
                    "(this host did not capture this segment)"))
"""What each letter of ``meta.segment_capture`` (one per segment, in order) means."""


@dataclass(slots=True)
class ClockEstimate:
    """The serve's clock against ours (server perf − client perf) and the path's delays."""

    offset_ns: int
    method: str
    control_ns: int
    control_rtt_ns: int
    handshake_ns: int | None = None
    handshake_rtt_ns: int | None = None
    one_way_to_client_ns: int = 0
    one_way_to_server_ns: int = 0

    def to_meta(self) -> dict[str, Any]:
        def us(v: int | None) -> float | None:
            return None if v is None else round(v / 1000, 1)
        return {"used_us": us(self.offset_ns), "method": self.method,
                "control_channel_us": us(self.control_ns),
                "control_rtt_us": us(self.control_rtt_ns),
                "handshake_us": us(self.handshake_ns),
                "handshake_rtt_us": us(self.handshake_rtt_ns),
                "one_way_to_client_us": us(self.one_way_to_client_ns),
                "one_way_to_server_us": us(self.one_way_to_server_ns)}


def _handshake_times(packets: list[Any], *, server: bool, syn_ack: bool, outgoing: bool,
                     port: int) -> list[int]:
    """Times of every capture of one handshake segment (a retransmitted SYN or SYN-ACK
    appears more than once), in capture order."""
    return [int(p.t_ns) for p in packets
            if p.outgoing == outgoing and (p.sport == port) == server and "S" in p.flags
            and ("A" in p.flags) == syn_ack]


def _first(packets: list[Any], *, server: bool, syn_ack: bool, outgoing: bool,
           port: int) -> int | None:
    times = _handshake_times(packets, server=server, syn_ack=syn_ack, outgoing=outgoing,
                             port=port)
    return times[0] if times else None


def _estimate_offset(local: list[Any], local_off: int, remote: list[Any], remote_off: int,
                     port: int, scenario: Scenario, control_ns: int,
                     control_rtt_ns: int) -> ClockEstimate:
    """The offset from the handshake's four kernel timestamps when both hosts captured it
    (NTP's formula), else the control channel's best round trip. A declared asymmetric
    path (the scenario's link delays, when they add up to the measured round trip) is
    taken out: NTP assumes both directions take as long."""
    est = ClockEstimate(control_ns, "control channel (best of "
                        f"{CLOCK_SAMPLES} round trips)", control_ns, control_rtt_ns,
                        one_way_to_client_ns=control_rtt_ns // 2,
                        one_way_to_server_ns=control_rtt_ns // 2)
    t4 = _first(local, server=True, syn_ack=True, outgoing=False, port=port)
    # the SYN the first SYN-ACK answers is the last one sent before it (a retransmitted
    # SYN would otherwise add its RTO to the round trip)
    syns = [t for t in _handshake_times(local, server=False, syn_ack=False, outgoing=True,
                                        port=port) if t4 is not None and t <= t4]
    if not syns or t4 is None:
        return est
    t1, t4 = syns[-1] - local_off, t4 - local_off
    rtt = t4 - t1
    ds, dc = scenario.link.to_server_delay * 1000, scenario.link.to_client_delay * 1000
    declared = scenario.link.describes_path(rtt / 1000)
    asym = (ds - dc) if declared else 0
    est.handshake_rtt_ns = rtt
    est.one_way_to_client_ns = round(rtt * dc / (ds + dc)) if declared else rtt // 2
    est.one_way_to_server_ns = rtt - est.one_way_to_client_ns
    if declared:
        est.offset_ns = control_ns - asym // 2
        est.method += "; declared link asymmetry taken out"
    t3 = _first(remote, server=True, syn_ack=True, outgoing=True, port=port)
    syns_there = [t for t in _handshake_times(remote, server=False, syn_ack=False,
                                              outgoing=False, port=port)
                  if t3 is not None and t <= t3]
    if not syns_there or t3 is None:
        return est
    t2, t3 = syns_there[-1] - remote_off, t3 - remote_off
    est.handshake_ns = ((t2 - t1) + (t3 - t4) - asym) // 2
    # Each estimate is within half its round trip of the truth; if the two intervals do
    # not meet, the handshake's four timestamps are not one exchange (a retransmitted
    # SYN-ACK, a capture that missed one): keep the control channel's.
    # (NTP's bound holds for any asymmetry, so the raw estimates are what is checked)
    raw = ((t2 - t1) + (t3 - t4)) // 2
    bound = (control_rtt_ns + max(0, rtt - (t3 - t2))) / 2
    if abs(raw - control_ns) > bound:
        est.method += (f"; the handshake's estimate ({est.handshake_ns / 1000:.0f} µs) is "
                       "outside both round trips' bounds, not used")
        return est
    est.offset_ns = est.handshake_ns
    est.method = "handshake (kernel timestamps on both hosts)" + (
        "; declared link asymmetry taken out" if declared else "")
    return est


SEQ_SPACE = 1 << 32
ARRIVAL_SLACK_NS = 1_000_000
"""An arrival may appear this much before its send (the clock offset is an estimate)."""
MAX_PIECE_BYTES = 1 << 18
"""Longest captured segment looked back over (GRO / BIG TCP packets stay well under)."""


def _rel(seq: int, base: int) -> int:
    """A sequence number as an offset from ``base`` (modulo 2^32: the stream may wrap)."""
    return (seq - base) % SEQ_SPACE


class _Arrivals:
    """The receiver's capture of one direction: data by byte range, the rest by header.

    A NIC may cut a sender's TSO burst into MSS pieces, and GRO may merge pieces on
    receipt, so the two hosts' captures of the same bytes need not have the same segment
    boundaries: data is matched by the bytes it carries, never by its header."""

    def __init__(self, packets: list[tuple[int, Any]], base: int) -> None:
        self.base = base
        # by first byte, for bisect: a lookup must not scan the whole capture (100k ops)
        self.data = sorted((_rel(p.seq, base), _rel(p.seq, base) + p.payload_len, t)
                           for t, p in packets if p.payload_len)
        self.starts = [lo for lo, _, _ in self.data]
        self.control: dict[tuple[int, int, str], list[int]] = {}
        for t, p in sorted(packets, key=lambda tp: tp[0]):
            if not p.payload_len:
                self.control.setdefault((p.seq, p.ack, p.flags), []).append(t)

    def arrival(self, t_sent: int, p: Any) -> int | None:
        """When ``p`` (sent at ``t_sent``) had wholly arrived: for data, the first arrival
        at or after its send of a piece holding its last byte; for the rest, the next
        capture of the same header."""
        if not p.payload_len:
            queue = self.control.get((p.seq, p.ack, p.flags))
            return queue.pop(0) if queue else None
        last = _rel(p.seq, self.base) + p.payload_len - 1
        holding = []
        i = bisect.bisect_right(self.starts, last) - 1
        while i >= 0 and self.data[i][0] > last - MAX_PIECE_BYTES:
            lo, hi, t = self.data[i]
            if hi > last:
                holding.append(t)
            i -= 1
        holding.sort()
        if not holding:
            return None
        return next((t for t in holding if t >= t_sent - ARRIVAL_SLACK_NS), holding[-1])


def _covered(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open byte ranges, as sorted disjoint ranges."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _uncovered(lo: int, hi: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [lo, hi) outside ``covered`` (sorted disjoint ranges)."""
    out: list[tuple[int, int]] = []
    at = lo
    for c_lo, c_hi in covered:
        if c_hi <= at:
            continue
        if c_lo >= hi:
            break
        if c_lo > at:
            out.append((at, c_lo))
        at = max(at, c_hi)
        if at >= hi:
            break
    if at < hi:
        out.append((at, hi))
    return out


def _merge_direction(sent: list[tuple[int, Any]], received: list[tuple[int, Any]],
                     side: Side, one_way_ns: int, sent_letter: str, arrival_letter: str
                     ) -> list[tuple[_Seg, str]]:
    """One direction: every sender-side segment with its arrival, then what only the
    receiver captured, each byte range once (the receiver's pieces of bytes the sender's
    capture already holds are arrivals, never segments of their own)."""
    everything = sent + received
    if not everything:
        return []
    base = min(everything, key=lambda tp: tp[0])[1].seq
    arrivals = _Arrivals(received, base)
    out: list[tuple[_Seg, str]] = []
    sent_ranges = []
    sent_headers: dict[tuple[int, int, str], int] = {}
    for t, p in sorted(sent, key=lambda tp: tp[0]):
        out.append((_Seg(t, side, p.seq, p.ack, p.payload_len, p.flags, p.window,
                         arrivals.arrival(t, p)), sent_letter))
        if p.payload_len:
            sent_ranges.append((_rel(p.seq, base), _rel(p.seq, base) + p.payload_len))
        else:
            key = (p.seq, p.ack, p.flags)
            sent_headers[key] = sent_headers.get(key, 0) + 1
    covered = _covered(sent_ranges)
    for t, p in sorted(received, key=lambda tp: tp[0]):
        if not p.payload_len:
            key = (p.seq, p.ack, p.flags)
            if sent_headers.get(key):
                sent_headers[key] -= 1
                continue
            out.append((_Seg(t - one_way_ns, side, p.seq, p.ack, 0, p.flags, p.window, t),
                        arrival_letter))
            continue
        lo = _rel(p.seq, base)
        for a, b in _uncovered(lo, lo + p.payload_len, covered):
            seq = (base + a) % SEQ_SPACE
            out.append((_Seg(t - one_way_ns, side, seq, p.ack, b - a, p.flags, p.window, t),
                        arrival_letter))
        # a retransmission the receiver saw twice is still the same bytes: count once
        covered = _covered(covered + [(lo, lo + p.payload_len)])
    return out


def merge_captures(local: list[Any], local_off: int, remote: list[Any], remote_to_ours: int,
                   port: int, one_way_to_client_ns: int, one_way_to_server_ns: int = 0
                   ) -> tuple[list[_Seg], str]:
    """Both hosts' captures as one list of segments on our perf clock, each timed at its
    sender: the client's from this host's capture, the server's from the serve's capture
    when it has them, else from their arrival here minus the one-way delay. Arrivals come
    from the receiver's capture, matched by byte range (TSO bursts cut into MSS pieces and
    GRO-merged pieces cover the same bytes), so no byte range is ever counted twice.
    Returns (segments in time order, one source letter per segment, see `SOURCE_KEY`)."""
    here = [(p.t_ns - local_off, p) for p in local]
    there = [(p.t_ns - remote_to_ours, p) for p in remote]
    to_server_sent = [(t, p) for t, p in here if p.outgoing and p.dport == port]
    to_server_arrived = [(t, p) for t, p in there if not p.outgoing and p.dport == port]
    to_client_sent = [(t, p) for t, p in there if p.outgoing and p.sport == port]
    to_client_arrived = [(t, p) for t, p in here if not p.outgoing and p.sport == port]
    out = _merge_direction(to_server_sent, to_server_arrived, Side.CLIENT,
                           one_way_to_server_ns, "L", "B")
    out += _merge_direction(to_client_sent, to_client_arrived, Side.SERVER,
                            one_way_to_client_ns, "R", "A")
    out.sort(key=lambda item: item[0].t_ns)
    return [seg for seg, _ in out], "".join(letter for _, letter in out)


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve_forever(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:7070"))
