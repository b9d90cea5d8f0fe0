"""The shared behaviour of the lesson and sandbox screens: a ladder over a finished run,
step-through, play, what-if toggles (re-simulated off the UI thread), the ghost of the
previous run, the real-socket overlay and export.

Subclasses supply the left pane (`compose_side`). No simpy, no realnet: runners are injected.
"""

from __future__ import annotations

import asyncio
import bisect
import contextvars
import io
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, ProgressBar, Static
from textual.worker import get_current_worker

from ...compare import Match
from ...model.events import Side
from ...scenario import Scenario, ScenarioError, loads
from ...trace import Trace
from ...trace.units import ms_text
from ..classroom import export_stem
from ..horizon import trace_until, visible_bars, visible_rows, visible_segments
from ..layout import ZOOM_LEVELS
from ..messages import RealRunFailed, RealRunFinished, SimFailed, SimFinished
from ..result import RunResult, compare_text, measured_delta, measured_twins
from ..rows import row_times
from ..runners import AppServices, run_cancellable
from ..whatif import Knob, WhatIf
from ..widgets.explain import ExplainPanel
from ..widgets.ladder import Ladder
from ..widgets.whatif import WhatIfBar

SPEEDS: tuple[float, ...] = (1, 2, 5, 10, 25, 60)
"""Play speeds in ladder rows per second."""
SIM_PROGRESS_S = 0.5
"""A simulation running longer than this shows the progress bar (and its elapsed time)."""


def _b(key: str, action: str, description: str, tooltip: str, *, show: bool = False,
       key_display: str | None = None) -> Binding:
    ident = "run." + re.sub(r"[^a-z0-9]+", "-", action.lower()).strip("-")
    return Binding(key, action, description, show=show, key_display=key_display, id=ident,
                   tooltip=tooltip)


