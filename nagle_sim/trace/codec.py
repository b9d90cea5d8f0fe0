"""The trace's JSON: `nagle-sim-trace/2` written, /1 and /2 read (docs/trace.md).

Owns: writing a trace (`write_json`: exactly ``json.dumps`` of `Trace.to_json`, streamed
a batch of records at a time and formatted without a dict per record), reading one
(`read_file`, `parse_json`, `read_fields`: every field checked, bounded size, nesting and
text, a fast path for well-formed records) into the fields `nagle_sim.trace.document.Trace`
is built from, and `TraceError`, the one-line message for a trace that cannot be read.
Times are milliseconds (3 decimals) in JSON. Must not import simpy, asyncio, textual or
rich.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from ..errors import UserError
from ..model.events import Micros, Side
from ..scenario.errors import ScenarioError
from ..scenario.files import read_text
from .records import (
    FORMAT_V1,
    FORMAT_V2,
    NO_DATA,
    SHARED_MAX,
    VERSIONS,
    EventRecord,
    OpRecord,
    Outcome,
    SegmentRecord,
    Source,
    format_name,
)
from .units import ms

if TYPE_CHECKING:
    from .document import Trace

_STREAM_BATCH: Final = 2048
"""Records joined into one ``write`` by `write_json` (fewer calls, bounded text)."""
_enc = json.encoder.encode_basestring   # the C quoter json.dumps(ensure_ascii=False) uses


class TraceError(UserError, ValueError):
    """A trace file that cannot be read. ``str(err)`` is a one-line message."""


MAX_TRACE_BYTES: Final = 128 * 1_048_576
"""A trace file is refused above this size, before parsing (JSON costs ~10× its size in
memory once parsed)."""
MAX_TEXT: Final = 16_384
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0/C1 control characters other than tab and newline: never valid in trace text."""
"""Longest string a trace field may hold (an op label, a reason, a title...)."""
MAX_MS: Final = 1e10
"""Largest time (ms, about 115 days) a trace may carry, either sign."""
MAX_NUMBER: Final = 2**63 - 1
"""Largest sequence number, length, window or count a trace may carry."""
_NUMBER: Final = (int, float)
MAX_DEPTH: Final = 64
"""Deepest nesting of JSON arrays and objects a trace may have (``meta`` is free-form)."""


def _us(value: Any, where: str) -> Micros:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceError(f"{where}: expected a number of milliseconds, got {_shown(value)}")
    # compared before any float conversion: math.isfinite(10**400) raises OverflowError
    if not (-MAX_MS <= value <= MAX_MS):
        raise TraceError(f"{where}: time {_shown(value)} ms is not a finite number of at "
                         f"most {MAX_MS:g} ms")
    return Micros(round(value * 1000))


def _int(value: Any, where: str, low: int = 0, high: int = MAX_NUMBER) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{where}: expected a whole number, got {_shown(value)}")
    if not low <= value <= high:
        raise TraceError(f"{where}: {_shown(value)} is out of range ({low} to {high})")
    return value


def _text(value: Any, where: str, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, list | dict):
        raise TraceError(f"{where}: expected text, got {_shown(value)}")
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_TEXT:
        raise TraceError(f"{where}: {len(text):,} characters of text (limit {MAX_TEXT:,})")
    if bad := _CONTROL.search(text):
        # an escape sequence in a title would reach the terminal (or break an SVG)
        raise TraceError(f"{where}: text holds the control character "
                         f"{repr(bad.group())[1:-1]}")
    return text


def _outcome(value: Any, where: str) -> Outcome:
    if value is None:
        return Outcome.OK
    try:
        return Outcome(value)
    except (ValueError, TypeError):
        names = ", ".join(f'"{o}"' for o in Outcome)
        raise TraceError(f"{where}: expected one of {names}, got {_shown(value)}") from None


def _source(value: Any, where: str) -> Source:
    if value is None:
        return Source.UNKNOWN
    try:
        return Source(value)
    except (ValueError, TypeError):
        names = ", ".join(f'"{s}"' for s in Source if s is not Source.UNKNOWN)
        raise TraceError(f"{where}: expected one of {names}, got {_shown(value)}") from None


def _side(value: Any, where: str) -> Side:
    try:
        return Side(value)
    except (ValueError, TypeError):
        raise TraceError(f"{where}: expected \"client\" or \"server\", got "
                         f"{_shown(value)}") from None


def _shown(value: Any) -> str:
    """``repr(value)`` clipped for a one-line message."""
    if isinstance(value, list | dict):
        return "an array" if isinstance(value, list) else "an object"
    if isinstance(value, int) and value.bit_length() > 200:   # not converted to text
        return "a number of more than 60 digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def _depth(value: Any) -> int:
    """How deep arrays and objects nest in ``value``, without recursion (stops past
    `MAX_DEPTH`)."""
    deepest, pending = 0, [(value, 0)]
    while pending and deepest <= MAX_DEPTH:
        node, depth = pending.pop()
        children = node.values() if isinstance(node, dict) else node
        deepest = max(deepest, depth + 1)
        pending.extend((c, depth + 1) for c in children if isinstance(c, list | dict))
    return deepest


