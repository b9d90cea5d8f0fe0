"""Captures cut at the start (no handshake) or at the end (no FIN): the stalls that lie
wholly inside the cut keep the causes the whole capture gives them, the facts a handshake
would have given are inferred and reported with a confidence, and a stall cut short is
either not reported or reported as partial with a low confidence.

The captures are the capstone lesson's shipped `capture.pcap` (write-write-read over a
2 ms round trip, captured between the hosts) cut with dpkt.
"""

from __future__ import annotations

import re
from pathlib import Path

import dpkt
import pytest

from nagle_sim.explain import Explanation, explain_file, read_capture, split_connections
from nagle_sim.explain.causes import CAUSES, LOW, MEDIUM
from nagle_sim.explain.pcap import TH_ACK, TH_PUSH, Packet
from nagle_sim.model.events import Side
from nagle_sim.sim.driver import run_sim

ROOT = Path(__file__).resolve().parents[2]
LESSON_CAPTURE = next(ROOT.glob("lessons/*-diagnose-a-capture/capture.pcap"))


def _frames() -> tuple[int, list[tuple[float, bytes]]]:
    with LESSON_CAPTURE.open("rb") as f:
        reader = dpkt.pcap.Reader(f)
        return reader.datalink(), list(reader)


def cut(tmp_path: Path, first: int = 0, last: int | None = None) -> Path:
    """The lesson's capture from frame index ``first`` to ``last`` (exclusive)."""
    linktype, frames = _frames()
    path = tmp_path / f"cut-{first}-{last}.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=linktype)
        for ts, buf in frames[first:last]:
            writer.writepkt(buf, ts)
    return path


def by_epoch(ex: Explanation) -> dict[tuple[int, int], tuple[str, float, str]]:
    """Stalls keyed by their (start, end) capture times in µs since the epoch, so a cut's
    stalls line up with the whole capture's whatever each trace's origin."""
    t0 = ex.captured.trace.meta["start_epoch_us"]
    return {(s.start + t0, s.end + t0): (s.cause, s.confidence, s.text) for s in ex.stalls}


@pytest.fixture(scope="module")
def whole() -> dict[tuple[int, int], tuple[str, float, str]]:
    ex = explain_file(str(LESSON_CAPTURE))
    assert [s.cause for s in ex.stalls] == ["nagle+delayed_ack"] * 7
    return by_epoch(ex)


def _span(path: Path) -> tuple[int, int]:
    packets = read_capture(str(path)).packets
    return packets[0].t, packets[-1].t


def test_the_reviewers_cut_names_nagle_and_delayed_ack_not_app(tmp_path: Path) -> None:
    """The reviewer's case: the first 12 frames dropped. Before the fix every stall was
    `app`: the client's distance, bounded only by ACKs riding on its next request, came
    out 4 µs too long, so the held body seemed to leave before the ACK releasing it."""
    ex = explain_file(str(cut(tmp_path, 12)), runner=run_sim)
    assert not ex.captured.handshake
    assert [s.cause for s in ex.stalls] == ["nagle+delayed_ack"] * 6
    # the distances are the handshake's (0.5 ms each), found from the releases
    assert ex.captured.dist == {Side.CLIENT: 500, Side.SERVER: 500}
    assert ex.captured.captured_on == "between"
    # inferred, so no stall is as sure as in the whole capture
    assert all(s.confidence == MEDIUM for s in ex.stalls)
    assert ex.rebuilt is not None and all(s.reproduced for s in ex.stalls)


@pytest.mark.parametrize("first", range(1, 46))
def test_every_start_cut_names_the_stalls_inside_it_as_the_whole_capture(
        tmp_path: Path, whole: dict[tuple[int, int], tuple[str, float, str]],
        first: int) -> None:
    path = cut(tmp_path, first)
    lo, hi = _span(path)
    got = by_epoch(explain_file(str(path)))
    inside = {k: v for k, v in whole.items() if lo <= k[0] and k[1] <= hi}
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in inside.items()}


