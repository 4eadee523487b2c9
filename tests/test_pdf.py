"""The printed book: ``make pdf`` wrote one complete, self-contained PDF.

Run by ``make test`` after ``make pdf`` (``pytest tests/test_pdf.py --run-book``); skipped
otherwise, like the browser test. Checks: a plausible page count; every font embedded, a CJK
one among them; every chapter title extractable as text and bookmarked; every figure of the
book printed; no raw TeX left in the text (MathJax typeset every formula); the bookmarks
have a part level, no title run together twice and no space lost; no display formula was
wider than the page (make_pdf.py scales a wide one down and reports any it could not fit);
the Colab set-up cell is not printed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))
from make_pdf import REPORT, book_parts, pdf_name  # noqa: E402

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


def test_every_figure_is_printed(reader) -> None:  # type: ignore[no-untyped-def]
    html = SINGLEHTML.read_text(encoding="utf-8")
    # raster figures: the intro's cover is an SVG, which Chromium prints as vector paths
    figures = len(re.findall(r'<img [^>]*src="_images/[^"]+\.(?:png|jpe?g)"', html))
    printed = sum(len(page.images) for page in reader.pages)
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


@pytest.mark.xfail(
    strict=True,
    reason="known bug (issue 31): after the merges of 2026-12-03 one part bookmark lands at "
    "depth 4 instead of 1; fix book/make_pdf.py's OUTLINE, then remove this mark",
)
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
    levels = {title: depth for depth, title in bookmarks}
    for caption, _ in book_parts():
        assert caption in levels, f"part {caption!r} has no bookmark"
    chapter_depth = {levels[t] for t in _chapter_titles() if t in levels}
    part_depth = {levels[caption] for caption, _ in book_parts()}
    assert len(part_depth) == 1 and min(chapter_depth) > max(part_depth), (
        f"parts at depth {part_depth}, chapters at {chapter_depth}: chapters must nest in parts"
    )


def test_no_display_formula_is_clipped() -> None:
    import json

    report = json.loads((PDF.parent / REPORT).read_text(encoding="utf-8"))
    assert report["parts"] == len(book_parts()), report
    assert report["clipped_formulas"] == [], report


def test_the_colab_cell_is_not_printed(text: str) -> None:
    assert "Colab set-up" not in text, "the Colab set-up cell is printed"
