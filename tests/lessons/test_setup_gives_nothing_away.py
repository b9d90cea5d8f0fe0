"""Issue 12: the text a student sees before answering names no question's mechanism.

`tests/tui/test_predict.py` keeps the numbers and formulas of a right choice out of the
setup. A sentence can give an answer away without a number ("only about a third of the
writes left on their own", "segment 11 is held: *cwnd full*, not Nagle"), so this test
also looks for the *concepts* that tell the right choice from the wrong ones.

The rule. For each question, a concept (a mechanism or ladder label from `CONCEPTS`) is an
**answer key** when the right choice or its `explain` names it, no wrong choice names it
(then it does not tell them apart), and the prompt does not name it (then the question
itself states it as a given). Text shown before the question is answered must not name
an answer key: the lesson's setup, every reveal due earlier than that question, the
`[lesson] summary` (lesson list), the scenario's `description` (sandbox, CLI), the
folder's slug (`nagle-sim lessons` prints it beside the title; issue 30) and the
titles (the lesson's, in the list and the heading, and the scenario's). A few
phrases the review found (`REVIEW_PHRASES`) are also forbidden before the first answer.
"""

from __future__ import annotations

import re
import tomllib

import pytest

from nagle_sim.lessons import Lesson, Question, load_lessons

SHIPPED = load_lessons()

CONCEPTS: dict[str, str] = {
    # concept: a regular expression (case-insensitive) for the ways lessons write it
    "Nagle": r"\bnagle(?!/|-sim|_sim)",  # not nagle/sendmsg_msg_more (packetdrill), nor the tool
    "delayed ACK": r"\bdelayed[- ]acks?\b|\bdelack",
    "ping-pong": r"\bping[- ]?pong\b",
    "quick ACK": r"\bquick[- ]acks?\b",
    "autocorking": r"auto-?cork|\bTSQ\b|small queues",
    "congestion window": r"\bcwnd\b|congestion window|initial window",
    "probe timer": r"\bprobe timer|zero[- ]window",
    "ato": r"\bato\b",
    "RTO": r"\bRTO\b",
    "piggyback": r"piggyback",
    "ACK every second segment": r"every (?:second|two|2nd) (?:full )?(?:segment|frame)s?",
    "merged": r"\bmerg(?:e|es|ed|ing)\b",
    "released by an ACK": r"released by (?:the |an |incoming )?acks?\b|\backs? arriving while"
                          r"|(?:triggered|pushed) by (?:an |the |incoming )?(?:arriving )?acks?"
                          r"|\backs? releases?\b"
                          r"|promise breaks|breaks? the promise",
    "a share": r"\ba (?:third|quarter|half)\b|\bonly a few\b|\bmost of\b",  # how many
    # how the application writes: a diagnosis question's answer, stated before the capture
    # is read (lesson 26's "a client that sends each request in one 64-byte write")
    "one write per request": r"\b(?:in |as )?one (?:[\w-]+ )?write\b|\bsingle write\b",
}

REVIEW_PHRASES = (
    # what the review found answering a question in a setup without a number (issue 12)
    "left on their own", "never touched S5", "set the pace",
    "Segment 11 is held", "runs out",
)

ALLOWED: dict[tuple[str, str, str], str] = {
    # (lesson slug, where, concept): why text shown before the answer may name it anyway
    ("02-nagle-basics", "title", "Nagle"): "the lesson's topic, in the lesson list anyway",
    ("03-delayed-ack", "title", "delayed ACK"): "the lesson's topic",
    ("04-how-long-is-a-delayed-ack", "title", "delayed ACK"): "the topic; the question "
    "asks how long, not whether",
    ("05-quick-acks-and-ping-pong", "title", "ping-pong"): "the lesson's topic",
    ("15-msg-more", "setup", "Nagle"): "the setup must say NODELAY keeps Nagle out; the "
    "explain names Nagle only to rule it out",
}


def _has(concept: str, text: str) -> bool:
    """Whether ``text`` names ``concept``; a line break counts as a space."""
    return re.search(CONCEPTS[concept], " ".join(text.split()), re.IGNORECASE) is not None


def answer_concepts(question: Question) -> set[str]:
    """The concepts that tell the right choice from the wrong ones and the prompt does not
    already state."""
    right = question.choices[question.answer] + "\n" + question.explain
    wrong = "\n".join(c for i, c in enumerate(question.choices) if i != question.answer)
    return {c for c in CONCEPTS
            if _has(c, right) and not _has(c, wrong) and not _has(c, question.prompt)}


def description(lesson: Lesson) -> str:
    raw = tomllib.loads((lesson.path / "scenario.toml").read_text("utf-8"))
    return str(raw.get("description", ""))


