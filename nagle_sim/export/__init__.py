"""Exports: a trace as pcap, SVG/PNG ladder, time-sequence plot, Markdown/CSV tables, JSON.

Owns: the export entry points used by the CLI (`export_cli`) and the TUI's export key
(`export_default`), output-path checks and the one-line `ExportError`. The drawing lives in
`scene` (primitives), `ladder` / `tseq` (layouts), `svg` / `png` (writers); `pcap` and
`tables` write the other formats. Formats and addresses: docs/exports.md.
Must not import textual, simpy or asyncio (Pillow only lazily, for PNG).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..model.events import Micros, Side
from ..trace import Trace
from .ladder import LadderOptions, build_ladder
from .pcap import to_pcap
from .scene import Scene
from .svg import to_svg
from .tables import (
    CSV_SUFFIXES,
    MARKDOWN_SUFFIXES,
    Cell,
    summary_csv,
    summary_markdown,
    table_format,
    write_rows,
)
from .tseq import TseqOptions, build_tseq

__all__ = ["FORMATS", "ExportError", "LadderOptions", "TseqOptions", "export_cli",
           "export_default", "export_to", "ladder_scene", "tseq_scene", "write_table"]


class ExportError(Exception):
    """An export that cannot be done. ``str(err)`` is a one-line message for the user."""


SUFFIXES: dict[str, tuple[str, ...]] = {
    "pcap": (".pcap", ".cap"),
    "svg": (".svg",),
    "png": (".png",),
    "tseq": (".svg", ".png"),
    "markdown": MARKDOWN_SUFFIXES,
    "csv": CSV_SUFFIXES,
    "json": (".json",),
}
FORMATS = tuple(SUFFIXES)
"""Format names, in the order `export_cli` writes them (also its keyword names)."""


# ---------------------------------------------------------------- paths
def _check_target(path: str | os.PathLike[str], fmt: str) -> Path:
    """``path`` as a Path that looks writable for ``fmt``, or ExportError."""
    text = os.fspath(path)
    if not text.strip():
        raise ExportError(f"--{fmt}: empty file name")
    p = Path(text).expanduser()
    suffixes = SUFFIXES[fmt]
    if p.suffix.lower() not in suffixes:
        raise ExportError(f"--{fmt} {p}: expected a file name ending in "
                          f"{' or '.join(suffixes)}")
    if p.is_dir():
        raise ExportError(f"--{fmt} {p}: is a directory")
    parent = p.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ExportError(f"cannot write {p}: directory {parent} {what}")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ExportError(f"cannot write {p}: permission denied")
    return p


def _write(p: Path, data: bytes | str) -> Path:
    try:
        if isinstance(data, str):
            p.write_text(data, "utf-8", newline="")
        else:
            p.write_bytes(data)
    except OSError as exc:
        raise ExportError(f"cannot write {p}: {exc.strerror or exc}") from None
    return p


def _png_bytes(scene: Scene, scale: float) -> bytes:
    import io

    from .png import PngUnavailable, render
    try:
        image = render(scene, scale)
    except PngUnavailable as exc:
        raise ExportError(str(exc)) from None
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# ---------------------------------------------------------------- scenes
def ladder_scene(trace: Trace, overlay: Trace | None = None, *, until_ms: float | None = None,
                 linear: bool = False, detail: str = "wire") -> Scene:
    """The ladder picture (SVG/PNG) of ``trace``, ``overlay`` drawn dashed orange on top."""
    until = None if until_ms is None else Micros(round(until_ms * 1000))
    return build_ladder(trace, overlay, LadderOptions(compress=not linear, until=until,
                                                      detail=detail))


def tseq_scene(trace: Trace, overlay: Trace | None = None, *, until_ms: float | None = None,
               sender: Side = Side.CLIENT) -> Scene:
    """The time-sequence plot of ``sender``'s data (``overlay`` dashed orange)."""
    until = None if until_ms is None else Micros(round(until_ms * 1000))
    return build_tseq(trace, overlay, TseqOptions(sender=sender, until=until))


