"""Reasons compared: the model's decisions against the kernel's (no root).

Hand-made traces for each rule of `nagle_sim.compare.reasons`, and lesson 07's model run
against a real run of it recorded on this kernel (tests/watch/fixtures/lesson07-*.json:
`nagle-sim run --json` and `nagle-sim realnet run --json` as root, Linux 6.18, HZ=250).
"""

from __future__ import annotations

from pathlib import Path

from nagle_sim.compare.reasons import compare_reasons
from nagle_sim.model.events import Side
from nagle_sim.trace import EventRecord, Source, Trace

FIXTURES = Path(__file__).with_name("fixtures")
C, S = Side.CLIENT, Side.SERVER


def ev(t_ms: float, side: Side, kind: str, code: str, *, by: str = "", timer: str | None = None,
       deadline_ms: float | None = None, detail: str = "", **data: int) -> EventRecord:
    return EventRecord(t=round(t_ms * 1000), side=side, kind=kind, code=code, reason=code,
                       detail=detail, timer=timer, data=data,
                       deadline=None if deadline_ms is None else round(deadline_ms * 1000),
                       by=by)


def traces(model: list[EventRecord], kernel: list[EventRecord]) -> tuple[Trace, Trace]:
    # the enum, not its text: the compiled Trace checks the type (the pure one does not)
    return (Trace(source=Source.SIM, title="t", events=model),
            Trace(source=Source.REALNET, title="t", events=kernel))


def wwr_round(t: float, by: str) -> list[EventRecord]:
    """One write-write-read round's decisions, in the model's words or the kernel's."""
    arm = ev(t, S, "ack_delayed", "DELACK_WAIT", by=by, **({"ato_j": 10} if by else
                                                          {"ato": 10}))
    return [arm, ev(t + 0.01, C, "hold", "NAGLE_HOLD", by=by),
            ev(t + 40, S, "timer_fired", "DELACK_FIRED", timer="delack", by=by)]


def test_the_same_decisions_agree():
    model, kernel = traces(wwr_round(1, "") + wwr_round(50, ""),
                           wwr_round(1.2, "kernel") + wwr_round(50.9, "kernel"))
    r = compare_reasons(model, kernel)
    assert r.agree and r.problems == []
    assert r.matched == r.model_total == 6
    assert r.verdict.startswith("reasons AGREE: 6 of 6 model decisions matched by the "
                                "kernel's; 6 kernel")


def test_a_hold_the_kernel_did_not_take_is_a_difference():
    kernel_events = wwr_round(1, "kernel") + wwr_round(50, "kernel")
    kernel_events = [e for e in kernel_events if not (e.kind == "hold" and e.t > 40_000)]
    r = compare_reasons(*traces(wwr_round(1, "") + wwr_round(50, ""), kernel_events))
    assert not r.agree
    assert r.problems == ["client hold: the model's NAGLE_HOLD at 50.010 ms (NAGLE_HOLD); "
                          "the kernel has none"]


def test_a_different_hold_reason_and_a_different_ato_are_differences():
    model = [ev(1, C, "hold", "NAGLE_HOLD"), ev(2, S, "ack_delayed", "DELACK_WAIT", ato=10)]
    kernel = [ev(1, C, "hold", "CORK_HOLD", by="kernel"),
              ev(2, S, "ack_delayed", "DELACK_WAIT", by="kernel", deadline_ms=202, ato_j=50)]
    r = compare_reasons(*traces(model, kernel))
    assert len(r.problems) == 3
    # the delays compared (the model's ato used; the kernel's timer deadline)
    assert any("the ACK waits 40 ms in the model, 200 ms in the kernel (10 vs 50 jiffies)"
               in p for p in r.problems)
    assert any("the kernel's CORK_HOLD" in p for p in r.problems)
    # the kernel's icsk_ack.ato (before tcp_send_delayed_ack's clamp) is not the delay
    kernel[1] = ev(2, S, "ack_delayed", "DELACK_WAIT", by="kernel", deadline_ms=42, ato_j=50)
    assert len(compare_reasons(*traces(model, kernel)).problems) == 2


def test_ato_doubled_by_the_timer_is_compared_by_its_new_value():
    model = [ev(5, S, "mode", "ATO_INFLATE", detail="ato 45 → 51 jiffies")]
    kernel = [ev(6, S, "mode", "ATO_INFLATE", by="kernel",
                 detail="ato 180 ms → 208 ms (45 → 52 jiffies)")]
    r = compare_reasons(*traces(model, kernel))
    assert r.problems == ["server quick-ACK / ping-pong / ato (ATO_INFLATE) at model 5.000 ms"
                          " / kernel 6.000 ms: ato doubled to 51 jiffies in the model, 52 "
                          "in the kernel"]


