"""``nagle-sim watch``: the kernel's own Nagle, cork and delayed-ACK decisions, live.

    nagle-sim watch -- python3 client.py         # start a program and watch it
    nagle-sim watch --pid 1234 --duration 10     # a running process (and its children)
    nagle-sim watch --port 8080 --json           # every socket on a port, one JSON a line
    nagle-sim watch -o run.json -- python3 x.py  # also a trace file per connection
    nagle-sim watch --check                      # does watch work on this kernel?

Owns: the command's options, the live terminal timeline (one line per decision, tagged
with its socket, in the model's vocabulary; a footer with each socket's deciding state
while a terminal shows it), the stall summary (cause, side, fix and the state that
decided), ``--json`` (one object a line: start, decisions, stalls as they end, notes,
counters) and the trace files ``-o`` writes. The session itself (loading, the program,
signals, detaching) is realnet's, reached through the runner seam
(`nagle_sim.runners.watch_kernel`).

Exit status: the watched program's (0 when watching a pid or port), 2 for bad input or a
host watch cannot run on (one line: what is missing, what still works), 128 + the signal
after Ctrl-C or SIGTERM — everything detached first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import EXIT_OK, UserError
from ..model.events import short
from . import options

_KIND_STYLE = {"hold": "bold yellow", "timer_armed": "magenta", "timer_fired": "magenta",
               "ack_now": "green", "ack_delayed": "bold green", "mode": "blue",
               "sockopt": "bold cyan", "state": "dim", "segment": ""}
_SOCK_STYLES = ("cyan", "bright_magenta", "bright_green", "bright_yellow", "bright_blue",
                "bright_red")

MAX_TRACES = 64
"""Trace files one ``-o`` writes at most (a busy port could have thousands of
connections: the first ones are written, the rest counted)."""


def fill_watch(p: argparse.ArgumentParser) -> None:
    p.description = ("Watch the kernel's own Nagle, TCP_CORK, MSG_MORE, delayed-ACK and "
                     "quick-ACK decisions for a program, a process or a port (root, or "
                     "CAP_BPF with CAP_PERFMON; docs/watch.md).")
    p.add_argument("--pid", type=options.bounded_int(1, (1 << 22) - 1), action="append",
                   default=[], help="a process to watch (and the children it forks); "
                   "repeatable")
    p.add_argument("--port", type=options.bounded_int(1, 65535), default=0,
                   help="watch every TCP socket with this local or peer port")
    p.add_argument("--json", action="store_true",
                   help="one JSON object a line: decisions, stalls, notes, counters")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="also write each watched connection as a trace (show, export and "
                   "the app open it); FILE-2.json, … for the second and later")
    p.add_argument("--quiet", action="store_true",
                   help="no timeline: only the stall summary at the end")
    p.add_argument("--duration", type=options.positive_float(86_400), metavar="S",
                   help="stop after S seconds (a --pid or --port watch runs until Ctrl-C)")
    p.add_argument("--record", metavar="FILE",
                   help="also write the raw records (a test fixture; docs/watch.md)")
    p.add_argument("--ring-mb", type=options.bounded_int(1, 256), default=8,
                   help="ring buffer size in MiB (a power of two; default 8)")
    p.add_argument("--rate", type=options.bounded_int(1, 10_000_000), default=100_000,
                   help="at most this many records a second per socket (default 100000)")
    p.add_argument("--burst", type=options.bounded_int(1, 10_000_000), default=20_000,
                   help="token-bucket depth per socket (default 20000)")
    p.add_argument("--check", action="store_true",
                   help="self-test: watch a demo program, say which decisions are seen")
    # not "command": the top-level parser keeps the subcommand's name there
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                   help="start this program and watch it from its first system call")
    p.set_defaults(func=cmd_watch)


def _command(args: argparse.Namespace) -> list[str] | None:
    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if args.program and not command:
        raise UserError("nagle-sim watch: nothing to run after --")
    if command and (args.pid or args.port):
        raise UserError("nagle-sim watch: give a program to start (-- COMMAND) or "
                        "--pid/--port, not both")
    if not command and not args.pid and not args.port:
        raise UserError("nagle-sim watch: what to watch? -- COMMAND ARGS, --pid PID or "
                        "--port PORT (see nagle-sim watch --help)")
    if args.ring_mb & (args.ring_mb - 1):
        raise UserError(f"nagle-sim watch: --ring-mb {args.ring_mb}: a power of two "
                        "from 1 to 256")
    return command or None


def output_names(path: str, n: int) -> list[str]:
    """Where ``-o path`` writes ``n`` traces: the path, then ``stem-2.suffix``, …"""
    p = Path(path)
    suffix = p.suffix or ".json"
    return [path] + [str(p.with_name(f"{p.stem}-{i}{suffix}")) for i in range(2, n + 1)]


def cmd_watch(args: argparse.Namespace) -> int:
    from .. import runners
    if args.check:
        return runners.watch_check()
    command = _command(args)
    options.check_output(args.output)
    record_file = None
    if args.record:
        options.check_output(args.record)
        try:
            record_file = open(args.record, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise UserError(f"--record {args.record}: {exc.strerror or exc}") from None
    view = _JsonView() if args.json else _TerminalView(quiet=args.quiet)
    try:
        with view:
            result = runners.watch_kernel(
                command, pids=tuple(args.pid), port=args.port, ring_mb=args.ring_mb,
                rate=args.rate, burst=args.burst, segments=bool(args.output),
                on_decision=None if args.quiet else view.decision,
                on_stall=view.stall, on_start=view.start, duration_s=args.duration,
                record_to=record_file, keep_decisions=False,
                keep_per_socket=bool(args.output))
            view.finish(result)
    finally:
        if record_file is not None:
            record_file.close()
    if args.output:
        _write_traces(runners.watch_traces(result, command), args.output, view)
    if result.signal is not None:
        return 128 + int(result.signal)
    if result.returncode is not None and result.returncode < 0:
        return 128 - int(result.returncode)
    return int(result.returncode or EXIT_OK)


def _write_traces(traces: list[Any], path: str, view: Any) -> None:
    if not traces:
        view.info(f"watch: no connection was watched; {path} not written")
        return
    kept = traces[:MAX_TRACES]
    for name, trace in zip(output_names(path, len(kept)), kept, strict=True):
        try:
            with open(name, "w", encoding="utf-8") as out:
                trace.write_json(out)
        except OSError as exc:
            raise UserError(f"-o {name}: {exc.strerror or exc}") from None
        view.info(f"watch: wrote {name} ({trace.meta.get('connection', '?')}: "
                  f"{len(trace.segments)} segments, {len(trace.events)} kernel decisions)")
    if len(traces) > len(kept):
        view.info(f"watch: {len(traces) - len(kept)} more connections not written "
                  f"(at most {MAX_TRACES} trace files)")


# -- views ---------------------------------------------------------------------------------

def _state_words(st: dict[str, int], hz: int) -> str:
    ato = st.get("ato_j", 0) * 1000 // max(hz, 1)
    return (f"{st.get('queued', 0)} B queued, {st.get('in_flight', 0)} B in flight "
            f"({st.get('packets_out', 0)} packet(s)), snd_sml − snd_una "
            f"{st.get('sml_unacked', 0)} B, nonagle {st.get('nonagle', 0)}, mss "
            f"{st.get('mss', 0)}; its own receive side: quick-ACK credit "
            f"{st.get('quick', 0)}, ping-pong {st.get('pingpong', 0)}, ato {ato} ms")


def deciding_state(stall: Any, hz: int) -> str:
    """The state that decided a stall: the waiting side's send state at the hold, and
    the peer's delayed-ACK state when it armed the timer that released it."""
    words = f"{stall.side or 'holder'}: {_state_words(stall.state, hz)}"
    arm = next((d for d in stall.evidence if d.code == "DELACK_WAIT"), None)
    if arm is not None:
        st = arm.data
        words += (f"; {arm.side or 'peer'} when it delayed the ACK: ato "
                  f"{st.get('ato_j', 0) * 1000 // max(hz, 1)} ms ({st.get('ato_j', 0)} "
                  f"jiffies), ping-pong {st.get('pingpong', 0)}, quick-ACK credit "
                  f"{st.get('quick', 0)}")
    return words


