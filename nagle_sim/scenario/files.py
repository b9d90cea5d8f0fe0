"""Bounded reading of the user's files: a scenario, a script, a saved trace.

Owns: `read_text` (a regular file of at most a limit, UTF-8, one-line `ScenarioError`
otherwise) and `read_regular_file` (the bytes, opened without blocking so a FIFO cannot
hang a command, read at most the limit + 1 bytes so a huge or growing file costs no more
than the limit). Imports only the standard library and `errors`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

from .errors import ScenarioError

MAX_FILE_BYTES: Final = 1_048_576
"""A scenario file (or script text) is refused above this size, before any parsing."""


def read_text(path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "a scenario file"
              ) -> str:
    """A text file's contents (a scenario; ``what`` names the kind in errors): unreadable,
    non-regular (a FIFO would block), oversized or non-UTF-8 files raise a one-line
    `ScenarioError` before anything is parsed."""
    p = Path(path)
    try:
        raw = read_regular_file(p, limit)
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{p}: is a directory, not {what}") from None
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except FileTooBig as exc:
        raise ScenarioError(f"{p}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    return text


class FileTooBig(Exception):
    """`read_regular_file` refused a file; ``str(err)`` says why, without the path."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes. Opens
    without blocking (a FIFO with no writer would hang a plain open) and reads at most
    ``limit + 1`` bytes, so a huge or growing file costs no more than the limit.

    Raises:
        OSError: the file cannot be opened or read (FileNotFoundError, IsADirectoryError…).
        FileTooBig: it is not a regular file, or is bigger than ``limit``.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(info.st_mode):
            raise FileTooBig("not a regular file (a FIFO, device or socket is refused)")
        if info.st_size > limit:
            raise FileTooBig(f"{info.st_size:,} bytes is too big (limit {limit:,})")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooBig(f"more than {limit:,} bytes is too big (limit {limit:,})")
        return b"".join(chunks)
    finally:
        os.close(fd)
