"""Snapshots of a capture opened like a lesson (``explain --tui``), at 80×24 and 120×40.

The capture is written in-test from a model run (tests/explain/captures.py), so the
picture depends on nothing outside the repository. Update only after looking at the PNGs
(``python -m tests.tui.snapshot_png``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from nagle_sim.cli.explain import capture_view
from nagle_sim.explain import explain_file
from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.capture_app import CaptureApp
from nagle_sim.tui.widgets.ladder import Ladder

from ..explain.captures import write_capture
from ..explain.conftest import S1, model
from .conftest import settle


async def _second_stall_with_nodelay(pilot: Pilot[object]) -> None:
    await settle(pilot)
    await pilot.press("n", "n", "1")
    await settle(pilot)
    pilot.app.screen.query_one(Ladder).focus()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_capture_at_its_second_stall_with_a_what_if(snap_compare: Callable[..., bool],
                                                     tmp_path: Path,
                                                     size: tuple[int, int]) -> None:
    """The captured ladder, the stall's explanation in the panel, the what-ifs listed and
    NODELAY on the client chosen (the overlay's model)."""
    path = write_capture(model(S1), tmp_path / "s1.pcap")
    app = CaptureApp(capture_view(explain_file(str(path), runner=run_sim)), run_sim=run_sim)
    assert snap_compare(app, terminal_size=size, run_before=_second_stall_with_nodelay)
