"""``explain CAPTURE --tui``: the capture opened in the app like a lesson (issue 14).

The ladder is the captured run, the panel explains each stall as the cursor reaches it,
the model of the rebuilt scenario is the overlay, and the rebuild's what-ifs re-run it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim.__main__ import main
from nagle_sim.cli.explain import capture_view
from nagle_sim.explain import explain_file
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

from .captures import write_capture


def _panel(app: object) -> str:
    from nagle_sim.tui.widgets.explain import ExplainPanel
    return str(app.screen.query_one(ExplainPanel).body.render())  # type: ignore[attr-defined]


async def _settle(pilot: object) -> None:
    for _ in range(3):
        await pilot.pause()  # type: ignore[attr-defined]
        await pilot.app.workers.wait_for_complete()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


async def test_the_ladder_is_the_capture_and_the_panel_names_each_stall(
        s1_trace: Trace, tmp_path: Path) -> None:
    from nagle_sim.tui.capture_app import CaptureApp
    from nagle_sim.tui.screens.capture import CaptureScreen
    from nagle_sim.tui.widgets.ladder import Ladder

    ex = explain_file(str(write_capture(s1_trace, tmp_path / "s1.pcap")), runner=run_sim)
    assert ex.stalls and ex.rebuilt is not None and ex.rebuilt.model is not None
    view = capture_view(ex)
    app = CaptureApp(view, run_sim=run_sim)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        ladder = screen.query_one(Ladder)
        # the rows' segments are the captured ones, in order; the model is the ghost
        shown = [r.segment for r in ladder.rows if r.segment is not None]
        assert shown == list(ex.captured.trace.segments)
        assert ladder.overlay("ghost") == list(ex.rebuilt.model.segments)
        assert "capture:" in str(screen.query_one("#diff").render())
        # step to the first stall: its cause, the model's comparison and evidence
        await pilot.press("n")
        await pilot.pause()
        first = ex.stalls[0]
        text = _panel(app)
        assert f"cause {first.cause}" in text and "nagle" in text
        assert "model reproduces it: model" in text and "capture" in text
        assert "evidence:" in text
        # the next stall is explained in its turn
        await pilot.press("n")
        await pilot.pause()
        assert "Stall 2/" in _panel(app)


async def test_a_what_if_key_reruns_the_rebuilt_scenario_as_the_overlay(
        s1_trace: Trace, tmp_path: Path) -> None:
    from nagle_sim.tui.capture_app import CaptureApp
    from nagle_sim.tui.widgets.ladder import Ladder

    ex = explain_file(str(write_capture(s1_trace, tmp_path / "s1.pcap")), runner=run_sim)
    view = capture_view(ex)
    names = [w.name for w in view.whatifs]
    assert "NODELAY on the client" in names
    key = str(names.index("NODELAY on the client") + 1)
    calls: list[object] = []

    def counting_sim(scenario: object) -> Trace:
        calls.append(scenario)
        return run_sim(scenario)  # type: ignore[arg-type]

    app = CaptureApp(view, run_sim=counting_sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        ladder = app.screen.query_one(Ladder)
        rows_before = list(ladder.rows)
        ghost_before = ladder.overlay("ghost")
        await pilot.press(key)
        await _settle(pilot)
        assert calls and calls[-1].client.options.nodelay  # type: ignore[attr-defined]
        assert ladder.rows == rows_before, "the ladder stays the capture"
        ghost = ladder.overlay("ghost")
        assert ghost is not None and ghost != ghost_before
        assert "overlay: model NODELAY on the client" in str(
            app.screen.query_one("#diff").render())
        # 0: back to the model as rebuilt
        await pilot.press("0")
        await _settle(pilot)
        assert "overlay: model as rebuilt" in str(app.screen.query_one("#diff").render())


def test_cli_tui_hands_the_capture_to_the_app(
        s1_trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import nagle_sim.tui.capture_app as capture_app
    seen: dict[str, object] = {}

    def fake(view: object, *, run_sim: object) -> int:
        seen["view"] = view
        return 0
    monkeypatch.setattr(capture_app, "run_capture_app", fake)
    path = write_capture(s1_trace, tmp_path / "s1.pcap")
    assert main(["explain", str(path), "--tui"]) == 0
    view = seen["view"]
    assert view.captured.source == "capture"  # type: ignore[attr-defined]
    assert len(view.captured.segments) == len(s1_trace.segments)  # type: ignore[attr-defined]
    assert view.stalls and "[client]" in view.toml  # type: ignore[attr-defined]


def test_cli_tui_bad_input_is_one_line_exit_2_before_the_app(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import nagle_sim.tui.capture_app as capture_app

    def never(*_a: object, **_k: object) -> int:
        raise AssertionError("the app must not start on bad input")
    monkeypatch.setattr(capture_app, "run_capture_app", never)
    bad = tmp_path / "not.pcap"
    bad.write_bytes(b"hello, not a capture")
    assert main(["explain", str(bad), "--tui"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not.pcap" in err


async def test_help_over_the_capture_lists_only_the_what_ifs_it_has(
        s1_trace: Trace, tmp_path: Path) -> None:
    from nagle_sim.tui.capture_app import CaptureApp
    from nagle_sim.tui.screens.help import HelpScreen

    ex = explain_file(str(write_capture(s1_trace, tmp_path / "s1.pcap")), runner=run_sim)
    view = capture_view(ex)
    app = CaptureApp(view, run_sim=run_sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.source
        assert "This screen (CaptureScreen)" in text and "As rebuilt" in text
        assert f"What-if {len(view.whatifs) + 1}" not in text
        await pilot.press("escape")
        await pilot.press("escape")   # back to the lesson list underneath
        await pilot.pause()
        from nagle_sim.tui.screens.lesson_list import LessonListScreen
        assert isinstance(app.screen, LessonListScreen)


SHIPPED = Path(__file__).resolve().parents[2] / "lessons" / "25-diagnose-a-capture" / "capture.pcap"


async def test_n_lands_on_each_stall_of_the_shipped_capture_and_explains_it() -> None:
    """The lesson's real capture: its hosts sit 0.5 ms from the capture point, so stall
    times as captured (53.517 → 98.500) and the ladder's send times (53.017, 98.000) are
    different clocks. `n` must land on the row that ended each stall, the held segment
    released, and the panel must explain that stall there (never "No stall here")."""
    from nagle_sim.tui.capture_app import CaptureApp
    from nagle_sim.tui.widgets.ladder import Ladder

    ex = explain_file(str(SHIPPED), runner=run_sim)
    assert len(ex.stalls) >= 3
    view = capture_view(ex)
    segments = ex.captured.trace.segments
    app = CaptureApp(view, run_sim=run_sim)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        ladder = app.screen.query_one(Ladder)
        for number, stall in enumerate(ex.stalls, start=1):
            await pilot.press("n")
            await pilot.pause()
            row = ladder.rows[ladder.cursor]
            note = view.stalls[number - 1]
            assert note.segment is not None
            released = segments[note.segment]
            # the row of the held data sent once the stall ended: the key's bytes
            assert row.segment is released
            assert (released.src.value, released.seq) == stall.key
            text = _panel(app)
            assert "No stall here" not in text
            assert f"Stall {number}/{len(ex.stalls)}" in text
            assert f"cause {stall.cause}" in text
            # one clock: the panel's times are the ladder's (send times), e.g. 98.000
            ends = [s.t for s in segments if s.t == note.end]
            assert ends, "the stall's end is a row's time on the ladder"


def _first_frames(src: Path, dst: Path, frames: int) -> Path:
    """The first ``frames`` records of a classic pcap file."""
    import struct
    data = src.read_bytes()
    out, off = bytearray(data[:24]), 24
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    for _ in range(frames):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        out += data[off:off + 16 + incl]
        off += 16 + incl
    dst.write_bytes(bytes(out))
    return dst


@pytest.mark.parametrize("frames", [1, 2, 3])
def test_a_tiny_capture_never_prints_none_ms(
        frames: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _first_frames(SHIPPED, tmp_path / f"{frames}.pcap", frames)
    code = main(["explain", str(path)])
    out = capsys.readouterr()
    assert code in (0, 2), out.err
    assert "None" not in out.out and "None" not in out.err
