"""A served app's link to its class: follows the teacher and carries the student's votes.

`nagle-sim serve` starts each browser tab's app with one end of a local socket pair (its
descriptor in ``NAGLE_SIM_CLASS_FD``, `nagle_sim.classroom.channel`). Over it the app
reports what it shows (screen, lesson, step: at most twice a second, only on change) and
casts votes; serve sends the student's view of the class whenever the teacher changes it.

What following means here:

- **lead**: when the teacher opens a lesson for everyone, the app closes what covers the
  screen (help, the palette, a question) and opens that lesson; a student who was in the
  sandbox or on another lesson finds their screen below it (Esc goes back to it).
- **poll**: when the teacher moves the class to a question, the app opens the lesson at
  the question's horizon and shows the question as a ballot (`ClassBallot`): choices open
  only while a round is open, one vote per round, no verdict until the reveal; the class's
  histograms when the phase shows them; at the reveal the answer, and on Continue (or the
  teacher's "play") the ladder plays on past the horizon.
- **hold**: in the lesson the class follows, a question the class has not reached is not
  asked alone: the run stops at its horizon and says the class answers it together.

Without a link (no serve, or no teacher) the app is unchanged. A link that breaks leaves
the app working alone. No simpy, no realnet; never trusts what it reads (checked, bounded).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ..classroom.channel import FD_ENV, LINE_LIMIT, VIEW_ENV, decode, encode
from .widgets.ladder import Ladder

if TYPE_CHECKING:
    from textual.app import App

    from .screens.lesson import LessonScreen
    from .screens.question import QuestionScreen

REPORT_EVERY_S = 0.5
WRITE_BUFFER_LIMIT = 64 * 1024
"""A serve that stops reading gets the link dropped, not the app's memory."""
PHASE_WORDS = {
    "vote": "Vote: choose an answer on your own. You have one vote.",
    "show": "Vote 1 of the class (the answer comes later).",
    "discuss": "Discuss with your neighbours: convince them of your answer, or let them "
               "convince you. Vote 1 of the class:",
    "revote": "Vote again: you may change your answer. One vote.",
    "reveal": "The answer, with both votes of the class:",
    "play": "The answer, with both votes of the class. The run plays on.",
}


