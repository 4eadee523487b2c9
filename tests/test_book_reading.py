"""The built book as a student reads it, on a laptop (1366×900) and a phone (390×844).

Run by ``make test`` after the strict build (``pytest tests/test_book_reading.py --run-book``);
skipped otherwise. Checks what issue 31 found broken or in the way:

- on a phone both drawers open (☰ the chapters, the list icon this page's contents) and a
  link in each works; on a laptop ☰ collapses the left sidebar and widens the text;
- no self-test's answer, nor the output of the check cell below it, shows before it is opened;
- printed outputs keep their lines as printed (no wrapping: aligned columns and printed code
  stay aligned); no printed output, table or formula, inline or display, is wider than its
  column unless its box scrolls and shows that it does; a phone's table cells keep words whole;
- every widget of the notebook is drawn, its controls disabled, with a label saying what a
  reader can do with it in Jupyter or Colab (the static book has no Python to redraw a figure),
  and its figure has a caption naming the controls' values;
- every figure shown at less than 60 % of its drawn width opens at full size on a click;
- no display formula is wider than its column on a laptop;
- the Colab set-up cell is not in the book; the theme speaks Simplified Chinese and writes
  every chapter number "第 N 章".

Every page is also photographed at both sizes into ``_build/screenshots/<size>/``. The checks
that read each page whole run in the same page load as test_book_html's (on a laptop) and
test_book_phone's (on a phone, as a phone renders it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_book_html import (
    HTML,
    OPENED,
    PAGES,
    ROOT,
    SCREENSHOTS,
    TIMEOUT_MS,
    _open,
    _page_id,
    check_page,
)

pytestmark = pytest.mark.book

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
SIZES = {"laptop": LAPTOP, "phone": PHONE}
CHAPTER = HTML / "notebooks" / "03_1_encoder_layer.html"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ZOOM_RATIO = 0.6


def _sized(browser, path: Path, size: dict[str, int]):  # type: ignore[no-untyped-def]
    context, page, problems = _open(browser, path)
    page.set_viewport_size(size)
    page.wait_for_load_state("load")
    if page.locator(".math").count():
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
            timeout=TIMEOUT_MS,
        )
        page.evaluate("() => MathJax.startup.promise")
    return context, page, problems


def test_phone_chapter_menu_opens_and_a_link_works(browser) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _sized(browser, CHAPTER, PHONE)
    try:
        dialog = page.locator("#pst-primary-sidebar-modal")
        assert not dialog.evaluate("d => d.open")
        page.locator(".bd-header-article .primary-toggle").click()
        page.wait_for_function(
            "() => document.querySelector('#pst-primary-sidebar-modal').open", timeout=TIMEOUT_MS
        )
        link = dialog.locator("a.reference.internal[href*='chapter_05']").first
        assert link.is_visible(), "the chapter menu opened but shows no link to chapter 5"
        link.click()
        page.wait_for_url("**/chapter_05.html*", timeout=TIMEOUT_MS)
        assert not problems, str(problems)
    finally:
        context.close()


def test_phone_page_contents_open_and_a_link_works(browser) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _sized(browser, CHAPTER, PHONE)
    try:
        page.locator(".bd-header-article .secondary-toggle").click()
        page.wait_for_function(
            "() => document.querySelector('#pst-secondary-sidebar-modal').open",
            timeout=TIMEOUT_MS,
        )
        # the visible entries: a section's sub-headings stay folded until it is reached
        links = page.locator("#pst-secondary-sidebar-modal nav.page-toc a[href^='#']:visible")
        assert links.count() >= 5, "the page contents opened with fewer than 5 headings"
        target = links.nth(3)
        anchor = target.get_attribute("href")
        target.click()
        page.wait_for_function(
            "() => !document.querySelector('#pst-secondary-sidebar-modal').open",
            timeout=TIMEOUT_MS,
        )
        page.wait_for_timeout(300)
        top = page.evaluate(
            "(id) => document.getElementById(id).getBoundingClientRect().top", anchor[1:]
        )
        assert 0 <= top < PHONE["height"] / 2, f"{anchor} is at {top} px after following it"
        assert not problems, str(problems)
    finally:
        context.close()


def test_laptop_menu_button_collapses_the_chapter_list(browser) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _sized(browser, CHAPTER, LAPTOP)
    try:
        width = "() => document.querySelector('article.bd-article').getBoundingClientRect().width"
        before = page.evaluate(width)
        assert page.locator("#pst-primary-sidebar").is_visible()
        page.locator(".bd-header-article .primary-toggle").click()
        page.wait_for_timeout(600)  # the theme's 0.25 s transition
        assert not page.locator("#pst-primary-sidebar").is_visible()
        assert not page.evaluate("() => document.querySelector('#pst-primary-sidebar-modal').open")
        after = page.evaluate(width)
        assert after > before + 100, f"the text column stayed {before:.0f} -> {after:.0f} px"
        page.locator(".bd-header-article .primary-toggle").click()
        page.wait_for_timeout(600)
        assert page.locator("#pst-primary-sidebar").is_visible(), "☰ did not bring it back"
        assert not problems, str(problems)
    finally:
        context.close()


def _evidence_lines() -> dict[str, list[str]]:
    """Per chapter page, the first output line of each code cell right after a self-test's
    Markdown cell: such a cell checks the answer, and its output gives it away."""
    found: dict[str, list[str]] = {}
    for notebook in NOTEBOOKS:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for before, cell in zip(cells, cells[1:], strict=False):
            source = "".join(before["source"])
            if before["cell_type"] != "markdown" or not re.search(r"^#+ 自测 ", source, re.M):
                continue
            if cell["cell_type"] != "code" or "show(" in "".join(cell["source"]):
                continue  # an exercise cell states a task, it answers nothing
            text = "".join(
                "".join(output.get("text", ""))
                for output in cell.get("outputs", [])
                if output.get("output_type") == "stream"
            )
            if text.strip():
                page = f"notebooks/{notebook.stem}.html"
                found.setdefault(page, []).append(text.strip().splitlines()[0].strip())
    return found


EVIDENCE = _evidence_lines()
VISIBLE_TEXT = """(lines) => lines.filter(line => Array.from(
  document.querySelectorAll('article.bd-article pre')
).some(pre => pre.textContent.includes(line) && pre.checkVisibility()))"""


def test_the_check_cells_of_the_named_self_tests_are_found() -> None:
    # the self-tests of chapters 1, 2, 3, 5, 6 and 7 that have a check cell below them
    counts = {page: len(lines) for page, lines in EVIDENCE.items()}
    assert counts == {
        "notebooks/01_1_seq2seq_rnn.html": 2,
        "notebooks/01_2_toy_tasks_attention.html": 1,
        "notebooks/02_1_scaled_dot_product.html": 2,
        "notebooks/03_1_encoder_layer.html": 4,
        "notebooks/03_2_norm_residual.html": 1,
        "notebooks/05_1_teacher_forcing_loss.html": 3,
        "notebooks/05_2_training_run.html": 1,
        "notebooks/06_1_decoding.html": 1,
        "notebooks/07_2_attention_traffic.html": 1,
    }, counts


@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_self_test_check_outputs_are_folded(browser, name: str) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _sized(browser, HTML / name, LAPTOP)
    try:
        lines = EVIDENCE[name]
        assert page.evaluate(VISIBLE_TEXT, lines) == [], f"{name}: answers show before opening"
        folds = page.locator("div.cell.tag_hide-cell > details > summary")
        assert folds.count() == len(lines), f"{name}: {folds.count()} folded check cells"
        for index in range(folds.count()):
            folds.nth(index).click()
        assert page.evaluate(VISIBLE_TEXT, lines) == lines, f"{name}: a fold did not open"
        assert not problems, str(problems)
    finally:
        context.close()


OVERFLOW = """() => {
  const article = document.querySelector('article.bd-article');
  if (!article) return [];
  const column = article.getBoundingClientRect();
  const wide = [];
  const boxes = 'article.bd-article .cell_output pre, article.bd-article table,'
    + ' article.bd-article mjx-container[display="true"]';
  document.querySelectorAll(boxes).forEach(box => {
    if (!box.checkVisibility()) return;
    const right = box.getBoundingClientRect().right;
    // a box that scrolls sideways (overflow-x auto) must be marked to show its shadow
    let scroller = box;
    while (scroller && scroller !== document.body
           && !(scroller.scrollWidth > scroller.clientWidth + 1
                && getComputedStyle(scroller).overflowX !== 'visible')) {
      scroller = scroller.parentElement;
    }
    const scrolls = scroller && scroller !== document.body;
    if (scrolls && !scroller.classList.contains('lk-scrolls')) {
      wide.push('scrolls without a shadow: ' + box.tagName + ' ' + box.textContent.slice(0, 50));
    }
    if (!scrolls && right > column.right + 1) {
      wide.push('cut at the right: ' + box.tagName + ' ' + box.textContent.slice(0, 50));
    }
  });
  // an inline formula: the theme's span.math clips it unless it scrolls (book.js)
  document.querySelectorAll('article.bd-article span.math').forEach(span => {
    const math = span.querySelector('mjx-math');
    if (!math || !span.checkVisibility()) return;
    const cut = math.getBoundingClientRect().width > span.clientWidth + 1;
    const scrolls = getComputedStyle(span).overflowX === 'auto'
      && span.classList.contains('lk-scrolls');
    if (cut && !scrolls) wide.push('cut at the right: formula ' + span.textContent.slice(0, 50));
  });
  return wide;
}"""


# Display formulas drawn wider than their column on a laptop: each must be broken into lines
# in its Markdown (aligned, gathered); on a phone a wide one scrolls (the test below).
WIDE_FORMULAS = """() => Array.from(
  document.querySelectorAll('article.bd-article mjx-container[display="true"]')
).filter(math => math.checkVisibility() && math.firstElementChild
  && math.firstElementChild.getBoundingClientRect().width > math.parentElement.clientWidth + 1)
 .map(math => math.textContent.slice(0, 60))"""


# Printed outputs whose lines the browser wraps (white-space other than pre; the exercise
# checker's feedback excepted, which wraps as prose), and table cells
# whose words are broken, as "Transforme r" was on a phone.
WRAPPED = """() => {
  const found = [];
  document.querySelectorAll('article.bd-article .cell_output pre').forEach(pre => {
    // the exercise checker's prose (statements, ❌, 💡, ✅) wraps: tests/test_book_phone.py
    if (pre.classList.contains('lk-feedback')) return;
    if (pre.checkVisibility() && getComputedStyle(pre).whiteSpace !== 'pre') {
      found.push('output wraps: ' + pre.textContent.slice(0, 50));
    }
  });
  document.querySelectorAll('article.bd-article table td, article.bd-article table th')
    .forEach(cell => {
      if (!cell.checkVisibility() || cell.querySelector('code, a')) return;
      const style = getComputedStyle(cell);
      if (style.overflowWrap === 'anywhere' || style.wordBreak === 'break-all') {
        found.push('cell breaks words: ' + cell.textContent.slice(0, 50));
      }
    });
  return found;
}"""


WIDGETS = """() => Array.from(document.querySelectorAll('.lk-static-widget')).map(widget => ({
  label: (widget.querySelector('.lk-widget-label') || {}).textContent || '',
  controls: widget.querySelectorAll('input, select, button').length,
  live: Array.from(widget.querySelectorAll('input, select, button')).filter(c => !c.disabled).length,
  sliders: widget.querySelectorAll('input[type=range]').length,
  figures: Array.from(widget.querySelectorAll('figure')).map(figure => ({
    alt: (figure.querySelector('img') || {}).alt || '',
    caption: (figure.querySelector('figcaption') || {}).textContent || '',
    loaded: (figure.querySelector('img') || {}).naturalWidth > 0,
  })),
}))"""
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _widget_views(path: Path) -> int:
    """How many widgets the page's notebook shows in its saved outputs."""
    notebook = ROOT / "notebooks" / f"{path.stem}.ipynb"
    if not notebook.is_file():
        return 0
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum(
        WIDGET_VIEW in output.get("data", {})
        for cell in cells
        for output in cell.get("outputs", [])
    )


