"""Exports: a trace as pcap, SVG/PNG ladder, time-sequence plot, Markdown/CSV tables, JSON.

Owns: the export entry points used by the CLI (`export_cli`) and the TUI's export key
(`export_default`), output-path checks and the one-line `ExportError`. The drawing lives in
`scene` (primitives), `ladder` / `tseq` (layouts), `svg` / `png` (writers); `pcap` and
`tables` write the other formats. Formats and addresses: docs/exports.md.
Must not import textual, simpy or asyncio (Pillow only lazily, for PNG).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import UserError
from ..model.events import Micros, Side
from ..trace import Trace
from .ladder import LadderOptions, build_ladder
from .pcap import write_pcap_to
from .scene import Scene, SceneTooBig
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

__all__ = ["FORMATS", "PNG_SCALE_RANGE", "ExportError", "LadderOptions", "check_target",
           "check_targets", "check_writable", "TseqOptions", "export_cli",
           "export_default", "export_to", "ladder_scene", "tseq_scene", "write_table"]


class ExportError(UserError):
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


PNG_SCALE_RANGE = (0.25, 8.0)
"""Smallest and largest ``png_scale`` (below 0.25 the text is unreadable, fonts vanish)."""


# ---------------------------------------------------------------- paths
def check_writable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path that a file can be written to, or `ExportError` (one line): not
    an existing directory or other non-regular file (a FIFO would block the export, a
    device would swallow it), in an existing writable directory, with a name the file
    system accepts."""
    p = Path(os.fspath(path)).expanduser()
    try:
        limit = os.pathconf(p.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(p.name)) > limit:
        raise ExportError(f"cannot write {_clip(p)}: file name longer than {limit} bytes")
    try:
        info = p.stat() if p.exists() else None
        parent = p.parent
        parent_ok = parent.is_dir()
        parent_exists = parent_ok or parent.exists()
    except OSError as exc:    # ENAMETOOLONG, ELOOP, EACCES on a parent...
        raise ExportError(f"cannot write {_clip(p)}: {exc.strerror or exc}") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise ExportError(f"{_clip(p)}: is a directory, not a file")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise ExportError(f"cannot write {_clip(p)}: not a regular file (a FIFO, device or "
                          "socket is refused)")
    if not parent_ok:
        what = "is not a directory" if parent_exists else "does not exist"
        raise ExportError(f"cannot write {_clip(p)}: directory {_clip(parent)} {what}")
    if not os.access(parent, os.W_OK) or (info is not None and not os.access(p, os.W_OK)):
        raise ExportError(f"cannot write {_clip(p)}: permission denied")
    # the permission bits do not tell everything (root on /proc or a read-only mount, a
    # full quota): open it for real, without truncating what is there, and remove what
    # this check created
    try:
        if info is None:    # a scratch file beside it (p may be a dangling symlink)
            with tempfile.NamedTemporaryFile(dir=p.resolve().parent, prefix=".nagle-sim-"):
                pass
        else:
            os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        raise ExportError(f"cannot write {_clip(p)}: {exc.strerror or exc}") from None
    return p


