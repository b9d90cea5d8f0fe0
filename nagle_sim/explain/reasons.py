"""The link between the model's reasons and explain's causes: two vocabularies, one table.

The model says why it acted with a `nagle_sim.model.events.Reason` (``NAGLE_HOLD``,
``DELACK_FIRED``, ...), recorded as a hold event's or a segment's ``code``; explain names a
captured stall with the causes of `nagle_sim.explain.causes.CAUSES` (``nagle``,
``delayed_ack``, ...), read from the wire alone. A model stall (`nagle_sim.trace.summary.
Stall`) has the code of the hold that kept data back (``held_code``) and of the segment that
ended it (``ended_code``); `model_causes` turns those into explain's words, so the model's
stall and a capture's can be set side by side.

- `HOLD_CAUSE`: a hold's reason → the cause it is (Nagle's hold is ``nagle``);
- `RELEASE_CAUSE`: the reason of the segment that ended a stall → the cause, where the
  release itself is one (the delayed-ACK timer's ACK is ``delayed_ack``; the probe timer
  that sends corked data adds nothing: the hold already said ``cork``);
- `NOT_A_CAUSE`: every other reason, with why no stall is named after it.

Every `Reason` is in exactly one of the three (tests/explain/test_reasons_link.py, which
also runs each lesson on the model, writes it as a pcap, explains that capture and checks
that explain's causes are the model's own, linked here). Watch has the same link for the
kernel's decisions (`realnet.watch.decide.CAUSE_OF`); tests/test_architecture.py holds the
two equal, but for watch's inferred autocork hold (see there). Imports the model's
vocabulary only.
"""

from __future__ import annotations

from typing import Final

from ..model.events import Reason

HOLD_CAUSE: Final[dict[Reason, str]] = {
    Reason.NAGLE_HOLD: "nagle",
    Reason.NAGLE_HOLD_CLASSIC: "nagle",
    Reason.CORK_HOLD: "cork",
    Reason.MORE_HOLD: "msg_more",
    Reason.CWND_HOLD: "cwnd",
    Reason.RWND_HOLD: "receiver",
    Reason.PACING_HOLD: "pacing",
}
"""A hold's reason (a ``hold`` event's code during the stall) → explain's cause."""

RELEASE_CAUSE: Final[dict[Reason, str]] = {
    Reason.DELACK_FIRED: "delayed_ack",
    Reason.LOSS_PROBE: "tlp",
    Reason.RETRANSMIT: "rto",
    Reason.WINDOW_PROBE: "zero_window",
    Reason.PACING_RELEASE: "pacing",
}
"""The reason of the segment that ended a stall → explain's cause: a timer the stall
waited for."""

