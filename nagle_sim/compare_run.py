"""Model vs kernel, run and shown: the ``compare`` and ``validate`` commands.

Owns the orchestration that `nagle_sim.compare` leaves out: running a scenario on real
sockets and on the model at the real run's jiffy phase, printing the comparison (rich),
writing its tables, and validating every lesson. The executors arrive as runners
(`nagle_sim.trace.Runner`, made by `nagle_sim.runners`): this module imports neither.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compare import (
    TOLERANCE_TEXT,
    Comparison,
    _without_kernel_events,
    compare,
    comparison_markdown,
    iteration_rows,
    match_rows,
    measured_jiffy_phase,
    profiles_of,
    stall_rows,
)
from .export.tables import render_csv, render_markdown
from .model.events import Side
from .scenario import real_run_caveats
from .trace import Runner, Trace
from .trace.summary import iterations, stalls
from .trace.units import ms_text

SimRunner = Callable[..., Trace]
"""The simulator's runner: a `Runner` that also takes the driver's ``sleeps=`` (each run of
a sleep statement as long as the real run's, `aligned_model_run`)."""


def _console() -> Any:
    from rich.console import Console
    return Console()


def print_comparison(cmp: Comparison, console: Any, *, limit: int = 200) -> None:
    """Print the comparison tables. Cells and titles are plain `Text`: a scenario title or
    label such as ``[/]`` is shown as written, never read as rich markup."""
    from rich.table import Table
    from rich.text import Text

    headers, rows = match_rows(cmp)
    table = Table(title=Text(f"{cmp.title}: model vs kernel"), show_lines=False, expand=False)
    for h in headers:
        table.add_column(h, overflow="fold")
    shown = rows if len(rows) <= limit else [r for r in rows if r[8] == "✗"][:limit] or \
        rows[:limit]
    for row in shown:
        table.add_row(*map(Text, row), style=None if row[8] == "✓" else "red")
    if cmp.wire_unknown is not None:
        console.print(Text(f"{cmp.title}: segments were not captured "
                           f"({cmp.wire_unknown}): only ops are compared",
                           style="bold yellow"))
    else:
        console.print(table)
    if len(shown) < len(rows):
        console.print(f"… {len(rows) - len(shown)} more segment rows (all of them are in --json)")
    headers, rows = iteration_rows(cmp)
    if rows:
        it = Table(title="Per-iteration latency (client)")
        for h in headers:
            it.add_column(h)
        for row in rows:
            it.add_row(*map(Text, row), style=None if row[-1] == "✓" else "red")
        console.print(it)
    headers, rows = stall_rows(cmp)
    if rows:
        st = Table(title="Stalls ≥ 10 ms")
        for h in headers:
            st.add_column(h, overflow="fold")
        for row in rows:
            st.add_row(*map(Text, row), style=None if row[6] == "✓" else "red")
        console.print(st)
    for note in cmp.notes:
        console.print(f"note: {note}", markup=False)
    for line in cmp.host:
        console.print(f"host: {line}", markup=False, style="yellow")
    for problem in cmp.problems[:40]:
        console.print(f"difference: {problem}", markup=False, style="red")
    if len(cmp.problems) > 40:
        console.print(f"… {len(cmp.problems) - 40} more differences (see --json)")
    console.print(Text(cmp.verdict, style="bold green" if cmp.agree else "bold red"))
    print_layers(cmp, console)


def print_layers(cmp: Comparison, console: Any, *, limit: int = 10) -> None:
    """The verdict's two layers (`nagle_sim.layers`): decisions, then timing, each with its
    first differences; nothing when the comparison has none (a saved pair of traces)."""
    from rich.text import Text

    layers = cmp.layers
    if layers is None:
        return
    console.print(Text(layers.summary, style="bold green" if layers.decisions.agree
                       else "bold red"))
    for name, layer in (("decisions", layers.decisions), ("timing", layers.timing)):
        for line in layer.differences[:limit]:
            console.print(f"{name}: {line}", markup=False)
        if len(layer.differences) > limit:
            console.print(f"… {len(layer.differences) - limit} more {name} differences "
                          "(see --json)")
        for line in layer.host_facts:
            console.print(f"{name}, perhaps because {line}", markup=False, style="yellow")
        for line in layer.unjudged:
            console.print(f"{name}, not judged: {line}", markup=False, style="dim")


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def with_jiffy_phase(scenario: Any, phase: int) -> Any:
    """``scenario`` with both sides' kernels ticking at ``phase`` (one machine, one clock)."""
    from dataclasses import replace
    sides = {side.value: replace(scenario.side(side), profile=scenario.side(side).profile
                                 .with_overrides(jiffy_phase_us=phase)) for side in Side}
    return replace(scenario, **sides)


@dataclass(slots=True)
class Both:
    """A model run and a real run of one scenario, and how the model was set up."""

    sim: Trace
    real: Trace
    scenario: Any
    """The scenario the model ran (profiles chosen for the real hosts)."""
    notes: list[str]
    decided: Trace | None = None
    """The host-timed model run (`nagle_sim.layers.host_delays`): each call as late as the
    real host made it; None when no call was late. Its decisions are the ones judged."""

    def compare(self) -> Comparison:
        from .layers import two_layers

        profiles = profiles_of(self.scenario)
        cmp = compare(self.sim, self.real, profiles=profiles)
        cmp.notes[:0] = self.notes
        decided = None
        if self.decided is not None:
            decided = (compare(self.decided, self.real, profiles=profiles), self.decided)
        cmp.layers = two_layers(cmp, self.sim, self.real, decided)
        return cmp


def run_both(scenario: Any, *, run_real: Runner, run_sim: SimRunner,
             profile: str = "auto") -> Both:
    """The real run first (``run_real``: this host, or the server side on a remote serve),
    then the model with the profiles the real hosts call for (`model_scenario`) at the real
    run's measured jiffy phase."""
    real = run_real(scenario)
    return model_against(scenario, real, run_sim, profile)


def model_against(scenario: Any, real: Trace, run_sim: SimRunner,
                  profile: str = "auto") -> Both:
    """The model's run of ``scenario`` set up and aligned for the real trace ``real``."""
    from functools import partial

    from .layers import host_delays

    modelled, notes = model_scenario(scenario, real, profile)
    sim = aligned_model_run(modelled, real, run_sim)
    starts, lags = host_delays(real, sim)
    decided = (aligned_model_run(modelled, real, partial(run_sim, host_delays=starts,
                                                         read_lags=lags))
               if (starts or lags) and real.segments else None)
    return Both(sim, real, modelled, notes, decided)


def model_scenario(scenario: Any, real: Trace, profile: str = "auto"
                   ) -> tuple[Any, list[str]]:
    """The scenario as the model should run it against ``real``.

    ``profile``: "auto" gives each side whose profile is the default ``linux`` the version
    profile of its host's kernel (``linux-6.1`` on a 6.1 host) when the model has one;
    "scenario" keeps the scenario's profiles; any other name is used on both sides (its
    ``tune`` settings stay). A remote run's link also takes the hosts' segmentation
    offload (TSO/GSO) as its ``gso``. Returns (that scenario, what was chosen, one line
    each)."""
    from dataclasses import replace

    from .compare import version_profile
    from .model.config import PROFILES

    raw = real.meta.get("host_facts")
    facts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    notes: list[str] = []
    sides = {}
    for side in Side:
        spec = scenario.side(side)
        name = spec.profile.name
        if profile == "auto" and name == "linux":
            kernel = (facts.get(side.value) or {}).get("kernel")
            name, note = version_profile(kernel)
            notes.append(f"{side.value}: {note}")
        elif profile not in ("auto", "scenario"):
            name = profile
        if name != spec.profile.name:
            base = PROFILES[name]
            tuned = base.with_overrides(**spec.tune) if spec.tune else base
            sides[side.value] = replace(spec, profile=tuned)
    out = replace(scenario, **sides) if sides else scenario
    if real.meta.get("link") == "remote":
        out = _path_delays(out, real, notes)
        offl = [(f or {}).get("offloads") or {} for f in facts.values()
                if isinstance(f, dict)]
        # Software GSO is split before the capture tap; only a NIC that segments (TSO)
        # puts multi-MSS bursts where a capture sees them.
        gso = any(o.get("tso") for o in offl if isinstance(o, dict))
        if gso != out.link.gso:
            out = replace(out, link=replace(out.link, gso=gso))
            notes.append(f"the model's link {'sends' if gso else 'does not send'} TSO "
                         "bursts, as the hosts' interfaces (TSO "
                         f"{'on' if gso else 'off'})")
    return out, notes


def _path_delays(scenario: Any, real: Trace, notes: list[str]) -> Any:
    """A remote run crosses a real path, so the model's link is that path: its one-way
    delays are the captures' minimum one-way delays (``meta.path``, realnet.remote.clock:
    never the handshake, which holds the remote host's turnaround) and its rate the one
    measured from packet pairs, or none when the path was too fast to measure or no pair
    was captured (the scenario's rate is then not the path's either, and its serialization
    would be a difference of the model's own making). One note says what the model took."""
    from dataclasses import replace

    from .model.events import Micros

    path = real.meta.get("path")
    if not isinstance(path, dict):
        return scenario
    to_server, to_client = path.get("to_server_us"), path.get("to_client_us")
    if not (isinstance(to_server, int | float) and isinstance(to_client, int | float)
            and 0 <= to_server < 60e6 and 0 <= to_client < 60e6):
        return scenario
    link = scenario.link
    rate = path.get("rate_bps")
    rate = rate if type(rate) is int and 0 <= rate < 1 << 40 else 0
    said = (f"{rate / 1e6:g} Mbit/s (measured from packet pairs)" if rate else
            "no rate limit (" + (str(path.get("rate_note") or "not measured")) + ")")
    notes.append(f"the model's link is the path's: {to_server / 1000:g} ms to the server, "
                 f"{to_client / 1000:g} ms to the client ({path.get('from') or 'measured'}), "
                 f"{said}; the scenario says {link.to_server_delay / 1000:g} / "
                 f"{link.to_client_delay / 1000:g} ms"
                 + (f" at {link.rate_bps / 1e6:g} Mbit/s" if link.rate_bps else ""))
    return replace(scenario, link=replace(link, to_server_delay=Micros(round(to_server)),
                                          to_client_delay=Micros(round(to_client)),
                                          rate_bps=rate))


def aligned_model_run(scenario: Any, real: Trace, run_sim: SimRunner) -> Trace:
    """The model at the real run's jiffy phase (local runs) and with its measured sleeps:
    each ``sleep`` statement as long as the real ones took (median), or, where that
    median would still drift from the real run over the loop, each run of it as long as
    its real twin (``run_sim``'s ``sleeps``)."""
    scenario, slept = with_measured_sleeps(scenario, real)
    runs = measured_sleep_runs(real)
    phase = measured_jiffy_phase(real, scenario.client.profile.hz)
    extra: dict[str, Any] = {"sleeps": runs} if runs else {}
    if phase is not None and not real.meta.get("remote"):
        scenario = with_jiffy_phase(scenario, phase)
    sim: Trace = run_sim(scenario, **extra)
    sim = _follow_write_ties(scenario, real, run_sim, sim, dict(runs))
    if phase is not None and not real.meta.get("remote"):
        sim.meta["jiffy_phase_us"] = phase
    for side, line in runs:
        key = f"{side.value}:{line}"
        slept[key] = slept.get(key, "as measured") + " (each run as long as the kernel's)"
    if slept:
        sim.meta["measured_sleeps"] = slept
    return sim


def _follow_write_ties(scenario: Any, real: Trace, run_sim: SimRunner, sim: Trace,
                       runs: dict[tuple[Side, int], list[int]]) -> Trace:
    """While the runs disagree and the first place they split the bytes differently is a
    write that fell within `WRITE_TIE_US` of a segment's send on the kernel's side and the
    other side in the model (`first_write_tie`), run the model again with that write moved
    to the kernel's side: the sleep before it is made that much longer or shorter. The
    model still decides everything after; a split that is no tie stays a difference.
    Each tie followed is named in the trace's meta (``write_ties``), and so in the
    comparison's notes."""
    from .compare import WRITE_TIE_ROUNDS, first_write_tie

    profiles = profiles_of(scenario)
    followed: list[str] = []
    seen: set[tuple[Side, int, bool]] = set()
    for _ in range(WRITE_TIE_ROUNDS):
        # the cheap test first: most runs split their bytes alike, and a full comparison
        # of a big run is not free
        tie = first_write_tie(sim, real)
        if tie is None or compare(sim, real, profiles=profiles).agree:
            break
        # A second tie on the same statement in the same direction is a pattern (the
        # model's timing off in one direction), not chance: left as a difference.
        pattern = (tie.side, tie.line, tie.shift > 0)
        if pattern in seen:
            break
        seen.add(pattern)
        moved = _moved_sleep(sim, tie.side, tie.line, tie.iteration, tie.loop, tie.shift)
        if moved is None:
            break
        key, spans = moved
        runs[key] = spans
        followed.append(tie.describe())
        sim = run_sim(scenario, sleeps=runs)
    if followed:
        sim.meta["write_ties"] = followed
    return sim


def _moved_sleep(sim: Trace, side: Side, line: int, iteration: tuple[int, ...], loop: int,
                 shift: int) -> tuple[tuple[Side, int], list[int]] | None:
    """Every run of the sleep statement just before the given write (as long as each took
    in ``sim``), the one before the write made ``shift`` µs longer; None when no sleep comes
    right before it or it cannot be that much shorter."""
    ops = [op for op in sim.ops if op.side is side]
    at = next((i for i, op in enumerate(ops) if op.op in ("write", "writev")
               and (op.line, op.iteration, op.loop) == (line, iteration, loop)), None)
    if not at or ops[at - 1].op != "sleep" or not ops[at - 1].line:
        return None
    sleep = ops[at - 1]
    same = [op for op in ops if op.op == "sleep" and op.line == sleep.line]
    spans = [op.end - op.start for op in same if op.end is not None]
    if len(spans) != len(same):
        return None
    index = next(i for i, op in enumerate(same) if op is sleep)
    if spans[index] + shift < 0:
        return None
    spans[index] += shift
    return (side, sleep.line), spans


SLEEP_DRIFT_MIN_US = 50
"""A sleep statement whose real runs took this much longer or shorter in all (the median
difference times how often it ran) is given its measured length in the model."""
CALL_GAP_MAX_US = 1000
"""The longest idle time between two of a side's calls, or the longest call, counted as
the executor's own overhead (tens of µs on this VM); a longer one is a call that blocked
or one the trace does not hold."""
_NON_BLOCKING = frozenset({"write", "writev", "set", "get"})


def _measured_sleeps(real: Trace) -> dict[tuple[Side, int], list[int]]:
    """Per (side, line) of a ``sleep``, how long each of its real runs held the side up
    beyond what the model charges: the sleep, the executor's idle time just before and
    after it, and how much longer than ``syscall_us`` the non-blocking call before it took
    (the model's calls follow back to back, a real executor's ~40 µs apart)."""
    from .model.config import LINUX

    measured: dict[tuple[Side, int], list[int]] = {}
    for side in Side:
        ops = [op for op in real.ops if op.side is side]
        for i, op in enumerate(ops):
            if op.op != "sleep" or op.end is None or not op.line:
                continue
            took = op.end - op.start
            prev = ops[i - 1] if i else None
            if (prev is not None and prev.end is not None
                    and 0 <= op.start - prev.end <= CALL_GAP_MAX_US):
                took += op.start - prev.end
                call = prev.end - prev.start
                if prev.op in _NON_BLOCKING and 0 <= call <= CALL_GAP_MAX_US:
                    took += max(0, call - LINUX.syscall_us)
            after = ops[i + 1].start if i + 1 < len(ops) else None
            if after is not None and 0 <= after - op.end <= CALL_GAP_MAX_US:
                took += after - op.end
            measured.setdefault((side, op.line), []).append(took)
    return measured


def measured_sleep_runs(real: Trace) -> dict[tuple[Side, int], list[int]]:
    """The sleeps whose every run the model should follow: those where the median run
    length, repeated, would drift `SLEEP_DRIFT_MIN_US` or more from the real run's total
    (why-nagle-exists: 100 × ``write 1; sleep 2ms`` took 2.06-2.24 ms a run, and the bytes
    Nagle bundles depend on where each write falls against the returning ACK)."""
    out = {}
    for key, spans in _measured_sleeps(real).items():
        median = sorted(spans)[len(spans) // 2]
        if abs(sum(spans) - median * len(spans)) >= SLEEP_DRIFT_MIN_US:
            out[key] = spans
    return out


def with_measured_sleeps(scenario: Any, real: Trace) -> tuple[Any, dict[str, str]]:
    """``scenario`` with each ``sleep`` statement as long as the real run's sleeps of that
    statement took (median, per side and line, `_measured_sleeps`), where the drift adds
    up to `SLEEP_DRIFT_MIN_US` or more over the statement's runs. A real sleep ends a
    little late, more so under load (~0.5 ms per iteration seen on this VM), and the model's
    sleeps are exact: without this, a long loop of sleeps drifts apart and one late write
    fails the comparison.
    Returns (scenario, "side:line" -> "declared → measured" for those changed)."""
    from dataclasses import replace

    from .model.events import Micros
    from .scenario import Repeat, Sleep

    measured = _measured_sleeps(real)
    changed: dict[str, str] = {}

    def walk(side: Side, body: tuple[Any, ...]) -> tuple[Any, ...]:
        out = []
        for stmt in body:
            if isinstance(stmt, Repeat):
                stmt = replace(stmt, body=walk(side, stmt.body))
            elif isinstance(stmt, Sleep) and (side, stmt.line) in measured:
                values = sorted(measured[(side, stmt.line)])
                median = values[len(values) // 2]
                if abs(median - stmt.duration) * len(values) >= SLEEP_DRIFT_MIN_US:
                    changed[f"{side.value}:{stmt.line}"] = (f"{stmt.duration} µs → "
                                                           f"{median} µs")
                    stmt = replace(stmt, duration=Micros(median))
            out.append(stmt)
        return tuple(out)

    sides = {}
    for side in Side:
        spec = scenario.side(side)
        script = walk(side, spec.script)
        if script != spec.script:
            sides[side.value] = replace(spec, script=script)
    return (replace(scenario, **sides) if sides else scenario), changed


SCENARIO_CHECK_OPS = 10_000
"""Ops per side checked against the scenario's statements (bounded: a 100k-op trace)."""


def check_same_scenario(scenario: Any, real: Trace, where: str) -> None:
    """Refuse a saved real trace that is not a run of ``scenario``: its title and each
    side's ops (name and argument, in order, the first `SCENARIO_CHECK_OPS`) must be the
    scenario's statements. A run that stopped early is a prefix and passes. One
    `TraceError` naming the first difference."""
    from itertools import islice

    from .scenario.steps import HANDSHAKE_OPS, steps
    from .trace import TraceError

    if scenario.title and real.title and scenario.title != real.title:
        raise TraceError(f"{where}: a run of another scenario (its title is "
                         f"{real.title[:60]!r}, {scenario.source} is "
                         f"{scenario.title[:60]!r})")
    for side in Side:
        expected = steps(scenario.side(side).script)
        ops = (op for op in real.ops if op.side is side and op.op not in HANDSHAKE_OPS)
        for op in islice(ops, SCENARIO_CHECK_OPS):
            step = next(expected, None)
            if step is None:
                raise TraceError(f"{where}: a run of another scenario (the {side.value} ran "
                                 f"{op.op} {op.arg[:40]} after the end of {scenario.source}'s "
                                 f"{side.value} script)")
            if (op.op, op.arg) != (step.op, step.arg):
                raise TraceError(f"{where}: a run of another scenario (the {side.value} ran "
                                 f"{op.op} {op.arg[:40]!s} where {scenario.source} line "
                                 f"{step.line} says {step.op} {step.arg[:40]!s})")


def load_real(path: str, scenario: Any | None = None) -> Trace:
    """A saved real trace for `compare`: a real run (source ``realnet``), meta the
    comparison can use (`check_meta`), of ``scenario`` when one is given. Any problem is
    one `TraceError` line naming the file and field."""
    from .compare import check_meta
    from .trace import TraceError

    real = Trace.load(path)
    if real.source != "realnet":
        raise TraceError(f"{path}: not a real trace (its source is {real.source[:20]!r}; "
                         "save one with `nagle-sim realnet run FILE --json > REAL.json`)")
    check_meta(real, path)
    if scenario is not None:
        check_same_scenario(scenario, real, path)
    return real


def check_same_title(sim: Trace, real: Trace, where: str) -> None:
    """Two saved traces of different scenarios (different titles) are not compared."""
    from .trace import TraceError

    if sim.title and real.title and sim.title != real.title:
        raise TraceError(f"{where}: a run of another scenario (its title is "
                         f"{real.title[:60]!r}, the model trace's is {sim.title[:60]!r})")


def load_model(path: str) -> Trace:
    """A saved model trace for `compare MODEL.json REAL.json` (source ``sim``)."""
    from .compare import check_meta
    from .trace import TraceError

    sim = Trace.load(path)
    if sim.source != "sim":
        raise TraceError(f"{path}: not a model trace (its source is {sim.source[:20]!r}; "
                         "compare a scenario or `nagle-sim run FILE --json > MODEL.json` "
                         "with the real trace)")
    check_meta(sim, path)
    return sim


def _write_tables(cmp: Comparison, markdown: str | None, csv_path: str | None) -> None:
    if markdown:
        Path(markdown).write_text(comparison_markdown(cmp), "utf-8")
        _stderr(f"wrote {markdown}")
    if csv_path:
        Path(csv_path).write_text(render_csv(*match_rows(cmp)), "utf-8")
        _stderr(f"wrote {csv_path}")


def compare_cli(scenario: Any, args: Any, *, run_sim: SimRunner,
                run_real: Runner | None) -> int:
    """``nagle-sim compare FILE [REAL.json]``: exit 0 when the kernel agrees with the
    model, else 1. ``scenario`` is None when ``args.model_trace`` is a saved model trace;
    ``run_real`` may be None when a saved real trace is given."""
    reason = (not_comparable(scenario, bool(getattr(args, "remote", None)))
              if scenario is not None else "")
    if reason:
        _stderr(f"note: {reason}; comparing anyway, expect differences")
    from .trace import TraceError

    profile = getattr(args, "profile", None) or "auto"
    saved = getattr(args, "real", None)
    real = getattr(args, "real_trace", None)
    if saved and real is None:
        real = load_real(saved, scenario)
    if real is not None and not real.ops and not real.segments:
        raise TraceError(f"{saved}: nothing to compare: the real trace has neither ops nor "
                         "captured segments")
    if getattr(args, "model_trace", None) is not None and real is not None:
        cmp = compare(args.model_trace, real)
    elif real is not None:
        cmp = model_against(scenario, real, run_sim, profile).compare()
    else:
        assert run_real is not None, "compare without a saved real trace runs the kernel"
        cmp = run_both(scenario, run_real=run_real, run_sim=run_sim,
                       profile=profile).compare()
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(cmp.to_json(), ensure_ascii=False) + "\n")
    else:
        print_comparison(cmp, _console())
    _write_tables(cmp, getattr(args, "markdown", None), getattr(args, "csv", None))
    return 0 if cmp.agree else 1


def not_comparable(scenario: Any, remote: bool = False) -> str:
    """Why this machine's kernel (``remote``: and a serve's, over a real path) cannot run
    ``scenario`` as the model does ("" if it can)."""
    caveats = real_run_caveats(scenario, remote=remote)
    return caveats[0] if caveats else ""


@dataclass(slots=True)
class LessonResult:
    slug: str
    cmp: Comparison | None
    sim: Trace | None
    real: Trace | None
    error: str = ""
    comparable: bool = True

    def key_numbers(self) -> tuple[str, str, str]:
        """(model, real, difference) text: median latency, data segments, stalls."""
        if self.sim is None or self.real is None:
            return "", "", self.error
        return (_numbers(self.sim), _numbers(self.real), _difference(self))


def _median(values: list[int]) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[len(v) // 2] / 1000


def _numbers(trace: Trace) -> str:
    lat = _median([it.latency for it in iterations(trace)])
    data = sum(1 for s in trace.segments if s.length)
    n_stalls = len(stalls(_without_kernel_events(trace)))
    lat_text = "—" if lat is None else f"{lat:.1f} ms"
    return f"median {lat_text}, {data} data segs, {n_stalls} stalls"


def _difference(res: LessonResult) -> str:
    assert res.cmp is not None
    if res.cmp.agree:
        return f"max timing error {ms_text(res.cmp.max_error(), 1)} ms"
    first = res.cmp.problems[0]
    more = len(res.cmp.problems) - 1
    return first + (f" (+{more} more)" if more else "")


def _without_token(remote: str) -> str:
    """``[TOKEN@]HOST:PORT`` as it may be shown: the token is a secret, never printed."""
    return remote.rpartition("@")[2]


def _verdict_table(title: str, headers: list[str], rows: list[list[str]], *,
                   verdict: int) -> Any:
    """A rich table of verdict rows (column ``verdict``: agree plain, n/a dim, anything
    else red). Cells and title are plain `Text`: user text (an address, a problem naming
    a scenario) is never read as rich markup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title))
    for h in headers:
        table.add_column(h, overflow="fold")
    for row in rows:
        table.add_row(*map(Text, row),
                      style={"agree": None, "n/a": "dim"}.get(row[verdict], "red"))
    return table


def _write_markdown(path: str | None, heading: str, headers: list[str],
                    rows: list[list[str]]) -> None:
    """``--markdown PATH``: the heading paragraph, then the table."""
    if path:
        Path(path).write_text(f"{heading}\n\n{render_markdown(headers, rows)}", "utf-8")
        _stderr(f"wrote {path}")


def validate_cli(args: Any, *, run_sim: SimRunner, run_real: Runner) -> int:
    """``nagle-sim validate``: every lesson on the model and on the kernel; exit 1 if any
    lesson disagrees (everything is printed first)."""
    from rich.text import Text

    from .errors import UserError
    from .lessons import load_lessons

    results: list[LessonResult] = []
    for lesson in load_lessons():
        _stderr(f"validate: {lesson.slug} …")
        reason = not_comparable(lesson.scenario, bool(getattr(args, "remote", None)))
        if reason:
            results.append(LessonResult(lesson.slug, None, None, None, reason,
                                        comparable=False))
            continue
        try:
            both = run_both(lesson.scenario, run_real=run_real, run_sim=run_sim,
                            profile=getattr(args, "profile", None) or "auto")
        except UserError as exc:
            results.append(LessonResult(lesson.slug, None, None, None, str(exc)))
            continue
        results.append(LessonResult(lesson.slug, both.compare(), both.sim, both.real))
    headers = ["lesson", "verdict", "model", "real", "difference", "decisions", "timing"]
    rows = []
    for res in results:
        verdict = ("n/a" if not res.comparable else "error" if res.cmp is None
                   else "agree" if res.cmp.agree else "DISAGREE")
        rows.append([res.slug, verdict, *res.key_numbers(), *_layer_cells(res.cmp)])
    remote = getattr(args, "remote", None)
    where = f", server side on {_without_token(remote)}" if remote else ""
    console = _console()
    console.print(_verdict_table(f"Model vs kernel, every lesson{where} ({TOLERANCE_TEXT})",
                                 headers, rows, verdict=1))
    for res in results:
        if res.cmp is not None and not res.cmp.agree:
            console.print(Text(res.slug, style="bold") + Text(
                f": {len(res.cmp.problems)} difference(s)"
                + (f"; {res.cmp.layers.summary}" if res.cmp.layers is not None else "")))
            layers = res.cmp.layers
            shown = (layers.decisions.differences[:8] if layers is not None
                     and not layers.decisions.agree else res.cmp.problems[:8])
            for p in shown:
                console.print(f"  - {p}", markup=False)
    judged = [res.cmp.layers for res in results
              if res.cmp is not None and res.cmp.layers is not None]
    if judged:
        console.print(f"decisions agree on {sum(la.decisions.agree for la in judged)} of "
                      f"{len(judged)} lessons run; timing on "
                      f"{sum(la.timing.agree for la in judged)}", markup=False)
    _write_markdown(getattr(args, "markdown", None),
                    f"# Model vs kernel, every lesson\n\nTolerance: {TOLERANCE_TEXT}.",
                    headers, rows)
    ok = all(res.cmp is not None and res.cmp.agree for res in results if res.comparable)
    return 0 if ok else 1


def _layer_cells(cmp: Comparison | None) -> list[str]:
    """The decisions and timing cells of a verdict row ("" without layers)."""
    layers = cmp.layers if cmp is not None else None
    if layers is None:
        return ["", ""]
    dec = layers.decisions
    timing = layers.timing
    causes = ", ".join(f"{k} {v}" for k, v in sorted(timing.causes.items(),
                                                     key=lambda kv: -kv[1]))
    return ["agree" if dec.agree else f"DIFFER ({len(dec.differences)})",
            "agree" if timing.agree else f"differs ({len(timing.differences)}: {causes})"]


MAX_RANDOM = 1000
"""Random scenarios one ``validate --random`` may run (each takes a second or two)."""


def validate_random_cli(args: Any, *, run_sim: SimRunner, run_real: Runner) -> int:
    """``nagle-sim validate --random N``: N generated scenarios (`nagle_sim.scenario.generator`,
    seeds ``--seed`` … ``--seed`` + N − 1) on the model and on the kernel; a table of
    verdicts with each disagreement's first difference, the disagreeing scenarios written
    to ``--keep`` for ``nagle-sim compare``; exit 1 if any disagrees."""
    from rich.text import Text

    from .errors import UserError
    from .scenario import loads
    from .scenario.generator import random_scenario

    keep = Path(args.keep) if getattr(args, "keep", None) else None
    rows: list[list[str]] = []
    agreed = 0
    first, count = args.seed, args.random
    for i, seed in enumerate(range(first, first + count), 1):
        rs = random_scenario(seed)
        _stderr(f"validate: random scenario {seed} ({i}/{count}) …")
        try:
            both = run_both(loads(rs.text, f"<random scenario {seed}>"),
                            run_real=run_real, run_sim=run_sim,
                            profile=getattr(args, "profile", None) or "auto")
        except UserError as exc:
            rows.append([str(seed), rs.summary, "error", str(exc)])
            continue
        cmp = both.compare()
        if cmp.agree:
            agreed += 1
            rows.append([str(seed), rs.summary, "agree",
                         f"max timing error {ms_text(cmp.max_error(), 1)} ms"])
            continue
        first_problem = cmp.problems[0] if cmp.problems else ""
        more = f" (+{len(cmp.problems) - 1} more)" if len(cmp.problems) > 1 else ""
        rows.append([str(seed), rs.summary, "DISAGREE", first_problem + more])
        if keep is not None:
            path = keep / f"random-{seed}.toml"
            path.write_text(rs.text, "utf-8")
            _stderr(f"wrote {path}")
    headers = ["seed", "scenario", "verdict", "first difference"]
    remote = getattr(args, "remote", None)
    where = f", server side on {_without_token(remote)}" if remote else ""
    console = _console()
    console.print(_verdict_table(f"Model vs kernel, {count} random scenario(s){where} "
                                 f"({TOLERANCE_TEXT})", headers, rows, verdict=2))
    console.print(Text(f"{agreed} of {count} agree"
                       + ("" if agreed == count or keep is None else
                          f"; the others are in {keep}: nagle-sim compare FILE")))
    _write_markdown(getattr(args, "markdown", None),
                    f"# Model vs kernel, random scenarios {first} to {first + count - 1}\n\n"
                    f"Tolerance: {TOLERANCE_TEXT}. {agreed} of {count} agree.",
                    headers, rows)
    return 0 if agreed == count else 1
