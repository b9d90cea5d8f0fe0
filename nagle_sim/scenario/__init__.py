"""The scenario hub: what a run is asked to do, loaded from TOML and checked.

Both executors consume a `Scenario`; every feature builds or changes one. The package's
modules, each owning one concern:

- `types`: the frozen dataclasses (`Scenario`, `SideSpec`, `Link`, `LinkFault`, the script
  statements `Write` … `Close`) and reading a script without running it (`walk`,
  `describe`, `outermost_loops`, `real_run_caveats`);
- `script`: the script language (tokenizer, parser, durations, `MAX_STATEMENTS`);
- `steps`: the script walker both executors run scripts through (`steps`, `Step`) and
  the words they both write into a trace (handshake ops, end-of-stream, deadlock, meta);
- `params`: ``[params]`` and ``--param``;
- `loader`: the TOML format, ``--set`` overrides and every value's check (`loads`, `load`);
- `files`: bounded reading of a user's file (`read_text`, `read_regular_file`);
- `errors`: `ScenarioError` and quoting user text in one-line messages (`clip`, `shown`);
- `generator`: seeded random scenarios (``validate --random``), imported when used.

Imports the model's vocabulary and the error root only; must not import simpy, asyncio,
textual, rich or anything that runs a scenario. `types`, `script`, `steps`, `loader`,
`files` and `errors` are compiled in a wheel (setup.py): every simulated segment passes
through the step walker, and the trace builders hold these types.
"""

from .errors import ScenarioError, clip, shown
from .files import MAX_FILE_BYTES, FileTooBig, read_regular_file, read_text
from .loader import load, loads, nesting_depth
from .script import MAX_NESTING, MAX_STATEMENTS, MAX_WRITEV_PARTS, count_ops, parse_script
from .steps import HANDSHAKE_OPS, Step, steps, trace_meta
from .types import (
    DECLARED_PATH_TOLERANCE_US,
    FAULT_KINDS,
    OPTIONS,
    Close,
    GetOpt,
    Link,
    LinkFault,
    Read,
    Repeat,
    Scenario,
    SetOpt,
    SetTiming,
    SideSpec,
    Sleep,
    Statement,
    Write,
    Writev,
    describe,
    outermost_loops,
    real_run_caveats,
    walk,
)

__all__ = [
    "DECLARED_PATH_TOLERANCE_US", "FAULT_KINDS", "HANDSHAKE_OPS", "MAX_FILE_BYTES",
    "MAX_NESTING", "MAX_STATEMENTS", "MAX_WRITEV_PARTS", "OPTIONS", "Close", "FileTooBig",
    "GetOpt", "Link", "LinkFault", "Read", "Repeat", "Scenario", "ScenarioError", "SetOpt",
    "SetTiming", "SideSpec", "Sleep", "Statement", "Step", "Write", "Writev", "clip",
    "count_ops", "describe", "load", "loads", "nesting_depth", "outermost_loops",
    "parse_script", "read_regular_file", "read_text", "real_run_caveats", "shown", "steps",
    "trace_meta", "walk",
]
