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


def test_a_small_corked_write_is_named_cork_with_the_idle_app_as_the_alternative(
        capture_of: Cap) -> None:
    """Each 30 B write leaves as one segment when the probe timer fires (the model: 204-208
    ms after the write), with nothing in flight: inside the probe timer's window, so
    `cork` (TCP_CORK or MSG_MORE, both said) at 0.6, with an idle application that wrote
    after that much think time as the alternative at 0.3. The rebuild corks the client
    and the what-ifs uncork it."""
    ex = explain_file(str(capture_of(model(CORK_SMALL))), runner=run_sim)
    assert len(ex.stalls) == 4
    assert all(204_000 <= s.duration <= 208_500 for s in ex.stalls)
    for s in ex.stalls:
        assert s.causes == ["cork"] and s.confidence == 0.6
        assert "TCP_CORK or MSG_MORE" in s.text
        assert [(a.cause, a.confidence) for a in s.alternatives] == [("app", 0.3)]
        assert "window" in s.evidence[-1].note
    assert ex.rebuilt is not None and ex.rebuilt.scenario.client.options.cork
    assert all(s.reproduced for s in ex.stalls)
    names = {w.name: w.stalls for w in ex.rebuilt.whatifs}
    assert names["uncork after the last write (client)"] == 0
    assert names["no MSG_MORE on the last write (client)"] == 0


def test_the_probe_window_follows_the_kernel_rule_and_the_timer_wheel() -> None:
    """Measured on this kernel (docs/explain.md): loopback releases at 200.7-223.8 ms, a
    20 ms path 225.8-231.7 ms, a 100 ms path 311.7-319.8 ms (RTO 300 ms is 75 jiffies:
    timer-wheel level 1, rounded up to 8 jiffies). Each window holds what was measured
    and leaves out 150 ms and 400 ms."""
    from nagle_sim.explain.causes import probe_window, wheel_granularity
    for rtt, seen in ((100, (200_700, 223_800)), (20_144, (225_800, 231_700)),
                      (100_166, (311_700, 319_800))):
        lo, hi = probe_window(rtt)
        assert lo <= seen[0] and seen[1] <= hi, (rtt, lo, hi)
    lo, hi = probe_window(0)
    assert lo >= 199_000 and hi <= 224_000
    assert not lo <= 150_000 <= hi and not lo <= 400_000 <= hi
    assert [wheel_granularity(j) for j in (51, 62, 63, 75, 503, 504)] == [1, 1, 8, 8, 8, 64]
    assert probe_window(150_000)[1] >= 450_000 + 8 * 4_000  # RTO 3·RTT, on level 1


@pytest.mark.parametrize(("sleep_ms", "cork"), [(206, True), (212, True), (240, False),
                                                (150, False), (400, False)])
def test_think_time_in_the_probe_window_reads_as_cork_with_the_app_alternative(
        capture_of: Cap, sleep_ms: int, cork: bool) -> None:
    """Think time that lands in the probe timer's window looks like a corked write on the
    wire: named cork at 0.6 with the idle application at 0.3 beside it; outside it, an
    idle application at 0.9."""
    ex = explain_file(str(capture_of(model(THINK.replace("SLEEP", str(sleep_ms))))), runner=run_sim)
    later = ex.stalls[1:]
    assert later
    if cork:
        assert all(s.causes == ["cork"] and s.confidence == 0.6 and
                   s.alternatives[0].cause == "app" for s in later)
    else:
        assert all(s.causes == ["app"] and s.confidence >= 0.6 and not s.alternatives
                   for s in later)


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


class _Kernel:
    """A stand-in for watch's side of the seam: the kernel recorded a decision for the
    second stall only (it saw the think time: no cork was set)."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def verdict(self, stall, trace):  # type: ignore[no-untyped-def]
        from nagle_sim.explain.causes import KernelVerdict
        self.asked.append(stall.start)
        if len(self.asked) != 2:
            return None
        return KernelVerdict(causes=("app",), text="the kernel held nothing: the client "
                             "application wrote late", evidence=("no cork set",))


def test_the_kernels_word_decides_the_stalls_it_covers(capture_of: Cap) -> None:
    """With a watch trace's decisions (`causes.KernelWord`), a stall the kernel recorded
    takes its causes at confidence 1.0, decided_by "kernel", the wire's reading kept as
    the alternative; the others stay the wire's; a note counts them."""
    word = _Kernel()
    ex = explain_file(str(capture_of(model(CORK_SMALL))), kernel=word)
    assert len(word.asked) == len(ex.stalls) == 4
    decided = ex.stalls[1]
    assert decided.causes == ["app"] and decided.confidence == 1.0
    assert decided.decided_by == "kernel"
    assert [a.cause for a in decided.alternatives] == ["cork"]
    assert "the wire's reading" in decided.alternatives[0].text
    assert any(e.note == "no cork set" for e in decided.evidence)
    assert all(s.decided_by == "wire" and s.causes == ["cork"]
               for i, s in enumerate(ex.stalls) if i != 1)
    assert any("decided 1 of the 4 stall(s)" in n for n in ex.notes)
