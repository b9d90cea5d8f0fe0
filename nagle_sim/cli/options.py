"""Option types and option groups every command shares, in one place.

Owns: the argparse ``type=`` functions (each refuses bad text with one short reason that
`nagle_sim.cli.parser.Parser` prints as ``error: nagle-sim CMD: argument --opt: …``, exit
2), the option groups several commands take (a scenario with ``--set``/``--param``, the
ladder view's options, a remote serve), their bounds, and the checks of an option's value
that must fail before a slow run (an output path that cannot be written).

Building a parser imports nothing heavy: a type that needs a bound from elsewhere
(`nagle_sim.export`, `nagle_sim.scenario.generator`) imports it when an option is parsed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:
    from ..scenario import Scenario


# ---------------------------------------------------------------- numbers
def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}-{high}, got {value}")
        return value
    return parse


def positive_int(text: str) -> int:
    """A whole number from 1 to a million (counts, jobs, repeats)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000000, got {value}")
    return value


def count(text: str) -> int:
    """`positive_int`, or 0."""
    return 0 if text.strip() == "0" else positive_int(text)


def positive_float(limit: float) -> Callable[[str], float]:
    """A finite number above 0 and at most ``limit``."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"expected a number above 0 and at most "
                                             f"{limit:g}, got {text}")
        return value
    return parse


MIN_WIDTH, MAX_WIDTH = 40, 1000
"""--width bounds: rich pads every ladder line to the width, so a width of a million
columns made a 321 MB printout and took 1.4 GB."""


def width(text: str) -> int:
    """``--width``: terminal columns, `MIN_WIDTH` to `MAX_WIDTH`."""
    value = positive_int(text)
    if not MIN_WIDTH <= value <= MAX_WIDTH:
        raise argparse.ArgumentTypeError(f"expected {MIN_WIDTH} to {MAX_WIDTH} columns, "
                                         f"got {value}")
    return value


MAX_RECORD_LIMIT = 10_000_000
"""``run --record-limit``'s ceiling: a record takes about 150-700 bytes while the run holds
its trace (docs/scenarios.md), so a run at this bound may need a few GB."""
MAX_TIME_LIMIT_S = 864_000.0
"""``run --time-limit``'s ceiling, ten simulated days (as a `sleep`'s): the record bound,
not simulated time, is what bounds a run's work."""


def time_limit(text: str) -> float:
    """``--time-limit``: positive, at most `MAX_TIME_LIMIT_S`, and at least one µs (the
    model's clock ticks in µs: a smaller limit would be 0 and stop every run at once)."""
    value = positive_float(MAX_TIME_LIMIT_S)(text)
    if value < 1e-6:
        raise argparse.ArgumentTypeError(f"expected at least 0.000001 (one simulated µs), "
                                         f"got {text}")
    return value


def png_scale(text: str) -> float:
    """``--png-scale``: `nagle_sim.export.PNG_SCALE_RANGE`."""
    from ..export import PNG_SCALE_RANGE
    low, high = PNG_SCALE_RANGE
    value = positive_float(high)(text)
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {low:g} to {high:g}, got {text}")
    return value


def class_token(text: str) -> str:
    """``serve --token``: 8-128 URL-safe characters."""
    if not 8 <= len(text) <= 128 or not all(c.isascii() and (c.isalnum() or c in "-_")
                                            for c in text):
        raise argparse.ArgumentTypeError("use 8-128 letters, digits, '-' or '_'")
    return text


def seed(text: str) -> int:
    """``validate --seed``: 0 to `nagle_sim.scenario.generator.MAX_SEED`."""
    from ..scenario.generator import MAX_SEED
    if not (text.strip().isascii() and text.strip().isdigit()) or len(text.strip()) > 19:
        raise argparse.ArgumentTypeError(f"expected a whole number 0 to {MAX_SEED}, got "
                                         f"{text[:40]!r}")
    value = int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r} is above {MAX_SEED}")
    return value


def random_count(text: str) -> int:
    """``validate --random``: 1 to `nagle_sim.compare.validate.MAX_RANDOM`."""
    from ..compare.validate import MAX_RANDOM
    value = count(text)
    if not 1 <= value <= MAX_RANDOM:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 1 and {MAX_RANDOM}")
    return value


def port(text: str) -> int:
    """``explain --port``: a TCP port."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {text!r}")
    return int(text)


def connection(text: str) -> int:
    """``explain --conn``: a connection's number in the capture, from 1."""
    if not text.isdigit() or not 0 < int(text) <= 10_000_000:
        raise argparse.ArgumentTypeError(f"expected a connection number (1, 2, …), got "
                                         f"{text!r}")
    return int(text)


