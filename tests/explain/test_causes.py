"""Naming stalls: every cause of the vocabulary from a capture that shows it, the model
re-run reproducing it, and the what-ifs answering it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nagle_sim.explain import explain_file
from nagle_sim.explain.causes import CAUSES
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

from .captures import hand_trace, handshake, seg
from .conftest import S1, model

Cap = Callable[..., Path]

PING_PONG = """[client]
nodelay = true
script = "repeat 3 { write 10; read 10 }"
[server]
nodelay = true
script = "repeat 3 { read 10; write 10 }"
"""


@pytest.mark.parametrize("at", ["client", "server", "both"])
def test_write_write_read_is_nagle_plus_delayed_ack_and_the_model_agrees(
        s1_trace: Trace, capture_of: Cap, at: str) -> None:
    """Lesson 01: the second small write waits for the peer's delayed ACK."""
    ex = explain_file(str(capture_of(s1_trace, at=at)), runner=run_sim)
    assert [s.cause for s in ex.stalls] == ["nagle+delayed_ack"] * 5
    assert all(s.reproduced for s in ex.stalls)
    assert all(40 <= (s.model_ms or 0) <= 48 for s in ex.stalls)
    ev = ex.stalls[0].evidence
    assert any("delayed ACK" in e.note for e in ev) and any("held" in e.note for e in ev)
    whatifs = {w.name: w for w in ex.rebuilt.whatifs} if ex.rebuilt else {}
    assert whatifs["NODELAY on the client"].stalls == 0
    assert whatifs["one write per request"].stalls == 0
    assert ex.rebuilt is not None and ex.rebuilt.baseline is not None
    assert ex.rebuilt.baseline.per_request_ms is not None
    assert ex.rebuilt.baseline.per_request_ms > 40
    assert whatifs["NODELAY on the client"].per_request_ms < 5


def test_on_a_delayed_link_the_capture_point_is_found_and_the_link_is_named(
        capture_of: Cap) -> None:
    trace = model(S1, "link.delay_ms=20")
    for at in ("client", "server"):
        ex = explain_file(str(capture_of(trace, name=f"{at}.pcap", at=at)), runner=run_sim)
        assert ex.captured.captured_on == at
        assert ex.captured.trace.meta["rtt_ms"] == pytest.approx(40, abs=0.5)
        causes = {s.cause for s in ex.stalls}
        assert "link" in causes
        assert any("nagle" in c and "delayed_ack" in c for c in causes)
        assert all(s.reproduced for s in ex.stalls)


def test_nodelay_has_no_stall(capture_of: Cap) -> None:
    ex = explain_file(str(capture_of(model(S1, "client.nodelay=true"))), runner=run_sim)
    assert ex.stalls == []
    assert ex.rebuilt is not None and ex.rebuilt.scenario.client.options.nodelay


CORKED = """[client]
cork = true
script = "repeat 3 { write 2000; read 10 }"
[server]
nodelay = true
script = "repeat 3 { read 2000; write 10 }"
"""


def test_cork_never_released_is_cork_near_200_ms(capture_of: Cap) -> None:
    """A corked write longer than the MSS: its first segment leaves without PSH, the rest
    waits for the 200 ms ceiling — bytes visibly held, so the wire shows TCP_CORK."""
    ex = explain_file(str(capture_of(model(CORKED))), runner=run_sim)
    corks = [s for s in ex.stalls if s.cause == "cork"]
    assert len(corks) == 3
    # the probe timer is max(RTO, 200 ms); the RTO grows with the 40 ms delayed ACKs
    assert all(200 <= s.duration / 1000 <= 260 for s in corks)
    assert ex.rebuilt is not None and ex.rebuilt.scenario.client.options.cork
    assert all(s.reproduced for s in ex.stalls)
    nocork = [w for w in ex.rebuilt.whatifs if w.name == "no TCP_CORK on the client"]
    assert nocork and nocork[0].stalls == 0


THINK = """[client]
nodelay = true
script = "repeat 4 { sleep SLEEPms; write 10; read 10 }"
[server]
nodelay = true
script = "repeat 4 { read 10; write 10 }"
"""


@pytest.mark.parametrize("sleep_ms", [200, 205])
def test_think_time_near_200_ms_is_not_cork(capture_of: Cap, sleep_ms: int) -> None:
    """A NODELAY client sleeping before each write: nothing shows bytes held, so the stalls
    are the application's, and the rebuild never sets cork."""
    ex = explain_file(str(capture_of(model(THINK.replace("SLEEP", str(sleep_ms))))), runner=run_sim)
    assert ex.stalls and all(s.causes == ["app"] for s in ex.stalls)
    if sleep_ms == 200:     # exactly the ceiling: said so, with low confidence
        assert all(s.confidence <= 0.3 and "cork or an idle app" in s.text
                   for s in ex.stalls[1:])
    assert ex.rebuilt is not None and not ex.rebuilt.scenario.client.options.cork
    assert "cork = true" not in ex.rebuilt.toml
    assert not any("CORK" in w.name for w in ex.rebuilt.whatifs)


