"""Cause rules that a review found wrong on real captures: a FIN that Nagle lets through,
the probe timer's real window (cork), a sender limited by the receiver's window, and the
order of the evidence rows. Each capture is a model run written out as a pcap."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nagle_sim.explain import explain_file
from nagle_sim.model.events import Side

from .conftest import model

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
    ex = explain_file(str(capture_of(trace)))
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
    ex = explain_file(str(capture_of(trace, at="client")))
    multi = [s for s in ex.stalls if len(s.evidence) > 2]
    assert multi
    for s in ex.stalls:
        frames = [e.frame for e in s.evidence]
        assert all(frames) and frames == sorted(frames), (s.cause, frames)
