"""TUI benchmarks (print, never assert): first paint, opening and stepping S3 NODELAY at
10,000 messages (230,000 segments, 500,000 ladder rows), what-if, help open and lesson
open → explanation.

Run: ``python benchmarks/bench_tui.py [--repeat N] [--only-big [--messages N]]``. Targets:
start to first paint ≤ 1.0 s, one step on the big run ≤ 30 ms, re-simulate after a toggle
≤ 150 ms per lesson. A step is timed twice: app-side (CPU from the step's action to the last
frame it causes, every frame caught at ``App._display``) and under Pilot (press + pause,
which adds Pilot's own waits for every widget's message queue). The first line says which
build of the simulator ran (``pip install .`` compiles it; the TUI is interpreted in both).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench_s3 import build

from nagle_sim.lessons import Lesson, load_lessons
from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.result import RunResult
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.lesson_list import LessonListScreen
from nagle_sim.tui.screens.run import RunScreen
from nagle_sim.tui.widgets.ladder import Ladder

FIXTURE_LESSONS = Path(__file__).resolve().parent.parent / "tests" / "tui" / "fixtures" / "lessons"

BIG = """title = "S3 NODELAY x{n}"
description = "10,000-message RHEL test cut to {n} messages: 15 writes of 2 B, 2 B reply"
[client]
nodelay = true
script = \"\"\"
repeat {n} {{
  repeat 15 {{ write 2 }}
  read 2
}}
\"\"\"
[server]
script = \"\"\"
repeat {n} {{
  read 30
  write 2
}}
\"\"\"
"""


def _lessons() -> tuple[list[Lesson], str]:
    try:
        found = load_lessons()
    except Exception as exc:  # lessons are written concurrently; fall back to fixtures
        print(f"  (lessons/ failed to load: {exc}; using test fixtures)")
        found = []
    if found:
        return found, "lessons/"
    return load_lessons(FIXTURE_LESSONS), "tests/tui/fixtures/lessons"


async def _settle(pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def first_paint(lessons: list[Lesson]) -> tuple[float, float]:
    t0 = time.perf_counter()
    app = NagleApp(run_sim=run_sim, lessons=lessons, ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        while not isinstance(app.screen, LessonListScreen):
            await pilot.pause()
        await pilot.pause()
        t_list = time.perf_counter() - t0
        t1 = time.perf_counter()
        await pilot.press("enter")
        while not (isinstance(app.screen, LessonScreen) and app.screen.query_one(Ladder).rows):
            await pilot.pause(0.001)
        await pilot.pause()
        t_lesson = time.perf_counter() - t1
    return t_list, t_lesson


async def _app_side_step(app: NagleApp, act: Callable[[], None]) -> tuple[float, int, int]:
    """One step without Pilot: CPU ms from calling the action to the last frame it
    caused (every frame the app writes is timed at `App._display`; the app is then left
    idle for 0.1 s, which costs next to nothing), the frames written and the layout passes."""
    from textual.screen import Screen

    frames: list[float] = []
    layouts = [0]
    display = app._display
    relayout = Screen._refresh_layout

    def spy(screen, renderable):  # type: ignore[no-untyped-def]
        display(screen, renderable)
        if renderable is not None:
            frames.append(time.process_time())

    def count(screen, *args, **kwargs):  # type: ignore[no-untyped-def]
        layouts[0] += 1
        return relayout(screen, *args, **kwargs)

    app._display = spy  # type: ignore[method-assign]
    Screen._refresh_layout = count  # type: ignore[method-assign]
    try:
        c = time.process_time()
        act()
        await asyncio.sleep(0.1)
    finally:
        app._display = display  # type: ignore[method-assign]
        Screen._refresh_layout = relayout  # type: ignore[method-assign]
    return ((frames[-1] - c) * 1000 if frames else 0.0), len(frames), layouts[0]


def _stats(xs: list[float]) -> str:
    return f"min {min(xs):6.2f} / median {statistics.median(xs):6.2f} / max {max(xs):6.2f}"


async def big_trace(n: int, steps: int) -> None:
    """Open an S3 NODELAY run of ``n`` messages (10,000: 230,000 segments), then step it:
    app-side (action → last frame, CPU) and under Pilot (press + pause, CPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.toml"
        path.write_text(BIG.format(n=n))
        t0, c0 = time.perf_counter(), time.process_time()
        app = NagleApp(run_sim=run_sim, path=str(path), ask_questions=False)
        async with app.run_test(size=(120, 40)) as pilot:
            while not (isinstance(app.screen, RunScreen) and app.screen.query(Ladder)
                       and app.screen.query_one(Ladder).rows):
                await pilot.pause(0.02)
            await pilot.pause()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            screen = app.screen
            assert isinstance(screen, RunScreen)
            ladder = screen.query_one(Ladder)
            trace = screen.result.trace if screen.result is not None else None
            events = (len(trace.segments) + len(trace.ops) + len(trace.events)) if trace else 0
            segments = len(trace.segments) if trace else 0
            print(f"  S3 NODELAY x{n}: {segments:,} segments, {events:,} trace events, "
                  f"{len(ladder.rows):,} ladder rows, {ladder.layout_.height:,} lines")
            print(f"  open (start, simulate, rows, first ladder paint): CPU {cpu:.2f} s, "
                  f"wall {wall:.2f} s (other jobs load the CPU)")
            ladder.cursor = len(ladder.rows) // 2
            await pilot.pause()
            for label, delta in (("right", 1), ("left", -1)):
                app_ms, frames, layouts = [], [], []
                for _ in range(steps):
                    ms, f, lay = await _app_side_step(app, partial(screen.action_step, delta))
                    app_ms.append(ms)
                    frames.append(f)
                    layouts.append(lay)
                pilot_ms = []
                for _ in range(steps):
                    c = time.process_time()
                    await pilot.press(label)
                    await pilot.pause()
                    pilot_ms.append((time.process_time() - c) * 1000)
                print(f"  step {label:>5} app-side CPU ms {_stats(app_ms)}; frames "
                      f"{statistics.median(frames):g}, layout passes {sum(layouts)}/{steps}")
                print(f"  step {label:>5} with Pilot CPU ms {_stats(pilot_ms)} (press + pause:"
                      " adds Pilot's own waits)")
            for label, act in (("end", screen.action_last), ("home", screen.action_first)):
                ms, f, lay = await _app_side_step(app, act)
                print(f"  jump {label:>5} app-side CPU {ms:6.2f} ms ({f} frames, {lay} layouts)")
            # cost of painting a full, uncached screen far into the trace
            ladder.cursor = len(ladder.rows) * 3 // 4
            await pilot.pause()
            ladder._cache.clear()
            t = time.perf_counter()
            for y in range(ladder.size.height):
                ladder.render_line(y)
            print(f"  repaint {ladder.size.height} uncached ladder lines: "
                  f"{(time.perf_counter() - t) * 1000:.2f} ms")


async def pilot_overhead(lessons: list[Lesson]) -> None:
    """What a press + pause costs on a tiny trace: Pilot's own idle waits."""
    app = NagleApp(run_sim=run_sim, lessons=lessons, ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LessonScreen(lessons[0]))
        await _settle(pilot)
        times = []
        for _ in range(10):
            t = time.perf_counter()
            await pilot.press("right")
            await pilot.pause()
            times.append((time.perf_counter() - t) * 1000)
        print(f"  baseline: press+pause on a {len(app.screen.query_one(Ladder).rows)}-row "
              f"lesson takes {statistics.median(times):.1f} ms wall (Pilot overhead)")
        t = time.perf_counter()
        await pilot.press("d")
        await _settle(pilot)
        print(f"  baseline: toggle + settle {(time.perf_counter() - t) * 1000:.1f} ms wall")


def _stamp(stamps: list[float], result: object) -> None:
    stamps.append(time.perf_counter())


async def resimulate(lessons: list[Lesson], repeat: int) -> None:
    app = NagleApp(run_sim=run_sim, lessons=lessons, ask_questions=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for lesson in lessons:
            await app.push_screen(LessonScreen(lesson))
            await _settle(pilot)
            times: list[float] = []
            sim_only: list[float] = []
            stamps: list[float] = []
            screen = app.screen
            screen.on_result = partial(_stamp, stamps)  # type: ignore[method-assign]
            for _ in range(repeat):
                t = time.perf_counter()
                screen.action_flip("client", "nodelay")
                while not stamps:
                    await asyncio.sleep(0.0005)
                times.append((stamps.pop() - t) * 1000)
                await _settle(pilot)
                t = time.perf_counter()
                RunResult.build(lesson.scenario, run_sim(lesson.scenario))
                sim_only.append((time.perf_counter() - t) * 1000)
            screen = app.screen
            rows = len(screen.query_one(Ladder).rows)
            diff = str(screen.query_one("#diff").render())
            print(f"  {lesson.slug[:30]:<30} toggle→new ladder median "
                  f"{statistics.median(times):6.1f} ms (sim+rows {statistics.median(sim_only):5.1f}"
                  f" ms), {rows} rows: {diff[:70]}")
            app.pop_screen()
            await pilot.pause()


async def _help_open(app: NagleApp, pilot, repeat: int) -> None:  # type: ignore[no-untyped-def]
    """Open help ``repeat`` times over a lesson: time to its first paint (the frame the
    user sees, caught at `App._display`), and to Pilot's idle (includes its polling)."""
    from nagle_sim.tui.screens.help import HelpScreen

    painted_at: list[float] = []
    display = app._display

    def spy(screen, renderable):  # type: ignore[no-untyped-def]
        if isinstance(screen, HelpScreen) and renderable is not None and not painted_at:
            painted_at.append(time.perf_counter())
        display(screen, renderable)

    app._display = spy  # type: ignore[method-assign]
    paint, settled, cpu, cpu_settled = [], [], [], []
    for _ in range(repeat):
        painted_at.clear()
        t, c = time.perf_counter(), time.process_time()
        app.action_help()
        while not painted_at:
            await asyncio.sleep(0.0005)
        paint.append((painted_at[0] - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        await pilot.pause()
        settled.append((time.perf_counter() - t) * 1000)
        cpu_settled.append((time.process_time() - c) * 1000)
        app.pop_screen()
        await pilot.pause()
        await pilot.pause()
    app._display = display  # type: ignore[method-assign]

    def stats(xs: list[float]) -> str:
        return f"min {min(xs):.0f} / median {statistics.median(xs):.0f} / max {max(xs):.0f}"

    print(f"  help open → first paint:   wall {stats(paint)} ms; CPU {stats(cpu)} ms "
          f"(n={len(paint)}; target < 150 ms)")
    print(f"  help open → Pilot settled: wall {stats(settled)} ms; CPU {stats(cpu_settled)} ms "
          "(adds Pilot's idle polling)")


async def help_and_explanation(lessons: list[Lesson], repeat: int) -> None:
    """Help open (target < 150 ms) and lesson open → explanation filled, per lesson."""
    from nagle_sim.tui.widgets.explain import ExplainPanel

    app = NagleApp(run_sim=run_sim, lessons=lessons)
    async with app.run_test(size=(120, 40)) as pilot:
        opened: list[float] = []
        for lesson in lessons:
            t = time.perf_counter()
            await app.push_screen(LessonScreen(lesson))
            panel = app.screen.query_one(ExplainPanel)
            while "No trace yet" in str(panel.body.render()):
                await asyncio.sleep(0.0005)
            opened.append((time.perf_counter() - t) * 1000)
            await _settle(pilot)
            if lesson is lessons[0]:
                await _help_open(app, pilot, repeat)
            app.pop_screen()
            await pilot.pause()
        print(f"  lesson open → explanation filled: median {statistics.median(opened):.0f} ms,"
              f" max {max(opened):.0f} ms over {len(opened)} lessons")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000,
                        help="messages of the S3 NODELAY run to open and step (10,000)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--only-big", action="store_true",
                        help="only open and step the big NODELAY run")
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--only-help", action="store_true",
                        help="only help open and lesson open → explanation")
    args = parser.parse_args()
    lessons, where = _lessons()
    print(f"build: {build()}")
    if args.only_big:
        print("open and step a big run (target: step ≤ 30 ms)")
        asyncio.run(big_trace(args.messages, args.steps))
        return
    if args.only_help:
        print("help and explanation (target: help < 150 ms)")
        asyncio.run(help_and_explanation(lessons, args.repeat))
        return
    print("first paint (target ≤ 1000 ms)")
    t_list, t_lesson = asyncio.run(first_paint(lessons))
    print(f"  app start → lesson list painted: {t_list * 1000:.0f} ms")
    print(f"  enter → lesson ladder painted:   {t_lesson * 1000:.0f} ms")
    print("open and step a big run (target: step ≤ 30 ms)")
    asyncio.run(pilot_overhead(lessons))
    asyncio.run(big_trace(args.messages, args.steps))
    print("help and explanation (target: help < 150 ms)")
    asyncio.run(help_and_explanation(lessons, args.repeat))
    print(f"re-simulate after toggling client NODELAY, per lesson from {where} "
          "(target ≤ 150 ms)")
    asyncio.run(resimulate(lessons, args.repeat))


if __name__ == "__main__":
    main()
