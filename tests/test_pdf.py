"""The printed book: ``make pdf`` wrote one complete, self-contained PDF.

Run by ``make test`` after ``make pdf`` (``pytest tests/test_pdf.py --run-book``); skipped
otherwise, like the browser test. Checks: a plausible page count; every font embedded, a CJK
one among them; every chapter title extractable as text and bookmarked; every figure of the
book printed; no raw TeX left in the text (MathJax typeset every formula); the bookmarks
have a part level with each part's chapters under it, no title run together twice and no
space lost; the title page's contents give each chapter's and section page's page; every page of a
chapter or section page carries its title at the top; no display formula was wider than the printed column
(make_pdf.py measures them at that width, scales a wide one down and reports any it could
not fit); the Colab set-up cell is not printed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))
from make_pdf import COLUMN_PX, MARGIN_MM, REPORT, book_parts, pdf_name  # noqa: E402

PDF = ROOT / "_build" / "pdf" / pdf_name()
SINGLEHTML = ROOT / "_build" / "singlehtml" / "print.html"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# TeX that MathJax would have turned into glyphs: delimiters and common control words.
RAW_TEX = re.compile(
    r"\\[(\[]|\$\$|\\(frac|sqrt|mathrm|mathbb|operatorname|left|right|begin|end|top|cdot"
    r"|sum|alpha|times|infty|odot|varepsilon|mid|le|ge)\b"
)


def _squash(text: str) -> str:
    """Text without whitespace: PDF extraction breaks lines and spaces CJK text freely."""
    return re.sub(r"\s+", "", text)


def _chapter_titles() -> list[str]:
    titles = []
    for path in NOTEBOOKS:
        first = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
        titles.append(first.removeprefix("# ").strip())
    return titles


@pytest.fixture(scope="module")
def reader():  # type: ignore[no-untyped-def]
    from pypdf import PdfReader

    assert PDF.is_file(), f"no PDF at {PDF}: run make pdf first"
    return PdfReader(PDF)


@pytest.fixture(scope="module")
def text(reader) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(page.extract_text() for page in reader.pages)


def test_page_count_is_plausible(reader) -> None:  # type: ignore[no-untyped-def]
    # about 15 A4 pages per chapter today; far fewer means content was cut off, far more
    # that the print layout broke (one line per page, say)
    pages = len(reader.pages)
    assert 5 * len(NOTEBOOKS) <= pages <= 60 * len(NOTEBOOKS), f"{pages} pages"


def _fonts(resources, seen: set[int]) -> list:  # type: ignore[no-untyped-def]
    """Every font dictionary in a resource dictionary, including those of form XObjects."""
    found = []
    if resources is None:
        return found
    resources = resources.get_object()
    for font in (resources.get("/Font") or {}).values():
        if id(font.get_object()) not in seen:
            seen.add(id(font.get_object()))
            found.append(font.get_object())
    for xobject in (resources.get("/XObject") or {}).values():
        xobject = xobject.get_object()
        if xobject.get("/Subtype") == "/Form":
            found += _fonts(xobject.get("/Resources"), seen)
    return found


def _embedded(font) -> bool:  # type: ignore[no-untyped-def]
    if font.get("/Subtype") == "/Type3":
        return True  # the glyphs are drawn by procedures inside the PDF
    if font.get("/Subtype") == "/Type0":
        font = font["/DescendantFonts"][0].get_object()
    descriptor = font.get("/FontDescriptor")
    descriptor = descriptor.get_object() if descriptor is not None else {}
    return any(key in descriptor for key in ("/FontFile", "/FontFile2", "/FontFile3"))


def test_every_font_is_embedded_and_one_is_cjk(reader) -> None:  # type: ignore[no-untyped-def]
    seen: set[int] = set()
    fonts = [font for page in reader.pages for font in _fonts(page.get("/Resources"), seen)]
    assert fonts, "the PDF uses no font"
    names = [str(font.get("/BaseFont", font.get("/Subtype"))) for font in fonts]
    missing = [name for font, name in zip(fonts, names, strict=True) if not _embedded(font)]
    assert not missing, f"fonts not embedded: {missing}"
    assert any(re.search(r"WenQuanYi|Noto\w*CJK|SourceHan", name) for name in names), names


def test_every_chapter_title_is_text_and_a_bookmark(reader, text: str) -> None:  # type: ignore[no-untyped-def]
    def titles(outline) -> list[str]:  # type: ignore[no-untyped-def]
        found = []
        for item in outline:
            found += titles(item) if isinstance(item, list) else [item.title]
        return found

    bookmarks = {_squash(title) for title in titles(reader.outline)}
    squashed = _squash(text)
    for title in _chapter_titles():
        assert _squash(title) in squashed, f"chapter title {title!r} is not text in the PDF"
        assert _squash(title) in bookmarks, f"chapter {title!r} has no bookmark"


def _images_in(xobjects, seen: set[int]) -> int:  # type: ignore[no-untyped-def]
    """Image XObjects among ``xobjects`` and inside the forms they hold (Chromium wraps
    images in forms), without decoding them (``page.images`` decodes every one: minutes)."""
    count = 0
    for ref in xobjects.values():
        obj = ref.get_object()
        if obj.get("/Subtype") == "/Image":
            count += 1
        elif obj.get("/Subtype") == "/Form" and id(obj) not in seen:
            seen.add(id(obj))
            inner = (obj.get("/Resources") or {}).get("/XObject")
            count += _images_in(inner.get_object(), seen) if inner is not None else 0
    return count


def test_every_figure_is_printed(reader) -> None:  # type: ignore[no-untyped-def]
    html = SINGLEHTML.read_text(encoding="utf-8")
    # raster figures: the intro's cover is an SVG, which Chromium prints as vector paths
    figures = len(re.findall(r'<img [^>]*src="_images/[^"]+\.(?:png|jpe?g)"', html))
    printed = 0
    for page in reader.pages:
        xobjects = (page.get("/Resources") or {}).get("/XObject")
        printed += _images_in(xobjects.get_object(), set()) if xobjects is not None else 0
    assert figures > 0 and printed >= figures, f"{printed} images printed, {figures} in the book"


def test_no_raw_tex_is_left(text: str) -> None:
    raw = [m.group(0) for m in RAW_TEX.finditer(text)]
    assert not raw, f"raw TeX in the PDF's text: {raw[:10]}"


def _bookmarks(outline, depth: int = 0) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    found = []
    for item in outline:
        if isinstance(item, list):
            found += _bookmarks(item, depth + 1)
        else:
            found.append((depth, item.title.replace("\xa0", " ")))
    return found


DOUBLED = re.compile(r"^(.{2,})\s*\1$")


def _outline_tree(reader, outline=None) -> list[tuple[str, int, list]]:  # type: ignore[no-untyped-def]
    """The bookmarks as a tree: (title, page index, children); pypdf lists an item's children
    as the list that follows it."""
    tree: list[tuple[str, int, list]] = []
    for item in reader.outline if outline is None else outline:
        if isinstance(item, list):
            tree[-1][2].extend(_outline_tree(reader, item))
        else:
            title = item.title.replace("\xa0", " ")
            tree.append((title, reader.get_destination_page_number(item), []))
    return tree


def _title(name: str) -> str:
    """A document's title: the first line of its notebook or page (``name`` as in _toc.yml)."""
    path = next((ROOT / name).parent.glob(Path(name).name + ".*"))
    if path.suffix == ".ipynb":
        first = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
    else:
        first = path.read_text(encoding="utf-8").splitlines()[0]
    return first.removeprefix("# ").strip()


