"""Shared fixtures for the explain tests: model runs written out as captures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nagle_sim.scenario import loads
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Trace

from .captures import write_capture

S1 = """title = "write-write-read"
[client]
script = "repeat 6 { write 6; write 7; read 13 }"
[server]
script = "repeat 6 { read 13; write 13 }"
"""


def model(text: str, *overrides: str) -> Trace:
    return run_sim(loads(text, "test.toml", list(overrides)))


@pytest.fixture
def s1_trace() -> Trace:
    return model(S1)


@pytest.fixture
def capture_of(tmp_path: Path) -> Callable[..., Path]:
    """capture_of(trace, name="x.pcap", **write_capture options) → the file."""
    def make(trace: Trace, name: str = "cap.pcap", **kw: object) -> Path:
        return write_capture(trace, tmp_path / name, **kw)  # type: ignore[arg-type]
    return make
