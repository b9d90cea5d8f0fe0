"""`nagle-sim realnet serve` + `realnet run --remote`: both sides' records are merged; the
serve authenticates with a token, answers every hostile input with an error reply and keeps
serving the next client, is never held by an idle client, says "busy" at once; the client
turns every malformed or missing reply into one line (exit 2).

Most checks need no privilege (the serve runs a side without capture); the merged run is
marked realnet (it captures on lo)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from nagle_sim.model.events import Side
from nagle_sim.scenario import load, loads
from nagle_sim.trace import Outcome
from realnet.remote import (
    MAX_HELLO_BYTES,
    PROTOCOL,
    PROTOCOL_VERSION,
    printable,
    scenario_text,
    serve_forever,
    token_proof,
)
from realnet.runner import RealnetError, run_real

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TOKEN = "test-token-0123456789"
NEVER_CONNECTS = ["127.0.0.1", 9]
"""A run request's ``data_from`` for runs whose data connection is never made."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, address: str, log: Path) -> None:
        self.address = address
        self.log = log
        host, port = address.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def connect(self) -> socket.socket:
        return socket.create_connection((self.host, self.port), timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NAGLE_SIM_REALNET_TOKEN", None)
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "realnet", "serve",
                                 "--listen", f"127.0.0.1:{port}", "--token", TOKEN],
                                env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if b"listening on" in log.read_bytes():
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError(f"realnet serve did not start: {log.read_text()}")
    try:
        yield Serve(f"127.0.0.1:{port}", log)
    finally:
        proc.terminate()
        proc.wait(10)
    # the serve survived every test in this module (no crash ends it early)
    assert proc.returncode in (0, -15), log.read_text()


def _lines(s: socket.socket) -> Callable[[], dict[str, object]]:
    f = s.makefile("rb")

    def next_line() -> dict[str, object]:
        line = f.readline()
        assert line.endswith(b"\n"), f"no reply line, got {line[:200]!r}"
        return json.loads(line)
    return next_line


def _send(s: socket.socket, msg: dict[str, object]) -> None:
    s.sendall(json.dumps({"v": PROTOCOL_VERSION, **msg}).encode() + b"\n")


def _authenticated(serve: Serve, token: str = TOKEN
                   ) -> tuple[socket.socket, Callable[[], dict[str, object]], dict[str, object]]:
    s = serve.connect()
    read = _lines(s)
    challenge = read()
    assert challenge["type"] == "challenge" and challenge["auth"] == "token"
    cnonce = "ab" * 16
    _send(s, {"type": "hello", "nonce": cnonce,
              "proof": token_proof(token, "client", str(challenge["nonce"]), cnonce)})
    return s, read, read()


def _healthy(serve: Serve) -> None:
    """The serve answers a new client: authenticates it and answers a clock request."""
    s, read, hello = _authenticated(serve)
    with s:
        assert hello["type"] == "hello", hello
        _send(s, {"type": "clock"})
        assert read()["type"] == "clock"


def _raw_reply(serve: Serve, payload: bytes) -> dict[str, object]:
    """Send ``payload`` before authenticating; the serve's reply after its challenge."""
    with serve.connect() as s:
        read = _lines(s)
        assert read()["type"] == "challenge"
        # the serve may close before it read everything: it still answered
        with contextlib.suppress(OSError):
            s.sendall(payload)
        return read()


# ---------------------------------------------------------------- hostile input, pre-auth
PRE_AUTH = {
    "deep JSON": b"[" * 100_000 + b"\n",
    "deep JSON within the line limit": b"[" * (MAX_HELLO_BYTES - 10) + b"\n",
    "5001-digit integer": b'{"v": 2, "type": "hello", "nonce": ' + b"9" * 5001 + b"}\n",
    "garbage bytes": bytes(range(256)) * 4 + b"\n",
    "invalid UTF-8": b'{"v": 2, "type": "\xff\xfe"}\n',
    "huge line": b"x" * (4 << 20),
    "not an object": b"[1, 2, 3]\n",
    "wrong version": json.dumps({"v": PROTOCOL_VERSION + 1, "type": "hello"}).encode() + b"\n",
    "no nonce": json.dumps({"v": PROTOCOL_VERSION, "type": "hello"}).encode() + b"\n",
    "wrong type": json.dumps({"v": PROTOCOL_VERSION, "type": "run"}).encode() + b"\n",
    "float version": b'{"v": 1e400, "type": "hello"}\n',
}


@pytest.mark.parametrize("payload", PRE_AUTH.values(), ids=PRE_AUTH.keys())
def test_hostile_line_before_auth_gets_an_error_and_the_serve_goes_on(
        server: Serve, payload: bytes) -> None:
    reply = _raw_reply(server, payload)
    assert reply["type"] == "error" and reply["error"], reply
    assert platform.release() not in json.dumps(reply)
    _healthy(server)


def test_wrong_token_is_refused_without_host_facts(server: Serve) -> None:
    s, _read, reply = _authenticated(server, token="not-the-token-at-all")
    s.close()
    assert reply["type"] == "error" and "authentication failed" in str(reply["error"])
    assert "kernel" not in reply and platform.release() not in json.dumps(reply)
    _healthy(server)


def test_challenge_says_nothing_about_the_host(server: Serve) -> None:
    with server.connect() as s:
        challenge = _lines(s)()
    assert set(challenge) == {"v", "type", "protocol", "auth", "nonce"}
    assert challenge["protocol"] == PROTOCOL


