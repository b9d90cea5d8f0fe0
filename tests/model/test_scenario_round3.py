"""The scenario language's statements for issue 26's behaviours — `shutdown rd|wr|rdwr`,
`write N eor`, `set sndbuf|notsent_lowat 8k`, `set user_timeout 1s` — parsed with one-line
errors, and run by the model as the socket calls they name. The kernel's side of the same
scenarios is tests/realnet/test_fidelity_round3.py."""

from __future__ import annotations

import pytest

from nagle_sim.model.events import Side
from nagle_sim.runners import simulate
from nagle_sim.scenario import (
    ScenarioError,
    SetValue,
    Shutdown,
    Write,
    describe,
    loads,
    parse_script,
)
from nagle_sim.trace import Outcome, Trace


def test_new_statements_parse_and_describe_themselves() -> None:
    body = parse_script("write 100 eor\nwrite 5 more eor\nwrite 7 EOR more\nshutdown wr\n"
                        "set sndbuf 8k\nset notsent_lowat 16384\nset user_timeout 1.5s")
    assert body == (Write(1, 100, eor=True), Write(2, 5, more=True, eor=True),
                    Write(3, 7, more=True, eor=True), Shutdown(4, "wr"),
                    SetValue(5, "sndbuf", 8192), SetValue(6, "notsent_lowat", 16384),
                    SetValue(7, "user_timeout", 1500))
    assert [describe(s) for s in body] == [
        ("write", "100 eor"), ("write", "5 more eor"), ("write", "7 more eor"),
        ("shutdown", "wr"), ("set", "sndbuf 8192"), ("set", "notsent_lowat 16384"),
        ("set", "user_timeout 1500ms")]


@pytest.mark.parametrize(("text", "message"), [
    ("write 10 eor eor", "use 'write N', 'write N more', 'write N eor'"),
    ("write 10 fast", "use 'write N', 'write N more', 'write N eor'"),
    ("shutdown", "use 'shutdown rd', 'shutdown wr' or 'shutdown rdwr'"),
    ("shutdown both", "use 'shutdown rd', 'shutdown wr' or 'shutdown rdwr'"),
    ("set sndbuf", "use 'set sndbuf 8k'"),
    ("set sndbuf 8q", "set sndbuf must be a byte count such as 8192 or 8k"),
    ("set sndbuf 2000m", "set sndbuf 2000m is too large"),
    ("set user_timeout 5", "bad duration '5'"),
    ("set rcvbuf 8k", "use 'set nodelay|cork|quickack on|off'"),
])
def test_bad_new_statements_get_one_line(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_script(text, "s.toml")
    assert message in str(err.value) and str(err.value).startswith("s.toml:1:")
    assert "\n" not in str(err.value)


def _run(client: str, server: str, delay_ms: int = 5) -> Trace:
    trace = simulate(loads(f'title = "t"\n[link]\ndelay_ms = {delay_ms}\n'
                           f'[client]\nscript = "{client}"\n[server]\nscript = "{server}"\n'))
    return trace


def _client(trace: Trace) -> list[tuple[str, int, int]]:
    return [(s.flags, s.seq, s.length) for s in trace.segments
            if s.src is Side.CLIENT and (s.length or "F" in s.flags)]


def test_shutdown_wr_half_closes_and_the_client_still_reads() -> None:
    trace = _run("write 100; shutdown wr; read 50", "read 100; write 50")
    assert trace.outcome is Outcome.OK, trace.message
    assert _client(trace)[:2] == [("PA", 1, 100), ("FA", 101, 0)]
    assert [o.op for o in trace.ops if o.side is Side.CLIENT][-2:] == ["shutdown", "read"]


def test_a_write_after_shutdown_wr_fails_with_epipe() -> None:
    trace = _run("write 100; shutdown wr; write 1", "read 100")
    assert trace.outcome is Outcome.ERROR
    assert "client write failed: EPIPE (Broken pipe)" in trace.message, trace.message


def test_shutdown_rdwr_then_data_resets() -> None:
    trace = _run("write 100; shutdown rdwr; sleep 50ms",
                 "read 100; sleep 20ms; write 50; sleep 30ms")
    assert trace.outcome is Outcome.OK, trace.message
    assert [s.flags for s in trace.segments if s.src is Side.CLIENT][-1] == "R"


def test_write_eor_keeps_the_next_write_out_of_the_held_record() -> None:
    with_eor = _run("write 1000; write 100 eor; write 100; read 1", "read 1200; write 1")
    without = _run("write 1000; write 100; write 100; read 1", "read 1200; write 1")
    assert _client(with_eor)[:3] == [("PA", 1, 1000), ("PA", 1001, 100), ("PA", 1101, 100)]
    assert _client(without)[:2] == [("PA", 1, 1000), ("PA", 1001, 200)]


def test_set_sndbuf_makes_the_write_block() -> None:
    small = _run("set sndbuf 4k; write 100000; read 1", "read 100000; write 1")
    default = _run("write 100000; read 1", "read 100000; write 1")
    ends = [next(o.end for o in t.ops if o.side is Side.CLIENT and o.op == "write")
            for t in (small, default)]
    assert ends[0] is not None and ends[1] is not None
    assert ends[0] > ends[1] + 20_000, ends      # blocked two round trips longer at least