def test_an_idle_client_is_app_and_the_rebuild_sleeps(capture_of: Cap) -> None:
    text = PING_PONG.replace('script = "repeat 3 { write 10; read 10 }"',
                             'script = "write 10; read 10; sleep 100ms; write 10; read 10; '
                             'write 10; read 10"')
    ex = explain_file(str(capture_of(model(text))), runner=run_sim)
    assert [s.cause for s in ex.stalls] == ["app"]
    assert ex.stalls[0].duration == pytest.approx(100_000, abs=1_000)
    assert ex.rebuilt is not None and "sleep 100ms" in ex.rebuilt.toml
    assert ex.stalls[0].reproduced


def test_a_long_link_is_link(capture_of: Cap) -> None:
    ex = explain_file(str(capture_of(model(PING_PONG, "link.delay_ms=250"))), runner=run_sim)
    assert ex.stalls and {s.cause for s in ex.stalls} == {"link"}
    assert all(s.duration == pytest.approx(500_000, abs=2_000) for s in ex.stalls)


def test_bulk_over_a_link_waits_for_the_congestion_window(capture_of: Cap) -> None:
    text = """[link]
delay_ms = 20
[client]
nodelay = true
script = "write 200000; read 10"
[server]
script = "read 200000; write 10"
"""
    ex = explain_file(str(capture_of(model(text))), runner=run_sim)
    assert any(s.cause == "cwnd+link" for s in ex.stalls)


def _explain_hand(capture_of: Cap, segments: list, **kw: object):
    return explain_file(str(capture_of(hand_trace(segments), **kw)))


def test_retransmission_of_the_tail_is_a_tail_loss_probe(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "PA", 1, 100, 1),
        # lost; 2·SRTT + 200 ms later the probe re-sends the last segment
        seg("client", 215, "PA", 1, 100, 1),
        seg("server", 215.1, "A", 1, 0, 101),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["tlp"]
    assert ex.captured.trace.meta["retransmitted_segments"] == 1
    # the bytes in words, not a ladder label with its flags ("re-sent P. 1:101(100)")
    assert "re-sent bytes 1:101 (100 B) after" in ex.stalls[0].text