def _reason_table(doc: dict[str, Any], where: str) -> dict[str, str]:
    """A /2 document's checked ``reasons`` table (code → sentence)."""
    table = doc.get("reasons", {})
    if not isinstance(table, dict):
        raise TraceError(f"{where}: reasons: expected an object, got {_shown(table)}")
    return {_text(code, f"{where}: reasons"): _text(text, f"{where}: reasons.{code[:40]}")
            for code, text in table.items()}


def _from_table(record: dict[str, Any], reasons: dict[str, str], at: str) -> str:
    """The sentence a /2 record without its own refers to by its ``code`` ("" without
    one)."""
    code = _text(record.get("code"), f"{at}.code")
    if not code:
        return ""
    try:
        return reasons[code]
    except KeyError:
        raise TraceError(f"{at}.code: {_shown(code)} is not in the reasons table") from None


_ENCODE: Final = json.JSONEncoder(ensure_ascii=False).encode
_CLIENT: Final = Side.CLIENT
"""Bound once: compiled, ``Side.CLIENT`` is an attribute lookup on an interpreted class."""
_CLIENT_JSON: Final = _enc(Side.CLIENT.value)
_SERVER_JSON: Final = _enc(Side.SERVER.value)
_MS_FRACTION: Final = tuple(f".{r:03d}".rstrip("0") if r else ".0" for r in range(1000))
"""The decimals of a time in ms, by its µs remainder: 500 → ".5", 0 → ".0"."""
_SMALL: Final = tuple(str(n) for n in range(1000))
"""``str(n)`` for small whole numbers (lengths, script lines, loop indexes): a table
lookup instead of a new string per record."""
_FAST_MS: Final = 10**15
"""Below this many µs, a time's ms text is built from whole numbers (see `_ms`)."""


def _ms(us: Micros | None) -> str:
    """``json.dumps(ms(us))``. For a whole number of µs, ``ms(us)`` is the double nearest
    a 3-decimal number (far below 1e10 ms) and its repr is that number with trailing zeros
    cut (at least one decimal): written from ``divmod(us, 1000)``, without going through
    a float (tests/test_speed_paths.py checks this against ``json.dumps``)."""
    if us is None:
        return "null"
    if type(us) is int and 0 <= us < _FAST_MS:
        whole, part = divmod(us, 1000)
        return f"{whole}{_MS_FRACTION[part]}"
    return repr(us / 1000) if type(us) is int else repr(ms(us))


def _small(n: int) -> str:
    """``str(n)``, from `_SMALL` when it is there."""
    return _SMALL[n] if 0 <= n < 1000 else str(n)


# The constant text around a segment's side, per side (one piece instead of three).
_FROM_CLIENT: Final = ', "from": ' + _CLIENT_JSON + ', "seq": '
_FROM_SERVER: Final = ', "from": ' + _SERVER_JSON + ', "seq": '


class _OpHead:
    """The text of an op record up to its start time, and the op and arg it is for."""

    def __init__(self) -> None:
        self.op = ""
        self.arg = ""
        self.text = ""


class _Middle:
    """An event's text from its side to its timer, and the fields it was made of."""

    def __init__(self, client: bool, kind: str, code: str, reason: str, detail: str,
                 timer: str | None, text: str) -> None:
        self.client = client
        self.kind = kind
        self.code = code
        self.reason = reason
        self.detail = detail
        self.timer = timer
        self.text = text


