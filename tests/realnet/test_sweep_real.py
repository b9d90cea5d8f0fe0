"""`nagle-sim sweep --real`: the seed S5 table measured on this machine's kernel agrees
with the model cell by cell (root and network namespaces; skipped elsewhere with why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagle_sim.sim.driver import run_sim
from nagle_sim.sweep import parse_vary
from nagle_sim.sweep_run import run_sweep

pytestmark = pytest.mark.realnet
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_s5_model_and_kernel_agree_cell_by_cell(requires_root_netns: None) -> None:
    """Over a 12 ms RTT emulated link, the share of writes that left alone (and how many
    data segments the client sent) is the same in the kernel as in the model, whether
    the writes are back to back or 15 ms apart, with and without NODELAY."""
    from realnet.runner import run_real

    path = EXAMPLES / "s5.toml"
    result = run_sweep(path.read_text(), str(path), [parse_vary("client.nodelay=false,true"),
                                                     parse_vary("sleep=0ms,15ms")],
                       ["writes_alone_pct", "data_segments_client"], jobs=1, real=True,
                       real_runner=run_real, model_runner=run_sim)
    for cell in result.cells:
        for metric in ("writes_alone_pct", "data_segments_client"):
            assert cell.real_stat(metric)[0] == cell.model[metric], (cell.cell.label(), metric)