class RunScreen(Screen[None]):
    """Ladder + explanation + what-if bar over one scenario."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # the footer has room for about eight keys at 80 columns: one entry per group, the
        # rest in help (?) and the palette (ctrl+p)
        _b("right", "step(1)", "Step", "Select the next event (← the previous one)",
           show=True, key_display="←→"),
        _b("left", "step(-1)", "Prev", "Select the previous event", key_display="←"),
        _b("home", "first", "First", "Jump to the first event"),
        _b("end", "last", "Last", "Jump to the last event"),
        _b("n", "stall(1)", "Stall", "Jump to the next stall (a silent gap ≥ 10 ms)",
           show=True),
        _b("N", "stall(-1)", "Prev stall", "Jump to the previous stall"),
        _b("space", "play", "Play", "Play the run forward, one event at a time; again to pause",
           show=True),
        _b("full_stop", "speed(1)", "Faster", "Play faster", key_display="."),
        _b("comma", "speed(-1)", "Slower", "Play slower", key_display=","),
        _b("z", "compress", "Gaps", "Switch between compressed gaps and a linear time axis"),
        _b("plus,equals_sign", "zoom(-1)", "Zoom in", "Linear time axis: fewer µs per line",
           key_display="+"),
        _b("minus", "zoom(1)", "Zoom out", "Linear time axis: more µs per line",
           key_display="-"),
        _b("d", "flip('client','nodelay')", "NODELAY", "What if the client set TCP_NODELAY?",
           show=True),
        _b("c", "flip('client','cork')", "Client CORK", "What if the client set TCP_CORK?"),
        _b("k", "flip('client','quickack')", "Client QUICKACK",
           "Cycle the client's TCP_QUICKACK: default, 0, 1"),
        _b("o", "flip('client','profile')", "Client OS", "Cycle the client's OS profile"),
        _b("D", "flip('server','nodelay')", "Server NODELAY",
           "What if the server set TCP_NODELAY?"),
        _b("C", "flip('server','cork')", "Server CORK", "What if the server set TCP_CORK?"),
        _b("K", "flip('server','quickack')", "Server QUICKACK",
           "Cycle the server's TCP_QUICKACK: default, 0, 1"),
        _b("O", "flip('server','profile')", "Server OS", "Cycle the server's OS profile"),
        _b("l", "delay", "Link delay", "Cycle the one-way link delay"),
        _b("u", "reset_whatif", "Undo what-ifs", "Back to the scenario's own options"),
        _b("g", "ghost", "Ghost", "Show or hide the previous run's segments, drawn faintly"),
        _b("v", "detail", "Detail", "Cycle the detail level: wire (segments and calls), "
           "normal (the decisions lessons talk about), all (cwnd, pacing, quick-ACK budget…)"),
        _b("r", "run_real", "Real", "Run this scenario on real sockets and overlay "
           "the measured segments", show=True),
        _b("e", "export", "Export", "Export the ladder (SVG) and a pcap, named after the "
           "lesson and what-if variant (a download in a browser)"),
        _b("p", "side_pane", "Pane", "Show or hide the left pane (prose or editor)"),
        _b("shift+down", "explain_scroll(1)", "Explain ↓", "Scroll the explanation down",
           key_display="shift+↓"),
        _b("shift+up", "explain_scroll(-1)", "Explain ↑", "Scroll the explanation up",
           key_display="shift+↑"),
        Binding("escape", "app.pop_screen", "Back", show=True, id="run.back",
                tooltip="Back to the previous screen"),
    ]

    def __init__(self, *, text: str | None, where: str, title: str,
                 scenario_path: Path | None = None, error: str = "") -> None:
        super().__init__()
        self.text = text
        self.where = where
        self.title_text = title
        self.scenario_path = scenario_path
        self.load_error = error
        self.base_whatif: WhatIf | None = None
        self.whatif: WhatIf | None = None
        self.result: RunResult | None = None
        self.previous: RunResult | None = None
        self.measured: Trace | None = None
        self._twins: dict[int, Match] = {}
        """The comparison row of each simulated segment (`measured_twins`)."""
        self._stall_rows: list[int] = []
        self._play: Timer | None = None
        self._speed = 2
        self._real_variant: tuple[str, ...] | None = None
        """The overrides of the run a real-socket run was started for (its variant)."""
        self._sim_requested = 0
        self._sim_answered = 0
        self._sim_clock: Timer | None = None
        """Ticks while a simulation runs: the progress bar and its elapsed time."""
        self._sim_since = 0.0
        self.extra: tuple[str, ...] = ()
        """A lesson variant's ``--set`` overrides (a claim's ``when``), applied first."""
        self.extra_whatif: WhatIf | None = None
        """The option state of the scenario with `extra` applied (what toggles flip from)."""
        self.horizon: int | None = None
        """While a question is pending: the time (µs) after which nothing is shown."""
        self._ladder: Ladder | None = None
        """The ladder once mounted (`check_action`)."""
        self.detail = "normal"
        """Which rows the ladder shows (trace.rows.DETAIL_LEVELS), as the CLI's --detail."""
        self.export_name = Path(where).stem
        """File-name stem of exports (the lesson's folder name for a lesson)."""

    # ------------------------------------------------------------------ layout
    @property
    def services(self) -> AppServices:
        return cast(AppServices, self.app)

    def compose_side(self) -> ComposeResult:
        """The left pane (lesson prose or the scenario editor)."""
        yield from ()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield from self.compose_side()
            yield Ladder(id="ladder")
        yield ExplainPanel(id="explain")
        yield WhatIfBar(id="whatif")
        with Horizontal(id="status"):
            yield Static("", id="diff")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="progress")
        yield Footer(compact=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key that reaches this screen while it is still being composed (typed just
        after the key that opened it) runs nothing: the screen's actions act on its
        ladder and panels, which are not there yet (a key storm in a classroom tab ended
        the app with NoMatches for the Ladder). Back (esc) always works. The ladder is
        remembered at mount rather than queried: the footer asks this of every binding at
        each of its many rebuilds, and the DOM query was 11 % of the CPU a classroom app
        spent following its teacher into a lesson (cProfile, issue 24)."""
        ladder = self._ladder
        return action == "app.pop_screen" or (ladder is not None and ladder.is_attached)

    def on_mount(self) -> None:
        self._ladder = self.query_one(Ladder)
        self._ui = (asyncio.get_running_loop(), contextvars.copy_context())
        self.sub_title = self.title_text
        self.query_one("#progress").display = False
        ladder = self.query_one(Ladder)
        if self.services.projector:
            ladder.scale = type(ladder.scale)(compressed=ladder.scale.compressed,
                                              zoom=ladder.scale.zoom, row_height=2)
        self._update_title()
        ladder.focus()
        if self.text is None:
            self.show_error(self.load_error or f"{self.where}: nothing to run")
            return
        self.start(self.text, self.where)

    def on_resize(self) -> None:
        self.set_class(self.size.height < 32, "-compact")
        self.call_after_refresh(self.query_one(Ladder).scroll_to_cursor)

    def start(self, text: str, where: str) -> None:
        """Load ``text`` as the base scenario (its own options) and simulate it."""
        try:
            base = loads(text, where)
        except ScenarioError as exc:
            self.show_error(str(exc))
            return
        self.text, self.where = text, where
        self.base_whatif = WhatIf.of(base)
        self.whatif = self.base_whatif
        self.extra, self.extra_whatif = (), None
        self.previous = None
        self.query_one(WhatIfBar).show(self.whatif, base)
        self.simulate(compare=False)

    def say(self, message: str, **kwargs: object) -> None:
        """Notify, replacing the previous notification: toasts must not pile up over the
        ladder or a question."""
        self.app.clear_notifications()
        self.notify(message, **kwargs)  # type: ignore[arg-type]

    def show_error(self, message: str) -> None:
        """Show a one-line error (the CLI's message) without leaving the screen."""
        # the message quotes user text: never let it be read as markup
        self.query_one("#diff", Static).update(Text.assemble(("error: ", "bold red"), message))
        ladder = self.query_one(Ladder)
        if not ladder.rows:
            ladder.placeholder = message
        self.say(message, markup=False, title="Scenario error", severity="error", timeout=8)

    # ------------------------------------------------------------------ simulation
    def simulate(self, compare: bool) -> None:
        """Simulate the variant the toggles show now (off the UI loop). The variant is
        fixed here, not read later by the worker, and travels on the result."""
        assert self.text is not None and self.base_whatif is not None
        assert self.whatif is not None
        self._sim_requested += 1
        self._simulate(self.text, self.where, tuple(self.overrides()), self.detail, compare,
                       self._sim_requested)
        if self._sim_clock is None:
            self._sim_since = time.monotonic()
            self._sim_clock = self.set_interval(SIM_PROGRESS_S, self._sim_progress)

    def _sim_progress(self) -> None:
        """While a simulation runs past `SIM_PROGRESS_S`: the progress bar, and on a ladder
        with nothing to show yet, how long it has run and how to stop it (a big run takes
        seconds; leaving the screen cancels its worker, which the simulator checks every
        few thousand events)."""
        if not self.is_attached or not self.query("#progress"):
            return  # the screen is being composed or taken down: nothing to show on
        bar = self.query_one("#progress")
        if not self.simulating():
            if self._sim_clock is not None:
                self._sim_clock.stop()
                self._sim_clock = None
            bar.display = self._real_running()
            return
        bar.display = True
        ladder = self.query_one(Ladder)
        if not ladder.rows and ladder.placeholder.startswith("simulating"):
            elapsed = time.monotonic() - self._sim_since
            ladder.placeholder = f"simulating… {elapsed:.1f} s (esc goes back and stops it)"

    def _real_running(self) -> bool:
        return any(w.node is self and w.group == "real" and not w.is_finished
                   for w in self.app.workers)

    def simulating(self) -> bool:
        """A what-if's re-simulation has not finished: the shown run is not the variant
        the toggles name yet."""
        return self._sim_answered != self._sim_requested

    @work(thread=True, exclusive=True, group="sim")
    def _simulate(self, text: str, where: str, overrides: tuple[str, ...], detail: str,
                  compare: bool, generation: int) -> None:
        worker = get_current_worker()
        try:
            scenario = loads(text, where, list(overrides))
            trace = run_cancellable(self.services.run_sim, scenario,
                                    lambda: worker.is_cancelled)
            result = RunResult.build(scenario, trace, detail, overrides)
        except ScenarioError as exc:
            self.post_message(SimFailed(str(exc), generation))
            return
        except Exception as exc:  # the model rejecting a combination is a user error too
            if not worker.is_cancelled:   # a cancelled run ends in an exception: say nothing
                self.post_message(SimFailed(f"{where}: {type(exc).__name__}: {exc}",
                                            generation))
            return
        if not get_current_worker().is_cancelled:
            self._hand_over(SimFinished(result, compare, generation))

    def _hand_over(self, message: SimFinished) -> None:
        """Hand a finished run to the UI loop at once (from the worker thread). Posted as
        a message it would wait behind the screen's queue: on a lesson's opening that is
        the prose's layout passes, and the ladder and its explanation appeared hundreds of
        milliseconds after the run had finished."""
        ui = getattr(self, "_ui", None)
        if ui is not None:
            loop, context = ui
            try:
                loop.call_soon_threadsafe(self._take_run, message, context=context)
                return
            except RuntimeError:      # the loop has closed (the app is exiting)
                pass
        self.post_message(message)

    def _take_run(self, message: SimFinished) -> None:
        if self.is_attached:
            self._sim_finished(message)

    def overrides(self) -> list[str]:
        """``--set`` list of the state shown: the variant, then the toggles on top of it."""
        assert self.whatif is not None and self.base_whatif is not None
        return [*self.extra, *self.whatif.overrides(self.extra_whatif or self.base_whatif)]

    def set_variant(self, overrides: tuple[str, ...]) -> None:
        """Show the scenario with ``overrides`` applied (a lesson's what-if); () = base."""
        if self.text is None or self.base_whatif is None:
            return
        if overrides:
            try:
                self.extra_whatif = WhatIf.of(loads(self.text, self.where, list(overrides)))
            except ScenarioError as exc:
                self.show_error(str(exc))
                return
        else:
            self.extra_whatif = None
        self.extra = overrides
        self.whatif = self.extra_whatif or self.base_whatif
        self.simulate(compare=True)

    @on(SimFinished)
    def _sim_finished(self, message: SimFinished) -> None:
        if message.generation != self._sim_requested:
            return  # a newer what-if is being simulated: this one is no longer asked for
        self._sim_answered = message.generation
        self._sim_progress()
        new = message.result
        if self.take_model_run(new):
            return
        ladder = self.query_one(Ladder)
        old_time = ladder.current_row.t if ladder.current_row else 0
        self.horizon = self.current_horizon()
        if message.compare and self.result is not None:
            self.previous = self.result
            if self.horizon is None:
                diff = compare_text(self.previous, new)
                self.query_one("#diff", Static).update(diff)
                self.say(diff, title="What changed", timeout=4)
        self.result = new
        self.measured = None
        self._twins = {}
        assert self.whatif is not None
        self.whatif = replace(WhatIf.of(new.scenario), delay_ms=self.whatif.delay_ms,
                              own_delay_ms=self.whatif.own_delay_ms)
        self.query_one(WhatIfBar).show(self.whatif, new.scenario)
        self._stall_rows = [i for i, _ in new.stall_rows()]
        times = row_times(new.rows)
        cursor = max(0, bisect.bisect_right(times, old_time) - 1) if message.compare else 0
        self.refresh_view(cursor)
        self.on_result(new)

    def take_model_run(self, result: RunResult) -> bool:
        """Hook: a screen whose ladder is not the simulation (a capture) takes the run
        here and returns True; by default the run becomes the ladder."""
        return False

    def current_horizon(self) -> int | None:
        """The time after which nothing may show (a pending question's); None: no limit."""
        return None

    def refresh_view(self, cursor: int | None = None) -> None:
        """Draw the current run up to the horizon: ladder, overlays and the status line."""
        if self.result is None:
            return
        ladder = self.query_one(Ladder)
        self.horizon = horizon = self.current_horizon()
        ladder.horizon = horizon
        ladder.set_overlay("measured", visible_segments(
            self.measured.segments if self.measured is not None else None, horizon),
            relayout=False)
        ladder.set_overlay("ghost", visible_segments(
            self.previous.trace.segments if self.previous else None, horizon),
            relayout=False)
        ladder.set_rows(visible_rows(self.result.rows, horizon),
                        visible_bars(self.result.bars, horizon),
                        ladder.cursor if cursor is None else cursor)
        if horizon is None:
            if self.previous is not None:
                self.query_one("#diff", Static).update(compare_text(self.previous,
                                                                    self.result))
            else:
                self.query_one("#diff", Static).update(self.result.headline())
        else:
            self.query_one("#diff", Static).update(
                f"predict first: shown up to {ms_text(horizon)} ms; the summary follows")

    def on_result(self, result: RunResult) -> None:
        """Hook for subclasses after every finished simulation."""

    @on(SimFailed)
    def _sim_failed(self, message: SimFailed) -> None:
        if message.generation == self._sim_requested:
            self._sim_answered = message.generation
            self._sim_progress()
        self.show_error(message.error)

    # ------------------------------------------------------------------ stepping
    def move_to(self, index: int, *, reveal_first: bool = False) -> None:
        """Move the cursor (subclasses may intercept to ask a question first;
        ``reveal_first``: a jump that should stop where a pending answer's reveal begins)."""
        self.query_one(Ladder).cursor = index

    def action_step(self, delta: int) -> None:
        ladder = self.query_one(Ladder)
        self.move_to(ladder.cursor + delta)

    def action_first(self) -> None:
        self.move_to(0)

    def action_last(self) -> None:
        rows = self.result.rows if self.result is not None else self.query_one(Ladder).rows
        self.move_to(len(rows) - 1)

    def action_stall(self, direction: int) -> None:
        cursor = self.query_one(Ladder).cursor
        stalls = self._stall_rows   # ascending: a bisect, not a scan (10,000 stalls in S3)
        if direction > 0:
            k = bisect.bisect_right(stalls, cursor)
            target = stalls[k] if k < len(stalls) else None
        else:
            k = bisect.bisect_left(stalls, cursor)
            target = stalls[k - 1] if k > 0 else None
        if target is None:
            self.say("No more stalls that way.", timeout=2)
            return
        self.move_to(target, reveal_first=True)

    def action_play(self) -> None:
        if self._play is not None:
            self.pause()
        else:
            self._play = self.set_interval(1 / SPEEDS[self._speed], self._tick)
        self._update_title()

    def pause(self) -> None:
        if self._play is not None:
            self._play.stop()
            self._play = None
            self._update_title()

    def _tick(self) -> None:
        ladder = self.query_one(Ladder)
        if ladder.cursor >= len(ladder.rows) - 1 and self.horizon is None:
            self.pause()
            return
        self.move_to(ladder.cursor + 1)  # at a horizon this asks the pending question

    def action_speed(self, delta: int) -> None:
        self._speed = max(0, min(len(SPEEDS) - 1, self._speed + delta))
        if self._play is not None:
            self._play.stop()
            self._play = self.set_interval(1 / SPEEDS[self._speed], self._tick)
        self._update_title()

    def action_compress(self) -> None:
        ladder = self.query_one(Ladder)
        scale = ladder.scale
        ladder.scale = type(scale)(compressed=not scale.compressed, zoom=scale.zoom,
                                   row_height=scale.row_height)
        self._update_title()

    def action_zoom(self, delta: int) -> None:
        ladder = self.query_one(Ladder)
        scale = ladder.scale
        zoom = max(0, min(len(ZOOM_LEVELS) - 1, scale.zoom + delta))
        ladder.scale = type(scale)(compressed=False, zoom=zoom, row_height=scale.row_height)
        self._update_title()

    def set_projector(self, on: bool) -> None:
        ladder = self.query_one(Ladder)
        scale = ladder.scale
        ladder.scale = type(scale)(compressed=scale.compressed, zoom=scale.zoom,
                                   row_height=2 if on else 1)

    def _update_title(self) -> None:
        ladder = self.query_one(Ladder)
        state = f"▶ {SPEEDS[self._speed]:g}/s" if self._play else "paused"
        ladder.border_title = f"client ⇄ server · {ladder.scale.describe()} · {state}"

    @on(Ladder.RowClicked)
    def _row_clicked(self, message: Ladder.RowClicked) -> None:
        self.move_to(message.index)

    @on(Ladder.StepChanged)
    def _step_changed(self, message: Ladder.StepChanged) -> None:
        self.query_one(ExplainPanel).explain(message.row, message.index,
                                             len(message.ladder.rows),
                                             self.context_lines(message.index))

    def context_lines(self, index: int) -> list[str]:
        """Held periods, the stall and the measured Δ around row ``index``."""
        if self.result is None or not self.result.rows:
            return []
        row = self.result.rows[min(index, len(self.result.rows) - 1)]
        horizon = self.horizon
        lines: list[str] = []
        for bar in self.result.bars_at(row.t):
            if bar.what in ("hold", "delack", "probe0") and (
                    horizon is None or bar.end <= horizon):   # pending: the answer
                who = "holds data" if bar.what == "hold" else "waits"
                lines.append(f"{bar.side.value} {who}: {bar.label} "
                             f"(from {ms_text(bar.start)} ms)")
        stall = self.result.stall_at(row.t)
        if stall is not None:
            if horizon is None or stall.end <= horizon:
                lines.append(f"Stall {stall.text()}")
            else:
                lines.append(f"Silent since {ms_text(stall.start)} ms, so far")
        if self.measured is not None:
            # the orange ┄ arrows are named where they are seen (issue 31.3: no word of
            # the explanation said what they were)
            if row.segment is not None:
                lines.append("┄ kernel: " + measured_delta(
                    row.segment, self._twins.get(id(row.segment))))
            else:
                lines.append("┄ orange arrows: the kernel's segments, this scenario run "
                             "on real sockets (r)")
        return lines[:4]

    # ------------------------------------------------------------------ what-if
    def action_flip(self, side: str, knob: str) -> None:
        if self.whatif is None:
            return
        self.whatif = self.whatif.flipped(Side(side), Knob(knob))
        self.simulate(compare=True)

    @on(WhatIfBar.Flip)
    def _chip(self, message: WhatIfBar.Flip) -> None:
        if message.side is None or message.knob is None:
            self.action_delay()
        else:
            self.action_flip(message.side.value, message.knob.value)

    def action_delay(self) -> None:
        if self.whatif is None:
            return
        self.whatif = self.whatif.next_delay()
        self.simulate(compare=True)

    def action_reset_whatif(self) -> None:
        if self.base_whatif is None:
            return
        self.whatif = self.base_whatif
        self.extra, self.extra_whatif = (), None
        self.simulate(compare=True)

    def action_detail(self) -> None:
        if self.result is None:
            return
        from ...trace.rows import DETAIL_LEVELS
        self.detail = DETAIL_LEVELS[(DETAIL_LEVELS.index(self.detail) + 1) % len(DETAIL_LEVELS)]
        ladder = self.query_one(Ladder)
        old_time = ladder.current_row.t if ladder.current_row else 0
        self.result = RunResult.build(self.result.scenario, self.result.trace, self.detail,
                                      self.result.overrides)
        self._stall_rows = [i for i, _ in self.result.stall_rows()]
        times = row_times(self.result.rows)
        self.refresh_view(max(0, bisect.bisect_right(times, old_time) - 1))
        self.say(f"detail: {self.detail}", timeout=2)

    def action_ghost(self) -> None:
        ladder = self.query_one(Ladder)
        ladder.show_ghost = not ladder.show_ghost
        self.say("ghost of the previous run " + ("shown" if ladder.show_ghost else "hidden"),
                    timeout=2)

    # ------------------------------------------------------------------ real sockets
    def action_run_real(self) -> None:
        if self.services.run_real is None:
            reason = self.services.real_blocker or "real-socket runs are not available here"
            self.query_one("#diff", Static).update(Text(reason))
            self.say(reason, markup=False, title="Real sockets", severity="warning")
            return
        if self.result is None:
            return
        if self.simulating():
            self.say("still simulating the what-if you chose: press r again when the ladder "
                     "shows it", title="Real sockets", severity="warning")
            return
        self._real_variant = self.result.overrides
        self.query_one("#progress").display = True
        waiting = " (waiting for its turn)" if self.services.classroom is not None else ""
        self.query_one("#diff", Static).update(f"running on real sockets{waiting}…")
        self._run_real(self.result.scenario)

    @work(thread=True, exclusive=True, group="real")
    def _run_real(self, scenario: Scenario) -> None:
        runner = self.services.run_real
        assert runner is not None
        try:
            trace = runner(scenario)
        except Exception as exc:
            self.post_message(RealRunFailed(str(exc) or type(exc).__name__))
            return
        self.post_message(RealRunFinished(trace))

    @on(RealRunFinished)
    def _real_finished(self, message: RealRunFinished) -> None:
        self.query_one("#progress").display = False
        if self.simulating() or self.result is None or \
                self._real_variant != self.result.overrides:
            # the student toggled a what-if while it ran: never draw a measurement of one
            # variant over the model of another
            text = ("real run discarded: it measured another what-if variant than the one "
                    "shown; press r again")
            self.query_one("#diff", Static).update(text)
            self.say(text, title="Real sockets", severity="warning")
            return
        if not message.trace.segments and self.result is not None and self.result.trace.segments:
            # an empty capture is a failed measurement, never "segments 67 → 0"
            reason = message.trace.message or "the capture saw no segments (capturing needs "
            reason += "" if message.trace.message else "root or network namespaces here)"
            self.show_error(f"real run failed: {reason}")
            return
        self.measured = message.trace
        self._twins = (measured_twins(self.result.trace, message.trace)
                       if self.result is not None else {})
        ladder = self.query_one(Ladder)
        ladder.set_overlay("measured", visible_segments(message.trace.segments, self.horizon))
        shown = visible_segments(message.trace.segments, self.horizon) or []
        count = f"{len(shown)} segment" + ("" if len(shown) == 1 else "s")
        text = f"measured {count} on real sockets (┄ orange overlay: the kernel)"
        if self.horizon is not None:
            text = (f"measured {count} up to {self.horizon / 1000:.3f} ms on real sockets "
                    "(┄ orange overlay: the kernel); the rest after your answer")
        if self.result is not None and self.horizon is None:
            real = RunResult.build(self.result.scenario, message.trace)
            text = f"sim vs real: {compare_text(self.result, real)}"
        self.query_one("#diff", Static).update(text)
        self.say(text, title="Real sockets")
        self.query_one(ExplainPanel).explain(ladder.current_row, ladder.cursor,
                                             len(ladder.rows), self.context_lines(ladder.cursor))

    @on(RealRunFailed)
    def _real_failed(self, message: RealRunFailed) -> None:
        self.query_one("#progress").display = False
        self.show_error(f"real run failed: {message.error}")

    # ------------------------------------------------------------------ export
    def export_stem(self) -> str:
        """``<lesson>-<variant>``: the name both exports share."""
        overrides = list(self.result.overrides) if self.result is not None else []
        return export_stem(self.export_name, overrides)

    def action_export(self) -> None:
        if self.result is None:
            return
        if self.simulating():
            self.say("still simulating the what-if you chose: press e again when the ladder "
                     "shows it", title="Export", severity="warning")
            return
        overlay = self.measured if self._real_variant == self.result.overrides else None
        # while a question is pending an export must not show what comes next either
        trace = trace_until(self.result.trace, self.horizon)
        overlay = trace_until(overlay, self.horizon) if overlay is not None else None
        if self.services.classroom is not None:
            self._deliver(trace, overlay, self.export_stem())
        else:
            self._export(trace, overlay, free_stem(Path.cwd(), self.export_stem()))

    @work(thread=True, group="export")
    def _export(self, trace: Trace, overlay: Trace | None, stem: Path) -> None:
        """Write ``<stem>.svg`` and ``<stem>.pcap`` (the current directory, never the
        package's folder: lessons may live in site-packages)."""
        from ...export import ExportError, export_cli
        try:
            paths = export_cli(trace, pcap=stem.with_name(stem.name + ".pcap"),
                               svg=stem.with_name(stem.name + ".svg"), overlay=overlay)
        except ExportError as exc:
            self.app.call_from_thread(self.say, str(exc), markup=False,
                                      title="Export failed", severity="error")
            return
        text = "\n".join(str(p) for p in paths)
        self.app.call_from_thread(self.say, text, markup=False, title="Exported")

    @work(thread=True, group="export")
    def _deliver(self, trace: Trace, overlay: Trace | None, stem: str) -> None:
        """Classroom: hand the files to the student's browser (Textual's delivery API),
        as one page that shows the ladder and links both files: a browser starts one
        download by itself and blocks a second. Nothing is written on the server."""
        from ...export import ExportError, ladder_scene
        from ...export.pcap import to_pcap
        from ...export.svg import to_svg
        from ..webpages import export_page
        try:
            files = [(f"{stem}.svg", to_svg(ladder_scene(trace, overlay)).encode("utf-8"),
                      "image/svg+xml"),
                     (f"{stem}.pcap", to_pcap(trace), "application/vnd.tcpdump.pcap")]
        except ExportError as exc:
            self.app.call_from_thread(self.say, str(exc), markup=False,
                                      title="Export failed", severity="error")
            return
        page = export_page(stem, files).encode("utf-8")
        self.app.call_from_thread(self.app.deliver_binary, io.BytesIO(page),
                                  save_filename=f"{stem}.html", open_method="browser",
                                  mime_type="text/html")
        self.app.call_from_thread(
            self.say, f"{stem}.svg and {stem}.pcap: a new browser tab shows the ladder "
            "and links to save both", markup=False, title="Sent to your browser")

    def action_explain_scroll(self, direction: int) -> None:
        panel = self.query_one(ExplainPanel)
        panel.scroll_to(y=panel.scroll_y + 2 * direction, animate=False)

    def action_side_pane(self) -> None:
        for pane in self.query("#side"):
            pane.display = not pane.display


EXPORT_NUMBERS = 999
"""How many numbered exports of one name ``e`` makes before it asks for a clean folder."""


def free_stem(folder: Path, name: str) -> Path:
    """``folder/name``, or ``name-2``, ``name-3``, … : the first whose ``.svg`` and
    ``.pcap`` are both free, so pressing ``e`` again (later in the lesson) never replaces
    an earlier export. Past `EXPORT_NUMBERS`, the last name (replaced)."""
    stem = folder / name
    for n in range(2, EXPORT_NUMBERS + 1):
        if not any((folder / (stem.name + ext)).exists() for ext in (".svg", ".pcap")):
            break
        stem = folder / f"{name}-{n}"
    return stem

