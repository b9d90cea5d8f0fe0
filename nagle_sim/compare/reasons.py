"""The model's reasons against the kernel's own: every decision matched, differences listed.

Owns: `compare_reasons` — a model trace's decisions (its events) against the decisions
the kernel was observed taking in a real run of the same scenario (events marked
``by="kernel"``, recorded by watch: docs/watch.md) — and its result, `ReasonComparison`.
Compared, per side and in order: every hold and why (Nagle, cork, MSG_MORE, cwnd, window,
autocork), every delayed ACK armed and every delayed-ACK timer fired, every timer that
found nothing to do, every probe timer armed and fired, every ACK sent at once and which
rule sent it (quick-ACK mode, a read, TCP_QUICKACK, a full frame), the quick-ACK budget
granted and spent, ping-pong entered and left, and ato inflated; on each matched pair,
the values that decided (ato of a delayed ACK, quick-ACK credit granted). Timing is not
judged here (the segment comparison does that): a reason is the same whether it came a
jiffy late or not.

Where the model and watch word one decision differently, the mapping is here and in
docs/watch.md ("Comparing reasons"): the model cancels a delayed-ACK timer whose ACK left
on data (timer_cancelled PIGGYBACK); the kernel leaves it queued and it fires with nothing
to do (timer_fired TIMER_CLEARED). A delayed ACK the model re-arms while its timer is
still queued is invisible to the kernel's tracepoint when the deadline does not move
(mod_timer returns early): such a model arm without a kernel twin is a note, not a
difference.

Pure: traces in, a result out; no executor, no terminal.

"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Final

from ..model.events import Side
from ..trace import EventRecord, Trace
from ..trace.units import ms_text

KERNEL: Final = "kernel"

_ACK_CODES: Final = frozenset({"QUICKACK_MODE", "READ_ACK", "QUICKACK_OPT", "FULL_FRAME"})
_MODE_CODES: Final = frozenset({"QUICK_START", "QUICK_SPENT", "PINGPONG_ENTER",
                                "PINGPONG_EXIT", "QUICKACK_OFF", "QUICKACK_ON",
                                "ATO_INFLATE"})

CATEGORIES: Final = ("hold", "delayed ACK armed", "delayed-ACK timer fired",
                     "delayed-ACK timer not needed", "probe timer armed", "probe timer fired",
                     "ACK at once", "quick-ACK / ping-pong / ato")
"""What is compared, in the order the results list it."""


def category(e: EventRecord) -> str | None:
    """Which compared decision an event is (None: not compared)."""
    kind, code = e.kind, e.code
    if kind == "hold":
        return "hold"
    if kind == "ack_delayed" and code == "DELACK_WAIT":
        return "delayed ACK armed"
    if kind == "timer_fired" and code == "DELACK_FIRED":
        return "delayed-ACK timer fired"
    if e.timer == "delack" and (kind == "timer_cancelled" and code == "PIGGYBACK" or
                                kind == "timer_fired" and code == "TIMER_CLEARED"):
        return "delayed-ACK timer not needed"
    if kind == "timer_armed" and code == "PROBE0_ARMED":
        return "probe timer armed"
    if kind == "timer_fired" and code == "PROBE0_RELEASE":
        return "probe timer fired"
    if kind == "ack_now" and code in _ACK_CODES:
        return "ACK at once"
    if kind == "mode" and code in _MODE_CODES:
        return "quick-ACK / ping-pong / ato"
    return None


def _key(e: EventRecord) -> str:
    """What must be equal for two decisions of one category to be the same decision."""
    if e.timer == "delack" and e.code in ("PIGGYBACK", "TIMER_CLEARED"):
        return "not needed"
    return e.code


@dataclass(slots=True)
class ReasonPair:
    side: Side
    category: str
    model: EventRecord | None
    kernel: EventRecord | None
    ok: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        def one(e: EventRecord | None) -> dict[str, Any] | None:
            return None if e is None else {"t_ms": e.t / 1000, "code": e.code,
                                           "detail": e.detail}
        return {"side": self.side.value, "category": self.category,
                "model": one(self.model), "kernel": one(self.kernel), "ok": self.ok,
                "note": self.note}


@dataclass(slots=True)
class ReasonComparison:
    pairs: list[ReasonPair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unavailable: str | None = None
    """Why the kernel's reasons could not be compared (not recorded on that run)."""

    @property
    def model_total(self) -> int:
        return sum(1 for p in self.pairs if p.model is not None)

    @property
    def matched(self) -> int:
        return sum(1 for p in self.pairs if p.model is not None and p.kernel is not None
                   and p.ok)

    @property
    def agree(self) -> bool:
        return self.unavailable is None and not self.problems

    @property
    def verdict(self) -> str:
        if self.unavailable is not None:
            return f"reasons not compared: {self.unavailable}"
        kernel = sum(1 for p in self.pairs if p.kernel is not None)
        unseen = sum(1 for p in self.pairs if p.model is not None and p.kernel is None
                     and p.ok)
        head = (f"{self.matched} of {self.model_total} model decisions matched by the "
                f"kernel's" + (f", {unseen} not observable (notes)" if unseen else "")
                + f"; {kernel} kernel decisions compared")
        if self.agree:
            return f"reasons AGREE: {head}"
        return f"reasons DISAGREE: {head}; {len(self.problems)} difference(s)"

    def counts(self) -> dict[str, dict[str, int]]:
        """Per side and category: decisions of the model, of the kernel, matched."""
        out: dict[str, dict[str, int]] = {}
        for p in self.pairs:
            row = out.setdefault(f"{p.side.value} {p.category}",
                                 {"model": 0, "kernel": 0, "matched": 0})
            row["model"] += p.model is not None
            row["kernel"] += p.kernel is not None
            row["matched"] += p.model is not None and p.kernel is not None and p.ok
        return out

    def to_json(self) -> dict[str, Any]:
        return {"agree": self.agree, "verdict": self.verdict, "problems": self.problems,
                "notes": self.notes, "unavailable": self.unavailable,
                "counts": self.counts(), "pairs": [p.to_json() for p in self.pairs]}


