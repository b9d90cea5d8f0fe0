"""`nagle-sim explain CAPTURE`: open a real capture and explain every stall.

Owns: the pipeline `explain_file` — stream the file once, splitting and triaging its
connections (`scan`, `connections`), analyse the suspect ones (`rank`), then for the one
explained convert (`totrace`), find and name stalls (`causes`), rebuild and re-run on the
model (`rebuild`) — and `ExplainError`, the one-line message for bad input. Views live in
`report`.
Must not import textual or realnet; rich only inside `report` and `cli` (lazily).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.events import Side
from ..scenario import ScenarioError
from ..trace import Runner
from .causes import (
    LOW,
    WINDOW_CAUSES,
    KernelVerdict,
    KernelWord,
    Stall,
    View,
    apply_kernel_word,
    find_stalls,
)
from .connections import STALL_US, Connection, longest_stalled, split_connections
from .pcap import CaptureError, CaptureFile, read_capture
from .rebuild import Rebuilt, parse_os, rebuild
from .scanner import PacketStore, Progress, scan
from .totrace import Captured, to_trace
from .watched import WatchError, WatchJoin, load_watch

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
    top: int = 10
    """Connections the summary table lists (`--top`)."""
    runtime: str = "c"
    """The runtime the fixes are written for (`advice.RUNTIMES` key, or "all")."""


RANK_BUDGET = 100_000
"""Packets analysed in full to rank a capture's connections by their longest stall
(after the `TOP` most suspect ones, which are always analysed): bounded time on a capture
of many connections. The rest keep the triage's numbers."""
TOP = 10
"""Connections the summary table lists by default (`--top N`)."""


def longest_stall(stalls: list[Stall]) -> tuple[int, int, str]:
    """(µs, start, cause) of the longest stall not caused by an idle application;
    (0, 0, "") when there is none — `Connection.longest_stall`'s value."""
    best = max((s for s in stalls if s.causes != ["app"]), key=lambda s: s.duration,
               default=None)
    return (best.duration, best.start, best.cause) if best else (0, 0, "")


def triage_order(conns: list[Connection]) -> list[Connection]:
    """Connections that can hold a stall (a quiet gap ≥ 10 ms), the most suspect first:
    the longest gap an idle application does not explain (`connections.Tally`), then the
    longest quiet gap."""
    return sorted((c for c in conns if c.gap[0] >= STALL_US),
                  key=lambda c: (-c.suspect[1], -c.gap[0], c.number))


def rank(conns: list[Connection], path: str, *, top: int = TOP,
         budget: int | None = None, progress: Progress | None = None) -> None:
    """Fill `Connection.longest_stall` and `.stalls`: a connection without a quiet gap of
    10 ms has none; the others are analysed in full in triage order — the ``top`` most
    suspect always, the other suspect ones while ``budget`` packets last, and those whose
    every gap an idle application explains only when the whole capture fits the budget.
    A single connection is left to `explain_file`, which finds its stalls anyway."""
    for c in conns:
        if c.gap[0] < STALL_US:
            c.longest_stall, c.stalls = (0, 0, ""), (0, 0)
    if len(conns) < 2:
        return
    if budget is None:
        budget = RANK_BUDGET
    small = sum(c.count for c in conns) <= budget
    todo = []
    for i, c in enumerate(triage_order(conns)):
        if i >= top and (c.count > budget or not (c.suspect[0] or small)):
            continue
        budget -= c.count
        todo.append(c)
    for i, c in enumerate(todo):
        if progress is not None:
            progress("analysing", i, len(todo))
        analyse(c, path)


