"""The trace's records: what one run (simulated or real) did, in one shape for every view.

Owns: the records of a trace (`SegmentRecord` with its flag predicates, `OpRecord`,
`EventRecord`) and each one's JSON object (`to_json`, the reference the streamed writer
matches), how a run ended (`Outcome`), the model's events made records (`event_records`),
the trace formats' names, and `Runner` (an executor as everything else sees it). Times are
integer µs, counted from the client's SYN leaving. The `Trace` that holds the records is
`nagle_sim.trace.document`'s. Must not import simpy, asyncio, textual or rich.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..model.events import (
    KIND_NAME,
    REASON_CODE,
    REASON_TEXT,
    TIMER_NAME,
    Micros,
    Reason,
    Side,
    TraceEvent,
)
from .units import ms

if TYPE_CHECKING:
    from ..scenario import Scenario
    from .document import Trace

FORMAT_V1: Final = "nagle-sim-trace/1"
FORMAT_V2: Final = "nagle-sim-trace/2"
FORMAT: Final = FORMAT_V2
"""What `Trace.dumps` and `Trace.write_json` write unless given ``version=1``."""
VERSIONS: Final[dict[str, int]] = {FORMAT_V1: 1, FORMAT_V2: 2}
"""The formats `Trace.from_json` reads, by their ``format`` value."""
_FORMAT_OF: Final = {n: f for f, n in VERSIONS.items()}


def format_name(version: int) -> str:
    """The ``format`` value of trace format ``version`` (1 or 2)."""
    if version not in _FORMAT_OF:
        raise ValueError(f"trace format version {version!r}: use 1 or 2")
    return _FORMAT_OF[version]


class Outcome(StrEnum):
    """How a run ended; the value is the JSON text (a `StrEnum`, so it prints as that)."""

    OK = "ok"
    DEADLOCK = "deadlock"
    """Every unfinished side waits for something only the other could give."""
    ERROR = "error"
    """A side's call failed (end of stream on read, a call after close, a socket error)."""
    LIMIT = "limit"
    """The run stopped at one of its bounds (time, segments, records)."""


class Source(StrEnum):
    """Which executor made a trace: the JSON ``source`` text (a `StrEnum`, so it prints and
    compares as that). A view asks `Trace.measured` rather than naming a source."""

    SIM = "sim"
    """The model (`nagle_sim.sim`): every decision has its reason."""
    REALNET = "realnet"
    """Real sockets (`realnet`): the calls as timed, the segments as captured."""
    CAPTURE = "capture"
    """A pcap of real programs read by `explain`: segments only, no calls."""
    MODEL = "model"
    """The model's re-run of a capture beside it (explain's overlay)."""
    UNKNOWN = "?"
    """A saved trace that does not say (read as written, never written by us)."""


MEASURED: Final = frozenset({Source.REALNET, Source.CAPTURE})
"""The sources whose segments were seen on a wire rather than decided by the model."""


def _compact(code: str, text: str, reasons: dict[str, str] | None) -> bool:
    """Whether a record may leave its sentence out: writing /2 (``reasons`` is the table)
    and the table holds exactly this sentence under the record's code. A code seen with
    two sentences keeps the first in the table; the others are written out in full."""
    return reasons is not None and bool(code) and reasons.get(code) == text


class Runner(Protocol):
    """An executor as the rest of the program sees it: a scenario in, its finished trace
    out. `nagle_sim.runners` makes them (the simulator, real sockets here or with a remote
    server side); the app, compare, sweep, explain and lessons' claims receive them and
    never import an executor. A runner may take keyword options of its own (the
    simulator's ``cancelled``, ``record_limit``): callers that need one ask for it (a
    `ModelRunner`, or by looking, as the app does for ``cancelled``)."""

    def __call__(self, scenario: Scenario, /) -> Trace: ...


class ModelRunner(Runner, Protocol):
    """A `Runner` that takes the simulator's keyword options (`nagle_sim.runners.simulate`:
    ``sleeps``, ``host_delays``, ``record_limit``, ...): what compare's aligned model runs
    need, to run the model with the real run's measured sleeps. Real runners are not."""

    def __call__(self, scenario: Scenario, /, **options: Any) -> Trace: ...


