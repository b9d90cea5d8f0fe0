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
from realnet import cleanup, sockopts
from realnet.core import (
    LogReader,
    Progress,
    RealnetError,
    RunEnd,
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
                     limits=self.server.limits.to_json())
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
                congestion=sockopts.congestion_for(scenario.server.profile.bbr))
        except OSError as exc:
            listener.close()
            self.error(f"cannot listen on {addr}: {exc.strerror or exc}")
            return
        port = listener.getsockname()[1]
        self.say(f"realnet serve: {self.name}: running the server side of {where} "
                 f"on {addr}:{port}")
        rt = rt_priority_available()
        runner = SideRunner(Side.SERVER, scenario.server, where, listener=listener,
                            rt_priority=rt, keep_records=False)
        try:
            runner.start()
            runner.go()
            runner.ready()          # in accept() before the client is told to connect
            self.chan.send({"type": "ready", "port": port})
            self.supervise_run(runner, min(self.server.limits.run_s, run_timeout_s(scenario)))
            runner.join(5.0)
            meta: dict[str, Any] = {"server_kernel": platform.release(),
                                    "server_sched": f"SCHED_FIFO {rt}" if rt else "normal"}
            if note:
                meta["server_notes"] = [note]
            self.stream_result(runner, meta)
        finally:
            runner.cleanup()

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

    def stream_result(self, runner: SideRunner, meta: dict[str, Any]) -> None:
        """The side's records in chunks of about `LOG_CHUNK_BYTES`, then the result: no
        reply is ever larger than a chunk, whatever the run's length."""
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
        self.chan.send({"type": "result", "meta": meta})


# ---------------------------------------------------------------- client
class RemoteSide:
    """The remote server side as `supervise` sees it (polled over the control channel)."""

    def __init__(self, chan: Channel, max_ops: int) -> None:
        self.chan = chan
        self.reader = LogReader(max_ops=max_ops)
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
        self._receive_reply()

    def _receive_reply(self) -> None:
        """One status reply, or the whole streamed result."""
        while True:
            msg = self.chan.recv(REPLY_TIMEOUT_S)
            if self._handle(msg):
                return

    def _handle(self, msg: dict[str, Any]) -> bool:
        """Take one message; True once a reply is complete (a status or the result)."""
        kind = msg.get("type")
        if kind == "log":
            records = msg.get("records")
            if not isinstance(records, list):
                raise ProtocolError("malformed log chunk")
            try:
                for rec in records:
                    self.reader.add(rec)
            except ValueError as exc:
                raise ProtocolError(f"malformed log record: {exc}") from None
            return False
        if kind == "result":
            if not self.reader.ended:
                raise ProtocolError("the result came without the server side's end record")
            meta = msg.get("meta")
            if not isinstance(meta, dict):
                raise ProtocolError("malformed result (no meta)")
            self.meta = {k: printable(v, 200) if isinstance(v, str) else
                         [printable(x, 500) for x in v if isinstance(x, str)]
                         for k, v in meta.items()
                         if k in ("server_kernel", "server_sched", "server_notes")
                         and isinstance(v, str | list)}
            self.log = self.reader.log
            if self.log.error:
                self.log.error = printable(self.log.error, 2000)
            self._finished = True
            return True
        if kind == "status":
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
    meta = base_meta(scenario)
    meta.update(link="remote", remote=remote,
                server_kernel=printable(kernel, 100) if isinstance(kernel, str) else None,
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
    far = RemoteSide(chan, max_ops=script_size(scenario.server.script).statements + 2)
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
    if outcome.outcome is Outcome.OK and server_log.error:
        outcome = RunEnd(Outcome.ERROR, server_log.error)
    trace = build_trace(scenario, {Side.CLIENT: runner.log, Side.SERVER: server_log}, segs,
                        meta, outcome)
    report_retransmissions(trace, say)
    return trace


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