def _doc_titles() -> dict[str, str]:
    """The title of each document of _toc.yml's parts."""
    return {name: _title(name) for _, documents in book_parts() for name in documents}


def test_bookmarks_have_parts_and_clean_titles(reader) -> None:  # type: ignore[no-untyped-def]
    bookmarks = _bookmarks(reader.outline)
    doubled = [title for _, title in bookmarks if DOUBLED.match(title)]
    assert not doubled, f"bookmark titles run together twice: {doubled}"
    # a Latin word glued to the next one ("andexposure"): every chapter title's words survive
    titles = {title for _, title in bookmarks}
    for title in _chapter_titles():
        assert title in titles or re.sub(r"\s+", " ", title) in titles, (
            f"chapter {title!r} is not a bookmark with its spaces: {sorted(titles)[:5]}…"
        )
    # one top bookmark, the book's title; under it the intro's sections and every part, in
    # the order of _toc.yml (depth 1), each with exactly its chapters under it (depth 2)
    tree = _outline_tree(reader)
    assert len(tree) == 1, f"top-level bookmarks: {[title for title, _, _ in tree]}"
    level_one = {title: children for title, _, children in tree[0][2]}
    captions = [caption for caption, _ in book_parts()]
    assert [t for t, _, _ in tree[0][2] if t in captions] == captions, list(level_one)
    documents = _doc_titles()
    for caption, names in book_parts():
        chapters = [title for title, _, _ in level_one[caption]]
        assert chapters == [documents[name] for name in names], (
            f"part {caption!r} holds the bookmarks {chapters}"
        )


