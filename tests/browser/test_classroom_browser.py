"""The classroom as a student meets it: Debian's Chromium, textual-serve's own page
script, a real `nagle-sim serve --host 0.0.0.0` (issue 24).

Each of these failed on c0d499a: the session ended at the first click (the page's
one-element ["focus"] message), the class link opened as 127.0.0.1 got a page wired to
the LAN address, `e` delivered two files of which the browser fetched one, and the page
asked fonts.googleapis.com for its font.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .conftest import (
    ServeProcess,
    Student,
    lan_address,
    open_student,
    screenshot,
    start_serve,
)

pytestmark = pytest.mark.slow

SEVENTH = 6  # lesson 7 (the write-write-read stall) in the list, counted from 0


def _lesson(index: int) -> Any:
    from nagle_sim.lessons import load_lessons
    return load_lessons()[index]


def _cell(student: Student, row: int, col: int) -> tuple[float, float]:
    """Page coordinates of a terminal cell's centre."""
    box = student.page.locator(".xterm-screen").bounding_box()
    assert box is not None
    rows, cols = student.screen.screen.lines, student.screen.screen.columns
    return (box["x"] + (col + 0.5) * box["width"] / cols,
            box["y"] + (row + 0.5) * box["height"] / rows)


def _click_text(student: Student, text: str) -> None:
    for row, line in enumerate(student.screen.screen.display):
        col = line.find(text)
        if col >= 0:
            student.page.mouse.click(*_cell(student, row, col + len(text) // 2))
            return
    raise AssertionError(f"{text!r} is not on screen:\n{student.screen.text()}")


def _hosts(urls: list[str]) -> set[str]:
    return {urlsplit(u).netloc for u in urls if not u.startswith(("data:", "blob:"))}


def test_a_student_clicks_in_opens_lesson_7_answers_steps_and_exports_both_files(
        browser: Any, class_open_to_lan: ServeProcess, tmp_path: Path) -> None:
    served = class_open_to_lan
    lesson = _lesson(SEVENTH)
    question = lesson.questions[0]
    student = open_student(browser, served.url("127.0.0.1"))
    context = student.page.context
    everything: list[str] = []
    context.on("request", lambda request: everything.append(request.url))

    student.wait_for(lesson.title, what="the lesson list with lesson 7")
    student.settle()
    # the click that used to end every session: into the page, on lesson 7's title
    _click_text(student, lesson.title)
    student.wait_for(lambda text: "Lesson 7" in text, what="lesson 7 opened by a click")
    assert '["focus"]' in student.screen.sent, "the page did not report its focus"
    student.shot("student-lesson7-opened", tmp_path)

    # step until the question comes (n: to the next stall; it asks on the way)
    for _ in range(10):
        if "Predict (" in student.screen.text():
            break
        student.press("n", pause_ms=400)
    student.wait_for("Predict (", what="lesson 7's question")
    student.shot("student-lesson7-question", tmp_path)
    student.press(str(question.answer + 1))
    student.wait_for("Right.", what="the verdict of the right answer")
    student.press("Enter")
    student.wait_for(lambda text: "Predict (" not in text, what="the question closed")

    before = student.screen.text()
    student.press("n", "ArrowDown", "ArrowDown", "ArrowUp")
    student.wait_for(lambda text: text != before, what="the ladder's cursor moved")

    with context.expect_page(timeout=60_000) as opened:
        student.press("e")
    export = opened.value
    export.wait_for_load_state()
    links = export.locator("a[download]")
    names = sorted(links.nth(i).get_attribute("download") or "" for i in range(links.count()))
    assert [Path(n).suffix for n in names] == [".pcap", ".svg"], names
    received: dict[str, bytes] = {}
    for i in range(links.count()):
        with export.expect_download() as download:
            links.nth(i).click()
        path = download.value.path()
        received[download.value.suggested_filename] = Path(path).read_bytes()
    assert sorted(received) == names
    svg = next(data for name, data in received.items() if name.endswith(".svg"))
    pcap = next(data for name, data in received.items() if name.endswith(".pcap"))
    assert b"<svg" in svg[:400]
    assert pcap[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")
    assert export.locator("img").count() == 1  # the ladder shown in the page itself
    screenshot(export, "student-export-page", tmp_path)

    assert not student.screen.closed
    assert "-closed" not in (student.page.get_attribute("body", "class") or "")
    # nothing left the class server: not Google's fonts, not a favicon elsewhere
    assert _hosts(everything) == {f"127.0.0.1:{served.port}"}, sorted(set(everything))


def test_the_class_link_works_as_127_0_0_1_and_as_the_lan_address(
        browser: Any, class_open_to_lan: ServeProcess) -> None:
    lan = lan_address()
    if lan is None:
        pytest.skip("this machine has no address besides loopback to open the class link on")
    for host in ("127.0.0.1", lan):
        student = open_student(browser, class_open_to_lan.url(host))
        student.wait_for("Pick a lesson", what=f"the first screen via {host}")
        before = student.screen.text()
        student.page.locator(".xterm-screen").click(position={"x": 5, "y": 5})
        student.press("ArrowDown", "ArrowDown")
        student.wait_for(lambda text, b=before: text != b, what=f"keys reach the app ({host})")
        assert not student.screen.closed
        assert _hosts(student.requests) == {f"{host}:{class_open_to_lan.port}"}
        student.page.context.close()


def test_a_wrong_token_and_a_missing_one_get_pages_that_say_which(
        browser: Any, class_open_to_lan: ServeProcess) -> None:
    page = browser.new_page()
    page.goto(class_open_to_lan.url(token="not-the-class-key"))
    wrong = page.inner_text("body")
    assert "not this class's" in wrong and "including its" not in wrong
    page.goto(class_open_to_lan.url().split("?")[0])
    assert "including its ?token= part" in page.inner_text("body")
    page.close()


def test_a_loopback_alias_is_served(browser: Any) -> None:
    """Issue 29.6: `--host 127.0.0.2` answered 403 to every browser request."""
    served = start_serve("--host", "127.0.0.2", "--warm", "0")
    try:
        student = open_student(browser, served.url("127.0.0.2"))
        student.wait_for("Pick a lesson", what="the first screen on 127.0.0.2")
        student.page.context.close()
    finally:
        served.stop()


_PASTE = """text => {
    const data = new DataTransfer();
    data.setData('text/plain', text);
    document.querySelector('.xterm-helper-textarea').dispatchEvent(new ClipboardEvent(
        'paste', {clipboardData: data, bubbles: true, cancelable: true}));
}"""


def test_a_40_mb_paste_is_refused_in_the_page_with_one_notice(
        browser: Any, class_open_to_lan: ServeProcess) -> None:
    """Issue 29.7: 40 MB pasted into a class tab grew its app 75 → 211 MB over 42 s of
    CPU. The page now refuses a paste over the limit before the terminal sends it, and
    says so once; a paste within the limit is typed as before (the same event path)."""
    student = open_student(browser, class_open_to_lan.url())
    student.wait_for("Pick a lesson", what="the first screen")
    student.settle()
    student.page.locator(".xterm-screen").click(position={"x": 5, "y": 5})
    student.page.evaluate(_PASTE, "small-paste-42")
    deadline = 50
    while not any("small-paste-42" in m for m in student.screen.sent) and deadline:
        student.page.wait_for_timeout(100)
        deadline -= 1
    assert any("small-paste-42" in m for m in student.screen.sent), (
        "a synthetic paste does not reach the terminal: this test would check nothing")

    student.page.evaluate(_PASTE, "x" * (40 * 2**20))
    student.page.wait_for_selector("#notice:not([hidden])")
    words = student.page.inner_text("#notice")
    assert "Not pasted" in words and "40.0 MB" in words and "64 KB" in words, words
    assert max(len(m) for m in student.screen.sent) < 70_000
    student.press("Enter")  # the app still takes keys: it opens the lesson under the cursor
    student.wait_for(lambda text: "Pick a lesson" not in text, what="a lesson opened")
    assert not student.screen.closed
    student.page.context.close()
