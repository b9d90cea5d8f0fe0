"""Cause rules that a review found wrong on real captures: a FIN that Nagle lets through,
the probe timer's real window (cork), a sender limited by the receiver's window, and the
order of the evidence rows. Each capture is a model run written out as a pcap."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nagle_sim.explain import explain_file
from nagle_sim.model.events import Side
from nagle_sim.sim.driver import run_sim

from .conftest import model
from .test_causes import THINK  # a client that thinks SLEEP ms before each request

Cap = Callable[..., Path]

HTTP_CLOSE = """title = "header, body, close"
[client]
script = "repeat 5 { write 50; read 600 }"
[server]
script = "repeat 5 { read 50; write 100; write 500 }"
"""


def test_a_server_closing_after_its_last_write_is_not_rebuilt_with_nodelay(
        capture_of: Cap) -> None:
    """close() pushes the Nagle-held body out with the FIN (tcp_nagle_test lets a FIN
    through): that last small segment is not a sign of TCP_NODELAY."""
    trace = model(HTTP_CLOSE, "link.delay_ms=1")
    fin_data = [s for s in trace.segments if "F" in s.flags and s.length]
    assert fin_data and fin_data[0].src is Side.SERVER     # the body rides on the FIN
    ex = explain_file(str(capture_of(trace)), runner=run_sim)
    assert ex.rebuilt is not None
    assert not ex.rebuilt.scenario.side(Side.SERVER).options.nodelay
    assert ex.stalls and all(s.cause == "nagle+delayed_ack" for s in ex.stalls)
    assert all(s.reproduced for s in ex.stalls)
    names = [w.name for w in ex.rebuilt.whatifs]
    assert "NODELAY on the server" in names


def test_evidence_rows_are_in_frame_order(capture_of: Cap) -> None:
    """On a long link the rules cite the released segment before the ACK that released
    it; the report lists them as the capture has them."""
    from .conftest import S1
    trace = model(S1, "link.delay_ms=250")
    ex = explain_file(str(capture_of(trace, at="client")), runner=run_sim)
    multi = [s for s in ex.stalls if len(s.evidence) > 2]
    assert multi
    for s in ex.stalls:
        frames = [e.frame for e in s.evidence]
        assert all(frames) and frames == sorted(frames), (s.cause, frames)


CORK_SMALL = """title = "cork never released, small writes"
[client]
script = "set cork on; repeat 4 { write 30; read 20 }"
[server]
script = "repeat 4 { read 30; write 20 }"
"""


def test_a_small_corked_write_is_said_to_be_cork_or_an_idle_app(capture_of: Cap) -> None:
    """Each 30 B write leaves as one segment when the probe timer fires (the model: 204-208
    ms after the write): nothing on the wire shows bytes held, so it is `app` at 0.3,
    "cork or an idle app" — never a confident idle app."""
    ex = explain_file(str(capture_of(model(CORK_SMALL))), runner=run_sim)
    assert len(ex.stalls) == 4
    assert all(204_000 <= s.duration <= 208_500 for s in ex.stalls)
    assert all(s.causes == ["app"] and s.confidence <= 0.3 and "cork or an idle app" in s.text
               for s in ex.stalls)




def test_the_probe_window_allows_a_kernel_timer_a_jiffy_or_two_late() -> None:
    from nagle_sim.explain.causes import probe_window
    lo, hi = probe_window(0)
    assert lo <= 200_000 and 212_000 <= hi <= 224_000   # a busy kernel fired at 212 ms
    assert probe_window(150_000)[1] >= 450_000 + 4_000  # RTO = 3 RTT after one sample


@pytest.mark.parametrize(("sleep_ms", "ambiguous"), [(209, True), (212, True), (240, False),
                                                     (150, False)])
def test_think_time_where_the_kernel_fires_the_probe_timer_is_ambiguous(
        capture_of: Cap, sleep_ms: int, ambiguous: bool) -> None:
    """A kernel's probe timer was captured 208-212 ms after a corked write: an idle app
    sleeping that long looks the same, so it says both at 0.3; well outside, it is app."""
    ex = explain_file(str(capture_of(model(THINK.replace("SLEEP", str(sleep_ms))))), runner=run_sim)
    later = ex.stalls[1:]
    assert later and all(s.causes == ["app"] for s in later)
    if ambiguous:
        assert all(s.confidence <= 0.3 and "cork or an idle app" in s.text for s in later)
    else:
        assert all(s.confidence >= 0.6 and "cork" not in s.text for s in later)


SLOW_READER = """title = "a slow reader: a small receive window, read every 50 ms"
[client]
script = "write 30000; read 2"
[server]
tune = { rcv_buf = 8192, rcv_wnd = 4096 }
script = "repeat 8 { sleep 50ms; read 4000 }; write 2"
"""


def test_a_slow_reader_is_the_receiver_not_nagle(capture_of: Cap) -> None:
    """The client's data waits for the server's window (full, or too small for a
    segment): `receiver` / `zero_window`, whatever the ACK timing looks like — and
    NODELAY, which opens no window, is not offered."""
    from nagle_sim.explain.causes import WINDOW_CAUSES
    ex = explain_file(str(capture_of(model(SLOW_READER))), runner=run_sim)
    waited = [s for s in ex.stalls if s.waiting is Side.CLIENT
              and s.causes[0] not in ("rto", "tlp")]
    assert len(waited) >= 5
    assert all(s.causes[0] in WINDOW_CAUSES for s in waited), [s.cause for s in waited]
    assert not any("nagle" in s.causes for s in ex.stalls)
    assert any("window" in e.note for s in waited for e in s.evidence)
    assert ex.rebuilt is not None
    assert not any("NODELAY" in w.name for w in ex.rebuilt.whatifs)
    assert any("receiver's buffer" in n for n in ex.notes)


def test_windows_are_scaled_by_the_handshake_option(capture_of: Cap) -> None:
    """Raw windows of 512 (64 KB at scale 7) are smaller than the 2000 B of a
    write-write-read round: read unscaled they would look full. Scaled, it is Nagle."""
    text = """[client]