# ---------------------------------------------------------------- entry points
def export_cli(trace: Trace, *, pcap: str | os.PathLike[str] | None = None,
               svg: str | os.PathLike[str] | None = None,
               png: str | os.PathLike[str] | None = None,
               tseq: str | os.PathLike[str] | None = None,
               markdown: str | os.PathLike[str] | None = None,
               csv: str | os.PathLike[str] | None = None,
               json: str | os.PathLike[str] | None = None,
               overlay: Trace | None = None, until_ms: float | None = None,
               linear: bool = False, sender: Side = Side.CLIENT,
               png_scale: float = 1.0) -> list[Path]:
    """Write each requested format; return the written paths (in `FORMATS` order).

    ``overlay`` (a second, usually real, trace) is drawn over the ladder and the tseq plot.
    ``until_ms`` crops the pictures; ``linear`` draws the ladder to scale (no compressed
    gaps); ``sender`` picks the direction of the tseq plot; ``png_scale`` multiplies the PNG
    pixel size. Every path is checked before anything is written; any problem raises
    `ExportError` with a one-line message."""
    wanted = {"pcap": pcap, "svg": svg, "png": png, "tseq": tseq, "markdown": markdown,
              "csv": csv, "json": json}
    targets = {fmt: _check_target(p, fmt) for fmt, p in wanted.items() if p is not None}
    if not targets:
        raise ExportError("nothing to export: give at least one of "
                          + ", ".join(f"--{f}" for f in FORMATS))
    if not png_scale > 0:
        raise ExportError(f"PNG scale must be positive, got {png_scale}")
    ladder: Scene | None = None

    def get_ladder() -> Scene:
        nonlocal ladder
        if ladder is None:
            ladder = ladder_scene(trace, overlay, until_ms=until_ms, linear=linear)
        return ladder

    producers: dict[str, Callable[[Path], bytes | str]] = {
        "pcap": lambda p: to_pcap(trace),
        "svg": lambda p: to_svg(get_ladder()),
        "png": lambda p: _png_bytes(get_ladder(), png_scale),
        "tseq": lambda p: _tseq_output(trace, overlay, p, until_ms, sender, png_scale),
        "markdown": lambda p: summary_markdown(trace),
        "csv": lambda p: summary_csv(trace),
        "json": lambda p: trace.dumps(indent=1) + "\n",
    }
    return [_write(p, producers[fmt](p)) for fmt, p in targets.items()]


def _tseq_output(trace: Trace, overlay: Trace | None, p: Path, until_ms: float | None,
                 sender: Side, scale: float) -> bytes | str:
    scene = tseq_scene(trace, overlay, until_ms=until_ms, sender=sender)
    return _png_bytes(scene, scale) if p.suffix.lower() == ".png" else to_svg(scene)


def export_to(trace: Trace, path: str | os.PathLike[str], fmt: str | None = None,
              overlay: Trace | None = None) -> Path:
    """Write one file, its format named by ``fmt`` or guessed from the suffix
    (.pcap/.cap, .svg = ladder, .png = ladder, .md, .csv, .json)."""
    if fmt is None:
        suffix = Path(os.fspath(path)).suffix.lower()
        guess = [f for f in FORMATS if f != "tseq" and suffix in SUFFIXES[f]]
        if not guess:
            raise ExportError(f"{os.fspath(path)}: unknown export format "
                              f"{suffix or '(no suffix)'!r}; known: "
                              + ", ".join(sorted({s for f in FORMATS for s in SUFFIXES[f]})))
        fmt = guess[0]
    if fmt not in SUFFIXES:
        raise ExportError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    return export_cli(trace, overlay=overlay, **{fmt: path})[0]  # type: ignore[arg-type]


def export_default(trace: Trace, scenario_path: str | os.PathLike[str]) -> list[Path]:
    """The TUI's export key: ``<stem>.pcap`` and ``<stem>.svg`` next to the scenario file."""
    base = Path(os.fspath(scenario_path))
    return export_cli(trace, pcap=base.with_suffix(".pcap"), svg=base.with_suffix(".svg"))


def write_table(rows: Sequence[Sequence[Cell]], headers: Sequence[str],
                path: str | os.PathLike[str], fmt: str | None = None,
                title: str | None = None) -> Path:
    """Any table (e.g. compare's rows) as Markdown or CSV, by ``fmt`` or the path's suffix."""
    try:
        kind = table_format(Path(os.fspath(path)), fmt)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    p = _check_target(path, kind)
    try:
        return write_rows(rows, headers, p, kind, title)
    except OSError as exc:
        raise ExportError(f"cannot write {p}: {exc.strerror or exc}") from None
