"""TUI benchmarks (print, never assert): first paint, stepping a 100k-event trace, what-if,
help open and lesson open → explanation.

Run: ``python benchmarks/bench_tui.py [--repeat N]``. Targets: start to first paint ≤ 1.0 s,
one step on a 100,000-event trace ≤ 30 ms, re-simulate after a toggle ≤ 150 ms per lesson.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from nagle_sim.lessons import Lesson, load_lessons
from nagle_sim.sim.driver import run_sim
from nagle_sim.tui.app import NagleApp
from nagle_sim.tui.result import RunResult
from nagle_sim.tui.screens.lesson import LessonScreen
from nagle_sim.tui.screens.lesson_list import LessonListScreen
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


async def big_trace(n: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.toml"
        path.write_text(BIG.format(n=n))
        t0 = time.perf_counter()
        app = NagleApp(run_sim=run_sim, path=str(path), ask_questions=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await _settle(pilot)
            ladder = app.screen.query_one(Ladder)
            while not ladder.rows:
                await _settle(pilot)
            loaded = time.perf_counter() - t0
            screen = app.screen
            result = getattr(screen, "result", None)
            trace = result.trace if result else None
            events = (len(trace.segments) + len(trace.ops) + len(trace.events)) if trace else 0
            print(f"  big trace: {n} messages, {events:,} trace events, {len(ladder.rows):,} "
                  f"ladder rows, {ladder.layout_.height:,} lines; sim+load {loaded:.2f} s")
            await pilot.press("end")
            await pilot.press("home")
            for label, keys in (("right", ["right"]), ("left", ["left"]),
                                ("end", ["end"]), ("home", ["home"])):
                times, cpu = [], []
                for i in range(steps):
                    if label == "left" and i == 0:
                        ladder.cursor = len(ladder.rows) // 2
                        await pilot.pause()
                    t, c = time.perf_counter(), time.process_time()
                    await pilot.press(*keys)
                    await pilot.pause()
                    cpu.append((time.process_time() - c) * 1000)
                    times.append((time.perf_counter() - t) * 1000)
                print(f"  step {label:>6}: CPU median {statistics.median(cpu):6.2f} ms "
                      f"max {max(cpu):6.2f} ms | wall incl. Pilot idle waits median "
                      f"{statistics.median(times):6.1f} ms  (n={len(times)})")
            # cost of painting a full, uncached screen far into the trace
            ladder.cursor = len(ladder.rows) * 3 // 4
            await pilot.pause()
            ladder._cache.clear()
            t = time.perf_counter()
            for y in range(ladder.size.height):
                ladder.render_line(y)
            print(f"  repaint {ladder.size.height} uncached lines: "
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
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--only-help", action="store_true",
                        help="only help open and lesson open → explanation")
    args = parser.parse_args()
    lessons, where = _lessons()
    if args.only_help:
        print("help and explanation (target: help < 150 ms)")
        asyncio.run(help_and_explanation(lessons, args.repeat))
        return
    print("first paint (target ≤ 1000 ms)")
    t_list, t_lesson = asyncio.run(first_paint(lessons))
    print(f"  app start → lesson list painted: {t_list * 1000:.0f} ms")
    print(f"  enter → lesson ladder painted:   {t_lesson * 1000:.0f} ms")
    print("step latency on a big trace (target ≤ 30 ms)")
    asyncio.run(pilot_overhead(lessons))
    asyncio.run(big_trace(args.messages, args.steps))
    print("help and explanation (target: help < 150 ms)")
    asyncio.run(help_and_explanation(lessons, args.repeat))
    print(f"re-simulate after toggling client NODELAY, per lesson from {where} "
          "(target ≤ 150 ms)")
    asyncio.run(resimulate(lessons, args.repeat))


if __name__ == "__main__":
    main()
