"""A scenario rebuilt from a capture, re-run on the model, and its what-ifs.

Owns: turning a captured `Trace` back into scenario TOML — writes from segment boundaries
and PSH (each write's tail carries PSH), reads from the request/response turns, sleeps
where a stall says the application was idle, the link delay from the handshake, NODELAY
from small segments sent while a small one was unACKed, TCP_CORK from cork stalls, each
side's OS profile from its delayed-ACK timing or ``--os`` — then running it with the
simulator's runner the caller hands in (`nagle_sim.runners.simulate`: this module
imports no executor), pairing the model's stalls with the capture's, and the
what-ifs (NODELAY on the writer, one write per request). The TOML is loaded back with
`scenario.loads`, so what is reported is exactly what `--scenario` writes.
Must not import rich, textual or realnet.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..compare import tolerance
from ..model.config import PROFILES
from ..model.events import Micros, Side
from ..scenario import Scenario, loads
from ..trace import Outcome, Runner, Trace
from .causes import WINDOW_CAUSES, Stall, View, find_stalls, view_of
from .totrace import Captured, Hole

MAX_MODEL_SEGMENTS = 2_000
"""The model re-runs at most this many of the capture's data segments (the first ones),
counted as the MSS-sized segments they are on the wire (a 64 KB TSO super-segment counts
45): the simulator takes well under a second for that, and explain must stay within
seconds on a 100,000-segment capture — and on a hostile one whose every frame claims 64 KB.
Stalls after that point are not compared (`reproduced` null)."""
MAX_WHATIF_SEGMENTS = 1_000
"""The what-ifs report medians, so they run on an even shorter prefix."""
SLEEP_MIN_US = 5_000


@dataclass(slots=True)
class WhatIf:
    name: str
    change: str
    per_request_ms: float | None
    stalls: int
    stall_ms: float
    total_ms: float
    text: str = ""
    toml: str = ""
    """The scenario this what-if ran (the app re-runs it; not part of --json)."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "change": self.change,
                "per_request_ms": self.per_request_ms, "stalls": self.stalls,
                "stall_ms": self.stall_ms, "total_ms": self.total_ms, "text": self.text}


@dataclass(slots=True)
class Rebuilt:
    toml: str
    scenario: Scenario
    profiles: dict[Side, tuple[str, str]]     # side → (profile name, how it was chosen)
    model: Trace | None = None
    model_stalls: list[Stall] = field(default_factory=list)
    whatifs: list[WhatIf] = field(default_factory=list)
    baseline: WhatIf | None = None
    captured_per_request_ms: float | None = None
    """The capture's own median time per request (same measure as the what-ifs)."""
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- messages and writes
@dataclass(slots=True)
class _Message:
    side: Side
    writes: list[int] = field(default_factory=list)
    sleeps: list[int] = field(default_factory=list)      # µs before each write
    more: list[bool] = field(default_factory=list)       # write N more (MSG_MORE)

    @property
    def size(self) -> int:
        return sum(self.writes)


def captured_bytes(cap: Captured) -> dict[Side, int]:
    """Payload bytes each side's segments carry in the capture (first sends only)."""
    out = {Side.CLIENT: 0, Side.SERVER: 0}
    for s, again in zip(cap.trace.segments, cap.retransmit, strict=True):
        if s.length and not again:
            out[s.src] += s.length
    return out


def split_holes(cap: Captured) -> tuple[dict[tuple[Side, int], int], list[Hole]]:
    """Which sequence holes the rebuild writes as bytes, and which stay gaps.

    A hole is only a claim made by sequence or ACK numbers: a capture that dropped packets
    (tcpdump's "dropped by kernel") has them, and so has a damaged or forged one (an ACK of
    999,000,000 after 6 bytes). Holes are filled in order while each side's filled bytes
    stay within the bytes its captured segments carry — a capture that lost more than it
    kept is not one to simulate — and the rest are gaps: noted, not simulated. So the
    rebuilt scenario never writes more than twice what the capture holds.
    Returns ({(side, end of hole): bytes to write}, the gaps)."""
    budget = captured_bytes(cap)
    filled: dict[tuple[Side, int], int] = {}
    gaps: list[Hole] = []
    for h in cap.holes:
        size = h.end - h.start
        if size <= budget[h.side]:
            budget[h.side] -= size
            filled[(h.side, h.end)] = size
        else:
            gaps.append(h)
    return filled, gaps