WITH_WIDGETS = [p for p in PAGES if _widget_views(p)]


def test_some_pages_have_widgets() -> None:
    assert len(WITH_WIDGETS) >= 5, WITH_WIDGETS


@pytest.mark.parametrize("path", WITH_WIDGETS, ids=_page_id)
def test_widgets_are_drawn_disabled_and_labelled(browser, path: Path) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _sized(browser, path, LAPTOP)
    try:
        widgets = page.evaluate(WIDGETS)
        assert len(widgets) == _widget_views(path), widgets
        for widget in widgets:
            assert widget["live"] == 0, widget
            if widget["controls"]:  # a progress bar alone has nothing to try
                assert "Jupyter / Colab" in widget["label"], widget
                assert ("拖动滑块" in widget["label"]) == bool(widget["sliders"]), widget
                assert ("图停在初始值" in widget["label"]) == bool(widget["figures"]), widget
            for figure in widget["figures"]:
                assert figure["loaded"] and figure["caption"], figure
                assert figure["alt"] == figure["caption"], figure
        slider = page.locator(".lk-static-widget input[type=range]").first
        if slider.count():
            before = slider.input_value()
            box = slider.bounding_box()
            assert box is not None
            page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
            assert slider.input_value() == before, "a disabled slider still moved"
        assert not problems, str(problems)
    finally:
        context.close()