def kernel_decisions(trace: Trace) -> list[EventRecord]:
    return [e for e in trace.events if e.by == KERNEL]


_WRITES: Final = ("write", "send", "sendmsg", "writev")
_BYTES: Final = re.compile(r"^\s*(\d+)")


def _repeated_holds(model: Trace, side: Side) -> dict[int, str]:
    """The model's holds that continue one already holding data (by event id, with why).

    The model decides again at every push while data waits (each ACK that lets some of
    it out and leaves the rest is a new hold event); watch reports a hold when a send
    leaves bytes queued and then nothing until the last of them leaves (realnet/watch:
    one hold per episode). A model hold is part of the open episode until a data segment
    of that side reaches every byte the application had written by then (or a FIN)."""
    writes = sorted((o.start, int(m.group(1))) for o in model.ops
                    if o.side is side and o.op in _WRITES
                    and (m := _BYTES.match(o.arg)) is not None)
    if not writes:
        return {}
    segs = [sg for sg in model.segments if sg.src is side and (sg.length or sg.has_fin)]

    def written(t: int) -> int:
        return sum(n for start, n in writes if start <= t)

    out: dict[int, str] = {}
    open_since: int | None = None
    i = 0
    for e in sorted((e for e in model.events if e.side is side and e.kind == "hold"
                     and e.by != KERNEL), key=lambda e: e.t):
        if open_since is not None:
            # did the episode end between its start and this hold?
            while i < len(segs) and segs[i].t <= e.t:
                sg = segs[i]
                i += 1
                if sg.t >= open_since and (sg.has_fin or
                                           sg.seq + sg.length - 1 >= written(sg.t)):
                    open_since = None
                    break
        if open_since is None:
            open_since = e.t
            while i < len(segs) and segs[i].t < e.t:
                i += 1
            continue
        out[id(e)] = ("the model decides the hold again while the same data still waits; "
                      "the kernel's record is one hold until all of it has left")
    return out


