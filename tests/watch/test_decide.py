"""The decision engine on raw records recorded from this kernel (no root needed).

The fixtures (tests/watch/fixtures, made by tests/watch/record_fixtures.py on Linux 6.18,
HZ=250) are the BPF program's own records of tests/watch/programs/wwr.py in each variant.
"""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nagle_sim.model.events import Reason
from realnet.watch import raw
from realnet.watch.decide import Engine

FIXTURES = Path(__file__).parent / "fixtures"


def replay(name):
    host, events = raw.read_fixture(FIXTURES / f"{name}.jsonl")
    eng = Engine(hz=host["hz"])
    decisions = [d for e in events for d in eng.feed(e)]
    return eng, decisions


def codes(decisions, side=None, kind=None):
    return [d.code for d in decisions if (side is None or d.side == side)
            and (kind is None or d.kind == kind)]


def test_write_write_read_stalls_are_nagle_and_the_servers_delayed_ack():
    eng, decisions = replay("wwr")
    stalls = eng.stalls()
    assert len(stalls) == 4                      # 5 rounds: all but the first
    for s in stalls:
        assert s.causes == ["nagle", "delayed_ack"]
        assert s.side == "client"
        assert 39_000 <= s.end_us - s.start_us <= 50_000
        assert "snd_sml − snd_una = 6 B" in s.text
        # the peer's own timer: armed (ato 10 jiffies), then fired, in that order
        ev = [d.code for d in s.evidence]
        assert ev == [Reason.DELACK_WAIT.name, Reason.DELACK_FIRED.name]
        arm, fired = s.evidence
        assert arm.side == fired.side == "server" and arm.data["ato_j"] == 10
        assert arm.data["pingpong"] >= 1
        assert s.fix.startswith("TCP_NODELAY on the client")
    # round 1 did not stall: the server still had quick-ACK credit
    notes = eng.notes()
    assert len(notes) == 1
    assert "quick-ACK mode" in notes[0] and "credit left 15" in notes[0]
    first_hold = next(d for d in decisions if d.kind == "hold")
    quick = [d for d in decisions if d.side == "server" and d.code == "QUICKACK_MODE"]
    assert quick and quick[0].t_us < first_hold.t_us
    assert quick[0].data["pingpong"] == 0


def test_every_hold_says_nagle_with_minshalls_evidence():
    _eng, decisions = replay("wwr")
    holds = [d for d in decisions if d.kind == "hold"]
    assert holds and all(d.code == Reason.NAGLE_HOLD.name for d in holds)
    for d in holds:
        assert d.data["sml_unacked"] == 6 and d.data["queued"] == 7
        assert d.data["nonagle"] == 0 and d.data["packets_out"] == 1


def test_ipv6_is_the_same_story():
    eng, _ = replay("wwr_v6")
    stalls = eng.stalls()
    assert len(stalls) == 2
    assert all(s.cause == "nagle+delayed_ack" for s in stalls)
    assert all(s.conn.startswith("[::1]:") for s in stalls)


def test_nodelay_twin_holds_nothing():
    eng, decisions = replay("nodelay")
    assert eng.stalls() == []
    assert not [d for d in decisions if d.kind == "hold"]
    assert any(d.detail == "TCP_NODELAY = 1" for d in decisions)


def test_quickack_after_each_read_sends_the_delayed_ack_from_setsockopt():
    eng, decisions = replay("quickack")
    assert eng.stalls() == []
    server_acks = [d for d in decisions if d.side == "server" and d.kind == "ack_now"]
    assert Reason.QUICKACK_OPT.name in {d.code for d in server_acks}
    assert Reason.DELACK_FIRED.name not in {d.code for d in server_acks}


def test_cork_is_released_by_the_probe_timer():
    eng, decisions = replay("cork")
    stalls = eng.stalls()
    assert len(stalls) == 2
    for s in stalls:
        assert s.causes == ["cork"] and s.side == "client"
        assert 199_000 <= s.end_us - s.start_us <= 225_000
        assert "probe timer" in s.text
    released = [d for d in decisions if d.kind == "segment"]
    assert released and all(d.code == Reason.PROBE0_RELEASE.name for d in released)
    armed = [d for d in decisions if d.code == Reason.PROBE0_ARMED.name]
    assert armed and all(d.timer == "probe0" and d.deadline_us for d in armed)


def test_msg_more_is_named_for_what_it_is():
    eng, decisions = replay("more")
    stalls = eng.stalls()
    assert [s.cause for s in stalls] == ["msg_more", "msg_more"]
    assert all(d.code == Reason.MORE_HOLD.name for d in decisions if d.kind == "hold")


def test_every_probe_release_follows_its_arm_even_when_the_arm_was_not_traced():
    """The second MSG_MORE round's probe timer is armed with no timer_start record: the
    loss-probe timer of the previous message, left queued, had the same expiry, and
    __mod_timer returns before the tracepoint. Its send record's state has icsk_pending =
    PROBE0, so the arm is reported from it (with the delay tcp_probe0_base gives:
    max(RTO, TCP_RTO_MIN)) — one arm per hold, never two."""
    for name in ("cork", "more"):
        _eng, decisions = replay(name)
        timer = [d for d in decisions if d.kind in ("timer_armed", "timer_fired")
                 and d.timer == "probe0"]
        assert [d.kind for d in timer] == ["timer_armed", "timer_fired"] * 2, name
        for arm, fire in zip(timer[::2], timer[1::2], strict=True):
            assert arm.code == Reason.PROBE0_ARMED.name
            assert fire.code == Reason.PROBE0_RELEASE.name
            # fired a jiffy or two after the deadline it was armed for
            assert arm.deadline_us is not None
            assert -4_000 <= fire.t_us - arm.deadline_us <= 12_000, (name, arm, fire)
    _eng, decisions = replay("more")
    unseen = [d for d in decisions if d.code == Reason.PROBE0_ARMED.name
              and "seen pending in the send's state" in d.detail]
    assert len(unseen) == 1 and unseen[0].detail.startswith("51 jiffies (204 ms")


