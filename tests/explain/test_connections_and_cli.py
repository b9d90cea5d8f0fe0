"""Several connections, captures that start mid-connection or see frames twice, and the
`nagle-sim explain` command: listing, --conn/--port, --json schema, --markdown, pictures,
--scenario, and one-line errors with exit 2."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.explain import explain_file
from nagle_sim.model.events import Side
from nagle_sim.scenario import load
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

from .captures import frames, write_capture, write_frames
from .conftest import S1, model

QUIET = """[client]
nodelay = true
script = "repeat 4 { write 10; read 10 }"
[server]
nodelay = true
script = "repeat 4 { read 10; write 10 }"
"""


@pytest.fixture
def two_connections(tmp_path: Path, s1_trace: Trace) -> Path:
    quiet = model(QUIET)
    rows = frames(quiet, ports={Side.CLIENT: 50001, Side.SERVER: 9000})
    rows += frames(s1_trace, ports={Side.CLIENT: 50002, Side.SERVER: 8080}, t0=3_000)
    return write_frames(rows, tmp_path / "two.pcap")


def test_the_default_is_the_connection_with_the_longest_stall(two_connections: Path) -> None:
    ex = explain_file(str(two_connections), runner=run_sim)
    assert len(ex.connections) == 2
    assert ex.chosen.number == 2 and ex.chosen.server[1] == 8080
    assert ex.stalls and ex.stalls[0].cause == "nagle+delayed_ack"


CONTROL = """[client]
nodelay = true
script = "write 10; read 10; sleep 300ms; write 10; read 10"
[server]
nodelay = true
script = "repeat 2 { read 10; write 10 }"
"""


def test_the_default_ranks_by_stall_not_by_idle_gap(tmp_path: Path, s1_trace: Trace,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """A control connection idle 300 ms beside a data connection with 40 ms Nagle stalls:
    the data connection is the question (an idle application rarely is)."""
    rows = frames(model(CONTROL), ports={Side.CLIENT: 50001, Side.SERVER: 21})
    rows += frames(s1_trace, ports={Side.CLIENT: 50002, Side.SERVER: 8080}, t0=3_000)
    path = write_frames(rows, tmp_path / "ctl.pcap")
    ex = explain_file(str(path), runner=run_sim)
    assert ex.chosen.server[1] == 8080
    control = next(c for c in ex.connections if c.server[1] == 21)
    assert control.longest_gap()[0] > 250_000 and control.longest_stall == (0, 0, "")
    assert ex.chosen.longest_stall is not None
    assert ex.chosen.longest_stall[2] == "nagle+delayed_ack"
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    listing = out.split("Connection 2:")[0]
    assert "nagle+delayed_ack" in listing


def test_the_listing_fits_80_columns_without_cutting_ports(
        two_connections: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["explain", str(two_connections)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    listing = out.split("Connection 2:")[0]
    for endpoint in ("10.1.0.1:50001", "10.1.0.2:9000", "10.1.0.1:50002", "10.1.0.2:8080"):
        assert endpoint in listing
    assert "…" not in listing


def test_conn_and_port_choose(two_connections: Path) -> None:
    assert explain_file(str(two_connections), conn=1, runner=run_sim).chosen.server[1] == 9000
    assert explain_file(str(two_connections), port=9000, runner=run_sim).stalls == []
    assert explain_file(str(two_connections), port=50002, runner=run_sim).chosen.number == 2


def test_a_capture_starting_mid_connection(s1_trace: Trace, tmp_path: Path) -> None:
    """No handshake: sequence numbers from the first byte seen, the capture point from
    the quickest ACKs, and the stalls still named."""
    later = [s for s in s1_trace.segments if s.t > 30_000]
    path = write_capture(s1_trace, tmp_path / "mid.pcap", segments=later, at="client")
    ex = explain_file(str(path), runner=run_sim)
    assert not ex.captured.handshake
    assert any("mid-connection" in n for n in ex.notes)
    assert ex.stalls and {s.cause for s in ex.stalls} == {"nagle+delayed_ack"}
    assert ex.chosen.client[1] > ex.chosen.server[1]


def test_a_frame_seen_twice_is_counted_once(s1_trace: Trace, tmp_path: Path) -> None:
    path = write_capture(s1_trace, tmp_path / "any.pcap", linktype="sll2", twice=True)
    ex = explain_file(str(path), runner=run_sim)
    assert len(ex.captured.trace.segments) == len(s1_trace.segments)
    assert any("duplicate" in n for n in ex.notes)
    assert [s.cause for s in ex.stalls] == ["nagle+delayed_ack"] * 5


def test_a_forwarded_frame_seen_in_and_out_is_counted_once(s1_trace: Trace,
                                                           tmp_path: Path) -> None:
    """``-i any`` on a host that forwards (a router, a mid-path box) records each packet
    arriving and leaving, the second copy one TTL lower (so another IP checksum): still
    one packet. The fingerprint is the TCP header, IP id and TCP checksum, not every byte."""
    rows = frames(s1_trace, at="client", linktype="sll2", twice=True)
    hop = 20                                   # the SLL2 header before the IP header
    out = []
    for i, (t, frame) in enumerate(rows):
        if i % 2:                              # the copy leaving: TTL - 1, checksum again
            ip = bytearray(frame[hop:hop + 20])
            ip[8] -= 1
            ip[10:12] = b"\0\0"
            total = sum(struct.unpack("!10H", bytes(ip)))
            total = (total & 0xFFFF) + (total >> 16)
            ip[10:12] = struct.pack("!H", ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF)
            frame = frame[:hop] + bytes(ip) + frame[hop + 20:]
        out.append((t, frame))
    path = write_frames(out, tmp_path / "router.pcap", linktype="sll2")
    ex = explain_file(str(path))
    assert len(ex.captured.trace.segments) == len(s1_trace.segments)
    # the in-memory reader (the app's) fingerprints the two copies alike too
    from nagle_sim.explain import read_capture
    assert len({p.fp for p in read_capture(path).packets}) == len(s1_trace.segments)
    assert any("duplicate" in n for n in ex.notes)
    assert [s.cause for s in ex.stalls] == ["nagle+delayed_ack"] * 5


@pytest.mark.parametrize("linktype", ["ethernet", "sll2"])
def test_real_ipv6_duplicate_acks_are_kept(tmp_path: Path, linktype: str) -> None:
    """Four identical duplicate ACKs 50 µs apart (IPv6: no IP id) are four packets, on
    Ethernet and on a cooked capture alike (all four incoming)."""
    from .captures import hand_trace, handshake, seg
    segs = handshake() + [seg("client", 1, "PA", 1, 100, 1),
                          seg("server", 1.1, "A", 1, 0, 101)]
    segs += [seg("server", 1.2 + 0.05 * k, "A", 1, 0, 101) for k in range(4)]
    path = write_capture(hand_trace(segs), tmp_path / "dup6.pcap", v6=True,
                         linktype=linktype, at="both")
    ex = explain_file(str(path), runner=run_sim)
    acks = [s for s in ex.captured.trace.segments if s.src is Side.SERVER and s.ack == 101]
    assert len(acks) == 5
    assert not any("duplicate frame" in n for n in ex.notes)


def test_super_segments_on_loopback_are_noted(tmp_path: Path) -> None:
    text = """[client]
