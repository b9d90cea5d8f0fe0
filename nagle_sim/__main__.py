"""The `nagle-sim` command line.

Owns: argument parsing, exit codes (0 ok, 1 the run failed: deadlock / limit / mismatch,
2 bad input) and wiring executors into views. Heavy modules (textual, realnet, exports)
are imported only by the subcommands that need them.
"""

from __future__ import annotations

import _signal  # the C module: `signal` builds its enums on import, a window of a millisecond
import gc
import os
import sys


def _interrupted_at_start_up(signum: int, frame: object) -> None:
    # Ctrl-C while the modules below still load: one line and exit 130, not a traceback
    # from deep inside an import. main() restores Python's handler once it is set up.
    os.write(2, b"error: interrupted\n")
    os._exit(130)


_STARTED_AS_COMMAND = __name__ == "__main__" or os.path.basename(sys.argv[0]) == "nagle-sim"
if _STARTED_AS_COMMAND and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_at_start_up)
_GC_PAUSED = _STARTED_AS_COMMAND and gc.isenabled()
if _GC_PAUSED:
    # the cyclic collector's passes over the objects of the ~200 modules start-up imports
    # are 3 % of start-up; main() turns it back on for every command but run and show
    # (`_keep_to_the_end`)
    gc.disable()

import argparse  # noqa: E402 - after the start-up Ctrl-C handler, on purpose
import contextlib  # noqa: E402
import math  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import TYPE_CHECKING, Any, NoReturn  # noqa: E402

from . import __version__  # noqa: E402

if TYPE_CHECKING:
    from .scenario import Scenario
    from .trace import Trace

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130
MAX_MESSAGE = 2000
"""Longest error message printed (user text inside messages is clipped already)."""