def test_a_re_sent_tail_whose_ack_was_lost_after_the_capture_point(capture_of: Cap) -> None:
    """Captured on the client's side of the wire: the server's ACK passed the capture point
    but never reached the client, which re-sent its request as a loss probe."""
    segs = handshake() + [
        seg("client", 1, "PA", 1, 10, 1),
        seg("server", 1.1, "PA", 1, 10, 11),      # lost after the capture point
        seg("client", 210, "PA", 1, 10, 1),
        seg("server", 210.1, "A", 11, 0, 11),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["tlp"]
    assert "lost after the capture point" in ex.stalls[0].evidence[-1].note


def test_a_second_retransmission_is_the_rto(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "PA", 1, 100, 1),
        seg("client", 215, "PA", 1, 100, 1),
        seg("client", 630, "PA", 1, 100, 1),
        seg("server", 630.1, "A", 1, 0, 101),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["tlp", "rto"]


def test_a_lost_syn_is_rto(capture_of: Cap) -> None:
    segs = [seg("client", 0, "S", 0), seg("client", 1000, "S", 0),
            seg("server", 1000.1, "SA", 0, ack=1), seg("client", 1000.2, "A", 1, ack=1)]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["rto"]


def test_a_zero_window_and_its_update(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "PA", 1, 1000, 1),
        seg("server", 1.1, "A", 1, 0, 1001, win=0),
        seg("server", 80, "A", 1, 0, 1001, win=65535),
        seg("client", 80.1, "PA", 1001, 1000, 1),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["zero_window"]
    assert ex.stalls[0].waiting is not None and ex.stalls[0].waiting.value == "client"


def test_a_window_probe_into_a_zero_window(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "PA", 1, 1000, 1),
        seg("server", 1.1, "A", 1, 0, 1001, win=0),
        seg("client", 300, "A", 1001, 1, 1),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["zero_window"]


def test_a_linux_zero_window_probe_is_zero_window(capture_of: Cap) -> None:
    """Linux probes with a bare ACK whose seq is one below snd_una, not with a data byte."""
    segs = handshake() + [
        seg("client", 1, "PA", 1, 1000, 1),
        seg("server", 1.1, "A", 1, 0, 1001, win=0),
        seg("client", 201, "A", 1000, 0, 1),
        seg("server", 201.1, "A", 1, 0, 1001, win=0),
        seg("client", 601, "A", 1000, 0, 1),
        seg("server", 601.1, "A", 1, 0, 1001, win=0),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["zero_window", "zero_window"]
    assert all(s.confidence >= 0.9 for s in ex.stalls)
    assert ex.stalls[0].waiting is not None and ex.stalls[0].waiting.value == "client"


def test_a_small_window_is_receiver(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "A", 1, 1000, 1),
        seg("server", 1.1, "A", 1, 0, 1, win=1024),
        seg("client", 60, "PA", 1001, 500, 1),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["receiver"]


def test_a_psh_less_release_on_an_ack_is_msg_more(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "A", 1, 1448, 1),
        seg("server", 41, "A", 1, 0, 1449),
        seg("client", 41.05, "A", 1449, 150, 1),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["msg_more+delayed_ack"]


def test_paced_full_segments(capture_of: Cap) -> None:
    segs = handshake() + [
        seg("client", 1, "A", 1, 1448, 1),
        seg("client", 13, "A", 1449, 1448, 1),
        seg("client", 25, "A", 2897, 1448, 1),
        seg("server", 25.1, "A", 1, 0, 4345),
    ]
    ex = _explain_hand(capture_of, segs, at="both")
    assert [s.cause for s in ex.stalls] == ["pacing", "pacing"]


def test_every_named_cause_is_in_the_vocabulary(s1_trace: Trace, capture_of: Cap) -> None:
    assert list(CAUSES) == ["nagle", "delayed_ack", "cork", "msg_more", "tlp", "rto",
                            "zero_window", "receiver", "cwnd", "pacing", "link", "app"]
    ex = explain_file(str(capture_of(s1_trace)), runner=run_sim)
    for s in ex.stalls:
        assert set(s.causes) <= set(CAUSES)
        assert 0 < s.confidence <= 1


@pytest.mark.parametrize("lost", ["middle", "last"])
def test_packets_missing_from_the_capture_are_noticed_and_filled_in(
        s1_trace: Trace, capture_of: Cap, lost: str) -> None:
    """tcpdump dropped a client data segment: the ACKs cover bytes never seen. Noted, the
    stalls next to it are uncertain, and the rebuild still writes every byte."""
    data = [i for i, s in enumerate(s1_trace.segments) if s.length and s.src.value == "client"]
    gone = data[len(data) // 2] if lost == "middle" else data[-1]
    kept = [s for i, s in enumerate(s1_trace.segments) if i != gone]
    ex = explain_file(str(capture_of(s1_trace, segments=kept)), runner=run_sim)
    size = s1_trace.segments[gone].length
    assert any(f"{size} B of the client's data never appear" in n for n in ex.notes)
    assert ex.captured.holes and ex.captured.holes[0].end - ex.captured.holes[0].start == size
    doubtful = [s for s in ex.stalls if "missing from the capture" in s.text]
    assert doubtful and all(s.confidence <= 0.3 for s in doubtful)
    assert ex.rebuilt is not None and ex.rebuilt.model is not None
    sent = sum(s.length for s in ex.rebuilt.model.segments
               if s.src.value == "client" and "captured" not in s.why)
    assert sent >= 78
    from nagle_sim.explain.report import to_json
    assert to_json(ex)["missing"][0]["bytes"] == size


def test_an_msg_more_program_gets_a_no_msg_more_what_if(capture_of: Cap) -> None:
    text = """[client]
script = "repeat 3 { write 2000 more; read 10 }"
[server]
nodelay = true
script = "repeat 3 { read 2000; write 10 }"
"""
    ex = explain_file(str(capture_of(model(text))), runner=run_sim)
    assert ex.stalls and all("msg_more" in s.causes for s in ex.stalls)
    assert ex.rebuilt is not None
    names = [w.name for w in ex.rebuilt.whatifs]
    assert "no MSG_MORE" in names and not any("CORK" in n for n in names)
    assert "cork = true" not in ex.rebuilt.toml and " more" in ex.rebuilt.toml


def test_frames_that_are_not_tcp_are_counted_and_shown(s1_trace: Trace, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    from nagle_sim.__main__ import main

    from .captures import frames, write_frames
    rows = frames(s1_trace)
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 28
    rows += [(rows[0][0] + 1, arp), (rows[0][0] + 2, arp)]
    path = write_frames(rows, tmp_path / "arp.pcap")
    assert main(["explain", str(path)]) == 0
    assert "(2 not TCP)" in capsys.readouterr().out
    assert main(["explain", str(path), "--json"]) == 0
    assert '"frames_not_tcp": 2' in capsys.readouterr().out