nodelay = true
script = "write 100000; read 10"
[server]
script = "read 100000; write 10"
"""
    trace = model(text, "link.mss=1448")
    big = [s for s in trace.segments if s.length > 1448]
    assert big                       # the model's GSO writes super-segments
    ex = explain_file(str(write_capture(trace, tmp_path / "tso.pcap", at="both")), runner=run_sim)
    # explained as the wire segments they were: none longer than the MSS, every byte
    # there, PSH only where the super-segment had it
    segs = ex.captured.trace.segments
    assert all(s.length <= ex.captured.mss for s in segs)
    assert ex.captured.trace.meta["super_segments"] == len(big)
    sent = sorted((s.seq, s.length) for s in segs if s.src.value == "client" and s.length)
    assert sum(n for _, n in sent) == 100_000
    assert all(a + n == b for (a, n), (b, _) in zip(sent, sent[1:], strict=False))
    assert sum("P" in s.flags for s in segs if s.src.value == "client" and s.length) == \
        sum("P" in s.flags for s in trace.segments if s.src.value == "client" and s.length)
    assert any("super-segments" in n for n in ex.notes)
    assert "gso = true" in (ex.rebuilt.toml if ex.rebuilt else "")


# ---------------------------------------------------------------- the command
def test_json_follows_the_documented_schema(s1_trace: Trace, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"connection", "captured_at", "stalls", "whatifs"} <= set(doc)
    assert doc["captured_at"] != "both"         # two addresses: two hosts
    assert doc["connection"]["number"] == 1
    stall = doc["stalls"][0]
    assert {"start_ms", "duration_ms", "causes", "evidence", "confidence", "reproduced",
            "model_ms"} <= set(stall)
    assert stall["causes"] == ["nagle", "delayed_ack"] and stall["reproduced"] is True
    assert stall["evidence"][0]["frame"] >= 1
    assert {w["name"] for w in doc["whatifs"]} >= {"NODELAY on the client",
                                                   "one write per request"}


def test_markdown_pictures_and_scenario(s1_trace: Trace, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    out = tmp_path / "rebuilt.toml"
    svg, png = tmp_path / "ladder.svg", tmp_path / "ladder.png"
    assert main(["explain", str(path), "--markdown", "--svg", str(svg), "--png", str(png),
                 "--scenario", str(out)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "## Stalls" in text and "nagle+delayed_ack" in text
    assert svg.read_text().startswith("<svg") or "<svg" in svg.read_text()[:400]
    scenario = load(out)
    assert scenario.client.options.nodelay is False
    assert "write 6; write 7; read 13" in out.read_text()


def test_terminal_output_never_interprets_markup(s1_trace: Trace, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = write_capture(s1_trace, tmp_path / "[bold]x[-].pcap")
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[bold]x[-].pcap" in out
    assert "nagle+delayed_ack" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--conn", "7"], "no connection 7 (the capture has only connection 1)"),
    (["--port", "4444"], "no connection uses port 4444"),
    (["--os", "client=plan9"], "unknown profile 'plan9'"),
    (["--os", "nonsense"], "use client=PROFILE"),
    (["--svg", "out.txt"], "expected a file name ending in .svg"),
    (["--os", "client=linux,client=windows"], "client is given twice"),
    (["--scenario", "/etc/passwd/x.toml"], "/etc/passwd is not a directory"),
])
def test_bad_options_are_one_line_and_exit_2(s1_trace: Trace, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             args: list[str], message: str) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_not_a_capture_exits_2_naming_the_file(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err.replace("\n", "") and "Traceback" not in err


def test_os_option_sets_the_profiles(s1_trace: Trace, tmp_path: Path) -> None:
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    ex = explain_file(str(path), os_text="client=linux,server=windows", runner=run_sim)
    assert ex.rebuilt is not None
    assert ex.rebuilt.scenario.server.profile.name == "windows"
    assert ex.rebuilt.profiles[Side.SERVER][1] == "given with --os"
    # a Windows server delays its ACK 200 ms: the model no longer matches the capture
    assert not all(s.reproduced for s in ex.stalls)


def test_delayed_ack_timing_picks_the_profile(tmp_path: Path) -> None:
    trace = model(S1, 'server.profile="windows"')
    ex = explain_file(str(write_capture(trace, tmp_path / "win.pcap")), runner=run_sim)
    assert ex.stalls and all(s.cause == "nagle+delayed_ack" for s in ex.stalls)
    assert ex.rebuilt is not None and ex.rebuilt.scenario.server.profile.name == "windows"
    assert all(s.reproduced for s in ex.stalls)


# ---------------------------------------------------------------- where it was captured
LAN = """[link]
delay_ms = 0.3
[client]
script = "repeat 4 { write 6; write 7; read 13 }"
[server]
script = "repeat 4 { read 13; write 13 }"
"""


def test_two_hosts_on_a_lan_keep_their_distance(tmp_path: Path) -> None:
    """0.3 ms one way between two addresses is a LAN, not loopback: the rebuilt link keeps
    the measured delay."""
    trace = model(LAN)
    ex = explain_file(str(write_capture(trace, tmp_path / "lan.pcap", at="client")), runner=run_sim)
    assert ex.captured.captured_on == "client"
    assert ex.captured.trace.meta["server_distance_ms"] == pytest.approx(0.3, abs=0.01)
    assert ex.rebuilt is not None and "delay_ms = 0.301" in ex.rebuilt.toml


@pytest.mark.parametrize("addrs", [{Side.CLIENT: "127.0.0.1", Side.SERVER: "127.0.0.1"},
                                   {Side.CLIENT: "127.0.0.5", Side.SERVER: "127.0.0.1"}])
def test_loopback_addresses_mean_one_host(tmp_path: Path, addrs: dict[Side, str]) -> None:
    trace = model(LAN)
    ex = explain_file(str(write_capture(trace, tmp_path / "lo.pcap", at="client",
                                        addrs=addrs)), runner=run_sim)
    assert ex.captured.captured_on == "both"
    assert ex.rebuilt is not None and "delay_ms = 0.000" in ex.rebuilt.toml


HEADINGS = ("Connection ", "Fix — ", "Evidence for ", "What if", "note: ")


@pytest.mark.parametrize("extra", [[], ["--all"], ["--runtime", "java"]])
def test_the_report_reads_as_blocks_at_80_columns(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> None:
    """At 80 columns every line fits and a wrapped item's continuation is indented under
    it: only the headings start at the margin (a line folded back to column 0 made the
    stall groups and the fix steps hard to tell apart). The fix names the writer and its
    steps in order, each with its reason."""
    monkeypatch.setenv("COLUMNS", "80")
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), *extra]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    margin = [line for line in lines[1:] if line and not line.startswith(" ")]
    assert all(line.startswith(HEADINGS) or line[0].isdigit() for line in margin), margin
    fix = lines.index(next(line for line in lines if line.startswith("Fix — ")))
    assert "nagle+delayed_ack: change the client" in " ".join(lines[fix + 1:fix + 3])
    steps = [line.split(".")[0].strip() for line in lines[fix:]
             if line.startswith("    ") and line.strip()[:2] in ("1.", "2.", "3.", "4.")]
    assert steps[:2] == ["1", "2"]
    assert sum(line.strip().startswith("why: ") for line in lines[fix:]) >= 2


def test_identical_stalls_are_grouped_and_all_lists_each(
        s1_trace: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())       # as read, line breaks aside
    assert "5 × " in out and "nagle+delayed_ack" in out and "5/5 reproduced" in out
    assert out.count("Nagle: 6 B sent earlier") == 1
    assert main(["explain", str(path), "--all"]) == 0
    every = capsys.readouterr().out
    assert every.count("nagle+delayed_ack") >= 5


def test_pictures_of_a_long_capture_are_a_bounded_window(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """500 rounds of write-write-read (1,500+ segments): the picture shows the first stall
    that is not the link's, and says so, in bounded size (was 1303 × 44,662 px)."""
    from PIL import Image
    trace = model(S1.replace("repeat 6", "repeat 500"))
    path = write_capture(trace, tmp_path / "long.pcap")
    png, svg = tmp_path / "long.png", tmp_path / "long.svg"
    assert main(["explain", str(path), "--json", "--png", str(png), "--svg", str(svg)]) == 0
    err = capsys.readouterr().err
    assert "the pictures show" in err and "around the stall" in err
    assert "nagle+delayed_ack" in err
    with Image.open(png) as im:
        assert im.height <= 8_000 and im.width * im.height <= 20_000_000
    assert svg.stat().st_size < 1_000_000
    text = svg.read_text()
    assert "dashed: model (overlay)" in text and "(kernel)" in text and "simulated" not in text
    assert "dashed grey: model" in text    # orange is the kernel's colour (issue 31.7)