class _RecordWriter:
    """Writes trace records as JSON text: each of `segment`, `op` and `event` gives
    exactly ``json.dumps(r.to_json(reasons), ensure_ascii=False)`` (the test suite holds
    them byte-identical), for one `Trace.write_json` call.

    Why it looks like this (compiled, callgrind on S3 NODELAY): each record is ONE
    f-string, its optional parts chosen first as pieces that are "" when absent (a ``text
    +=`` chain built a new string per optional field). Building that string costs about
    75 instructions per piece, however short, so the pieces records repeat are cached here
    as few, whole pieces: an event's side, kind, code, reason, detail and timer as one (a
    few hundred combinations in a big run); an op's side, op and arg; a segment's flags
    and window, and its reason tail with the closing brace; an event's ``data`` text by
    the dict (the trace shares equal dicts); the whole ms of the last time written
    (consecutive times nearly always share it). Each cache entry is checked against every
    field it stands for before it is reused. Whole numbers are written with ``str``, the
    same text as JSON's for an int."""

    def __init__(self, reasons: dict[str, str] | None) -> None:
        self.reasons = reasons
        """The /2 ``reasons`` table; None writes /1."""
        self.quoted: dict[str, str] = {}
        self.whole = -1
        self.whole_text = ""
        """The last whole ms written, and its text."""
        self.tails: dict[str, tuple[str, str]] = {}
        """A segment's sentence → (its code, the text after ``"arrive_ms"``)."""
        self.flags_win: dict[str, tuple[int, str]] = {}
        """A segment's flags → (a window, the text of both)."""
        self.middles: dict[int, _Middle] = {}
        """An event's text from side to timer, by its fields' identities (see `event`);
        at most `SHARED_MAX` kept (a loaded trace shares no strings)."""
        self.client_head = _OpHead()
        self.server_head = _OpHead()
        self.data_texts: dict[int, tuple[dict[str, int], str]] = {}
        """``id(data)`` → (that dict, the text of it and the closing brace). The dict is
        kept, so its id is not reused by another while this writer lives; nothing changes
        a record's ``data`` while the trace is written."""

    def quote(self, text: str) -> str:
        """``text`` as a JSON string (computed once per distinct text)."""
        quoted = self.quoted.get(text)
        if quoted is None:
            if len(self.quoted) >= SHARED_MAX:   # bounded, also for a streamed run
                self.quoted.clear()
            quoted = self.quoted[text] = _enc(text)
        return quoted

    def ms(self, us: Micros) -> tuple[str, str]:
        """``_ms(us)`` as two pieces, the whole ms and the decimals (no string joined)."""
        if 0 <= us < _FAST_MS:
            try:
                part = _MS_FRACTION[us % 1000]
            except TypeError:   # a float time (pure build: compiled records refuse one)
                return _ms(us), ""
            whole = us // 1000
            if whole != self.whole:
                self.whole = whole
                self.whole_text = str(whole)
            return self.whole_text, part
        return _ms(us), ""

    def segment(self, s: SegmentRecord) -> str:
        t_whole, t_part = self.ms(s.t)
        arrive = s.arrive
        if arrive is None:
            arrive_key = arrive_whole = arrive_part = ""
        else:
            arrive_key = ', "arrive_ms": '
            arrive_whole, arrive_part = self.ms(arrive)
        flags = s.flags
        window = s.window
        known = self.flags_win.get(flags)
        if known is not None and known[0] == window:
            flags_win = known[1]
        else:
            flags_win = f', "flags": {self.quote(flags)}, "win": {window}'
            if len(self.flags_win) >= SHARED_MAX:
                self.flags_win.clear()
            self.flags_win[flags] = (window, flags_win)
        tail = self.segment_tail(s.why, s.code) if s.why else "}"
        side_seq = _FROM_CLIENT if s.src is _CLIENT else _FROM_SERVER
        return (f'{{"t_ms": {t_whole}{t_part}{side_seq}{s.seq}, '
                f'"ack": {s.ack}, "len": {_small(s.length)}{flags_win}'
                f'{arrive_key}{arrive_whole}{arrive_part}{tail}')

    def segment_tail(self, why: str, code: str) -> str:
        """What ends a segment with the (non-empty) sentence ``why``: in /1 ``why`` and
        ``code``, in /2 ``code`` and, unless the table holds this sentence for it,
        ``why``; then the closing brace. Cached by sentence; a hit has the same code."""
        known = self.tails.get(why)
        if known is not None and known[0] == code:
            return known[1]
        reasons = self.reasons
        if reasons is None:
            tail = f', "why": {self.quote(why)}, "code": {self.quote(code)}}}'
        elif code and reasons.get(code) == why:
            tail = f', "code": {self.quote(code)}}}'
        else:
            tail = f', "code": {self.quote(code)}, "why": {self.quote(why)}}}'
        if len(self.tails) >= SHARED_MAX:
            self.tails.clear()
        self.tails[why] = (code, tail)
        return tail

    def op(self, o: OpRecord) -> str:
        client = o.side is _CLIENT
        op, arg = o.op, o.arg
        # the text up to the start time, for the last (op, arg) of each side: a side's
        # ops come in runs of one call (a loop of writes), while the two sides interleave
        head = self.client_head if client else self.server_head
        if op != head.op or arg != head.arg or not head.text:   # no text: not yet made
            head.op, head.arg = op, arg
            side = _CLIENT_JSON if client else _SERVER_JSON
            head.text = (f'{{"side": {side}, "op": {self.quote(op)}, '
                         f'"arg": {self.quote(arg)}, "start_ms": ')
        start_whole, start_part = self.ms(o.start)
        end = o.end
        if end is None:
            end_whole, end_part = "null", ""
        else:
            end_whole, end_part = self.ms(end)
        line = o.line
        line_key, line_text = (', "line": ', _small(line)) if line else ("", "")
        iteration = o.iteration
        result = o.result
        # loop indexes differ at nearly every op (nothing to cache): the common one- and
        # two-level loops are written into the record's own string
        if len(iteration) == 2 and result is None:
            return (f'{head.text}{start_whole}{start_part}, "end_ms": {end_whole}{end_part}'
                    f'{line_key}{line_text}, "iter": [{_small(iteration[0])}, '
                    f'{_small(iteration[1])}], "loop": {_small(o.loop)}}}')
        if len(iteration) == 1 and result is None:
            return (f'{head.text}{start_whole}{start_part}, "end_ms": {end_whole}{end_part}'
                    f'{line_key}{line_text}, "iter": [{_small(iteration[0])}], '
                    f'"loop": {_small(o.loop)}}}')
        if iteration:
            iter_text = (f', "iter": [{", ".join([_small(n) for n in iteration])}], '
                         f'"loop": {_small(o.loop)}')
        else:
            iter_text = ""
        end_text = "}" if result is None else f', "result": {_ENCODE(result)}}}'
        return (f'{head.text}{start_whole}{start_part}, "end_ms": {end_whole}{end_part}'
                f'{line_key}{line_text}{iter_text}{end_text}')

    def event(self, e: EventRecord) -> str:
        t_whole, t_part = self.ms(e.t)
        client = e.side is _CLIENT
        kind, code, reason, detail, timer = e.kind, e.code, e.reason, e.detail, e.timer
        # keyed by the fields' identities (a tuple of them as the key cost twice as much:
        # built, hashed and compared per event); equal keys are told apart by checking
        # each field, so a clash costs a miss, never a wrong text
        key = id(kind) ^ id(code) ^ id(reason) ^ id(detail) ^ id(timer) ^ client
        known = self.middles.get(key)
        if (known is not None and known.kind is kind and known.code is code
                and known.reason is reason and known.detail is detail
                and known.timer is timer and known.client == client):
            middle = known.text
        else:
            middle = self.event_middle(e, client)
            if len(self.middles) >= SHARED_MAX:
                self.middles.clear()
            self.middles[key] = _Middle(client, kind, code, reason, detail, timer, middle)
        deadline = e.deadline
        if deadline is None:
            deadline_key = deadline_whole = deadline_part = ""
        else:
            deadline_key = ', "deadline_ms": '
            deadline_whole, deadline_part = self.ms(deadline)
        data = e.data
        end_text = self.data(data) if data else "}"
        if e.by:
            end_text = f', "by": {self.quote(e.by)}{end_text}'
        return (f'{{"t_ms": {t_whole}{t_part}{middle}'
                f'{deadline_key}{deadline_whole}{deadline_part}{end_text}')

    def event_middle(self, e: EventRecord, client: bool) -> str:
        """An event's text from its side to its timer."""
        code = e.code
        reasons = self.reasons
        if reasons is None or not code or reasons.get(code) != e.reason:
            reason_text = f', "reason": {self.quote(e.reason)}'
        else:
            reason_text = ""
        detail_text = f', "detail": {self.quote(e.detail)}' if e.detail else ""
        timer_text = f', "timer": {self.quote(e.timer)}' if e.timer else ""
        side = _CLIENT_JSON if client else _SERVER_JSON
        return (f', "side": {side}, "kind": {self.quote(e.kind)}, "code": {self.quote(code)}'
                f'{reason_text}{detail_text}{timer_text}')

    def data(self, data: dict[str, int]) -> str:
        """``, "data": `` `_data_text` and the closing brace, once per dict."""
        known = self.data_texts.get(id(data))
        if known is not None and known[0] is data:
            return known[1]
        text = f', "data": {_data_text(data)}}}'
        if len(self.data_texts) >= SHARED_MAX:
            self.data_texts.clear()
        self.data_texts[id(data)] = (data, text)
        return text


