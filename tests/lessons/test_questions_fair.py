"""Issues 30 and 31: every question makes the student think, and nothing around it answers it.

`test_setup_gives_nothing_away.py` keeps a question's *mechanism* out of the text shown
before it is answered; `tests/tui/test_predict.py` keeps the run's numbers off the screen.
This file adds what the round-3 review found getting past both:

* **Slugs.** `nagle-sim lessons` prints each folder's name beside its title, before anything
  is asked: `08-windows-200ms` gave away "200 ms". A slug, a title, a summary and the
  scenario's description must hold no number of a right choice (`number_keys`), and neither
  a slug nor a title may assert a verdict with a negation ("NODELAY is *not* one packet per
  write", `quickack-not-sticky`): a title poses its topic.
* **Earlier lessons.** A sentence of an earlier lesson that points at a later one ("the next
  lesson shows…", "lesson 16", its title) must not name that lesson's answer (lesson 15
  announced that an arriving ACK breaks MSG_MORE's promise, lesson 16's question).
* **Taught before.** Every term a choice uses (ato, a quick-ACK route, the congestion
  window, …: `TERMS`) was introduced before the question opens: in an earlier lesson, in
  this lesson's text shown so far, in the prompt, or in an earlier question's explanation.
  A student cannot weigh a choice whose words they have never met (lesson 18's route
  `quickack`, lesson 04's "doubled ato").
* **Choices.** No choice carries its own explanation (a `:` or "because" clause): the
  reason is the `explain`'s job, and a choice that alone gives one reads as the answer.
* **Rhetorical wording** (the professor's review after round 3). A slug, title, summary or
  description is no yes/no question ("Does TCP_QUICKACK=0 stick?", "can a request still
  stall?": asked at all, it is answered), and names no outcome ("the cost of ping-pong",
  "the write-write-read stall") when its question's right answer is a delay. A setup asks
  no yes/no question it answers in the next sentence ("Does that always work? Not with
  …"). An earlier lesson's sentence that sends the student on (by number, title, or the
  slug's words: "the write-write-read lesson") names no mechanism and no number of the
  later answer, nor does the sentence just before it (lesson 20: "… the congestion window
  never limits S5's ten writes. Twenty writes meet it (lesson 21).").
* **Odd one out.** In a "which change" question the right choice is not the only one that
  changes nothing ("No socket option" among three options), and over all questions the
  right answer is the one choice of a different form (the only range among plain times,
  lesson 04's "80-88 ms") no more often than chance.
* **Bias.** Over all questions the right answer is the longest choice no more often than
  chance predicts (the sum over questions of 1/choices, rounded up), the shortest no more
  often either, neither of them so rarely that avoiding the extremes wins (two standard
  deviations below chance at most), and no position holds more than 45 % of the right
  answers. Before this round 22 of 28 right answers were the longest and 19 of 28 were
  the second choice.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import Counter

import pytest

from nagle_sim.lessons import Lesson, Question, load_lessons

from .test_setup_gives_nothing_away import _has, answer_concepts

SHIPPED = load_lessons()

_NUMBER = re.compile(r"(?:(\d+(?:[.,]\d+)?)\s*[-–]\s*)?(\d+(?:[.,]\d+)?)\s*"
                     r"(ms|s|%|bytes?|B|kB|segments?)\b")


def _numbers(text: str) -> set[str]:
    """'200 ms', '200ms' and '200-ms' all read as '200 ms'; a range '40-44 ms' gives both
    '40 ms' and '44 ms'."""
    out = set()
    for low, n, unit in _NUMBER.findall(text.replace("-ms", " ms").replace("-byte", " byte")):
        unit = unit.rstrip("s") if unit in ("bytes", "segments") else unit
        out |= {f"{x.replace(',', '')} {unit}" for x in (low, n) if x}
    return out


PREMISES: dict[str, set[str]] = {
    # (slug without its number): quantities of a right choice that are the scenario's
    # givens, which its description must state for the question to be answerable
    "nagle-basics": {"500 ms"},          # the link's one-way delay towards the server
    "bulk-transfer": {"20 ms"},          # the round trip
    "nodelay-twenty-writes": {"10 ms"},  # the round trip
    "getting-immediate-acks": {"40 ms"},  # the server writes every 40 ms (S4's stream)
}


def number_keys(question: Question) -> set[str]:
    """Quantities the right choice states that neither the prompt nor a wrong choice does."""
    right = _numbers(question.choices[question.answer])
    others = _numbers(" ".join([question.prompt, *(c for i, c in enumerate(question.choices)
                                                   if i != question.answer)]))
    return right - others


def _slug_words(lesson: Lesson) -> str:
    return lesson.slug.split("-", 1)[1].replace("-", " ") if "-" in lesson.slug else lesson.slug


def _scenario_raw(lesson: Lesson) -> dict:
    return tomllib.loads((lesson.path / "scenario.toml").read_text("utf-8"))


def shown_in_the_list(lesson: Lesson) -> dict[str, str]:
    """What a student sees of a lesson before opening it, and its scenario's wording."""
    raw = _scenario_raw(lesson)
    return {"slug": _slug_words(lesson), "title": lesson.title,
            "scenario title": str(raw.get("title", "")), "summary": lesson.summary,
            "description": str(raw.get("description", ""))}


NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b", re.IGNORECASE)


def verdict_titles(lesson: Lesson) -> list[str]:
    shown = shown_in_the_list(lesson)
    return [f"{lesson.slug}: the {where} asserts a verdict ({shown[where]!r})"
            for where in ("slug", "title", "scenario title") if NEGATION.search(shown[where])]


def number_leaks(lesson: Lesson) -> list[str]:
    found = []
    premises = PREMISES.get(lesson.slug.split("-", 1)[-1], set())
    for n, question in enumerate(lesson.questions, start=1):
        keys = number_keys(question) - premises
        for where, text in shown_in_the_list(lesson).items():
            for key in sorted(keys & _numbers(text)):
                found.append(f"{lesson.slug}: the {where} says {key!r}, question {n}'s answer")
    return found


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n|\n(?=#)", text) if p.strip()]


def _sentences(text: str) -> list[str]:
    """Sentences, never across a paragraph or a heading."""
    out = []
    for paragraph in _paragraphs(text):
        out += [s for s in re.split(r"(?<=[.!?])\s+", " ".join(paragraph.split())) if s]
    return out


def points_at(sentence: str, earlier: Lesson, later: Lesson) -> bool:
    """Whether a sentence of ``earlier`` sends the student on to ``later``: by its number,
    as "the next lesson", or by its title in italics (the way lessons cite each other)."""
    number = later.number
    s = sentence.lower()
    if number is not None and re.search(rf"\blessons? (?:\d+,? (?:and )?)*0?{number}\b", s):
        return True
    if earlier.number is not None and number == earlier.number + 1 and "next lesson" in s:
        return True
    if f"*{later.title.lower()}*" in s:
        return True
    # "the write-write-read lesson": the slug's words, or the plain title, then "lesson"
    names = {_slug_words(later).lower(), later.title.lower().replace("-", " ")}
    flat = s.replace("-", " ")
    return any(re.search(rf"\b{re.escape(n)}\b[^.]{{0,12}}\blesson", flat)
               for n in names if n)


def forward_leaks(lessons: list[Lesson]) -> list[str]:
    found = []
    for i, later in enumerate(lessons):
        keys = set().union(*(answer_concepts(q) for q in later.questions)) if \
            later.questions else set()
        # a concept the later lesson's own title names is its announced topic, not its answer
        keys = {k for k in keys if not _has(k, later.title)}
        numbers = set().union(*(number_keys(q) for q in later.questions)) if \
            later.questions else set()
        for earlier in lessons[:i]:
            texts = [earlier.prose] + [q.explain for q in earlier.questions]
            for text in texts:
                for paragraph in _paragraphs(text):
                    sentences = _sentences(paragraph)
                    for n, sentence in enumerate(sentences):
                        if not points_at(sentence, earlier, later):
                            continue
                        # the sentence and the one before it ("... it never limits S5's
                        # ten writes. Twenty writes meet it (lesson 21).")
                        context = " ".join(sentences[max(0, n - 1):n + 1])
                        for concept in sorted(keys):
                            if _has(concept, context):
                                found.append(f"{earlier.slug} announces {later.slug}'s "
                                             f"answer ({concept!r}): {context!r}")
                        for key in sorted(numbers & _numbers(context)):
                            found.append(f"{earlier.slug} announces {later.slug}'s "
                                         f"answer ({key!r}): {context!r}")
    return found


TERMS: dict[str, str] = {
    # a term a choice may use only once it has been introduced (case-insensitive regexes)
    "ato": r"\bato\b",
    "ping-pong": r"\bping[- ]?pong\b",
    "quick ACK": r"\bquick[- ]?acks?\b",
    "probe timer": r"\bprobe timer|zero[- ]window",
    "RTO": r"\bRTO\b",
    "SRTT": r"\bSRTT\b",
    "TCP_DELACK_MAX": r"TCP_DELACK_MAX\b|delack_max|DELACK_MAX_US",
    "tcp_delack_min": r"delack_min",
    "quick-ACK route": r"\bip route\b|\broute\b",
    "congestion window": r"\bcwnd\b|congestion window|initial window",
    "autocorking": r"auto-?cork",
    "device queue": r"device queue|\bqdisc\b|\bNIC\b",
    "MSS": r"\bMSS\b",
    "PSH": r"\bPSH\b",
    "MSG_MORE": r"MSG_MORE",
    "TCP_CORK": r"\bcork",
    "TCP_QUICKACK": r"QUICKACK",
    "Minshall": r"Minshall",
    "piggyback": r"piggyback",
    "jiffy": r"\bjiff(?:y|ies)\b|\btick",
    "receive window": r"receive window|\brwnd\b|zero window",
    "slow start": r"slow start",
    "retransmission": r"retransmi",
}


def _terms(text: str) -> set[str]:
    flat = " ".join(text.split())
    return {t for t, rx in TERMS.items() if re.search(rx, flat, re.IGNORECASE)}


def untaught_terms(lessons: list[Lesson]) -> list[str]:
    """(lesson, question, term) for every term a choice uses before anything introduced it."""
    found = []
    known: set[str] = set()
    for lesson in lessons:
        order = sorted(lesson.questions, key=lambda q: q.at_ms)
        seen = _terms(" ".join([lesson.title, lesson.summary, lesson.setup]))
        for n, question in enumerate(order, start=1):
            shown = " ".join(r.text for r in lesson.reveals if r.after < n)
            here = known | seen | _terms(shown) | _terms(question.prompt)
            for choice in question.choices:
                for term in sorted(_terms(choice) - here):
                    found.append(f"{lesson.slug} question {n}: {term!r} in {choice!r} "
                                 f"was not introduced before")
            seen |= _terms(question.explain)
        known |= _terms(lesson.prose) | seen
        known |= set().union(*(_terms(" ".join(q.choices) + q.explain)
                               for q in lesson.questions)) if lesson.questions else set()
    return found


EXPLAINING = re.compile(r":\s|\bbecause\b|\bsince\b| — ", re.IGNORECASE)


def explaining_choices(lesson: Lesson) -> list[str]:
    return [f"{lesson.slug}: choice {c!r} carries its own explanation"
            for q in lesson.questions for c in q.choices if EXPLAINING.search(c)]


def bias(lessons: list[Lesson]) -> dict[str, object]:
    """How much the length and the place of a choice say about the right answer."""
    questions = [q for lesson in lessons for q in lesson.questions]
    longest = shortest = 0
    for q in questions:
        lengths = [len(c) for c in q.choices]
        longest += lengths[q.answer] == max(lengths)
        shortest += lengths[q.answer] == min(lengths)
    positions = Counter(q.answer for q in questions)
    return {"questions": len(questions), "longest": longest, "shortest": shortest,
            "chance": sum(1 / len(q.choices) for q in questions),
            "spread": math.sqrt(sum((1 / len(q.choices)) * (1 - 1 / len(q.choices))
                                    for q in questions)),
            "positions": dict(sorted(positions.items())),
            "top_position_share": max(positions.values()) / len(questions)}


AUXILIARY = r"(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have|must)"
YES_NO = re.compile(rf"^\s*{AUXILIARY}\b[^?]*\?", re.IGNORECASE)


def yes_no_questions(lesson: Lesson) -> list[str]:
    """A slug, title, summary or description that asks a yes/no question has answered it:
    nobody asks "does X stick?" unless it does not."""
    found = []
    for where, text in shown_in_the_list(lesson).items():
        if where == "slug":
            if re.match(rf"{AUXILIARY}\b", text, re.IGNORECASE):
                found.append(f"{lesson.slug}: the slug asks a yes/no question ({text!r})")
            continue
        # each question clause: from the last clause break before a "?" up to it
        for clause in re.findall(r"[^.:;,—!?]*\?", text):
            if YES_NO.match(clause):
                found.append(f"{lesson.slug}: the {where} asks a yes/no question "
                             f"({clause.strip()!r})")
    return found


OUTCOME = re.compile(r"\b(?:stall(?:s|ed)?|costs?|penalty|trap|pitfall|bug|survives?|"
                     r"breaks?)\b", re.IGNORECASE)


def _answer_is_a_delay(question: Question) -> bool:
    right = question.choices[question.answer]
    waits = [float(n.split()[0]) for n in _numbers(right) if n.endswith(" ms")]
    return any(w >= 1 for w in waits) or \
        re.search(r"\blater\b(?! than)", right, re.I) is not None


def outcome_titles(lesson: Lesson) -> list[str]:
    """A slug, title or summary that names an outcome (a stall, a cost) answers a question
    whose right choice is a delay: "The cost of ping-pong" tells the student the ACK is
    not sent at once."""
    if not any(_answer_is_a_delay(q) for q in lesson.questions):
        return []
    shown = shown_in_the_list(lesson)
    return [f"{lesson.slug}: the {where} names an outcome ({m.group(0)!r} in "
            f"{shown[where]!r})"
            for where in ("slug", "title", "scenario title", "summary")
            for m in [OUTCOME.search(shown[where])] if m]


def answered_in_the_setup(lesson: Lesson) -> list[str]:
    """A setup that asks a yes/no question and answers it in the next sentence ("Does that
    always work? Not with the original form of Nagle's rule.")."""
    found = []
    for paragraph in _paragraphs(lesson.setup):
        sentences = _sentences(paragraph)
        for a, b in zip(sentences, sentences[1:], strict=False):
            if YES_NO.match(a) and re.match(r"(?:no|not|yes|never|only|always)\b", b, re.I):
                found.append(f"{lesson.slug}: the setup asks {a!r} and answers {b!r}")
    return found


NO_CHANGE = re.compile(r"^\s*(?:no|none|nothing|neither)\b", re.IGNORECASE)


def only_choice_without_a_change(lesson: Lesson) -> list[str]:
    """In a "which change would you ship" question, the right choice is not the only one
    that changes nothing ("No socket option" among three socket options)."""
    found = []
    for question in lesson.questions:
        if not re.search(r"\bchange\b|\bship\b|\bfix\b", question.prompt, re.I):
            continue
        none = [i for i, c in enumerate(question.choices) if NO_CHANGE.match(c)]
        if none == [question.answer]:
            found.append(f"{lesson.slug}: {question.choices[question.answer]!r} is the only "
                         f"choice that is not a change")
    return found


def _form(choice: str) -> tuple[bool, bool, bool]:
    """How a choice is written: a range of numbers, a number at all, a hedge ("about")."""
    return (re.search(r"\d\s*[-–]\s*\d", choice) is not None,
            re.search(r"\d", choice) is not None,
            re.match(r"\s*(?:about|around|roughly)\b", choice, re.I) is not None)


def odd_form(question: Question) -> int | None:
    """The one choice written differently from all the others, which all share a form
    (the only range among plain times), or None."""
    forms = [_form(c) for c in question.choices]
    counts = Counter(forms)
    odd = [i for i, f in enumerate(forms) if counts[f] == 1]
    if len(odd) == 1 and len(counts) == 2:
        return odd[0]
    return None


def form_bias(lessons: list[Lesson]) -> dict[str, float]:
    questions = [q for lesson in lessons for q in lesson.questions]
    with_odd = [q for q in questions if odd_form(q) is not None]
    return {"questions with an odd-form choice": len(with_odd),
            "odd form is right": sum(odd_form(q) == q.answer for q in with_odd),
            "chance": sum(1 / len(q.choices) for q in with_odd)}


# ------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
def test_slugs_and_titles_pose_the_topic(lesson: Lesson) -> None:
    assert not verdict_titles(lesson), "\n".join(verdict_titles(lesson))


@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
def test_nothing_in_the_lesson_list_states_a_right_number(lesson: Lesson) -> None:
    assert not number_leaks(lesson), "\n".join(number_leaks(lesson))


def test_no_earlier_lesson_announces_a_later_answer() -> None:
    assert not forward_leaks(SHIPPED), "\n".join(forward_leaks(SHIPPED))


def test_every_choice_uses_only_words_taught_before() -> None:
    assert not untaught_terms(SHIPPED), "\n".join(untaught_terms(SHIPPED))


@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
def test_no_choice_explains_itself(lesson: Lesson) -> None:
    assert not explaining_choices(lesson), "\n".join(explaining_choices(lesson))


def test_length_and_position_say_nothing_about_the_answer() -> None:
    b = bias(SHIPPED)
    limit = math.ceil(b["chance"])
    assert b["longest"] <= limit, f"the right answer is the longest choice too often: {b}"
    assert b["shortest"] <= limit, f"the right answer is the shortest choice too often: {b}"
    assert b["top_position_share"] <= 0.45, f"one position holds the answer too often: {b}"
    # ... nor so rarely that "never the longest, never the shortest" wins: each count stays
    # within two standard deviations below chance
    floor = b["chance"] - 2 * b["spread"]
    assert b["longest"] >= floor, f"the right answer is almost never the longest: {b}"
    assert b["shortest"] >= floor, f"the right answer is almost never the shortest: {b}"


@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
def test_the_lesson_list_asks_no_rhetorical_question(lesson: Lesson) -> None:
    problems = yes_no_questions(lesson) + outcome_titles(lesson) + \
        answered_in_the_setup(lesson)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lesson", SHIPPED, ids=[lesson.slug for lesson in SHIPPED])
def test_the_answer_is_not_the_odd_one_out(lesson: Lesson) -> None:
    assert not only_choice_without_a_change(lesson), \
        "\n".join(only_choice_without_a_change(lesson))


def test_the_form_of_a_choice_says_nothing_about_the_answer() -> None:
    """The one choice written differently (a range among plain times) is right no more
    often than chance predicts."""
    b = form_bias(SHIPPED)
    assert b["odd form is right"] <= math.ceil(b["chance"]), b


# ------------------------------------------------------------------ the rules themselves

def _q(prompt: str, choices: tuple[str, ...], answer: int, explain: str = "") -> Question:
    return Question(at_ms=1, prompt=prompt, choices=choices, answer=answer, explain=explain)


def test_the_rules_catch_what_the_round_3_review_found() -> None:
    """Each finding of the review, rebuilt in miniature: every rule must catch its own."""
    from dataclasses import replace

    base = SHIPPED[0]
    windows = replace(base, slug="08-windows-200ms", title="Other receivers", questions=(
        _q("When does the server ACK?", ("At once", "After about 40 ms",
                                         "After about 200 ms"), 2),))
    assert number_leaks(windows)
    sticky = replace(base, slug="17-quickack-not-sticky")
    assert verdict_titles(sticky)
    one_packet = replace(base, slug="19-x", title="NODELAY is not one packet per write")
    assert verdict_titles(one_packet)
    asked = replace(base, slug="16-msg-more-and-acks", title="MSG_MORE and incoming ACKs",
                    prose="# t\n\nx", questions=(_q(
                        "150 bytes are held. What happens?",
                        ("They stay held", "They leave at once", "The probe timer sends them"),
                        1, "Pushes triggered by incoming ACKs ignore MSG_MORE."),))
    announcer = replace(base, slug="15-msg-more", prose="# MSG_MORE\n\nThe next lesson "
                        "shows the other way the promise breaks: an ACK arriving while data "
                        "is held.", questions=())
    assert forward_leaks([announcer, asked])
    route = replace(base, slug="18-x", prose="# t\n\nx", setup="# t\n\nx", reveals=(),
                    questions=(_q("Which change makes every ACK immediate?",
                                  ("sysctl net.ipv4.tcp_delack_min=0",
                                   "ip route change ... quickack 1"), 1),))
    assert untaught_terms([route])
    leading = replace(base, questions=(_q("What does it read?", (
        "1", "0: the option reports ping-pong mode"), 1),))
    assert explaining_choices(leading)
    biased = [replace(base, questions=(_q("?", ("a", "bb", "c"), 1),)) for _ in range(9)]
    b = bias(biased)
    assert b["longest"] > math.ceil(b["chance"]) and b["top_position_share"] > 0.45


def test_the_rules_catch_what_the_review_after_round_3_found() -> None:
    """The professor's review of the lessons after round 3 (issue 30), each question
    finding rebuilt in miniature from the lessons' own words as they were: every rule
    must catch its own. `load_lessons(root)` of a checkout before this round shows them
    all on the real texts."""
    from dataclasses import replace

    base = SHIPPED[0]
    delay = _q("Phase 3: when does the server ACK it?",
               ("With the server's next reply", "At once", "40-44 ms later"), 2,
               "The quick replies of phase 2 put the server in ping-pong mode.")
    # 06 and 07: a title that names the outcome of a question whose answer is a delay
    assert outcome_titles(replace(base, slug="06-the-cost-of-ping-pong",
                                  title="The cost of ping-pong", questions=(delay,)))
    assert outcome_titles(replace(base, slug="07-write-write-read",
                                  title="The write-write-read stall", questions=(delay,)))
    # 09's summary and setup; 16's summary; 17's slug and title
    classic = replace(base, slug="09-classic-nagle-vs-minshall", title="Classic Nagle",
                      summary="One write per request, no write-write-read in sight: can a "
                      "request still stall? The original rule against Linux's variant.",
                      setup="# t\n\nThe obvious fix is one write. Does that always work? "
                      "Not with the original form of Nagle's rule.\n", questions=(delay,))
    assert yes_no_questions(classic) and answered_in_the_setup(classic)
    assert yes_no_questions(replace(base, summary="Data held by MSG_MORE while ACKs "
                                    "arrive: does the promise of more data survive them?"))
    sticky = replace(base, slug="17-does-quickack-stick", title="Does TCP_QUICKACK=0 stick?")
    assert len(yes_no_questions(sticky)) >= 2
    # an earlier lesson pointing ahead: 05 -> 06 (the title in italics), 20 -> 21 (the
    # sentence before the pointer names the answer), 10 -> 16 ("an arriving ACK releases"),
    # 06 -> 07 (the slug's words and the answer's number)
    one_way = replace(base, slug="06-one-way-after-requests",
                      title="A one-way message after requests", questions=(delay,))
    announcer = replace(base, slug="05-quick-acks", questions=(), prose="# t\n\nThe "
                        "lesson *The cost of ping-pong* shows what this mode costs when a "
                        "message arrives that needs no answer; ping-pong mode is a bet.")
    # under its old title ping-pong was the later lesson's announced topic, which the
    # forward rule allows (the outcome rule above caught that title); renamed, the same
    # sentence announces the answer
    assert forward_leaks([announcer, replace(one_way, title="The cost of ping-pong")]) == []
    assert forward_leaks([replace(announcer, prose=announcer.prose.replace(
        "*The cost of ping-pong*", "*A one-way message after requests*")), one_way])
    twenty = replace(base, slug="21-nodelay-twenty-writes", title="NODELAY: twenty writes",
                     questions=(_q("When do writes 11 to 20 leave?",
                                   ("At once, one packet each", "About 10 ms later, merged"),
                                   1, "A new connection may have 10 segments in flight "
                                   "(initial cwnd)."),))
    s5 = replace(base, slug="20-nodelay-back-to-back-writes", questions=(), prose="# t\n\n"
                 "The initial congestion window (lesson 19) allows ten packets "
                 "unacknowledged, so it never limits S5's ten writes. Twenty writes meet it "
                 "(lesson 21).")
    assert forward_leaks([s5, twenty])
    more = replace(base, slug="16-msg-more-and-acks", title="MSG_MORE with data in flight",
                   questions=(_q("150 bytes are held by MSG_MORE when the ACK arrives. What "
                                 "happens?", ("They stay held", "They leave at once"), 1,
                                 "The arriving ACK releases them."),))
    cork = replace(base, slug="10-fixing-the-stall", questions=(), prose="# t\n\nAn "
                   "arriving ACK releases nothing here, unlike with MSG_MORE (lesson 16).")
    assert forward_leaks([cork, more])
    wwr = replace(base, slug="07-write-write-read", title="Write, write, read",
                  questions=(_q("When does world leave?", ("Straight away", "In 40-44 ms"),
                                1),))
    pingpong = replace(base, slug="06-one-way-after-requests", questions=(), prose="# t\n\n"
                       "Nagle holds it until the ACK comes, and the 40 ms land on the user "
                       "(the write-write-read lesson).")
    assert forward_leaks([pingpong, wwr])
    # 26: the only choice that changes nothing; 04: the one choice of another form
    loss = replace(base, questions=(_q("Which one change would you ship?", (
        "TCP_NODELAY on both ends", "TCP_QUICKACK=1 on the client", "No socket option",
        "Bigger socket buffers"), 2),))
    assert only_choice_without_a_change(loss)
    ato = _q("How long will the server hold its ACK?", ("About 200 ms", "About 40 ms",
             "About 100 ms", "80-88 ms"), 3)
    assert odd_form(ato) == 3


def test_bias_statistics_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """The numbers the issue asks for, shown with -s."""
    print(bias(SHIPPED))
    assert "longest" in capsys.readouterr().out
