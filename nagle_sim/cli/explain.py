"""``nagle-sim explain CAPTURE``: a real capture, every stall named (`nagle_sim.explain`).

Owns: the command's options, its output checks (each path before the slow work), what it
prints, and opening the explanation in the app (`capture_view`, `open_tui`). Exit 0 when
the capture was explained; bad input is a `nagle_sim.errors.UserError` (one line, 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import EXIT_OK, UserError
from . import options


def fill_explain(p: argparse.ArgumentParser) -> None:
    p.add_argument("capture", nargs="?",
                   help="pcap or pcapng file (tcpdump -w, Wireshark)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--conn", type=options.connection, metavar="N",
                       help="explain connection N (default: the longest stall)")
    which.add_argument("--port", type=options.port, metavar="P",
                       help="explain the connection using port P")
    p.add_argument("--kernel", metavar="WATCH.json",
                   help="the kernel's own decisions about the same connection: a trace "
                        "`nagle-sim watch -o` wrote while the capture ran; the stalls it "
                        "covers are named from them (confidence 1), the connection is the "
                        "one it watched (docs/explain.md)")
    p.add_argument("--os", default="", metavar="client=linux,server=windows",
                   help="each side's stack profile (default: from its delayed-ACK timing)")
    p.add_argument("--json", action="store_true",
                   help="print the explanation as JSON (not with --markdown)")
    p.add_argument("--markdown", action="store_true",
                   help="print a Markdown report (not with --json)")
    p.add_argument("--svg", metavar="F", help="write the captured ladder (model overlaid)")
    p.add_argument("--png", metavar="F", help="the same as PNG")
    p.add_argument("--until-ms", type=options.capture_ms, metavar="MS",
                   help="draw the pictures up to MS (default: just past the first stall)")
    p.add_argument("--scenario", metavar="OUT.toml", help="write the rebuilt scenario")
    p.add_argument("--annotate", metavar="OUT.pcapng",
                   help="write the capture back as pcapng with a comment on each stall's "
                        "first and releasing frames (Wireshark shows them as fields with "
                        "`nagle-sim wireshark --install`); the capture itself is not touched")
    p.add_argument("--tui", action="store_true",
                   help="open the capture in the teaching app: the captured ladder with "
                        "each stall explained, the rebuilt model as overlay, what-if keys")
    p.add_argument("--truncated-ok", action="store_true",
                   help="explain the complete frames of a capture that ends inside a frame "
                        "(copied while tcpdump was writing, or cut with head -c)")
    p.add_argument("--all", action="store_true",
                   help="list every stall (default: identical stalls grouped, one line each)")
    from ..explain.advice import DEFAULT_RUNTIME, runtime_names
    p.add_argument("--runtime", choices=runtime_names(), default=DEFAULT_RUNTIME,
                   metavar="NAME",
                   help="write each stall's fix for this runtime: "
                        + ", ".join(runtime_names()) + f" (default {DEFAULT_RUNTIME})")
    p.add_argument("--runtimes", action="store_true",
                   help="print each runtime's Nagle default and the calls that change it, "
                        "with their sources, and exit")
    p.add_argument("--top", type=_top, default=10, metavar="N",
                   help="list the N connections with the longest stalls (default 10); the "
                        "N most suspect are always analysed in full")
    p.set_defaults(func=cmd_explain)


def _top(text: str) -> int:
    """``--top``: how many connections the summary table lists."""
    if not text.isdigit() or not 0 < int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"expected a number of connections 1-100000, got "
                                         f"{text!r}")
    return int(text)


class TerminalProgress:
    """What explain is doing, on one line of a terminal's stderr (rewritten at most ten
    times a second, cleared at the end): reading a large file takes seconds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.last = 0.0
        self.shown = False

    def __call__(self, stage: str, done: int, of: int) -> None:
        import time
        now = time.monotonic()
        if now - self.last < 0.1 and stage != "explaining":
            return
        self.last = now
        if stage == "reading":
            text = f"reading {self.name}: {100 * done // of} %" if of else \
                f"reading {self.name}: {done / 1e6:.0f} MB"
        elif stage == "analysing":
            text = f"analysing the suspect connections: {done}/{of}"
        else:
            text = "explaining the connection and re-running it on the model"
        sys.stderr.write("\r\033[K" + text)
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _progress(path: str) -> TerminalProgress | None:
    """A progress line when stderr is a terminal (never in a pipe or a log)."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return TerminalProgress(Path(path).name) if tty and os.environ.get("TERM") != "dumb" \
        else None


def _check_output(path: str | None, flag: str, suffix: str) -> None:
    """nagle_sim.export's own output-path check (one message wording for every command)."""
    if path is None:
        return
    from ..export import check_target, check_writable
    if flag in ("--scenario", "--annotate"):
        if Path(path).suffix.lower() != suffix:
            raise UserError(f"{flag} {path}: expected a file name ending in {suffix}")
        check_writable(path)
    else:
        check_target(path, flag.lstrip("-"))