def _data_text(data: dict[str, Any]) -> str:
    """``json.dumps(data, ensure_ascii=False)`` for an event's ``data``: whole numbers
    written directly (anything else, e.g. a bool, through ``json``). The values are typed
    ``Any`` so that compiled code tests each as it is (as ``int`` a bool would already be
    0 or 1)."""
    parts = []
    for key, value in data.items():
        if type(value) is not int:
            return _ENCODE(data)
        parts.append(f"{_enc(key)}: {value}")
    return "{" + ", ".join(parts) + "}"


_RECORD_LISTS: Final = ("segments", "ops", "events")
_SIDES: Final = {side.value: side for side in Side}

# Reading a record: a fast path accepts the common, well-formed record without building
# a message per field; anything it does not accept (a missing key, an odd type, a value out
# of range, a /2 code not in the table) returns None, and the checked path reads the
# record again and raises the precise one-line error. Both give the same record for any
# input the fast path accepts (tests/test_trace_format.py compares them).
def _fresh(text: str, ok: set[str]) -> bool:
    """Whether a text not seen before is valid (then remembered as such)."""
    if len(text) > MAX_TEXT or _CONTROL.search(text):
        return False
    ok.add(text)
    return True


def _segment_fast(s: Any, reasons: dict[str, str] | None,
                  ok: set[str]) -> SegmentRecord | None:
    if type(s) is not dict:
        return None
    try:
        t, frm, seq, ack, length = s["t_ms"], s["from"], s["seq"], s["ack"], s["len"]
        flags = s["flags"]
    except KeyError:
        return None
    win, arrive, code = s.get("win", 0), s.get("arrive_ms"), s.get("code", "")
    if not (type(t) in _NUMBER and -MAX_MS <= t <= MAX_MS
            and type(seq) is int and 0 <= seq <= MAX_NUMBER
            and type(ack) is int and 0 <= ack <= MAX_NUMBER
            and type(length) is int and 0 <= length <= MAX_NUMBER
            and type(win) is int and 0 <= win <= MAX_NUMBER
            and (arrive is None or type(arrive) in _NUMBER and -MAX_MS <= arrive <= MAX_MS)
            and type(frm) is str and frm in _SIDES
            and type(flags) is str and (flags in ok or _fresh(flags, ok))
            and type(code) is str and (code in ok or _fresh(code, ok))):
        return None
    if reasons is None or "why" in s:
        why = s["why"] if s.get("why") is not None else ""
    else:              # /2 without its own sentence: the table's (none without a code)
        why = reasons.get(code) if code else ""
    if type(why) is not str or not (why in ok or _fresh(why, ok)):
        return None
    return SegmentRecord(t=Micros(round(t * 1000)), src=_SIDES[frm], seq=seq, ack=ack,
                         length=length, flags=flags, window=win,
                         arrive=None if arrive is None else Micros(round(arrive * 1000)),
                         why=why, code=code)


