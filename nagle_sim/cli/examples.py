"""``nagle-sim examples``: write the README's example scenarios (and drill scripts) into a
folder.

Owns the command's options. The files are package data (``nagle_sim.example_files``, the
repository's examples/), so the README's commands (``nagle-sim run
examples/s1_write_write_read.toml`` …) work for a user who installed the wheel and has no
checkout. An existing file is never replaced.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ..errors import EXIT_OK, UserError


def example_files() -> list[tuple[str, str]]:
    """(name, text) of every shipped example, sorted by name: the scenarios, and under
    ``drill/`` a few packetdrill scripts (``nagle-sim drill examples/drill``; the
    README named tests/drill, which only a checkout has). The installed package data,
    or the checkout's examples/ when run from a source tree (as the lessons are found,
    `nagle_sim.lessons.loader`)."""
    try:
        root = resources.files("nagle_sim.example_files")
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parents[2] / "examples"
    out = [(f.name, f.read_text("utf-8")) for f in root.iterdir()
           if f.name.endswith(".toml") and f.is_file()]
    drill = root / "drill"
    if drill.is_dir():
        out += [(f"drill/{f.name}", f.read_text("utf-8")) for f in drill.iterdir()
                if f.name.endswith(".pkt") and f.is_file()]
    return sorted(out)


def cmd_examples(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {args.folder}: {exc.strerror or exc}") from None
    if not folder.is_dir():
        raise UserError(f"{args.folder}: not a folder")
    wrote, kept = [], []
    for name, text in example_files():
        target = folder / name
        if target.exists():
            kept.append(name)
            continue
        try:
            target.parent.mkdir(exist_ok=True)
            target.write_text(text, "utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
        wrote.append(str(target))
    for path in wrote:
        print(f"wrote {path}")
    if kept:
        print(f"kept (already there, not replaced): {', '.join(kept)}")
    print(f"try: nagle-sim run {folder / 's1_write_write_read.toml'}")
    return EXIT_OK


def fill_examples(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", nargs="?", default="examples",
                   help="where to write them (default ./examples, as the README's commands "
                   "name them); existing files are kept")
    p.set_defaults(func=cmd_examples)
