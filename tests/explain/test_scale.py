"""Captures of many connections, streamed: the triage, the store, the summary table.

explain reads a file once (`explain.scanner`), counting and triaging every connection as
its packets go by and packing them into a per-connection store that spills to a
temporary file; only suspect connections are analysed in full. These tests check that
the streamed path gives what the in-memory one gives, that the store's bound holds, and
what the summary table and --json say. The 1,000,000-packet goal is in
benchmarks/bench_explain.py.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.explain import explain_file, read_capture, split_connections
from nagle_sim.model.events import Side
from nagle_sim.trace import Trace

from .captures import frames, write_frames
from .conftest import S1, model

scanner = importlib.import_module("nagle_sim.explain.scanner")
explain_pkg = importlib.import_module("nagle_sim.explain")

THINK = """[client]
nodelay = true
script = "repeat 4 { write 20; read 100; sleep 120ms }"
[server]
nodelay = true
script = "repeat 4 { read 20; write 100 }"
"""


def busy(tmp_path: Path, wwr: int = 3, think: int = 3, name: str = "busy.pcap") -> Path:
    """Connections of two kinds interleaved in one file: ``wwr`` write-write-read
    clients (Nagle + delayed ACK) and ``think`` NODELAY clients idle 120 ms per round."""
    rows = []
    kinds = [model(S1)] * wwr + [model(THINK)] * think
    for i, trace in enumerate(kinds):
        rows += frames(trace, at="server", ports={Side.CLIENT: 40000 + i, Side.SERVER: 80},
                       t0=i * 3_000)
    return write_frames(rows, tmp_path / name)


def test_the_stream_counts_what_the_packets_say(tmp_path: Path) -> None:
    """Every number of the listing (packets, bytes, the longest gap, the client) is the
    same from the streamed scan as from the packets held in memory."""
    path = busy(tmp_path)
    held = split_connections(read_capture(path).packets)
    scanned = scanner.scan(str(path))
    try:
        assert len(held) == len(scanned.connections) == 6
        for a, b in zip(held, scanned.connections, strict=True):
            assert (a.client, a.server, a.count, a.bytes_sent(), a.longest_gap()) == (
                b.client, b.server, b.count, b.bytes_sent(), b.longest_gap())
            # what the store gives back is what was read
            assert [(p.t, p.seq, p.ack, p.flags, p.plen, p.frame, p.src) for p in a.packets] \
                == [(p.t, p.seq, p.ack, p.flags, p.plen, p.frame, p.src) for p in b.loaded()]
    finally:
        scanned.store.close()


def test_the_store_spills_past_its_memory_and_reads_back_the_same(tmp_path: Path) -> None:
    path = busy(tmp_path)
    small = scanner.scan(str(path), memory=2_000)
    big = scanner.scan(str(path))
    try:
        assert small.store.spilled > 0 and big.store.spilled == 0
        assert small.store.spill_file is not None
        for a, b in zip(small.connections, big.connections, strict=True):
            assert a.loaded() == b.loaded()
    finally:
        small.store.close()
        big.store.close()
    assert small.store.spill_file is None


def test_the_triage_suspects_nagle_and_clears_think_time(tmp_path: Path) -> None:
    """A gap ended by a delayed ACK that released held data is suspect; new data after
    120 ms of think time with nothing unACKed is an idle application's."""
    scanned = scanner.scan(str(busy(tmp_path)))
    scanned.store.close()
    suspect = [c.suspect[0] > 0 for c in scanned.connections]
    assert suspect == [True] * 3 + [False] * 3
    assert all(c.gap[0] >= 100_000 for c in scanned.connections[3:])


def test_only_suspect_connections_are_analysed_past_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the capture is larger than the analysis budget, connections whose every gap
    an idle application explains keep the triage's numbers (``longest_stall`` None)."""
    path = busy(tmp_path)
    counts = [c.count for c in split_connections(read_capture(path).packets)]
    # room for the three suspect ones, not for the whole capture
    monkeypatch.setattr(explain_pkg, "RANK_BUDGET", sum(counts[:3]))
    ex = explain_file(str(path), top=1)
    analysed = [c.stalls is not None for c in ex.connections]
    assert analysed[:3] == [True] * 3 and analysed[3:] == [False] * 3
    assert ex.chosen.number in (1, 2, 3)
    assert ex.chosen.longest_stall is not None and ex.chosen.longest_stall[2] == \
        "nagle+delayed_ack"
    # a small capture is analysed whole, as before
    ex = explain_file(str(path))
    assert all(c.stalls is not None for c in ex.connections)
    assert [c.longest_stall[2] if c.longest_stall else None for c in ex.connections] == \
        ["nagle+delayed_ack"] * 3 + [""] * 3


def test_top_lists_n_and_json_has_every_connection(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    path = busy(tmp_path)
    assert main(["explain", str(path), "--top", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "4 more not listed" in out
    assert "6 of 6 connection(s) have a quiet gap" in out
    assert main(["explain", str(path), "--top", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["connections"]) == 6
    row = doc["connections"][0]
    assert row["analysed"] and row["stalls"] == 5 and row["suspect_gaps"] >= 1
    with pytest.raises(SystemExit) as stop:
        main(["explain", str(path), "--top", "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--top" in err


def test_progress_is_reported_by_stage(tmp_path: Path) -> None:
    seen: list[str] = []
    explain_file(str(busy(tmp_path)), progress=lambda stage, done, of: seen.append(stage))
    assert seen[0] == "reading" and "analysing" in seen and seen[-1] == "explaining"


def test_a_connection_longer_than_the_bound_is_explained_from_its_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s1_trace: Trace) -> None:
    monkeypatch.setattr(scanner, "MAX_CONNECTION_PACKETS", 20)
    path = write_frames(frames(s1_trace), tmp_path / "long.pcap")
    ex = explain_file(str(path))
    assert len(ex.chosen.packets) == 20 and ex.chosen.count > 20
    assert ex.notes[0].startswith(f"connection 1 has {ex.chosen.count:,} packets: "
                                  "explained from its first 20")


def test_a_bad_conn_is_refused_before_any_analysis(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = busy(tmp_path)
    calls = []
    monkeypatch.setattr(explain_pkg, "analyse", lambda c, p: calls.append(c))
    with pytest.raises(explain_pkg.ExplainError, match="no connection 9"):
        explain_file(str(path), conn=9)
    assert calls == []
