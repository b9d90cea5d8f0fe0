"""The trace hub: what one run (simulated, real or captured) did, in one format every view
reads and every executor writes.

The package's modules, each owning one concern:

- `records`: the records (`SegmentRecord` with flag predicates, `OpRecord`, `EventRecord`),
  `Outcome`, `Source` (which executor made the trace), the formats' names, and `Runner`
  (an executor as the rest of the program sees it: a scenario in, its trace out);
- `document`: `Trace`, a run's records with its title, outcome and meta, as one document;
- `codec`: the JSON formats (docs/trace.md): writing /2 (or /1) streamed, also while the
  run goes on (`TraceStream`), reading both with every field checked; `TraceError`;
- `summary`: the numbers a person asks of a run: per-iteration latency, segment counts,
  stalls and what held them, each write's segments;
- `rows`: the trace flattened into the lines every ladder draws (terminal, SVG, the app);
- `units`: µs to ms, the one conversion.

Imports the model's vocabulary and the scenario hub only; must not import simpy, asyncio,
textual or rich. `records`, `document`, `codec` and `units` are compiled in a wheel
(setup.py).
"""

from .codec import (
    MAX_DEPTH,
    MAX_MS,
    MAX_NUMBER,
    MAX_TEXT,
    MAX_TRACE_BYTES,
    TraceError,
    TraceStream,
)
from .document import Trace
from .records import (
    FORMAT,
    FORMAT_V1,
    FORMAT_V2,
    VERSIONS,
    EventRecord,
    ModelRunner,
    OpRecord,
    Outcome,
    Runner,
    SegmentRecord,
    Source,
    event_records,
)
from .units import ms, ms_text

__all__ = [
    "FORMAT", "FORMAT_V1", "FORMAT_V2", "MAX_DEPTH", "MAX_MS", "MAX_NUMBER", "MAX_TEXT",
    "MAX_TRACE_BYTES", "VERSIONS", "EventRecord", "OpRecord", "Outcome", "ModelRunner", "Runner",
    "SegmentRecord", "Source", "Trace", "TraceError", "TraceStream", "event_records", "ms",
    "ms_text",
]