@dataclass(slots=True, kw_only=True)
class SegmentRecord:
    t: Micros
    src: Side
    seq: int
    ack: int
    length: int
    flags: str
    window: int = 0
    arrive: Micros | None = None
    why: str = ""
    code: str = ""

    # Each record type writes its own __init__ (the same one @dataclass would): compiled
    # with the module (setup.py), it builds a record natively; the generated one stays
    # interpreted code even in the compiled build, and a big run builds a million records.
    def __init__(self, *, t: Micros, src: Side, seq: int, ack: int, length: int, flags: str,
                 window: int = 0, arrive: Micros | None = None, why: str = "",
                 code: str = "") -> None:
        self.t = t
        self.src = src
        self.seq = seq
        self.ack = ack
        self.length = length
        self.flags = flags
        self.window = window
        self.arrive = arrive
        self.why = why
        self.code = code

    @property
    def dst(self) -> Side:
        return self.src.peer

    @property
    def is_data(self) -> bool:
        """The segment carries payload (a retransmission included)."""
        return self.length > 0

    # The flags are tcpdump's letters (S F R P A, and E W for ECN); callers ask these
    # predicates instead of testing letters, so a record type of their own could answer.
    @property
    def has_syn(self) -> bool:
        return "S" in self.flags

    @property
    def has_ack(self) -> bool:
        return "A" in self.flags

    @property
    def has_fin(self) -> bool:
        return "F" in self.flags

    @property
    def has_rst(self) -> bool:
        return "R" in self.flags

    @property
    def has_psh(self) -> bool:
        return "P" in self.flags

    @property
    def is_control(self) -> bool:
        """SYN, FIN or RST: the segment opens, closes or resets the connection."""
        return "S" in self.flags or "F" in self.flags or "R" in self.flags

    @property
    def is_pure_ack(self) -> bool:
        """No payload and no SYN, FIN or RST: the segment only acknowledges (a delayed or
        quick ACK, a window update). PSH or ECN bits do not matter; a FIN-ACK is not one."""
        return (self.length == 0 and "A" in self.flags
                and "S" not in self.flags and "F" not in self.flags and "R" not in self.flags)

    def label(self) -> str:
        flags = self.flags.replace("A", ".") or "."
        if self.length:
            return f"{flags} {self.seq}:{self.seq + self.length}({self.length})"
        if "A" not in self.flags:
            # a SYN (or a bare RST) carries no acknowledgment: its ack field is not one, so
            # "S ack 0" claimed an ACK that never was; tcpdump prints its seq instead
            return f"{flags} seq {self.seq}"
        return f"{flags} ack {self.ack}"

    def to_json(self, reasons: dict[str, str] | None = None) -> dict[str, Any]:
        """The JSON object: /1 when ``reasons`` is None, else /2 against that table."""
        out: dict[str, Any] = {"t_ms": ms(self.t), "from": self.src.value, "seq": self.seq,
                               "ack": self.ack, "len": self.length, "flags": self.flags,
                               "win": self.window}
        if self.arrive is not None:
            out["arrive_ms"] = ms(self.arrive)
        if self.why and reasons is None:
            out["why"] = self.why
            out["code"] = self.code
        elif self.why:
            out["code"] = self.code
            if not _compact(self.code, self.why, reasons):
                out["why"] = self.why
        return out


@dataclass(slots=True, kw_only=True)
class OpRecord:
    side: Side
    op: str
    arg: str
    start: Micros
    end: Micros | None
    line: int = 0
    iteration: tuple[int, ...] = ()
    loop: int = 0
    """Which top-level ``repeat`` the op ran in (its position in the script, 1-based; 0:
    none); tells loops apart."""
    result: str | None = None

    def __init__(self, *, side: Side, op: str, arg: str, start: Micros, end: Micros | None,
                 line: int = 0, iteration: tuple[int, ...] = (), loop: int = 0,
                 result: str | None = None) -> None:
        self.side = side
        self.op = op
        self.arg = arg
        self.start = start
        self.end = end
        self.line = line
        self.iteration = iteration
        self.loop = loop
        self.result = result

    def to_json(self, reasons: dict[str, str] | None = None) -> dict[str, Any]:
        """The JSON object (the same in /1 and /2)."""
        out: dict[str, Any] = {"side": self.side.value, "op": self.op, "arg": self.arg,
                               "start_ms": ms(self.start), "end_ms": ms(self.end)}
        if self.line:
            out["line"] = self.line
        if self.iteration:
            out["iter"] = list(self.iteration)
            out["loop"] = self.loop
        if self.result is not None:
            out["result"] = self.result
        return out


