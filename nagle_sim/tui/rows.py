"""The ladder rows of one run, worded when first read.

A 10,000-message NODELAY run has 500,000 ladder rows; wording every one of them (a label
and an explanation sentence each, `trace.rows.make_row`) took longer than simulating the
run, and the app reads only the rows on screen and the one selected. `RowList` keeps each
row's time and trace item (`trace.rows.row_items`) and makes a row on first access.
Pure Python: must not import textual, simpy or realnet.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import overload

from ..trace import SegmentRecord, Trace
from ..trace.rows import Row, RowItem, make_row, row_items


class RowList(Sequence[Row]):
    """The rows of ``trace`` at ``detail``, in ladder order; ``times[i]`` is row i's time."""

    __slots__ = ("times", "_items", "_made")

    def __init__(self, trace: Trace, detail: str = "normal") -> None:
        pairs = row_items(trace, detail)
        self.times: list[int] = [t for t, _ in pairs]
        self._items: list[RowItem] = [item for _, item in pairs]
        self._made: dict[int, Row] = {}

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._items)))]
        if index < 0:
            index += len(self._items)
        row = self._made.get(index)
        if row is None:
            row = self._made[index] = make_row(self._items[index])  # IndexError past the end
        return row

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def segments(self) -> Iterator[tuple[int, SegmentRecord]]:
        """(row index, segment) of every segment row, without wording any row."""
        for i, item in enumerate(self._items):
            if isinstance(item, SegmentRecord):
                yield i, item


def row_times(rows: Sequence[Row]) -> list[int]:
    """Each row's time (a `RowList` has them without making its rows)."""
    return rows.times if isinstance(rows, RowList) else [r.t for r in rows]


def row_segments(rows: Sequence[Row]) -> Iterator[tuple[int, SegmentRecord]]:
    """(row index, segment) of every segment row of ``rows``."""
    if isinstance(rows, RowList):
        return rows.segments()
    return ((i, r.segment) for i, r in enumerate(rows) if r.segment is not None)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for code that allocates hundreds of thousands
    of objects next to a big trace, as the simulator does while it runs. Each full pass the
    allocation triggers would rescan the trace's million records (half the time of
    building a 10,000-message NODELAY run's rows); what is built here forms no cycles and
    is freed by reference counting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