def test_a_rearm_for_the_same_jiffy_is_invisible_to_the_kernel_not_a_difference():
    model = [ev(1, S, "ack_delayed", "DELACK_WAIT", ato=10),
             ev(1, S, "timer_armed", "DELACK_WAIT", timer="delack", deadline_ms=45),
             ev(1.005, S, "ack_now", "READ_ACK"),
             ev(1.005, S, "timer_cancelled", "PIGGYBACK", timer="delack"),
             ev(1.02, S, "ack_delayed", "DELACK_WAIT", ato=10),
             ev(1.02, S, "timer_armed", "DELACK_WAIT", timer="delack", deadline_ms=45),
             ev(45, S, "timer_fired", "DELACK_FIRED", timer="delack")]
    kernel = [ev(1.1, S, "ack_delayed", "DELACK_WAIT", by="kernel", ato_j=10),
              ev(1.2, S, "ack_now", "READ_ACK", by="kernel"),
              ev(45.5, S, "timer_fired", "DELACK_FIRED", timer="delack", by="kernel")]
    r = compare_reasons(*traces(model, kernel))
    assert r.agree, r.problems
    assert len(r.notes) == 2
    assert any("mod_timer returns before the tracepoint" in n for n in r.notes)
    assert any("never fires with nothing to do" in n for n in r.notes)


def test_a_rearm_the_kernels_jiffy_phase_made_visible_is_matched_not_a_difference():
    """The model sets a re-arm aside as invisible (its deadline shares the queued
    timer's jiffy by the model's clock), but the kernel's jiffy boundary fell between
    the two deadlines: its timer moved and the arm was traced. The two are paired, with
    a note, instead of a note on one side and a difference on the other."""
    model = [ev(1, S, "ack_delayed", "DELACK_WAIT", ato=10),
             ev(1, S, "timer_armed", "DELACK_WAIT", timer="delack", deadline_ms=41),
             ev(1.005, S, "ack_now", "READ_ACK"),
             ev(1.005, S, "timer_cancelled", "PIGGYBACK", timer="delack"),
             ev(3.5, S, "ack_delayed", "DELACK_WAIT", ato=10),
             ev(3.5, S, "timer_armed", "DELACK_WAIT", timer="delack", deadline_ms=43.5),
             ev(43.5, S, "timer_fired", "DELACK_FIRED", timer="delack")]
    kernel = [ev(1.1, S, "ack_delayed", "DELACK_WAIT", by="kernel", ato_j=10),
              ev(1.2, S, "ack_now", "READ_ACK", by="kernel"),
              ev(3.6, S, "ack_delayed", "DELACK_WAIT", by="kernel", ato_j=10),
              ev(44, S, "timer_fired", "DELACK_FIRED", timer="delack", by="kernel")]
    r = compare_reasons(*traces(model, kernel))
    assert r.agree, r.problems
    arms = [p for p in r.pairs if p.category == "delayed ACK armed"]
    assert len(arms) == 2 and all(p.model is not None and p.kernel is not None and p.ok
                                  for p in arms)
    assert any("jiffy phase made it the next one" in n for n in r.notes)


def test_a_cancelled_timer_is_the_kernels_empty_fire():
    model = [ev(1, C, "timer_armed", "DELACK_WAIT", timer="delack", deadline_ms=45),
             ev(1, C, "ack_delayed", "DELACK_WAIT", ato=10),
             ev(2, C, "timer_cancelled", "PIGGYBACK", timer="delack")]
    kernel = [ev(1, C, "ack_delayed", "DELACK_WAIT", by="kernel", ato_j=10),
              ev(45.3, C, "timer_fired", "TIMER_CLEARED", timer="delack", by="kernel")]
    r = compare_reasons(*traces(model, kernel))
    assert r.agree and r.matched == 2


def test_the_quick_ack_budget_counts_the_ack_that_spent_its_first_credit():
    model = [ev(0.1, S, "mode", "QUICK_START", quick=16),
             ev(0.1, S, "ack_now", "QUICKACK_MODE", detail="16 quick ACKs left")]
    kernel = [ev(0.2, S, "mode", "QUICK_START", by="kernel", quick=15),
              ev(0.2, S, "ack_now", "QUICKACK_MODE", by="kernel", quick=15)]
    r = compare_reasons(*traces(model, kernel))
    assert r.agree, r.problems
    kernel[1].data["quick"] = 7
    r = compare_reasons(*traces(model, kernel))
    assert len(r.problems) == 2 and "quick-ACK budget 16 in the model, 8" in r.problems[1]


def test_no_kernel_decisions_means_not_compared_and_says_why():
    model, real = traces(wwr_round(1, ""), [])
    real.meta["kernel_decisions"] = "unavailable: watch needs root"
    r = compare_reasons(model, real)
    assert not r.agree and r.verdict == "reasons not compared: unavailable: watch needs root"


def test_lesson_07_on_this_kernel():
    """The write-write-read lesson: every hold, delayed ACK armed, delayed-ACK timer
    fired, quick ACK and ping-pong change of the model is the kernel's; the model's
    decisions the kernel's tracepoints cannot show (re-arms for a queued timer's jiffy,
    cancels the kernel does as a moved timer, a cancel within a jiffy of the next arm,
    timers stopped by close) are notes, each with its rule."""
    model = Trace.load(FIXTURES / "lesson07-model.json")
    real = Trace.load(FIXTURES / "lesson07-real.json")
    r = compare_reasons(model, real)
    counts = r.counts()
    for row in ("client hold", "server delayed-ACK timer fired", "server ACK at once",
                "client delayed ACK armed"):
        assert counts[row]["model"] == counts[row]["kernel"] == counts[row]["matched"] > 0
    assert counts["client hold"]["matched"] == 11
    assert r.agree, r.problems
    assert r.matched + len(r.notes) == r.model_total
    assert r.verdict.startswith("reasons AGREE: 95 of 104 model decisions matched by the "
                                "kernel's, 9 not observable (notes)")
