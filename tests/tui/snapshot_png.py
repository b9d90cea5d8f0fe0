"""Render the TUI snapshot SVGs to PNG so a person can look at them before accepting.

Run: ``python -m tests.tui.snapshot_png [OUTDIR]`` (default /tmp/nagle-snapshots). Needs
cairosvg (the test extra).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent / "__snapshots__"


def main(out: Path) -> list[Path]:
    import cairosvg

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for svg in sorted(HERE.rglob("*.svg")):
        target = out / (svg.stem.replace("[", "_").replace("]", "") + ".png")
        cairosvg.svg2png(url=str(svg), write_to=str(target))
        written.append(target)
    return written


if __name__ == "__main__":
    for path in main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/nagle-snapshots")):
        print(path)