class ClassLink:
    """The app's end of the local channel (one per app process)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.view: dict[str, Any] | None = None
        """The last class view serve sent (None: no class, or the link is gone)."""
        self.applied: dict[str, Any] | None = None
        """The view the app last followed."""
        self.ballot: ClassBallot | None = None
        self.app: App[Any] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_report: dict[str, Any] | None = None
        self.closed = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> ClassLink | None:
        """The link serve handed this process, if any (the variable is then removed, so
        nothing this app starts inherits it)."""
        value = environ.get(FD_ENV)
        if value is None:
            return None
        if isinstance(environ, os._Environ):
            os.environ.pop(FD_ENV, None)
        try:
            fd = int(value)
            sock = socket.socket(fileno=fd)
        except (ValueError, OSError):
            return None
        if sock.family != socket.AF_UNIX:
            sock.detach()
            return None
        sock.set_inheritable(False)
        link = cls(sock)
        # the class as it was when this app was started: an app started while the teacher
        # leads opens the lead's lesson as its first screen, not the lesson list first
        first = decode(environ.get(VIEW_ENV, "").encode()[:LINE_LIMIT])
        if isinstance(environ, os._Environ):
            os.environ.pop(VIEW_ENV, None)
        if first is not None and first["t"] == "class" and _view_ok(first):
            link.view = first
        return link

    def starts_on(self) -> str | None:
        """The lesson this app should open at once (the lead's, when started while the
        teacher leads), or None."""
        view = self.view or {}
        poll = view.get("poll")
        return poll.get("lesson") if isinstance(poll, dict) else view.get("lead")

    # ---------------------------------------------------------------- running
    def attach(self, app: App[Any]) -> None:
        """Start reading and reporting, inside `app`'s event loop (from its on_mount)."""
        self.app = app
        first = self.starts_on()
        if first is not None:
            from .screens.lesson import LessonScreen
            lessons, _ = app.lesson_list()  # type: ignore[attr-defined]
            lesson = next((item for item in lessons if item.slug == first), None)
            if lesson is not None:  # pushed now: the first frame is the lesson
                app.push_screen(LessonScreen(lesson))
            self._wake.set()
        # a task, not a Textual worker: it lives as long as the app (tests and Textual
        # wait for workers to finish), and `close` ends it when the app unmounts
        self._task = asyncio.get_running_loop().create_task(self._run())
        app.set_interval(REPORT_EVERY_S, self._report, name="class report")

    def close(self) -> None:
        """The app is ending: stop reading, close the channel."""
        if self._task is not None:
            self._task.cancel()
        self._gone()
        with contextlib.suppress(OSError):
            self.sock.close()

    def rebind(self, sock: socket.socket, view: dict[str, Any] | None) -> None:
        """Speak on `sock` from now on, with `view` as the class's newest view: the app
        was forked from the fork server's template app (`nagle_sim.cli.forkserver`), whose
        link spoke to the fork server. What the template already followed (its lesson,
        its question) stays applied: a view for the same poll only updates the ballot."""
        old_sock, old_task, old_writer = self.sock, self._task, self._writer
        self.sock, self._writer, self.closed = sock, None, False
        sock.set_inheritable(False)
        if old_task is not None:
            old_task.cancel()
        if old_writer is not None:
            with contextlib.suppress(Exception):
                old_writer.close()
        with contextlib.suppress(OSError):
            old_sock.close()
        self._last_report = None
        if view is not None and view.get("t") == "class" and _view_ok(view):
            self.view = view
        self._wake.set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        sock = self.sock
        try:
            sock.setblocking(False)
            reader, writer = await asyncio.open_connection(sock=sock, limit=LINE_LIMIT + 2)
            if sock is not self.sock:  # rebound while connecting
                writer.close()
                return
            self._writer = writer
            follower = asyncio.create_task(self._follow())
            try:
                while True:
                    line = await reader.readline()
                    if not line.endswith(b"\n"):
                        break  # closed (or a line over the limit, which is not serve's)
                    message = decode(line)
                    if message is None:
                        continue
                    if message["t"] == "class" and _view_ok(message):
                        self.view = message
                        self._wake.set()
                    elif message["t"] == "ballot" and self.ballot is not None:
                        self.ballot.acknowledged(message)
            finally:
                follower.cancel()
        except (OSError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            if sock is self.sock:  # not a link this app has since left (`rebind`)
                self._gone()

    def _gone(self) -> None:
        """The link is down: the app goes on alone (what it shows stays)."""
        self.closed = True
        self.view = None
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()

    def send(self, message: dict[str, Any]) -> bool:
        writer = self._writer
        if writer is None or self.closed or writer.is_closing():
            return False
        transport = writer.transport
        if transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            self._gone()
            return False
        writer.write(encode(message))
        return True

    def _report(self) -> None:
        if self.app is None or self._writer is None:
            return
        where = where_am_i(self.app)
        if where != self._last_report and self.send({"t": "at", **where}):
            self._last_report = where

    # ---------------------------------------------------------------- following
    def leading(self) -> str | None:
        return None if self.view is None else self.view.get("lead")

    def holds(self, slug: str, question: int) -> bool:
        """Whether the app must not ask this question alone: the class follows this
        lesson and has not revealed the question yet."""
        view = self.view
        if view is None or view.get("lead") != slug:
            return False
        poll = view.get("poll")
        if (poll is not None and poll.get("lesson") == slug
                and poll.get("question") == question and poll.get("answer") is not None):
            return False
        return question not in view.get("done", [])

    async def _follow(self) -> None:
        """Apply the newest view, one at a time (a burst of teacher clicks is followed to
        its last state, not replayed)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            view = self.view
            if view is None or view == self.applied:
                continue
            try:
                await self._apply(view)
            except Exception as error:  # a screen race must not end the student's app
                if self.app is not None:
                    self.app.log.warning(f"class link: could not follow: {error!r}")
            self.applied = view

    async def _apply(self, view: dict[str, Any]) -> None:
        before = self.applied or {}
        lead, poll = view.get("lead"), view.get("poll")
        old_poll = before.get("poll")
        same_poll = (poll is not None and old_poll is not None
                     and poll.get("id") == old_poll.get("id"))
        if self.ballot is not None and not same_poll:
            await self._close_ballot()
        if poll is not None and not same_poll:
            screen = await self.to_lesson(poll["lesson"])
            if screen is not None:
                self.ask(screen, poll)
        elif poll is not None and self.ballot is not None:
            self.ballot.update(poll)
            if poll.get("phase") == "play":
                await self._close_ballot()
        elif poll is not None and poll.get("phase") == "play":
            pass  # the student closed the question already; their ladder played on
        elif lead is not None and lead != before.get("lead"):
            await self.to_lesson(lead)

    async def _close_ballot(self) -> None:
        ballot = self.ballot
        self.ballot = None
        if ballot is not None and ballot.screen is not None:
            screen = ballot.screen
            if screen.app.screen is screen:
                await screen.dismiss(screen.choice)

    async def to_lesson(self, slug: str) -> LessonScreen | None:
        """Bring the student to lesson `slug`: close what covers the screen, then use the
        lesson if it is on top, else open it (over the sandbox or a sweep, which stay
        below; in place of another lesson)."""
        from .screens.help import HelpScreen
        from .screens.lesson import LessonScreen
        app = self.app
        if app is None:
            return None
        lessons, _ = app.lesson_list()  # type: ignore[attr-defined]
        lesson = next((item for item in lessons if item.slug == slug), None)
        if lesson is None:
            return None
        for _ in range(20):  # what covers the screen: help, the palette, a question
            top = app.screen
            if len(app.screen_stack) <= 1 or not isinstance(top, ModalScreen | HelpScreen):
                break
            if hasattr(top, "dismiss") and top.is_current:
                await top.dismiss(None)
            else:
                await app.pop_screen()
        top = app.screen
        if isinstance(top, LessonScreen):
            if top.lesson.slug == slug:
                return top
            await app.pop_screen()
        screen = LessonScreen(lesson)
        await app.push_screen(screen)
        return screen

    def ask(self, screen: LessonScreen, poll: dict[str, Any]) -> None:
        """Ask the poll's question on `screen` as a class ballot (once the lesson's run is
        there: a lesson just opened asks when its simulation ends)."""
        if screen.result is None:
            screen.class_pending = poll
            return
        number = poll["question"]
        if not 0 <= number < len(screen.lesson.questions):
            return
        self.ballot = ballot = ClassBallot(self, poll)
        screen.asked.update(range(number))  # the class has moved past the earlier ones
        screen.ask(number, screen.lesson.questions[number], ballot=ballot)
        # behind the question, the run up to its horizon, the cursor on its last row
        screen.refresh_view()
        ladder = screen.query_one(Ladder)
        if ladder.rows:
            ladder.cursor = len(ladder.rows) - 1

    def lesson_ready(self, screen: LessonScreen) -> None:
        """A lesson's run arrived: ask the class question that was waiting for it."""
        poll = getattr(screen, "class_pending", None)
        if poll is None:
            return
        screen.class_pending = None
        view = self.view or {}
        current = view.get("poll")
        if current is not None and current.get("id") == poll.get("id"):
            self.ask(screen, current)

    def played_on(self, screen: LessonScreen) -> None:
        """The class question closed after its reveal: the ladder plays on past it."""
        ladder_rows = screen.result.rows if screen.result is not None else []
        if not ladder_rows:
            return
        screen.move_to(screen.query_one(Ladder).cursor + 1)
        if getattr(screen, "_play", None) is None:
            screen.action_play()


