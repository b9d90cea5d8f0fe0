"""The remote runs' control protocol: framing, authentication, limits, the scenario text.

Owns: protocol ``nagle-sim-realnet/2`` (one JSON object per line, each with ``"v": 2``;
the exchange is drawn in `realnet.remote`'s docstring), its bounds (message sizes,
timeouts, clients, packets), the token proof (HMAC-SHA256 over both nonces), `Channel`
(bounded line framing over a socket), `ProtocolError`, what a serve accepts (`Limits`,
`check_limits`) and the scenario as the text the server receives (`scenario_text`).
Must not import simpy, textual or rich.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import select
import socket
import time
from dataclasses import dataclass
from typing import Any

from nagle_sim.scenario import Scenario
from realnet.host import (
    RealnetError,
)
from realnet.supervise import (
    script_size,
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


def token_proof(token: str, role: str, server_nonce: str, client_nonce: str) -> str:
    msg = f"{PROTOCOL}/{PROTOCOL_VERSION}|{role}|{server_nonce}|{client_nonce}".encode()
    return hmac.new(token.encode(), msg, hashlib.sha256).hexdigest()


def nonce_ok(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value) is not None


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


def scenario_name(source: str) -> str:
    """What a serve is told a scenario is called: the file's name, never its directories
    (``/home/ana/work/s1.toml`` -> ``s1.toml``; a path of either OS's separators)."""
    name = source.replace("\\", "/").rstrip("/").rpartition("/")[2]
    return printable(name, 200) or "<scenario>"


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



def check_token(token: str, where: str) -> str:
    if not 8 <= len(token) <= 256 or not all(33 <= ord(c) <= 126 for c in token):
        raise RealnetError(f"{where}: a token is 8 to 256 printable ASCII characters "
                           "without spaces")
    return token