# a figure's drawn width: a sharp (2x) figure states its width on the page (as book.js reads it)
DRAWN = "(img => parseFloat(img.getAttribute('width')) || parseFloat(img.style.width) || img.naturalWidth)"
SHRUNK = f"""(ratio) => Array.from(document.querySelectorAll('article.bd-article img'))
  .filter(img => img.checkVisibility() && img.naturalWidth
          && img.clientWidth < ratio * {DRAWN}(img))
  .map(img => ({{src: img.getAttribute('src').split('/').pop().slice(0, 12),
                shown: img.clientWidth, drawn: {DRAWN}(img),
                zoomable: img.classList.contains('lk-zoomable')}}))"""


# The theme's English and Traditional strings (book/_ext/theme_zh.py replaces them), and a
# chapter number not written "第 N 章" (with its spaces, as in every title and link).
THEME_WORDS = re.compile(
    r"Launch on|Launch interactive|Toggle \w+ sidebar|Toggle hidden|Search this book|列印"
    r"|>Repository<|>Open issue<|Source repositories|Color mode|System Settings|Colab logo"
    r"|第(?:\d+ ?| \d+)章"
)


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_no_colab_cell_and_chinese_theme_words(path: Path) -> None:
    html = path.read_text(encoding="utf-8")
    assert "Colab 设置：从课程仓库安装" not in html, f"{_page_id(path)} shows the Colab set-up cell"
    words = THEME_WORDS.findall(html)
    assert not words, f"{_page_id(path)}: theme strings not in Simplified Chinese: {words}"