def _op_fast(o: Any, ok: set[str]) -> OpRecord | None:
    if type(o) is not dict:
        return None
    try:
        side, op, start = o["side"], o["op"], o["start_ms"]
    except KeyError:
        return None
    arg, end, line = o.get("arg", ""), o.get("end_ms"), o.get("line", 0)
    iteration, loop, result = o.get("iter", []), o.get("loop", 0), o.get("result")
    if not (type(start) in _NUMBER and -MAX_MS <= start <= MAX_MS
            and (end is None or type(end) in _NUMBER and -MAX_MS <= end <= MAX_MS)
            and type(line) is int and 0 <= line <= MAX_NUMBER
            and type(loop) is int and 0 <= loop <= MAX_NUMBER
            and type(side) is str and side in _SIDES
            and type(op) is str and (op in ok or _fresh(op, ok))
            and type(arg) is str and (arg in ok or _fresh(arg, ok))
            and (result is None or type(result) is str and (result in ok
                                                            or _fresh(result, ok)))
            and type(iteration) is list and len(iteration) <= MAX_DEPTH
            and all(type(n) is int and 0 <= n <= MAX_NUMBER for n in iteration)):
        return None
    return OpRecord(side=_SIDES[side], op=op, arg=arg, start=Micros(round(start * 1000)),
                    end=None if end is None else Micros(round(end * 1000)), line=line,
                    iteration=tuple(iteration), loop=loop, result=result)


def _event_fast(e: Any, reasons: dict[str, str] | None,
                ok: set[str]) -> EventRecord | None:
    if type(e) is not dict:
        return None
    try:
        t, side, kind = e["t_ms"], e["side"], e["kind"]
    except KeyError:
        return None
    code, detail, timer = e.get("code", ""), e.get("detail", ""), e.get("timer")
    deadline, data, by = e.get("deadline_ms"), e.get("data", NO_DATA), e.get("by", "")
    if not (type(t) in _NUMBER and -MAX_MS <= t <= MAX_MS
            and (deadline is None or type(deadline) in _NUMBER
                 and -MAX_MS <= deadline <= MAX_MS)
            and type(side) is str and side in _SIDES
            and type(kind) is str and (kind in ok or _fresh(kind, ok))
            and type(code) is str and (code in ok or _fresh(code, ok))
            and type(detail) is str and (detail in ok or _fresh(detail, ok))
            and (timer is None or type(timer) is str and (timer in ok or _fresh(timer, ok)))
            and type(by) is str and (by in ok or _fresh(by, ok))
            and type(data) is dict
            and all(type(k) is str and (k in ok or _fresh(k, ok)) and type(v) is int
                    and -MAX_NUMBER <= v <= MAX_NUMBER for k, v in data.items())):
        return None
    if reasons is None or "reason" in e:
        reason = e["reason"] if e.get("reason") is not None else ""
    else:
        reason = reasons.get(code) if code else ""
    if type(reason) is not str or not (reason in ok or _fresh(reason, ok)):
        return None
    return EventRecord(t=Micros(round(t * 1000)), side=_SIDES[side], kind=kind, code=code,
                       reason=reason, detail=detail, timer=timer,
                       deadline=None if deadline is None else Micros(round(deadline * 1000)),
                       data=dict(data) if data else NO_DATA, by=by)


def _segment_checked(s: Any, reasons: dict[str, str] | None, at: str) -> SegmentRecord:
    if not isinstance(s, dict):
        raise TraceError(f"{at}: expected an object, got {_shown(s)}")
    try:
        arrive = s.get("arrive_ms")
        return SegmentRecord(
            t=_us(s["t_ms"], f"{at}.t_ms"), src=_side(s["from"], f"{at}.from"),
            seq=_int(s["seq"], f"{at}.seq"), ack=_int(s["ack"], f"{at}.ack"),
            length=_int(s["len"], f"{at}.len"),
            flags=_text(s["flags"], f"{at}.flags"),
            window=_int(s.get("win", 0), f"{at}.win"),
            arrive=None if arrive is None else _us(arrive, f"{at}.arrive_ms"),
            why=_text(s.get("why"), f"{at}.why") if reasons is None or "why" in s
            else _from_table(s, reasons, at),
            code=_text(s.get("code"), f"{at}.code"))
    except KeyError as exc:
        raise TraceError(f"{at}: missing {exc}") from None