script = "repeat 4 { write 1000; write 1000; read 10 }"
[server]
script = "repeat 4 { read 2000; write 10 }"
"""
    ex = explain_file(str(capture_of(model(text))), runner=run_sim)
    assert ex.captured.trace.meta["window_scale"] == {"client": 7, "server": 7}
    assert ex.stalls and all(s.cause == "nagle+delayed_ack" for s in ex.stalls)


def test_a_zero_window_and_its_update_are_named_zero_window(capture_of: Cap) -> None:
    """Hand-made: the client fills the server's 4096 B window; the server ACKs it 40 ms
    later with a zero window, and opens it 60 ms after that; the client sends at once."""
    from .captures import hand_trace, handshake, seg
    segs = handshake() + [
        seg("client", 1, "A", 1, 2048, ack=1),
        seg("client", 1.01, "PA", 2049, 2048, ack=1),
        seg("server", 41, "A", 1, ack=4097, win=0),
        seg("server", 101, "A", 1, ack=4097, win=4096),
        seg("client", 101.02, "A", 4097, 2048, ack=1),
        seg("client", 101.03, "PA", 6145, 2048, ack=1),
        seg("server", 101.05, "A", 1, ack=8193, win=65536),
    ]
    segs[1].window = 4096          # the SYN-ACK offers 4096 B
    ex = explain_file(str(capture_of(hand_trace(segs), at="client")), runner=run_sim)
    assert [s.cause for s in ex.stalls] == ["zero_window", "zero_window"]
    assert all(s.waiting is Side.CLIENT for s in ex.stalls)
    assert ex.rebuilt is not None
    assert not any("NODELAY" in w.name for w in ex.rebuilt.whatifs)
