"""Model vs kernel: a simulated trace matched against a real one, and a verdict.

The package's modules, each owning one concern:

- `match`: which real segment is which model one (data by byte range, pure ACKs by ACK
  number, the rest in order), a row of the comparison (`Match`);
- `timing`: packetdrill's tolerance on each interval, timer slack, timing from a call;
- `verdict`: `compare` and its `Comparison` (stalls and iterations paired, problems and
  notes, the verdict);
- `hosts`: the real hosts' facts against the model's profiles;
- `saved`: saved traces checked before a comparison uses them;
- `align`: what the model borrows from the real run (jiffy phase, measured sleeps,
  write/segment ties) and `aligned_model_run`;
- `tables`: the comparison's rows and Markdown report;
- `run`: running both executors (`run_both`, `model_against`), each passed in as a runner;
- `layers`: the verdict in two layers, decisions (judged against the host-timed model
  run: each call as late as the real host made it) and timing (each difference
  attributed to the host, a timer or the path): `two_layers`, `host_delays`;
- `reasons`: the model's decisions against the kernel's own (``"by": "kernel"`` events a
  real run records with watch): `compare_reasons`;
- `validate`: the loops of ``nagle-sim validate`` (every lesson, random scenarios);
  imported by the command line, not by this package.

Pure but for `run` and `validate`, which run what they are handed: no sockets, no
simulator, no terminal (the terminal report is `nagle_sim.render.compare`'s). Must not
import simpy, textual, rich or an executor.
"""

from .align import (
    WRITE_TIE_ROUNDS,
    WRITE_TIE_US,
    WriteTie,
    aligned_model_run,
    first_write_tie,
    measured_jiffy_phase,
    measured_sleep_runs,
    with_jiffy_phase,
    with_measured_sleeps,
)
from .hosts import host_differences, profiles_of, version_profile
from .layers import Layer, Layers, host_delays, two_layers
from .match import Match, flags_class, without_kernel_events
from .reasons import ReasonComparison, ReasonPair, compare_reasons, kernel_decisions
from .run import (
    Both,
    Profile,
    ProfileChoice,
    model_against,
    model_scenario,
    not_comparable,
    profile_choice,
    run_both,
)
from .saved import check_meta, check_same_scenario, check_same_title, load_model, load_real
from .tables import comparison_markdown, iteration_rows, match_rows, stall_rows
from .timing import TOLERANCE_FLOOR, TOLERANCE_FRACTION, TOLERANCE_TEXT, tolerance
from .verdict import Comparison, IterationPair, StallPair, compare

__all__ = [
    "TOLERANCE_FLOOR", "TOLERANCE_FRACTION", "TOLERANCE_TEXT", "WRITE_TIE_ROUNDS",
    "WRITE_TIE_US", "Both", "Comparison", "IterationPair", "Layer", "Layers", "Match",
    "Profile", "ProfileChoice", "ReasonComparison", "ReasonPair", "StallPair",
    "WriteTie", "aligned_model_run", "check_meta", "check_same_scenario", "check_same_title",
    "compare", "compare_reasons", "comparison_markdown", "first_write_tie", "flags_class",
    "host_delays", "host_differences", "iteration_rows", "kernel_decisions", "load_model",
    "load_real", "match_rows", "measured_jiffy_phase", "measured_sleep_runs",
    "model_against", "model_scenario", "not_comparable", "profile_choice", "profiles_of",
    "run_both", "stall_rows", "tolerance", "two_layers", "version_profile",
    "with_jiffy_phase", "with_measured_sleeps", "without_kernel_events",
]