def _ties(events: list[EventRecord], tick_us: int) -> dict[int, str]:
    """The model's delayed-ACK cancels whose timer's deadline and the side's next arm
    are less than a jiffy apart: whether the kernel's timer (left queued) fires empty
    first or is moved by that arm is decided by the jiffy phase and a few µs of
    scheduling, so the kernel may show either (by event id, with why)."""
    out: dict[int, str] = {}
    deadline: int | None = None
    cancel: EventRecord | None = None
    for e in events:
        if e.kind == "timer_armed" and e.timer == "delack" and e.deadline is not None:
            if cancel is not None and deadline is not None and \
                    abs(e.t - deadline) < tick_us:
                out[id(cancel)] = (f"its deadline and the next delayed ACK "
                                   f"({ms_text(abs(e.t - deadline))} ms apart) fall in one "
                                   "jiffy: the kernel's timer, left queued, may fire empty "
                                   "first or be moved, as the jiffy phase decides")
            cancel, deadline = None, e.deadline
        elif e.timer == "delack" and e.kind == "timer_cancelled":
            cancel = e
        elif e.timer == "delack" and e.kind == "timer_fired":
            cancel, deadline = None, None
    return out


def _invisible(events: list[EventRecord], tick_us: int) -> dict[int, str]:
    """The model's delayed-ACK decisions the kernel's tracepoints cannot show, by event
    id, with why. The kernel never dequeues a delayed-ACK timer whose ACK left early
    (inet_csk_clear_xmit_timer only clears icsk_ack.pending): it stays queued until its
    deadline, so

    - an arm while it is still queued, for the same jiffy, is `mod_timer` returning
      before the timer_start tracepoint: no arm is seen;
    - a model cancel followed by a new arm before the old deadline is, in the kernel, a
      timer moved (or kept): it never fires with nothing to do."""
    queued: int | None = None            # the kernel's view: deadline of the queued timer
    cancel: EventRecord | None = None
    arm_at: dict[int, int] = {}          # time → deadline of the model's timer_armed
    for e in events:
        if e.kind == "timer_armed" and e.timer == "delack" and e.deadline is not None:
            arm_at[e.t] = e.deadline
    out: dict[int, str] = {}
    closed = next((e.t for e in events if e.kind == "state" and
                   e.detail.endswith(("→ CLOSED", "→ TIME_WAIT"))), None)
    for e in events:
        if queued is not None and e.t >= queued:
            queued, cancel = None, None      # it fired (or would have) by now
        if e.timer == "delack" and e.kind == "timer_fired":
            queued, cancel = None, None
        elif e.timer == "delack" and e.kind == "timer_cancelled":
            cancel = e
            if queued is not None and closed is not None and closed < queued:
                out[id(e)] = ("the connection closed before its deadline, and closing "
                              "stops the kernel's timers (tcp_done, tcp_time_wait): it "
                              "never fires")
        elif e.kind == "ack_delayed" and e.code == "DELACK_WAIT":
            deadline = arm_at.get(e.t)
            if queued is not None and deadline is not None and \
                    abs(deadline - queued) < tick_us:
                out[id(e)] = ("armed for the jiffy its still-queued timer already has "
                              "(mod_timer returns before the tracepoint: no arm is seen)")
            if cancel is not None:
                out[id(cancel)] = ("the kernel leaves the timer queued and this arm "
                                   f"{ms_text(e.t - cancel.t)} ms later moves it: it never "
                                   "fires with nothing to do")
                cancel = None
            if deadline is not None:
                queued = deadline
    return out


_LEFT: Final = re.compile(r"^(\d+) quick ACKs left")
_TO_JIFFIES: Final = re.compile(r"→ (\d+) jiffies")