NOT_A_CAUSE: Final[dict[Reason, str]] = {
    # the fidelity round's rules (shutdown, send buffer, user timeout, autotuning, loss
    # recovery without SACK): explain's capture vocabulary has no cause of their own yet
    Reason.SHUTDOWN_PUSH: "shutdown(SHUT_WR) sends what is queued and the FIN: the "
                          "application's own call",
    Reason.SNDBUF_HOLD: "a write blocked on a full send buffer: on the wire the data in "
                        "flight waits for ACKs, and the window or cwnd that keeps it is named",
    Reason.SNDBUF_ROOM: "ACKs freed room in the send buffer: the blocked write goes on",
    Reason.WRITE_TIMEOUT: "the connection is dropped after its retransmissions: the "
                          "retransmission timer ('rto') is the wait a capture shows",
    Reason.RCVBUF_GROW: "the receive buffer grows: a larger window, never a wait",
    Reason.CWND_PRR: "the window shrinks in fast recovery: a rate, not a stall of its own",
    Reason.DUPACK: "a duplicate ACK is counted: the loss it hints at is the cause",
    Reason.RECOVERY_ENTER: "fast recovery begins after three duplicate ACKs: no timer waits",
    Reason.RECOVERY_EXIT: "fast recovery ends: no wait",
    Reason.FAST_RETRANSMIT: "a lost segment re-sent on duplicate ACKs, within a round trip of "
                            "the loss: no timer wait ('rto' and 'tlp' are the timers)",
    Reason.APP_WRITE: "data leaving as written: it ends a stall an idle application made",
    Reason.FULL_SEGMENT: "a full segment leaves at once: it ends a stall, never makes one",
    Reason.AUTOCORK_HOLD: "autocork holds until the device queue drains: microseconds",
    Reason.ACK_RELEASE: "an ACK let held data go: the hold (and whatever delayed the ACK, "
                        "the peer's) is the cause",
    Reason.NODELAY_PUSH: "the application pushed: its own call, not a wait",
    Reason.UNCORK_PUSH: "the application uncorked: the cork hold is the cause",
    Reason.PROBE0_RELEASE: "the probe timer ends a cork or MSG_MORE hold: the hold is the "
                           "cause",
    Reason.TSQ_RELEASE: "ends an autocork hold: microseconds",
    Reason.CLOSE_PUSH: "close() pushed: the application's call",
    Reason.HANDSHAKE: "the handshake: one round trip, explain's link",
    Reason.RESET: "a reset ends the connection rather than a wait",
    Reason.RESET_NO_SOCKET: "a reset ends the connection rather than a wait",
    Reason.QUICKACK_MODE: "an ACK sent at once",
    Reason.FULL_FRAME: "an ACK sent at once",
    Reason.DELACK_WAIT: "the ACK's wait starts here; its end (DELACK_FIRED) names it",
    Reason.DELACK_DUE: "an ACK sent as its timer was due: at once",
    Reason.READ_ACK: "an ACK sent at once after a read",
    Reason.WINDOW_UPDATE: "a window update: at once, after a read",
    Reason.QUICKACK_OPT: "an ACK sent at once (TCP_QUICKACK)",
    Reason.PIGGYBACK: "the ACK rode on data: no wait of its own",
    Reason.DUPLICATE: "an ACK sent at once",
    Reason.OUT_OF_ORDER: "an ACK sent at once (the loss's timer is the cause)",
    Reason.FIN_ACK: "the peer's FIN: the application closed",
    Reason.EVERY_2ND: "an ACK sent at once",
    Reason.PSH_ACK: "an ACK sent at once",
    Reason.SYNACK_DELAYED: "the handshake's ACK: it rides on the first data",
    Reason.QUICK_START: "a mode change, not a segment",
    Reason.QUICK_REFILL: "a mode change, not a segment",
    Reason.QUICK_SPENT: "a mode change, not a segment",
    Reason.QUICK_DROPPED: "a mode change, not a segment",
    Reason.PINGPONG_ENTER: "a mode change, not a segment",
    Reason.PINGPONG_COUNT: "a mode change, not a segment",
    Reason.PINGPONG_EXIT: "a mode change, not a segment",
    Reason.QUICKACK_ON: "a mode change, not a segment",
    Reason.QUICKACK_OFF: "a mode change, not a segment",
    Reason.ATO_UPDATE: "a timer's length changes, not a segment",
    Reason.ATO_INFLATE: "a timer's length changes, not a segment",
    Reason.CWND_GROW: "the window grows: CWND_HOLD names a full one",
    Reason.CWND_IDLE: "the window restarts: CWND_HOLD names a full one",
    Reason.BBR_CWND: "BBR sets the window: CWND_HOLD names a full one",
    Reason.PROBE0_ARMED: "a timer armed; the hold it ends is the cause",
    Reason.RTO_ARMED: "a timer armed; RETRANSMIT names its firing",
    Reason.TIMER_CLEARED: "a timer no longer needed",
    Reason.STATE_CHANGE: "the connection's state: no wait",
    Reason.APP_CALL: "the application's call: no wait",
    Reason.SOCKOPT_GET: "the application's call: no wait",
    Reason.SOCKOPT_SET: "the application's call: no wait",
}
"""Reasons no stall is named after, and why."""


def model_causes(held_code: str, ended_code: str) -> list[str]:
    """Explain's causes for a model stall held by ``held_code`` and ended by
    ``ended_code`` (`Reason` names, or "" when the model recorded none): the hold's cause,
    then the release's, each once. Empty when neither names a cause (an idle application,
    the link's delay: explain's ``app`` and ``link`` come from timing, not a decision)."""
    causes: list[str] = []
    for code, table in ((held_code, HOLD_CAUSE), (ended_code, RELEASE_CAUSE)):
        reason = Reason.__members__.get(code)
        cause = table.get(reason) if reason is not None else None
        if cause is not None and cause not in causes:
            causes.append(cause)
    return causes
