"""``nagle-sim realnet serve``: the server side of scenarios, for remote clients.

Owns: `serve_forever` (listen, authenticate, one run per connection, a cap on clients)
and a session's run: parse the scenario text (`nagle_sim.scenario.loads`), check it
against `protocol.Limits`, run only its server script (`realnet.side.SideRunner`), capture
on this host, and stream the log and packets back. It never executes anything else.
Must not import simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import ctypes
import hmac
import ipaddress
import json
import os
import platform
import secrets
import select
import socket
import struct
import sys
import threading
import time
from typing import Any

from nagle_sim.model.events import Side
from nagle_sim.scenario import Scenario, ScenarioError, loads
from realnet import cleanup, hostfacts, sockopts
from realnet.host import (
    Progress,
    RealnetError,
    capture_unavailable,
    check_platform,
    maxseg_for,
    rt_priority_available,
)
from realnet.remote.protocol import (
    HANDSHAKE_TIMEOUT_S,
    LOG_CHUNK_BYTES,
    MAX_CLIENTS,
    MAX_CLOCKS,
    MAX_HELLO_BYTES,
    MAX_REMOTE_PACKETS,
    MAX_REQUEST_BYTES,
    PACKETS_PER_CHUNK,
    PROTOCOL,
    PROTOCOL_VERSION,
    REQUEST_TIMEOUT_S,
    SEND_TIMEOUT_S,
    SETUP_TIMEOUT_S,
    STATUS_SILENCE_S,
    TOKEN_ENV,
    Channel,
    Limits,
    ProtocolError,
    check_limits,
    check_token,
    nonce_ok,
    printable,
    scenario_name,
    token_proof,
)
from realnet.side import SideRunner
from realnet.supervise import (
    rtt_s,
    run_timeout_s,
)


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
        if not nonce_ok(client_nonce):
            self.error("hello: 'nonce' must be 32 hex digits")
            raise ProtocolError("hello without a valid nonce")
        client_nonce = str(client_nonce)
        reply: dict[str, Any] = {"type": "hello", "protocol": PROTOCOL}
        if token is not None:
            proof = hello.get("proof")
            expected = token_proof(token, "client", nonce, client_nonce)
            if not isinstance(proof, str) or not hmac.compare_digest(proof, expected):
                self.error("authentication failed: wrong or missing token")
                raise ProtocolError("authentication failed")
            reply["proof"] = token_proof(token, "server", nonce, client_nonce)
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
        # a client's own directories are not ours to log (an older client sends them)
        where = scenario_name(where) if isinstance(where, str) and where else "<remote>"
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
        peer = self.data_peer(msg.get("data_from"))
        if peer is None:
            return
        if not self.server.run_lock.acquire(blocking=False):
            self.error("busy: another run is in progress on this server; try again later")
            return
        try:
            self.execute(scenario, where, peer)
        finally:
            self.server.run_lock.release()

    def data_peer(self, value: Any) -> tuple[str, int] | None:
        """The one address the run's data connection may come from: the client's address
        as this end of the control connection sees it, and the source port the client bound
        its data socket to and named in its (authenticated) run request. None, after an
        error reply, when the request names none or an address that is not the client's
        (a NAT between the hosts: the data connection could not be told apart)."""
        peer_addr = self.conn.getpeername()[0]
        if (not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], str)
                or type(value[1]) is not int or not 0 < value[1] < 65536):
            self.error("run: 'data_from' must be [the client's address, its data port] "
                       "(this serve accepts the data connection from that port only: "
                       "update the client)")
            return None
        try:
            said = _plain_ip(value[0])
        except ValueError:
            self.error(f"run: 'data_from': {printable(value[0], 60)!r} is not an IP address")
            return None
        seen = _plain_ip(peer_addr)
        if said != seen:
            self.error(f"run: the client says it is {said}, this serve sees {seen}: "
                       "a NAT or proxy between the hosts hides which data connection is "
                       "the client's; remote runs need a direct path")
            return None
        return peer_addr, value[1]

    def execute(self, scenario: Scenario, where: str, peer: tuple[str, int]) -> None:
        addr = self.conn.getsockname()[0]
        listener = socket.socket(self.conn.family, socket.SOCK_STREAM)
        try:
            _accept_only(listener, *peer)
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


def _plain_ip(text: str) -> str:
    """An IP address in one spelling (an IPv4-mapped IPv6 address as IPv4)."""
    ip = ipaddress.ip_address(text.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


SO_ATTACH_FILTER = 26
_SKF_NET_OFF = -0x100000
"""Classic BPF's offset of the network header (a TCP socket's filter starts at TCP's)."""


def _accept_only(listener: socket.socket, addr: str, port: int) -> None:
    """Let ``listener`` hear TCP segments from ``addr``:``port`` only (issue 29.8).

    The run's data port used to accept whoever connected first. A classic BPF socket
    filter is checked by the kernel on every segment that reaches the socket, the
    listener included (``tcp_filter()`` in ``tcp_v4_rcv``/``tcp_v6_rcv``), so a
    stranger's SYN is dropped before any connection exists, and the accepted socket
    inherits the filter (``sk_clone_lock``). The data stream stays the scenario's bytes
    only: nothing is added to the measured exchange (a secret sent on the data
    connection would be). The port is the one the client bound before naming it on the
    authenticated control connection, so no other program can use it meanwhile."""
    ip = ipaddress.ip_address(_plain_ip(addr))
    prog = [(0x28, 0, 0, 0),                                      # ldh [0]: source port
            (0x15, 0, 0, port)]                                   # jeq #port
    if isinstance(ip, ipaddress.IPv4Address):
        words = [(12, int(ip))]                                   # IPv4 saddr
    else:
        packed = ip.packed
        words = [(8 + 4 * i, int.from_bytes(packed[4 * i:4 * i + 4], "big"))
                 for i in range(4)]                               # IPv6 saddr
    for offset, value in words:
        prog += [(0x20, 0, 0, (_SKF_NET_OFF + offset) & 0xFFFFFFFF),   # ld [net + off]
                 (0x15, 0, 0, value)]                                  # jeq #value
    prog += [(0x06, 0, 0, 0xFFFFFFFF),                            # ret #all: accept
             (0x06, 0, 0, 0)]                                     # ret #0: drop
    # each jeq jumps to the drop on a mismatch: its jf is the distance to the last insn
    last = len(prog) - 1
    prog = [(code, 0, last - i - 1, k) if code == 0x15 else (code, jt, jf, k)
            for i, (code, jt, jf, k) in enumerate(prog)]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    listener.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


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
