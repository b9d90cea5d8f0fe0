"""The command table and the parser that builds each command's options only when used.

Owns: `COMMANDS` (every subcommand: its name, help, and where its options are filled in)
and `Parser` (argparse with the one-line error). A command's module (`nagle_sim.cli.run`,
`…app`, `…export`, `…compare`, `…sweep`, `…explain`, `…drill`, `…realnet`, `…watch`) is imported
only when that command parses or formats its help, so ``nagle-sim run`` never imports
explain's, sweep's or the app's option helpers; adding a command is one row here and a
``fill_<name>`` function in its module.
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from .. import __version__
from ..errors import EXIT_BAD_INPUT
from .messages import print_error

Fill = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True, slots=True)
class Command:
    """One row of the command table: ``fill`` is ``"module:function"`` inside
    `nagle_sim.cli`, the function that adds the command's options and its ``func``."""

    name: str
    help: str
    fill: str
    description: str | None = None
    epilog: str | None = None


COMMANDS: tuple[Command, ...] = (
    Command("run", "simulate a scenario and print its ladder and summary", "run:fill_run"),
    Command("show", "print a saved trace (from --json) as a ladder and summary",
            "run:fill_show"),
    Command("tui", "open the teaching app (on a scenario file if given)", "app:fill_tui"),
    Command("serve", "serve the teaching app to browsers (classroom mode)", "app:fill_serve",
            description="Serve the teaching app to browsers. Each tab runs its own app in "
            "classroom mode: no server files, exports as downloads, no real-socket runs "
            "unless --allow-real."),
    Command("lessons", "list the lessons", "app:fill_lessons"),
    Command("handout", "write the course's cheat sheet as a printable HTML page",
            "handout:fill_handout"),
    Command("examples", "write the README's example scenarios into ./examples",
            "examples:fill_examples"),
    Command("export", "export a run as pcap / SVG / PNG / tables", "export:fill_export",
            epilog="FILE may also be a saved trace (.json), exported as it is."),
    Command("compare", "run on the model and on real sockets; match segments",
            "compare:fill_compare"),
    Command("validate", "compare every lesson (or random scenarios) with the real kernel",
            "compare:fill_validate"),
    Command("explain", "open a real capture (pcap/pcapng) and explain every stall",
            "explain:fill_explain"),
    Command("wireshark", "install the Wireshark plugin that shows explain's findings",
            "wireshark:fill_wireshark",
            description="Install (or locate) the Lua post-dissector that turns the comments "
            "of `explain --annotate` into Wireshark fields (nagle_sim.cause, .stall_ms, "
            ".side, .fix) with expert info."),
    Command("sweep", "run a scenario over a grid of settings; table and plot",
            "sweep:fill_sweep"),
    Command("drill", "play packetdrill scripts against the model", "drill:fill_drill"),
    Command("realnet", "run scenarios over real kernel sockets", "realnet:fill_realnet"),
    Command("watch", "watch the kernel's own Nagle / delayed-ACK decisions for a program",
            "watch:fill_watch"),
)
"""Every subcommand, in the order ``nagle-sim --help`` lists them."""


def lazy(where: str) -> Fill:
    """The fill function ``"module:function"`` of `nagle_sim.cli`, imported when called."""
    module, _, name = where.partition(":")

    def fill(p: argparse.ArgumentParser) -> None:
        getattr(importlib.import_module(f"{__package__}.{module}"), name)(p)
    return fill


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line error (``error: nagle-sim run: argument …``, exit
    2) instead of a usage block; ``--help`` still shows the usage.

    A subcommand's parser is filled lazily: ``fill`` adds its arguments the first time it
    parses or formats its help, so a command builds (and imports) only its own options,
    not every subcommand's."""

    def __init__(self, *args: Any, fill: Fill | None = None, **kwargs: Any) -> None:
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
        wrong = _INVALID_CHOICE.match(message)
        if wrong is not None:
            # a mistyped command or choice: argparse lists them all; say the likely one
            what, given = wrong.group(1), wrong.group(2)
            listed = re.findall(r"'([^']*)'", wrong.group(3))
            import difflib  # only for a mistake: not on every command's start-up
            close = difflib.get_close_matches(given, listed, n=1, cutoff=0.5)
            guess = f"did you mean '{close[0]}'? " if close else ""
            head = (f"no command '{given}'" if what.endswith("command")
                    else f"argument {what}: no choice '{given}'")
            message = f"{head} ({guess}choose from {', '.join(listed)})"
        print_error(f"{self.prog}: {message} (see {self.prog} --help)")
        raise SystemExit(EXIT_BAD_INPUT)


_INVALID_CHOICE = re.compile(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$")


def add_commands(parser: argparse.ArgumentParser, dest: str, required: bool,
                 commands: Sequence[Command]) -> None:
    """Subcommands of ``parser`` from table rows, each filled when first used."""
    sub = parser.add_subparsers(dest=dest, required=required)
    for c in commands:
        sub.add_parser(c.name, help=c.help, description=c.description, epilog=c.epilog,
                       fill=lazy(c.fill))


def build_parser() -> argparse.ArgumentParser:
    """The whole CLI: each subcommand's parser holds its name, help and description at
    once, and its options only when it is used."""
    parser = Parser(
        prog="nagle-sim", description="See why small TCP messages wait: Nagle, delayed ACK, "
        "CORK, QUICKACK — simulated, and measured on real sockets.")
    parser.add_argument("--version", action="version", version=f"nagle-sim {__version__}")
    add_commands(parser, "command", False, COMMANDS)
    return parser
