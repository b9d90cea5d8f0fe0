"""``python -m realnet.watch``: the kernel's own small-packet decisions, as plain text.

    python -m realnet.watch -- python3 client.py     # start a program and watch it
    python -m realnet.watch --pid 1234 --duration 10 # a running process (and its children)
    python -m realnet.watch --port 8080 --json       # every socket using a port, JSON lines
    python -m realnet.watch --record raw.jsonl -- …  # also keep the raw records (fixtures)
    python -m realnet.watch --check                  # does watch work on this kernel?

Owns: options, one-line errors (exit 2), printing decisions as they come and the stall
summary at the end. `nagle-sim watch` (the rich, live front end) is built on the same
session (realnet.watch.session). Must not import rich, textual or simpy.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from . import raw
from .decide import Decision
from .loader import Config, Report, WatchError
from .session import run


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m realnet.watch",
        description="Watch the kernel's Nagle, cork, MSG_MORE and delayed-ACK decisions "
                    "for a process or a port (root; docs/watch.md).")
    ap.add_argument("--pid", type=int, action="append", default=[],
                    help="a process to watch (and the children it forks); repeatable")
    ap.add_argument("--port", type=int, default=0, help="watch every socket using this port")
    ap.add_argument("--json", action="store_true", help="one JSON object a line")
    ap.add_argument("--record", metavar="FILE", help="write the raw records (a fixture)")
    ap.add_argument("--duration", type=float, help="stop after this many seconds")
    ap.add_argument("--ring-mb", type=int, default=8, help="ring buffer size (MiB, 2^n)")
    ap.add_argument("--rate", type=int, default=100_000,
                    help="at most this many records a second per socket")
    ap.add_argument("--burst", type=int, default=20_000, help="token-bucket depth per socket")
    ap.add_argument("--quiet", action="store_true", help="only the summary at the end")
    ap.add_argument("--check", action="store_true",
                    help="self-test: watch a demo program and say which decisions are seen")
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="-- COMMAND ARGS: start this program and watch it")
    return ap


def _print(out: TextIO, text: str) -> None:
    try:
        out.write(text + "\n")
        out.flush()
    except BrokenPipeError:
        raise SystemExit(0) from None


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.check:
        from .check import main as check
        try:
            return check()
        except WatchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if args.command and not command:
        print("error: -- COMMAND: nothing to run after --", file=sys.stderr)
        return 2
    if args.duration is not None and not 0 < args.duration <= 86_400:
        print(f"error: --duration {args.duration}: 0 to 86400 seconds", file=sys.stderr)
        return 2
    cfg = Config(pids=tuple(args.pid), port=args.port, ring_mb=args.ring_mb,
                 max_sockets=4096, rate=args.rate, burst=args.burst)
    out = sys.stdout
    record_file = None
    if args.record:
        try:
            record_file = open(args.record, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            print(f"error: --record {args.record}: {exc.strerror}", file=sys.stderr)
            return 2

    def on_decision(d: Decision) -> None:
        if args.quiet:
            return
        _print(out, json.dumps(d.to_json(), ensure_ascii=False) if args.json
               else f"{d.text()}  [{d.conn}]")

    def on_start(rep: Report) -> None:
        line = rep.summary()
        if args.json:
            _print(out, json.dumps({"type": "start", "hooks": rep.attached,
                                    "missing": rep.lost, "hz": rep.hz, "text": line}))
        else:
            print(line, file=sys.stderr, flush=True)

    try:
        if not command:
            cfg.check()
        result = run(cfg, command or None, on_decision=on_decision, on_start=on_start,
                     duration_s=args.duration, record_to=record_file,
                     keep_decisions=False)
    except WatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if record_file is not None:
            record_file.close()
    for s in result.stalls:
        _print(out, json.dumps(s.to_json(), ensure_ascii=False) if args.json else
               f"stall {s.start_us / 1000:.3f} ms, {(s.end_us - s.start_us) / 1000:.1f} ms, "
               f"{s.cause}, waiting: {s.side}: {s.text}" + (f"; fix: {s.fix}" if s.fix else ""))
    for n in result.notes:
        _print(out, json.dumps({"type": "note", "text": n}, ensure_ascii=False) if args.json
               else f"note: {n}")
    counters = result.counters
    if args.json:
        _print(out, json.dumps({"type": "counters", **counters}))
    else:
        print("watch: {emitted} records, {lost} lost (ring buffer full), {rate_limited} "
              "rate-limited, {sockets_not_watched} sockets not watched (table full)"
              .format(**{k: counters.get(k, 0) for k in raw.COUNTER_NAMES}),
              file=sys.stderr)
    if result.signal is not None:
        return 128 + result.signal
    if result.returncode is not None and result.returncode < 0:
        return 128 - result.returncode
    return result.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