def test_version_mismatch_is_refused_clearly(server: Serve) -> None:
    reply = _raw_reply(server, json.dumps({"v": PROTOCOL_VERSION + 1, "type": "hello"})
                       .encode() + b"\n")
    assert reply["type"] == "error"
    assert "protocol version mismatch" in str(reply["error"])


# ---------------------------------------------------------------- hostile input, after auth
NESTED = "repeat 2 { " * 1000 + "write 1" + " }" * 1000
HOSTILE_SCENARIOS = {
    "1000 nested repeat": f'[server]\nscript = "{NESTED}"\n',
    "mss of 400 digits": "[link]\nmss = " + "9" * 400 + "\n",
    "5001-digit integer": "[link]\nmss = " + "1" * 5001 + "\n",
    "deep TOML": "a = " + "[" * 100_000 + "\n",
    "deep inline tables": "a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n",
    "endless empty loop": '[server]\nscript = "repeat 1000000000 { }"\n',
    "a terabyte write": '[server]\nscript = "write 1000000000000"\n',
    "a day of sleep": '[server]\nscript = "sleep 86400s"\n',
    "unknown statement": "[server]\nscript='rm -rf'\n",
    "not TOML": "\x00\x01garbage = = [\n",
}


@pytest.mark.parametrize("text", HOSTILE_SCENARIOS.values(), ids=HOSTILE_SCENARIOS.keys())
def test_hostile_scenario_is_rejected_and_the_serve_goes_on(server: Serve, text: str) -> None:
    s, read, hello = _authenticated(server)
    with s:
        assert hello["type"] == "hello"
        _send(s, {"type": "run", "scenario": text, "where": "fuzz.toml"})
        start = time.monotonic()
        reply = read()
        assert time.monotonic() - start < 10
    assert reply["type"] == "error" and "rejected" in str(reply["error"]), reply
    _healthy(server)


AFTER_AUTH = {
    "deep JSON": b"[" * 500_000 + b"\n",
    "5001-digit integer": b'{"v": 2, "type": "clock", "x": ' + b"7" * 5001 + b"}\n",
    "garbage bytes": bytes(range(256)) * 100 + b"\n",
    "huge line": b"y" * (2 << 20) + b"\n",
    "unknown message": json.dumps({"v": PROTOCOL_VERSION, "type": "format-disk"}).encode()
    + b"\n",
    "scenario not text": json.dumps({"v": PROTOCOL_VERSION, "type": "run", "scenario": 7})
    .encode() + b"\n",
}


@pytest.mark.parametrize("payload", AFTER_AUTH.values(), ids=AFTER_AUTH.keys())
def test_hostile_line_after_auth_gets_an_error_and_the_serve_goes_on(
        server: Serve, payload: bytes) -> None:
    s, read, hello = _authenticated(server)
    with s:
        assert hello["type"] == "hello"
        with contextlib.suppress(OSError):
            s.sendall(payload)
        reply = read()
    assert reply["type"] == "error" and reply["error"], reply
    _healthy(server)


def test_terminal_escapes_never_reach_the_operators_log(server: Serve) -> None:
    s, read, _hello = _authenticated(server)
    with s:
        _send(s, {"type": "run", "where": "\x1b]0;owned\x07\x1b[2J\rname\x9b31m",
                  "scenario": '[server]\nscript = "repeat 1000000000 { }"\n'})
        assert read()["type"] == "error"
    _send_run_of(server, "\x1b[31mred\x1b[0m.toml")
    log = server.log.read_bytes()
    assert b"\x1b" not in log and b"\x07" not in log
    assert "\x9b" not in log.decode("utf-8", "replace")


def _send_run_of(serve: Serve, where: str) -> None:
    """A tiny run that really starts (so the serve logs its ``where``); the client then
    vanishes and the serve aborts it after the client's silence."""
    s, read, _hello = _authenticated(serve)
    with s:
        _send(s, {"type": "run", "where": where, "data_from": NEVER_CONNECTS,
                  "scenario": '[server]\nscript = "sleep 1ms"\n[client]\nscript = "sleep 1ms"\n'})
        reply = read()
        assert reply["type"] == "ready", reply
        _send(s, {"type": "abort"})
        while read()["type"] != "result":
            pass