def _op_checked(o: Any, at: str) -> OpRecord:
    if not isinstance(o, dict):
        raise TraceError(f"{at}: expected an object, got {_shown(o)}")
    iteration = o.get("iter", [])
    if not isinstance(iteration, list) or len(iteration) > MAX_DEPTH:
        raise TraceError(f"{at}.iter: expected an array of at most {MAX_DEPTH} "
                         f"loop indexes, got {_shown(iteration)}")
    try:
        end = o.get("end_ms")
        result = o.get("result")
        return OpRecord(
            side=_side(o["side"], f"{at}.side"), op=_text(o["op"], f"{at}.op"),
            arg=_text(o.get("arg"), f"{at}.arg"),
            start=_us(o["start_ms"], f"{at}.start_ms"),
            end=None if end is None else _us(end, f"{at}.end_ms"),
            line=_int(o.get("line", 0), f"{at}.line"),
            iteration=tuple(_int(n, f"{at}.iter") for n in iteration),
            loop=_int(o.get("loop", 0), f"{at}.loop"),
            result=None if result is None else _text(result, f"{at}.result"))
    except KeyError as exc:
        raise TraceError(f"{at}: missing {exc}") from None


def _event_checked(e: Any, reasons: dict[str, str] | None, at: str) -> EventRecord:
    if not isinstance(e, dict):
        raise TraceError(f"{at}: expected an object, got {_shown(e)}")
    data = e.get("data", {})
    if not isinstance(data, dict):
        raise TraceError(f"{at}.data: expected an object, got {_shown(data)}")
    try:
        deadline, timer = e.get("deadline_ms"), e.get("timer")
        return EventRecord(
            t=_us(e["t_ms"], f"{at}.t_ms"), side=_side(e["side"], f"{at}.side"),
            kind=_text(e["kind"], f"{at}.kind"),
            code=_text(e.get("code"), f"{at}.code"),
            reason=_text(e.get("reason"), f"{at}.reason")
            if reasons is None or "reason" in e else _from_table(e, reasons, at),
            detail=_text(e.get("detail"), f"{at}.detail"),
            timer=None if timer is None else _text(timer, f"{at}.timer"),
            deadline=None if deadline is None else _us(deadline, f"{at}.deadline_ms"),
            data={_text(k, f"{at}.data"): _int(v, f"{at}.data.{_text(k, at)[:40]}",
                                               -MAX_NUMBER)
                  for k, v in data.items()} or NO_DATA,
            by=_text(e.get("by"), f"{at}.by"))
    except KeyError as exc:
        raise TraceError(f"{at}: missing {exc}") from None


def write_json(trace: Trace, out: TextIO, version: int = 2) -> None:
    """Write exactly ``trace.dumps(version=version)`` to ``out``, a batch of records at a
    time: a run at the record bound never holds its whole JSON text (hundreds of MB) or
    a dict per record in memory. Records are formatted directly, not through
    ``json.dumps`` of a dict per record (a third of the CPU that took); the test
    suite holds the two byte-identical."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    head = trace.to_json_head(version)
    out.write("{" + ", ".join(f"{encode(k)}: {encode(v)}" for k, v in head.items()))
    w = _RecordWriter(head.get("reasons"))
    # one loop per record type, each calling its writer by name (compiled, a direct
    # native call; through a variable it would be a generic Python call per record);
    # the ", " between batches is its own write (prefixed, the batch would be copied)
    out.write(', "segments": [')
    segments = trace.segments
    for i in range(0, len(segments), _STREAM_BATCH):
        if i:
            out.write(", ")
        out.write(", ".join([w.segment(s) for s in segments[i:i + _STREAM_BATCH]]))
    out.write('], "ops": [')
    ops = trace.ops
    for i in range(0, len(ops), _STREAM_BATCH):
        if i:
            out.write(", ")
        out.write(", ".join([w.op(o) for o in ops[i:i + _STREAM_BATCH]]))
    out.write('], "events": [')
    events = trace.events
    for i in range(0, len(events), _STREAM_BATCH):
        if i:
            out.write(", ")
        out.write(", ".join([w.event(e) for e in events[i:i + _STREAM_BATCH]]))
    out.write("]}")


_MEMORY_SPOOL: Final = 1_048_576
"""Characters of record text a `TraceStream` holds in memory before it moves its text to
temporary files (a small run never makes one)."""


class _Spool:
    """One record list's text, one batch per line: in memory while small, then in an
    unnamed temporary file (gone when closed, and when the process dies; a directory
    where none can be made keeps the text in memory, as a whole trace would be)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.chars = 0
        self.file: Any = None

    def add(self, line: str, spill: bool) -> None:
        if self.file is not None:
            self.file.write(line)
            self.file.write("\n")
            return
        self.lines.append(line)
        self.chars += len(line)
        if spill:
            import tempfile
            try:
                # text records hold no raw newline: JSON escapes it inside strings
                # (closed by `close`, which `TraceStream.finish` calls)
                self.file = tempfile.TemporaryFile(  # noqa: SIM115
                    "w+", encoding="utf-8", newline="\n")
            except OSError:
                return
            for held in self.lines:
                self.file.write(held)
                self.file.write("\n")
            self.lines = []

    def read(self) -> Iterator[str]:
        """The batches, in order, each without its newline."""
        if self.file is None:
            yield from self.lines
            return
        self.file.flush()
        self.file.seek(0)
        for line in self.file:
            yield line[:-1]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        self.lines = []