def leaks(lesson: Lesson) -> list[str]:
    """Every place where text shown before a question is answered names its answer key."""
    found = []
    order = sorted(lesson.questions, key=lambda q: q.at_ms)
    raw = tomllib.loads((lesson.path / "scenario.toml").read_text("utf-8"))
    # the heading is the lesson's title, checked as one with the others
    setup = re.sub(r"\A\s*#[^\n]*\n", "", lesson.setup)
    slug = lesson.slug.split("-", 1)[-1].replace("-", " ")   # `nagle-sim lessons` prints it
    early = {"setup": setup, "summary": lesson.summary, "description": description(lesson),
             "title": f"{lesson.title}\n{raw.get('title', '')}", "slug": slug}
    for n, question in enumerate(order, start=1):
        shown = dict(early)
        shown |= {f"reveal after {r.after}": r.text for r in lesson.reveals if r.after < n}
        keys = answer_concepts(question)
        for where, text in shown.items():
            text = " ".join(text.split())
            for concept in sorted(keys):
                # a slug is allowed what the title is: both name the lesson's topic
                allowed = (lesson.slug, "title" if where == "slug" else where, concept)
                if allowed not in ALLOWED and _has(concept, text):
                    found.append(f"{lesson.slug}: {where} names {concept!r}, "
                                 f"question {n}'s answer")
            for phrase in REVIEW_PHRASES if where in early else ():
                if phrase.lower() in text.lower() and phrase.lower() not in \
                        question.prompt.lower():
                    found.append(f"{lesson.slug}: {where} says {phrase!r}")
    return found


def test_answer_concepts_are_what_tells_the_right_choice_apart() -> None:
    q = Question(at_ms=1, prompt="When does the rest leave?",
                 choices=("At once", "When the delayed ACK fires, Nagle held it",
                          "After 200 ms, when the delayed ACK timer of Windows fires"),
                 answer=1, explain="Nagle holds it until the ACK: it rides piggyback.")
    assert answer_concepts(q) == {"Nagle", "piggyback"}
    asked = Question(at_ms=1, prompt="Nagle holds it: when does it leave?",
                     choices=q.choices, answer=1, explain=q.explain)
    assert answer_concepts(asked) == {"piggyback"}


@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
def test_no_text_before_an_answer_names_its_mechanism(lesson: Lesson) -> None:
    assert not leaks(lesson), "\n".join(leaks(lesson))


def test_the_rule_catches_what_the_review_found() -> None:
    """The review's findings in the old nagle-basics, nodelay-is-not-one-packet-per-write
    (now nodelay-back-to-back-writes), nodelay-and-the-congestion-window (now
    nodelay-twenty-writes) and bulk-transfer texts (setups and summaries
    shortened): each must be caught. Run `leaks` on `load_lessons(root)` of an older
    checkout's lessons/ to see every old finding."""
    from dataclasses import replace

    by_slug = {lesson.slug[3:]: lesson for lesson in SHIPPED}
    old = {
        "nagle-basics": (
            "The next nine writes arrive a few microseconds later. The model marks them as "
            "held by Nagle.", "Ten one-byte writes: how Nagle holds them on a slow link"),
        "nodelay-back-to-back-writes": (
            "With no pause, only about a third of the writes left on their own.",
            "Each packet occupies the device queue, which is what TCP autocorking looks at."),
        "nodelay-twenty-writes": (
            "so the congestion window never touched S5's numbers. Write more than ten and "
            "it does.", "twice the writes of S5, so the initial congestion window runs out"),
        "bulk-transfer": (
            "A new connection may not have more in flight. Segment 11 is held, and the "
            "reason on the ladder is *cwnd full*, not Nagle.",
            "the initial window of 10 segments and the receiver's ACK rhythm set the pace"),
    }
    # nodelay-back-to-back-writes' question then asked without naming autocorking; it now
    # gives the rule in its prompt, so the old question is restored for this check
    before = {"nodelay-back-to-back-writes": Question(
        at_ms=12.009, prompt="NODELAY is on. The first 1200-byte write has just left, and "
        "nine more follow a few microseconds apart while that packet is still in the device "
        "queue. How many of the ten writes leave as their own packet?",
        choices=("All ten of them", "Two or three", "Only the first"), answer=1,
        explain="Autocorking holds a small write while an earlier packet of the socket is "
        "still in the qdisc or NIC.")}
    for slug, (setup, summary) in old.items():
        lesson = by_slug[slug]
        if slug in before:
            lesson = replace(lesson, questions=(before[slug],))
        assert leaks(replace(lesson, setup=setup)), slug
        assert leaks(replace(lesson, summary=summary)), slug