def _section_titles() -> set[str]:
    """The titles of the section pages of _toc.yml (a split chapter's notebooks)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {
        _title(section["file"])
        for part in toc["parts"]
        for chapter in part.get("chapters", [])
        for section in chapter.get("sections", [])
    }


def _page_starts(reader) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    """(title, page index) of the bookmark of every page of the web book, in the book's
    order: each chapter, and after a split chapter's landing page its section pages."""
    parts = {caption for caption, _ in book_parts()}
    sections = {_squash(title) for title in _section_titles()}
    starts = []
    for part, _, chapters in _outline_tree(reader)[0][2]:
        if part not in parts:
            continue
        for title, page, children in chapters:
            starts.append((title, page))
            starts += [(t, p) for t, p, _ in children if _squash(t) in sections]
    found = {_squash(title) for title, _ in starts}
    assert sections <= found, f"section pages without a bookmark: {sorted(sections - found)}"
    return starts


def test_contents_give_each_chapter_its_page_number(reader) -> None:  # type: ignore[no-untyped-def]
    starts = _page_starts(reader)
    # the contents, one entry a line: its title (which may wrap), then its page number
    pages = (reader.pages[i].extract_text() for i in range(starts[0][1]))
    lines = "\n".join(pages).splitlines()
    contents = "|".join(_squash(line) for line in lines) + "|"
    for title, page in starts:
        wrapped = r"\|?".join(re.escape(char) for char in _squash(title))
        found = re.search(wrapped + r"\|?(\d+)\|", contents)
        assert found, f"the contents list {title!r} without a page number"
        assert int(found.group(1)) == page + 1, f"{title!r} starts on page {page + 1}: {found[0]}"


def _header(page) -> str:  # type: ignore[no-untyped-def]
    """The text printed in a page's top margin (above the 16 mm of make_pdf.py's @page)."""
    top = float(page.mediabox.top) - 16 * 72 / 25.4
    found: list[str] = []

    def visit(text, cm, tm, font, size) -> None:  # type: ignore[no-untyped-def]
        if text.strip() and tm[4] * cm[1] + tm[5] * cm[3] + cm[5] > top:
            found.append(text)

    page.extract_text(visitor_text=visit)
    return _squash("".join(found))


def test_every_page_of_a_chapter_carries_its_title(reader) -> None:  # type: ignore[no-untyped-def]
    starts = _page_starts(reader)
    # a chapter (a section page) ends where the next one or the next part's own page starts
    parts = {caption for caption, _ in book_parts()}
    bounds = sorted(
        {page for title, page, _ in _outline_tree(reader)[0][2] if title in parts}
        | {page for _, page in starts}
        | {len(reader.pages)}
    )
    for title, first in starts:
        end = min(bound for bound in bounds if bound > first)
        for index in sorted({first, (first + end) // 2, end - 1}):
            header = _header(reader.pages[index])
            assert header == _squash(title), f"page {index + 1} of {title!r} has header {header!r}"
    assert _header(reader.pages[0]) == "", "the title page has a running header"


def test_no_display_formula_is_clipped(reader) -> None:  # type: ignore[no-untyped-def]
    import json

    report = json.loads((PDF.parent / REPORT).read_text(encoding="utf-8"))
    assert report["parts"] == len(book_parts()), report
    # make_pdf.py measured every display formula with the page laid out at the width of the
    # printed column (the A4 page less its margins) and scaled down any wider one
    box = reader.pages[0].mediabox
    column = (float(box.width) - 2 * MARGIN_MM * 72 / 25.4) * 96 / 72
    assert abs(COLUMN_PX - column) < 1 and report["width"] == int(COLUMN_PX), report
    formulas = SINGLEHTML.read_text(encoding="utf-8").count('<div class="math')
    assert report["measured"] >= formulas > 0, report
    assert report["clipped_formulas"] == [], report


def test_the_colab_cell_is_not_printed(text: str) -> None:
    assert "Colab 设置：从课程仓库安装" not in text, "the Colab set-up cell is printed"