def test_each_message_corked_and_uncorked_arms_a_probe_timer_and_enters_ping_pong():
    """Lesson 12's client (tests/watch/programs/cork_each.py, 5 messages): every message's
    first corked write arms the probe timer — traced for the first, then seen only as
    icsk_pending = PROBE0 in the send's state (the loss-probe timer of the message
    before, still queued for the same expiry, makes mod_timer skip the tracepoint) —
    and the client enters ping-pong when the uncork inside setsockopt(TCP_CORK, 0) sends
    its data within ato of the last reply: PINGPONG_ENTER, not TCP_QUICKACK = 0."""
    eng, decisions = replay("cork_each")
    arms = [d for d in decisions if d.code == Reason.PROBE0_ARMED.name]
    assert len(arms) == 5 and all(d.side == "client" for d in arms)
    assert sum("seen pending in the send's state" in d.detail for d in arms) == 4
    holds = [d for d in decisions if d.kind == "hold"]
    assert len(holds) == 5 and {d.code for d in holds} == {Reason.CORK_HOLD.name}
    entered = [d for d in decisions if d.side == "client" and d.kind == "mode"
               and d.detail.startswith("ping-pong 0 → 1")]
    assert [d.code for d in entered] == [Reason.PINGPONG_ENTER.name]
    assert "data sent inside setsockopt(TCP_CORK)" in entered[0].detail
    assert Reason.QUICKACK_OFF.name not in {d.code for d in decisions}


def test_decisions_are_json_and_text():
    _eng, decisions = replay("wwr")
    for d in decisions:
        j = d.to_json()
        assert j["type"] == "decision" and j["side"] in ("client", "server", "")
        assert j["code"] == "" or j["code"] in Reason.__members__
        assert d.text()
    # a socket keeps its number while its addresses fill in (SYN_SENT has no local port)
    client = {d.sock for d in decisions if d.side == "client"}
    server = {d.sock for d in decisions if d.side == "server"}
    assert len(client) == len(server) == 1 and client != server
    names = {d.conn for d in decisions if d.sock in client}
    # unbound at setsockopt(TCP_NODELAY, 0), no local port at SYN_SENT, then whole
    assert len(names) == 3 and "0.0.0.0:0 → 0.0.0.0:0" in names
    assert any(n.startswith("127.0.0.1:0 → ") for n in names)


def test_a_fixture_that_is_not_one_is_one_line(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text("hello\n")
    with pytest.raises(raw.FixtureError, match=r"x.jsonl: line 1"):
        raw.read_fixture(bad)
    bad.write_text('{"format": "nagle-sim-watch-raw/1", "host": {}}\nzz\n')
    with pytest.raises(raw.FixtureError, match=r"line 2"):
        raw.read_fixture(bad)
    bad.write_text('{"format": "nagle-sim-watch-raw/1", "host": {}}\n00ff\n')
    with pytest.raises(raw.FixtureError, match=r"line 2: a record of 2 bytes"):
        raw.read_fixture(bad)


def test_hz_is_checked():
    with pytest.raises(ValueError):
        Engine(hz=0)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.binary(min_size=raw.RECORD_SIZE, max_size=raw.RECORD_SIZE),
                max_size=40),
       st.lists(st.integers(min_value=1, max_value=10), max_size=40))
def test_any_records_decode_without_error(blobs, types):
    """Records are the kernel's, but a fixture file is anyone's: nothing crashes."""
    eng = Engine(hz=250)
    for blob, t in zip(blobs, types + [1] * len(blobs), strict=False):
        e = raw.RawEvent.decode(blob)
        e.type = t
        e.sk = e.sk % 4           # a few sockets, so records meet each other
        for d in eng.feed(e):
            d.text()
            d.to_json()
    for s in eng.stalls():
        s.to_json()
    eng.notes()


def test_memory_stays_bounded_over_many_connections(monkeypatch):
    """A long watch of a busy server: closed sockets without stalls are forgotten."""
    from realnet.watch import decide
    monkeypatch.setattr(decide, "MAX_CONNS", 50)
    host, events = raw.read_fixture(FIXTURES / "nodelay.jsonl")
    eng = Engine(hz=host["hz"])
    for round_ in range(40):
        for e in events:
            e2 = raw.RawEvent.decode(e.encode())
            e2.sk = e.sk + round_ * 0x10000        # a new pair of sockets each time
            eng.feed(e2)
    assert len(eng.all_conns) <= 52
    assert len(eng.conns) <= 52


def test_the_peers_fin_entering_ping_pong_is_named_as_the_model_names_it():
    """tcp_fin puts a socket that gets the peer's FIN in ESTABLISHED into ping-pong
    (inet_csk_enter_pingpong_mode): the model's FIN_ACK, not the reply-within-ato rule."""
    _eng, decisions = replay("cork")
    fin = [d for d in decisions if d.kind == "mode" and d.code == Reason.FIN_ACK.name]
    assert [(d.side, d.detail) for d in fin] == [("client", "ping-pong 0 → 1")]
    assert not [d for d in decisions if d.code == Reason.PINGPONG_ENTER.name
                and d.t_us >= fin[0].t_us]
