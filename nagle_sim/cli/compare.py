"""``nagle-sim compare`` and ``nagle-sim validate``: the model against the kernel.

Owns: the two commands' options, the checks that must fail before anything runs (the
saved traces on each side, ``--profile``, ``--seed``/``--keep``, whether this host can
run the kernel side at all: never "DISAGREE" against an empty capture), what they print
and write, and their exit codes (1 when the kernel disagrees). Running and judging are
`nagle_sim.compare`'s, the terminal report `nagle_sim.render.compare`'s, both runners
come from `nagle_sim.runners`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from . import options

if TYPE_CHECKING:
    from ..compare import Both, Comparison
    from ..scenario import Scenario
    from ..trace import Runner

    BothRunner = Callable[[Scenario], Both]


def cmd_compare(args: argparse.Namespace) -> int:
    """``compare SCENARIO`` (run both), ``compare SCENARIO REAL.json`` (the model against a
    saved real trace), ``compare MODEL.json REAL.json`` (two saved traces). Saved traces
    are checked before anything runs: the right source on each side, meta the comparison
    can use, and the same scenario (`nagle_sim.compare.load_real`)."""
    from .. import runners
    from ..compare import ProfileChoice, check_same_title, load_model, load_real, profile_choice
    options.check_output(args.markdown)
    options.check_output(args.csv)
    args.profile = profile_choice(args.profile)
    args.model_trace = None
    args.real_trace = None
    if args.real is not None and args.remote:
        raise UserError("compare: --remote runs the kernel; a saved real trace "
                        f"({args.real}) needs no run")
    if options.is_trace_file(args.file):
        if args.real is None:
            raise UserError(f"compare {args.file}: a saved model trace needs a saved real "
                            "trace to compare with: compare MODEL.json REAL.json")
        if args.set or args.param:
            raise UserError(f"{args.file}: a saved trace is compared as it is; --set and "
                            "--param need a scenario file")
        if args.profile is not ProfileChoice.AUTO:
            raise UserError(f"{args.file}: a saved model trace ran with its own profiles; "
                            "--profile needs a scenario file (compare SCENARIO REAL.json)")
        args.model_trace = load_model(args.file)
        args.real_trace = load_real(args.real)
        check_same_title(args.model_trace, args.real_trace, args.real)
        scenario = None
    else:
        scenario = options.load_scenario(args)
        if args.real is not None:     # bad input fails before the model runs
            args.real_trace = load_real(args.real, scenario)
    run_real = None
    if args.real is None:
        why = runners.real_unavailable(args.remote)
        if why is not None:  # never "DISAGREE" against an empty capture
            raise UserError(f"compare: {why}")
        run_real = runners.real(args.remote, args.token, progress=_progress)
    return _compare(scenario, args, run_real)


def _compare(scenario: Scenario | None, args: argparse.Namespace,
             run_real: Runner | None) -> int:
    """Compare (a saved model trace, the model against a saved real trace, or both run
    here), print or ``--json`` it, write ``--markdown``/``--csv``; 0 when they agree."""
    from ..compare import compare, load_real, model_against, not_comparable, run_both
    from ..runners import simulate
    from ..trace import TraceError
    reason = not_comparable(scenario, bool(args.remote)) if scenario is not None else ""
    if reason:
        _progress(f"note: {reason}; comparing anyway, expect differences")
    profile = args.profile
    saved = args.real
    real = args.real_trace
    if saved and real is None:
        real = load_real(saved, scenario)
    if real is not None and not real.ops and not real.segments:
        raise TraceError(f"{saved}: nothing to compare: the real trace has neither ops nor "
                         "captured segments")
    if args.model_trace is not None and real is not None:
        cmp = compare(args.model_trace, real)
    elif real is not None:
        assert scenario is not None
        cmp = model_against(scenario, real, simulate, profile).compare()
    else:
        assert scenario is not None and run_real is not None, "no saved trace: run both"
        cmp = run_both(scenario, run_real=run_real, run_sim=simulate,
                       profile=profile).compare()
    if args.json:
        sys.stdout.write(json.dumps(cmp.to_json(), ensure_ascii=False) + "\n")
    else:
        from rich.console import Console

        from ..render.compare import print_comparison
        print_comparison(cmp, Console())
    _write_tables(cmp, args.markdown, args.csv)
    return 0 if cmp.agree else 1


def _write_tables(cmp: Comparison, markdown: str | None, csv_path: str | None) -> None:
    from ..compare import comparison_markdown, match_rows
    from ..export.tables import render_csv
    if markdown:
        Path(markdown).write_text(comparison_markdown(cmp), "utf-8")
        _progress(f"wrote {markdown}")
    if csv_path:
        Path(csv_path).write_text(render_csv(*match_rows(cmp)), "utf-8")
        _progress(f"wrote {csv_path}")


def cmd_validate(args: argparse.Namespace) -> int:
    """``nagle-sim validate``: every lesson (or ``--random N`` generated scenarios) on the
    kernel and on the model; a table of verdicts; exit 1 if any disagrees (everything is
    printed first)."""
    from .. import runners
    from ..compare import profile_choice, run_both
    from ..scenario.generator import MAX_SEED
    options.check_output(args.markdown)
    args.profile = profile_choice(args.profile)
    if args.random is None and (args.seed is not None or args.keep is not None):
        raise UserError("validate: --seed and --keep go with --random N")
    if args.random is not None:
        args.seed = args.seed or 0
        if args.seed + args.random - 1 > MAX_SEED:
            raise UserError(f"validate: --seed {args.seed} with --random {args.random} runs "
                            f"past the last seed, {MAX_SEED}")
    if args.keep is not None:
        _check_keep_dir(args.keep)
    why = runners.real_unavailable(args.remote)
    if why is not None:
        raise UserError(f"validate: {why}")
    both: BothRunner = partial(
        run_both, run_real=runners.real(args.remote, args.token, progress=_progress),
        run_sim=runners.simulate, profile=args.profile)
    where = f", server side on {_without_token(args.remote)}" if args.remote else ""
    if args.random is not None:
        return _validate_random(args, both, where)
    return _validate_lessons(args, both, where)


def _validate_lessons(args: argparse.Namespace, both: BothRunner, where: str) -> int:
    from rich.console import Console

    from ..compare import TOLERANCE_TEXT
    from ..compare.validate import LESSON_HEADERS, lesson_rows, validate_lessons
    from ..lessons import load_lessons
    from ..render.compare import print_lesson_problems, verdict_table
    from ..render.piped import fit_piped
    results = validate_lessons(load_lessons(), both, _progress, remote=bool(args.remote))
    rows = lesson_rows(results)
    console = Console()
    table = verdict_table(f"Model vs kernel, every lesson{where} ({TOLERANCE_TEXT})",
                          LESSON_HEADERS, rows, verdict=1)
    fit_piped(console, table)
    console.print(table)
    print_lesson_problems(results, console)
    _write_markdown(args.markdown,
                    f"# Model vs kernel, every lesson\n\nTolerance: {TOLERANCE_TEXT}.",
                    LESSON_HEADERS, rows)
    ok = all(res.cmp is not None and res.cmp.agree for res in results if res.comparable)
    return 0 if ok else 1


def _validate_random(args: argparse.Namespace, both: BothRunner, where: str) -> int:
    from rich.console import Console
    from rich.text import Text

    from ..compare import TOLERANCE_TEXT
    from ..compare.validate import RANDOM_HEADERS, validate_random
    from ..render.compare import verdict_table
    from ..render.piped import fit_piped
    keep = Path(args.keep) if args.keep else None
    first, count = args.seed, args.random
    rows, agreed = validate_random(first, count, both, _progress, keep)
    console = Console()
    table = verdict_table(f"Model vs kernel, {count} random scenario(s){where} "
                          f"({TOLERANCE_TEXT})", RANDOM_HEADERS, rows, verdict=2)
    fit_piped(console, table)
    console.print(table)
    console.print(Text(f"{agreed} of {count} agree"
                       + ("" if agreed == count or keep is None else
                          f"; the others are in {keep}: nagle-sim compare FILE")))
    _write_markdown(args.markdown,
                    f"# Model vs kernel, random scenarios {first} to {first + count - 1}\n\n"
                    f"Tolerance: {TOLERANCE_TEXT}. {agreed} of {count} agree.",
                    RANDOM_HEADERS, rows)
    return 0 if agreed == count else 1


def _write_markdown(path: str | None, heading: str, headers: list[str],
                    rows: list[list[str]]) -> None:
    """``--markdown PATH``: the heading paragraph, then the table."""
    if path:
        from ..export.tables import render_markdown
        Path(path).write_text(f"{heading}\n\n{render_markdown(headers, rows)}", "utf-8")
        _progress(f"wrote {path}")


def _without_token(remote: str) -> str:
    """``[TOKEN@]HOST:PORT`` as it may be shown: the token is a secret, never printed."""
    return remote.rpartition("@")[2]


def _progress(message: str) -> None:
    """A line on stderr as it comes: a real run's status, a lesson or a file written."""
    print(message, file=sys.stderr, flush=True)