@dataclass(slots=True, kw_only=True)
class EventRecord:
    t: Micros
    side: Side
    kind: str
    code: str
    reason: str
    detail: str = ""
    timer: str | None = None
    deadline: Micros | None = None
    data: dict[str, int] = field(default_factory=dict)
    by: str = ""
    """Who decided: "" for the executor's own record (the model's decisions in a
    simulated trace), ``"kernel"`` for a decision the running kernel was observed taking
    (`nagle-sim watch`, real runs where watch can load; docs/watch.md)."""

    def __init__(self, *, t: Micros, side: Side, kind: str, code: str, reason: str,
                 detail: str = "", timer: str | None = None, deadline: Micros | None = None,
                 data: dict[str, int] | None = None, by: str = "") -> None:
        self.t = t
        self.side = side
        self.kind = kind
        self.code = code
        self.reason = reason
        self.detail = detail
        self.timer = timer
        self.deadline = deadline
        self.data = {} if data is None else data
        self.by = by

    @classmethod
    def from_model(cls, e: TraceEvent) -> EventRecord:
        """The record of a model event (see `event_records`)."""
        return event_records([e])[0]

    def text(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason

    def to_json(self, reasons: dict[str, str] | None = None) -> dict[str, Any]:
        """The JSON object: /1 when ``reasons`` is None, else /2 against that table."""
        out: dict[str, Any] = {"t_ms": ms(self.t), "side": self.side.value, "kind": self.kind,
                               "code": self.code}
        if not _compact(self.code, self.reason, reasons):
            out["reason"] = self.reason
        if self.detail:
            out["detail"] = self.detail
        if self.timer:
            out["timer"] = self.timer
        if self.deadline is not None:
            out["deadline_ms"] = ms(self.deadline)
        if self.by:
            out["by"] = self.by
        if self.data:
            out["data"] = self.data
        return out


NO_DATA: Final[dict[str, int]] = {}
"""The ``data`` of every event without any: one shared empty dict, not one per event (a
big run has hundreds of thousands). Nothing writes into a record's ``data``."""
_SHARED: Final[dict[tuple[tuple[str, int], ...], dict[str, int]]] = {}
SHARED_MAX: Final = 4096
"""Distinct ``data`` values `_shared` remembers before it starts over (bounded memory)."""


_SHARED_ONE: Final[dict[str, dict[Any, dict[str, int]]]] = {}
"""`_shared`'s table for the common ``data``, one number: name → value → the dict (no
key tuple to build, hash and compare per event)."""


def _shared(data: dict[str, int]) -> dict[str, int]:
    """One dict for all equal ``data`` of model events (whole numbers only: ``True ==
    1``, yet they print differently)."""
    raw: dict[str, Any] = data  # untyped values: compiled, an int variable turns a bool to 1
    if len(raw) == 1:
        for name, value in raw.items():
            if type(value) is not int:
                return data
            by_value = _SHARED_ONE.get(name)
            if by_value is None:
                if len(_SHARED_ONE) >= SHARED_MAX:
                    _SHARED_ONE.clear()
                by_value = _SHARED_ONE[name] = {}
            one = by_value.get(value)
            if one is None:
                if len(by_value) >= SHARED_MAX:
                    by_value.clear()
                by_value[value] = one = data
            return one
    pairs: list[tuple[str, Any]] = []
    for name, value in raw.items():
        if type(value) is not int:
            return data
        pairs.append((name, value))
    key = tuple(pairs)
    known = _SHARED.get(key)
    if known is None:
        if len(_SHARED) >= SHARED_MAX:
            _SHARED.clear()
        _SHARED[key] = known = data
    return known


_DETAILS: Final[dict[str, str]] = {}
_REASON_WORDS: Final = {r: (REASON_CODE[r], REASON_TEXT[r]) for r in Reason}
"""A reason's code and sentence: one lookup per event, not two."""


def _shared_detail(detail: str) -> str:
    """One string for all equal ``detail`` texts (as `sys.intern` would, but a plain dict
    lookup, and forgotten after `SHARED_MAX` distinct ones)."""
    known = _DETAILS.get(detail)
    if known is None:
        if len(_DETAILS) >= SHARED_MAX:
            _DETAILS.clear()
        known = _DETAILS[detail] = detail
    return known


def event_records(events: list[TraceEvent]) -> list[EventRecord]:
    """The records of model events. Equal ``detail`` texts and ``data`` dicts are shared
    between records (a big run repeats a few hundred details and data values hundreds of
    thousands of times: about 25 MB of 10,000-message S3 NODELAY). A plain function that
    names the class, not a classmethod mapped over the events: compiled, it then builds
    each record natively instead of through a Python-level call with keywords."""
    out: list[EventRecord] = []
    for e in events:
        detail, data, timer = e.detail, e.data, e.timer
        code, text = _REASON_WORDS[e.reason]
        out.append(EventRecord(
            t=e.at, side=e.side, kind=KIND_NAME[e.kind], code=code, reason=text,
            detail=_shared_detail(detail) if detail and type(detail) is str else detail,
            timer=TIMER_NAME[timer] if timer is not None else None, deadline=e.deadline,
            data=_shared(data) if data else NO_DATA))
    return out