class CliError(Exception):
    """A one-line message for the user; the exit code travels with it."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def _err(message: str) -> None:
    """``error: message`` on one line of stderr. The message is plain text: user input in
    it (file names, keys, trace labels) is never read as rich markup."""
    one_line = " ".join(message.split())[:MAX_MESSAGE]
    try:
        from rich.console import Console
        from rich.text import Text
        Console(stderr=True, highlight=False).print(
            Text.assemble(("error:", "bold red"), " ", one_line), soft_wrap=True)
    except Exception:   # rich unusable: a plain line still tells the user what is wrong
        sys.stderr.write(f"error: {one_line}\n")


def load(path: str, overrides: Sequence[str]) -> Scenario:
    """`nagle_sim.scenario.load`, imported when a command reads a scenario: `--version`,
    `realnet cleanup` or `serve` never import the scenario and trace modules."""
    from .scenario import load as load_scenario
    return load_scenario(path, list(overrides))


def _load(args: argparse.Namespace) -> Scenario:
    params = [f"params.{p}" for p in getattr(args, "param", None) or []]
    return load(args.file, (getattr(args, "set", None) or []) + params)


def _bad_input(exc: Exception) -> bool:
    """A scenario or trace error: the user's input, one line and exit 2. Their modules are
    imported only by commands that read scenarios or traces, and an instance exists only
    if its module does."""
    scenario = sys.modules.get("nagle_sim.scenario")
    trace = sys.modules.get("nagle_sim.trace")
    return (scenario is not None and isinstance(exc, scenario.ScenarioError)) or (
        trace is not None and isinstance(exc, trace.TraceError))


def _run_trace(scenario: Scenario, args: argparse.Namespace | None = None) -> Trace:
    from .sim.driver import run_sim
    limits: dict[str, int] = {}
    record_limit, time_limit_s = (getattr(args, "record_limit", None),
                                  getattr(args, "time_limit", None))
    if record_limit is not None:
        limits["record_limit"] = record_limit
    if time_limit_s is not None:
        limits["time_limit"] = round(time_limit_s * 1_000_000)
    return run_sim(scenario, **limits)


def _emit(trace: Trace, args: argparse.Namespace) -> int:
    if getattr(args, "json", False):
        # streamed: a big run's JSON is never one string
        trace.write_json(sys.stdout, version=getattr(args, "trace_format", 2))
        sys.stdout.write("\n")
    else:
        from rich.console import Console

        from .explain.causes import wire_causes
        from .render.terminal import print_run
        console = Console(width=args.width) if getattr(args, "width", None) else Console()
        print_run(trace, console, limit=None if args.all else args.limit, detail=args.detail,
                  wire=wire_causes)
    from .trace import Outcome
    if trace.outcome is not Outcome.OK:
        if getattr(args, "json", False):
            _err(trace.message)
        return EXIT_FAILED
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    trace = _run_trace(_load(args), args)
    _keep_to_the_end(trace, args)
    return _emit(trace, args)


_KEPT: list[object] = []
"""What the `nagle-sim` process keeps until it ends (`_keep_to_the_end`)."""


def _keep_to_the_end(trace: Trace, args: argparse.Namespace) -> None:
    """The `nagle-sim` process of `run` and `show` (never `main` called with arguments, as
    tests do) prints one trace and ends, so the trace costs nothing more once printed:

    - the cyclic collector stays off from start-up to the end (`_GC_PAUSED`, `main`). The
      driver runs with it off anyway, so all of a run's million records would sit in the
      youngest generation, and the collections while the JSON is written would scan them
      all again: 2.7 % of the instructions of `run --json` on S3 NODELAY at 1,000
      messages. Reading a trace builds a million dicts and no cycles;
    - the trace is kept here, and `main` ends the process with `os._exit` once the output
      is flushed, so its objects are not freed one by one either (another 1.1 %). Nothing
      on these paths registers `atexit` work (`realnet run`, which can, is not one)."""
    if getattr(args, "ends_process", False):
        _KEPT.append(trace)


def _real_runner() -> Callable[[Scenario], Trace] | None:
    """realnet's executor when this host can run it (Linux, capture allowed), else None
    (the app then says why, from `_real_unavailable`, instead of running)."""
    if _real_unavailable() is not None:
        return None
    from realnet.runner import run_real
    return run_real


def _real_unavailable(remote: str | None = None) -> str | None:
    """Why a real-socket run cannot work here, asked before running anything (None: it
    can). Without CAP_NET_RAW the run would succeed with an empty capture that looks like
    a valid measurement ("segments 67 → 0")."""
    try:
        from realnet.core import RealnetError, capture_unavailable, check_platform
    except ImportError as exc:
        return f"real-socket runs need the realnet package ({exc})"
    try:
        check_platform()
    except RealnetError as exc:
        return str(exc)
    if remote:
        return None  # the serve process captures on its own host
    why = capture_unavailable()
    return f"real-socket runs cannot capture packets here: {why}" if why else None


def cmd_tui(args: argparse.Namespace) -> int:
    try:
        from .tui.app import run_app
        from .tui.classroom import Classroom, queued_runner
    except ImportError as exc:  # pragma: no cover - only when textual is missing
        raise CliError(f"the TUI is unavailable: {exc}") from None
    from .sim.driver import run_sim
    blocker = _real_unavailable() or ""
    run_real = _real_runner() if not blocker else None
    classroom = None
    if getattr(args, "classroom", False):  # started by `nagle-sim serve`, one per tab
        from pathlib import Path
        classroom = Classroom(allow_real=args.allow_real, real_timeout_s=args.real_timeout,
                              real_lock=Path(args.real_lock) if args.real_lock else None)
        if run_real is not None and args.allow_real:
            run_real = queued_runner(run_real, classroom)
        # one student's scenario may not take the class's memory: a tab's run stops at
        # CLASSROOM_RECORD_LIMIT records (~200 MB), and a superseded run is cancelled
        from functools import partial

        from .sim.driver import CLASSROOM_RECORD_LIMIT
        run_sim = partial(run_sim, record_limit=CLASSROOM_RECORD_LIMIT)
    return run_app(None if classroom else getattr(args, "file", None), run_sim=run_sim,
                   run_real=run_real, classroom=classroom, real_blocker=blocker)


def cmd_serve(args: argparse.Namespace) -> int:
    from .tui.serve import ServeOptions, is_loopback, new_token, serve
    if args.public_url and not args.public_url.startswith(("http://", "https://")):
        raise CliError(f"serve --public-url {args.public_url!r}: must start with http:// or "
                       "https://")
    token = args.token
    if token is None and not is_loopback(args.host):
        token = new_token()  # open to a network: never without a key
    options = ServeOptions(host=args.host, port=args.port, token=token,
                           max_sessions=args.max_sessions, idle_s=args.idle_minutes * 60,
                           allow_real=args.allow_real, real_timeout_s=args.real_timeout,
                           public_url=args.public_url,
                           warm=args.warm if args.warm is not None
                           else (1 if is_loopback(args.host) else args.max_sessions))
    try:
        serve(options)
    except OSError as exc:
        raise CliError(f"serve: cannot listen on {args.host}:{args.port}: "
                       f"{exc.strerror or exc}") from None
    return EXIT_OK


def _class_token(text: str) -> str:
    if not 8 <= len(text) <= 128 or not all(c.isascii() and (c.isalnum() or c in "-_")
                                            for c in text):
        raise argparse.ArgumentTypeError("use 8-128 letters, digits, '-' or '_'")
    return text


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}-{high}, got {value}")
        return value
    return parse


def cmd_lessons(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from .lessons import load_lessons
    console = Console()
    for lesson in load_lessons():
        console.print(Text.assemble((lesson.slug, "bold"), f"  {lesson.title}\n    "
                                    f"{lesson.summary}"))
    return EXIT_OK


def _real_trace(scenario: Scenario, remote: str | None = None,
                token: str | None = None) -> Trace:
    why = _real_unavailable(remote)
    if why is not None:
        raise CliError(why)
    try:
        from realnet.runner import run_real
    except ImportError as exc:
        raise CliError(f"realnet is unavailable: {exc}") from None
    return run_real(scenario, remote=remote, token=token)


def cmd_realnet_run(args: argparse.Namespace) -> int:
    return _emit(_real_trace(_load(args), args.remote, args.token), args)


def cmd_realnet_serve(args: argparse.Namespace) -> int:
    from realnet.remote import serve_forever
    return int(serve_forever(args.listen, token=args.token, no_auth=args.no_auth) or 0)


def cmd_realnet_cleanup(args: argparse.Namespace) -> int:
    from realnet.cleanup import remove_stale
    try:
        removed = remove_stale()
    except OSError as exc:
        raise CliError(f"realnet cleanup: {exc.strerror or exc} (run as root?)") from None
    print("\n".join(f"removed {name}" for name in removed) or "nothing to remove")
    return EXIT_OK


def _check_profile(name: str | None) -> None:
    from .model.config import PROFILES
    if name not in (None, "auto", "scenario") and name not in PROFILES:
        raise CliError(f"--profile {name!r}: use auto, scenario or one of "
                       + ", ".join(sorted(PROFILES)))


def cmd_compare(args: argparse.Namespace) -> int:
    """``compare SCENARIO`` (run both), ``compare SCENARIO REAL.json`` (the model against a
    saved real trace), ``compare MODEL.json REAL.json`` (two saved traces). Saved traces
    are checked before anything runs: the right source on each side, meta the comparison
    can use, and the same scenario (`compare_run.load_real`)."""
    from .compare_run import check_same_title, compare_cli, load_model, load_real
    _check_output(args.markdown)
    _check_output(args.csv)
    _check_profile(args.profile)
    args.model_trace = None
    args.real_trace = None
    if args.real is not None and args.remote:
        raise CliError("compare: --remote runs the kernel; a saved real trace "
                       f"({args.real}) needs no run")
    if _is_trace_file(args.file):
        if args.real is None:
            raise CliError(f"compare {args.file}: a saved model trace needs a saved real "
                           "trace to compare with: compare MODEL.json REAL.json")
        if args.set or args.param:
            raise CliError(f"{args.file}: a saved trace is compared as it is; --set and "
                           "--param need a scenario file")
        if args.profile not in (None, "auto"):
            raise CliError(f"{args.file}: a saved model trace ran with its own profiles; "
                           "--profile needs a scenario file (compare SCENARIO REAL.json)")
        args.model_trace = load_model(args.file)
        args.real_trace = load_real(args.real)
        check_same_title(args.model_trace, args.real_trace, args.real)
        scenario = None
    else:
        scenario = _load(args)
        if args.real is not None:     # bad input fails before the model runs
            args.real_trace = load_real(args.real, scenario)
    if args.real is None:
        why = _real_unavailable(args.remote)
        if why is not None:  # never "DISAGREE" against an empty capture
            raise CliError(f"compare: {why}")
    return compare_cli(scenario, args)


def cmd_validate(args: argparse.Namespace) -> int:
    from .compare_run import validate_cli, validate_random_cli
    from .randomscen import MAX_SEED
    _check_output(args.markdown)
    _check_profile(args.profile)
    if args.random is None and (args.seed is not None or args.keep is not None):
        raise CliError("validate: --seed and --keep go with --random N")
    if args.random is not None:
        args.seed = args.seed or 0
        if args.seed + args.random - 1 > MAX_SEED:
            raise CliError(f"validate: --seed {args.seed} with --random {args.random} runs "
                           f"past the last seed, {MAX_SEED}")
    if args.keep is not None:
        _check_keep_dir(args.keep)
    why = _real_unavailable(args.remote)
    if why is not None:
        raise CliError(f"validate: {why}")
    return validate_random_cli(args) if args.random is not None else validate_cli(args)


def _check_keep_dir(path: str) -> None:
    """``--keep DIR`` must be a directory we can write a scenario file into (tried now,
    not after a long run)."""
    import os
    import tempfile
    if not path or not os.path.isdir(path):
        raise CliError(f"validate: --keep {path!r}: not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".nagle-sim-check-"):
            pass
    except OSError as exc:
        raise CliError(f"validate: --keep {path!r}: cannot write there "
                       f"({exc.strerror or exc})") from None


def _random_count(text: str) -> int:
    from .compare_run import MAX_RANDOM
    value = _count(text)
    if not 1 <= value <= MAX_RANDOM:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 1 and {MAX_RANDOM}")
    return value


def _seed(text: str) -> int:
    from .randomscen import MAX_SEED
    if not (text.strip().isascii() and text.strip().isdigit()) or len(text.strip()) > 19:
        raise argparse.ArgumentTypeError(f"expected a whole number 0 to {MAX_SEED}, got "
                                         f"{text[:40]!r}")
    value = int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r} is above {MAX_SEED}")
    return value


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep_cli import run
    return run(args, _check_output)


def cmd_drill(args: argparse.Namespace) -> int:
    from .drill.cli import run
    return run(args)


def _is_trace_file(path: str) -> bool:
    return path.endswith(".json")


def cmd_show(args: argparse.Namespace) -> int:
    """Print a saved trace (simulated or real) as a ladder and summary."""
    from .trace import Trace
    trace = Trace.load(args.file)
    _keep_to_the_end(trace, args)
    return _emit(trace, args)


def cmd_export(args: argparse.Namespace) -> int:
    from .export import ExportError, check_targets, export_cli
    from .model.events import Side
    from .trace import Trace
    outputs = {"pcap": args.pcap, "svg": args.svg, "png": args.png, "tseq": args.tseq,
               "markdown": args.markdown, "csv": args.csv, "json": args.json_out}
    try:   # bad output paths fail before a slow run, not after it
        check_targets({fmt: p for fmt, p in outputs.items() if p is not None})
    except ExportError as exc:
        raise CliError(str(exc)) from None
    if _is_trace_file(args.file):
        if args.real or args.overlay_real or args.set:
            raise CliError(f"{args.file}: a saved trace is exported as it is; --real, "
                           "--overlay-real and --set need a scenario file")
        trace, overlay = Trace.load(args.file), None
    else:
        scenario = _load(args)
        trace = _real_trace(scenario) if args.real else _run_trace(scenario)
        overlay = _real_trace(scenario) if args.overlay_real and not args.real else None
    try:
        paths = export_cli(trace, **outputs, overlay=overlay, until_ms=args.until_ms,
                           linear=args.linear, sender=Side(args.sender),
                           png_scale=args.png_scale)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    if not paths:
        raise CliError("nothing to export: give at least one of --pcap --svg --png --tseq "
                       "--markdown --csv --json")
    for path in paths:
        print(f"wrote {path}")
    return EXIT_OK


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000000, got {value}")
    return value


MIN_WIDTH, MAX_WIDTH = 40, 1000
"""--width bounds: rich pads every ladder line to the width, so a width of a million
columns made a 321 MB printout and took 1.4 GB."""


def _width(text: str) -> int:
    value = _positive_int(text)
    if not MIN_WIDTH <= value <= MAX_WIDTH:
        raise argparse.ArgumentTypeError(f"expected {MIN_WIDTH} to {MAX_WIDTH} columns, "
                                         f"got {value}")
    return value


def _count(text: str) -> int:
    return 0 if text.strip() == "0" else _positive_int(text)


def _positive_float(limit: float) -> Callable[[str], float]:
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


def _scale(text: str) -> float:
    from .export import PNG_SCALE_RANGE
    low, high = PNG_SCALE_RANGE
    value = _positive_float(high)(text)
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {low:g} to {high:g}, got {text}")
    return value


def _check_output(path: str | None) -> None:
    """Fail before a slow run, not after it, when an output file cannot be written."""
    if not path:
        return
    from .export import ExportError, check_writable
    try:
        check_writable(path)
    except ExportError as exc:
        raise CliError(str(exc)) from None


DETAIL_LEVELS = ("wire", "normal", "all")
"""``--detail``'s choices: `nagle_sim.render.rows.DETAIL_LEVELS`, written out here so that
building the parser imports no renderer (tests/test_cli.py holds the two equal)."""


def _add_view_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the trace as JSON")
    p.add_argument("--trace-format", type=int, choices=(1, 2), default=2,
                   help="JSON trace format for --json: 2 (default, reason sentences once "
                   "in a table) or 1 (the sentence in every record, for older readers)")
    p.add_argument("--all", action="store_true", help="print every ladder row")
    p.add_argument("--limit", type=_count, default=200,
                   help="ladder rows to print (default 200; 0: summary only)")
    p.add_argument("--detail", choices=DETAIL_LEVELS, default="normal",
                   help="which decisions to show beside the segments")
    p.add_argument("--width", type=_width, metavar="COLUMNS",
                   help=f"terminal width to render for ({MIN_WIDTH} to {MAX_WIDTH})")


def _add_scenario(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="scenario file (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario key, e.g. client.nodelay=true (repeatable)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="set one of the scenario's [params], e.g. sleep=10ms (repeatable)")


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line error (``error: nagle-sim run: argument …``, exit
    2) instead of a usage block; ``--help`` still shows the usage.

    A subcommand's parser is filled lazily: ``fill`` adds its arguments the first time it
    parses or formats its help, so a command builds (and imports, e.g. ``explain``'s or
    ``sweep``'s option helpers) only its own options, not every subcommand's."""

    def __init__(self, *args: Any, fill: Callable[[argparse.ArgumentParser], None] | None
                 = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fill = fill

    def _filled(self) -> None:
        fill, self._fill = self._fill, None
        if fill is not None:
            fill(self)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        self._filled()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._filled()
        return super().format_usage()

    def format_help(self) -> str:
        self._filled()
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        _err(f"{self.prog}: {message} (see {self.prog} --help)")
        raise SystemExit(EXIT_BAD_INPUT)


def _add_remote_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--remote", metavar="[TOKEN@]HOST:PORT",
                   help="run the server side on a remote `nagle-sim realnet serve`")
    p.add_argument("--token", help="the serve's token (default $NAGLE_SIM_REALNET_TOKEN)")
    p.add_argument("--profile", metavar="NAME", default="auto",
                   help="the model's profile: auto (default: the version profile of each "
                   "host's kernel where the model has one), scenario (as written) or a "
                   "profile name for both sides")


