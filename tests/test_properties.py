"""Hypothesis properties of the simulator and the scenario loader."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nagle_sim import scenario
from nagle_sim.model import Side
from nagle_sim.scenario import ScenarioError
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Trace

op = st.one_of(
    st.tuples(st.just("write"), st.integers(1, 4000)),
    st.tuples(st.just("write_more"), st.integers(1, 3000)),
    st.tuples(st.just("writev"), st.lists(st.integers(1, 500), min_size=1, max_size=4)),
    st.tuples(st.just("sleep"), st.integers(0, 300)),
    st.tuples(st.just("set"), st.sampled_from(["nodelay", "cork", "quickack"]), st.booleans()),
)


def render(ops: list) -> tuple[str, int]:
    lines, total = [], 0
    for o in ops:
        if o[0] == "write":
            lines.append(f"write {o[1]}")
            total += o[1]
        elif o[0] == "write_more":
            lines.append(f"write {o[1]} more")
            total += o[1]
        elif o[0] == "writev":
            lines.append("writev " + " ".join(map(str, o[1])))
            total += sum(o[1])
        elif o[0] == "sleep":
            lines.append(f"sleep {o[1]}ms")
        else:
            lines.append(f"set {o[1]} {'on' if o[2] else 'off'}")
    return "\n".join(lines), total


EXPLORING = os.environ.get("HYPOTHESIS_PROFILE") == "explore"
"""A local bug hunt (tests/conftest.py): use the profile's example count, not the suite's."""

RESENDS = {"RETRANSMIT", "LOSS_PROBE"}
"""Reason codes of segments that may carry bytes already sent: a tail loss probe re-sends
the last segment when no ACK came within about 2·SRTT (a delayed ACK can take longer),
and an RTO re-sends the oldest. The link never loses, so these are spurious, but real."""


def check_stream(trace: Trace, side: Side, total: int) -> None:
    """``side``'s bytes: new data goes out contiguously from 1 and ends at ``total``;
    a segment that repeats bytes is a retransmission and repeats only bytes already sent;
    the peer delivers each byte once (its cumulative ACK ends at total + 1, or + 2 with
    our FIN, so no duplicate was counted as new data)."""
    sent_to = 1                       # first byte not yet sent (ISN 0, SYN takes 1)
    for s in trace.segments:
        if s.src is not side or not s.length:
            continue
        if s.seq >= sent_to:
            assert s.seq == sent_to, (side, "gap before", s.label())
            sent_to = s.seq + s.length
        else:
            assert s.code in RESENDS, (side, "overlap that is not a resend", s.label())
            assert s.seq + s.length <= sent_to, (side, "resend of unsent bytes", s.label())
    assert sent_to - 1 == total, (side, sent_to - 1, total)
    acks = [s.ack for s in trace.segments if s.src is side.peer and "A" in s.flags]
    assert max(acks) - 1 in (total, total + 1), (side, max(acks), total)


@settings(max_examples=settings.default.max_examples if EXPLORING else 60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(client_ops=st.lists(op, min_size=1, max_size=12),
       server_ops=st.lists(op, min_size=0, max_size=6),
       delay=st.sampled_from([0, 0.3, 7, 60]), mss=st.sampled_from([536, 1000, 1448]),
       profile=st.sampled_from(["linux", "linux-5.4"]),
       nodelay=st.booleans(), read_chunk=st.integers(1, 5000))
# A tail loss probe re-sends byte 3: the server is in ping-pong, so its ACK waits 40 ms,
# while the probe fires 14 ms after the send (two packets out on a 0 ms link).
@example(client_ops=[("write", 1), ("write", 1), ("write", 1)],
         server_ops=[("write", 1), ("write", 1), ("sleep", 14)],
         delay=0, mss=536, profile="linux", nodelay=True, read_chunk=1)
def test_every_byte_is_delivered_exactly_once_in_order_and_runs_end(
        client_ops: list, server_ops: list, delay: float, mss: int, profile: str,
        nodelay: bool, read_chunk: int) -> None:
    c_script, c_total = render(client_ops)
    s_script, s_total = render(server_ops)
    full, rest = divmod(c_total, read_chunk)
    reads = [f"read {read_chunk}"] * full + ([f"read {rest}"] if rest else [])
    creads = f"read {s_total}" if s_total else ""
    text = (f'[link]\ndelay_ms = {delay}\nmss = {mss}\n'
            f'[client]\nprofile = "{profile}"\nnodelay = {str(nodelay).lower()}\n'
            f'script = """\n{c_script}\n{creads}\nsleep 1s\n"""\n'
            f'[server]\nprofile = "{profile}"\n'
            f'script = """\n{s_script}\n' + "\n".join(reads) + '\nsleep 1s\n"""\n')
    trace = run_sim(scenario.loads(text, "prop.toml"))
    assert trace.outcome is Outcome.OK, trace.message
    check_stream(trace, Side.CLIENT, c_total)
    check_stream(trace, Side.SERVER, s_total)
    # every read completed, and close found nothing unread (that would send a reset)
    reads_done = sum(int(o.arg) for o in trace.ops if o.side is Side.SERVER and o.op == "read")
    assert reads_done == c_total
    assert not any("R" in s.flags for s in trace.segments), "a reset: bytes left unread"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises_anything_but_scenario_error(text: str) -> None:
    try:
        scenario.loads(text, "fuzz.toml")
    except ScenarioError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.toml")


script_chars = st.sampled_from(list("writeadvsl0123456789 {};#\nmsuorpkcqfn-.x"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=script_chars, max_size=80))
def test_arbitrary_scripts_never_raise_anything_but_scenario_error(script: str) -> None:
    text = f'[client]\nscript = """{script.replace(chr(34), "")}"""\n'
    try:
        scenario.loads(text, "fuzz.toml")
    except ScenarioError as exc:
        assert "\n" not in str(exc)