def _crop_hint(message: str, until_ms: float | None) -> str:
    """The export's "too big" message says what to do in `nagle-sim export`'s options
    (crop with --until-ms, lower --png-scale); say it in explain's: a smaller --until-ms
    when one was given, or none (explain then draws the segments around the first stall),
    and --svg for a PNG too large."""
    head, sep, _advice = message.partition(": draw part of the run with --until-ms")
    if not sep:
        return message
    svg = "; or draw it as --svg (no pixel bound)" if head.startswith("the PNG") else ""
    if until_ms is None:
        return f"{head}: draw part of it with --until-ms MS{svg}"
    return (f"{head}: --until-ms {until_ms:g} still draws too much; give a smaller one, or "
            f"leave it out (the pictures then show the segments around the first "
            f"stall){svg}")


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _broken_pipe() -> None:
    # rich's own handler exits 1; a closed pipe is the reader's choice, not an error
    raise BrokenPipeError


def _explain(args: argparse.Namespace) -> Any:
    """The explanation of ``args.capture`` (with the watch trace of ``--kernel``), a
    progress line on a terminal meanwhile."""
    from ..explain import explain_file, load_watch
    from ..runners import simulate
    # a --kernel file that is unreadable or no watch trace is refused before the capture
    kernel = load_watch(args.kernel) if getattr(args, "kernel", None) else None
    progress = _progress(args.capture)
    try:
        return explain_file(args.capture, conn=args.conn, port=args.port, os_text=args.os,
                            runner=simulate, truncated_ok=getattr(args, "truncated_ok", False),
                            top=getattr(args, "top", 10), progress=progress, kernel=kernel)
    except MemoryError:
        raise UserError(f"{args.capture}: too large to explain in memory") from None
    finally:
        if progress is not None:
            progress.clear()


def cmd_explain(args: argparse.Namespace) -> int:
    from ..explain.report import dumps, markdown, print_report, write_pictures
    from ..export import ExportError

    if args.json and args.markdown:
        # one document on stdout: JSON with Markdown after it would parse as neither
        raise UserError("--json and --markdown both print to stdout: give one of them")
    if getattr(args, "runtimes", False):
        return print_runtimes(args)
    if args.capture is None:
        raise UserError("nagle-sim explain: give a capture file (or --runtimes)")
    for path, flag, suffix in ((args.svg, "--svg", ".svg"), (args.png, "--png", ".png"),
                               (args.scenario, "--scenario", ".toml"),
                               (getattr(args, "annotate", None), "--annotate", ".pcapng")):
        _check_output(path, flag, suffix)
    ex = _explain(args)
    ex.runtime = getattr(args, "runtime", ex.runtime)
    written: list[str] = []
    try:
        if args.svg or args.png:
            paths, window = write_pictures(ex, args.svg, args.png,
                                           getattr(args, "until_ms", None))
            written += paths
            if window:
                print(window, file=sys.stderr)
    except ExportError as exc:
        raise UserError(_crop_hint(str(exc), getattr(args, "until_ms", None))) from None
    except MemoryError:
        raise UserError("the picture is too large to draw in memory: explain a shorter "
                        "capture (--conn, or cut it with tcpdump -r IN -w OUT -c N)") from None
    if args.scenario and ex.rebuilt is None:
        raise UserError(f"{args.capture}: no scenario could be rebuilt ("
                        f"{ex.notes[-1] if ex.notes else 'unknown reason'})")
    if getattr(args, "annotate", None):
        from ..explain.annotate import annotate
        count = annotate(ex, args.annotate, ex.runtime)
        written.append(f"{args.annotate} ({count} comment(s); in Wireshark with "
                       "`nagle-sim wireshark --install`)")
    if args.scenario and ex.rebuilt is not None:
        try:
            Path(args.scenario).write_text(ex.rebuilt.toml, "utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {args.scenario}: {exc.strerror or exc}") from None
        written.append(args.scenario)
    tui = getattr(args, "tui", False)
    try:
        if tui and not (args.json or args.markdown):
            pass    # the app shows the report; printing it first would only scroll away
        elif args.json:
            sys.stdout.write(dumps(ex) + "\n")
        elif args.markdown:
            sys.stdout.write(markdown(ex))
        else:
            from rich.console import Console
            console = Console(highlight=False)
            console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
            print_report(ex, console, all_stalls=args.all)
        sys.stdout.flush()
    except BrokenPipeError:
        # `explain … | head`: the reader has what it wanted; the rest goes nowhere, quietly
        _silence_stdout()
        return EXIT_OK
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    if getattr(args, "tui", False):
        return open_tui(ex)
    return EXIT_OK