# ---------------------------------------------------------------- each subcommand's options
MAX_RECORD_LIMIT = 10_000_000
"""``run --record-limit``'s ceiling: a record takes about 150-700 bytes while the run holds
its trace (docs/scenarios.md), so a run at this bound may need a few GB."""
MAX_TIME_LIMIT_S = 864_000.0
"""``run --time-limit``'s ceiling, ten simulated days (as a `sleep`'s): the record bound,
not simulated time, is what bounds a run's work."""


def _time_limit(text: str) -> float:
    """``--time-limit``: positive, at most `MAX_TIME_LIMIT_S`, and at least one µs (the
    model's clock ticks in µs: a smaller limit would be 0 and stop every run at once)."""
    value = _positive_float(MAX_TIME_LIMIT_S)(text)
    if value < 1e-6:
        raise argparse.ArgumentTypeError(f"expected at least 0.000001 (one simulated µs), "
                                         f"got {text}")
    return value


def _fill_run(p: argparse.ArgumentParser) -> None:
    _add_scenario(p)
    _add_view_options(p)
    p.add_argument("--record-limit", type=_bounded_int(1, MAX_RECORD_LIMIT), metavar="N",
                   help="stop the run (outcome limit, exit 1) once its trace holds N records: "
                   "segments, app calls and model events (default 2000000, at most "
                   f"{MAX_RECORD_LIMIT}; each takes about 150-700 bytes of memory)")
    p.add_argument("--time-limit", type=_time_limit, metavar="S",
                   help="stop the run (outcome limit, exit 1) after S simulated seconds "
                   f"(default 3600, at most {MAX_TIME_LIMIT_S:.0f})")
    p.set_defaults(func=cmd_run)


