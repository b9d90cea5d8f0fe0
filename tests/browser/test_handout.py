"""`nagle-sim handout` read by the program that reads it: Chromium shows and prints the
page (issue 30: the cheat sheet as a handout, looked at as a PNG)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from nagle_sim.lessons import cheat_sheet

from .conftest import screenshot


def test_the_handout_shows_and_prints_in_a_browser_and_fetches_nothing(
        browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "sheet.html"
    done = subprocess.run([sys.executable, "-m", "nagle_sim", "handout", "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out}")
    page = browser.new_page(viewport={"width": 900, "height": 1200})
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(out.as_uri())
    headings = page.locator("h2").all_inner_texts()
    wanted = [line[3:].strip() for line in cheat_sheet().splitlines()
              if line.startswith("## ")]
    assert headings == wanted and len(wanted) >= 5
    # the tables are tables (markdown-it's table rule on), not pipes in a paragraph
    assert page.locator("table").count() >= 3 and "|---" not in page.inner_text("body")
    assert asked == [out.as_uri()], "the page fetched something besides itself"
    screenshot(page, "handout", tmp_path)
    pdf = page.pdf(format="A4")
    # printed: a PDF with the text in it (its page count is the browser's, not checked)
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    page.close()


def test_a_wrong_output_name_is_one_line_and_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "nagle_sim", "handout", "-o",
                           str(tmp_path / "sheet.pdf")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: -o {tmp_path / 'sheet.pdf'}: expected a file name ending in .html"]