def _figures_enlarge(page) -> list[str]:  # type: ignore[no-untyped-def]
    """What is wrong with the page's shrunken figures: each opens at its drawn size on a click."""
    page.evaluate("() => Promise.all(Array.from(document.images).map(img => img.decode()"
                  ".catch(() => null)))")  # fmt: skip
    # book.js marks shrunk figures when the page has laid out; on a loaded machine that can
    # come later than the images' decoding, so wait for it (at most TIMEOUT_MS) instead of a
    # fixed pause; a figure that is never marked is reported below
    try:
        page.wait_for_function(
            f"(ratio) => ({SHRUNK})(ratio).every(f => f.zoomable)",
            arg=ZOOM_RATIO,
            timeout=TIMEOUT_MS,
        )
    except Exception as error:  # playwright's TimeoutError: reported through the list
        if "Timeout" not in type(error).__name__:
            raise
    shrunk = page.evaluate(SHRUNK, ZOOM_RATIO)
    stuck = [figure for figure in shrunk if not figure["zoomable"]]
    if stuck:
        return [f"figures too small to read: {stuck}"]
    if not shrunk:
        return []
    figure = page.locator("article.bd-article img.lk-zoomable").first
    figure.scroll_into_view_if_needed()
    figure.click()
    viewer = page.locator("dialog.lk-figure-viewer")
    if not viewer.evaluate("d => d.open"):
        return ["a click did not open the figure"]
    drawn = viewer.locator("img").evaluate(f"img => [img.clientWidth, {DRAWN}(img)]")
    page.keyboard.press("Escape")
    found = [f"the opened figure is shown at {drawn}"] if abs(drawn[0] - drawn[1]) > 1 else []
    if viewer.evaluate("d => d.open"):
        found.append("Escape did not close the figure")
    return found


def reading_problems(page, size: str) -> list[str]:  # type: ignore[no-untyped-def]
    """What keeps a loaded page (at ``size``, "laptop" or "phone") from reading whole: nothing
    cut at the right; printed outputs keep their lines and table cells their words; on a
    laptop no display formula is wider than its column; every shrunken figure opens at full
    size on a click. Every problem found is returned, not only the first."""
    found = [*page.evaluate(OVERFLOW), *page.evaluate(WRAPPED)]
    if size == "laptop":
        found += [f"formula wider than the column: {f}" for f in page.evaluate(WIDE_FORMULAS)]
    return found + _figures_enlarge(page)


def screenshot(page, path: Path, size: str) -> None:  # type: ignore[no-untyped-def]
    """A picture of the page's first screens at ``size``, in CSS pixels, for a reader to look
    at: ``_build/screenshots/<size>/``."""
    folder = SCREENSHOTS / size
    folder.mkdir(parents=True, exist_ok=True)
    name = _page_id(path).removesuffix(".html").replace("/", "__")
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.evaluate("() => window.scrollTo(0, 0)")
    page.set_viewport_size({**SIZES[size], "height": min(height, 12_000)})
    page.wait_for_timeout(200)
    page.screenshot(path=str(folder / f"{name}.png"), scale="css")


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_page_on_a_laptop(browser, path: Path, request: pytest.FixtureRequest) -> None:  # type: ignore[no-untyped-def]
    """One load of each page on a laptop serves test_book_html's page checks and
    :func:`reading_problems` (on a phone: tests/test_book_phone.py); then it is photographed."""

    def more(page) -> list[str]:  # type: ignore[no-untyped-def]
        page.set_viewport_size(LAPTOP)  # from test_book_html's narrower window for code cells
        page.wait_for_timeout(200)
        found = reading_problems(page, "laptop")
        screenshot(page, path, "laptop")
        return found

    check_page(browser, path, more=more)
    request.config.stash.setdefault(OPENED, []).append(_page_id(path))