def _fill_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="trace file (nagle-sim-trace/1 or /2 JSON)")
    _add_view_options(p)
    p.set_defaults(func=cmd_show)


def _fill_tui(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?")
    # set by `serve` for each browser tab (hidden: not for people)
    p.add_argument("--classroom", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--allow-real", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--real-lock", help=argparse.SUPPRESS)
    p.add_argument("--real-timeout", type=_positive_float(600.0), default=20.0,
                   help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_tui)


def _fill_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; "
                   "0.0.0.0 opens it to the class, with a token)")
    p.add_argument("--port", type=_bounded_int(1, 65535), default=8000)
    p.add_argument("--token", type=_class_token,
                   help="the class's key in the URL (default: random when not on loopback)")
    p.add_argument("--max-sessions", type=_bounded_int(1, 500), default=40,
                   help="browser sessions at once (default 40); more get a 'class is full' "
                   "page")
    p.add_argument("--idle-minutes", type=_positive_float(24 * 60.0), default=20.0,
                   help="end a session after this long without input (default 20)")
    p.add_argument("--allow-real", action="store_true",
                   help="let students run scenarios on real sockets (one at a time)")
    p.add_argument("--real-timeout", type=_positive_float(600.0), default=20.0, metavar="S",
                   help="wall-time bound of one real-socket run (default 20 s)")
    p.add_argument("--warm", type=_bounded_int(0, 500), metavar="N",
                   help="app processes started ahead of students (default: --max-sessions "
                   "when open to a class, 1 on loopback; each ~50 MiB)")
    p.add_argument("--public-url", metavar="URL",
                   help="the base URL students use, if not http://<this host>:<port>")
    p.set_defaults(func=cmd_serve)


