"""`nagle-sim realnet serve` + `realnet run --remote` on loopback: both sides' records are
merged, a version mismatch and an oversized message are refused clearly. Needs root (the
run captures on lo); the protocol checks themselves need no privilege."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from nagle_sim.model.events import Side
from nagle_sim.scenario import load
from realnet.remote import MAX_REQUEST_BYTES, PROTOCOL_VERSION, scenario_text
from realnet.runner import RealnetError, run_real

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "realnet", "serve", "--listen",
                             f"127.0.0.1:{port}"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("realnet serve did not start")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()


def _exchange(address: str, payload: bytes) -> dict[str, object]:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(payload)
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.split(b"\n")[0])


@pytest.mark.realnet
@pytest.mark.usefixtures("requires_root_netns")
def test_remote_run_merges_both_sides(server: str) -> None:
    scenario = load(DATA / "s1_write_write_read.toml", ["client.nodelay=true"])
    trace = run_real(scenario, remote=server)
    assert trace.outcome == "ok", trace.message
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
    assert any(e.side is Side.SERVER and e.kind == "tcp_info" for e in trace.events)


def test_version_mismatch_is_refused_clearly(server: str) -> None:
    reply = _exchange(server, json.dumps({"v": PROTOCOL_VERSION + 1, "type": "hello"}).encode()
                      + b"\n")
    assert reply["type"] == "error"
    assert "protocol version mismatch" in str(reply["error"])


def test_oversized_message_is_rejected(server: str) -> None:
    big = b'{"v": 1, "type": "hello", "pad": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}\n'
    reply = _exchange(server, big)
    assert reply["type"] == "error" and "too large" in str(reply["error"])


def test_bad_scenario_text_is_rejected(server: str) -> None:
    host, port = server.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        f = s.makefile("rwb")
        for msg in ({"type": "hello"}, {"type": "run", "scenario": "[server]\nscript='rm -rf'"}):
            f.write(json.dumps({"v": PROTOCOL_VERSION, **msg}).encode() + b"\n")
            f.flush()
            reply = json.loads(f.readline())
        assert reply["type"] == "error" and "unknown statement" in str(reply["error"])


def test_unreachable_remote_is_a_one_line_error() -> None:
    scenario = load(DATA / "s4_quickack.toml")
    with pytest.raises(RealnetError, match="cannot connect"):
        run_real(scenario, remote=f"127.0.0.1:{_free_port()}")


def test_scenario_text_round_trips() -> None:
    from nagle_sim.scenario import loads

    for name in ("s1_write_write_read.toml", "s2_node_ten_bytes.toml", "s3_cork_vs_nodelay.toml"):
        original = load(DATA / name, ["client.nodelay=true"])
        again = loads(scenario_text(original))
        assert again.server.script and again.client.options.nodelay
        assert again.link == original.link
