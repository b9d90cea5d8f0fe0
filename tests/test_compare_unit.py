"""Pure tests of nagle_sim.compare: hand-made traces, no sockets, no root.

Protects the validation rules every lesson relies on: segments match by bytes, mismatches
are explained, and timing uses packetdrill's tolerance on intervals (never accumulated).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nagle_sim.compare import compare, measured_jiffy_phase, tolerance
from nagle_sim.model.events import Micros, Side
from nagle_sim.trace import OpRecord, Outcome, SegmentRecord, Source, Trace

C, S = Side.CLIENT, Side.SERVER


def seg(t_ms: float, src: Side, seq: int, length: int = 0, flags: str = "A",
        ack: int = 1) -> SegmentRecord:
    return SegmentRecord(t=Micros(round(t_ms * 1000)), src=src, seq=seq, ack=ack,
                         length=length, flags=flags)


def handshake() -> list[SegmentRecord]:
    return [seg(0, C, 0, flags="S", ack=0), seg(0.01, S, 0, flags="SA"), seg(0.02, C, 1)]


def trace(source: str, segments: list[SegmentRecord], **meta: object) -> Trace:
    return Trace(source=Source(source), title="t", segments=handshake() + segments,
                 meta={"mss": 1448, **meta})


def test_identical_traces_agree() -> None:
    """Every lesson: a kernel that does what the model does is judged to agree."""
    body = [seg(1, C, 1, 6, "PA"), seg(1.01, S, 1, ack=7)]
    result = compare(trace("sim", body), trace("realnet", list(body), link="loopback"))
    assert result.agree, result.problems
    assert all(m.kind == "match" for m in result.matches)


def test_split_is_explained_in_bytes() -> None:
    """Lesson 05: '2 B + 28 B where the model sent 30 B' must be said, not hidden."""
    sim = trace("sim", [seg(1, C, 1, 30, "PA")])
    real = trace("realnet", [seg(1, C, 1, 2, "PA"), seg(1.01, C, 3, 28, "PA")],
                 link="loopback")
    result = compare(sim, real)
    assert not result.agree
    assert any("real sent 2 B + 28 B where the model sent 30 B" in p for p in result.problems)


def test_merge_of_small_segments_is_a_difference() -> None:
    sim = trace("sim", [seg(1, C, 1, 2, "PA"), seg(45, C, 3, 28, "PA")])
    real = trace("realnet", [seg(1, C, 1, 30, "PA")], link="loopback")
    result = compare(sim, real)
    assert any("real sent 30 B where the model sent 2 B + 28 B" in p for p in result.problems)


def test_gso_super_segment_on_loopback_is_a_note_not_a_difference() -> None:
    """Loopback passes GSO skbs unsplit: compare bytes, not packet counts."""
    sim = trace("sim", [seg(1, C, 1, 1448, "A"), seg(1, C, 1449, 1448, "A"),
                        seg(1, C, 2897, 1448, "PA")])
    real = trace("realnet", [seg(1.05, C, 1, 4344, "PA")], link="loopback")
    result = compare(sim, real)
    assert result.agree, result.problems
    assert any("GSO super-segment covers 3 model segments" in n for n in result.notes)


def test_tolerance_is_packetdrills() -> None:
    assert tolerance(0) == 4000
    assert tolerance(10_000) == 4000
    assert tolerance(100_000) == 12_500


def test_timing_error_is_per_interval_and_does_not_accumulate() -> None:
    """Twelve 44 ms stalls each 3 ms longer: 36 ms late in total, but every interval is
    within tolerance (packetdrill judges each event against the previous one)."""
    sim_body, real_body = [], []
    for i in range(12):
        sim_body.append(seg(1 + 44 * i, S, 1, ack=7 + i))
        real_body.append(seg(1 + 47 * i, S, 1, ack=7 + i))
    result = compare(trace("sim", sim_body), trace("realnet", real_body, link="loopback"))
    assert result.agree, result.problems


def test_late_ack_beyond_tolerance_is_reported_with_numbers() -> None:
    sim = trace("sim", [seg(1, C, 1, 6, "PA"), seg(1.01, S, 1, ack=7)])
    real = trace("realnet", [seg(1, C, 1, 6, "PA"), seg(6.01, S, 1, ack=7)], link="loopback")
    result = compare(sim, real)
    assert not result.agree
    assert any("5.000 ms later than the model" in p for p in result.problems)


def test_unmatched_pure_ack_and_retransmitted_fin_are_explained() -> None:
    sim = trace("sim", [seg(5, S, 1, flags="FA"), seg(45, C, 1, ack=2)])
    real = trace("realnet", [seg(5, S, 1, flags="FA"), seg(40, S, 1, flags="FA"),
                             seg(40.01, C, 1, ack=2), seg(40.02, C, 1, ack=2)],
                 link="loopback")
    result = compare(sim, real)
    text = " ".join(result.problems)
    assert "sent its FIN again" in text
    assert "pure ACK of 2 the model did not" in text


def test_missing_bytes_and_outcome_difference() -> None:
    sim = trace("sim", [seg(1, C, 1, 6, "PA")])
    real = trace("realnet", [], link="loopback")
    real.outcome, real.message = Outcome.DEADLOCK, "x: deadlock: client waits for 6 more"
    result = compare(sim, real)
    text = " ".join(result.problems)
    assert "the kernel never sent these bytes" in text
    assert "outcome: model ok" in text


def test_stalls_pair_through_the_segment_that_ends_them() -> None:
    sim = trace("sim", [seg(1, C, 1, 6, "PA"), seg(45, S, 1, ack=7), seg(45.01, C, 7, 7, "PA")])
    real = trace("realnet", [seg(1, C, 1, 6, "PA"), seg(49, S, 1, ack=7),
                             seg(49.01, C, 7, 7, "PA")], link="loopback")
    result = compare(sim, real)
    assert len(result.stalls) == 1 and result.stalls[0].ok
    assert result.stalls[0].sim is not None and result.stalls[0].real is not None


def test_iterations_side_by_side() -> None:
    sim = trace("sim", [seg(1, C, 1, 6, "PA")])
    real = trace("realnet", [seg(1, C, 1, 6, "PA")], link="loopback")
    for t, lat in ((sim, 44_000), (real, 60_000)):
        t.ops = [OpRecord(side=C, op="write", arg="6", start=Micros(1000),
                          end=Micros(1000 + lat), iteration=(0,))]
    result = compare(sim, real)
    assert result.iterations[0].diff == 16_000 and not result.iterations[0].ok
    # With a capture the segment rule judges; the iteration is reported as a note.
    assert any("iteration 0" in n for n in result.notes)
    real.segments = []
    assert any("iteration 0" in p for p in compare(sim, real).problems)


def test_json_is_serialisable() -> None:
    import json

    sim = trace("sim", [seg(1, C, 1, 30, "PA")])
    real = trace("realnet", [seg(1, C, 1, 2, "PA"), seg(1.01, C, 3, 28, "PA")],
                 link="loopback")
    doc = json.loads(json.dumps(compare(sim, real).to_json()))
    assert doc["agree"] is False and doc["matches"]


def test_a_stall_just_under_the_threshold_still_pairs() -> None:
    """Lesson 09: the model's 10.001 ms quiet gap and the kernel's 9.93 ms are one stall."""
    sim = trace("sim", [seg(1, C, 1, 100, "PA"), seg(11.001, S, 1, ack=101)])
    real = trace("realnet", [seg(1, C, 1, 100, "PA"), seg(10.93, S, 1, ack=101)],
                 link="loopback")
    result = compare(sim, real)
    assert result.agree, result.problems
    assert len(result.stalls) == 1 and result.stalls[0].real is not None


def test_a_stall_far_under_the_threshold_is_a_difference() -> None:
    sim = trace("sim", [seg(1, C, 1, 100, "PA"), seg(31, S, 1, ack=101)])
    real = trace("realnet", [seg(1, C, 1, 100, "PA"), seg(2, S, 1, ack=101)], link="loopback")
    result = compare(sim, real)
    assert not result.agree
    assert any("the kernel does not" in p for p in result.problems)


def test_one_late_event_is_reported_once() -> None:
    """A late delayed ACK must not also make the next, correctly spaced data late."""
    sim = trace("sim", [seg(1, C, 1, 6, "PA"), seg(2, S, 1, ack=7), seg(101, C, 7, 6, "PA")])
    real = trace("realnet", [seg(1, C, 1, 6, "PA"), seg(44, S, 1, ack=7),
                             seg(101, C, 7, 6, "PA")], link="loopback")
    result = compare(sim, real)
    late = [m for m in result.matches if not m.ok]
    assert [m.klass for m in late] == ["ACK"], [m.note for m in late]


def test_burst_acks_segments_apart_are_not_paired() -> None:
    """Lesson 09: a model ACK of segment 1 and a kernel ACK of segment 10 are two different
    ACKs (burst ACK thinning), not one ACK that came 24 ms late."""
    data = [seg(20, C, 1 + 1448 * i, 1448) for i in range(12)]
    sim = trace("sim", data + [seg(20.5, S, 1, ack=1449), seg(20.5, S, 1, ack=1 + 12 * 1448)])
    real = trace("realnet", data + [seg(20.5, S, 1, ack=1 + 12 * 1448),
                                    seg(44.5, S, 1, ack=1 + 10 * 1448)], link="loopback")
    result = compare(sim, real)
    assert not any(m.kind == "ack-number" for m in result.matches)
    assert not any("later than the model" in p for p in result.problems), result.problems


def test_an_ack_one_segment_off_is_the_same_ack() -> None:
    """S3: the kernel ACKed 9 where the model ACKed 7 (which 2-byte segment the ACK covers
    is a µs race): paired and explained, not two differences."""
    data = [seg(1, C, 1 + 2 * i, 2, "PA") for i in range(5)]
    sim = trace("sim", data + [seg(1.1, S, 1, ack=7)])
    real = trace("realnet", data + [seg(1.1, S, 1, ack=9)], link="loopback")
    result = compare(sim, real)
    kinds = [m.kind for m in result.matches if m.klass == "ACK" and m.side is S]
    assert kinds == ["ack-number"] and result.agree, result.problems


def test_loopback_bursts_of_other_sizes_are_a_note_off_grid_splits_are_not() -> None:
    """Same bytes in TSO bursts of other sizes (all boundaries on the MSS grid) is timing;
    a boundary off the grid (e.g. a Nagle-held tail) is a real difference."""
    sim = trace("sim", [seg(1, C, 1, 4344), seg(1, C, 4345, 2896)])
    real = trace("realnet", [seg(1, C, 1, 2896), seg(1.1, C, 2897, 4344)], link="loopback")
    assert compare(sim, real).agree
    sim = trace("sim", [seg(1, C, 1, 4344), seg(1, C, 4345, 100)])
    real = trace("realnet", [seg(1, C, 1, 4000), seg(1.1, C, 4001, 444)], link="loopback")
    assert not compare(sim, real).agree


def test_the_jiffy_phase_is_measured_from_timer_driven_acks() -> None:
    """A pure ACK ending a quiet gap left on a tick: at 42.5 ms, ticks of 4 ms (HZ=250)
    fall 1.5 ms into a tick at t=0; data segments and short gaps say nothing."""
    real = trace("realnet", [seg(0.5, C, 1, 6, "PA"), seg(42.5, S, 1, ack=7),
                             seg(42.6, C, 7, 7, "PA"), seg(86.5, S, 1, ack=14)])
    assert measured_jiffy_phase(real, 250) == 1500
    assert measured_jiffy_phase(trace("realnet", [seg(0.5, C, 1, 6, "PA")]), 250) is None


# ---------------------------------------------------------------- issue 18: host facts
FACTS = {"kernel": "6.18.0", "hz": 250, "tcp_pingpong_thresh": 1, "tcp_autocorking": 1,
         "tcp_rmem": [4096, 131072, 6291456], "tcp_wmem": [4096, 16384, 4194304]}


def _remote_real(server: dict[str, object], client: dict[str, object] | None = None,
                 **meta: object) -> Trace:
    return trace("realnet", [], link="remote",
                 host_facts={"client": client or {**FACTS, "congestion": {"client": "cubic"}},
                             "server": server}, **meta)


def test_every_host_fact_that_differs_from_the_profile_is_one_line() -> None:
    from nagle_sim.model.config import LINUX

    server = {**FACTS, "hz": 1000, "tcp_pingpong_thresh": 3, "tcp_autocorking": 0,
              "tcp_rmem": [4096, 87380, 6291456], "tcp_wmem": [4096, 65536, 4194304],
              "congestion": {"server": "cubic"}, "interface": "eth0",
              "offloads": {"tso": True, "gso": True, "gro": False}}
    result = compare(trace("sim", []), _remote_real(server), profiles={C: LINUX, S: LINUX})
    lines = [h for h in result.host if h.startswith("server host")]
    for words in ("HZ 1000", "tcp_pingpong_thresh = 3", "tcp_autocorking = 0",
                  "tcp_rmem default 87380", "tcp_wmem = 4096 65536", "TSO on eth0"):
        assert sum(words in line for line in lines) == 1, (words, lines)
    assert not [h for h in result.host if h.startswith("client host")]
    assert result.agree     # facts alone are listed, not differences in behaviour


def test_a_congestion_control_the_serve_could_not_set_is_flagged() -> None:
    from nagle_sim.model.config import LINUX

    server = {**FACTS, "congestion": {"server": "reno"},
              "congestion_notes": {"server": "cannot use congestion control 'cubic': "
                                             "Operation not permitted"}}
    result = compare(trace("sim", []), _remote_real(server), profiles={C: LINUX, S: LINUX})
    assert not result.agree
    assert any(p.startswith("server host: congestion control reno in use where profile "
                            "linux models cubic") and "not permitted" in p
               for p in result.problems), result.problems


def test_a_local_run_says_each_host_fact_once() -> None:
    from nagle_sim.model.config import LINUX

    facts = {**FACTS, "hz": 100}
    real = trace("realnet", [], link="loopback", host_facts={"client": facts,
                                                             "server": facts})
    result = compare(trace("sim", []), real, profiles={C: LINUX, S: LINUX})
    assert [h for h in result.host if "HZ 100" in h] == [
        "this host: HZ 100, profile linux has HZ 250: delayed-ACK and probe timers are "
        "whole jiffies of another length"]


def test_the_version_profile_follows_the_kernel_release() -> None:
    from nagle_sim.compare import version_profile
    from nagle_sim.model.config import PROFILES

    assert version_profile("5.4.0-150-generic")[0] == "linux-5.4"
    name, note = version_profile("6.1.0-13-amd64")
    assert name == ("linux-6.1" if "linux-6.1" in PROFILES else "linux")
    assert "6.1.0-13-amd64" in note
    assert version_profile("99.1-future")[0] == "linux"
    assert "no profile linux-99.1" in version_profile("99.1-future")[1]
    assert version_profile(None)[0] == "linux"


def test_model_scenario_picks_profiles_for_the_real_hosts() -> None:
    from nagle_sim.compare import model_scenario
    from nagle_sim.scenario import loads

    sc = loads('[client]\nscript = "write 1"\n[server]\nscript = "read 1"\n'
               '[server.tune]\nhz = 100\n', "x.toml")
    real = _remote_real({**FACTS, "kernel": "5.4.0-150-generic"},
                        {**FACTS, "kernel": "99.0", "offloads": {"tso": False}})
    modelled, notes = model_scenario(sc, real)
    assert modelled.server.profile.name == "linux-5.4"
    assert modelled.server.profile.hz == 100          # its tune settings stay
    assert modelled.client.profile.name == "linux"
    assert any("no profile linux-99.0" in n for n in notes)
    kept, _ = model_scenario(sc, real, "scenario")
    assert kept.server.profile.name == "linux"
    forced, _ = model_scenario(sc, real, "linux-5.4")
    assert forced.client.profile.name == forced.server.profile.name == "linux-5.4"


def test_a_model_tso_burst_matches_the_wires_mss_segments_on_an_offloading_host() -> None:
    """A real NIC cuts a TSO burst into MSS segments: the same bytes on the MSS grid."""
    offl = {**FACTS, "interface": "eth0", "offloads": {"tso": True, "gso": True,
                                                        "gro": True}}
    sim = trace("sim", [seg(1, C, 1, 4344, "PA")])
    wire = [seg(1.01, C, 1, 1448), seg(1.02, C, 1449, 1448), seg(1.03, C, 2897, 1448, "PA")]
    real = trace("realnet", wire, link="remote", host_facts={"client": offl, "server": offl})
    result = compare(sim, real)
    assert result.agree, result.problems
    plain = {**FACTS, "offloads": {"tso": False, "gso": False, "gro": False}}
    real = trace("realnet", wire, link="remote",
                 host_facts={"client": plain, "server": plain})
    assert not compare(sim, real).agree


def test_a_real_trace_without_segments_never_reports_no_stalls() -> None:
    from rich.console import Console

    from nagle_sim.render.terminal import summary_renderable

    real = Trace(source=Source.REALNET, title="t", segments=[], meta={
        "capture": "unavailable: AF_PACKET capture needs CAP_NET_RAW (run as root)"},
        ops=[OpRecord(side=C, op="write", arg="1", start=Micros(0), end=Micros(45_000))])
    console = Console(width=200, record=True)
    console.print(summary_renderable(real))
    text = console.export_text()
    assert "No stalls" not in text
    assert "Stalls on the wire: unknown" in text and "CAP_NET_RAW" in text


def test_the_model_sleeps_as_long_as_the_real_sleeps_took() -> None:
    """Optional in issue 18: a real sleep ends late (more under load); the aligned model
    run takes the median per statement, so long loops of sleeps do not drift apart."""
    from nagle_sim.compare import with_measured_sleeps
    from nagle_sim.scenario import Repeat, Sleep, loads

    sc = loads('[client]\nscript = """\nrepeat 3 {\n  write 1\n  sleep 300ms\n}\n"""\n'
               '[server]\nscript = "repeat 3 { read 1 }"\n', "s.toml")
    real = Trace(source=Source.REALNET, title="t", ops=[
        OpRecord(side=C, op="sleep", arg="300ms", start=Micros(s), end=Micros(s + d), line=5)
        for s, d in ((0, 300_400), (400_000, 300_600), (800_000, 300_500))])
    modelled, changed = with_measured_sleeps(sc, real)
    loop = modelled.client.script[0]
    assert isinstance(loop, Repeat)
    sleep = loop.body[1]
    assert isinstance(sleep, Sleep) and sleep.duration == 300_500
    assert changed == {"client:5": "300000 µs → 300500 µs"}
    exact = Trace(source=Source.REALNET, title="t", ops=[
        OpRecord(side=C, op="sleep", arg="300ms", start=Micros(0), end=Micros(300_010),
                 line=5)])
    assert with_measured_sleeps(sc, exact) == (sc, {})


def test_compare_cli_with_saved_traces_and_its_one_line_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`compare MODEL.json REAL.json` and `compare SCENARIO REAL.json` need no kernel run;
    misuse is one line and exit 2."""
    from nagle_sim.__main__ import main

    body = [seg(1, C, 1, 6, "PA"), seg(1.01, S, 1, ack=7)]
    model, real = tmp_path / "model.json", tmp_path / "real.json"
    with open(model, "w") as f:
        trace("sim", body).write_json(f)
    with open(real, "w") as f:
        trace("realnet", list(body), link="loopback").write_json(f)
    assert main(["compare", str(model), str(real), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["agree"] is True
    for argv, words in (([str(model)], "needs a saved real trace"),
                        ([str(model), str(model)], "not a real trace"),
                        ([str(model), str(real), "--remote", "h:1"], "needs no run"),
                        ([str(model), str(tmp_path / "gone.json")], "gone.json"),
                        ([str(model), str(real), "--profile", "nope"], "--profile 'nope'")):
        assert main(["compare", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- remotefix (issue 18 review)
SMALL = ('title = "small"\n[client]\nscript = "write 1"\n[server]\nscript = "read 1"\n')


def _small_real(segments: list[SegmentRecord], **meta: object) -> Trace:
    return Trace(source=Source.REALNET, title="small", segments=segments, meta={
        "mss": 1448, "link": "remote", **meta}, ops=[
        OpRecord(side=C, op="connect", arg="", start=Micros(0), end=Micros(100)),
        OpRecord(side=S, op="accept", arg="", start=Micros(0), end=Micros(100)),
        OpRecord(side=C, op="write", arg="1", start=Micros(200), end=Micros(210), line=3),
        OpRecord(side=S, op="read", arg="1", start=Micros(200), end=Micros(400), line=5)])


def test_a_real_trace_without_segments_gets_no_segment_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No capture anywhere (e.g. `--remote` without root): the model's segments are not
    "missing"; only ops are compared and the verdict says segments were not captured."""
    from nagle_sim.__main__ import main
    from nagle_sim.export.tables import summary_markdown
    from nagle_sim.sweep import METRICS

    real = _small_real([], capture="unavailable: needs CAP_NET_RAW")
    sim = trace("sim", [seg(1, C, 1, 1, "PA"), seg(1.1, S, 1, ack=2)])
    sim.ops = list(real.ops)
    result = compare(sim, real)
    assert result.agree, result.problems
    assert "segments were not captured" in result.verdict and "CAP_NET_RAW" in result.verdict
    assert result.matches == [] and result.to_json()["segments_compared"] is False
    scen, saved = tmp_path / "small.toml", tmp_path / "noseg.json"
    scen.write_text(SMALL)
    with open(saved, "w") as f:
        real.write_json(f)
    code = main(["compare", str(scen), str(saved), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out["problems"]
    assert not any("SYN" in p for p in out["problems"])
    assert "only" in out["verdict"] and out["segments_compared"] is False
    # the summary and the sweep's wire metrics say unknown, never "none" / 0
    text = summary_markdown(real)
    assert "(none)" not in text and "unknown (no segment was captured" in text
    for name in ("stalls", "stall_ms", "segments_client", "data_segments_client"):
        assert METRICS[name].compute(real) is None, name
    assert METRICS["stalls"].compute(trace("realnet", [seg(1, C, 1, 1, "PA")])) == 0
    real.meta["capture"] = "\x1b[2J" + "x" * 10_000
    assert compare(sim, real).wire_unknown == "?[2J" + "x" * 196
    # nothing at all to compare: one line, exit 2
    empty = Trace(source=Source.REALNET, title="small", meta={"mss": 1448})
    with open(saved, "w") as f:
        empty.write_json(f)
    assert main(["compare", str(scen), str(saved)]) == 2
    err = capsys.readouterr().err
    assert "nothing to compare" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("meta", "field"), [
    ({"host_facts": 5}, "meta.host_facts"),
    ({"host_facts": {"server": "s"}}, "meta.host_facts.server"),
    ({"host_facts": {"server": {"offloads": 7}}}, "meta.host_facts.server.offloads"),
    ({"clock_offset": {"handshake_rtt_us": float("nan")}}, "meta.clock_offset.handshake_rtt_us"),
    ({"clock_offset": {"handshake_rtt_us": float("inf")}}, "meta.clock_offset.handshake_rtt_us"),
    ({"clock_offset": {"handshake_rtt_us": 1e308, "one_way_to_client_us": 1.0}},
     "meta.clock_offset.handshake_rtt_us"),
    ({"notes": "x"}, "meta.notes"),
    ({"mss": "big"}, "meta.mss"),
])
def test_bad_meta_in_a_saved_real_trace_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], meta: dict[str, object],
        field: str) -> None:
    from nagle_sim.__main__ import main

    scen, saved, model = tmp_path / "small.toml", tmp_path / "real.json", tmp_path / "m.json"
    scen.write_text(SMALL)
    doc = _small_real([seg(1, C, 1, 1, "PA")]).to_json()
    doc["meta"].update(meta)
    saved.write_text(json.dumps(doc))       # NaN / Infinity as Python's json writes them
    with open(model, "w") as f:
        Trace(source=Source.SIM, title="small", segments=[seg(1, C, 1, 1, "PA")]).write_json(f)
    for argv in ([str(scen), str(saved)], [str(model), str(saved)]):
        assert main(["compare", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert field + ":" in err and len(err.strip().splitlines()) == 1, err


def test_compare_refuses_a_real_trace_as_the_model_and_another_scenarios_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nagle_sim.__main__ import main

    scen, other, real = tmp_path / "small.toml", tmp_path / "other.toml", tmp_path / "r.json"
    scen.write_text(SMALL)
    other.write_text(SMALL.replace('"write 1"', '"write 2"'))
    with open(real, "w") as f:
        _small_real([seg(1, C, 1, 1, "PA")]).write_json(f)
    for argv, words in (([str(real), str(real)], "not a model trace"),
                        ([str(other), str(real)], "a run of another scenario"),
                        ([str(scen), str(real), "--set", "title=x"], "another scenario")):
        assert main(["compare", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err


def test_validate_remote_never_prints_the_token_nor_reads_markup(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`validate --remote TOKEN@HOST:PORT`: the token is a secret (never in the output)
    and user text such as ``[/]`` is shown as written, never parsed as rich markup."""
    import nagle_sim.compare as compare_pkg
    import nagle_sim.compare.validate as validate
    from nagle_sim.__main__ import main
    from nagle_sim.scenario import ScenarioError

    def refuse(*_args: object, **_kwargs: object) -> object:
        raise ScenarioError("lesson.toml: [bold]not markup[/]")

    monkeypatch.setattr(compare_pkg, "run_both", refuse)
    monkeypatch.setattr(validate, "not_comparable", lambda *_s: "")
    monkeypatch.setattr("nagle_sim.runners.real_unavailable", lambda _r=None: None)
    monkeypatch.setenv("COLUMNS", "400")
    code = main(["validate", "--remote", "sec[/]ret-tok3n@127.0.0.1:7070"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1, text
    assert "sec[/]ret" not in text and "tok3n" not in text, text
    assert "server side on 127.0.0.1:7070" in text
    assert "[bold]not markup[/]" in text


def test_one_rule_names_a_profiles_congestion_control() -> None:
    """The runs and compare ask the same function, which reads the profile's
    ``congestion`` field."""
    from dataclasses import replace

    from nagle_sim import compare as compare_mod
    from nagle_sim.compare import host_differences
    from nagle_sim.model.config import PROFILES
    from realnet.hostfacts import profile_congestion

    assert profile_congestion(PROFILES["linux"]) == "cubic"
    assert profile_congestion(replace(PROFILES["linux"], congestion="bbr")) == "bbr"
    assert not hasattr(compare_mod, "profile_congestion")     # no second copy
    facts = {"congestion": {"server": "cubic"}}
    real = _remote_real(facts)
    profile = replace(PROFILES["linux"], congestion="bbr")
    _, problems = host_differences(real, {S: profile})
    assert any("cubic in use where profile linux models bbr" in p for p in problems), problems


def test_a_remote_models_link_is_the_measured_path_never_the_handshake() -> None:
    """Issue 33 (items 2, 3): the model's link takes the captures' minimum one-way delays
    and the path's measured rate (meta.path), not the handshake's round trip (which holds
    the remote's turnaround) nor the scenario's 56 kbit/s; one note says what it took."""
    from nagle_sim.compare.run import _path_delays
    from nagle_sim.scenario import loads

    sc = loads('[link]\ndelay_ms = 1\nrate = "56kbit"\n[client]\nscript = "write 1"\n'
               '[server]\nscript = "read 1"\n')
    notes: list[str] = []
    real = Trace(source=Source.REALNET, title="t", meta={
        "link": "remote", "clock_offset": {"handshake_rtt_us": 9_300.0},
        "path": {"to_server_us": 250.4, "to_client_us": 180.0, "rtt_us": 430.4,
                 "from": "the captures' minimum one-way delays", "rate_bps": None,
                 "rate_note": "not measured: 0 back-to-back segment pair(s)"}})
    link = _path_delays(sc, real, notes).link
    assert (link.to_server_delay, link.to_client_delay, link.rate_bps) == (250, 180, 0)
    assert len(notes) == 1 and "the model's link is the path's" in notes[0], notes
    assert "no rate limit (not measured" in notes[0] and "at 0.056 Mbit/s" in notes[0]
    real.meta["path"]["rate_bps"] = 10_000_000
    assert _path_delays(sc, real, []).link.rate_bps == 10_000_000
    # a trace without meta.path (an older one) leaves the scenario's link alone
    del real.meta["path"]
    assert _path_delays(sc, real, []) is sc


def test_a_saved_model_trace_names_the_profile_as_its_scenario_changed_it() -> None:
    """Review of issue 11: `congestion` and `tune` per side travel in the model trace's meta,
    so `compare SIM.json REAL.json` compares against the model that ran, not the bare
    profile; a change this model does not know leaves that side out."""
    from nagle_sim.compare import profiles_of
    from nagle_sim.scenario import loads
    from nagle_sim.sim.driver import run_sim

    sim = run_sim(loads('[client]\ncongestion = "reno"\ntune = { pingpong_thresh = 3 }\n'
                        'script = "write 10\\nread 1"\n[server]\nscript = "read 10\\nwrite 1"\n'))
    again = Trace.loads(sim.dumps())
    profiles = profiles_of(again)
    assert (profiles[C].congestion, profiles[C].pingpong_thresh) == ("reno", 3)
    assert profiles[S].congestion == "cubic" and "server_tune" not in again.meta
    again.meta["client_tune"] = {"no_such_knob": 1}
    assert C not in profiles_of(again) and S in profiles_of(again)


def test_a_sysctl_the_run_set_in_its_namespace_is_the_fact_compared() -> None:
    """Review of issue 11: `tune pingpong_thresh = 3` runs with the sysctl set in that
    side's namespace; the host's own value (1) must not be reported as a difference."""
    from dataclasses import replace

    from nagle_sim.compare import host_differences
    from nagle_sim.model.config import LINUX

    facts = {**FACTS, "congestion": {"server": "cubic"}}
    real = trace("realnet", [], link="emulated", host_facts={"client": facts, "server": facts},
                 namespace_sysctls={"server": {"net.ipv4.tcp_pingpong_thresh": "3"}})
    tuned = replace(LINUX, pingpong_thresh=3)
    lines, _ = host_differences(real, {C: LINUX, S: tuned})
    assert not [x for x in lines if "pingpong" in x], lines
    real.meta["namespace_sysctls"] = {}
    lines, _ = host_differences(real, {C: LINUX, S: tuned})
    assert [x for x in lines if "tcp_pingpong_thresh = 1" in x and "has 3" in x], lines


@pytest.mark.parametrize(("code", "late_ms", "agree"), [
    ("DELACK_FIRED", 5.8, True),     # a delayed-ACK timer 1.5 jiffies late (HZ=250)
    # the ACK comes 40 ms after the data: packetdrill's tolerance is 12.5 % of that, 5 ms,
    # and two jiffies at HZ=250 add 8 ms
    ("DELACK_FIRED", 12.9, True),
    ("DELACK_FIRED", 13.5, False),
    ("DELACK_FIRED", -5.8, False),   # a timer is never early
    ("PROBE0_RELEASE", 7.0, True),
    ("", 5.8, False),                # an ACK not sent by a timer has no such slack
])
def test_a_timer_may_fire_two_jiffies_late(code: str, late_ms: float, agree: bool) -> None:
    """A loaded machine fires timers a jiffy or two late: a segment the model sends from
    a timer may be that much later (a note, not a difference); nothing else may."""
    def body(ack_at: float, why: str) -> list[SegmentRecord]:
        ack = seg(ack_at, S, 1, ack=7)
        ack.code = why
        return [seg(1, C, 1, 6, "PA"), ack]

    sim = trace("sim", body(41, code), client_profile="linux", server_profile="linux")
    real = trace("realnet", body(41 + late_ms, ""), link="loopback")
    result = compare(sim, real)
    assert result.agree is agree, result.problems
    if agree:
        assert any("its timer fired late" in n for n in result.notes), result.notes


TIE_SCENARIO = '''
[link]
delay_ms = 20
rate = "56kbit"
[client]
script = """
repeat 40 {
  write 1
  sleep 2ms
}
read 1
"""
[server]
script = """
read 40
write 1
"""
'''


def _kernel_with_faster_acks(early_us: int) -> tuple[object, Trace]:
    """The scenario, and a stand-in for its kernel run: the model with ACKs arriving
    ``early_us`` sooner (as a real relay's few hundred µs of difference would), so a write
    the model puts just before the ACK's send lands just after it."""
    from dataclasses import replace

    from nagle_sim.scenario import loads
    from nagle_sim.sim.driver import run_sim

    sc = loads(TIE_SCENARIO, "tie.toml")
    link = replace(sc.link, to_client_delay=Micros(sc.link.to_client_delay - early_us))
    real = run_sim(replace(sc, link=link))
    real.source = Source.REALNET
    real.meta["link"] = "loopback"
    return sc, real


@pytest.mark.parametrize("early_us", [400, 700, 1300])
def test_a_write_on_the_other_side_of_a_send_within_1ms_is_followed(early_us: int) -> None:
    """Lesson 01 (issue 11's three green validates): one write lands µs after the ACK
    that sends a bundle in the kernel, just before it in the model. The model is run again
    with that write on the kernel's side, the comparison agrees and its notes say so."""
    from nagle_sim.compare import aligned_model_run, first_write_tie, profiles_of
    from nagle_sim.sim.driver import run_sim

    sc, real = _kernel_with_faster_acks(early_us)
    plain = compare(run_sim(sc), real, profiles=profiles_of(sc))
    assert any("real sent 30 B + 9 B where the model sent 31 B + 8 B" in p
               for p in plain.problems)
    tie = first_write_tie(run_sim(sc), real)
    assert tie is not None and tie.side is C and tie.iteration == (31,)
    assert tie.sim_offset == -362 and tie.real_offset == early_us - 362
    assert tie.shift == 363
    sim = aligned_model_run(sc, real, run_sim)
    result = compare(sim, real, profiles=profiles_of(sc))
    assert result.agree, result.problems
    assert [n for n in result.notes if n.startswith("followed a write/segment tie")] == [
        f"followed {tie.describe()}"]
    assert "moved 363 µs later" in tie.describe()


def test_a_write_further_than_1ms_from_the_send_stays_a_difference() -> None:
    """The model's write 362 µs before its send, the kernel's 1.138 ms after: no tie; the
    comparison reports the split as it did before ties were followed."""
    from nagle_sim.compare import aligned_model_run, first_write_tie, profiles_of
    from nagle_sim.sim.driver import run_sim

    sc, real = _kernel_with_faster_acks(1500)
    assert first_write_tie(run_sim(sc), real) is None
    sim = aligned_model_run(sc, real, run_sim)
    assert "write_ties" not in sim.meta
    result = compare(sim, real, profiles=profiles_of(sc))
    assert any("real sent 30 B + 9 B where the model sent 31 B + 8 B" in p
               for p in result.problems)


def test_a_stall_pairs_with_a_gap_a_sleep_covers_just_over_half_of() -> None:
    """Found by comparing random scenarios with the kernel (request, 20 ms link, 20 ms
    think time, reply): the model's measured 20.3 ms sleep covered just over half of its
    40.3 ms gap, the kernel's 20.1 ms just under half of 40.6 ms. One list said stall, the
    other not; the stall now pairs with its twin and agrees on duration."""
    def run(source: str, sleep_end: float, reply: float, **meta: object) -> Trace:
        t = trace(source, [seg(100, C, 1, 500, "PA"), seg(reply, S, 1, 1, "PA", ack=501),
                           seg(reply + 20, C, 501, ack=2)], **meta)
        t.ops = [OpRecord(side=S, op="sleep", arg="20ms", start=Micros(120_000),
                          end=Micros(round(sleep_end * 1000)), line=3)]
        return t

    sim = run("sim", 140.3, 140.3)
    real = run("realnet", 140.1, 140.6, link="loopback")
    result = compare(sim, real)
    assert result.agree, result.problems
    pair = next(p for p in result.stalls if p.real is not None and p.real.start == 100_000)
    assert pair.sim is not None and pair.sim.held_by == "the application slept"


def test_events_after_a_late_timer_may_be_timed_from_the_event_before_it() -> None:
    """Found by comparing random scenarios with the kernel (5 kB over a 1 Mbit/s link): the
    kernel's tail loss probe came 6.3 ms after the model's (a late timer, excused), and the
    ACKs the link paced every 12 ms were then each called 7 ms early, timed from the late
    probe. They are timed from whichever anchor fits: the probe or the event before it."""
    def run(source: str, probe: float, **meta: object) -> Trace:
        return trace(source, [
            seg(1.0, C, 1, 1448, "A"), seg(1.1, C, 1449, 666, "PA"),
            SegmentRecord(t=Micros(round(probe * 1000)), src=C, seq=1449, ack=1,
                          length=666, flags="PA", code="LOSS_PROBE"),
            seg(13.4, S, 1, ack=1449), seg(25.4, S, 1, ack=2115)], **meta)

    linux = {"client_profile": "linux", "server_profile": "linux"}
    result = compare(run("sim", 5.7, **linux), run("realnet", 12.0, link="loopback"))
    assert result.agree, result.problems
    probe = next(m for m in result.matches if m.kind == "timer-late")
    assert "its timer fired late" in probe.note
    # what a late timer releases still follows it: a reply 0.2 ms after the probe
    late_reply = compare(
        trace("sim", [seg(1.0, C, 1, 10, "PA"),
                      SegmentRecord(t=Micros(45_000), src=S, seq=1, ack=11, length=0,
                                    flags="A", code="DELACK_FIRED"),
                      seg(45.2, C, 11, 10, "PA")], **linux),
        trace("realnet", [seg(1.0, C, 1, 10, "PA"), seg(51.0, S, 1, ack=11),
                          seg(51.2, C, 11, 10, "PA")], link="loopback"))
    assert late_reply.agree, late_reply.problems


def test_an_event_may_be_timed_from_its_senders_own_last_call() -> None:
    """Lesson 18 under load: the server's data, released by a chain of delayed ACKs that
    each fired within tolerance but late, drifted 12 ms; the client's ACK on its own read
    (its sleeps aligned) was then called 11 ms early, timed from that drifted data. Timed
    from the read that sent it, it agrees. Only a segment the call itself sent is timed
    so: a real error against both anchors, or a segment sent while the client slept or by
    a timer, still fails (a review reproduced a 5 ms-late ACK hidden by a long sleep)."""
    def run(source: str, data: list[float], ack: float, op: str, code: str,
            **meta: object) -> Trace:
        t = trace(source, [*(seg(x, S, 1 + i, 1, "PA") for i, x in enumerate(data)),
                           seg(ack, C, 1, ack=1 + len(data))], **meta)
        t.segments[-1].code = code
        start, end = (45_000, 45_200) if op == "read" else (0, 60_000)
        t.ops = [OpRecord(side=C, op=op, arg="4", start=Micros(start), end=Micros(end),
                          line=3, iteration=(0,), loop=1)]
        return t

    drifted = [10, 23.5, 37, 50.5]   # each interval 3.5 ms long: inside the 4 ms floor
    sim = run("sim", [10, 20, 30, 40], 45.1, "read", "READ_ACK")
    assert compare(sim, run("realnet", drifted, 45.1, "read", "", link="loopback")).agree
    late = compare(sim, run("realnet", drifted, 51.1, "read", "", link="loopback"))
    assert not late.agree and any(p.startswith("c→s ACK") for p in late.problems)
    # the same ACK sent by the delayed-ACK timer while the client slept: no call anchor
    timer = run("sim", [10, 20, 30, 40], 45.1, "sleep", "DELACK_FIRED")
    asleep = compare(timer, run("realnet", drifted, 45.1, "sleep", "", link="loopback"))
    assert not asleep.agree and any(p.startswith("c→s ACK") for p in asleep.problems)


def test_a_tie_must_account_for_exactly_the_writes_bytes() -> None:
    """A split that differs by more (or less) than the write that fell on the other side
    of the send is not that tie: it stays a difference."""
    from nagle_sim.compare import first_write_tie
    from nagle_sim.compare.align import _write_bytes
    from nagle_sim.sim.driver import run_sim

    assert [_write_bytes(a) for a in ("1", "1000 more", "10 20 30", "")] == [1, 1000, 60, 0]
    sc, real = _kernel_with_faster_acks(700)
    assert first_write_tie(run_sim(sc), real) is not None
    for op in real.ops:
        if op.op == "write":
            op.arg = "2"       # as if each write had been 2 bytes: the split is 1 byte off
    assert first_write_tie(run_sim(sc), real) is None


def test_an_ack_on_read_after_a_long_blocking_read_gets_only_the_4ms_floor() -> None:
    """The issue-11 re-review's counter-example: the client blocks 400 ms in a read, the
    model ACKs on read, the kernel 40 ms later (a delayed ACK). Timed from the read's start
    with 12.5 % of its length the 40 ms passed (50 ms); from the call it gets the 4 ms
    floor, and the difference is reported."""
    def run(source: str, ack: float, **meta: object) -> Trace:
        t = trace(source, [seg(400.0, S, 1, 10, "PA"), seg(ack, C, 1, ack=11)], **meta)
        t.segments[-1].code = "READ_ACK" if source == "sim" else ""
        t.ops = [OpRecord(side=C, op="read", arg="10", start=Micros(100),
                          end=Micros(400_100), line=3, iteration=(0,), loop=1)]
        return t

    result = compare(run("sim", 400.05), run("realnet", 440.05, link="loopback"))
    assert not result.agree
    assert any(p.startswith("c→s ACK") and "later than the model" in p
               for p in result.problems), result.problems


def test_a_device_queue_lessons_na_reason_fits_a_remote_run() -> None:
    """Issue 33.5: on a remote run the n/a reason spoke of "this machine's loopback and TUN
    links"; there it is the hosts' real interfaces whose queues nothing records."""
    from nagle_sim.compare import not_comparable
    from nagle_sim.lessons import load_lessons

    queued = [lesson for lesson in load_lessons() if lesson.scenario.link.tx_complete > 0]
    assert queued, "a lesson with a device queue (the autocorking lesson)"
    for lesson in queued:
        local, remote = not_comparable(lesson.scenario), not_comparable(lesson.scenario, True)
        assert "this machine's loopback and TUN links" in local
        assert "loopback" not in remote and "TUN" not in remote
        assert "remote run" in remote and "real interface" in remote


def _kernel_on_a_slower_path(seed: int, extra_us: int, *, tcp_info: bool = True
                             ) -> tuple[object, Trace]:
    """A stand-in kernel run of random scenario ``seed``: the model with every packet
    ``extra_us`` slower, and the handshake RTTs it reads as TCP_INFO after connect and
    accept, as a real run records them."""
    from nagle_sim.compare.align import _handshake_rtts, with_path_latency
    from nagle_sim.scenario import loads
    from nagle_sim.scenario.generator import random_scenario
    from nagle_sim.sim.driver import run_sim
    from nagle_sim.trace import EventRecord

    sc = loads(random_scenario(seed).text)
    real = run_sim(with_path_latency(sc, extra_us))
    real.source = Source.REALNET
    rtts = _handshake_rtts(real)
    assert rtts is not None
    if tcp_info:
        real.events += [EventRecord(t=Micros(0), side=side, kind="tcp_info", code="TCP_INFO",
                                    reason="", detail=what, data={"rtt": rtt})
                        for side, what, rtt in ((C, "after connect", rtts[0]),
                                                (S, "after accept", rtts[1]))]
    return sc, real


@pytest.mark.parametrize("extra_us", [60, 116])
def test_the_model_takes_the_emulated_paths_measured_latency(extra_us: int) -> None:
    """validate --random seed 51 (1 Mbit/s, no delay): the kernels' handshake RTTs were
    ~120 µs longer than the link's two packets, so the server's loss probe timeout
    (2·SRTT + 2 ms) came to two jiffies where the model's came to one; its early probe
    put the model's server out of ping-pong and it ACKed what the kernel delayed. With
    the measured latency per packet the model takes the kernel's decisions, and says so."""
    from nagle_sim.compare import aligned_model_run, profiles_of
    from nagle_sim.sim.driver import run_sim

    sc, real = _kernel_on_a_slower_path(51, extra_us)
    plain = compare(run_sim(sc), real, profiles=profiles_of(sc))
    assert any("the model sent a pure ACK of 8449 the kernel did not" in p
               for p in plain.problems), plain.problems
    sim = aligned_model_run(sc, real, run_sim)
    assert sim.meta["path_latency_us"] == extra_us
    result = compare(sim, real, profiles=profiles_of(sc))
    assert result.agree, result.problems
    assert any(n.startswith(f"the model's packets took {extra_us} µs longer")
               for n in result.notes), result.notes


def test_without_the_kernels_rtts_or_beyond_bounds_no_latency_is_taken() -> None:
    """No TCP_INFO read (an older saved run): nothing to measure the path by; and an
    excess of 2 ms or more per packet is a busy host, left for the comparison to show."""
    from nagle_sim.compare import aligned_model_run
    from nagle_sim.sim.driver import run_sim

    sc, real = _kernel_on_a_slower_path(51, 116, tcp_info=False)
    assert "path_latency_us" not in aligned_model_run(sc, real, run_sim).meta
    sc, real = _kernel_on_a_slower_path(51, 2_500)
    assert "path_latency_us" not in aligned_model_run(sc, real, run_sim).meta
