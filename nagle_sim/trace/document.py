"""A trace as one document: a run's records with its title, outcome and meta.

Owns: `Trace` — the records of one run (simulated, real or captured) in the order they
happened, how it ended, and the free-form meta both executors fill — and its JSON as a
whole document (`to_json`, `dumps`, and `write_json` / `from_json` / `load` / `loads`
through `nagle_sim.trace.codec`). Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..model.events import Micros
from .codec import parse_json, read_fields, read_file, write_json
from .records import MEASURED, EventRecord, OpRecord, Outcome, SegmentRecord, Source, format_name


@dataclass(slots=True, kw_only=True)
class Trace:
    source: Source
    title: str
    segments: list[SegmentRecord] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome = Outcome.OK
    message: str = ""

    @property
    def measured(self) -> bool:
        """The segments were seen on a wire (a real run or a capture), not decided by the
        model: views label it "real" and never read a missing capture as "no stall"."""
        return self.source in MEASURED

    @property
    def end(self) -> Micros:
        times = [s.t for s in self.segments] + [o.end or o.start for o in self.ops]
        return Micros(max(times, default=0))

    def reasons(self) -> dict[str, str]:
        """The /2 ``reasons`` table: each code of a segment's ``why`` or an event's
        ``reason`` with the first sentence seen for it, segments first, in record order."""
        table: dict[str, str] = {}
        for s in self.segments:
            if s.why and s.code and s.code not in table:
                table[s.code] = s.why
        for e in self.events:
            if e.code and e.code not in table:
                table[e.code] = e.reason
        return table

    def to_json_head(self, version: int = 2,
                     reasons: dict[str, str] | None = None) -> dict[str, Any]:
        """The top-level keys before the three record lists (for /2 with its ``reasons``
        table: ``reasons`` if given, else `reasons` of the records held)."""
        head = {"format": format_name(version), "source": self.source, "title": self.title,
                "outcome": self.outcome, "message": self.message, "meta": self.meta}
        if version == 2:
            head["reasons"] = self.reasons() if reasons is None else reasons
        return head

    def to_json(self, version: int = 2) -> dict[str, Any]:
        """The whole document as one dict (``version`` 1 or 2); `write_json` streams it."""
        head = self.to_json_head(version)
        reasons = head.get("reasons")
        return {**head,
                "segments": [s.to_json(reasons) for s in self.segments],
                "ops": [o.to_json(reasons) for o in self.ops],
                "events": [e.to_json(reasons) for e in self.events]}

    def dumps(self, indent: int | None = None, version: int = 2) -> str:
        return json.dumps(self.to_json(version), indent=indent, ensure_ascii=False)

    def write_json(self, out: TextIO, version: int = 2) -> None:
        """Write exactly ``dumps(version=version)`` to ``out``, a batch of records at a
        time (`nagle_sim.trace.codec.write_json`)."""
        write_json(self, out, version)

    @classmethod
    def from_json(cls, doc: Any, where: str = "<trace>") -> Trace:
        """A `Trace` from a parsed ``nagle-sim-trace/1`` or ``/2`` document, every field
        checked (`nagle_sim.trace.codec.read_fields`)."""
        return cls(**read_fields(doc, where))

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a trace file: a regular file of at most `codec.MAX_TRACE_BYTES`, UTF-8 JSON
        nested at most `codec.MAX_DEPTH` deep; any problem is a one-line `TraceError`."""
        return cls.from_json(read_file(path), str(path))

    @classmethod
    def loads(cls, text: str, where: str = "<trace>") -> Trace:
        """A trace from JSON text (see `load` for the bounds); errors name ``where``."""
        return cls.from_json(parse_json(text, where), where)
