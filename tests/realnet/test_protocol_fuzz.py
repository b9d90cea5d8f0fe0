"""Fuzz the remote protocol's decoders (Hypothesis, derandomized suite-wide): whatever
bytes a peer sends, `Channel` raises only `ProtocolError`, `LogReader` only ValueError, and
`printable` always gives one terminal-safe line. No sockets beyond a socketpair."""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if not sys.platform.startswith("linux"):
    pytest.skip("realnet needs Linux", allow_module_level=True)

from realnet.records import LogReader
from realnet.remote import Channel, ProtocolError, printable

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=5),
    max_leaves=30)


def _decode(line: bytes, max_line: int = 4096) -> dict[str, Any]:
    a, b = socket.socketpair()
    with a, b:
        chan = Channel(a, max_line)
        b.sendall(line + b"\n")
        return chan.recv(1.0)


@settings(max_examples=300)
@given(st.binary(max_size=300).filter(lambda b: b"\n" not in b))
def test_channel_turns_any_bytes_into_a_message_or_a_protocol_error(line: bytes) -> None:
    try:
        msg = _decode(line)
    except ProtocolError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(msg, dict) and msg["v"] == 2


@settings(max_examples=150)
@given(JSON)
def test_channel_accepts_only_versioned_objects(value: Any) -> None:
    line = json.dumps(value).encode()
    if len(line) > 4000:
        return
    try:
        msg = _decode(line)
    except ProtocolError:
        assert not (isinstance(value, dict) and value.get("v") == 2)
    else:
        assert msg == value


def test_channel_refuses_deep_nesting_and_huge_integers() -> None:
    for line in (b"[" * 50_000 + b"]" * 50_000, b'{"v": 2, "n": ' + b"9" * 5001 + b"}",
                 b'{"v": 1e999}'):
        with pytest.raises(ProtocolError, match="malformed|mismatch"):
            _decode(line, 1 << 20)


SMALL = st.none() | st.booleans() | st.integers() | st.text(max_size=6)
OP = st.tuples(st.sampled_from(["read", "write", "accept", "rm"]) | SMALL, st.text(max_size=6)
               | SMALL, st.integers() | SMALL, st.none() | st.integers(),
               st.integers() | SMALL, st.lists(st.integers() | SMALL, max_size=3) | SMALL,
               st.none() | st.text(max_size=6) | SMALL, st.integers() | SMALL).map(list)
RECORD = st.one_of(
    st.builds(lambda op: {"op": op}, OP | st.lists(SMALL | st.lists(SMALL, max_size=2),
                                                   min_size=8, max_size=8)),
    st.builds(lambda keys: {"keys": keys}, st.lists(st.text(max_size=6) | SMALL, max_size=3)),
    st.builds(lambda rec: {"info": rec},
              st.tuples(st.integers() | SMALL, st.integers() | SMALL,
                        st.lists(st.integers() | SMALL, max_size=3)).map(list)),
    st.builds(lambda end: {"end": end},
              st.fixed_dictionaries({"error": st.none() | st.text(max_size=6) | SMALL,
                                     "done": SMALL, "rt_rests": SMALL}) | SMALL),
    JSON)


@settings(max_examples=300)
@given(st.lists(RECORD, max_size=8))
def test_log_reader_takes_only_well_formed_records(records: list[Any]) -> None:
    """Records off the network: any shape is a ValueError or a well-typed log, never
    another exception, never more ops than allowed."""
    reader = LogReader(max_ops=3)
    try:
        for rec in records:
            reader.add(rec)
    except ValueError:
        return
    assert len(reader.log.ops) <= 3
    assert all(type(o.start_ns) is int and isinstance(o.arg, str) for o in reader.log.ops)
    assert all(all(type(v) is int for v in i.data.values()) for i in reader.log.infos)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_printable_is_one_safe_line(text: str) -> None:
    out = printable(text)
    assert "\n" not in out and "\r" not in out and "\x1b" not in out
    assert all(ch.isprintable() or ch == " " for ch in out), out


def test_the_longest_writev_the_loader_accepts_is_a_readable_record() -> None:
    """Issue 29.9: a writev's argument over 10,000 characters was "not a short string" to
    the record reader, though the loader accepts it and the model runs it. The bound now
    follows the loader's: every writev it accepts reads back."""
    from nagle_sim.scenario import MAX_WRITEV_PARTS, describe, parse_script
    from nagle_sim.scenario.script import MAX_SIZE
    from realnet.records import MAX_ARG_CHARS, OpLog

    script = "writev " + " ".join([str(MAX_SIZE)] * MAX_WRITEV_PARTS)
    (stmt,) = parse_script(script)
    op, arg = describe(stmt)
    assert len(arg) > 10_000 and len(arg) <= MAX_ARG_CHARS
    back = OpLog.from_rec(json.loads(json.dumps(OpLog(op, arg, 1, 2, line=1).to_rec())))
    assert back.arg == arg
    with pytest.raises(ValueError):     # and the reader still bounds what a peer sends
        OpLog.from_rec([op, arg + " 1", 1, 2, 1, [], None, 0])
    with pytest.raises(Exception, match="too large"):   # the loader refuses a longer one
        parse_script("writev " + " ".join([str(MAX_SIZE + 1)] * 2))