def _finish_run(s: socket.socket, read: Callable[[], dict[str, object]]
                ) -> tuple[list[dict[str, object]], dict[str, object]]:
    """Poll a started run until its result: (the server side's records, the result)."""
    records: list[dict[str, object]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        _send(s, {"type": "status"})
        reply = read()
        while reply["type"] in ("log", "packets"):
            records += reply.get("records", [])     # type: ignore[arg-type]
            reply = read()
        if reply["type"] == "result":
            return records, reply
        assert reply["type"] == "status", reply
        time.sleep(0.05)
    raise AssertionError("the run did not finish")


def test_a_stranger_connecting_first_to_the_data_port_is_refused(server: Serve) -> None:
    """Issue 29.8: the run's data port accepted whoever connected first, without the token
    (a third party received the server's 100 B and answered 5 B). Now the serve's kernel
    hears only the address and port the client named in its authenticated run request:
    the stranger's connect gets no answer, the client still runs."""
    s, read, _hello = _authenticated(server)
    real = socket.socket()
    with s, real:
        real.bind(("127.0.0.1", 0))
        _send(s, {"type": "run", "where": "data.toml",
                  "data_from": ["127.0.0.1", real.getsockname()[1]],
                  "scenario": '[server]\nscript = "write 100; read 5"\n'
                              '[client]\nscript = "read 100; write 5"\n'})
        ready = read()
        assert ready["type"] == "ready", ready
        port = int(ready["port"])      # type: ignore[call-overload]
        with socket.socket() as stranger:
            stranger.settimeout(1.5)
            with pytest.raises(OSError):      # TimeoutError: its SYN is dropped
                stranger.connect(("127.0.0.1", port))
                stranger.recv(100)            # before: the server's 100 B arrived
        real.settimeout(10)
        real.connect(("127.0.0.1", port))
        got = b""
        while len(got) < 100:
            chunk = real.recv(100 - len(got))
            assert chunk, "the data connection closed early"
            got += chunk
        real.sendall(b"x" * 5)
        records, result = _finish_run(s, read)
    assert result["type"] == "result"
    ops = [r["op"][:2] for r in records if "op" in r]         # type: ignore[index]
    assert ops == [["accept", ""], ["write", "100"], ["read", "5"]], ops
    end = next(r["end"] for r in records if "end" in r)
    assert end["done"] is True and end["error"] is None, end   # type: ignore[index]


@pytest.mark.parametrize("data_from, words", [
    (None, "'data_from' must be"),
    (["127.0.0.1"], "'data_from' must be"),
    (["127.0.0.1", 0], "'data_from' must be"),
    (["not an ip", 4000], "is not an IP address"),
    (["10.1.2.3", 4000], "a NAT or proxy between the hosts"),
], ids=["missing", "short", "port-0", "not-ip", "other-address"])
def test_a_run_request_must_name_where_its_data_connection_comes_from(
        server: Serve, data_from: object, words: str) -> None:
    s, read, _hello = _authenticated(server)
    with s:
        msg: dict[str, object] = {"type": "run", "where": "d.toml",
                                  "scenario": '[server]\nscript = "read 1"\n'}
        if data_from is not None:
            msg["data_from"] = data_from
        _send(s, msg)
        reply = read()
    assert reply["type"] == "error" and words in str(reply["error"]), reply
    _healthy(server)


def test_printable_strips_escapes() -> None:
    assert printable("a\x1b[2Jb\r\nc\x9bd\u202ee") == "a?[2Jb??c?d?e"


# ---------------------------------------------------------------- idle, slow and busy clients
def test_idle_client_does_not_delay_another_clients_run(server: Serve) -> None:
    scenario = load(DATA / "s4_quickack.toml")
    start = time.monotonic()
    run_real(scenario, remote=server.address, token=TOKEN)
    alone = time.monotonic() - start
    idle = server.connect()         # connects and says nothing
    idle_authenticated, _read, hello = _authenticated(server)
    assert hello["type"] == "hello"
    try:
        start = time.monotonic()
        trace = run_real(scenario, remote=server.address, token=TOKEN)
        beside_idle = time.monotonic() - start
    finally:
        idle.close()
        idle_authenticated.close()
    assert trace.outcome is Outcome.OK, trace.message
    assert beside_idle < alone + 1.0, (alone, beside_idle)


def test_idle_client_is_dropped_after_the_handshake_timeout(server: Serve) -> None:
    with server.connect() as s:
        read = _lines(s)
        assert read()["type"] == "challenge"
        start = time.monotonic()
        reply = read()
        waited = time.monotonic() - start
    from realnet.remote.protocol import HANDSHAKE_TIMEOUT_S

    assert reply["type"] == "error" and "timeout" in str(reply["error"])
    assert HANDSHAKE_TIMEOUT_S - 0.5 < waited < HANDSHAKE_TIMEOUT_S + 3, waited


def test_second_run_is_told_busy_at_once(server: Serve) -> None:
    first, read_first, _ = _authenticated(server)
    with first:
        _send(first, {"type": "run", "where": "long.toml", "data_from": NEVER_CONNECTS,
                      "scenario": '[server]\nscript = "sleep 3s"\n[client]\nscript = "sleep 3s"'})
        assert read_first()["type"] == "ready"
        second, read_second, _ = _authenticated(server)
        with second:
            _send(second, {"type": "run", "where": "second.toml", "data_from": NEVER_CONNECTS,
                           "scenario": '[server]\nscript = "sleep 1ms"\n'})
            start = time.monotonic()
            reply = read_second()
            assert time.monotonic() - start < 1.0
        assert reply["type"] == "error" and "busy" in str(reply["error"])
        _send(first, {"type": "abort"})
        while read_first()["type"] != "result":
            pass
    _healthy(server)


def test_no_auth_is_refused_off_loopback() -> None:
    with pytest.raises(RealnetError, match="loopback"):
        serve_forever("0.0.0.0:0", no_auth=True, once=True, log=lambda _m: None)


# ---------------------------------------------------------------- the client side
def _fake_server(script: Callable[[socket.socket], None]) -> tuple[str, threading.Thread]:
    """A one-connection server that behaves as ``script`` says."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve() -> None:
        with srv:
            conn, _ = srv.accept()
            with conn, contextlib.suppress(OSError):
                script(conn)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"127.0.0.1:{port}", thread


def _challenge(conn: socket.socket, auth: str = "none") -> None:
    conn.sendall(json.dumps({"v": PROTOCOL_VERSION, "type": "challenge", "protocol": PROTOCOL,
                             "auth": auth, "nonce": "cd" * 16}).encode() + b"\n")


def _then(*replies: bytes, close: bool = True) -> Callable[[socket.socket], None]:
    """Challenge (no auth), then for every client line one of ``replies``."""
    def script(conn: socket.socket) -> None:
        _challenge(conn)
        f = conn.makefile("rb")
        for reply in replies:
            if not f.readline():
                return
            conn.sendall(reply)
        if not close:
            time.sleep(60)
    return script


def _ok(msg: dict[str, object]) -> bytes:
    return json.dumps({"v": PROTOCOL_VERSION, **msg}).encode() + b"\n"


HELLO = _ok({"type": "hello", "kernel": "x"})
CLOCK = _ok({"type": "clock", "perf_ns": 1})
BAD_REPLIES: dict[str, Callable[[socket.socket], None]] = {
    "garbage": lambda c: c.sendall(bytes(range(256)) * 10 + b"\n"),
    "deep JSON": lambda c: c.sendall(b"[" * 200_000 + b"\n"),
    "closes at once": lambda c: None,
    "truncated line": lambda c: c.sendall(b'{"v": 2, "type": "chall'),
    "not our protocol": lambda c: c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n"),
    "huge line": lambda c: c.sendall(b"z" * (9 << 20)),
    "garbage after hello": _then(b"\xff\xfe\n"),
    "5001-digit clock": _then(HELLO, b'{"v": 2, "type": "clock", "perf_ns": '
                              + b"1" * 5001 + b"}\n"),
    "string clock": _then(HELLO, _ok({"type": "clock", "perf_ns": "soon"})),
    "bad port": _then(HELLO, *[CLOCK] * 8, _ok({"type": "ready", "port": 10 ** 30})),
    "error with escapes": _then(_ok({"type": "error", "error": "\x1b[2Jboom\r"})),
    "gone after ready": _then(HELLO, *[CLOCK] * 8, _ok({"type": "ready", "port": 1})),
}


@pytest.mark.parametrize("behaviour", BAD_REPLIES.values(), ids=BAD_REPLIES.keys())
def test_client_turns_any_bad_reply_into_one_line(
        behaviour: Callable[[socket.socket], None]) -> None:
    address, thread = _fake_server(behaviour)
    scenario = load(DATA / "s4_quickack.toml")
    start = time.monotonic()
    with pytest.raises(RealnetError) as info:
        run_real(scenario, remote=address)
    message = str(info.value)
    assert "\n" not in message and "\x1b" not in message and "\r" not in message, message
    assert time.monotonic() - start < 40
    thread.join(5)


def test_client_needs_the_token_the_server_asks_for() -> None:
    address, thread = _fake_server(lambda c: (_challenge(c, auth="token"), time.sleep(1)))
    env_token = os.environ.pop("NAGLE_SIM_REALNET_TOKEN", None)
    try:
        with pytest.raises(RealnetError, match="needs its token"):
            run_real(load(DATA / "s4_quickack.toml"), remote=address)
    finally:
        if env_token is not None:
            os.environ["NAGLE_SIM_REALNET_TOKEN"] = env_token
    thread.join(5)


def test_cli_prints_one_line_and_exits_2_on_a_garbage_reply() -> None:
    address, thread = _fake_server(lambda c: c.sendall(b"\x00\x01garbage\n"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "nagle_sim", "realnet", "run",
                           str(DATA / "s4_quickack.toml"), "--remote", address],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    thread.join(5)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreachable_remote_is_a_one_line_error() -> None:
    scenario = load(DATA / "s4_quickack.toml")
    with pytest.raises(RealnetError, match="cannot connect"):
        run_real(scenario, remote=f"127.0.0.1:{_free_port()}")


def test_remote_dying_mid_run_is_named_not_a_deadlock(server: Serve) -> None:
    """The server answers the handshake, then vanishes: "went away", not "deadlock"."""
    def script(conn: socket.socket) -> None:
        _challenge(conn)
        f = conn.makefile("rb")
        f.readline()
        conn.sendall(HELLO)
        for _ in range(8):
            f.readline()
            conn.sendall(CLOCK)
        f.readline()
        listener = socket.create_server(("127.0.0.1", 0))
        conn.sendall(_ok({"type": "ready", "port": listener.getsockname()[1]}))
        data, _ = listener.accept()
        f.readline()               # the first status poll: die without answering
        conn.shutdown(socket.SHUT_RDWR)
        time.sleep(3)              # the data connection stays open meanwhile
        data.close()
        listener.close()
    address, thread = _fake_server(script)
    scenario = loads('[client]\nscript = "write 1; read 1"\n[server]\nscript = "read 1; write 1"')
    with pytest.raises(RealnetError) as info:
        run_real(scenario, remote=address)
    assert "went away" in str(info.value) and "deadlock" not in str(info.value)
    thread.join(5)


# ---------------------------------------------------------------- real runs
@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
def test_remote_run_merges_both_sides(server: Serve) -> None:
    scenario = load(DATA / "s1_write_write_read.toml", ["client.nodelay=true"])
    trace = run_real(scenario, remote=server.address, token=TOKEN)
    assert trace.outcome is Outcome.OK, trace.message
    sides = {o.side for o in trace.ops}
    assert sides == {Side.CLIENT, Side.SERVER}
    server_ops = [o for o in trace.ops if o.side is Side.SERVER]
    assert server_ops[0].op == "accept"
    assert [o.op for o in server_ops[1:3]] == ["read", "write"]
    assert server_ops[1].line == 11 and server_ops[1].iteration == (0,)
    # server reads end after the client's writes started: the clocks are aligned
    first_write = next(o for o in trace.ops if o.side is Side.CLIENT and o.op == "write")
    assert server_ops[1].end is not None and server_ops[1].end >= first_write.start
    assert trace.meta["link"] == "remote" and trace.segments
    assert trace.meta["server_kernel"] == platform.release()
    assert any(e.side is Side.SERVER and e.kind == "tcp_info" for e in trace.events)


@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
def test_the_serve_never_learns_the_clients_directories(server: Serve,
                                                        tmp_path: Path) -> None:
    """Issue 33.5: the serve logged the client's local file path for every run. It is told
    the file's name only, and says so in its log and its errors; the client's trace keeps
    its own path."""
    secret = tmp_path / "home-ana-secret-project"
    secret.mkdir()
    path = secret / "s1.toml"
    path.write_text((DATA / "s1_write_write_read.toml").read_text())
    trace = run_real(load(path), remote=server.address, token=TOKEN)
    assert trace.outcome is Outcome.OK, trace.message
    log = server.log.read_text()
    assert "running the server side of s1.toml on" in log
    assert "home-ana-secret-project" not in log and str(tmp_path) not in log
    # both sides' scheduling is in the trace: this host's as well as the serve's
    assert trace.meta["sched"] and trace.meta["server_sched"]
    # an error the serve reports names the file the same way
    bad = secret / "bad.toml"
    bad.write_text('[client]\nscript = "write 1"\n[server]\nscript = "repeat 9999999 { '
                   'read 1 }"\n')
    with pytest.raises(RealnetError) as info:
        run_real(load(bad), remote=server.address, token=TOKEN)
    assert "bad.toml" in str(info.value) and "home-ana-secret-project" not in str(info.value)


@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
def test_remote_run_of_100k_server_ops_succeeds(server: Serve) -> None:
    """Issue 18: results are streamed in chunks, so a long run has no reply cap."""
    scenario = loads('[client]\nscript = "write 100000; read 1"\n'
                     '[server]\nscript = "repeat 100000 { read 1 }; write 1"\n', "big.toml")
    trace = run_real(scenario, remote=server.address, token=TOKEN)
    assert trace.outcome is Outcome.OK, trace.message
    server_ops = [o for o in trace.ops if o.side is Side.SERVER]
    assert len(server_ops) == 1 + 100_000 + 1     # accept, the reads, the write
    assert [o.op for o in server_ops[-2:]] == ["read", "write"]


def test_bad_scenario_text_is_rejected_by_the_client_as_one_line(server: Serve) -> None:
    # The scenario loader itself caps statements at the serve's own limit, so the bound a
    # well-formed scenario can still break is the serve's run time.
    scenario = loads('[server]\nscript = "read 1; repeat 700 { sleep 1s }"\n'
                     '[client]\nscript = "write 1"', "toolong.toml")
    with pytest.raises(RealnetError, match=r"sleeps 700 s \(limit 600 s\)"):
        run_real(scenario, remote=server.address, token=TOKEN)


def test_scenario_text_round_trips() -> None:
    for name in ("s1_write_write_read.toml", "s2_node_ten_bytes.toml", "s3_cork_vs_nodelay.toml"):
        original = load(DATA / name, ["client.nodelay=true"])
        again = loads(scenario_text(original))
        assert again.server.script and again.client.options.nodelay
        assert again.link == original.link


def test_strangers_holding_every_slot_cannot_lock_out_a_client_with_the_token(
        server: Serve) -> None:
    """Every slot held by connections that never authenticate (and reopen as they are
    dropped): a client with the token is still served, taking the oldest stranger's slot."""
    from realnet.remote.protocol import MAX_CLIENTS

    strangers = [server.connect() for _ in range(MAX_CLIENTS)]
    try:
        for s in strangers:
            assert _lines(s)()["type"] == "challenge"
        _healthy(server)                       # authenticated and answered

        def closed(s: socket.socket) -> bool:
            s.setblocking(False)
            try:
                return s.recv(1 << 16) == b""
            except BlockingIOError:
                return False

        # all were opened within milliseconds: had the newcomer waited for the handshake
        # timeout, they would all be gone; only the oldest gave its slot away
        time.sleep(0.2)
        assert closed(strangers[0]), "the oldest stranger gave its slot to the newcomer"
        assert not closed(strangers[-1]), "the newest stranger is still waiting"
    finally:
        for s in strangers:
            s.close()


def test_connections_beyond_the_cap_are_told_busy_at_once(server: Serve) -> None:
    """Authenticated connections hold their slots: one more is told busy at once."""
    from realnet.remote.protocol import MAX_CLIENTS

    idle = [_authenticated(server)[0] for _ in range(MAX_CLIENTS)]
    try:
        start = time.monotonic()
        with server.connect() as extra:
            reply = _lines(extra)()
        assert time.monotonic() - start < 1.5
        assert reply["type"] == "error" and "busy" in str(reply["error"])
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 5
    while True:         # the sessions end as their clients go
        try:
            _healthy(server)
            break
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_no_auth_on_loopback_runs_without_a_token() -> None:
    port = _free_port()
    thread = threading.Thread(target=serve_forever, args=(f"127.0.0.1:{port}",),
                              kwargs={"no_auth": True, "once": True, "log": lambda _m: None},
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    thread.join(10)       # that probe was the one connection; serve again for the run
    thread = threading.Thread(target=serve_forever, args=(f"127.0.0.1:{port}",),
                              kwargs={"no_auth": True, "once": True, "log": lambda _m: None},
                              daemon=True)
    thread.start()
    time.sleep(0.3)
    env_token = os.environ.pop("NAGLE_SIM_REALNET_TOKEN", None)
    try:
        trace = run_real(loads('[client]\nscript = "write 1; read 1"\n'
                               '[server]\nscript = "read 1; write 1"'), remote=f"127.0.0.1:{port}")
    finally:
        if env_token is not None:
            os.environ["NAGLE_SIM_REALNET_TOKEN"] = env_token
    thread.join(10)
    assert trace.outcome is Outcome.OK, trace.message
    assert {o.side for o in trace.ops} == {Side.CLIENT, Side.SERVER}


def test_keep_alive_clock_requests_cannot_hold_a_session(server: Serve) -> None:
    from realnet.remote.protocol import MAX_CLOCKS

    s, read, _hello = _authenticated(server)
    with s:
        for _ in range(MAX_CLOCKS):
            _send(s, {"type": "clock"})
            assert read()["type"] == "clock"
        _send(s, {"type": "clock"})
        reply = read()
    assert reply["type"] == "error" and "too many" in str(reply["error"])
    _healthy(server)


def test_a_trickling_client_is_dropped_at_the_handshake_deadline(server: Serve) -> None:
    with server.connect() as s:
        read = _lines(s)
        assert read()["type"] == "challenge"
        start = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in b'{"v": 2, "type": "hello", "nonce": "':
                s.sendall(bytes([byte]))
                time.sleep(0.25)
        reply = read()
        assert time.monotonic() - start < 8
    assert reply["type"] == "error" and "timeout" in str(reply["error"])


@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
def test_remote_gigabyte_write_is_sent_not_called_a_deadlock(server: Serve) -> None:
    """Issue 18: the serve allocated the whole write, and the run was reported as a
    deadlock with no byte sent. It now sends from one buffer."""
    scenario = loads('[client]\nscript = "read 1000000000"\n'
                     '[server]\nscript = "write 1000000000"\n', "gigabyte.toml")
    trace = run_real(scenario, remote=server.address, token=TOKEN)
    assert trace.outcome is Outcome.OK, trace.message
    read = next(o for o in trace.ops if o.side is Side.CLIENT and o.op == "read")
    assert read.arg == "1000000000" and read.end is not None


# ---------------------------------------------------------------- issue 18: merging
def _pkt(t_us: int, client_sends: bool, flags: str, seq: int = 0, length: int = 0,
         outgoing: bool = True) -> object:
    from realnet.capture import CapturedPacket

    port = 9000
    sport, dport = (40000, port) if client_sends else (port, 40000)
    return CapturedPacket(t_us * 1000, "", sport, "", dport, seq, 0, flags, length, 0,
                          outgoing)


def test_the_segments_give_the_clock_offset_and_segments_are_timed_at_their_sender(
        ) -> None:
    """Client clock = server clock + 5 ms, 2 µs each way (times in µs). The segments both
    hosts captured bound the offset to 2 µs either side of the truth; each segment takes
    its sender's time and the receiver's capture gives its arrival."""
    from realnet.remote import estimate_offset, merge_captures

    skew = 5_000
    local = [_pkt(100, True, "S"), _pkt(104, False, "SA", outgoing=False),
             _pkt(105, True, "PA", 1, 10), _pkt(200 + 2_000, False, "A", outgoing=False)]
    remote = [_pkt(102 - skew, True, "S", outgoing=False), _pkt(102 - skew, False, "SA"),
              _pkt(107 - skew, True, "PA", 1, 10, outgoing=False), _pkt(200 - skew, False, "A")]
    sc = loads('[client]\nscript = "write 1"\n[server]\nscript = "read 1"\n')
    # the control channel's estimate (123 ns off, ±25 µs) is the looser bound: unused
    est = estimate_offset(local, 0, remote, 0, 9000, sc, control_ns=-skew * 1000 + 123,
                           control_rtt_ns=50_000)
    assert est.method.startswith("segments captured on both hosts"), est.method
    assert est.offset_ns == -skew * 1000 and est.uncertainty_ns == 2_000
    assert est.one_way_to_server_ns == est.one_way_to_client_ns == 2_000
    assert est.bounding_segments == 4
    segs, sources = merge_captures(local, 0, remote, est.offset_ns, 9000,
                                   est.one_way_to_client_ns)
    assert sources == "LRLR"
    assert [(s.src, s.t_ns // 1000, (s.arrive_ns or 0) // 1000) for s in segs] == [
        (Side.CLIENT, 100, 102), (Side.SERVER, 102, 104), (Side.CLIENT, 105, 107),
        (Side.SERVER, 200, 2200)]
    # no capture on the serve: the server's segments at arrival minus the one-way delay
    segs, sources = merge_captures(local, 0, [], 0, 9000, 2_000_000)
    assert sorted(sources) == ["A", "A", "L", "L"]
    last = max(segs, key=lambda s: s.t_ns)
    assert last.src is Side.SERVER and last.t_ns // 1000 == 200
    assert last.arrive_ns is not None and last.arrive_ns // 1000 == 2200
    # no capture here (not root): the client's segments at their arrival there, minus
    # the one-way delay towards the server
    segs, sources = merge_captures([], 0, remote, est.offset_ns, 9000, 2_000, 2_000)
    assert sorted(sources) == ["B", "B", "R", "R"]
    assert [s.t_ns // 1000 for s in segs if s.src is Side.CLIENT] == [100, 105]


def test_a_remote_write_that_sent_nothing_is_not_called_a_deadlock() -> None:
    from nagle_sim.scenario.steps import deadlock_message
    from realnet.remote.client import _name_remote_failure
    from realnet.supervise import RunEnd

    sc = loads('[client]\nscript = "read 1000000000"\n[server]\nscript = "write 1000000000"\n',
               "g.toml")
    write = ("the client to read (a 1000000000-byte write fills the send buffer)", 2)
    nothing = RunEnd(Outcome.DEADLOCK, deadlock_message("g.toml", [
        (Side.CLIENT, ("1000000000 more of 1000000000 bytes", 1)), (Side.SERVER, write)]))
    end = _name_remote_failure(sc, nothing)
    assert end.outcome is Outcome.ERROR
    # what is known: the serve was alive and blocked in the write, the client got no byte;
    # never a cause the facts rule out (the serve is not gone, nothing failed to allocate)
    assert end.message.startswith("g.toml:2: the client received no byte while the remote "
                                  "server, alive, was blocked in its write of 1000000000 "
                                  "bytes"), end.message
    for wrong in ("peer is not reading", "never sent", "allocate", "gone"):
        assert wrong not in end.message, wrong
    assert "the path stalled, or this host did not receive them" in end.message
    some = RunEnd(Outcome.DEADLOCK, deadlock_message("g.toml", [
        (Side.CLIENT, ("5 more of 1000000000 bytes", 1)), (Side.SERVER, write)]))
    assert "received 999999995 of the 1000000000 bytes it reads" in \
        _name_remote_failure(sc, some).message
    # the client finished (it is not reading): a real deadlock keeps its name
    stuck = RunEnd(Outcome.DEADLOCK, deadlock_message(
        "g.toml", [(Side.CLIENT, None), (Side.SERVER, write)]))
    assert _name_remote_failure(sc, stuck) is stuck


def test_host_facts_from_a_serve_are_bounded_and_printable() -> None:
    from realnet.hostfacts import clean_facts

    raw = {"kernel": "\x1b[2J6.1" + "x" * 10_000, "hz": 10 ** 40, "evil": "rm -rf",
           "tcp_rmem": list(range(1000)), "offloads": {"tso": True, str(1): [[[1]]]},
           "congestion": {"server": "bbr\u202e"}}
    facts = clean_facts(raw)
    assert "evil" not in facts
    assert facts["kernel"].startswith("?[2J6.1") and len(facts["kernel"]) <= 200
    assert facts["hz"] is None and len(facts["tcp_rmem"]) == 32
    assert facts["congestion"] == {"server": "bbr?"}
    assert clean_facts("not a dict") == {}


def _bytes_by_side(segs: list[object]) -> dict[Side, int]:
    out = {Side.CLIENT: 0, Side.SERVER: 0}
    for s in segs:
        out[s.src] += s.length      # type: ignore[attr-defined]
    return out


def test_a_tso_burst_seen_as_mss_pieces_at_the_receiver_is_counted_once() -> None:
    """The sender's capture has one TSO burst (seq 1, 2896 B), the receiver's the NIC's
    two MSS pieces: one segment of 2896 B, arriving with its last piece. Both ways."""
    from realnet.remote import merge_captures

    local = [_pkt(100, True, "PA", 1, 2896),
             _pkt(300, False, "PA", 1, 1448, outgoing=False),
             _pkt(301, False, "PA", 1449, 1448, outgoing=False)]
    remote = [_pkt(102, True, "PA", 1, 1448, outgoing=False),
              _pkt(103, True, "PA", 1449, 1448, outgoing=False),
              _pkt(298, False, "PA", 1, 2896)]
    segs, sources = merge_captures(local, 0, remote, 0, 9000, 2_000, 2_000)
    assert _bytes_by_side(segs) == {Side.CLIENT: 2896, Side.SERVER: 2896}
    assert sources == "LR"
    assert [(s.t_ns // 1000, (s.arrive_ns or 0) // 1000) for s in segs] == [(100, 103),
                                                                           (298, 301)]


def test_gro_merged_pieces_at_the_receiver_are_counted_once() -> None:
    """The sender's capture has two MSS segments, the receiver's one GRO-merged packet:
    both segments arrive with it; no byte is counted twice. Both ways."""
    from realnet.remote import merge_captures

    local = [_pkt(100, True, "PA", 1, 1448), _pkt(101, True, "PA", 1449, 1448),
             _pkt(302, False, "PA", 1, 2896, outgoing=False)]
    remote = [_pkt(103, True, "PA", 1, 2896, outgoing=False),
              _pkt(298, False, "PA", 1, 1448), _pkt(299, False, "PA", 1449, 1448)]
    segs, sources = merge_captures(local, 0, remote, 0, 9000, 2_000, 2_000)
    assert _bytes_by_side(segs) == {Side.CLIENT: 2896, Side.SERVER: 2896}
    assert sources == "LLRR"
    assert {(s.arrive_ns or 0) // 1000 for s in segs if s.src is Side.CLIENT} == {103}
    assert {(s.arrive_ns or 0) // 1000 for s in segs if s.src is Side.SERVER} == {302}


def test_bytes_only_the_receiver_captured_are_added_once() -> None:
    """A merged arrival covering bytes the sender's capture has and bytes it missed adds
    only the missing range; a receiver that saw a piece twice adds it once."""
    from realnet.remote import merge_captures

    local = [_pkt(100, True, "PA", 1, 1448)]
    remote = [_pkt(103, True, "PA", 1, 2896, outgoing=False),
              _pkt(150, True, "PA", 2897, 100, outgoing=False),
              _pkt(160, True, "PA", 2897, 100, outgoing=False)]
    segs, sources = merge_captures(local, 0, remote, 0, 9000, 2_000, 2_000)
    assert _bytes_by_side(segs)[Side.CLIENT] == 2896 + 100
    assert sources == "LBB"
    assert [(s.seq, s.length) for s in segs] == [(1, 1448), (1449, 1448), (2897, 100)]


def _streaming_serve(on_status: Callable[[socket.socket, int], None]
                     ) -> Callable[[socket.socket], None]:
    """Challenge, hello, clocks, a real data listener; then ``on_status(conn, n)`` answers
    the n-th status poll (a hostile serve's reply)."""
    def script(conn: socket.socket) -> None:
        _challenge(conn)
        f = conn.makefile("rb")
        data = socket.create_server(("127.0.0.1", 0))
        with data:
            polls = 0
            while line := f.readline():
                kind = json.loads(line).get("type")
                if kind == "hello":
                    conn.sendall(HELLO)
                elif kind == "clock":
                    conn.sendall(CLOCK)
                elif kind == "run":
                    conn.sendall(_ok({"type": "ready", "port": data.getsockname()[1]}))
                elif kind == "status":
                    polls += 1
                    on_status(conn, polls)
    return script


def _rows(n: int, flags: str = "A") -> list[list[object]]:
    return [[1_000 + i, 9000, 40000, i, 0, flags, 0, 100, 1] for i in range(n)]


def _refused(behaviour: Callable[[socket.socket], None], words: str) -> float:
    address, thread = _fake_server(_streaming_serve(behaviour))
    start = time.monotonic()
    with pytest.raises(RealnetError) as info:
        run_real(load(DATA / "s4_quickack.toml"), remote=address)
    message = str(info.value)
    assert words in message and "\n" not in message, message
    thread.join(5)
    return time.monotonic() - start


def test_a_serve_answering_every_poll_with_packets_is_refused() -> None:
    """Packets are part of the streamed result: a status after them is a broken reply,
    so supervise never loops on a serve that streams 'results' forever."""
    def packets_then_status(conn: socket.socket, _n: int) -> None:
        conn.sendall(_ok({"type": "packets", "packets": _rows(10)}))
        conn.sendall(_ok({"type": "status", "blocked": False, "progress": 0,
                          "waiting": "", "line": 0}))
    assert _refused(packets_then_status, "in the middle of the streamed result") < 30


def test_more_packets_than_the_cap_are_refused_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import realnet.remote.client as remote

    monkeypatch.setattr(remote, "MAX_REMOTE_PACKETS", 100)

    def forever(conn: socket.socket, _n: int) -> None:
        for _ in range(10_000):
            conn.sendall(_ok({"type": "packets", "packets": _rows(30)}))
    assert _refused(forever, "more than 100 captured packets") < 30


@pytest.mark.parametrize("row", [
    [1, 9000, 40000, 1, 0, "A" * 5_000_000, 0, 100, 1],     # unbounded flags
    [1, 9000, 40000, 1, 0, "SSSSSSS", 0, 100, 1],            # 7 flag characters
    [1, 99999, 40000, 1, 0, "A", 0, 100, 1],                 # port beyond 65535
    [1, 9000, 40000, 1 << 40, 0, "A", 0, 100, 1],            # seq beyond 32 bits
    [1, 9000, 40000, 1, 0, "A", 1 << 30, 100, 1],            # a 1 GiB "segment"
    [1, 9000, 40000, 1, 0, "A", 0, 100, 7],                  # outgoing is 0 or 1
])
def test_every_packet_field_is_bounded(row: list[object]) -> None:
    def one(conn: socket.socket, _n: int) -> None:
        conn.sendall(_ok({"type": "packets", "packets": [row]}))
    _refused(one, "malformed captured packet")


def test_a_reply_that_never_ends_hits_the_reply_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import realnet.remote.client as remote

    monkeypatch.setattr(remote, "REPLY_DEADLINE_S", 1.0)

    def trickle(conn: socket.socket, _n: int) -> None:
        for _ in range(100):
            conn.sendall(_ok({"type": "packets", "packets": _rows(1)}))
            time.sleep(0.2)
    assert _refused(trickle, "did not end within 1 s") < 15


def test_the_segments_clock_is_narrowed_by_the_control_channel() -> None:
    """True offset 0, 2 µs each way. A retransmitted SYN (the first lost) leaves the
    direction to the server bounded only by the first SYN's send, 1 s before its arrival:
    the control channel's round trip (±25 µs) narrows that side. Captures 30 ms off the
    control channel (the serve's capture clock conversion wrong) keep the kernel's
    timestamps, which keep every segment causal, and say so."""
    from realnet.remote import estimate_offset

    sc = loads('[client]\nscript = "write 1"\n[server]\nscript = "read 1"\n')
    local = [_pkt(100, True, "S"), _pkt(1_000_100, True, "S"),
             _pkt(1_000_104, False, "SA", outgoing=False)]
    remote = [_pkt(1_000_102, True, "S", outgoing=False), _pkt(1_000_102, False, "SA")]
    est = estimate_offset(local, 0, remote, 0, 9000, sc, control_ns=0,
                           control_rtt_ns=50_000)
    assert est.method.startswith("segments") and "narrowed" in est.method, est.method
    assert est.handshake_rtt_ns == 4_000
    assert abs(est.offset_ns) <= est.uncertainty_ns <= 14_000
    skewed = [_pkt(1_030_102, True, "S", outgoing=False), _pkt(1_030_102, False, "SA")]
    est = estimate_offset(local, 0, skewed, 0, 9000, sc, control_ns=0,
                           control_rtt_ns=50_000)
    assert "disagrees" in est.method, est.method
    assert 29_998_000 <= est.offset_ns <= 1_030_002_000
