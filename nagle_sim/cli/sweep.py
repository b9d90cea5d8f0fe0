"""``nagle-sim sweep``: run a grid, print its table, write CSV / Markdown / plots.

Owns: the sweep command's options and orchestration (a progress bar with ETA on stderr,
the files asked for). The grid, metrics and runs are `nagle_sim.sweep`'s; the terminal
table is `nagle_sim.render.sweep`'s, plots `nagle_sim.export.plot`'s; both runners come
from `nagle_sim.runners`. Must not import textual or simpy.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..export.scene import Scene, SceneTooBig
from ..render.sweep import print_sweep
from ..scenario import ScenarioError, read_text
from ..sweep import Axis, SweepError, SweepResult, parse_metrics, parse_vary, table
from ..sweep.run import run_sweep
from . import options

if TYPE_CHECKING:       # imported where used: building the CLI parser must stay light
    from ..lessons import LessonSweep


def _lesson_sweep(path: str, text: str) -> LessonSweep | None:
    """The ``[lesson.sweep]`` a lesson's scenario declares (validated as the app does), or
    None for a scenario without one."""
    import tomllib

    from ..lessons import parse_sweep  # here: building sweep's parser must stay light

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None  # run_sweep reports the syntax error with its line
    lesson = raw.get("lesson")
    if not isinstance(lesson, dict) or "sweep" not in lesson:
        return None
    try:
        return parse_sweep(Path(path), lesson["sweep"], Path(path).parent, text)
    except ScenarioError as exc:
        raise SweepError(str(exc)) from None


def _cell_text(v: object) -> str | int | float | None:
    """A table value for CSV/Markdown: booleans as TOML writes them, None as empty."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float | str):
        return v
    return None if v is None else str(v)


def cmd_sweep(args: argparse.Namespace) -> int:
    """The command: check every option and output path, run the grid (a progress bar on
    a terminal's stderr), print the table and write the files asked for."""
    named = _check_outputs(args)
    axes = [parse_vary(v) for v in args.vary or []]
    metrics = parse_metrics(args.metric or [])
    text, where, title = read_text(args.file), args.file, args.title
    if not axes and (declared := _lesson_sweep(args.file, text)) is not None:
        # a lesson's scenario with no --vary: its own grid, as `w` shows it in the app
        axes, text, where = list(declared.axes), declared.text, declared.where
        if not args.metric:
            metrics = declared.metrics
        title = title or declared.title or None
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"the lesson's sweep ([lesson.sweep] in {args.file}): "
            + " × ".join(f"{a.key}={','.join(a.values)}" for a in axes)
            + "; give --vary for another grid", markup=False)
    if title is None:
        # the plot's heading: the scenario's own title, not its file path (issue 31.8)
        title = _scenario_title(text)
    _check_grid(args, axes, plotted=bool(named["--png"] or named["--svg"]))
    from ..runners import real, simulate
    runner = real(args.remote, getattr(args, "token", None)) if args.real else None
    err = Console(stderr=True, highlight=False)
    with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as progress:
        task = progress.add_task("sweep", total=None)

        def on_cell(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)
        result = run_sweep(text, where, axes, metrics, model_runner=simulate, jobs=args.jobs,
                           real=args.real, repeat=args.repeat, real_runner=runner,
                           on_cell=on_cell,
                           base=[*(args.set or []),
                                 *(f"params.{p}" for p in args.param or [])])
    _write_results(args, result, title, err)
    return 0


def _check_outputs(args: argparse.Namespace) -> dict[str, str | None]:
    """Every output path (named, of the right kind, distinct, writable) and ``--set`` /
    ``--param`` items' form, before anything runs. Returns the outputs by option."""
    named = {"--csv": args.csv, "--markdown-out": args.markdown_out, "--png": args.png,
             "--svg": args.svg}
    for option, path in named.items():
        if path is not None and not path.strip():
            raise SweepError(f"{option}: empty file name")
    for option, suffix in (("--png", ".png"), ("--svg", ".svg")):
        if named[option] and not named[option].lower().endswith(suffix):
            raise SweepError(f"{option} {named[option]}: expected a file name ending in "
                             f"{suffix}")
    for option, items, form in (("--set", args.set, "KEY=VALUE"),
                                ("--param", args.param, "NAME=VALUE")):
        for item in items or []:
            if "=" not in item:
                raise SweepError(f"{option} {item!r}: use {form}")
    outputs = [p for p in named.values() if p]
    if len({str(Path(p).resolve()) for p in outputs}) != len(outputs):
        raise SweepError("two outputs name the same file")
    for path in outputs:
        options.check_output(path)
    return named


