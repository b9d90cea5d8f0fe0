"""``nagle-sim drill``: packetdrill scripts against the model (`nagle_sim.drill`).

One script (exit 0 pass, 1 fail, 2 unsupported or bad input) or a directory of scripts (a
table; exit 1 if any failed, else 2 if any could not be played, else 0). Owns the options
and the presentation; must not import simpy or textual.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..drill.parser import DrillSyntaxError, DrillUnsupported, load
from ..drill.runner import DrillResult, Status, run_script
from ..model import PROFILES
from ..scenario import clip
from . import options

MAX_SCRIPTS = 10_000

_EXIT = {Status.PASS: 0, Status.FAIL: 1, Status.UNSUPPORTED: 2, Status.ERROR: 2}
_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.UNSUPPORTED: "yellow",
          Status.ERROR: "red"}


def _play(path: Path, args: argparse.Namespace) -> DrillResult:
    try:
        script = load(path)
    except DrillSyntaxError as exc:
        status = Status.UNSUPPORTED if isinstance(exc, DrillUnsupported) else Status.ERROR
        return DrillResult(str(path), status, str(exc).split(": ", 1)[-1], _line_of(str(exc)))
    try:
        return run_script(script, profile=args.profile, tolerance_us=args.tolerance_usecs,
                          tolerance_pct=args.tolerance_percent,
                          strict_segments=args.strict_segments)
    except Exception as exc:   # noqa: BLE001 - last resort: one script never ends a table
        # the runner turns every known problem into a result; reaching here is a bug in
        # it, still reported on one line (with the exception's type) and never a traceback
        return DrillResult(str(path), Status.ERROR,
                           f"internal error playing the script: {type(exc).__name__}: "
                           f"{clip(str(exc))}")


def _line_of(message: str) -> int:
    head = message.split(": ", 1)[0]
    tail = head.rsplit(":", 1)
    return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else 0


def cmd_drill(args: argparse.Namespace) -> int:
    target = Path(args.script)
    out = Console(highlight=False)
    if target.is_dir():
        scripts = sorted(p for p in target.rglob("*.pkt") if p.is_file())[:MAX_SCRIPTS + 1]
        if not scripts:
            raise DrillSyntaxError(f"{target}: no .pkt scripts in this directory")
        if len(scripts) > MAX_SCRIPTS:
            raise DrillSyntaxError(f"{target}: more than {MAX_SCRIPTS:,} scripts")
        results = [_play(p, args) for p in scripts]
        table = Table(title=escape(f"packetdrill scripts in {target} against the model "
                                   f"({args.profile})"), title_justify="left")
        table.add_column("script", overflow="fold")
        table.add_column("result")
        table.add_column("line", justify="right")
        table.add_column("why", overflow="fold")
        for r in results:
            table.add_row(escape(str(Path(r.path).relative_to(target))),
                          f"[{_STYLE[r.status]}]{r.status.value}[/]",
                          str(r.line or ""), escape(r.message if r.status is not Status.PASS
                                                    else r.summary()))
        from ..render.piped import fit_piped
        fit_piped(out, table)   # piped: whole rows, never a reason folded at 80 columns
        out.print(table)
        if args.verbose:
            for r in results:
                for note in r.notes:
                    out.print(escape(f"{Path(r.path).relative_to(target)}: note: {note}"),
                              soft_wrap=True)
        counts = {s: sum(1 for r in results if r.status is s) for s in Status}
        out.print(escape(", ".join(f"{n} {s.value}" for s, n in counts.items() if n)))
        if counts[Status.FAIL]:
            return 1
        return 2 if counts[Status.UNSUPPORTED] or counts[Status.ERROR] else 0
    if not target.exists():
        raise DrillSyntaxError(f"{target}: no such file or directory")
    result = _play(target, args)
    if args.verbose:
        for note in result.notes:
            out.print(escape(f"note: {note}"), soft_wrap=True)
    style = _STYLE[result.status]
    if result.status is Status.PASS:
        out.print(f"[{style}]{escape(result.one_line())}[/]", soft_wrap=True)
    else:   # one line, however narrow the terminal: soft_wrap keeps rich from folding it
        Console(stderr=True, highlight=False).print(f"[{style}]{escape(result.one_line())}[/]",
                                                    soft_wrap=True)
    return _EXIT[result.status]


def fill_drill(p: argparse.ArgumentParser) -> None:
    p.add_argument("script", help="a packetdrill script (.pkt) or a directory of them")
    p.add_argument("--profile", choices=sorted(PROFILES), default="linux",
                   help="the stack the model plays (default linux)")
    p.add_argument("--tolerance-usecs", type=options.microseconds, metavar="N",
                   help="timing tolerance in µs (default: the script's, else 4000)")
    p.add_argument("--tolerance-percent", type=options.percent, metavar="P",
                   help="tolerance as a share of the time since the previous event "
                   "(default: the script's, else 12.5)")
    p.add_argument("--strict-segments", action="store_true",
                   help="match each outbound line with exactly one model segment, as "
                   "packetdrill's --strict_segments (default: merge consecutive segments "
                   "up to the line's length, as packetdrill does)")
    p.add_argument("--verbose", action="store_true",
                   help="also print what was ignored (sysctls, options, unchecked fields)")
    p.set_defaults(func=cmd_drill)

