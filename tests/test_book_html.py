"""Browser test of the built book: every page of _build/html opened offline in Chromium.

Run by ``make test`` after the strict build (``pytest tests/test_book_html.py --run-book``);
skipped otherwise. Debian's ``/usr/bin/chromium`` is driven by Playwright (no browser is ever
downloaded). Every request that is not ``file://`` is blocked and fails the test, so a page
that needs the network (a CDN script, font or image) cannot pass. Per page it checks: no failed
request, no page error, no console error except the named harmless ones; MathJax typeset every
formula and no raw ``\\(`` is left in the text; every image loaded; no code cell scrolls
sideways. Widgets are drawn into the pages when the book is built (book/_ext/static_widgets.py):
no page keeps a widget placeholder or loads widget JavaScript. These checks run per page from
tests/test_book_reading.py (test_page_on_a_laptop), in the same page load as the checks that
read the page whole, which also photograph it. The self-tests' folded answers are checked in
test_book_selftests.py.

Nothing is judged before the page has settled, and settling does not depend on timing: every
``@font-face`` the page declares has been loaded on purpose
(a browser otherwise fetches a font only when a glyph first needs it, so a missing icon font
would fail some runs and pass others), ``document.fonts.ready`` has resolved and no request
is in flight. Then every URL the page requested must name a file of the build.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Built files that are not pages: theme templates and copies of the sources.
NOT_PAGES = ("_static", "_sources", "_images", "_sphinx_design_static")
# Console errors known to be harmless, each with the reason it is allowed.
HARMLESS_CONSOLE_ERRORS: dict[str, str] = {
    # pydata-sphinx-theme logs this with console.error when a fresh profile has no stored
    # light/dark choice yet; it then uses "auto", which is what we want.
    "Got invalid theme mode: . Resetting to auto.": "no stored theme choice on first visit",
}
# Hosts that only ever appear as links a reader may click (never loaded by a page).
LINK_HOSTS = {"github.com", "colab.research.google.com"}
CDN_MARKERS = ("cdn.", "unpkg.com", "cdnjs", "jsdelivr", "googleapis.com", "mathjax.org")
TIMEOUT_MS = 30_000

PAGES = sorted(
    p for p in HTML.rglob("*.html") if not p.relative_to(HTML).parts[0].startswith(NOT_PAGES)
)
CHAPTERS = [p for p in PAGES if p.parent.name == "notebooks"]


def _page_id(path: Path) -> str:
    return path.relative_to(HTML).as_posix()


def test_book_was_built() -> None:
    assert (HTML / "index.html").is_file(), f"no book in {HTML}: run make book first"
    names = {_page_id(p) for p in PAGES}
    assert {
        "book/intro.html",
        "book/lecture_map.html",
        "notebooks/00_setup.html",
        "search.html",
    } <= names, names


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_page_references_no_cdn(path: Path) -> None:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    remote_resources = []
    for tag in soup.find_all(["script", "link", "img", "iframe", "source", "video", "audio"]):
        for attribute in ("src", "href", "srcset"):
            value = tag.get(attribute)
            if value and urlparse(value).scheme in {"http", "https"}:
                remote_resources.append(f"<{tag.name} {attribute}={value}>")
        if tag.name == "script" and re.search(r"https?://", tag.get_text()):
            remote_resources.append(f"<script> body naming {tag.get_text()[:120]!r}")
    assert not remote_resources, f"{_page_id(path)} loads remote resources: {remote_resources}"
    links = [a.get("href", "") for a in soup.find_all("a")]
    cdn_links = [href for href in links if any(marker in href for marker in CDN_MARKERS)]
    assert not cdn_links, f"{_page_id(path)} links to a CDN: {cdn_links}"
    unknown_hosts = {
        urlparse(href).hostname
        for href in links
        if urlparse(href).scheme in {"http", "https"} and urlparse(href).hostname not in LINK_HOSTS
    }
    # Links to papers and docs are fine; this only guards against a CDN under another name.
    assert not {h for h in unknown_hosts if h and "cdn" in h}, unknown_hosts


class PageProblems:
    """Collects what went wrong while a page loaded and ran, and every request it made."""

    def __init__(self) -> None:
        self.blocked: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.console: list[str] = []
        self.fonts: list[str] = []
        self.requested: list[str] = []
        self.in_flight: set[object] = set()

    def missing_files(self) -> list[str]:
        """Requested file:// URLs that name no file (a request may fail without an event)."""
        missing = []
        for url in dict.fromkeys(self.requested):
            if url.startswith("file://") and not Path(url2pathname(urlparse(url).path)).is_file():
                missing.append(url)
        return missing

    def __bool__(self) -> bool:
        return bool(
            self.blocked
            or self.failed
            or self.errors
            or self.console
            or self.fonts
            or self.missing_files()
        )

    def __str__(self) -> str:
        return (
            f"blocked (not file://): {self.blocked}\nfailed requests: {self.failed}\n"
            f"requested files that do not exist: {self.missing_files()}\n"
            f"fonts that did not load: {self.fonts}\n"
            f"page errors: {self.errors}\nconsole errors: {self.console}"
        )