def print_runtimes(args: argparse.Namespace) -> int:
    """``--runtimes``: every runtime's default and calls, with the source of each row."""
    import json

    from ..explain.advice import RUNTIMES, runtimes_table
    if args.json:
        sys.stdout.write(json.dumps([r.to_json() for r in RUNTIMES.values()],
                                    ensure_ascii=False) + "\n")
        return EXIT_OK
    if args.markdown:
        from ..export.tables import render_markdown
        sys.stdout.write(render_markdown(
            ["runtime", "Nagle by default", "NODELAY", "one write per message",
             "cork / MSG_MORE", "QUICKACK", "source"], runtimes_table()) + "\n")
        return EXIT_OK
    from rich.console import Console
    from rich.text import Text
    console = Console(highlight=False)
    console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
    from ..explain.report import hang
    try:
        for i, rt in enumerate(RUNTIMES.values()):
            if i:
                console.print()
            console.print(Text(f"{rt.key} — {rt.name}", style="bold"))
            # labels in one column, values wrapped under their own start (80 columns)
            for label, value, style in (
                    ("Nagle", rt.nagle, ""), ("one write", rt.coalesce, ""),
                    ("NODELAY", rt.nodelay, ""), ("cork", rt.cork, ""),
                    ("uncork", rt.uncork, ""), ("QUICKACK", rt.quickack, ""),
                    *(("source", src.text(), "dim") for src in rt.sources)):
                if value:
                    hang(console, f"  {label:<11}", Text(value, style=style))
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    return EXIT_OK


def capture_view(ex: Any) -> Any:
    """The explanation as the app's `CaptureView`: the captured trace, each stall in
    words, the model run and the rebuild's what-ifs (their scenario texts)."""
    from ..tui.capture import CaptureView, CaptureWhatIf, StallNote
    rebuilt = ex.rebuilt
    from ..explain.report import LadderClock
    clock = LadderClock(ex.captured)
    stalls = []
    for s in ex.stalls:
        released = clock.released(s)
        stalls.append(StallNote(
            start=clock.at(s.start), end=clock.at(s.end), cause=s.cause,
            confidence=s.confidence, text=s.text,
            evidence=tuple(clock.evidence(e) for e in s.evidence),
            model_ms=s.model_ms, reproduced=s.reproduced, segment=released,
            at=None if released is None else int(clock.segments[released].t),
            duration_us=int(s.duration)))
    whatifs = tuple(CaptureWhatIf(name=w.name, toml=w.toml, text=w.text)
                    for w in rebuilt.whatifs if w.toml)
    c = ex.chosen
    title = f"{Path(ex.capture.path).name}: connection {c.number}, {c.label()}"
    return CaptureView(title=title, where=f"<rebuilt from {Path(ex.capture.path).name}>",
                       captured=ex.captured.trace, toml=rebuilt.toml, model=rebuilt.model,
                       stalls=tuple(stalls), whatifs=whatifs, notes=tuple(ex.notes),
                       captured_per_request_ms=rebuilt.captured_per_request_ms)


def open_tui(ex: Any) -> int:
    """Open the capture in the app like a lesson: the captured ladder with each stall's
    explanation, the model of the rebuilt scenario as the overlay, the what-ifs as keys.
    Everything that can fail on bad input has failed before this (exit 2, one line)."""
    if ex.rebuilt is None:
        raise UserError(f"{ex.capture.path}: no scenario could be rebuilt to open in the app")
    try:
        from ..tui.capture_app import run_capture_app
    except ImportError as exc:          # textual missing
        raise UserError(f"the TUI is unavailable: {exc}") from None
    from ..runners import simulate
    return int(run_capture_app(capture_view(ex), run_sim=simulate))