def stall_groups(stalls: list[Any]) -> list[tuple[Any, list[Any]]]:
    """Stalls of one connection, side and cause together (a loop's ten identical stalls
    are one line with their range), in the order the first of each happened."""
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for s in stalls:
        groups.setdefault((s.conn, s.side, s.cause), []).append(s)
    return [(g[0], g) for g in groups.values()]


class _JsonView:
    """One JSON object a line (``--json``), written as things happen."""

    def __enter__(self) -> _JsonView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @staticmethod
    def _line(obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def start(self, rep: Any) -> None:
        self._line({"type": "start", "hooks": rep.attached, "missing": rep.lost,
                    "hz": rep.hz, "text": rep.summary()})

    def decision(self, d: Any) -> None:
        self._line(d.to_json())

    def stall(self, s: Any) -> None:
        self._line(s.to_json())

    def info(self, text: str) -> None:
        sys.stderr.write(text + "\n")

    def finish(self, result: Any) -> None:
        for n in result.notes:
            self._line({"type": "note", "text": n})
        self._line({"type": "counters", **result.counters})
        if result.signal is not None:
            self._line({"type": "end", "signal": int(result.signal)})


class _TerminalView:
    """The live timeline: a line per decision tagged with its socket, stalls as they end,
    a footer with each socket's deciding state (a terminal only), the summary at the
    end."""

    def __init__(self, quiet: bool) -> None:
        from rich.console import Console
        self.console = Console(highlight=False)
        self.console.soft_wrap = not self.console.is_terminal    # piped: whole lines
        self.err = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.hz = 250
        self.socks: dict[int, dict[str, Any]] = {}
        self.live: Any = None

    def __enter__(self) -> _TerminalView:
        return self

    def _start_live(self) -> None:
        """The footer, once watch is attached (its start-up line printed first)."""
        if self.console.is_terminal and not self.quiet and self.live is None:
            from rich.live import Live
            self.live = Live(self._footer(), console=self.console, refresh_per_second=4,
                             transient=True, auto_refresh=True)
            self.live.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            live, self.live = self.live, None
            live.__exit__(None, None, None)

    def _footer(self) -> Any:
        from rich.table import Table
        table = Table(box=None, header_style="bold", pad_edge=False, expand=False)
        for col in ("socket", "side", "queued", "in flight", "quick", "ping-pong", "ato",
                    "holds", "stalls"):
            table.add_column(col, justify="left" if col in ("socket", "side") else "right",
                             no_wrap=True)
        for number, s in list(self.socks.items())[-8:]:
            st = s["state"]
            table.add_row(f"#{number}", s["side"], f"{st.get('queued', 0)} B",
                          f"{st.get('in_flight', 0)} B", str(st.get("quick", 0)),
                          str(st.get("pingpong", 0)),
                          f"{st.get('ato_j', 0) * 1000 // max(self.hz, 1)} ms",
                          str(s["holds"]), str(s["stalls"]))
        return table

    def _print(self, renderable: Any) -> None:
        if self.live is not None:
            # one decision, one line: the footer stays put and the timeline readable
            self.live.console.print(renderable, no_wrap=True, overflow="ellipsis")
        else:
            self.console.print(renderable)

    def info(self, text: str) -> None:
        from rich.text import Text
        self.err.print(Text(text))

    def start(self, rep: Any) -> None:
        self.hz = rep.hz or 250
        self.info(rep.summary())
        self._start_live()

    def _sock_tag(self, d: Any) -> Any:
        from rich.text import Text
        s = self.socks.get(d.sock)
        if s is None:
            s = self.socks[d.sock] = {"conn": d.conn, "side": d.side, "state": {},
                                      "holds": 0, "stalls": 0}
            head = Text(f"socket #{d.sock}: ", style="bold")
            head.append(f"{d.side or '?'} {d.conn}",
                        style=_SOCK_STYLES[d.sock % len(_SOCK_STYLES)])
            self._print(head)
        s["conn"], s["side"] = d.conn, d.side or s["side"]
        return Text(f"#{d.sock} {d.side or '?':<6}",
                    style=_SOCK_STYLES[d.sock % len(_SOCK_STYLES)])

    def decision(self, d: Any) -> None:
        from rich.text import Text
        tag = self._sock_tag(d)
        s = self.socks[d.sock]
        if d.data:
            s["state"] = d.data
        if d.kind == "hold":
            s["holds"] += 1
        line = Text(f"{d.t_us / 1000:10.3f} ms  ")
        line.append_text(tag)
        style = _KIND_STYLE.get(d.kind, "")
        line.append(f" {d.kind:<12} ", style=style)
        # on a terminal the model's short label (the ladder's words) keeps a line to a
        # line; piped, the whole sentence
        label = short(d.code) if self.live is not None else d.reason
        line.append(label or d.reason or d.detail, style=style)
        if (label or d.reason) and d.detail:
            line.append(f" ({d.detail})" if self.live is None else f": {d.detail}",
                        style="dim")
        self._print(line)
        if self.live is not None:
            self.live.update(self._footer())

    def stall(self, s: Any) -> None:
        from rich.text import Text
        for sock in self.socks.values():
            if sock["conn"] == s.conn and sock["side"] == s.side:
                sock["stalls"] += 1
                break
        if self.quiet:
            return
        line = Text(f"{s.start_us / 1000:10.3f} ms  STALL {(s.end_us - s.start_us) / 1000:.1f}"
                    f" ms, {s.side} waits: {s.cause}", style="bold red")
        if s.fix:
            line.append(f" — fix: {s.fix}", style="red")
        self._print(line)

    def finish(self, result: Any) -> None:
        self.__exit__(None, None, None)
        from rich.text import Text
        self.hz = int(result.host.get("hz", self.hz) or self.hz)
        out = self.console
        stalls = list(result.stalls)
        out.print()
        if not stalls:
            out.print(Text("no stall: no send waited 10 ms or more", style="bold green"))
        else:
            total = sum(s.end_us - s.start_us for s in stalls) / 1000
            out.print(Text(f"{len(stalls)} stall(s), {total:.1f} ms waited in all",
                           style="bold red"))
        for first, group in stall_groups(stalls):
            durations = [(s.end_us - s.start_us) / 1000 for s in group]
            span = (f"{durations[0]:.1f} ms" if len(group) == 1 else
                    f"{len(group)} stalls of {min(durations):.1f}-{max(durations):.1f} ms")
            head = Text(f"• {span}: ", style="bold")
            head.append(first.cause.replace("+", " + "), style="bold red")
            head.append(f", the {first.side} waits ({first.conn}); first at "
                        f"{first.start_us / 1000:.3f} ms")
            out.print(head)
            out.print(Text(f"  why: {first.text}"))
            out.print(Text(f"  deciding state: {deciding_state(first, self.hz)}", style="dim"))
            if first.fix:
                out.print(Text(f"  fix: {first.fix}", style="green"))
        for n in result.notes:
            out.print(Text(f"note: {n}", style="cyan"))
        c = result.counters
        self.info(f"watch: {c.get('emitted', 0)} records, {c.get('lost', 0)} lost (ring "
                  f"buffer full), {c.get('rate_limited', 0)} rate-limited, "
                  f"{c.get('sockets_not_watched', 0)} sockets not watched (table full)")