def capture_ms(text: str) -> float:
    """``explain --until-ms``: milliseconds into a capture, at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    if not 0 < value <= 86_400_000:
        raise argparse.ArgumentTypeError(f"expected 0 < MS <= 86400000, got {text!r}")
    return value


def microseconds(text: str) -> int:
    """``drill --tolerance-usecs``: a whole number of µs (up to nine digits)."""
    if not text.isdigit() or len(text) > 9:
        raise argparse.ArgumentTypeError(f"expected a whole number of µs, got {text!r}")
    return int(text)


def percent(text: str) -> float:
    """``drill --tolerance-percent``: 0 to 100."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected 0 to 100, got {text}")
    return value


# ---------------------------------------------------------------- option groups
DETAIL_LEVELS = ("wire", "normal", "all")
"""``--detail``'s choices: `nagle_sim.trace.rows.DETAIL_LEVELS`, written out here so that
building the parser imports no renderer (tests/test_cli.py holds the two equal)."""


def add_scenario(p: argparse.ArgumentParser) -> None:
    """A scenario file and its ``--set`` / ``--param`` overrides (`load_scenario`)."""
    p.add_argument("file", help="scenario file (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario key, e.g. client.nodelay=true (repeatable)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="set one of the scenario's [params], e.g. sleep=10ms (repeatable)")


def add_view_options(p: argparse.ArgumentParser) -> None:
    """How a trace is printed: JSON, or the terminal ladder and summary."""
    p.add_argument("--json", action="store_true", help="print the trace as JSON")
    p.add_argument("--trace-format", type=int, choices=(1, 2), default=2,
                   help="JSON trace format for --json: 2 (default, reason sentences once "
                   "in a table) or 1 (the sentence in every record, for older readers)")
    p.add_argument("--all", action="store_true", help="print every ladder row")
    p.add_argument("--limit", type=count, default=200,
                   help="ladder rows to print (default 200; 0: summary only)")
    p.add_argument("--detail", choices=DETAIL_LEVELS, default="normal",
                   help="which decisions to show beside the segments")
    p.add_argument("--width", type=width, metavar="COLUMNS",
                   help=f"terminal width to render for ({MIN_WIDTH} to {MAX_WIDTH})")


def add_remote(p: argparse.ArgumentParser) -> None:
    """A remote `nagle-sim realnet serve` for the server side, and its token."""
    p.add_argument("--remote", metavar="[TOKEN@]HOST:PORT",
                   help="run the server side on a remote `nagle-sim realnet serve`")
    p.add_argument("--token", help="the serve's token (default $NAGLE_SIM_REALNET_TOKEN)")


def add_remote_and_profile(p: argparse.ArgumentParser) -> None:
    """`add_remote`, and the model's profile for comparing with the kernel."""
    add_remote(p)
    p.add_argument("--profile", metavar="NAME", default="auto",
                   help="the model's profile: auto (default: the version profile of each "
                   "host's kernel where the model has one), scenario (as written) or a "
                   "profile name for both sides")


# ---------------------------------------------------------------- values checked early
def load_scenario(args: argparse.Namespace) -> Scenario:
    """The scenario of ``args.file`` with its ``--set`` and ``--param`` overrides. The
    scenario modules are imported here, when a command reads one: ``--version``,
    ``realnet cleanup`` or ``serve`` never import them."""
    from ..scenario import load
    params = [f"params.{p}" for p in getattr(args, "param", None) or []]
    overrides: Sequence[str] = (getattr(args, "set", None) or []) + params
    return load(args.file, list(overrides))


def is_trace_file(path: str) -> bool:
    """A saved trace (``.json``) rather than a scenario."""
    return path.endswith(".json")


def check_output(path: str | None) -> None:
    """Fail before a slow run, not after it, when an output file cannot be written
    (`nagle_sim.export.ExportError`, a `UserError`)."""
    if not path:
        return
    from ..export import check_writable
    check_writable(path)


def check_profile(name: str | None) -> None:
    """``--profile``: auto, scenario or one of the model's profiles."""
    from ..model.config import PROFILES
    if name not in (None, "auto", "scenario") and name not in PROFILES:
        raise UserError(f"--profile {name!r}: use auto, scenario or one of "
                        + ", ".join(sorted(PROFILES)))
