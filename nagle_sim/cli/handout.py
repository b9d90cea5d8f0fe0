"""``nagle-sim handout``: the course's cheat sheet as one printable HTML page.

Owns the command's options; the page is `nagle_sim.export.handout`, the text
`nagle_sim.lessons.cheat_sheet` (the same the app shows on f4).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import EXIT_OK, UserError


def cmd_handout(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..export.handout import handout_html
    from ..lessons import cheat_sheet
    out = Path(args.output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"-o {args.output}: expected a file name ending in .html")
    page = handout_html(cheat_sheet(), footer=f"nagle-sim {__version__} · the lessons in "
                        "brackets show each rule; `nagle-sim tui`, f4 shows this sheet")
    try:
        out.write_text(page, "utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {out} (open it in a browser and print it)")
    return EXIT_OK


def fill_handout(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="nagle-sim-cheatsheet.html", metavar="FILE",
                   help="where to write the page (default nagle-sim-cheatsheet.html)")
    p.set_defaults(func=cmd_handout)