def test_a_picture_beyond_the_export_bounds_is_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import nagle_sim.export.ladder as ladder
    monkeypatch.setattr(ladder, "MAX_ROWS", 10)
    trace = model(S1)
    path = write_capture(trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), "--png", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "rows" in err


def test_a_closed_pipe_ends_quietly_with_exit_0(tmp_path: Path) -> None:
    """`nagle-sim explain X | head -1`, as the other commands behave."""
    import subprocess
    import sys
    path = write_capture(model(S1.replace("repeat 6", "repeat 200")), tmp_path / "l.pcap")
    for extra in ([], ["--all"], ["--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", "explain", str(path),
                                 *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, (extra, err)
        assert err == ""


def test_pictures_without_a_stall_show_the_first_segments_and_until_ms_chooses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = model(S1.replace("repeat 6", "repeat 300"), "client.nodelay=true")
    path = write_capture(trace, tmp_path / "nd.pcap")
    png = tmp_path / "nd.png"
    assert main(["explain", str(path), "--json", "--png", str(png)]) == 0
    assert "60 of" in capsys.readouterr().err and png.exists()
    # the whole run is beyond the PNG bound: refused in one line, exit 2
    assert main(["explain", str(path), "--json", "--png", str(png), "--until-ms",
                 "1000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PNG would be" in err


def test_super_segments_without_the_handshake_still_give_the_wire_mss(tmp_path: Path) -> None:
    """A capture cut after the handshake, of a sender with TSO/GSO (its super-segments
    are whole multiples of the MSS): the MSS is inferred as 1448 B, not as the largest
    super-segment, and the super-segments are split into the wire's segments."""
    text = """[client]
nodelay = true
script = "repeat 3 { write 20000; read 10 }"
[server]
script = "repeat 3 { read 20000; write 10 }"
"""
    trace = model(text, "link.mss=1448")
    assert any(s.length > 1448 and s.length % 1448 == 0 for s in trace.segments)
    later = [s for s in trace.segments if "S" not in s.flags and s.t > 0][1:]
    ex = explain_file(str(write_capture(trace, tmp_path / "cut.pcap", segments=later,
                                        at="both")))
    assert not ex.captured.handshake
    assert ex.captured.mss == 1448, ex.captured.trace.meta["inferred"]["mss"]
    assert all(s.length <= 1448 for s in ex.captured.trace.segments)