def _fill_lessons(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_lessons)


def _fill_export(p: argparse.ArgumentParser) -> None:
    _add_scenario(p)
    p.add_argument("--real", action="store_true", help="export a real-socket run instead")
    p.add_argument("--overlay-real", action="store_true",
                   help="draw a real-socket run over the simulated ladder (SVG/PNG)")
    for name in ("pcap", "svg", "png", "tseq", "markdown", "csv"):
        p.add_argument(f"--{name}", metavar="PATH")
    p.add_argument("--json", dest="json_out", metavar="PATH")
    p.add_argument("--until-ms", type=_positive_float(1e9), metavar="MS",
                   help="draw pictures only up to this time (long runs are tall)")
    p.add_argument("--linear", action="store_true",
                   help="draw time to scale instead of compressing quiet gaps")
    p.add_argument("--sender", choices=("client", "server"), default="client",
                   help="whose data the time-sequence plot shows (default client)")
    p.add_argument("--png-scale", type=_scale, default=1.0, metavar="X",
                   help="scale PNG pictures, 0.25 to 8 (default 1.0)")
    p.set_defaults(func=cmd_export)


def _fill_compare(p: argparse.ArgumentParser) -> None:
    _add_scenario(p)
    p.add_argument("real", nargs="?", metavar="REAL.json",
                   help="a saved real trace to compare with instead of running the kernel "
                   "(FILE may then be a saved model trace too)")
    _add_remote_options(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument("--csv", metavar="PATH")
    p.set_defaults(func=cmd_compare)


def _fill_validate(p: argparse.ArgumentParser) -> None:
    _add_remote_options(p)
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument("--random", type=_random_count, metavar="N",
                   help="instead of the lessons, N generated request/response scenarios "
                   "(Nagle, NODELAY, CORK, MSG_MORE, writev, QUICKACK, think time, link "
                   "delay and rate)")
    p.add_argument("--seed", type=_seed, metavar="S",
                   help="the first random scenario's seed (default 0; the same seed is the "
                   "same scenario everywhere)")
    p.add_argument("--keep", metavar="DIR",
                   help="write each random scenario that disagrees to DIR/random-SEED.toml")
    p.set_defaults(func=cmd_validate)


def _fill_explain(p: argparse.ArgumentParser) -> None:
    from .explain.cli import add_arguments
    add_arguments(p)


def _fill_sweep(p: argparse.ArgumentParser) -> None:
    from .sweep_cli import add_arguments
    add_arguments(p, _positive_int)
    p.set_defaults(func=cmd_sweep)


def _fill_drill(p: argparse.ArgumentParser) -> None:
    from .drill.cli import add_arguments
    add_arguments(p)
    p.set_defaults(func=cmd_drill)


def _fill_realnet_run(p: argparse.ArgumentParser) -> None:
    _add_scenario(p)
    _add_view_options(p)
    p.add_argument("--remote", metavar="[TOKEN@]HOST:PORT",
                   help="run the server side on a remote `nagle-sim realnet serve`")
    p.add_argument("--token", help="the serve's token (default $NAGLE_SIM_REALNET_TOKEN)")
    p.set_defaults(func=cmd_realnet_run)


def _fill_realnet_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default="127.0.0.1:7070", metavar="HOST:PORT")
    p.add_argument("--token", help="shared secret clients must know (default "
                   "$NAGLE_SIM_REALNET_TOKEN, else a random one, printed)")
    p.add_argument("--no-auth", action="store_true",
                   help="no token (allowed on a loopback address only)")
    p.set_defaults(func=cmd_realnet_serve)


