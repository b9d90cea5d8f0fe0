"""`nagle-sim explain CAPTURE`: open a real capture and explain every stall.

Owns: the pipeline `explain_file` — read (`pcap`), split (`connections`), convert
(`totrace`), find and name stalls (`causes`), rebuild and re-run on the model (`rebuild`) —
and `ExplainError`, the one-line message for bad input. Views live in `report`.
Must not import textual or realnet; rich only inside `report` and `cli` (lazily).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.events import Side
from ..scenario import ScenarioError
from ..trace import Runner
from .causes import LOW, WINDOW_CAUSES, Stall, View, find_stalls
from .connections import Connection, longest_stalled, split_connections
from .pcap import CaptureError, CaptureFile, read_capture
from .rebuild import Rebuilt, parse_os, rebuild
from .totrace import Captured, to_trace

__all__ = ["CaptureError", "ExplainError", "Explanation", "explain_file"]


ExplainError = CaptureError
"""Bad input to explain (the file, --conn, --port, --os); ``str(err)`` is one line."""


@dataclass(slots=True)
class Explanation:
    capture: CaptureFile
    connections: list[Connection]
    chosen: Connection
    captured: Captured
    stalls: list[Stall]
    rebuilt: Rebuilt | None
    notes: list[str] = field(default_factory=list)


RANK_BUDGET = 400_000
"""Packets analysed to rank several connections by their longest stall (the rest are
ranked by their longest quiet gap): bounded time on a capture of many connections."""


def longest_stall(stalls: list[Stall]) -> tuple[int, int, str]:
    """(µs, start, cause) of the longest stall not caused by an idle application;
    (0, 0, "") when there is none — `Connection.longest_stall`'s value."""
    best = max((s for s in stalls if s.causes != ["app"]), key=lambda s: s.duration,
               default=None)
    return (best.duration, best.start, best.cause) if best else (0, 0, "")


def rank(conns: list[Connection], path: str) -> None:
    """Fill each connection's `Connection.longest_stall` (not ``app``), within budget.
    A single connection is left to `explain_file`, which finds its stalls anyway."""
    if len(conns) < 2:
        return
    budget = RANK_BUDGET
    for c in sorted(conns, key=lambda c: -c.longest_gap()[0]):
        if len(c.packets) > budget:
            continue
        budget -= len(c.packets)
        cap = to_trace(c, path)
        view = View(trace=cap.trace, seen=cap.seen, retransmit=cap.retransmit,
                    frames=cap.frames, mss=cap.mss)
        c.longest_stall = longest_stall(find_stalls(view))


def doubt_missing(stalls: list[Stall], captured: Captured) -> None:
    """A stall during which the capture lost packets is named from partial evidence: its
    confidence drops to low and its text says so."""
    for st in stalls:
        lost = [h for h in captured.holes if h.t_from <= st.end and h.t_to >= st.start]
        if lost:
            st.confidence = min(st.confidence, LOW)
            st.text += (f" (uncertain: {sum(h.end - h.start for h in lost)} B of the "
                        f"{lost[0].side.value}'s data around it are missing from the "
                        "capture)")


def explain_file(path: str, *, conn: int | None = None, port: int | None = None,
                 os_text: str = "", runner: Runner | None = None,
                 truncated_ok: bool = False) -> Explanation:
    """Explain one connection of the capture at ``path``; ``runner``: the simulator's
    (`nagle_sim.runners.simulate`), to re-run the rebuilt scenario on the model and ask
    its what-ifs (without one, the scenario is only written); ``truncated_ok``: a file
    that ends inside a frame is explained from its complete frames (a note says so).

    Raises:
        ExplainError: the file or an option is bad (`CaptureError` is one).
    """
    try:
        os_choice: dict[Side, str] = parse_os(os_text) if os_text else {}
    except ValueError as exc:
        raise ExplainError(str(exc)) from None
    capture = read_capture(path, truncated_ok=truncated_ok)
    conns = split_connections(capture.packets)
    rank(conns, path)
    if conn is not None:
        if not 1 <= conn <= len(conns):
            has = ("only connection 1" if len(conns) == 1
                   else f"connections 1 to {len(conns)}")
            raise ExplainError(f"{path}: no connection {conn} (the capture has {has})")
        chosen = conns[conn - 1]
    elif port is not None:
        matching = [c for c in conns if port in (c.client[1], c.server[1])]
        if not matching:
            raise ExplainError(f"{path}: no connection uses port {port}")
        chosen = longest_stalled(matching)
    else:
        chosen = longest_stalled(conns)
    captured = to_trace(chosen, path)
    sack = bool(captured.trace.meta.get("sack_permitted", True)) or not captured.handshake
    view = View(trace=captured.trace, seen=captured.seen, retransmit=captured.retransmit,
                frames=captured.frames, mss=captured.mss, sack=sack)
    stalls = find_stalls(view)
    doubt_missing(stalls, captured)
    # the explained connection's own stalls are the final word (a lone connection was
    # not ranked; a ranked one was analysed without SACK knowledge)
    chosen.longest_stall = longest_stall(stalls)
    notes = ([capture.truncated] if capture.truncated else []) + list(captured.notes)
    rebuilt: Rebuilt | None
    try:
        rebuilt = rebuild(captured, stalls, os_choice, runner=runner, view=view)
    except ScenarioError as exc:
        # e.g. a capture whose timing is beyond what a scenario may say (a link delay over
        # ten minutes): the stalls stand, only the model's re-run is missing
        rebuilt = None
        notes.append(f"the model could not re-run this capture: {exc}")
    if rebuilt is not None:
        notes += rebuilt.notes
        if rebuilt.model is not None and any(set(s.causes) & set(WINDOW_CAUSES)
                                             for s in stalls):
            notes.append("the rebuilt scenario does not model the receiver's buffer size "
                         "or how slowly its application read, so the model does not "
                         "reproduce the receiver / zero_window stalls")
    return Explanation(capture=capture, connections=conns, chosen=chosen, captured=captured,
                       stalls=stalls, rebuilt=rebuilt, notes=notes)


# re-exported for tests and the report
__all__ += ["Stall", "read_capture", "split_connections", "to_trace", "find_stalls"]