def gap_shift(gaps: list[Hole]) -> Callable[[tuple[str, int]], tuple[str, int]]:
    """A captured stall's pairing key (side, first byte) as the rebuilt scenario numbers
    that byte: the gaps before it were not written."""
    def shift(key: tuple[str, int]) -> tuple[str, int]:
        side, byte = key
        return side, byte - sum(h.end - h.start for h in gaps
                                if h.side.value == side and h.end <= byte)
    return shift


def _messages(cap: Captured, stalls: list[Stall], limit: int
              ) -> tuple[list[_Message], Micros | None, dict[Side, int]]:
    """The conversation as alternating messages of writes; sleeps before writes that ended
    an `app` stall; MSG_MORE on writes that ended a `msg_more` stall; and per side the
    idle time before it closed (µs, 0 when it closed at once or not at all)."""
    segs = cap.trace.segments
    app_keys = {s.key for s in stalls if s.causes and s.causes[0] == "app" and s.key}
    more_keys = {s.key for s in stalls if "msg_more" in s.causes and s.key}
    messages: list[_Message] = []
    pending = {Side.CLIENT: 0, Side.SERVER: 0}
    ready = {Side.CLIENT: 0, Side.SERVER: 0}      # when each side could have written
    last_arrival = {Side.CLIENT: 0, Side.SERVER: 0}
    count = 0
    cut: Micros | None = None
    tails = {Side.CLIENT: 0, Side.SERVER: 0}
    # bytes the capture lost (see `totrace.find_holes`) were written all the same: each
    # hole joins the write of the first segment seen after it — within the bytes the
    # capture holds (`split_holes`); a larger one is a gap, not bytes to simulate
    missing, _gaps = split_holes(cap)
    mss = max(1, cap.mss)
    for i, s in enumerate(segs):
        if not s.length or cap.retransmit[i]:
            continue
        count += -(-s.length // mss)
        if count > limit:
            cut = cap.seen[i]
            break
        side = s.src
        if not messages or messages[-1].side is not side:
            if messages and pending[messages[-1].side]:
                prev = messages[-1]
                prev.writes.append(pending[prev.side])
                pending[prev.side] = 0
            messages.append(_Message(side=side))
            ready[side] = max(ready[side], last_arrival[side])
        msg = messages[-1]
        key = (side.value, s.seq)
        if pending[side] == 0:
            gap = s.t - ready[side]
            msg.sleeps.append(gap if key in app_keys and gap >= SLEEP_MIN_US else 0)
            msg.more.append(key in more_keys)
        elif key in more_keys and msg.more:
            msg.more[-1] = True     # the held tail of a write: the write had MSG_MORE
        pending[side] += s.length + missing.pop((side, s.seq), 0)
        if "P" in s.flags:
            msg.writes.append(pending[side])
            pending[side] = 0
        ready[side] = s.t
        arrive = s.arrive if s.arrive is not None else s.t
        last_arrival[side.peer] = max(last_arrival[side.peer], arrive)
    if messages and pending[messages[-1].side]:
        messages[-1].writes.append(pending[messages[-1].side])
    if cut is None:
        # holes after a side's last segment seen (only its ACKs tell of them)
        for (side, _end), size in missing.items():
            mine = [m for m in messages if m.side is side]
            if mine:      # the side's last message, which the peer's answer followed
                mine[-1].writes.append(size)
            else:
                messages.append(_Message(side=side, writes=[size]))
    if cut is None:
        # a side that closed long after it last could act slept before closing
        for i, s in enumerate(segs):
            if "F" in s.flags and not cap.retransmit[i] and s.src in ready:
                side = s.src
                idle = s.t - max(ready[side], last_arrival[side])
                tails[side] = idle if idle >= SLEEP_MIN_US else 0
                del ready[side]
    for m in messages:
        del m.sleeps[len(m.writes):]
        del m.more[len(m.writes):]
        m.sleeps += [0] * (len(m.writes) - len(m.sleeps))
        m.more += [False] * (len(m.writes) - len(m.more))
    return messages, cut, tails


@dataclass(frozen=True, slots=True)
class Fixes:
    """Changes a what-if makes to the rebuilt scripts, by side: ``uncork`` clears
    TCP_CORK after each message's last write (and sets it again for the next);
    ``last_plain`` sends each message's last write without MSG_MORE; ``more_first``
    sends every write of a message but the last with MSG_MORE (the MSG_MORE reading of a
    `cork` stall, fixed)."""

    uncork: frozenset[Side] = frozenset()
    last_plain: frozenset[Side] = frozenset()
    more_first: frozenset[Side] = frozenset()


NO_FIXES = Fixes()


def _statements(msg: _Message, side: Side, merge: bool, slow_ack: bool = False,
                fixes: Fixes = NO_FIXES) -> list[str]:
    if msg.side is not side:
        # TCP_QUICKACK off lasts until the next ACK, so it is set again before every read
        return (["set quickack off"] if slow_ack else []) + [f"read {msg.size}"]
    out = []
    if merge:
        if msg.sleeps and msg.sleeps[0]:
            out.append(f"sleep {max(1, round(msg.sleeps[0] / 1000))}ms")
        out.append(f"write {msg.size}")
    else:
        last = len(msg.writes) - 1
        for i, (size, sleep, more) in enumerate(zip(msg.writes, msg.sleeps, msg.more,
                                                    strict=True)):
            if sleep:
                out.append(f"sleep {max(1, round(sleep / 1000))}ms")
            if side in fixes.more_first:
                more = i < last
            elif side in fixes.last_plain and i == last:
                more = False
            out.append(f"write {size}{' more' if more else ''}")
    if side in fixes.uncork:
        out += ["set cork off", "set cork on"]
    return out


def _scripts(messages: list[_Message], merge: bool, slow_ack: frozenset[Side] = frozenset(),
             tails: dict[Side, int] | None = None,
             fixes: Fixes = NO_FIXES) -> dict[Side, str]:
    """Both scripts; runs of identical request/response rounds become ``repeat N``."""
    rounds: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    i = 0
    while i < len(messages):
        group = messages[i:i + 2] if messages[i].side is Side.CLIENT else messages[i:i + 1]
        i += len(group)
        rounds.append(tuple(tuple(st for m in group for st in _statements(
            m, side, merge, side in slow_ack, fixes))
            for side in Side))  # type: ignore[arg-type]
    lines: dict[Side, list[str]] = {Side.CLIENT: [], Side.SERVER: []}
    j = 0
    while j < len(rounds):
        k = j
        while k + 1 < len(rounds) and rounds[k + 1] == rounds[j]:
            k += 1
        n = k - j + 1
        for side_i, side in enumerate(Side):
            body = "; ".join(rounds[j][side_i])
            if not body:
                continue
            lines[side].append(f"repeat {n} {{ {body} }}" if n > 1 else body)
        j = k + 1
    for side, idle in (tails or {}).items():
        if idle:
            lines[side].append(f"sleep {max(1, round(idle / 1000))}ms")
    return {side: "\n".join(lines[side]) for side in Side}


# ---------------------------------------------------------------- settings
def nagle_exempt(flags: str) -> bool:
    """Segments Nagle lets through whatever is unACKed: Linux's tcp_nagle_test sends a
    segment carrying FIN (or urgent data) at once — close() pushes the held tail out with
    its FIN, on any socket. Such a segment says nothing about TCP_NODELAY."""
    return "F" in flags or "U" in flags


def infer_nodelay(cap: Captured, view: View | None = None) -> dict[Side, bool]:
    """Per side: True when it sent a small segment while its last small one was unACKed
    — something Nagle never allows (a FIN-bearing segment excepted: `nagle_exempt`; and a
    segment cut short by the peer's window, which Nagle never judged as small).
    ``view``: the capture's view, if already indexed."""
    finder = (view or view_of(cap.trace, cap.dist, cap.mss)).finder()
    out = {Side.CLIENT: False, Side.SERVER: False}
    for i, s in enumerate(cap.trace.segments):
        if out[s.src] or not s.length or s.length >= cap.mss or cap.retransmit[i] \
                or nagle_exempt(s.flags):
            continue
        high, acked, small_end, win, small = finder.state(s.src, s.t)
        if high > acked and s.seq + s.length >= acked + win:
            continue    # it filled the peer's window: the window cut it, not the writer
        if small >= 0 and small_end > acked and small_end <= s.seq:
            out[s.src] = True
    return out


def _profile_from_delack(stalls: list[Stall], side: Side) -> tuple[str, str] | None:
    waits = [s.duration - s.link_part for s in stalls
             if "delayed_ack" in s.causes and s.waiting is side.peer]
    if not waits:
        return None
    w = statistics.median(waits) / 1000
    if w < 60:
        return "linux", f"its delayed ACKs took {w:.0f} ms (Linux: 40 ms)"
    if w < 150:
        return "macos", f"its delayed ACKs took {w:.0f} ms (macOS: about 100 ms)"
    return "windows", f"its delayed ACKs took {w:.0f} ms (Windows: 200 ms)"


def parse_os(text: str) -> dict[Side, str]:
    """``client=linux,server=windows`` → profiles; ValueError with a one-line message."""
    out: dict[Side, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, profile = part.partition("=")
        if not eq or name.strip() not in ("client", "server"):
            raise ValueError(f"--os {text!r}: use client=PROFILE,server=PROFILE")
        if profile.strip() not in PROFILES:
            raise ValueError(f"--os: unknown profile {profile.strip()!r} (known: "
                             f"{', '.join(PROFILES)})")
        if Side(name.strip()) in out:
            raise ValueError(f"--os {text!r}: {name.strip()} is given twice")
        out[Side(name.strip())] = profile.strip()
    return out


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def build_toml(cap: Captured, stalls: list[Stall], os_choice: dict[Side, str], *,
               nodelay: dict[Side, bool] | None = None, merge: bool = False,
               cork: dict[Side, bool] | None = None,
               slow_ack: frozenset[Side] = frozenset(),
               limit: int = MAX_MODEL_SEGMENTS, fixes: Fixes = NO_FIXES
               ) -> tuple[str, dict[Side, tuple[str, str]], Micros | None]:
    """The rebuilt scenario's TOML, each side's profile and why, and the capture time
    where the rebuild stopped (None: it covers the whole capture)."""
    messages, cut, tails = _messages(cap, stalls, limit)
    scripts = _scripts(messages, merge, slow_ack, tails, fixes)
    profiles: dict[Side, tuple[str, str]] = {}
    for side in Side:
        if side in os_choice:
            profiles[side] = (os_choice[side], "given with --os")
        else:
            profiles[side] = _profile_from_delack(stalls, side) or (
                "linux", "no delayed ACK to judge by: assumed Linux")
    nd = nodelay if nodelay is not None else infer_nodelay(cap)
    corked = {side: any(s.causes and s.causes[0] == "cork" and s.waiting is side.peer
                        for s in stalls) for side in Side}
    corked.update(cork or {})
    delay = (cap.dist[Side.CLIENT] + cap.dist[Side.SERVER]) / 1000
    meta = cap.trace.meta
    lines = [f"title = {_toml_str('rebuilt from ' + str(meta.get('capture', 'a capture')))}",
             "description = " + _toml_str(
                 f"Connection {meta.get('connection')} ({meta.get('client')} → "
                 f"{meta.get('server')}), captured {_where_text(cap.captured_on)}; rebuilt by "
                 "nagle-sim explain"),
             "", "[link]", f"delay_ms = {delay:.3f}", f"mss = {max(88, min(cap.mss, 65495))}"]
    if meta.get("super_segments"):
        lines.append("gso = true")
    for side in Side:
        profile = profiles[side][0]
        supports = PROFILES[profile].supports_cork
        lines += ["", f"[{side.value}]", f"profile = {_toml_str(profile)}",
                  f"nodelay = {'true' if nd[side] else 'false'}"]
        if corked[side] and supports:
            lines.append("cork = true")
        script = scripts[side]
        if not supports:
            script = script.replace(" more", "").replace("; set cork off; set cork on", "")
        if not PROFILES[profile].supports_quickack:
            script = script.replace("set quickack off; ", "")
        lines.append(f'script = """\n{script}\n"""')
    return "\n".join(lines) + "\n", profiles, cut


# ---------------------------------------------------------------- model runs
def request_latencies(trace: Trace) -> list[int]:
    """Per request, as the client's loop sees it: from the previous answer's last byte
    reaching the client (the handshake, for the first) to this answer's last byte reaching
    it (µs). A capture does not show when the application wrote, so this cycle time is
    what both the capture and the model can measure; it includes any think time."""
    out: list[int] = []
    mark: int | None = None
    last_reply: int | None = None
    asked = False
    high = {Side.CLIENT: 0, Side.SERVER: 0}
    for s in trace.segments:
        arrive = s.arrive if s.arrive is not None else s.t
        if "S" in s.flags and s.src is Side.SERVER:
            mark = arrive
        if not s.length or s.seq + s.length <= high[s.src]:
            continue
        high[s.src] = s.seq + s.length
        if s.src is Side.CLIENT:
            if asked and last_reply is not None and mark is not None:
                out.append(last_reply - mark)
                mark = last_reply
            if mark is None:
                mark = s.t
            asked, last_reply = True, None
        elif asked:
            last_reply = arrive
    if asked and last_reply is not None and mark is not None:
        out.append(last_reply - mark)
    return out


def _summary(name: str, change: str, trace: Trace, view: View) -> WhatIf:
    stalls = find_stalls(view)
    lat = request_latencies(trace)
    per = round(statistics.median(lat) / 1000, 1) if lat else None
    return WhatIf(name=name, change=change, per_request_ms=per, stalls=len(stalls),
                  stall_ms=round(sum(s.duration for s in stalls) / 1000, 1),
                  total_ms=round(trace.end / 1000, 1))


def _run(runner: Runner, toml: str, where: str) -> tuple[Scenario, Trace]:
    scenario = loads(toml, where)
    return scenario, runner(scenario)


def pair_stalls(captured: list[Stall], model: list[Stall], cut: Micros | None = None,
                key: Callable[[tuple[str, int]], tuple[str, int]] | None = None) -> None:
    """Fill each captured stall's `model_ms` / `reproduced` from the model's stall that
    released the same byte (the same side's first data after it), else the model's stall
    ending near it with the same first cause. Pairing is one-to-one and in order: a model
    stall is used at most once, and never one before the last one used (two captured
    stalls before one write must not both claim the model's single stall there). Stalls
    from ``cut`` on were not re-run: both stay None. ``key`` maps a captured stall's key
    to the model's numbering (`gap_shift`: gaps in the capture were not written)."""
    by_key: dict[tuple[str, int], list[int]] = {}
    for j, m in enumerate(model):
        if m.key is not None:
            by_key.setdefault(m.key, []).append(j)
    used: set[int] = set()
    floor = -1
    for st in captured:
        if cut is not None and st.end >= cut:
            st.model_ms, st.reproduced = None, None
            continue
        twin_j: int | None = None
        if st.key is not None:
            mine = key(st.key) if key is not None else st.key
            twin_j = next((j for j in by_key.get(mine, ()) if j > floor and j not in used),
                          None)
        if twin_j is None:
            # near in time with the same first cause (stalls ended by a bare ACK)
            tol = tolerance(st.duration)
            cands = [j for j, m in enumerate(model) if j > floor and j not in used
                     and abs(m.end - st.end) <= tol and m.causes[:1] == st.causes[:1]]
            twin_j = min(cands, key=lambda j: abs(model[j].end - st.end)) if cands else None
        if twin_j is None:
            st.model_ms, st.reproduced = None, False
            continue
        used.add(twin_j)
        floor = twin_j
        twin = model[twin_j]
        st.model_ms = round(twin.duration / 1000, 1)
        st.reproduced = abs(twin.duration - st.duration) <= tolerance(st.duration)


def _slow_ackers(stalls: list[Stall], profiles: dict[Side, tuple[str, str]]
                 ) -> frozenset[Side]:
    """Sides whose delayed ACK ended a stall that the model's re-run did not reproduce."""
    out = set()
    for st in stalls:
        if st.reproduced is False and st.waiting is not None and (
                "delayed_ack" in st.causes or "delayed ACK" in st.text):
            side = st.waiting.peer
            if PROFILES[profiles[side][0]].supports_quickack:
                out.add(side)
    return frozenset(out)


def rebuild(cap: Captured, stalls: list[Stall], os_choice: dict[Side, str], *,
            runner: Runner | None = None, view: View | None = None) -> Rebuilt:
    """Rebuild, re-run on ``runner`` (the simulator's) and ask the what-ifs; without a
    runner, only write the TOML. ``view`` is the capture's view the stalls were found in
    (its indexes are reused)."""
    where = f"<rebuilt from {cap.trace.meta.get('capture', 'capture')}>"
    nd0 = infer_nodelay(cap, view)
    toml, profiles, cut = build_toml(cap, stalls, os_choice, nodelay=nd0)
    _filled, gaps = split_holes(cap)
    notes = _gap_notes(cap, gaps, cut)
    out = Rebuilt(toml=toml, scenario=loads(toml, where), profiles=profiles, notes=notes)
    if runner is None:
        return out
    runs = _Runs(cap=cap, stalls=stalls, os_choice=os_choice, runner=runner, where=where,
                 nodelay=nd0, sack=bool(cap.trace.meta.get("sack_permitted", True)))
    mview = _rerun(runs, out, cut, gap_shift(gaps) if gaps else None)
    assert out.model is not None
    if out.model.outcome is not Outcome.OK:
        out.notes.append(f"the model's re-run ended with {out.model.outcome}: "
                         f"{out.model.message}")
    if cut is not None:     # compare the what-ifs with a baseline of the same length
        _, base_trace, base_view = runs.run(runs.toml())
        out.baseline = _summary("as captured (model)", "", base_trace, base_view)
    else:
        out.baseline = _summary("as captured (model)", "", out.model, mview)
    out.whatifs.extend(_nodelay_whatifs(runs, out.scenario))
    out.whatifs.extend(_cork_whatifs(runs, out.scenario))
    if " more" in out.toml:
        out.whatifs.append(runs.whatif("no MSG_MORE on the last write",
                                       "each message's last write sent without MSG_MORE",
                                       runs.toml(fixes=Fixes(last_plain=frozenset(Side)))))
    merged = runs.toml(merge=True)
    if merged != runs.toml():
        out.whatifs.append(runs.whatif("one write per request", "each message sent with one "
                                       "write", merged))
    lat = request_latencies(cap.trace)
    out.captured_per_request_ms = round(statistics.median(lat) / 1000, 1) if lat else None
    _describe_whatifs(out.whatifs, out.baseline.per_request_ms, out.captured_per_request_ms)
    return out


def _gap_notes(cap: Captured, gaps: list[Hole], cut: Micros | None) -> list[str]:
    """The rebuild's first notes: stream the sequence numbers skip that the rebuilt
    scenario does not write, and where the model's re-run stops."""
    notes = []
    for side in Side:
        mine = [h for h in gaps if h.side is side]
        if mine:
            notes.append(f"{sum(h.end - h.start for h in mine):,} B of the {side.value}'s "
                         "stream that its sequence or ACK numbers skip are more than the "
                         f"{captured_bytes(cap)[side]:,} B the capture holds: a gap (damaged "
                         "or cut numbers), not lost packets; the rebuilt scenario does not "
                         "write them")
    if cut is not None:
        notes.append(f"the model re-ran the capture up to {cut / 1000:.1f} ms (its first "
                     f"{MAX_MODEL_SEGMENTS:,} data segments); later stalls are not compared; "
                     f"the what-ifs use the first {MAX_WHATIF_SEGMENTS:,}")
    return notes


@dataclass(slots=True)
class _Runs:
    """One rebuild's model runs: the capture and its stalls, the choices the scenario is
    built with, the runner. ``slow`` (sides rebuilt with TCP_QUICKACK off) is settled by
    `_rerun` before the what-ifs are built."""

    cap: Captured
    stalls: list[Stall]
    os_choice: dict[Side, str]
    runner: Runner
    where: str
    nodelay: dict[Side, bool]
    sack: bool
    slow: frozenset[Side] = frozenset()

    def toml(self, *, nodelay: dict[Side, bool] | None = None, merge: bool = False,
             cork: dict[Side, bool] | None = None, fixes: Fixes = NO_FIXES) -> str:
        """A what-if's scenario: the rebuild's choices with these changes, on the
        what-ifs' shorter prefix."""
        return build_toml(self.cap, self.stalls, self.os_choice,
                          nodelay=self.nodelay if nodelay is None else nodelay, merge=merge,
                          cork=cork, slow_ack=self.slow, limit=MAX_WHATIF_SEGMENTS,
                          fixes=fixes)[0]

    def run(self, toml: str) -> tuple[Scenario, Trace, View]:
        """``toml`` run on the model, its trace, and that trace seen from the capture
        point."""
        scenario, trace = _run(self.runner, toml, self.where)
        return scenario, trace, view_of(trace, self.cap.dist, self.cap.mss, self.sack)

    def whatif(self, name: str, change: str, toml: str) -> WhatIf:
        _, trace, view = self.run(toml)
        w = _summary(name, change, trace, view)
        w.toml = toml
        return w


def _rerun(runs: _Runs, out: Rebuilt, cut: Micros | None,
           shift: Callable[[tuple[str, int]], tuple[str, int]] | None) -> View:
    """Re-run the rebuilt scenario and pair the model's stalls with the capture's; when
    the capture shows delayed ACKs the model (in quick-ACK mode) did not make, try again
    with TCP_QUICKACK off before that side's reads and keep it if it fits better (``out``
    and ``runs.slow`` then hold that run). Returns the kept run's view."""
    stalls, rtt = runs.stalls, runs.cap.trace.meta.get("rtt_ms", 0)
    _, model, mview = runs.run(out.toml)
    model.meta["rtt_ms"] = rtt
    out.model = model
    out.model_stalls = find_stalls(mview)
    pair_stalls(stalls, out.model_stalls, cut, shift)
    slow = _slow_ackers(stalls, out.profiles)
    if not slow:
        return mview
    toml2, _, _ = build_toml(runs.cap, stalls, runs.os_choice, nodelay=runs.nodelay,
                             slow_ack=slow)
    scenario2, model2, mview2 = runs.run(toml2)
    model2.meta["rtt_ms"] = rtt
    stalls2 = find_stalls(mview2)
    before = sum(1 for st in stalls if st.reproduced)
    pair_stalls(stalls, stalls2, cut, shift)
    if sum(1 for st in stalls if st.reproduced) <= before:
        pair_stalls(stalls, out.model_stalls, cut, shift)
        return mview
    runs.slow = slow
    out.toml, out.scenario, out.model, out.model_stalls = toml2, scenario2, model2, stalls2
    out.notes.append("the " + " and ".join(sorted(s.value for s in slow)) + " delayed "
                     "ACKs that the model would have sent at once: rebuilt with "
                     "TCP_QUICKACK off before each read")
    return mview2


def _nodelay_whatifs(runs: _Runs, scenario: Scenario) -> list[WhatIf]:
    """NODELAY for the side Nagle held; with no Nagle stall, for the client (its answer is
    "no change") — unless the receiver's window held it: NODELAY cannot open a window."""
    stalls = runs.stalls
    writers = [s for s in Side if any(st.waiting is s and "nagle" in st.causes
                                      for st in stalls)]
    held = {"cork", "msg_more"} | set(WINDOW_CAUSES)
    if not writers and not any(set(st.causes) & held for st in stalls):
        # nothing else to try: NODELAY on the client, whose answer may be "no change"
        # (never when the data was corked or window-limited: NODELAY opens no window
        # and TCP_CORK overrides it)
        writers = [Side.CLIENT]
    out = []
    for side in writers:
        if scenario.side(side).options.nodelay:
            continue
        nd = {s: scenario.side(s).options.nodelay or s is side for s in Side}
        out.append(runs.whatif(f"NODELAY on the {side.value}", f"{side.value}.nodelay = true",
                               runs.toml(nodelay=nd)))
    return out


def _cork_whatifs(runs: _Runs, scenario: Scenario) -> list[WhatIf]:
    """For a side rebuilt with TCP_CORK: clearing the cork after each message's last
    write; and, when its peer waited on a cork stall, the MSG_MORE reading fixed."""
    out = []
    for side in Side:
        if not scenario.side(side).options.cork:
            continue
        # TCP_CORK kept the side's last write: clear it once the message is written
        out.append(runs.whatif(
            f"uncork after the last write ({side.value})",
            f"{side.value}: setsockopt(TCP_CORK, 0) after each message's last write",
            runs.toml(fixes=Fixes(uncork=frozenset({side})))))
        if any(st.causes[:1] == ["cork"] and st.waiting is side.peer for st in runs.stalls):
            # the wire cannot tell TCP_CORK from MSG_MORE: the MSG_MORE reading, fixed
            out.append(runs.whatif(
                f"no MSG_MORE on the last write ({side.value})",
                f"{side.value}: MSG_MORE on every write of a message but its last",
                runs.toml(cork={side: False}, fixes=Fixes(more_first=frozenset({side})))))
    return out


def _describe_whatifs(whatifs: list[WhatIf], base: float | None, real: float | None) -> None:
    """Each what-if's sentence, beside the capture's own time per request (``real``) and
    the model's of the capture (``base``)."""
    for w in whatifs:
        if w.per_request_ms is not None:
            was = (f" (captured: {real} ms; the model of the capture: {base} ms)"
                   if base is not None else "")
            w.text = f"{w.name}: {w.per_request_ms} ms per request{was}, {w.stalls} stall(s)"
        else:
            w.text = f"{w.name}: {w.total_ms} ms in all, {w.stalls} stall(s)"


def _where_text(captured_on: str) -> str:
    return {"both": "on the host of both ends (loopback)", "client": "on the client",
            "server": "on the server", "between": "between the hosts"}.get(
                captured_on, "at an unknown point")