class ClassBallot:
    """One class question on one student's screen: what may be chosen, and the class's
    histograms as the phase allows. Drives the `QuestionScreen` it is given."""

    def __init__(self, link: ClassLink, poll: dict[str, Any]) -> None:
        self.link = link
        self.poll = poll
        self.mine: list[int | None] = list(poll.get("mine") or [None, None])[:2]
        self.sending: tuple[int, int] | None = None
        """(round, choice) sent and not yet acknowledged."""
        self.note = ""
        self.screen: QuestionScreen | None = None
        self.verdict_shown = False

    @property
    def id(self) -> int:
        return int(self.poll["id"])

    def attach(self, screen: QuestionScreen) -> None:
        self.screen = screen
        self.render()

    def open_round(self) -> int | None:
        round_ = self.poll.get("round")
        return round_ if round_ in (1, 2) else None

    def may_close(self) -> bool:
        return self.poll.get("answer") is not None

    def final(self) -> int | None:
        """The student's answer as it stands: the re-vote if cast, else the first vote."""
        return self.mine[1] if self.mine[1] is not None else self.mine[0]

    def cast(self, choice: int) -> bool:
        """The student chose `choice` (its canonical index): send it if a round is open and
        the student has not voted in it. True when it was sent."""
        round_ = self.open_round()
        if round_ is None or self.mine[round_ - 1] is not None or self.sending is not None:
            return False
        if not self.link.send({"t": "vote", "poll": self.id, "round": round_,
                               "choice": choice}):
            self.note = "The class server cannot be reached: your vote was not counted."
            self.render()
            return False
        self.sending = (round_, choice)
        self.note = ""
        self.render()
        return True

    def acknowledged(self, message: dict[str, Any]) -> None:
        if self.sending is None or message.get("poll") != self.id:
            return
        round_, choice = self.sending
        self.sending = None
        if message.get("ok") is True:
            self.mine[round_ - 1] = choice
            self.note = ""
        else:
            why = message.get("why")
            self.note = f"Not counted: {why}." if isinstance(why, str) else "Not counted."
        self.render()

    def update(self, poll: dict[str, Any]) -> None:
        self.poll = poll
        mine = poll.get("mine")
        if isinstance(mine, list) and len(mine) == 2:
            self.mine = [m if isinstance(m, int) else None for m in mine]
        self.render()

    def answered(self, screen: LessonScreen) -> None:
        """The question closed (Continue, or the teacher's play): play on past it."""
        if self.link.ballot is self:
            self.link.ballot = None
        if self.may_close():
            self.link.played_on(screen)

    def render(self) -> None:
        screen = self.screen
        if screen is None or not screen.is_attached:
            return
        round_ = self.open_round()
        voted = self.mine[round_ - 1] if round_ is not None else None
        pending = self.sending[1] if self.sending is not None else None
        if self.may_close():
            if not self.verdict_shown:  # once: it focuses Continue and scrolls to itself
                self.verdict_shown = True
                screen.show_verdict(self.final())
        else:
            self.verdict_shown = False
            screen.open_choices(round_ is not None and voted is None and pending is None,
                                chosen=pending if pending is not None
                                else voted if voted is not None else self.final())
        with contextlib.suppress(Exception):
            screen.query_one("#class", Static).update(self.text())

    def text(self) -> Text:
        phase = str(self.poll.get("phase"))
        text = Text(PHASE_WORDS.get(phase, phase), style="bold")
        round_ = self.open_round()
        if self.sending is not None:
            text.append(f"\nSending your vote ({self.sending[1] + 1})…", style="yellow")
        elif round_ is not None and self.mine[round_ - 1] is not None:
            text.append(f"\nYour vote ({self.mine[round_ - 1] + 1}) is in. "  # type: ignore[operator]
                        "Waiting for the class.", style="green")
        elif round_ is not None:
            text.append(f"\nVote {round_}: press a number.", style="yellow")
        if self.note:
            text.append("\n" + self.note, style="bold red")
        if self.may_close():
            votes = [f"vote {r + 1}: {m + 1}" for r, m in enumerate(self.mine) if m is not None]
            text.append("\nYour votes: " + (", ".join(votes) if votes else "none"),
                        style="bold")
        counts = self.poll.get("counts") or []
        if counts:
            text.append("\n")
            text.append_text(histogram_text(counts, self.poll.get("answer")))
        return text


