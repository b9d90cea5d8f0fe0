"""Remote runs: the server side of a scenario on another machine's kernel.

Owns: ``nagle-sim realnet serve`` (`server.serve_forever`), the client half
(`client.run_remote`) and the control protocol between them (`protocol`), including its
security model (docs/realnet.md, "Remote runs"); putting the serve's clock on this host's
(`clock`) and both captures into one list of segments (`merge`). The server receives the
scenario *text*, parses it with `nagle_sim.scenario.loads`, checks its size against
`protocol.Limits` and runs only its server script; it never executes anything else.
Imports realnet's shared modules (side, records, supervise, host, assemble), never
`realnet.runner`. Must not import simpy, textual or rich.

Protocol ``nagle-sim-realnet/2``: one JSON object per line, each with ``"v": 2``.

    server -> client on connect: {"type": "challenge", "auth": "token"|"none", "nonce": N}
    client -> server                      server -> client
    {"type": "hello", "nonce": C,         {"type": "hello", "proof": P', "kernel": ...}
     "proof": P}                          (P, P' = HMAC-SHA256 of the token over both nonces)
    {"type": "clock"}            (×N)     {"type": "clock", "perf_ns": ...}
    {"type": "run", "scenario": TEXT,     {"type": "ready", "port": P}   (data listener,
     "where": NAME,                        hearing only data_from: a BPF socket filter)
     "data_from": [ADDR, PORT]}            (the client's bound data socket)
    {"type": "status"}        (polling)   {"type": "status", "blocked": ..., ...}
                                          or, once the server side is done,
                                          {"type": "log", "records": [...]}  (×k, chunked)
                                          {"type": "result", "meta": {...}}
    {"type": "abort"}                     the log chunks and the result
    any problem                           {"type": "error", "error": "one line"}, then close

One run per connection. Nothing about the host (kernel, limits) is sent before the client
has proved it knows the token.
"""

from .client import RemoteSide, parse_remote, run_remote
from .clock import ClockEstimate, estimate_offset
from .merge import SOURCE_KEY, causality, merge_captures
from .protocol import (
    MAX_HELLO_BYTES,
    PROTOCOL,
    PROTOCOL_VERSION,
    TOKEN_ENV,
    Channel,
    Limits,
    ProtocolError,
    check_limits,
    printable,
    scenario_name,
    scenario_text,
    token_proof,
)
from .server import serve_forever

__all__ = [
    "MAX_HELLO_BYTES", "PROTOCOL", "PROTOCOL_VERSION", "SOURCE_KEY", "TOKEN_ENV", "Channel",
    "ClockEstimate", "Limits", "ProtocolError", "RemoteSide", "causality", "check_limits",
    "estimate_offset", "merge_captures", "parse_remote", "printable", "run_remote",
    "scenario_name", "scenario_text", "serve_forever", "token_proof",
]
