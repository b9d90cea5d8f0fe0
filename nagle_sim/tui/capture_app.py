"""The app opened on a capture (``nagle-sim explain CAPTURE --tui``): `run_capture_app`.

The lesson list underneath, the capture screen on top (Esc goes back to the lessons).
The simulator is injected, as for `run_app`. No simpy, no realnet, no nagle_sim.explain.
"""

from __future__ import annotations

from .app import NagleApp
from .capture import CaptureView
from .runners import Runner
from .screens.capture import CaptureScreen


class CaptureApp(NagleApp):
    """`NagleApp` that opens on one capture."""

    def __init__(self, view: CaptureView, *, run_sim: Runner, **kwargs: object) -> None:
        super().__init__(run_sim=run_sim, **kwargs)  # type: ignore[arg-type]
        self.capture_view = view

    def on_mount(self) -> None:
        # Textual runs NagleApp.on_mount too (after this one): it pushes the lesson list,
        # so the capture screen goes on top once that has happened
        self.call_later(self.push_screen, CaptureScreen(self.capture_view))


def run_capture_app(view: CaptureView, *, run_sim: Runner) -> int:
    """Run the app on ``view``; returns an exit code (0)."""
    result = CaptureApp(view, run_sim=run_sim).run()
    return result if isinstance(result, int) else 0
