"""``nagle-sim compare`` and ``nagle-sim validate``: the model against the kernel.

Owns: the two commands' options and the checks that must fail before anything runs (the
saved traces on each side, ``--profile``, ``--seed``/``--keep``, whether this host can
run the kernel side at all: never "DISAGREE" against an empty capture). Running and
judging are `nagle_sim.compare_run`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ..errors import UserError
from . import options


def cmd_compare(args: argparse.Namespace) -> int:
    """``compare SCENARIO`` (run both), ``compare SCENARIO REAL.json`` (the model against a
    saved real trace), ``compare MODEL.json REAL.json`` (two saved traces). Saved traces
    are checked before anything runs: the right source on each side, meta the comparison
    can use, and the same scenario (`compare_run.load_real`)."""
    from .. import runners
    from ..compare_run import check_same_title, compare_cli, load_model, load_real
    options.check_output(args.markdown)
    options.check_output(args.csv)
    options.check_profile(args.profile)
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
        if args.profile not in (None, "auto"):
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
    return compare_cli(scenario, args, run_sim=runners.simulate, run_real=run_real)


def cmd_validate(args: argparse.Namespace) -> int:
    from .. import runners
    from ..compare_run import validate_cli, validate_random_cli
    from ..randomscen import MAX_SEED
    options.check_output(args.markdown)
    options.check_profile(args.profile)
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
    run_real = runners.real(args.remote, args.token, progress=_progress)
    validate = validate_random_cli if args.random is not None else validate_cli
    return validate(args, run_sim=runners.simulate, run_real=run_real)


def _progress(message: str) -> None:
    """A real run's one-line status messages, on stderr as they come."""
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