def _fill_realnet_cleanup(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_realnet_cleanup)


def _fill_realnet(real: argparse.ArgumentParser) -> None:
    rsub = real.add_subparsers(dest="realnet_command", required=True)
    rsub.add_parser("run", help="run a scenario on real sockets and print the real ladder",
                    fill=_fill_realnet_run)
    rsub.add_parser("serve", help="serve the server side of scenarios to remote clients",
                    fill=_fill_realnet_serve)
    rsub.add_parser("cleanup", help="remove namespaces, relays and temp files of dead runs",
                    fill=_fill_realnet_cleanup)


def build_parser() -> argparse.ArgumentParser:
    """The whole CLI. Each subcommand's parser holds its name, help and description at
    once, and its options only when it is used (`_Parser`'s ``fill``)."""
    parser = _Parser(
        prog="nagle-sim", description="See why small TCP messages wait: Nagle, delayed ACK, "
        "CORK, QUICKACK — simulated, and measured on real sockets.")
    parser.add_argument("--version", action="version", version=f"nagle-sim {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="simulate a scenario and print its ladder and summary",
                   fill=_fill_run)
    sub.add_parser("show", help="print a saved trace (from --json) as a ladder and summary",
                   fill=_fill_show)
    sub.add_parser("tui", help="open the teaching app (on a scenario file if given)",
                   fill=_fill_tui)
    sub.add_parser("serve", help="serve the teaching app to browsers (classroom mode)",
                   description="Serve the teaching app to browsers. Each tab runs its own "
                   "app in classroom mode: no server files, exports as downloads, no "
                   "real-socket runs unless --allow-real.", fill=_fill_serve)
    sub.add_parser("lessons", help="list the lessons", fill=_fill_lessons)
    sub.add_parser("export", help="export a run as pcap / SVG / PNG / tables",
                   epilog="FILE may also be a saved trace (.json), exported as it is.",
                   fill=_fill_export)
    sub.add_parser("compare", help="run on the model and on real sockets; match segments",
                   fill=_fill_compare)
    sub.add_parser("validate", help="compare every lesson (or random scenarios) with "
                   "the real kernel", fill=_fill_validate)
    sub.add_parser("explain", help="open a real capture (pcap/pcapng) and explain every "
                   "stall", fill=_fill_explain)
    sub.add_parser("sweep", help="run a scenario over a grid of settings; table and plot",
                   fill=_fill_sweep)
    sub.add_parser("drill", help="play packetdrill scripts against the model",
                   fill=_fill_drill)
    sub.add_parser("realnet", help="run scenarios over real kernel sockets",
                   fill=_fill_realnet)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # `_signal`, not `signal`: that one builds its enums on import (a millisecond or two)
    if _signal.getsignal(_signal.SIGINT) is _interrupted_at_start_up:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)   # set up: normal Ctrl-C
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            args.file = None
            args.func = cmd_tui
        # run and show print one trace and end the process (`_keep_to_the_end`)
        args.ends_process = (argv is None and _STARTED_AS_COMMAND
                             and args.func in (cmd_run, cmd_show))
        if _GC_PAUSED and not args.ends_process:
            gc.enable()     # long-lived commands (the app, serve, sweeps) need it
        code = int(args.func(args))
        sys.stdout.flush()      # a full disk or closed pipe shows here, not at exit
        if _KEPT:
            sys.stderr.flush()
            os._exit(code)      # skip freeing what `_keep_to_the_end` kept
        return code
    except CliError as exc:
        _err(str(exc))
        return exc.code
    except ValueError as exc:   # ScenarioError and TraceError are ValueErrors
        if not _bad_input(exc):
            raise
        _err(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except RuntimeError as exc:
        # Ctrl-C while a module is still being imported can land in a class body's
        # __set_name__ (every dataclass field), and Python 3.11 wraps it in a RuntimeError
        if isinstance(exc.__cause__, KeyboardInterrupt):
            _err("interrupted")
            return EXIT_INTERRUPTED
        raise
    except BrokenPipeError:     # `| head`: the reader has what it wanted
        _stdout_gone()
        return EXIT_OK
    except OSError as exc:      # an output that cannot be written (/dev/full, /proc/...)
        where = exc.filename if exc.filename is not None else "standard output"
        _err(f"cannot write {where}: {exc.strerror or exc}")
        _stdout_gone()
        return EXIT_BAD_INPUT


def _stdout_gone() -> None:
    """Point stdout at /dev/null if it can no longer be written, so the interpreter's
    final flush of what is still buffered adds no second error."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())



