"""nagle_sim.explain is a headless pipeline: importing it must not pull in the UI (textual)
or the simulator's event loop (simpy), which load only when a command needs them."""

from __future__ import annotations

import subprocess
import sys


def test_explain_imports_no_textual_or_simpy() -> None:
    code = ("import sys, nagle_sim.explain, nagle_sim.cli.explain, nagle_sim.explain.report; "
            "print(' '.join(m for m in ('textual', 'simpy', 'realnet') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""