class TraceStream:
    """A trace's JSON written while the run that makes it goes on: the run hands over its
    records a batch at a time (`segments`, `ops`, `events`), each formatted at once and
    its text kept aside (`_Spool`), and `finish` prints exactly what ``trace.dumps`` would
    have printed for the whole trace. ``run --json`` thus holds a few thousand records
    at a time, not the run's millions (issue 32: S3 NODELAY at 10,000 messages peaked at
    142 MB, 100,000 at 1.2 GB).

    Why the text waits for `finish`: the document starts with what only the run's end
    knows (``outcome``, ``message``, ``meta``, and in /2 the ``reasons`` table), before
    the record lists. The table also decides records' text: a record leaves out its
    sentence when the table holds that sentence for its code. The table takes each code's
    sentence from the first segment with it, else from the first event, so:

    - a segment's text is final when written (segments arrive in order);
    - an event's is final unless a segment that comes later brings its code with another
      sentence than the events' (never from the simulator, whose codes each have one
      sentence; possible for hand-made records). Such events are counted, and `finish`
      rewrites them from their own JSON (``json.loads`` then ``json.dumps``, the same
      text for what the writer writes).

    Records must not change once handed over (the driver hands over only finished calls).
    """

    def __init__(self, version: int = 2) -> None:
        format_name(version)            # ValueError for an unknown version
        self.version = version
        self.table: dict[str, str] | None = {} if version == 2 else None
        """What the writer looks codes up in: a code's sentence as known so far."""
        self.from_segments: dict[str, str] = {}
        """Each code's sentence from its first segment (final: segments come in order)."""
        self.from_events: dict[str, str] = {}
        """Each code's sentence from its first event, for codes no segment had yet."""
        self.changed: dict[str, tuple[str, int]] = {}
        """A code whose sentence a later segment changed → (the sentence events were
        written against, how many events had been written then)."""
        self.writer = _RecordWriter(self.table)
        self.spools = (_Spool(), _Spool(), _Spool())
        self.events_written = 0
        self.chars = 0
        self.counts = [0, 0, 0]

    def _add(self, which: int, text: str, count: int) -> None:
        self.chars += len(text)
        self.counts[which] += count
        self.spools[which].add(text, self.chars > _MEMORY_SPOOL)

    def segments(self, records: list[SegmentRecord]) -> None:
        w = self.writer
        table = self.table
        for i in range(0, len(records), _STREAM_BATCH):
            batch = records[i:i + _STREAM_BATCH]
            if table is not None:
                first = self.from_segments
                for s in batch:
                    code = s.code
                    if s.why and code and code not in first:
                        self._first_segment(code, s.why)
            self._add(0, ", ".join([w.segment(s) for s in batch]), len(batch))

    def _first_segment(self, code: str, why: str) -> None:
        table = self.table
        assert table is not None
        self.from_segments[code] = why
        known = table.get(code)
        if known is not None and known != why:
            # events already written against the events' sentence: `finish` fixes them
            self.changed[code] = (known, self.events_written)
            self.writer.middles.clear()
        table[code] = why

    def ops(self, records: list[OpRecord]) -> None:
        w = self.writer
        for i in range(0, len(records), _STREAM_BATCH):
            batch = records[i:i + _STREAM_BATCH]
            self._add(1, ", ".join([w.op(o) for o in batch]), len(batch))

    def events(self, records: list[EventRecord]) -> None:
        w = self.writer
        table = self.table
        for i in range(0, len(records), _STREAM_BATCH):
            batch = records[i:i + _STREAM_BATCH]
            if table is not None:
                for e in batch:
                    code = e.code
                    if code and code not in table:
                        table[code] = self.from_events[code] = e.reason
            self._add(2, ", ".join([w.event(e) for e in batch]), len(batch))
            self.events_written += len(batch)

    def reasons(self) -> dict[str, str]:
        """The /2 ``reasons`` table of every record handed over: `Trace.reasons`'s."""
        table = dict(self.from_segments)
        for code, why in self.from_events.items():
            if code not in table:
                table[code] = why
        return table

    def finish(self, trace: Trace, out: TextIO) -> None:
        """Hand over what ``trace`` still holds, then write the whole document to
        ``out``: ``trace``'s title, outcome, message and meta, and every record handed
        over, in order."""
        self.segments(trace.segments)
        self.ops(trace.ops)
        self.events(trace.events)
        encode = json.JSONEncoder(ensure_ascii=False).encode
        head = trace.to_json_head(self.version, self.reasons() if self.table is not None
                                  else None)
        try:
            out.write("{" + ", ".join(f"{encode(k)}: {encode(v)}" for k, v in head.items()))
            for which, name in enumerate(_RECORD_LISTS):
                out.write(f', "{name}": [')
                first = True
                index = 0
                for line in self.spools[which].read():
                    if not first:
                        out.write(", ")
                    first = False
                    if which == 2 and self.changed:
                        line, index = self._rewritten(line, index)
                    out.write(line)
                out.write("]")
            out.write("}")
        finally:
            for spool in self.spools:
                spool.close()

    def _rewritten(self, line: str, index: int) -> tuple[str, int]:
        """A batch of events' text as the final table has it (see the class doc), and the
        index of the event after it."""
        table = self.reasons()
        texts = []
        for record in json.loads("[" + line + "]"):
            code = record.get("code")
            changed = self.changed.get(code) if type(code) is str else None
            if changed is not None and index < changed[1]:
                # written against the events' sentence: without a "reason" of its own,
                # it had that one
                reason = record["reason"] if "reason" in record else changed[0]
                fixed: dict[str, Any] = {}
                for key, value in record.items():
                    if key != "reason":
                        fixed[key] = value
                    if key == "code" and reason != table[code]:
                        fixed["reason"] = reason
                record = fixed
            texts.append(_ENCODE(record))
            index += 1
        return ", ".join(texts), index