def test_a_cut_in_the_middle_of_a_stall_does_not_report_it(
        tmp_path: Path, whole: dict[tuple[int, int], tuple[str, float, str]]) -> None:
    """Frame 11 (index 10) is the server's delayed ACK that ends the first stall: a
    capture starting there began during that stall, which it cannot see."""
    path = cut(tmp_path, 10)
    lo, _hi = _span(path)
    ex = explain_file(str(path), runner=run_sim)
    first_stall = min(whole)
    assert first_stall[0] < lo <= first_stall[1]
    t0 = ex.captured.trace.meta["start_epoch_us"]
    assert all(s.start + t0 >= lo for s in ex.stalls)
    assert len(ex.stalls) == len(whole) - 1
    assert {s.cause for s in ex.stalls} == {"nagle+delayed_ack"}


@pytest.mark.parametrize("last", range(2, 47))
def test_every_end_cut_keeps_its_stalls_or_says_partial(
        tmp_path: Path, whole: dict[tuple[int, int], tuple[str, float, str]],
        last: int) -> None:
    """No FIN: nothing crashes, stalls whose release is in the cut keep their causes, and
    a stall whose delayed ACK is the last thing before the end is `delayed_ack`, partial,
    at low confidence — never `app` ("nothing was waiting"), which the cut cannot show."""
    path = cut(tmp_path, 0, last)
    got = by_epoch(explain_file(str(path)))
    for key, (cause, confidence, text) in got.items():
        if cause != whole[key][0]:
            assert cause == "delayed_ack" and confidence == LOW and "partial" in text
    assert "app" not in {v[0] for v in got.values()}


@pytest.mark.parametrize("last", [11, 16, 30])
def test_an_end_cut_explains_and_rebuilds(tmp_path: Path, last: int) -> None:
    ex = explain_file(str(cut(tmp_path, 0, last)), runner=run_sim)
    assert ex.rebuilt is not None and ex.rebuilt.model is not None
    assert all(set(s.causes) <= set(CAUSES) for s in ex.stalls)


def test_both_ends_cut(tmp_path: Path) -> None:
    ex = explain_file(str(cut(tmp_path, 12, 31)), runner=run_sim)
    causes = [s.cause for s in ex.stalls]
    assert causes[:-1] == ["nagle+delayed_ack"] * (len(causes) - 1)
    assert causes[-1] in ("nagle+delayed_ack", "delayed_ack")


def test_the_inferred_facts_are_reported_with_a_confidence(tmp_path: Path) -> None:
    ex = explain_file(str(cut(tmp_path, 12)))
    inferred = ex.captured.trace.meta["inferred"]
    assert set(inferred) >= {"client", "distances", "mss", "window_scale"}
    assert inferred["client"]["value"] == "10.0.0.1:40000"
    assert inferred["client"]["confidence"] == 0.9        # port 80 is well known
    assert inferred["distances"]["value"] == {"client": 0.5, "server": 0.5}
    assert inferred["mss"]["confidence"] == LOW           # no write was cut into segments
    note = next(n for n in ex.notes if n.startswith("inferred without the handshake"))
    assert "the client is 10.0.0.1:40000" in note and "round trip 2.0 ms" in note
    assert re.search(r"MSS \d+ B assumed", note)
    # the whole capture infers nothing
    full = explain_file(str(LESSON_CAPTURE))
    assert "inferred" not in full.captured.trace.meta
    assert max(s.confidence for s in full.stalls) > MEDIUM


def _pkt(t: int, client: bool, seq: int, ack: int, plen: int, flags: int = TH_ACK,
         ports: tuple[int, int] = (40000, 8080)) -> Packet:
    a, b = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"
    src, dst = (a, b) if client else (b, a)
    sport, dport = ports if client else ports[::-1]
    return Packet(t=t, src=src, dst=dst, sport=sport, dport=dport, seq=seq, ack=ack,
                  flags=flags, win=500, plen=plen, fp=t, frame=t)


@pytest.mark.parametrize(("ports", "client_port", "how"), [
    ((40000, 80), 40000, "well-known"),
    ((80, 40000), 40000, "well-known"),
    ((50000, 8080), 50000, "ephemeral"),
    ((8080, 50000), 50000, "ephemeral"),
])
def test_the_client_from_the_ports(ports: tuple[int, int], client_port: int,
                                   how: str) -> None:
    conn = split_connections([_pkt(0, True, 1, 1, 10, TH_ACK | TH_PUSH, ports)])[0]
    assert not conn.client_known and conn.client[1] == client_port and how in conn.client_how