def _values(cat: str, m: EventRecord, k: EventRecord, hz: int,
            spent_before: int = -1) -> str:
    """A difference in the values that decided a matched pair ("" when none)."""
    if cat == "delayed ACK armed":
        # the delay the ACK waits: the model's arm records it as its `ato` (ato clamped by
        # tcp_send_delayed_ack to the RTT and TCP_DELACK_MAX); the kernel's record has
        # icsk_ack.ato itself (before the clamp) and the timer's deadline: compare delays
        used = m.data.get("ato")
        if used is not None and k.deadline is not None:
            tick = 1_000_000 // hz
            kernel_j = round((k.deadline - k.t) / tick)
            if used != kernel_j:
                return (f"the ACK waits {used * tick // 1000} ms in the model, "
                        f"{kernel_j * tick // 1000} ms in the kernel ({used} vs {kernel_j} "
                        "jiffies)")
    if k.code == "ATO_INFLATE":
        a, b = _TO_JIFFIES.search(m.detail), _TO_JIFFIES.search(k.detail)
        if a is not None and b is not None and a.group(1) != b.group(1):
            return f"ato doubled to {a.group(1)} jiffies in the model, {b.group(1)} in the kernel"
    if k.code == "QUICK_START":
        mq, kq = m.data.get("quick"), k.data.get("quick")
        # watch stamps a mode change at the first hook that sees it, which may be the
        # xmit of the ACK that spends the first credit (docs/watch.md): the budget is the
        # credit left after the first quick ACK, plus that ACK
        if spent_before >= 0:
            kq = spent_before + 1
        if mq is not None and kq is not None and mq != kq:
            return f"quick-ACK budget {mq} in the model, {kq} in the kernel"
    if k.code == "QUICKACK_MODE":
        left = _LEFT.match(m.detail)
        kq = k.data.get("quick")
        # the model says the credit before this ACK, the kernel's record what is left
        # after it (tcp_event_ack_sent spends it before the device sees the segment)
        if left is not None and kq is not None and int(left.group(1)) - 1 != kq:
            return (f"quick-ACK credit {int(left.group(1))} before this ACK in the model, "
                    f"{kq + 1} in the kernel")
    return ""


_MODES: Final = "quick-ACK / ping-pong / ato"


def _groups(model: list[EventRecord], kernel: list[EventRecord],
            side: Side) -> list[tuple[str, str | None]]:
    """What is aligned on its own: each category, and within the mode changes each code
    apart (watch stamps a mode change at the first hook that sees it, so the order of a
    quick-ACK change against a ping-pong change is not the kernel's)."""
    out: list[tuple[str, str | None]] = []
    for cat in CATEGORIES:
        if cat != _MODES:
            out.append((cat, None))
            continue
        codes = sorted({e.code for e in (*model, *kernel)
                        if e.side is side and category(e) == cat})
        out += [(cat, c) for c in codes]
    return out


def _host_hz(real: Trace, side: Side, default: int) -> int:
    """The tick rate of the host that ran ``side`` (its host facts), else ``default``."""
    facts = real.meta.get("host_facts")
    one = facts.get(side.value) if isinstance(facts, dict) else None
    hz = one.get("hz") if isinstance(one, dict) else None
    return hz if isinstance(hz, int) and not isinstance(hz, bool) and 10 <= hz <= 10_000 \
        else default