def histogram_text(counts: list[list[int]], answer: int | None, width: int = 22) -> Text:
    """The class's counts per choice as bars, one column per round (two at the reveal),
    the right choice marked once revealed."""
    text = Text()
    rounds = [c for c in counts[:2] if isinstance(c, list)]
    if not rounds:
        return text
    top = max(1, *(max(c, default=0) for c in rounds))
    header = "    " + "".join(f"{f'vote {r + 1} ({sum(c)})':<{width + 5}}"
                              for r, c in enumerate(rounds))
    text.append(header.rstrip() + "\n", style="dim")
    for i in range(max(len(c) for c in rounds)):
        right = answer == i
        text.append(f"{i + 1:>2}{'✓' if right else ' '} ", style="bold green" if right else "")
        for c in rounds:  # each count just after its own bar (at 1280×720 a count at the
            n = c[i] if i < len(c) else 0  # column's end read as the next column's)
            bar = "█" * round(width * n / top)
            text.append(bar, style="green" if right else "cyan")
            text.append(f" {n}".ljust(width + 5 - len(bar)), style="bold")
        text.rstrip()
        text.append("\n")
    text.rstrip()
    return text


def _view_ok(message: dict[str, Any]) -> bool:
    """A class view in the shape serve sends (anything else is ignored)."""
    lead, poll = message.get("lead"), message.get("poll")
    if lead is not None and not isinstance(lead, str):
        return False
    if poll is None:
        return True
    if not isinstance(poll, dict):
        return False
    return (isinstance(poll.get("id"), int) and isinstance(poll.get("lesson"), str)
            and isinstance(poll.get("question"), int) and isinstance(poll.get("phase"), str))


def where_am_i(app: App[Any]) -> dict[str, Any]:
    """What the app shows, for the teacher's roster: screen, lesson, step (1-based) of
    how many rows the run has."""
    from .screens.lesson import LessonScreen
    from .screens.lesson_list import LessonListScreen
    from .screens.question import QuestionScreen
    from .screens.sandbox import SandboxScreen
    stack = app.screen_stack
    top: Screen[Any] | None = stack[-1] if stack else None
    screen = "other"
    if isinstance(top, QuestionScreen):
        screen = "question"
    elif isinstance(top, LessonScreen):
        screen = "lesson"
    elif isinstance(top, SandboxScreen):
        screen = "sandbox"
    elif isinstance(top, LessonListScreen):
        screen = "list"
    lesson = next((s for s in reversed(stack) if isinstance(s, LessonScreen)), None)
    where: dict[str, Any] = {"screen": screen, "lesson": None, "step": None, "steps": None}
    if lesson is not None and (screen in ("lesson", "question") or isinstance(top,
                                                                            ModalScreen)):
        where["lesson"] = lesson.lesson.slug
        if lesson.result is not None:
            with contextlib.suppress(Exception):
                ladder = lesson.query_one(Ladder)
                where["step"] = ladder.cursor + 1
                where["steps"] = len(lesson.result.rows)
    return where
