"""Render a lesson mid-stall to an SVG with Textual's screenshot (for the README).

Runs the app headless with the simulator it is given (injected, like the app's). No
realnet, no simpy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from .runners import Runner
from .widgets.ladder import Ladder


def save_svg(path: str | Path, lesson_slug: str, steps: int | None = None, *,
             run_sim: Runner, size: tuple[int, int] = (120, 36),
             lessons_root: Path | None = None) -> Path:
    """Open lesson ``lesson_slug``, step, and write an SVG screenshot to ``path``.

    Args:
        path: Where to write the SVG.
        lesson_slug: Folder name of the lesson, e.g. ``"07-write-write-read"``.
        steps: Forward steps from the first event; None jumps to the first stall.
        run_sim: The simulator's runner (``nagle_sim.runners.simulate``).
        size: Terminal size (columns, rows).
        lessons_root: Folder of lessons (default: the packaged ``lessons/``).

    Returns:
        The path written.

    Raises:
        KeyError: No lesson has that slug.
    """
    return asyncio.run(_render(Path(path), lesson_slug, steps, size, lessons_root, run_sim))


async def _render(path: Path, slug: str, steps: int | None, size: tuple[int, int],
                  lessons_root: Path | None, run_sim: Runner) -> Path:
    from ..lessons import load_lessons
    from .app import NagleApp
    from .screens.lesson import LessonScreen

    lessons = load_lessons(lessons_root) if lessons_root else load_lessons()
    chosen = [lesson for lesson in lessons if lesson.slug == slug]
    if not chosen:
        raise KeyError(f"no lesson {slug!r} (have: {', '.join(x.slug for x in lessons)})")
    app = NagleApp(run_sim=run_sim, lessons=lessons, ask_questions=False)
    async with app.run_test(size=size) as pilot:
        await app.push_screen(LessonScreen(chosen[0]))
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        if steps is None:
            screen.action_stall(1)
        else:
            screen.move_to(steps)
        await pilot.pause()
        screen.query_one(Ladder).blur()
        await pilot.pause()
        path.write_text(app.export_screenshot(title=f"nagle-sim — {chosen[0].title}"),
                        "utf-8")
    return path