def _open(browser, path: Path):  # type: ignore[no-untyped-def]
    problems = PageProblems()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")

    def route(route) -> None:  # type: ignore[no-untyped-def]
        url = route.request.url
        if url.startswith(("file://", "data:", "blob:")):
            route.continue_()
        else:
            problems.blocked.append(url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()

    def started(request) -> None:  # type: ignore[no-untyped-def]
        problems.requested.append(request.url)
        problems.in_flight.add(request)

    def failed(request) -> None:  # type: ignore[no-untyped-def]
        problems.failed.append(f"{request.url} ({request.failure})")
        problems.in_flight.discard(request)

    page.on("request", started)
    page.on("requestfinished", lambda request: problems.in_flight.discard(request))
    page.on("requestfailed", failed)
    page.on("pageerror", lambda error: problems.errors.append(str(error)))

    def on_console(message) -> None:  # type: ignore[no-untyped-def]
        if message.type == "error" and not any(
            known in message.text for known in HARMLESS_CONSOLE_ERRORS
        ):
            problems.console.append(message.text)

    page.on("console", on_console)
    page.goto(path.as_uri(), wait_until="load", timeout=TIMEOUT_MS)
    follow_redirect(page, path)
    return context, page, problems


REDIRECT = re.compile(r'<meta http-equiv="Refresh" content="0; url=([^"]+)"')


def follow_redirect(page, path: Path) -> None:  # type: ignore[no-untyped-def]
    """A redirect stub (the root index.html) navigates on its own after it loads: wait for its
    target, or an evaluate() would race the navigation ("execution context was destroyed")."""
    redirect = REDIRECT.match(path.read_text(encoding="utf-8"))
    if redirect:
        page.wait_for_url(f"**/{redirect.group(1)}", timeout=TIMEOUT_MS)
        page.wait_for_load_state("load")


MATH_STATE = """() => {
  const math = Array.from(document.querySelectorAll('.math'));
  const untypeset = math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent);
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA']);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      for (let e = node.parentElement; e; e = e.parentElement) {
        if (skip.has(e.tagName) || e.classList.contains('highlight')) return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }
  });
  const raw = [];
  while (walker.nextNode()) {
    const text = walker.currentNode.textContent;
    if (text.includes('\\\\(') || text.includes('\\\\[')) raw.push(text.trim().slice(0, 80));
  }
  return {count: math.length, untypeset, raw};
}"""

IMAGES_LOADED = """async () => {
  const images = Array.from(document.images);
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null :
    new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  return images.filter(img => img.naturalWidth === 0).map(img => img.getAttribute('src'));
}"""


# Loads every font face the page declares, not only those a visible glyph needs yet; returns
# the ones that failed. FontFace.load() tries each source of a face's src list in turn.
LOAD_ALL_FONTS = """async () => {
  const faces = Array.from(document.fonts);
  const results = await Promise.allSettled(faces.map(face => face.load()));
  await document.fonts.ready;
  return results.flatMap((result, i) => result.status === 'rejected'
    ? [`${faces[i].family} ${faces[i].style} ${faces[i].weight}: ${result.reason}`] : []);
}"""


# Code cells wider than the text column (in the 1280 px window of _open): the longest line of
# each. Notebook code is at most 88 columns (notebooks/ruff.toml), _static/code-cells.css
# sizes the font so that 88 fit.
CODE_SCROLLS = """() => Array.from(document.querySelectorAll('div.cell_input pre'))
  .filter(pre => pre.scrollWidth > pre.clientWidth)
  .map(pre => pre.textContent.split('\\n').reduce((a, l) => l.length > a.length ? l : a, ''))"""


def _settle(page, problems: PageProblems) -> None:  # type: ignore[no-untyped-def]
    """Wait until the page is done: every font loaded, no request in flight."""
    problems.fonts.extend(page.evaluate(LOAD_ALL_FONTS))
    page.wait_for_load_state("networkidle", timeout=TIMEOUT_MS)
    for _ in range(TIMEOUT_MS // 50):  # and no request of our own count still open
        if not problems.in_flight:
            break
        page.wait_for_timeout(50)
    assert not problems.in_flight, [r.url for r in problems.in_flight]  # type: ignore[attr-defined]


def check_page(browser, path: Path, more=None) -> None:  # type: ignore[no-untyped-def]
    """Open one built page offline and assert everything the module docstring lists; then
    ``more(page)``, if given, returns the further problems it finds on the settled page (one
    page load serves several tests' checks: a load is most of a browser test's time)."""
    context, page, problems = _open(browser, path)
    try:
        name = path.name
        redirect = REDIRECT.match(path.read_text(encoding="utf-8"))
        if redirect:
            target = (path.parent / redirect.group(1)).resolve()
            assert target.is_file(), f"{name} redirects to a missing page {redirect.group(1)}"
        if page.locator(".math").count():
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=TIMEOUT_MS,
            )
            page.evaluate("() => MathJax.startup.promise")
            math = page.evaluate(MATH_STATE)
            assert not math["untypeset"], f"{name}: MathJax left formulas {math['untypeset']}"
        math = page.evaluate(MATH_STATE)
        assert not math["raw"], f"{name}: raw TeX left in the text: {math['raw']}"

        broken_images = page.evaluate(IMAGES_LOADED)
        assert not broken_images, f"{name}: images that did not load: {broken_images}"

        _settle(page, problems)
        wide = page.evaluate(CODE_SCROLLS)
        assert not wide, f"{name}: code cells scroll sideways at 1280 px, longest lines: {wide}"
        found = more(page) if more is not None else []
        assert not found, f"{name} on a laptop:\n" + "\n".join(found[:15])

        assert not problems, f"{name}:\n{problems}"
    finally:
        context.close()


def test_local_links_lead_to_files() -> None:
    """No link of a built page dangles: the PDF is linked only once it is printed
    (book/_ext/downloads.py), the notebooks' zip always."""
    from bs4 import BeautifulSoup

    dangling = []
    for path in PAGES:
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for link in soup.select("article.bd-article a[href]"):
            href = urlparse(link["href"])
            if href.scheme or href.netloc or not href.path:
                continue
            if not (path.parent / url2pathname(href.path)).resolve().exists():
                dangling.append(f"{_page_id(path)}: {link['href']}")
    assert not dangling, dangling


def _copy_without(tmp_path: Path, missing: Path) -> Path:
    """A copy of the built site (hard links where possible) that lacks one file."""
    site = tmp_path / "html"

    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(HTML, site, copy_function=link_or_copy)
    (site / missing.relative_to(HTML)).unlink()
    return site


WIDGET_SCRIPTS = (
    "application/vnd.jupyter.widget-view+json",
    "application/vnd.jupyter.widget-state+json",
    "embed-amd.js",
    "require.js",
)


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_no_page_needs_widget_javascript(path: Path) -> None:
    """Every widget is drawn at build time: no placeholder, saved state or manager is left."""
    text = path.read_text(encoding="utf-8")
    assert not [marker for marker in WIDGET_SCRIPTS if marker in text], _page_id(path)


def test_a_missing_font_fails_the_page_check(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The page check is not blind to fonts: without one of the theme's icon fonts a page
    fails, every run, because every declared font face is loaded."""
    fonts = sorted((HTML / "_static").rglob("fa-*.woff2"))
    assert fonts, "no icon fonts in the build"
    for font in fonts:
        site = _copy_without(tmp_path / font.stem, font)
        with pytest.raises(AssertionError, match=re.escape(font.name)):
            check_page(browser, site / CHAPTERS[0].relative_to(HTML))


sys.path.insert(0, str(ROOT / "book" / "_ext"))
from search_terms import HAN, glossary_rows  # noqa: E402
from term_ranks import chapter_docname  # noqa: E402

GLOSSARY = glossary_rows(ROOT / "notebooks" / "08_3_appendix_reference.ipynb")
# Typed into the search field of a chapter page, as a reader does; the last two are the
# book's own terms that jieba's general dictionary used to split.
TYPED_QUERIES = {
    "softmax": "notebooks/07_2_attention_traffic.html",
    "注意力": "notebooks/02_1_scaled_dot_product.html",
    "束搜索": "notebooks/06_1_decoding.html",
    "曝光偏差": "notebooks/06_2_exposure_bias.html",
    # a one-letter word is never indexed: the query must not require it
    "p 值": "notebooks/capstone_pinyin.html",
}
# What searchtools.js runs for a query, without drawing the list: the terms it looks up and
# the pages it finds (as page ids, "notebooks/06_1_decoding.html").
RUN_QUERY = """(query) => {
  const parsed = Search._parseQuery(query);
  const pages = Search._performSearch(...parsed).map(result => result[0] + '.html');
  return {terms: [...parsed[1]], pages: [...new Set(pages)].sort()};
}"""


def _chapter_pages(label: str) -> list[str]:
    """The pages of the glossary's 首次出现 column: "第 4 章" -> [notebooks/04_....html] (a
    chapter split into section pages: each of them); "综合项目" -> the capstone's page,
    "调试实验" -> the debugging lab's, "附录" -> the appendix's section pages; a section,
    "A.1" or "6.2", -> that section's page."""
    section = re.fullmatch(r"(\d+|A)\.(\d+)", label)
    if section:
        chapter, number = section.groups()
        pages = _chapter_pages("附录" if chapter == "A" else f"第 {int(chapter)} 章")
        found = [p for p in pages if re.match(rf"notebooks/\d+_{int(number)}_", p)]
        assert len(found) == 1, f"the glossary names {label!r}: pages {found}"
        return found
    number = re.fullmatch(r"第\s*(\d+)\s*章", label)
    stem = f"{int(number.group(1)):02d}_" if number else None
    if label == "综合项目":
        stem = "capstone_"
    if label == "调试实验":
        stem = "lab_"
    pages = [
        _page_id(p)
        for p in CHAPTERS
        if (p.stem.startswith(stem) if stem else "appendix" in p.stem and label == "附录")
    ]
    sections = [p for p in pages if re.match(r"notebooks/\d+_\d+_", p)]
    assert len(pages) == 1 or sections == pages, f"the glossary names {label!r}: pages {pages}"
    return pages


@pytest.fixture(scope="module")
def search_page(browser):  # type: ignore[no-untyped-def]
    context, page, problems = _open(browser, HTML / "search.html")
    page.wait_for_function(
        "() => typeof Search !== 'undefined' && Search.hasIndex()", timeout=TIMEOUT_MS
    )
    yield page
    context.close()
    assert not problems, str(problems)


def test_search_finds_every_glossary_term_in_its_chapter(search_page) -> None:  # type: ignore[no-untyped-def]
    """Each Chinese term of the glossary is looked up whole (the index and the query are
    segmented alike) and finds the chapter where the glossary says it is introduced."""
    assert len(GLOSSARY) >= 20, f"the glossary has only {len(GLOSSARY)} rows"
    split, missed = [], []
    for row in GLOSSARY:
        chapter = _chapter_pages(row.chapter)
        for term in row.terms:
            result = search_page.evaluate(RUN_QUERY, term)
            # a space or a hyphen splits any query into words (searchtools.js), so only
            # terms without them must stay one query term
            if not re.search(r"[\s\-–]", term) and result["terms"] != [term]:
                split.append(f"{term} -> {result['terms']}")
            if not set(chapter) & set(result["pages"]):
                missed.append(f"{term} ({row.chapter}): found in {result['pages']}")
    assert not split, f"queries not kept whole: {split}"
    assert not missed, "glossary terms that do not find their chapter:\n" + "\n".join(missed)


def test_search_stems_english_terms_as_the_index_does(search_page) -> None:  # type: ignore[no-untyped-def]
    """Every word of the glossary's English column, stemmed as the browser stems a query,
    is a term of the index (the index and the query use the same stemmer). One-letter words
    ("top-p") are never indexed, and searchtools.js does not require them."""
    missing = []
    for row in GLOSSARY:
        result = search_page.evaluate(RUN_QUERY, row.english)
        not_indexed = search_page.evaluate(
            "(terms) => terms.filter(t => t.length > 1"
            " && [].concat(Search._index.terms[t] ?? [], Search._index.titleterms[t] ?? [])"
            ".length === 0)",
            result["terms"],
        )
        missing += [f"{term} (from {row.english!r})" for term in not_indexed]
    assert not missing, f"query terms the index does not hold: {missing}"


@pytest.mark.parametrize("query", TYPED_QUERIES)
def test_search_typed_into_a_chapter_page(browser, query: str) -> None:  # type: ignore[no-untyped-def]
    context, page, problems = _open(browser, HTML / "notebooks" / "00_setup.html")
    try:
        page.keyboard.press("Control+k")
        field = page.locator("input[name=q]:visible").first
        field.fill(query)
        field.press("Enter")
        page.wait_for_url("**/search.html?q=*", timeout=TIMEOUT_MS)
        # the status line is written once every result is listed
        page.wait_for_function(
            "() => (document.querySelector('#search-results .search-summary') || {}).innerText",
            timeout=TIMEOUT_MS,
        )
        links = page.locator("#search-results ul.search li a").evaluate_all(
            "links => links.map(a => a.href)"
        )
        expected = (HTML / TYPED_QUERIES[query]).as_uri()
        assert any(link.split("#")[0] == expected for link in links), (
            f"searching {query!r} did not list {TYPED_QUERIES[query]}: {links}"
        )
        assert not problems, str(problems)
    finally:
        context.close()


OPENED = pytest.StashKey[list]()


# The chapter that teaches a term, as a reader expects it (issue 31): Sphinx's own scores put
# chapter 1 first for 注意力 and the intro or the lecture map first for the others.
TAUGHT_IN = {
    "注意力": "notebooks/02_1_scaled_dot_product",
    "attention": "notebooks/02_1_scaled_dot_product",
    "层归一化": "notebooks/03_2_norm_residual",
    "layer normalization": "notebooks/03_2_norm_residual",
    "LayerNorm": "notebooks/03_2_norm_residual",
    "束搜索": "notebooks/06_1_decoding",
    "beam search": "notebooks/06_1_decoding",
    "教师强制": "notebooks/05_1_teacher_forcing_loss",
    "teacher forcing": "notebooks/05_1_teacher_forcing_loss",
}
# The page a reader sees first: searchtools.js shows the results by popping the last one.
FIRST_RESULT = """(query) => {
  const results = Search._performSearch(...Search._parseQuery(query));
  return results.length ? results[results.length - 1][0] : null;
}"""


def test_search_ranks_the_teaching_chapter_first(search_page) -> None:  # type: ignore[no-untyped-def]
    wrong = {q: search_page.evaluate(FIRST_RESULT, q) for q in TAUGHT_IN}
    wrong = {q: page for q, page in wrong.items() if page != TAUGHT_IN[q]}
    assert not wrong, f"queries whose first result is not the teaching chapter: {wrong}"
    # every glossary term and English name: its teaching chapter (BOOK_RANKS) comes first
    ranks = search_page.evaluate("() => BOOK_RANKS")
    assert len(ranks) >= 2 * len(GLOSSARY), len(ranks)
    wrong = {q: search_page.evaluate(FIRST_RESULT, q) for q in ranks}
    # a query of stop words only ("at") finds nothing, which misranks nothing; 显存's long
    # English description ("GPU memory, device memory (DRAM; HBM on A100/H100)") has words
    # chapter 2 lacks, so it finds only chapter 7, where GPU memory is explained
    wrong = {q: page for q, page in wrong.items() if page not in (ranks[q], None)}
    wrong = {q: page for q, page in wrong.items() if not q.startswith(("gpu memory", "dram"))}
    assert not wrong, f"glossary queries whose first result is another page: {wrong}"


def test_search_finds_the_term_under_a_name_the_book_avoids(search_page) -> None:  # type: ignore[no-untyped-def]
    """The glossary's 不用 column (遮罩 for 掩码): a reader's other name finds the term's page."""
    synonyms = search_page.evaluate("() => BOOK_SYNONYMS")
    ranks = search_page.evaluate("() => BOOK_RANKS")
    assert "遮罩" in synonyms, synonyms
    first = {said: search_page.evaluate(FIRST_RESULT, said) for said in synonyms}
    wrong = {said: page for said, page in first.items() if page != ranks[synonyms[said].lower()]}
    assert not wrong, f"avoided names whose first result is not the term's chapter: {wrong}"


@pytest.mark.parametrize("query", ["层归一化", "teacher forcing"])
def test_search_results_show_the_matching_sentence(browser, query: str) -> None:  # type: ignore[no-untyped-def]
    from urllib.parse import quote

    context, page, problems = _open(browser, HTML / "search.html")
    try:
        page.goto(f"{(HTML / 'search.html').as_uri()}?q={quote(query)}", wait_until="load")
        page.wait_for_function(
            "() => (document.querySelector('#search-results .search-summary') || {}).innerText",
            timeout=TIMEOUT_MS,
        )
        first = page.locator("#search-results ul.search > li").first
        assert TAUGHT_IN[query] + ".html" in first.locator("a").first.get_attribute("href")
        snippet = first.locator("p.context")
        assert snippet.count() == 1, f"{query}: the first result has no snippet"
        assert query.lower() in snippet.inner_text().lower(), snippet.inner_text()
        assert snippet.locator("mark").inner_text().lower() == query.lower()
        assert not problems, str(problems)
    finally:
        context.close()


HASHED_NAME = re.compile(r"[0-9a-f]{32,}")
FIGURE_NUMBER = re.compile(r"^图 (?:((?:\d+|[ACL])(?:\.\d+)?)\.)?(\d+)$")


def _png_outputs(notebook: Path) -> int:
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    return sum(
        "image/png" in output.get("data", {})
        for cell in cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=_page_id)
def test_every_plot_has_a_number_caption_and_alt_text(path: Path) -> None:
    """book/_ext/figures.py: each plot of a chapter is a figure "图 N.K" (K = 1, 2, … in
    page order) with a caption, which is also its alt text instead of the hashed file name."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    images = [  # a widget's figure is captioned by the widget (tests/test_book_reading.py)
        image
        for image in soup.select("article.bd-article .cell_output img")
        if not image.find_parent(class_="lk-static-widget")
    ]
    notebook = ROOT / "notebooks" / f"{path.stem}.ipynb"
    assert len(images) == _png_outputs(notebook), f"{_page_id(path)}: a plot was not shown"
    numbers = []
    for image in images:
        figure = image.find_parent("figure")
        assert figure is not None and "lk-figure" in figure.get("class", []), image.get("src")
        number = figure.select_one("figcaption .caption-number")
        assert number is not None, f"{_page_id(path)}: {image.get('src')} has no number"
        match = FIGURE_NUMBER.match(number.get_text())
        assert match, f"{_page_id(path)}: figure number {number.get_text()!r}"
        numbers.append(int(match.group(2)))
        caption = figure.select_one("figcaption").get_text(" ", strip=True)
        text = caption.removeprefix(number.get_text()).strip()
        assert text, f"{_page_id(path)}: {number.get_text()} has no caption"
        alt = image.get("alt", "")
        assert not HASHED_NAME.search(alt) and alt.startswith(number.get_text()), alt
    assert numbers == list(range(1, len(numbers) + 1)), f"{_page_id(path)}: {numbers}"


def test_glossary_first_uses_link_their_pages() -> None:
    """The glossary's 首次出现 column: each chapter named is a link to that chapter's page."""
    from bs4 import BeautifulSoup

    page = HTML / "notebooks" / "08_3_appendix_reference.html"
    table = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").select_one(
        "section#glossary table"
    )
    # the rows the search reads: a term written in Latin letters alone (FlashAttention) is not one
    rows = [r for r in table.select("tbody tr") if HAN.search(r.select("td")[0].get_text())]
    assert len(rows) == len(GLOSSARY), (len(rows), len(GLOSSARY))
    for row, entry in zip(rows, GLOSSARY, strict=True):
        link = row.select("td")[2].select_one("a")  # 附录: the appendix's landing page
        assert link is not None and link.get_text() == entry.chapter, row.get_text(" | ")
        target = (page.parent / link["href"].split("#")[0]).resolve()
        assert target.is_file(), link["href"]
        assert chapter_docname(entry.chapter, [target.relative_to(HTML).with_suffix("").as_posix()])


def test_intro_names_the_pdf_only_when_it_is_there() -> None:
    """The intro links the PDF when the build has it; otherwise the link and its "·" are hidden
    (no developer instruction such as "make pdf" is shown to a reader)."""
    import downloads

    intro = (HTML / "book" / "intro.html").read_text(encoding="utf-8")
    name = downloads.pdf_name(ROOT)
    assert "make pdf" not in intro
    if (HTML / name).is_file():
        assert f'<a href="../{name}">' in intro
    else:
        assert f'<span class="lk-no-pdf" data-href="../{name}" hidden>' in intro