def _check_grid(args: argparse.Namespace, axes: list[Axis], plotted: bool) -> None:
    """The grid against the other options: no key both varied and fixed, a plot whose
    lines can be told apart, real-run options only with ``--real``."""
    fixed = {item.partition("=")[0].strip() for item in args.set or []}
    fixed |= {"params." + item.partition("=")[0].strip() for item in args.param or []}
    for axis in axes:
        key = axis.key if "." in axis.key else f"params.{axis.key}"
        if key in fixed:
            raise SweepError(f"--vary {axis.key}: also fixed by --set/--param; give it once")
    if plotted:
        from ..export.plot import MAX_SERIES
        series = math.prod(len(a.values) for a in axes[1:])
        if series > MAX_SERIES:
            raise SweepError(f"--png/--svg: {series} lines per panel (the keys after the "
                             f"first) cannot be told apart; at most {MAX_SERIES}")
    if (args.remote or args.repeat != 1 or getattr(args, "token", None)) and not args.real:
        raise SweepError("--remote, --token and --repeat go with --real")


def _scenario_title(text: str) -> str | None:
    """The scenario's ``title``, when its text is TOML that has one (the run reports a
    bad file itself)."""
    import tomllib
    try:
        value = tomllib.loads(text).get("title")
    except tomllib.TOMLDecodeError:
        return None
    return value.strip() or None if isinstance(value, str) else None


def _write_results(args: argparse.Namespace, result: SweepResult, title: str | None,
                   err: Console) -> None:
    """The table on stdout (rich, or ``--markdown``), then the files asked for."""
    headers, rows = table(result)
    if args.markdown:
        from ..export.tables import render_markdown
        sys.stdout.write(render_markdown(headers, [[_cell_text(v) for v in r] for r in rows]))
    else:
        print_sweep(result, Console(highlight=False))
    if args.csv:
        from ..export.tables import render_csv
        Path(args.csv).write_text(render_csv(headers, [[_cell_text(v) for v in r]
                                                       for r in rows]), "utf-8")
        err.print(f"wrote {escape(args.csv)}", markup=True)
    if args.markdown_out:
        from ..export.tables import render_markdown
        Path(args.markdown_out).write_text(
            render_markdown(headers, [[_cell_text(v) for v in r] for r in rows]), "utf-8")
        err.print(f"wrote {escape(args.markdown_out)}", markup=True)
    if args.png or args.svg:
        from ..export.plot import build_plot
        scene = build_plot(result, title=title)
        try:
            _write_plot(scene, args.svg, args.png, err)
        except SceneTooBig as exc:
            raise SweepError(f"the plot is too big: {exc}") from None


def _write_plot(scene: Scene, svg: str | None, png: str | None, err: Console) -> None:
    if svg:
        from ..export.svg import to_svg
        Path(svg).write_text(to_svg(scene), "utf-8")
        err.print(f"wrote {escape(svg)}", markup=True)
    if png:
        from ..export.png import write_png
        write_png(scene, png)
        err.print(f"wrote {escape(png)}", markup=True)


def fill_sweep(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="scenario file (TOML)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a scenario key in every cell (repeatable)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="set one of the scenario's [params] in every cell (repeatable)")
    p.add_argument("--vary", action="append", metavar="KEY=V1,V2,…",
                   help="a key to vary: a scenario parameter (sleep=0ms,5ms) or any --set key "
                   "(client.nodelay=false,true); repeatable: the grid is the product")
    p.add_argument("--metric", action="append", metavar="NAME",
                   help="a metric to report (repeatable or comma-separated; see "
                   "docs/sweep.md; default latency_p50_ms, segments_client, stalls)")
    p.add_argument("--real", action="store_true",
                   help="also run every cell on real kernel sockets (one at a time)")
    p.add_argument("--remote", metavar="[TOKEN@]HOST:PORT",
                   help="with --real: run the server side on a `nagle-sim realnet serve`")
    p.add_argument("--token", help="with --remote: the serve's token (default "
                   "$NAGLE_SIM_REALNET_TOKEN)")
    p.add_argument("--repeat", type=options.positive_int, default=1, metavar="N",
                   help="with --real: real runs per cell (mean and spread are reported)")
    p.add_argument("--jobs", type=options.positive_int, metavar="N",
                   help="processes for simulated cells (default: one per core)")
    p.add_argument("--csv", metavar="PATH", help="write the table as CSV")
    p.add_argument("--markdown", action="store_true",
                   help="print the table as Markdown instead of a terminal table")
    p.add_argument("--markdown-out", metavar="PATH", help="write the table as Markdown")
    p.add_argument("--png", metavar="PATH", help="plot the metrics (PNG)")
    p.add_argument("--svg", metavar="PATH", help="plot the metrics (SVG)")
    p.add_argument("--title", help="the plot's title (default: the scenario's title)")
    p.set_defaults(func=cmd_sweep)
