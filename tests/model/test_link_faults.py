"""`[link] drop` / `hold`: the scenario keys, their errors, and what the model's link does
with them (`nagle_sim.sim.link`). realnet's relay counts the same way (tested here on
raw packets; the real-kernel runs are in tests/realnet/test_fidelity_rules.py)."""

from __future__ import annotations

import struct

import pytest

from nagle_sim.model import Side
from nagle_sim.scenario import LinkFault, ScenarioError, loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Source
from realnet.relay import packet_kinds, parse_fault

BASE = """[link]
delay_ms = 10
{link}
[client]
nodelay = true
script = "write 100; write 100; write 100; read 1"
[server]
script = "read 300; write 1"
"""


def test_entries_parse_into_faults() -> None:
    sc = loads(BASE.format(link='drop = ["to_server data 2", "to_client ack 1-3"]\n'
                                'hold = ["to_server fin 1 5ms"]'), "x.toml")
    assert sc.link.faults == (
        LinkFault(Side.SERVER, "data", 2, 2), LinkFault(Side.CLIENT, "ack", 1, 3),
        LinkFault(Side.SERVER, "fin", 1, 1, 5000))
    assert [f.spec() for f in sc.link.faults] == [
        "to_server data 2", "to_client ack 1-3", "to_server fin 1 5000us"]
    assert not sc.link.gso, "a faulty link is emulated (TUN), so it cuts GSO bursts"


@pytest.mark.parametrize(("link", "says"), [
    ('drop = "to_server data 2"', "expected a list"),
    ('drop = ["to_sever data 2"]', "expected \"to_server|to_client"),
    ('drop = ["to_server syn 1"]', "unknown kind 'syn'"),
    ('drop = ["to_server data 0"]', "counted from 1"),
    ('drop = ["to_server data 5-2"]', "N ≤ M"),
    ('drop = ["to_server data 2 5ms"]', "takes no delay"),
    ('hold = ["to_server data 2"]', "needs how long"),
    ('hold = ["to_server data 2 0ms"]', "more than 0"),
    ('hold = ["to_server data 2 61s"]', "at most 60 s"),
    ('drop = [3]', "expected \"to_server|to_client"),
])
def test_bad_entries_are_one_line_naming_file_line_and_key(link: str, says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        loads(BASE.format(link=link), "x.toml")
    msg = str(err.value)
    assert msg.startswith(f"x.toml:3: link.{link.split()[0]}: "), msg
    assert says in msg and "\n" not in msg


def test_a_dropped_segment_never_arrives_and_is_sent_again() -> None:
    trace = run_sim(loads(BASE.format(link='drop = ["to_server data 2"]'), "x.toml"))
    assert trace.outcome is Outcome.OK, trace.message
    data = [s for s in trace.segments if s.src is Side.CLIENT and s.length]
    assert data[1].arrive is None and all(s.arrive is not None for s in data[2:])
    assert any(s.seq == data[1].seq for s in data[2:]), "the lost bytes are re-sent"


def test_a_held_segment_arrives_after_the_one_sent_behind_it() -> None:
    trace = run_sim(loads(BASE.format(link='hold = ["to_server data 2 5ms"]'), "x.toml"))
    assert trace.outcome is Outcome.OK, trace.message
    first, second, third = [s for s in trace.segments if s.src is Side.CLIENT and s.length]
    assert second.arrive is not None and third.arrive is not None
    late = (second.arrive - second.t) - (first.arrive - first.t)
    assert first.arrive is not None and late == 5_000 and third.arrive < second.arrive
    ooo = next(s for s in trace.segments if s.src is Side.SERVER and s.t >= third.arrive)
    assert ooo.ack == second.seq, "a duplicate ACK: the gap is still open"


def _ipv4_tcp(payload: int, flags: int) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 32 + payload, 0, 0, 64, 6, 0,
                     bytes(4), bytes(4))
    tcp = struct.pack("!HHIIBBHHH", 1, 2, 0, 0, 8 << 4, flags, 0, 0, 0) + bytes(12)
    return ip + tcp + bytes(payload)


@pytest.mark.parametrize(("payload", "flags", "kinds"), [
    (100, 0x18, ("data",)), (0, 0x10, ("ack",)), (0, 0x11, ("fin",)),
    (100, 0x19, ("data", "fin")), (0, 0x12, ()), (0, 0x04, ()),
])
def test_the_relay_counts_kinds_as_the_model_does(payload: int, flags: int,
                                                  kinds: tuple[str, ...]) -> None:
    from nagle_sim.sim.link import segment_kinds
    assert packet_kinds(_ipv4_tcp(payload, flags)) == kinds == segment_kinds(payload, flags)


def test_the_relay_reads_what_link_fault_spec_writes() -> None:
    for fault in (LinkFault(Side.SERVER, "data", 2, 4), LinkFault(Side.CLIENT, "fin", 1, 1,
                                                                   5000)):
        name, parsed = parse_fault(fault.spec())
        assert name == f"to_{fault.towards.value}" and parsed.kind == fault.kind
        assert (parsed.first, parsed.last) == (fault.first, fault.last)
        assert parsed.extra_ns == (None if fault.extra is None else fault.extra * 1000)


def test_compare_pairs_retransmissions_both_executors_sent() -> None:
    """A scripted loss makes both executors retransmit: compare pairs the kernel's
    retransmission with the model's (same bytes) instead of reporting it as missing from
    the model; one the model did not send stays a difference."""
    import dataclasses

    from nagle_sim.compare import compare

    sim = run_sim(loads(BASE.format(link='drop = ["to_server data 2"]'), "x.toml"))
    real = dataclasses.replace(sim, source=Source.REALNET, segments=list(sim.segments))
    assert compare(sim, real).agree
    again = [s for s in sim.segments if s.src is Side.CLIENT and s.length][-1]
    real.segments.append(dataclasses.replace(again, t=again.t + 1000))
    result = compare(sim, real)
    assert not result.agree and any("retransmitted" in p for p in result.problems)
