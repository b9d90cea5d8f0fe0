"""nagle_sim.trace.summary: iterations and stall causes, the numbers the CLI, TUI and lessons
quote."""

from __future__ import annotations

import pytest

from nagle_sim import scenario
from nagle_sim.model.events import Micros, Side
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import SegmentRecord
from nagle_sim.trace.summary import iterations, summarize


def test_iterations_come_from_the_first_top_level_loop_only() -> None:
    """A `repeat 1` loop followed by another loop is one iteration, not merged with the
    second loop's first pass; statements after the loop do not count."""
    trace = run_sim(scenario.loads('''
[client]
script = """
repeat 1 { write 1; read 1 }
repeat 3 { sleep 50ms; write 1; read 1 }
"""
[server]
script = "repeat 4 { read 1; write 1 }"
''', "loops.toml"))
    its = iterations(trace)
    assert len(its) == 1 and its[0].latency < 1000


def test_a_stall_names_the_hold_that_was_still_on() -> None:
    """The server's later Nagle hold was released before the gap; the client's earlier
    cork hold was still on, and it is the one the stall is blamed on."""
    trace = run_sim(scenario.loads('''
[link]
delay_ms = 1
[client]
cork = true
script = "write 10; read 3"
[server]
script = "write 1; write 1; read 10; write 1"
''', "mask.toml"))
    stalls = summarize(trace).stalls
    assert stalls, "the cork ceiling leaves a 200 ms gap"
    assert stalls[0].held_code == "CORK_HOLD", stalls[0].text()


@pytest.mark.parametrize(("length", "flags", "data", "pure_ack"), [
    (100, "PA", True, False),
    (0, "A", False, True),
    (0, "PA", False, True),       # PSH on an empty segment does not make it data
    (0, "FA", False, False),      # a FIN-ACK ends the stream; it is not a pure ACK
    (0, "SA", False, False),
    (0, "RA", False, False),
    (0, "S", False, False),
])
def test_one_rule_says_what_is_data_and_what_is_a_pure_ack(length: int, flags: str,
                                                           data: bool, pure_ack: bool) -> None:
    seg = SegmentRecord(t=Micros(0), src=Side.CLIENT, seq=1, ack=1, length=length,
                        flags=flags)
    assert (seg.is_data, seg.is_pure_ack) == (data, pure_ack)


CORK_EACH_REQUEST = '''
[link]
delay_ms = 20
[client]
script = "repeat 3 { set cork on; write 500; set cork off; read 1 }"
[server]
script = "repeat 3 { read 500; sleep 20ms; write 1 }"
'''


def test_a_hold_begun_in_the_last_microseconds_of_a_gap_is_not_its_cause() -> None:
    """Found by comparing random scenarios with the kernel: a write corked and uncorked at
    once, just as the reply arrives, held its bytes for 2 µs of a 20 ms gap. The gap was
    the reply on the link, and the stall says so (it used to say "corked")."""
    from nagle_sim.trace.summary import stalls

    trace = run_sim(scenario.loads(CORK_EACH_REQUEST, "cork.toml"))
    after_reply = [st for st in stalls(trace) if "uncork" in st.ended_by]
    assert after_reply, [(st.held_by, st.ended_by) for st in stalls(trace)]
    assert all(st.held_by.startswith("waiting on the link: server's P.")
               for st in after_reply), [st.held_by for st in after_reply]
    assert all(st.held_code == "" for st in after_reply)


def test_gaps_a_sleep_explains_are_kept_only_when_asked() -> None:
    """`stalls(asleep=True)` (compare's twins) keeps the server's 20 ms think time inside a
    40 ms gap as "the application slept"; the default leaves such gaps out only when the
    sleep covers at least half of the gap."""
    from dataclasses import replace

    from nagle_sim.trace.summary import stalls

    sc = scenario.loads(CORK_EACH_REQUEST, "cork.toml")
    # a sleep a little longer than half of the 40 ms gap hides it from the stall list
    long_sleep = scenario.loads(CORK_EACH_REQUEST.replace("sleep 20ms", "sleep 21ms"),
                                "cork.toml")
    trace = run_sim(long_sleep)
    slept = [st for st in stalls(trace, asleep=True) if st.held_by == "the application slept"]
    assert len(slept) == 3 and all(st.duration >= 21_000 for st in slept)
    assert not any(st.held_by == "the application slept" for st in stalls(trace))
    assert len(stalls(trace, asleep=True)) == len(stalls(trace)) + 3
    plain = run_sim(replace(sc))
    assert any(st.held_by == "no data waiting to be sent" for st in stalls(plain))


@pytest.mark.parametrize(("wait_ms", "named"), [
    (11.0, "11.0 ms after the data arrived: too soon for the delayed-ACK timer"),
    (41.0, "a delayed ACK (41.0 ms after the data arrived)"),
])
def test_a_real_pure_ack_is_a_delayed_ack_only_if_it_waited_for_its_timer(
        wait_ms: float, named: str) -> None:
    """Issue 33: a slow remote's 11 ms receive delay was named "a delayed ACK" (Linux
    waits at least 40 ms). The receiver's capture says when the data arrived there."""
    from nagle_sim.trace import Source, Trace
    from nagle_sim.trace.summary import stalls

    wait = round(wait_ms * 1000)
    data = SegmentRecord(t=Micros(1_000), src=Side.CLIENT, seq=1, ack=1, length=10,
                         flags="PA", arrive=Micros(1_300))
    ack = SegmentRecord(t=Micros(1_300 + wait), src=Side.SERVER, seq=1, ack=11, length=0,
                        flags="A", arrive=Micros(1_600 + wait))
    trace = Trace(source=Source.REALNET, title="t", segments=[data, ack])
    (stall,) = stalls(trace)
    assert named in stall.ended_by, stall.ended_by
    # no arrival captured: no claim either way
    trace.segments[0] = SegmentRecord(t=Micros(1_000), src=Side.CLIENT, seq=1, ack=1,
                                      length=10, flags="PA")
    (stall,) = stalls(trace)
    assert "whether it waited for the timer is unknown" in stall.ended_by
