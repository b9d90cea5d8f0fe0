"""A capture opened "like a lesson" (``nagle-sim explain CAPTURE --tui``).

The ladder is the CAPTURED run; each stall explain found (cause, evidence, confidence, and
whether the model reproduces it) fills the explanation panel as the cursor reaches it; the
model's run of the rebuilt scenario is the faint overlay (the ghost); the rebuild's
what-ifs (NODELAY on the writer, one write per request, …) are number keys that re-run the
rebuilt scenario and redraw the overlay, as do the usual option toggles. No simpy, no
realnet, no nagle_sim.explain: the data is handed over as a `CaptureView`.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...scenario import Scenario, ScenarioError, loads
from ..capture import CaptureView, StallNote
from ..result import RunResult, fmt_ms
from ..whatif import WhatIf
from ..widgets.ladder import Ladder
from ..widgets.whatif import WhatIfBar
from .run import RunScreen


class CaptureScreen(RunScreen):
    """Captured ladder | stall explanations | the model as overlay, what-if keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "capture_whatif(1)", "What-ifs", show=True, key_display="0-9",
                id="capture.whatif-1", tooltip="Re-run the rebuilt scenario with the "
                "what-if of that number (listed beside the ladder); 0: as rebuilt"),
        *(Binding(str(n), f"capture_whatif({n})", f"What-if {n}", show=False,
                  id=f"capture.whatif-{n}", tooltip=f"Re-run the rebuilt scenario with "
                  f"what-if {n}") for n in range(2, 10)),
        Binding("0", "capture_whatif(0)", "As rebuilt", show=False, id="capture.whatif-0",
                tooltip="The model overlay of the scenario as rebuilt from the capture"),
        # the what-if keys take NODELAY's place in the footer (it must fit 80 columns)
        Binding("d", "flip('client','nodelay')", "NODELAY", show=False, id="capture.nodelay",
                tooltip="What if the client set TCP_NODELAY? (re-runs the overlay)"),
    ]

    def __init__(self, view: CaptureView) -> None:
        super().__init__(text=view.toml, where=view.where, title=view.title)
        self.view = view
        self.export_name = "capture"
        self.chosen = 0
        """The what-if the overlay shows (0: the scenario as rebuilt)."""
        self._stall_ends: list[int] = [s.end for s in view.stalls]
        self._row_stall: dict[int, int] = {}
        """Ladder row → the stall that row ended (see `_capture_stall_rows`)."""

    # ------------------------------------------------------------------ layout
    def compose_side(self) -> ComposeResult:
        with VerticalScroll(id="side"):
            yield Static(self.side_text(), id="capture-side")

    def side_text(self) -> Text:
        v = self.view
        text = Text()
        text.append(v.title + "\n", style="bold")
        text.append("The ladder is the capture (the real run); the faint overlay is the "
                    "model of the scenario rebuilt from it.\n\n")
        text.append("What-ifs (re-run the rebuilt scenario):\n", style="bold")
        text.append(" 0 ", style="reverse" if self.chosen == 0 else "bold")
        text.append(" as rebuilt\n")
        for i, w in enumerate(v.whatifs[:9], start=1):
            text.append(f" {i} ", style="reverse" if self.chosen == i else "bold")
            text.append(f" {w.name}\n")
            if w.text:
                text.append(f"    {w.text}\n", style="dim")
        text.append(f"\nStalls ({len(v.stalls)}; n jumps to the next):\n", style="bold")
        for s in v.stalls[:50]:
            text.append(f" {s.duration_ms:.1f} ms {s.cause}\n")
        if len(v.stalls) > 50:
            text.append(f" … and {len(v.stalls) - 50} more\n", style="dim")
        for note in v.notes:
            text.append(f"\nnote: {note}\n", style="dim italic")
        return text

    # ------------------------------------------------------------------ the capture
    def start(self, text: str, where: str) -> None:
        """Show the capture as the ladder, then the model as its overlay."""
        try:
            scenario = loads(text, where)
        except ScenarioError as exc:
            self.show_error(str(exc))
            return
        self.base_whatif = self.whatif = WhatIf.of(scenario)
        self.query_one(WhatIfBar).show(self.whatif, scenario)
        self.query_one(Ladder).placeholder = "drawing the capture…"
        self._build(scenario, self.detail)

    @work(thread=True, exclusive=True, group="capture")
    def _build(self, scenario: Scenario, detail: str) -> None:
        """Rows of the capture and of the model, off the UI thread (a 100,000-segment
        capture takes seconds)."""
        captured = RunResult.build(scenario, self.view.captured, detail)
        model = (RunResult.build(scenario, self.view.model, detail)
                 if self.view.model is not None else None)
        self.app.call_from_thread(self._show, captured, model)

    def _show(self, captured: RunResult, model: RunResult | None) -> None:
        self.result = captured
        self._stall_rows = self._capture_stall_rows()
        self.previous = model
        self.refresh_view(0)
        if model is None:
            self.simulate(compare=False)

    def take_model_run(self, result: RunResult) -> bool:
        """A re-run of the rebuilt scenario is the overlay; the ladder stays the capture."""
        self.previous = result
        delay = self.whatif.delay_ms if self.whatif is not None else None
        self.whatif = replace(WhatIf.of(result.scenario), delay_ms=delay)
        self.query_one(WhatIfBar).show(self.whatif, result.scenario)
        ladder = self.query_one(Ladder)
        self.refresh_view(ladder.cursor)
        return True

    def _capture_stall_rows(self) -> list[int]:
        """For each stall, the row that ended it: the row of the segment it released (or,
        when that row is folded away at this detail level, the nearest row after it)."""
        self._row_stall = {}
        if self.result is None or not self.result.rows:
            return []
        rows = self.result.rows
        segments = self.view.captured.segments
        row_of = {id(r.segment): i for i, r in enumerate(rows) if r.segment is not None}
        times = [r.t for r in rows]
        last = len(rows) - 1
        for j, s in enumerate(self.view.stalls):
            i = None
            if s.segment is not None and 0 <= s.segment < len(segments):
                i = row_of.get(id(segments[s.segment]))
            if i is None:
                at = s.at if s.at is not None else s.end
                i = min(last, bisect.bisect_left(times, at))
            self._row_stall.setdefault(i, j)
        return sorted(self._row_stall)

    def stall_of(self, t: int, index: int | None = None) -> tuple[int, StallNote] | None:
        """The stall of row ``index`` (the row a stall ended on), else the one time ``t``
        falls in (its ends and its released row included), else None."""
        j = self._row_stall.get(index) if index is not None else None
        if j is not None:
            return j, self.view.stalls[j]
        i = bisect.bisect_left(self._stall_ends, t)
        for k in (i, i - 1, i - 2):
            if 0 <= k < len(self.view.stalls):
                s = self.view.stalls[k]
                if s.covers(t):
                    return k, s
        return None

    def context_lines(self, index: int) -> list[str]:
        if self.result is None or not self.result.rows:
            return []
        index = min(index, len(self.result.rows) - 1)
        row = self.result.rows[index]
        found = self.stall_of(row.t, index)
        if found is None:
            more = len(self.view.stalls)
            return [f"No stall here: the capture has {more} (n jumps to the next)."
                    if more else "The capture has no stall."]
        j, stall = found
        return stall.lines(j + 1, len(self.view.stalls))

    def refresh_view(self, cursor: int | None = None) -> None:
        super().refresh_view(cursor)
        if self.result is None:
            return
        v = self.view
        status = Text()
        status.append(f"capture: {self.result.segment_count} segments, "
                      f"{len(v.stalls)} stalls")
        if v.captured_per_request_ms is not None:
            status.append(f", {v.captured_per_request_ms} ms per request")
        name = "as rebuilt" if self.chosen == 0 else v.whatifs[self.chosen - 1].name
        if self.previous is not None:
            latency = self.previous.latency
            per = f", {fmt_ms(latency)} per request" if latency is not None else ""
            status.append(f" · overlay: model {name}{per}")
        elif self.simulating():
            status.append(f" · overlay: simulating the model {name}…")
        self.query_one("#diff", Static).update(status)

    def action_detail(self) -> None:
        super().action_detail()
        self._stall_rows = self._capture_stall_rows()

    # ------------------------------------------------------------------ what-ifs
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "capture_whatif" and parameters:
            n = parameters[0]
            return isinstance(n, int) and 0 <= n <= min(9, len(self.view.whatifs))
        return super().check_action(action, parameters)

    def action_capture_whatif(self, n: int) -> None:
        """Overlay the model of what-if ``n`` (0: as rebuilt); the ladder stays."""
        if not 0 <= n <= len(self.view.whatifs):
            return
        text = self.view.toml if n == 0 else self.view.whatifs[n - 1].toml
        if not text:
            self.say("this what-if has no scenario to run", severity="warning")
            return
        try:
            scenario = loads(text, self.where)
        except ScenarioError as exc:
            self.show_error(str(exc))
            return
        self.chosen = n
        self.text = text
        self.base_whatif = self.whatif = WhatIf.of(scenario)
        self.extra, self.extra_whatif = (), None
        self.query_one(WhatIfBar).show(self.whatif, scenario)
        self.query_one("#capture-side", Static).update(self.side_text())
        self.simulate(compare=True)

    def action_run_real(self) -> None:
        self.say("the ladder is already a real run: the capture", title="Real sockets")
