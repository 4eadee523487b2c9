"""The built book on a phone as a phone renders it: a mobile viewport of 390×844 CSS pixels at
device scale factor 3, with touch and a mobile user agent (not a desktop window made narrow,
which is what tests/test_book_reading.py resizes; that one missed a page wider than the screen).

Run by ``make test`` after the strict build (``pytest tests/test_book_phone.py --run-book``);
skipped otherwise. Checks:

- no page is wider than the screen, so it never slides sideways (long inline code breaks);
- both drawers (☰ the chapters, 目录 this page's contents) lie wholly on the screen and their
  last entry can be reached; the figure viewer's ✕ is on the screen;
- the header buttons show where the keyboard focus is, and ☰ hands the focus into the drawer
  and takes it back when the drawer closes;
- the checker's feedback (exercise statements, ❌, 💡, ✅) wraps inside the column, on a phone
  and on a laptop; a code cell wider than its box shows the scroll shadow that outputs show;
- the static widgets' label is readable (contrast at least 4.5:1) in light and dark modes;
- no page weighs more than 4.5 MiB once loaded (the files it requested), and every plot has at
  least two pixels per CSS pixel, so it stays sharp at a phone's 3 device pixels per CSS pixel
  once a click opens it at its drawn size.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from test_book_html import CHAPTERS, HTML, PAGES, TIMEOUT_MS, _page_id, follow_redirect
from test_book_reading import reading_problems, screenshot

pytestmark = pytest.mark.book

WIDTH, HEIGHT = 390, 844
PHONE = {
    "viewport": {"width": WIDTH, "height": HEIGHT},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
    "user_agent": (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko)"
        " Chrome/126.0.0.0 Mobile Safari/537.36"
    ),
}
LAPTOP = {"viewport": {"width": 1366, "height": 900}}
DEVICES = {"phone": PHONE, "laptop": LAPTOP}
# The drawers and the figure viewer are the theme's, the same on every page; what differs is
# the page's width (every page: test_page_on_a_phone), how long the chapter drawer is (longest
# on the last page, with the appendix's sections unfolded) and how long this page's contents
# are. So they are opened on one page of each kind: a book page, a landing page, a section
# page with the most headings of any section, the page with the most headings (the lab), the
# capstone and the book's last page.
DRAWER_PAGES = [
    HTML / "book" / "how_to_use.html",
    HTML / "book" / "chapter_06.html",
    HTML / "notebooks" / "04_1_autoregressive_masks.html",
    HTML / "notebooks" / "lab_debugging.html",
    HTML / "notebooks" / "capstone_pinyin.html",
    HTML / "notebooks" / "08_3_appendix_reference.html",
]
FEEDBACK_MARK = re.compile(r"❌|💡|✅|练习 [\w.]+（第")
WITH_FEEDBACK = [p for p in CHAPTERS if FEEDBACK_MARK.search(p.read_text(encoding="utf-8"))]
WITH_WIDGETS = [p for p in CHAPTERS if 'class="lk-static-widget"' in p.read_text(encoding="utf-8")]
# what a page may weigh when it has loaded: every file it requested, fonts included
MAX_PAGE_BYTES = 4.5 * 2**20


def _open(browser, path: Path, device: dict | None = None, on_request=None, **options):  # type: ignore[no-untyped-def]
    """The page in a fresh context of the device (a phone unless told), offline;
    ``on_request`` is called with the URL of every file the page requests."""
    context = browser.new_context(**(device or PHONE), service_workers="block", **options)
    if on_request is not None:
        context.on("request", lambda request: on_request(request.url))
    context.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(("file://", "data:", "blob:"))
            else route.abort()
        ),
    )
    page = context.new_page()
    page.goto(path.as_uri(), wait_until="load", timeout=TIMEOUT_MS)
    follow_redirect(page, path)
    page.wait_for_timeout(200)
    return context, page


# Elements whose right edge passes the screen's without a box that scrolls or clips them
WIDER_THAN_SCREEN = """(width) => {
  const found = [];
  document.querySelectorAll('body *').forEach(element => {
    const box = element.getBoundingClientRect();
    if (box.right <= width + 1 || !element.checkVisibility()) return;
    // a fixed box (the closed drawers wait off-screen) does not widen the page
    if (getComputedStyle(element).position === 'fixed') return;
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX !== 'visible' || style.position === 'fixed') return;
    }
    found.push(element.tagName + '.' + element.className + ' (' + Math.round(box.right)
      + ' px): ' + element.textContent.trim().slice(0, 50));
  });
  return found;
}"""


# An element's box on the screen the reader sees (the visual viewport), in CSS pixels
ON_SCREEN = """(element) => {
  const box = element.getBoundingClientRect();
  const view = window.visualViewport;
  return {left: box.left, top: box.top, right: box.right, bottom: box.bottom,
          width: view.width, height: view.height, scale: view.scale,
          page: document.documentElement.scrollWidth};
}"""


def _assert_on_screen(what: str, box: dict) -> None:
    assert box["scale"] == 1 and box["width"] == WIDTH, f"{what}: the page is zoomed out {box}"
    inside = (
        box["left"] >= -1
        and box["top"] >= -1
        and box["right"] <= WIDTH + 1
        and box["bottom"] <= HEIGHT + 1
    )
    assert inside, f"{what} is not wholly on the screen: {box}"


def _open_drawer(page, kind: str):  # type: ignore[no-untyped-def]
    page.locator(f".bd-header-article .{kind}-toggle").tap()
    page.wait_for_function(
        f"() => document.querySelector('#pst-{kind}-sidebar-modal').open", timeout=TIMEOUT_MS
    )
    page.wait_for_timeout(400)  # the drawer slides in
    return page.locator(f"#pst-{kind}-sidebar-modal")


@pytest.mark.parametrize("path", DRAWER_PAGES, ids=_page_id)
def test_phone_drawers_and_viewer_are_on_screen(browser, path: Path) -> None:  # type: ignore[no-untyped-def]
    context, page = _open(browser, path)
    try:
        drawer = _open_drawer(page, "primary")
        _assert_on_screen("the chapter drawer", drawer.evaluate(ON_SCREEN))
        chapter = drawer.locator("nav.bd-docs-nav li.toctree-l1 > a.reference").last
        assert "附录" in chapter.inner_text(), chapter.inner_text()
        # on an appendix page its section pages are shown below it (elsewhere folded away)
        last = drawer.locator("nav.bd-docs-nav a.reference:visible").last
        last.scroll_into_view_if_needed()
        _assert_on_screen("the chapter drawer's last entry", last.evaluate(ON_SCREEN))
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)

        # a landing page has no sections of its own, and so no 目录 button
        if page.locator(".bd-header-article .secondary-toggle").count():
            drawer = _open_drawer(page, "secondary")
            _assert_on_screen("the contents drawer", drawer.evaluate(ON_SCREEN))
            last = drawer.locator("nav.page-toc a[href^='#']:visible").last
            last.scroll_into_view_if_needed()
            _assert_on_screen("the contents drawer's last entry", last.evaluate(ON_SCREEN))
            page.keyboard.press("Escape")
            page.wait_for_timeout(300)
        else:
            assert path.parent.name == "book", f"{_page_id(path)} has no 目录 button"

        figures = page.locator("article.bd-article img.lk-zoomable")
        if figures.count():
            figures.first.scroll_into_view_if_needed()
            figures.first.tap()
            close = page.locator("dialog.lk-figure-viewer .lk-figure-close")
            close.wait_for(state="visible", timeout=TIMEOUT_MS)
            _assert_on_screen("the figure viewer's ✕", close.evaluate(ON_SCREEN))
    finally:
        context.close()


# The header's buttons that the keyboard reaches, and how each shows focus
HEADER_BUTTONS = """() => Array.from(document.querySelectorAll(
  '.bd-header-article button, .bd-header-article .btn, .bd-header-article a[href]'
)).filter(button => button.checkVisibility() && button.getBoundingClientRect().width > 0)"""
FOCUS_RING = """(button) => {
  button.focus();
  const style = getComputedStyle(button);
  const seen = color => !/^rgba\\(.*,\\s*0\\)$|^transparent$/.test(color);
  const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2
    && seen(style.outlineColor);
  const shadow = style.boxShadow !== 'none' && /\\d+px \\d+px/.test(style.boxShadow)
    && seen(style.boxShadow.replace(/\\s*[\\d.]+px.*/, ''));
  return {name: button.getAttribute('aria-label') || button.title
            || button.textContent.trim().slice(0, 20) || button.className,
          visible: button.matches(':focus-visible'), ring: outline || shadow};
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_header_buttons_show_keyboard_focus(browser, device: str) -> None:  # type: ignore[no-untyped-def]
    context, page = _open(
        browser, HTML / "notebooks" / "02_1_scaled_dot_product.html", DEVICES[device]
    )
    try:
        page.keyboard.press("Tab")  # the reader uses the keyboard
        buttons = page.evaluate_handle(HEADER_BUTTONS)
        count = page.evaluate("(buttons) => buttons.length", buttons)
        assert count >= 3, f"only {count} header buttons"
        found = [
            page.evaluate(f"(buttons) => ({FOCUS_RING})(buttons[{index}])", buttons)
            for index in range(count)
        ]
        missing = [button["name"] for button in found if not button["ring"]]
        assert not missing, f"no visible focus on {missing} at {device}"
    finally:
        context.close()


def test_menu_button_hands_the_focus_to_the_drawer_and_back(browser) -> None:  # type: ignore[no-untyped-def]
    context, page = _open(browser, HTML / "notebooks" / "02_1_scaled_dot_product.html")
    try:
        for kind in ("primary", "secondary"):
            toggle = page.locator(f".bd-header-article .{kind}-toggle")
            toggle.focus()
            page.keyboard.press("Enter")
            page.wait_for_function(
                f"() => document.querySelector('#pst-{kind}-sidebar-modal').open",
                timeout=TIMEOUT_MS,
            )
            inside = page.evaluate(
                f"() => !!document.activeElement.closest('#pst-{kind}-sidebar-modal')"
            )
            assert inside, f"the {kind} drawer opened without the focus"
            page.keyboard.press("Escape")
            page.wait_for_timeout(300)
            back = toggle.evaluate("(toggle) => document.activeElement === toggle")
            assert back, f"closing the {kind} drawer left the focus on " + page.evaluate(
                "() => document.activeElement.tagName + '.' + document.activeElement.className"
            )
    finally:
        context.close()


# The checker's printed feedback: each output holding a statement, ❌, 💡 or ✅ line
FEEDBACK = """() => {
  const column = document.querySelector('article.bd-article').getBoundingClientRect();
  const mark = /(^|\\n)(❌|💡|✅)|^练习 [\\w.]+（第/;
  return Array.from(document.querySelectorAll('article.bd-article .cell_output pre'))
    .filter(pre => mark.test(pre.textContent))
    .map(pre => ({text: pre.textContent.trim().slice(0, 40),
                  scrolls: pre.scrollWidth > pre.clientWidth + 1,
                  cut: pre.getBoundingClientRect().right > column.right + 1}));
}"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", WITH_FEEDBACK, ids=_page_id)
def test_checker_feedback_wraps_in_the_column(browser, path: Path, device: str) -> None:  # type: ignore[no-untyped-def]
    context, page = _open(browser, path, DEVICES[device])
    try:
        blocks = page.evaluate(FEEDBACK)
        assert blocks, f"{_page_id(path)}: no feedback found"
        wide = [block["text"] for block in blocks if block["scrolls"] or block["cut"]]
        assert not wide, f"{_page_id(path)} at {device}: {len(wide)} feedback blocks: {wide[:5]}"
    finally:
        context.close()


# Code cells wider than their box: like a wide output, each shows the scroll shadow
UNMARKED_CODE = """() => Array.from(document.querySelectorAll('article.bd-article div.cell_input pre'))
  .filter(pre => pre.checkVisibility() && pre.scrollWidth > pre.clientWidth + 1)
  .filter(pre => !pre.classList.contains('lk-scrolls')
    || getComputedStyle(pre).backgroundImage === 'none')
  .map(pre => pre.textContent.trim().slice(0, 40))"""


# The contrast ratio (WCAG 2) of the widget label's text on the background below it
LABEL_CONTRAST = """() => {
  const parse = color => (color.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => [r, g, b].map(c => {
    c /= 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  return Array.from(document.querySelectorAll('.lk-static-widget .lk-widget-label')).map(label => {
    const text = parse(getComputedStyle(label).color);
    let back = null;
    for (let up = label; up && !back; up = up.parentElement) {
      const color = parse(getComputedStyle(up).backgroundColor);
      if (color.length === 3 || (color.length === 4 && color[3] > 0)) back = color;
    }
    back = back || [255, 255, 255];
    const [a, b] = [luminance(text), luminance(back)].sort((x, y) => y - x);
    return (a + 0.05) / (b + 0.05);
  });
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_widget_label_is_readable(browser, scheme: str) -> None:  # type: ignore[no-untyped-def]
    assert WITH_WIDGETS, "no chapter has a widget"
    context, page = _open(browser, WITH_WIDGETS[0], color_scheme=scheme)
    try:
        page.wait_for_selector(".lk-static-widget .lk-widget-label", timeout=TIMEOUT_MS)
        assert page.evaluate("() => document.documentElement.dataset.theme") == scheme
        ratios = page.evaluate(LABEL_CONTRAST)
        assert ratios and min(ratios) >= 4.5, f"{scheme}: contrast {min(ratios):.2f}:1"
    finally:
        context.close()


# plots (a cell's output or a widget's figure) drawn with fewer than 2 pixels per CSS pixel
SOFT_PLOTS = """() => Array.from(document.querySelectorAll(
    'article.bd-article .cell_output img, article.bd-article .lk-static-widget img'))
  .map(img => [img.getAttribute('src').split('/').pop(), img.naturalWidth,
               parseFloat(img.getAttribute('width')) || parseFloat(img.style.width) || img.naturalWidth])
  .filter(([, pixels, drawn]) => pixels < 2 * drawn - 1)"""


# plots shown with another shape than drawn (a width capped by the column, a height left as
# drawn): more than 2 % between the shown and the drawn ratio of width to height
STRETCHED_PLOTS = """() => Array.from(document.querySelectorAll(
    'article.bd-article .cell_output img, article.bd-article .lk-static-widget img'))
  .filter(img => img.naturalWidth && img.naturalHeight && img.getBoundingClientRect().height)
  .map(img => {
    const box = img.getBoundingClientRect();
    return [img.getAttribute('src').split('/').pop(), +(box.width / box.height).toFixed(3),
            +(img.naturalWidth / img.naturalHeight).toFixed(3)];
  })
  .filter(([, shown, drawn]) => Math.abs(shown / drawn - 1) > 0.02)"""


def _weight(requested: list[str]) -> tuple[int, list[tuple[int, str]]]:
    """What the files a page requested weigh: the total and the largest (size, name) first."""
    files = {Path(url2pathname(urlparse(url).path)) for url in requested if url.startswith("file:")}
    sizes = sorted(((f.stat().st_size, f.name) for f in files if f.is_file()), reverse=True)
    return sum(size for size, _ in sizes), sizes


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_page_on_a_phone(browser, path: Path) -> None:  # type: ignore[no-untyped-def]
    """One load of each page on a phone (a page load is most of a browser test's time): the
    page is no wider than the screen; it weighs at most MAX_PAGE_BYTES once loaded and its
    fonts settled; in a chapter, a code cell wider than its box shows that it scrolls, and
    every plot is sharp (2 pixels per CSS pixel) and keeps its drawn shape; it reads whole
    (test_book_reading.reading_problems); then it is photographed. Every problem found is
    reported, not only the first."""
    requested: list[str] = []
    context, page = _open(browser, path, on_request=requested.append)
    try:
        page.evaluate("() => document.fonts.ready.then(() => null)")
        page.wait_for_timeout(300)
        found = []
        width = page.evaluate("() => document.documentElement.scrollWidth")
        wide = page.evaluate(WIDER_THAN_SCREEN, WIDTH)
        if width > WIDTH or wide:
            found.append(f"{width} px wide: {wide[:5]}")
        total, sizes = _weight(requested)
        if total > MAX_PAGE_BYTES:
            found.append(f"weighs {total / 2**20:.2f} MiB, largest {sizes[:5]}")
        if path in CHAPTERS:
            unmarked = page.evaluate(UNMARKED_CODE)
            if unmarked:
                found.append(f"{len(unmarked)} wide code cells without a cue: {unmarked[:5]}")
            page.evaluate("() => Promise.all(Array.from(document.images).map(img => img.decode()"
                          ".catch(() => null)))")  # fmt: skip
            if soft := page.evaluate(SOFT_PLOTS):
                found.append(f"plots drawn at 1x (file, pixels, CSS width): {soft}")
            if stretched := page.evaluate(STRETCHED_PLOTS):
                found.append(f"plots stretched (file, shown and drawn width/height): {stretched}")
        found += reading_problems(page, "phone")
        screenshot(page, path, "phone")
        assert not found, f"{_page_id(path)} on a phone:\n" + "\n".join(found[:15])
    finally:
        context.close()


# Each column of a table: the right edge of its rightmost cell, and the box the table is in
TABLE_COLUMNS = """(table) => {
  const rows = Array.from(table.querySelectorAll('tr'));
  const right = i => Math.max(...rows.map(row => row.children[i])
    .filter(cell => cell).map(cell => cell.getBoundingClientRect().right));
  const header = Array.from(rows[0].children).map(cell => cell.textContent.trim());
  return {columns: header.map((name, i) => [name, Math.round(right(i))]),
          box: Math.round(table.parentElement.getBoundingClientRect().right)};
}"""


def test_glossary_fits_a_phone(browser) -> None:  # type: ignore[no-untyped-def]
    """All four columns of the glossary, 不用 included, are on a phone's screen without
    scrolling the table sideways."""
    context, page = _open(browser, HTML / "notebooks" / "08_3_appendix_reference.html")
    try:
        page.evaluate("() => document.fonts.ready.then(() => null)")
        found = page.locator("section#glossary table").first.evaluate(TABLE_COLUMNS)
        assert [name for name, _ in found["columns"]] == ["中文", "English", "首次出现", "不用"]
        off = [name for name, right in found["columns"] if right > min(WIDTH, found["box"]) + 1]
        assert not off, f"glossary columns off-screen on a phone: {off} ({found})"
    finally:
        context.close()