def analyse(c: Connection, path: str) -> list[Stall]:
    """Every stall of connection ``c`` (its packets read back and dropped again)."""
    cap = to_trace(c, path)
    view = View(trace=cap.trace, seen=cap.seen, retransmit=cap.retransmit,
                frames=cap.frames, mss=cap.mss)
    stalls = find_stalls(view)
    c.longest_stall = longest_stall(stalls)
    c.stalls = (len(stalls), sum(s.duration for s in stalls))
    c.found = stalls
    return stalls


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
                 truncated_ok: bool = False, top: int = TOP,
                 progress: Progress | None = None,
                 kernel: KernelWord | None = None) -> Explanation:
    """Explain one connection of the capture at ``path``; ``runner``: the simulator's
    (`nagle_sim.runners.simulate`), to re-run the rebuilt scenario on the model and ask
    its what-ifs (without one, the scenario is only written); ``truncated_ok``: a file that
    ends inside a frame is explained from its complete frames (a note says so); ``top``:
    connections always analysed in full (`rank`); ``progress``: called as the file is
    read; ``kernel``: the kernel's own decisions for this connection (a watch trace),
    which decide the stalls they cover (`causes.apply_kernel_word`).

    Raises:
        ExplainError: the file or an option is bad (`CaptureError` is one).
    """
    try:
        os_choice: dict[Side, str] = parse_os(os_text) if os_text else {}
    except ValueError as exc:
        raise ExplainError(str(exc)) from None
    scanned = scan(path, truncated_ok=truncated_ok, progress=progress)
    try:
        return _explain(scanned.capture, scanned.connections, scanned.store, path, conn, port,
                        os_choice, runner, top, progress, kernel)
    finally:
        scanned.store.close()


def _explain(capture: CaptureFile, conns: list[Connection], store: PacketStore, path: str,
             conn: int | None, port: int | None, os_choice: dict[Side, str],
             runner: Runner | None, top: int, progress: Progress | None,
             kernel: KernelWord | None) -> Explanation:
    # a bad --conn or --port is refused before the analysis
    if conn is not None and not 1 <= conn <= len(conns):
        has = "only connection 1" if len(conns) == 1 else f"connections 1 to {len(conns)}"
        raise ExplainError(f"{path}: no connection {conn} (the capture has {has})")
    matching = [c for c in conns if port in (c.client[1], c.server[1])] if port else []
    if port is not None and not matching:
        raise ExplainError(f"{path}: no connection uses port {port}")
    watched = kernel if isinstance(kernel, WatchJoin) else None
    if watched is not None:
        # the watch trace names its connection: that one is explained (checked against
        # --conn, found among --port's or all), refused before the analysis when absent
        watched.choose(matching if port is not None else conns,
                       conns[conn - 1] if conn is not None else None, path)
    rank(conns, path, top=top, progress=progress)
    if conn is not None:
        chosen = conns[conn - 1]
    elif watched is not None:
        chosen = watched.choose(matching if port is not None else conns, None, path)
    elif port is not None:
        chosen = longest_stalled(matching)
    else:
        chosen = longest_stalled(conns)
    if progress is not None:
        progress("explaining", 0, 0)
    chosen.packets = chosen.loaded()       # the one explained keeps its packets
    captured = to_trace(chosen, path)
    sack = bool(captured.trace.meta.get("sack_permitted", True)) or not captured.handshake
    view = View(trace=captured.trace, seen=captured.seen, retransmit=captured.retransmit,
                frames=captured.frames, mss=captured.mss, sack=sack)
    stalls = find_stalls(view)
    doubt_missing(stalls, captured)
    if watched is not None:
        watched.bind(captured)
    decided = apply_kernel_word(stalls, captured.trace, kernel) if kernel is not None else 0
    if watched is not None:
        watched.place(stalls)
    # the explained connection's own stalls are the final word (a lone connection was
    # not ranked; a ranked one was analysed without SACK knowledge)
    chosen.longest_stall = longest_stall(stalls)
    chosen.stalls = (len(stalls), sum(s.duration for s in stalls))
    chosen.found = stalls
    notes = ([capture.truncated] if capture.truncated else []) + list(captured.notes)
    if kernel is not None:
        notes.append(f"the kernel's own decisions (a watch trace) decided {decided} of the "
                     f"{len(stalls)} stall(s); the others are read from the wire")
    if watched is not None:
        notes += watched.summary()
    if store.truncated(chosen.number):
        notes.insert(0, f"connection {chosen.number} has {chosen.count:,} packets: "
                     f"explained from its first {len(chosen.packets):,}")
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
                       stalls=stalls, rebuilt=rebuilt, notes=notes, top=top)


# re-exported for tests and the report
__all__ += ["Stall", "read_capture", "split_connections", "to_trace", "find_stalls",
            "KernelWord", "KernelVerdict", "WatchError", "WatchJoin", "load_watch"]
