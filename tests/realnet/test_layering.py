"""Issue 10: no import cycle inside realnet. What local and remote runs share (the side
processes, their records, supervision, host checks, trace assembly) imports neither
`realnet.runner` nor `realnet.remote`, and `realnet.remote` does not import
`realnet.runner`; only runner -> remote -> the shared modules. Checked in a fresh
interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("module", "forbidden"), [
    *((f"realnet.{shared}", ("realnet.runner", "realnet.remote"))
      for shared in ("side", "child", "records", "supervise", "host", "assemble")),
    ("realnet.remote", ("realnet.runner",)),
])
def test_realnet_imports_flow_one_way(module: str, forbidden: tuple[str, ...]) -> None:
    code = (f"import sys, {module}\n"
            f"print(','.join(m for m in {forbidden!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout.strip()
    assert out == "", f"{module} imports {out}"