def test_the_client_from_who_opens_the_exchanges() -> None:
    """Ports 5000 and 6000 say nothing: the side that speaks first after each quiet
    spell is the one asking."""
    packets = []
    for k in range(3):
        t = k * 50_000
        # 6000 asks (10 B), 5000 answers (100 B) 1 ms later
        packets.append(_pkt(t, False, 1 + 10 * k, 1 + 100 * k, 10, TH_ACK | TH_PUSH,
                            (5000, 6000)))
        packets.append(_pkt(t + 1_000, True, 1 + 100 * k, 11 + 10 * k, 100,
                            TH_ACK | TH_PUSH, (5000, 6000)))
    conn = split_connections(packets)[0]
    assert conn.client[1] == 6000 and "exchanges" in conn.client_how


def test_the_mss_from_the_full_segments_of_a_long_write(tmp_path: Path) -> None:
    from .captures import write_capture
    from .conftest import model
    trace = model("""[client]
script = "repeat 3 { write 5000; read 10 }"
[server]
script = "repeat 3 { read 5000; write 10 }"
""", "link.mss=1448", "link.gso=false")
    later = [s for s in trace.segments if "S" not in s.flags and s.t > 0][2:]
    path = write_capture(trace, tmp_path / "bulk.pcap", segments=later, at="client")
    ex = explain_file(str(path))
    assert not ex.captured.handshake
    assert ex.captured.mss == 1448
    assert ex.captured.trace.meta["inferred"]["mss"]["confidence"] == MEDIUM
    # the raw windows (scaled by 7 in the handshake) never pass for a small window
    assert "receiver" not in {c for s in ex.stalls for c in s.causes}


def test_the_docs_cause_table_is_the_vocabulary() -> None:
    """docs/explain.md's table lists exactly `CAUSES`, in order (each cause is produced
    by a test in test_causes.py)."""
    text = (ROOT / "docs" / "explain.md").read_text(encoding="utf-8")
    table = text.split("## Stalls and the cause vocabulary", 1)[1].split("\n\n", 3)[2]
    rows = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert rows == list(CAUSES)


def _seen_order(at: str, delay_ms: str = "20") -> list:
    from .captures import seen_time
    from .conftest import S1, model
    trace = model(S1, f"link.delay_ms={delay_ms}")
    segs = sorted(trace.segments, key=lambda s: seen_time(s, at))
    return [trace, segs]


def test_a_cut_too_short_to_measure_a_distance_is_low_confidence(tmp_path: Path) -> None:
    """The last two frames captured at the client (its FIN, the server's ACK 40 ms later)
    show no reaction of the server: its distance is unknown (taken as 0), so the one stall
    seen is named at confidence 0.3 at most."""
    from .captures import write_capture
    trace, segs = _seen_order("client")
    path = write_capture(trace, tmp_path / "tail.pcap", segments=segs[-2:], at="client")
    ex = explain_file(str(path))
    assert ex.captured.trace.meta["inferred"]["distances"]["confidence"] == LOW
    assert ex.stalls and all(s.confidence <= LOW for s in ex.stalls)


def test_an_end_cut_after_an_ack_that_crossed_the_link_says_partial(tmp_path: Path) -> None:
    """Captured at the client over a 20 ms link and cut right after the server's first ACK
    of the prefix: the 40 ms were the link, and whether that ACK released held data is
    beyond the cut — `link`, partial, low; the whole capture says `nagle+link`."""
    from .captures import write_capture
    trace, segs = _seen_order("client")
    whole_ex = explain_file(str(write_capture(trace, tmp_path / "all.pcap", at="client")))
    assert [s.cause for s in whole_ex.stalls[:2]] == ["link", "nagle+link"]
    end = next(i for i, s in enumerate(segs) if s.src is Side.SERVER and s.length == 0
               and "S" not in s.flags and s.ack > 1)
    path = write_capture(trace, tmp_path / "head.pcap", segments=segs[:end + 1], at="client")
    ex = explain_file(str(path), runner=run_sim)
    assert len(ex.stalls) == 2 and ex.stalls[0].cause == "link"     # the handshake
    st = ex.stalls[1]
    assert st.cause == "link" and st.confidence == LOW and "partial" in st.text
