"""The self-tests in the built book: numbered per chapter, each answer folded until clicked.

The same checks as the notebooks' view in JupyterLab (test_notebook_view.py), run on the HTML
the book build wrote, plus a browser that opens every answer (screenshots of each chapter's
first self-test, closed and opened: ``_build/screenshots/book_selftest_*``). Marked ``book``: run by
``make test`` after the strict build (``pytest tests/test_book_selftests.py --run-book``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_book_html import HTML, SCREENSHOTS, TIMEOUT_MS, _open, _page_id
from test_notebook_view import chapter_label, self_tests

pytestmark = pytest.mark.book

CHAPTERS = sorted((HTML / "notebooks").glob("*.html"))
ARTICLE = "article.bd-article"


def test_every_chapter_page_was_built() -> None:
    notebooks = sorted(p.stem for p in (HTML.parents[1] / "notebooks").glob("*.ipynb"))
    assert [p.stem for p in CHAPTERS] == notebooks, f"run make book first ({HTML})"


@pytest.mark.parametrize("path", CHAPTERS, ids=_page_id)
def test_self_tests_are_numbered_and_folded(path: Path) -> None:
    from bs4 import BeautifulSoup

    article = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").select_one(ARTICLE)
    assert article is not None, f"{_page_id(path)}: no {ARTICLE}"
    for output in article.select("div.cell_output"):  # a checker's feedback is not an answer
        output.decompose()
    numbers, problems = self_tests(article)
    assert not problems, f"{_page_id(path)}:\n" + "\n".join(problems)
    chapter = chapter_label(path)
    assert numbers, f"{_page_id(path)}: no self-test"
    assert numbers == [f"{chapter}.{i}" for i in range(1, len(numbers) + 1)], numbers


ANSWERS = """() => Array.from(document.querySelectorAll('article.bd-article details')).map(d => {
  const body = Array.from(d.children).filter(e => e.tagName !== 'SUMMARY');
  const visible = body.some(e => e.checkVisibility());
  const math = d.querySelectorAll('.math').length;
  const typeset = d.querySelectorAll('.math mjx-container').length;
  return {open: d.open, visible, math, typeset, summary: d.querySelector('summary').textContent};
})"""


def _screenshot(page, path: Path, state: str) -> None:  # type: ignore[no-untyped-def]
    """The viewport around the first self-test, for a reader to compare with JupyterLab's."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"book_selftest_{path.stem}_{state}.png"))


@pytest.mark.parametrize("path", CHAPTERS, ids=_page_id)
def test_answers_open_on_click(browser, path: Path) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _open(browser, path)
    try:
        name = _page_id(path)
        if page.locator(".math").count():
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=TIMEOUT_MS,
            )
            page.evaluate("() => MathJax.startup.promise")
        before = page.evaluate(ANSWERS)
        assert before, f"{name}: no folded answer"
        shown = [a["summary"] for a in before if a["open"] or a["visible"]]
        assert not shown, f"{name}: answers visible before they are opened: {shown}"
        summaries = page.locator(f"{ARTICLE} details > summary")
        first = page.locator(f"{ARTICLE} details").first
        first.scroll_into_view_if_needed()
        _screenshot(page, path, "closed")
        for index in range(summaries.count()):
            summaries.nth(index).click()
        first.scroll_into_view_if_needed()
        _screenshot(page, path, "open")
        after = page.evaluate(ANSWERS)
        closed = [a["summary"] for a in after if not (a["open"] and a["visible"])]
        assert not closed, f"{name}: answers that did not open on a click: {closed}"
        untypeset = [a["summary"] for a in after if a["typeset"] < a["math"]]
        assert not untypeset, f"{name}: math in these answers is not typeset: {untypeset}"
        assert not problems, f"{name}:\n{problems}"
    finally:
        context.close()