def _check_keep_dir(path: str) -> None:
    """``--keep DIR`` must be a directory we can write a scenario file into (tried now,
    not after a long run)."""
    if not path or not os.path.isdir(path):
        raise UserError(f"validate: --keep {path!r}: not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".nagle-sim-check-"):
            pass
    except OSError as exc:
        raise UserError(f"validate: --keep {path!r}: cannot write there "
                        f"({exc.strerror or exc})") from None


def fill_compare(p: argparse.ArgumentParser) -> None:
    options.add_scenario(p)
    p.add_argument("real", nargs="?", metavar="REAL.json",
                   help="a saved real trace to compare with instead of running the kernel "
                   "(FILE may then be a saved model trace too)")
    options.add_remote_and_profile(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument("--csv", metavar="PATH")
    p.set_defaults(func=cmd_compare)


def fill_validate(p: argparse.ArgumentParser) -> None:
    options.add_remote_and_profile(p)
    p.add_argument("--markdown", metavar="PATH")
    p.add_argument("--random", type=options.random_count, metavar="N",
                   help="instead of the lessons, N generated request/response scenarios "
                   "(Nagle, NODELAY, CORK, MSG_MORE, writev, QUICKACK, think time, link "
                   "delay and rate)")
    p.add_argument("--seed", type=options.seed, metavar="S",
                   help="the first random scenario's seed (default 0; the same seed is the "
                   "same scenario everywhere)")
    p.add_argument("--keep", metavar="DIR",
                   help="write each random scenario that disagrees to DIR/random-SEED.toml")
    p.set_defaults(func=cmd_validate)