def _clip(path: Path | str, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else text[:limit // 2] + "…" + text[-limit // 2:]


def check_target(path: str | os.PathLike[str], fmt: str) -> Path:
    """``path`` as a Path that looks writable for ``fmt``, or ExportError."""
    text = os.fspath(path)
    if not text.strip():
        raise ExportError(f"--{fmt}: empty file name")
    p = Path(text).expanduser()
    suffixes = SUFFIXES[fmt]
    if p.suffix.lower() not in suffixes:
        raise ExportError(f"--{fmt} {_clip(p)}: expected a file name ending in "
                          f"{' or '.join(suffixes)}")
    return check_writable(p)


def check_targets(wanted: dict[str, str | os.PathLike[str]]) -> dict[str, Path]:
    """Check every output path (see `check_writable`) and that no two outputs name the same
    file (one would silently overwrite the other); return them as Paths.

    Raises:
        ExportError: with a one-line message, before anything is written.
    """
    if not wanted:
        raise ExportError("nothing to export: give at least one of "
                          + ", ".join(f"--{f}" for f in FORMATS))
    targets = {fmt: check_target(p, fmt) for fmt, p in wanted.items()}
    seen: dict[Path, str] = {}
    for fmt, p in targets.items():
        key = Path(os.path.realpath(p))
        if key in seen:
            raise ExportError(f"--{seen[key]} and --{fmt} both write {_clip(p)}: give each "
                              "output its own file")
        seen[key] = fmt
    return targets


def _write(p: Path, data: bytes | str | Callable[[BinaryIO], None]) -> Path:
    """Write ``data`` (text, bytes, or a function streaming bytes to a file) to ``p``."""
    try:
        if isinstance(data, str):
            p.write_text(data, "utf-8", newline="")
        elif isinstance(data, bytes):
            p.write_bytes(data)
        else:
            with p.open("wb") as out:
                data(out)
    except OSError as exc:
        raise ExportError(f"cannot write {_clip(p)}: {exc.strerror or exc}") from None
    return p


def _write_trace_json(trace: Trace, out: BinaryIO) -> None:
    """The trace as `run --json` prints it, streamed record by record: a big run's JSON
    (and the dict of every record) is never built whole in memory."""
    import io
    text = io.TextIOWrapper(out, encoding="utf-8", newline="")
    trace.write_json(text)
    text.write("\n")
    text.flush()
    text.detach()     # ``out`` stays the caller's to close


def _png_bytes(scene: Scene, scale: float) -> bytes:
    import io

    from .png import SUPERSAMPLE_MAX_PIXELS, PngUnavailable, render
    try:
        image = render(scene, scale)
    except (PngUnavailable, SceneTooBig) as exc:
        raise ExportError(str(exc)) from None
    buf = io.BytesIO()
    # optimize triples the encoding time of a big picture for a few % of size; keep it for
    # slide-sized ones only (the same bound as supersampling).
    small = image.width * image.height <= SUPERSAMPLE_MAX_PIXELS
    image.save(buf, format="PNG", optimize=small)
    return buf.getvalue()


# ---------------------------------------------------------------- scenes
def ladder_scene(trace: Trace, overlay: Trace | None = None, *, until_ms: float | None = None,
                 linear: bool = False, detail: str = "wire",
                 gap_label: Callable[[int, int], str | None] | None = None) -> Scene:
    """The ladder picture (SVG/PNG) of ``trace``, ``overlay`` drawn dashed on top (orange:
    a kernel's run, grey: the model's);
    ``gap_label`` names what a compressed gap was (`LadderOptions.gap_label`)."""
    until = None if until_ms is None else Micros(round(until_ms * 1000))
    try:
        return build_ladder(trace, overlay, LadderOptions(compress=not linear, until=until,
                                                          detail=detail, gap_label=gap_label))
    except SceneTooBig as exc:
        raise ExportError(str(exc)) from None


def tseq_scene(trace: Trace, overlay: Trace | None = None, *, until_ms: float | None = None,
               sender: Side = Side.CLIENT) -> Scene:
    """The time-sequence plot of ``sender``'s data (``overlay`` dashed: orange a kernel's,
    grey the model's)."""
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
               png_scale: float = 1.0,
               gap_label: Callable[[int, int], str | None] | None = None) -> list[Path]:
    """Write each requested format; return the written paths (in `FORMATS` order).

    ``overlay`` (a second, usually real, trace) is drawn over the ladder and the tseq plot.
    ``until_ms`` crops the pictures; ``linear`` draws the ladder to scale (no compressed
    gaps); ``sender`` picks the direction of the tseq plot; ``png_scale`` multiplies the PNG
    pixel size; ``gap_label`` names the ladder's compressed gaps (explain: the stall's
    cause). Every path is checked before anything is written; any problem raises
    `ExportError` with a one-line message."""
    wanted = {"pcap": pcap, "svg": svg, "png": png, "tseq": tseq, "markdown": markdown,
              "csv": csv, "json": json}
    targets = check_targets({fmt: p for fmt, p in wanted.items() if p is not None})
    low, high = PNG_SCALE_RANGE
    if not low <= png_scale <= high:
        raise ExportError(f"PNG scale must be from {low:g} to {high:g}, got {png_scale:g}")
    ladder: Scene | None = None

    def get_ladder() -> Scene:
        nonlocal ladder
        if ladder is None:
            ladder = ladder_scene(trace, overlay, until_ms=until_ms, linear=linear,
                                  gap_label=gap_label)
        return ladder

    producers: dict[str, Callable[[Path], bytes | str | Callable[[BinaryIO], None]]] = {
        "pcap": lambda p: lambda out: write_pcap_to(trace, out),
        "svg": lambda p: to_svg(get_ladder()),
        "png": lambda p: _png_bytes(get_ladder(), png_scale),
        "tseq": lambda p: _tseq_output(trace, overlay, p, until_ms, sender, png_scale),
        "markdown": lambda p: summary_markdown(trace),
        "csv": lambda p: summary_csv(trace),
        "json": lambda p: lambda out: _write_trace_json(trace, out),
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
    p = check_target(path, kind)
    try:
        return write_rows(rows, headers, p, kind, title)
    except OSError as exc:
        raise ExportError(f"cannot write {p}: {exc.strerror or exc}") from None
