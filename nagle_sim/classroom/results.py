"""A session's polls as files the teacher takes away: CSV (for a spreadsheet) and
Markdown (for notes or a course page).

Anonymous by default: counts per choice and round. With ``names`` the files also say who
voted what, by the nicknames students chose (serve writes them only when the teacher
asks). Choices are numbered as in the lesson file (1 = its first choice), whatever order
a student's screen showed them in. Text that students typed is made inert for the
program that reads the file: a spreadsheet formula prefix is quoted (CSV injection),
Markdown table syntax and HTML are escaped. Standard library only.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from .state import ROUNDS, Poll, Student

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's CSV-injection list)."""


def _cell(value: object) -> str:
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def _right(poll: Poll, choice: int | None) -> str:
    if choice is None:
        return ""
    return "yes" if choice == poll.info.answer else "no"


def _choice(choice: int | None) -> str:
    return "" if choice is None else str(choice + 1)


def results_csv(polls: Sequence[Poll], students: dict[str, Student], *,
                names: bool = False) -> str:
    """Anonymous: one row per poll and choice with both rounds' counts. With ``names``:
    one row per poll and student who voted, with their two ballots."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    if not names:
        writer.writerow(["poll", "lesson", "lesson_title", "question", "prompt", "choice",
                         "choice_text", "right", "vote_1", "vote_2"])
        for poll in polls:
            counts = [poll.counts(r) for r in range(ROUNDS)]
            for i, text in enumerate(poll.info.choices):
                writer.writerow([poll.number, _cell(poll.lesson.slug),
                                 _cell(poll.lesson.title), poll.question + 1,
                                 _cell(poll.info.prompt), i + 1, _cell(text),
                                 "yes" if i == poll.info.answer else "no",
                                 counts[0][i], counts[1][i]])
        return out.getvalue()
    writer.writerow(["poll", "lesson", "question", "student", "vote_1", "right_1",
                     "vote_2", "right_2"])
    for poll in polls:
        voters = sorted(set(poll.ballots[0]) | set(poll.ballots[1]),
                        key=lambda key: students[key].number if key in students else 0)
        for key in voters:
            first, second = poll.ballots[0].get(key), poll.ballots[1].get(key)
            who = students[key].shown if key in students else "?"
            writer.writerow([poll.number, _cell(poll.lesson.slug), poll.question + 1,
                             _cell(who), _choice(first), _right(poll, first),
                             _choice(second), _right(poll, second)])
    return out.getvalue()


def _md(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    value = " ".join(str(text).split())
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("\\", "\\\\"),
                 ("|", "\\|"), ("`", "\\`"), ("*", "\\*"), ("_", "\\_"), ("[", "\\["),
                 ("]", "\\]")):
        value = value.replace(a, b)
    return value


def results_markdown(polls: Sequence[Poll], students: dict[str, Student], *,
                     names: bool = False, title: str = "nagle-sim class results") -> str:
    lines = [f"# {_md(title)}", ""]
    if not polls:
        lines.append("No question was asked in this session.")
        return "\n".join(lines) + "\n"
    for poll in polls:
        counts = [poll.counts(r) for r in range(ROUNDS)]
        voters = [len(b) for b in poll.ballots]
        lines += [f"## {poll.number}. {_md(poll.lesson.title)}, question "
                  f"{poll.question + 1}", "", _md(poll.info.prompt), "",
                  f"| choice | vote 1 ({voters[0]}) | vote 2 ({voters[1]}) |",
                  "|---|---:|---:|"]
        for i, text in enumerate(poll.info.choices):
            mark = " **(right)**" if i == poll.info.answer else ""
            lines.append(f"| {i + 1}. {_md(text)}{mark} | {counts[0][i]} | {counts[1][i]} |")
        lines.append("")
        if names:
            keys = sorted(set(poll.ballots[0]) | set(poll.ballots[1]),
                          key=lambda key: students[key].number if key in students else 0)
            if keys:
                lines += ["| student | vote 1 | vote 2 |", "|---|---:|---:|"]
                for key in keys:
                    who = students[key].shown if key in students else "?"
                    lines.append(f"| {_md(who)} | {_choice(poll.ballots[0].get(key))} | "
                                 f"{_choice(poll.ballots[1].get(key))} |")
                lines.append("")
    return "\n".join(lines)
