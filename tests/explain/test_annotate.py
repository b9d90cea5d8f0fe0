"""`explain --annotate OUT.pcapng` and the Lua post-dissector, read back by the real tshark.

The comments go on each stall's first frame and on the frame that released it; the
post-dissector (package data, `nagle-sim wireshark`) turns them into nagle_sim.* fields
with expert info. tshark is the judge here (CI installs it; without it these tests skip
and the copy is checked by reading it back ourselves). The original file never changes.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.explain import explain_file, read_capture
from nagle_sim.explain.annotate import LUA_SCRIPT
from nagle_sim.trace import Trace

from .captures import write_capture
from .conftest import S1, model
from .test_scale import busy

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed "
                                  "(.ci/run installs it): the annotated file is read back "
                                  "by our own reader only")


def tshark(path: Path, display_filter: str, *fields: str, occurrence: str = "f"
           ) -> list[list[str]]:
    """Rows of ``fields`` for the frames ``display_filter`` keeps, with the plugin."""
    assert TSHARK is not None
    argv = [TSHARK, "-n", "-r", str(path), "-X", f"lua_script:{LUA_SCRIPT}", "-Y",
            display_filter, "-T", "fields", "-E", f"occurrence={occurrence}",
            "-E", "aggregator=|"]
    for f in fields or ("frame.number",):
        argv += ["-e", f]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Lua" not in done.stderr or "error" not in done.stderr.lower(), done.stderr
    return [line.split("\t") for line in done.stdout.splitlines() if line]


def comments_of(path: Path) -> dict[int, list[str]]:
    """frame → opt_comment texts of a little-endian pcapng (our own reader)."""
    data = path.read_bytes()
    out: dict[int, list[str]] = {}
    at, frame = 0, 0
    while at < len(data):
        btype, size = struct.unpack_from("<II", data, at)
        if btype == 6:
            frame += 1
            caplen = struct.unpack_from("<I", data, at + 20)[0]
            opt = at + 28 + caplen + (-caplen % 4)
            while opt < at + size - 4:
                code, n = struct.unpack_from("<HH", data, opt)
                if code == 0:
                    break
                if code == 1:
                    out.setdefault(frame, []).append(data[opt + 4:opt + 4 + n].decode())
                opt += 4 + n + (-n % 4)
        at += size
    return out


@pytest.fixture
def s1_capture(tmp_path: Path, s1_trace: Trace) -> Path:
    return write_capture(s1_trace, tmp_path / "s1.pcap", at="client")


def test_annotating_never_touches_the_capture_and_keeps_every_frame(
        s1_capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = hashlib.sha256(s1_capture.read_bytes()).hexdigest()
    out = tmp_path / "s1.pcapng"
    assert main(["explain", str(s1_capture), "--annotate", str(out)]) == 0
    assert "comment(s)" in capsys.readouterr().err
    assert hashlib.sha256(s1_capture.read_bytes()).hexdigest() == before
    a, b = read_capture(s1_capture), read_capture(out)
    assert b.fmt == "pcapng" and a.fmt == "pcap"
    assert [(p.t, p.seq, p.ack, p.flags, p.plen, p.frame) for p in a.packets] == \
        [(p.t, p.seq, p.ack, p.flags, p.plen, p.frame) for p in b.packets]
    ex = explain_file(str(s1_capture))
    notes = comments_of(out)
    for i, st in enumerate(ex.stalls, 1):
        release = [c for c in notes[st.end_frame] if f"stall {i} of" in c and "ends here" in c]
        start = [c for c in notes[st.first_frame] if f"stall {i} of" in c and "follows" in c]
        assert len(release) == 1 and len(start) == 1
        assert f"cause={st.cause}" in release[0] and "role=release" in release[0]
    # the annotated file explains the same
    again = explain_file(str(out))
    assert [s.cause for s in again.stalls] == [s.cause for s in ex.stalls]


def test_the_capture_itself_or_a_wrong_name_is_refused(s1_capture: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    twin = tmp_path / "twin.pcapng"
    twin.write_bytes(s1_capture.read_bytes())
    before = twin.read_bytes()
    assert main(["explain", str(twin), "--annotate", str(twin)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the capture itself" in err
    assert twin.read_bytes() == before
    assert main(["explain", str(s1_capture), "--annotate", str(tmp_path / "x.pcap")]) == 2
    assert ".pcapng" in capsys.readouterr().err
    assert main(["explain", str(s1_capture), "--annotate",
                 str(tmp_path / "no" / "dir" / "x.pcapng")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not list(tmp_path.glob("*.part"))


def test_a_pcapng_keeps_its_blocks_and_its_own_comments(tmp_path: Path) -> None:
    """A pcapng from Wireshark (two sections, a comment of its own on a frame explain
    also annotates): every block is kept, the frame carries both comments."""
    ng = write_capture(model(S1), tmp_path / "in.pcapng", fmt="pcapng", at="client")
    data = bytearray(ng.read_bytes())
    # give the first packet block an opt_comment of its own
    at = 0
    while struct.unpack_from("<I", data, at)[0] != 6:
        at += struct.unpack_from("<I", data, at + 4)[0]
    size = struct.unpack_from("<I", data, at + 4)[0]
    caplen = struct.unpack_from("<I", data, at + 20)[0]
    body_end = at + 28 + caplen + (-caplen % 4)
    own = b"from the operator"
    opts = struct.pack("<HH", 1, len(own)) + own + b"\0" * (-len(own) % 4) + b"\0" * 4
    block = bytes(data[at:body_end]) + opts
    block = block[:4] + struct.pack("<I", len(block) + 4) + block[8:] + struct.pack(
        "<I", len(block) + 4)
    data[at:at + size] = block
    ng.write_bytes(bytes(data))
    ex = explain_file(str(ng))
    first = ex.stalls[0].first_frame
    from nagle_sim.explain.annotate import annotate, comments_for
    ex.stalls[0].first_frame = 1            # make frame 1 carry a stall comment too
    out = tmp_path / "out.pcapng"
    annotate(ex, str(out))
    notes = comments_of(out)
    assert notes[1][0] == "from the operator" and "nagle-sim" in notes[1][1]
    ex.stalls[0].first_frame = first
    assert sum(len(v) for v in comments_for(ex).values()) == 2 * len(ex.stalls)


@needs_tshark
def test_tshark_filters_on_nagle_sim_cause_one_hit_per_stall(s1_capture: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "s1.pcapng"
    assert main(["explain", str(s1_capture), "--annotate", str(out), "--runtime",
                 "java"]) == 0
    ex = explain_file(str(s1_capture))
    nagle = [s for s in ex.stalls if "nagle" in s.causes]
    assert len(nagle) == 5
    rows = tshark(out, 'nagle_sim.cause == "nagle"', "frame.number", "nagle_sim.stall_ms",
                  "nagle_sim.side", "nagle_sim.fix", "nagle_sim.start_frame")
    assert [int(r[0]) for r in rows] == [s.end_frame for s in nagle]
    assert [float(r[1]) for r in rows] == [round(s.duration / 1000, 3) for s in nagle]
    assert all(r[2] == "client" and "BufferedOutputStream" in r[3] for r in rows)
    assert [int(r[4]) for r in rows] == [s.first_frame for s in nagle]
    # the whole cause matches too, and every stall has exactly one frame with a cause
    assert len(tshark(out, 'nagle_sim.cause == "nagle+delayed_ack"')) == 5
    assert len(tshark(out, "nagle_sim.cause")) == len(ex.stalls)
    assert len(tshark(out, 'nagle_sim.role == "start"')) == len(ex.stalls)
    # expert info: a warning on each release
    experts = tshark(out, "nagle_sim.cause", "_ws.expert.message", occurrence="a")
    assert len(experts) == len(ex.stalls)
    assert all(any(m.startswith("nagle-sim: ") for m in r[0].split("|")) for r in experts)
    # without the plugin the field does not exist: tshark refuses the filter
    plain = subprocess.run([TSHARK, "-r", str(out), "-Y", "nagle_sim.cause"],  # type: ignore[list-item]
                           capture_output=True, text=True, timeout=60, check=False)
    assert plain.returncode != 0


@needs_tshark
def test_every_connection_analysed_is_annotated(tmp_path: Path) -> None:
    out = tmp_path / "busy.pcapng"
    path = busy(tmp_path)
    assert main(["explain", str(path), "--annotate", str(out)]) == 0
    ex = explain_file(str(path))
    rows = tshark(out, 'nagle_sim.cause == "nagle"', "nagle_sim.conn")
    per = {}
    for (conn,) in rows:
        per[int(conn)] = per.get(int(conn), 0) + 1
    expected = {c.number: sum("nagle" in s.causes for s in (
        ex.stalls if c is ex.chosen else c.found or [])) for c in ex.connections}
    assert per == {k: v for k, v in expected.items() if v}


def test_nagle_sim_wireshark_installs_and_locates_the_plugin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["wireshark", "--path"]) == 0
    assert Path(capsys.readouterr().out.strip()) == LUA_SCRIPT
    folder = tmp_path / "plugins"
    assert main(["wireshark", "--install", "--dir", str(folder)]) == 0
    assert (folder / "nagle_sim.lua").read_bytes() == LUA_SCRIPT.read_bytes()
    assert "installed" in capsys.readouterr().out
    assert main(["wireshark", "--uninstall", "--dir", str(folder)]) == 0
    assert not (folder / "nagle_sim.lua").exists()
    (tmp_path / "file").write_text("x")
    assert main(["wireshark", "--install", "--dir", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