def read_fields(doc: Any, where: str = "<trace>") -> dict[str, Any]:
    """The fields of a `Trace` (its keyword arguments) from a parsed ``nagle-sim-trace/1``
    or ``/2`` document. Every field is checked (types, finite bounded numbers, text at
    most `MAX_TEXT` characters, /2 codes in the ``reasons`` table); anything else raises
    `TraceError` naming the record, e.g. ``t.json: segments[3].t_ms: …``. Keys a record
    does not use are ignored."""
    if not isinstance(doc, dict) or not isinstance(doc.get("format"), str) \
            or doc["format"] not in VERSIONS:
        raise TraceError(f"{where}: not a {FORMAT_V1} or {FORMAT_V2} trace")
    # The records' fields are typed (their nesting is bounded by their checks, unknown
    # keys are dropped); the rest, meta above all, is free-form: measure that. Scanning
    # every record too cost a quarter of a big trace's reading time.
    if _depth({k: v for k, v in doc.items() if k not in _RECORD_LISTS}) > MAX_DEPTH:
        raise TraceError(f"{where}: JSON nests more than {MAX_DEPTH} deep")
    reasons = _reason_table(doc, where) if VERSIONS[doc["format"]] == 2 else None
    meta = doc.get("meta", {})
    if not isinstance(meta, dict):
        raise TraceError(f"{where}: meta: expected an object, got {_shown(meta)}")
    fields: dict[str, Any] = {
        "source": _source(doc.get("source"), f"{where}: source"),
        "title": _text(doc.get("title"), f"{where}: title"), "meta": dict(meta),
        "outcome": _outcome(doc.get("outcome"), f"{where}: outcome"),
        "message": _text(doc.get("message"), f"{where}: message")}
    for name in _RECORD_LISTS:
        if not isinstance(doc.get(name, []), list):
            raise TraceError(f"{where}: {name}: expected an array, got "
                             f"{_shown(doc[name])}")
    ok: set[str] = set()
    fields["segments"] = [_segment_fast(s, reasons, ok)
                          or _segment_checked(s, reasons, f"{where}: segments[{i}]")
                          for i, s in enumerate(doc.get("segments", []))]
    fields["ops"] = [_op_fast(o, ok) or _op_checked(o, f"{where}: ops[{i}]")
                     for i, o in enumerate(doc.get("ops", []))]
    fields["events"] = [_event_fast(e, reasons, ok)
                        or _event_checked(e, reasons, f"{where}: events[{i}]")
                        for i, e in enumerate(doc.get("events", []))]
    return fields


def read_file(path: str | Path) -> Any:
    """A trace file's JSON, parsed: a regular file of at most `MAX_TRACE_BYTES`, UTF-8
    JSON nested at most `MAX_DEPTH` deep; any problem is a one-line `TraceError`. Its
    text does not outlive the parse (up to 128 MB that need not live while the records
    are built)."""
    try:
        text = read_text(path, MAX_TRACE_BYTES, what="a trace file")
    except ScenarioError as exc:
        raise TraceError(str(exc)) from None
    return parse_json(text, str(path))



def parse_json(text: str, where: str) -> Any:
    """JSON text of at most `MAX_TRACE_BYTES` characters, parsed; a one-line `TraceError`
    otherwise."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"{where}: {len(text):,} characters is too big (limit "
                         f"{MAX_TRACE_BYTES:,})")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise TraceError(f"{where}: JSON nests more than {MAX_DEPTH} deep") from None
    except ValueError as exc:     # e.g. an integer past Python's 4300-digit limit
        raise TraceError(f"{where}: invalid JSON: {_shown(str(exc))}") from None