def compare_reasons(model: Trace, real: Trace, hz: int = 250) -> ReasonComparison:
    """Every compared decision of the model matched with the kernel's, per side and
    category, in order (difflib's longest matching runs, so one missing decision shifts
    nothing after it)."""
    out = ReasonComparison()
    kernel = kernel_decisions(real)
    if not kernel:
        recorded = real.meta.get("kernel_decisions")
        out.unavailable = (str(recorded) if isinstance(recorded, str) else
                           "the real trace carries no kernel decisions (recorded by watch "
                           "on a local real run as root: docs/watch.md)")
        return out
    model_events = [e for e in model.events if e.by != KERNEL]
    default_hz = hz
    for side in Side:
        hz = _host_hz(real, side, default_hz)
        mine = [e for e in model_events if e.side is side]
        invisible = {**_invisible(mine, 1_000_000 // hz), **_repeated_holds(model, side)}
        ties = _ties(mine, 1_000_000 // hz)
        for cat, code in _groups(mine, kernel, side):
            ms = []
            unseen: list[ReasonPair] = []
            for e in mine:
                if category(e) != cat or code is not None and e.code != code:
                    continue
                note = invisible.get(id(e))
                if note:        # not expected among the kernel's: a note, not a pair
                    pair = ReasonPair(side, cat, e, None, True, note)
                    out.pairs.append(pair)
                    unseen.append(pair)
                    continue
                ms.append(e)
            ks = [e for e in kernel if e.side is side and category(e) == cat
                  and (code is None or e.code == code)]
            if not ms and not ks:
                out.notes += _unseen_notes(unseen)
                continue
            sm = difflib.SequenceMatcher(a=[_key(e) for e in ms], b=[_key(e) for e in ks],
                                         autojunk=False)
            for tag, i1, i2, j1, j2 in sm.get_opcodes():
                if tag == "equal":
                    for m, k in zip(ms[i1:i2], ks[j1:j2], strict=True):
                        first = next((q for q in kernel if q.side is side and q.t >= k.t
                                      and q.code == "QUICKACK_MODE" and q.kind == "ack_now"),
                                     None) if k.code == "QUICK_START" else None
                        spent = first.data.get("quick", -1) if first is not None else -1
                        diff = _values(cat, m, k, hz, spent)
                        out.pairs.append(ReasonPair(side, cat, m, k, not diff, diff))
                        if diff:
                            out.problems.append(f"{side.value} {cat} ({m.code}) at model "
                                                f"{ms_text(m.t)} ms / kernel {ms_text(k.t)}"
                                                f" ms: {diff}")
                    continue
                for m in ms[i1:i2]:
                    tie = ties.get(id(m))
                    if tie:
                        out.pairs.append(ReasonPair(side, cat, m, None, True, tie))
                        out.notes.append(f"{side.value} {cat} ({m.code}) at model "
                                         f"{ms_text(m.t)} ms: {tie}")
                        continue
                    out.pairs.append(ReasonPair(side, cat, m, None, False,
                                                "the kernel did not decide this"))
                    out.problems.append(f"{side.value} {cat}: the model's {m.code} at "
                                        f"{ms_text(m.t)} ms ({m.detail or m.reason}); the "
                                        "kernel has none")
                _kernel_only(out, side, cat, ks[j1:j2], unseen,
                             max((q.t for q in ms[:i1]), default=-1))
            out.notes += _unseen_notes(unseen)
    out.pairs.sort(key=_when)
    return out


def _kernel_only(out: ReasonComparison, side: Side, cat: str, ks: list[EventRecord],
                 unseen: list[ReasonPair], after: int) -> None:
    """Kernel decisions no model decision of the run matched in order: each is the
    model's next delayed-ACK arm set aside as invisible (`_phase_twin`), or a difference."""
    for k in ks:
        twin = _phase_twin(unseen, k, after)
        if twin is not None:
            # the model set this re-arm aside as invisible (the same jiffy as its queued
            # timer); the kernel's jiffy boundary fell between the two deadlines, so its
            # timer moved and the tracepoint ran
            twin.kernel = k
            after = twin.model.t if twin.model is not None else after
            twin.note = ("a re-arm the model placed in its queued timer's jiffy; the "
                         "kernel's jiffy phase made it the next one, so the kernel's arm "
                         "was seen")
            continue
        out.pairs.append(ReasonPair(side, cat, None, k, False, "the model did not decide "
                                    "this"))
        out.problems.append(f"{side.value} {cat}: the kernel's {k.code} at {ms_text(k.t)} "
                            f"ms ({k.detail or k.reason}); the model has none")


def _unseen_notes(pairs: list[ReasonPair]) -> list[str]:
    """The notes for the model's decisions set aside as not observable."""
    return [f"{p.side.value} {p.category} ({p.model.code}) at model {ms_text(p.model.t)} "
            f"ms: {p.note}" for p in pairs if p.model is not None]


def _phase_twin(unseen: list[ReasonPair], k: EventRecord, after: int) -> ReasonPair | None:
    """The model's delayed-ACK arm, set aside as invisible, that this unmatched kernel arm
    is: the first one not yet paired after the model decisions already paired before it
    (in order, not by time: the model's run and the real one keep their own pace). The
    model set it aside because its deadline fell in the jiffy of its queued timer; the
    kernel's jiffy boundary fell between them, so its timer moved and the tracepoint ran
    (docs/watch.md, "Comparing reasons")."""
    if k.code != "DELACK_WAIT":
        return None
    return next((p for p in unseen if p.kernel is None and p.model is not None
                 and p.model.code == k.code and p.model.t > after), None)


def _when(p: ReasonPair) -> int:
    e = p.model if p.model is not None else p.kernel
    return e.t if e is not None else 0
