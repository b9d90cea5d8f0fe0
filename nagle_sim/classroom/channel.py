"""The local channel between serve and one student's app process: its framing and the
messages each side may send, checked on arrival.

The channel is one end of a Unix socket pair serve creates for each app process and hands
it at start (an inherited descriptor, named by `FD_ENV`): it has no address, so nothing
but serve and that one app can use it, and it adds no network surface. serve knows which
student an app belongs to by the channel it speaks on, never by what a message claims.

Framing: one JSON object per line, at most `LINE_LIMIT` bytes. From the app: ``at`` (what
it shows: screen, lesson, step) and ``vote`` (a ballot by canonical choice index). From
serve: ``class`` (the student's view of the class, `state.ClassState.student_view`) and
``ballot`` (whether a vote counted). Standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Any

FD_ENV = "NAGLE_SIM_CLASS_FD"
"""Environment variable holding the app's end of the channel (a descriptor number)."""
VIEW_ENV = "NAGLE_SIM_CLASS_VIEW"
"""The class view at the app's start (JSON), so it opens the teacher's lesson first."""

LINE_LIMIT = 8192
"""Longest line either side accepts; a longer one ends the channel (the app works on
alone)."""

SCREENS = frozenset({"list", "lesson", "sandbox", "question", "other"})
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
BIG = 10_000_000


def encode(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    if len(data) >= LINE_LIMIT:
        raise ValueError(f"channel message of {len(data)} bytes is over the limit")
    return data + b"\n"


def decode(line: bytes) -> dict[str, Any] | None:
    """One line as a message (a JSON object with a string ``t``), or None."""
    if len(line) > LINE_LIMIT:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("t"), str):
        return None
    return message


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= BIG:
        return value
    return None


def app_message(line: bytes) -> dict[str, Any] | None:
    """A message from an app, reduced to the fields serve uses and checked (None: not a
    message an app sends, ignored)."""
    message = decode(line)
    if message is None:
        return None
    kind = message["t"]
    if kind == "at":
        screen = message.get("screen")
        lesson = message.get("lesson")
        return {"t": "at", "screen": screen if screen in SCREENS else "other",
                "lesson": lesson if isinstance(lesson, str) and SLUG.fullmatch(lesson)
                else None,
                "step": _count(message.get("step")), "steps": _count(message.get("steps"))}
    if kind == "vote":
        poll, round_, choice = (message.get(k) for k in ("poll", "round", "choice"))
        if _count(poll) is None or round_ not in (1, 2) or _count(choice) is None:
            return None
        return {"t": "vote", "poll": poll, "round": round_, "choice": choice}
    return None
