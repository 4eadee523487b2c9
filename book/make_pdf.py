"""Print the whole book to one PDF with Debian's Chromium (``make pdf``).

``make pdf`` first builds the book as one HTML page (``jupyter-book build . --builder
singlehtml``), then runs this script, which opens that page offline in headless Chromium
through Playwright (no browser is downloaded; every request that is not ``file://`` is
refused), waits until MathJax has typeset every formula, every font and image has loaded,
opens every solution dropdown (paper cannot unfold one), and prints A4 pages with page
numbers, the title of the chapter or section page at the top of each sheet (a named page
per page of the web book with a CSS margin box), a bookmark per part, chapter and section
(Chromium's document outline, from the headings) and the title page's contents with each
chapter's and section page's page number (the book is printed twice: the first print tells
where the chapters start). Chromium embeds the subset of each font it uses, so the Chinese text (WenQuanYi
Micro Hei, which ``make`` installs) and MathJax's glyphs travel inside the PDF.

Widgets need a running Python, so the PDF, like the web page, shows the static figure that
stands beside each of them; the sliders themselves are left out.

Usage: ``python book/make_pdf.py SINGLEHTML_DIR OUTPUT_DIR``; prints the path it wrote.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 120_000
ROOT = Path(__file__).resolve().parents[1]
REPORT = "print-report.json"  # beside the PDF: the parts added, formulas still too wide

# Print layout: the title page and the article alone (KEEP_ARTICLE drops the theme's header,
# sidebars and footers); code wraps instead of being cut at the page's edge.
PAGE_WIDTH_MM, MARGIN_MM = 210, 14  # A4; the left and right margins
# the text column's width in CSS pixels (96 per inch): the page is laid out at this width
COLUMN_PX = (PAGE_WIDTH_MM - 2 * MARGIN_MM) / 25.4 * 96
PRINT_CSS = """
@page { size: A4; margin: 16mm 14mm 16mm 14mm;
  @bottom-center { content: counter(page) " / " counter(pages); font-size: 8px; color: #555; } }
@page lk-title { @bottom-center { content: none; } }
html { font-size: 14px; }
body { display: block !important; margin: 0 !important; padding: 0 !important;
  background: white; }
.bd-article { padding: 0 !important; margin: 0 !important; max-width: none !important; }
.bd-article h1 { display: block !important; text-align: center !important; font-size: 2.2rem;
  margin: 30mm 0 12mm 0; }
#jb-print-toc { display: block !important; break-after: page; }
#jb-print-toc .print-h2 { font-size: 1.5rem; font-weight: bold; margin: 6mm 0 3mm 0; }
#jb-print-toc .print-p { font-weight: bold; margin-top: 3mm; }
.toggle-button, .copybtn, .headerlink, .widget-subarea,
script[type="application/vnd.jupyter.widget-view+json"] { display: none !important; }
pre, pre code { white-space: pre-wrap !important; word-break: break-word; font-size: 11px; }
.cell_output .output pre { max-height: none !important; overflow: visible !important; }
img { max-width: 100% !important; break-inside: avoid; }
figure, table, .cell_output img, mjx-container[display="true"] { break-inside: avoid; }
h1, h2, h3 { break-after: avoid; }
/* a part of the book (KEEP_ARTICLE adds one heading per part of _toc.yml) */
h2.lk-part { break-before: page; text-align: center; font-size: 2rem; margin: 60mm 0 0 0; }
mjx-container[display="true"] { overflow: visible !important; }
/* each chapter (each page of the web book) starts on a new sheet (RUNNING_HEADERS marks
   them) */
section.lk-chapter { break-before: page; }
/* the title page's contents: each chapter with its page number, its sections below it */
#jb-print-toc li { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0 0.4em; }
#jb-print-toc li > ul { flex-basis: 100%; padding-left: 1.5em; }
#jb-print-toc li .lk-toc-leader { flex: 1; border-bottom: 1px dotted #999; }
"""

# Keeps the article alone and puts the theme's print table of contents under the book's
# title, as a title page; the table's headings become plain text, so that the bookmarks are
# the book's own headings.
KEEP_ARTICLE = """() => {
  const article = document.querySelector('.bd-article');
  const title = article && article.querySelector('h1');
  const toc = document.querySelector('#jb-print-toc');
  if (!title || !toc) return false;
  document.body.replaceChildren(article);
  toc.querySelectorAll('h1, h2, [role=heading]').forEach(heading => {
    const text = document.createElement('div');
    text.className = 'print-' + heading.tagName.toLowerCase();
    text.innerHTML = heading.innerHTML;
    heading.replaceWith(text);
  });
  title.after(toc);
  return true;
}"""

# Headings that Chromium turns into the PDF's bookmarks. Each chapter of the one-page build
# keeps the ids its own page gave its sections ("id3" in many chapters), and Chromium merges
# the bookmarks of headings that share an id into one with their titles run together
# ("自测自测"), so every id after the first is renamed. A heading's spaces become no-break
# spaces (a space where the heading wrapped was lost from its bookmark). Each part of _toc.yml gets a heading above
# its chapters, whose headings move one level down, so that the bookmarks have a part level.
OUTLINE = """(parts) => {
  const seen = new Set();
  document.querySelectorAll('[id]').forEach(element => {
    let id = element.id, n = 1;
    while (seen.has(id)) id = `${element.id}-${++n}`;
    element.id = id;
    seen.add(id);
  });
  const demote = heading => {
    const lower = document.createElement('h' + Math.min(6, Number(heading.tagName[1]) + 1));
    for (const attribute of heading.attributes) lower.setAttribute(attribute.name, attribute.value);
    lower.replaceChildren(...heading.childNodes);
    heading.replaceWith(lower);
  };
  // The chapters sit inside the intro's last section (where its toctree is); Chromium then
  // runs that section's bookmark title together twice. They move out to follow it.
  const spans = Array.from(document.querySelectorAll('span[id^="document-"]'));
  let last = spans.length ? spans[0].parentElement.closest('section') : null;
  if (last && last.parentElement.closest('section')) {
    for (const span of spans) {
      const chapter = span.nextElementSibling;
      last.after(span);
      if (chapter) span.after(chapter);
      last = chapter || span;
    }
  }
  let added = 0;
  for (const [caption, documents] of parts) {
    const sections = documents
      .map(name => document.getElementById('document-' + name))
      .filter(span => span && span.nextElementSibling)
      .map(span => span.nextElementSibling);
    if (!sections.length) continue;
    sections.forEach(section => section.querySelectorAll('h2, h3, h4, h5').forEach(demote));
    const part = document.createElement('h2');
    part.className = 'lk-part';
    part.id = `part-${added + 1}`;
    part.textContent = caption;
    sections[0].previousElementSibling.before(part);
    added += 1;
  }
  document.querySelectorAll('h1, h2, h3, h4, h5, h6').forEach(heading => {
    heading.querySelectorAll('.headerlink').forEach(link => link.remove());
    for (const text of heading.childNodes) {
      // no-break spaces: Chromium drops a space where a heading wraps from its bookmark
      if (text.nodeType === Node.TEXT_NODE) text.textContent = text.textContent.replace(/\\s+/g, '\\u00a0');
    }
  });
  return added;
}"""

# Every page of a chapter carries the chapter's title at its top, every page of a section
# page its section's title (a CSS margin box of a named page per page of the web book;
# Chromium prints them); the intro's pages carry the book's title,
# the title page and a part's page none. Returns the CSS to add.
RUNNING_HEADERS = """() => {
  const quote = text => '"' + text.replace(/\\s+/g, ' ').trim()
    .replace(/\\\\/g, '\\\\\\\\').replace(/"/g, '\\\\"') + '"';
  const box = text => `{ @top-center { content: ${quote(text)}; font-size: 8px; color: #555; } }`;
  const rules = [];
  const root = document.querySelector('.bd-article section');
  const title = document.querySelector('.bd-article h1');
  if (root && title) {
    root.style.page = 'lk-intro';
    rules.push(`@page lk-intro ${box(title.textContent)}`);
    title.style.page = 'lk-title';
    document.querySelector('#jb-print-toc').style.page = 'lk-title';
  }
  document.querySelectorAll('h2.lk-part').forEach(part => { part.style.page = 'lk-part'; });
  // a chapter's marker (the target of links to the chapter) moves to the top of its section:
  // between two sections it would end one sheet and, as a box of the intro's named page,
  // print a blank sheet with the intro's header
  document.querySelectorAll('span[id^="document-"]').forEach(marker => {
    const chapter = marker.nextElementSibling;
    if (!chapter || chapter.tagName !== 'SECTION') return;
    chapter.classList.add('lk-chapter');
    chapter.prepend(marker);
  });
  document.querySelectorAll('section.lk-chapter').forEach((chapter, index) => {
    const heading = chapter.querySelector('h1, h2, h3, h4, h5, h6');
    if (!heading) return;
    chapter.style.page = `lk-chapter-${index}`;
    rules.push(`@page lk-chapter-${index} ${box(heading.textContent)}`);
  });
  return rules.join('\\n');
}"""

# The chapters that the title page's contents link to (the ids of their markers, which
# RUNNING_HEADERS moved to the top of each chapter: the PDF's named destination of a chapter
# is its first page); null for a link to no chapter.
TOC_TARGETS = """() => Array.from(document.querySelectorAll('#jb-print-toc a[href^="#document-"]'))
  .map(link => {
    const marker = document.getElementById(link.getAttribute('href').slice(1));
    return marker && marker.parentElement.classList.contains('lk-chapter') ? marker.id : null;
  })"""

# Writes each chapter's page number after its entry in the title page's contents.
TOC_NUMBERS = """(numbers) => {
  document.querySelectorAll('#jb-print-toc a[href^="#"]').forEach(link => {
    const number = numbers[link.getAttribute('href').slice(1)];
    const item = link.closest('li');
    if (!item || number === undefined) return;
    let page = item.querySelector(':scope > .lk-toc-page');
    if (!page) {
      const leader = document.createElement('span');
      leader.className = 'lk-toc-leader';
      page = document.createElement('span');
      page.className = 'lk-toc-page';
      link.after(leader, page);
    }
    page.textContent = String(number);
  });
}"""

# A display formula wider than the printed column would be cut at the page's edge: it is
# scaled down to fit. Returns the formulas still wider than their column (none, normally).
FIT_FORMULAS = """() => {
  const clipped = [], scaled = [];
  const formulas = document.querySelectorAll('mjx-container[display="true"]');
  formulas.forEach(math => {
    const column = math.parentElement.clientWidth;
    const drawn = math.firstElementChild ? math.firstElementChild.getBoundingClientRect().width : 0;
    if (drawn > column) {
      math.style.fontSize = `${Math.floor((100 * column) / drawn) - 1}%`;
      scaled.push(Math.round(drawn));
    }
    const after = math.firstElementChild ? math.firstElementChild.getBoundingClientRect().width : 0;
    if (after > column + 1) clipped.push(math.textContent.slice(0, 60));
  });
  return {measured: formulas.length, width: document.documentElement.clientWidth, scaled, clipped};
}"""

READY = """async () => {
  if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  const images = Array.from(document.images);
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener('load', done); img.addEventListener('error', done); })));
  await Promise.allSettled(Array.from(document.fonts).map(face => face.load()));
  await document.fonts.ready;
  return {
    broken: images.filter(img => img.naturalWidth === 0).map(img => img.getAttribute('src')),
    untypeset: Array.from(document.querySelectorAll('.math'))
      .filter(m => !m.querySelector('mjx-container')).length,
  };
}"""

OPEN_DROPDOWNS = """() => {
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('details').forEach(d => { d.open = true; });
}"""


def book_parts(toc: Path = ROOT / "_toc.yml") -> list[tuple[str, list[str]]]:
    """The parts of ``_toc.yml``: (caption, the docnames of its chapters), in order."""
    parts = yaml.safe_load(toc.read_text(encoding="utf-8")).get("parts", [])
    return [
        (part["caption"], [chapter["file"] for chapter in part.get("chapters", [])])
        for part in parts
    ]


def pdf_name(config: Path = ROOT / "_config.yml") -> str:
    """The PDF's file name: the repository's name from ``_config.yml`` (the one place that
    names the repository), e.g. ``transformer-course.pdf``."""
    url = yaml.safe_load(config.read_text(encoding="utf-8"))["repository"]["url"]
    return url.rstrip("/").rsplit("/", 1)[-1] + ".pdf"


def _root_page(singlehtml: Path) -> Path:
    """The single page, copied beside ``_static/``: Jupyter Book writes it as
    ``book/intro.html`` but with links relative to the build's root folder."""
    page = singlehtml / "print.html"
    pages = [p for p in singlehtml.rglob("*.html") if "_static" not in p.parts and p != page]
    pages = [p for p in pages if 'http-equiv="Refresh"' not in p.read_text(encoding="utf-8")]
    if len(pages) != 1:
        raise SystemExit(f"expected one page in {singlehtml} (a singlehtml build), got {pages}")
    page.write_text(pages[0].read_text(encoding="utf-8"), encoding="utf-8")
    return page


def print_book(singlehtml: Path, output: Path) -> Path:
    """Print the singlehtml build in ``singlehtml`` to ``output``; return the PDF's path."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        raise SystemExit(f"{CHROMIUM} is missing: make pdf installs Debian's chromium")
    page_path = _root_page(singlehtml.resolve())
    output.mkdir(parents=True, exist_ok=True)
    target = output / pdf_name()
    refused: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            context = browser.new_context(viewport={"width": 1000, "height": 1400})

            def route(route) -> None:  # type: ignore[no-untyped-def]
                if route.request.url.startswith(("file://", "data:", "blob:")):
                    route.continue_()
                else:
                    refused.append(route.request.url)
                    route.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.goto(page_path.as_uri(), wait_until="load", timeout=TIMEOUT_MS)
            page.evaluate(OPEN_DROPDOWNS)
            page.emulate_media(media="print")
            state = page.evaluate(READY)
            if state["broken"] or state["untypeset"]:
                raise SystemExit(
                    f"not ready to print: images that did not load {state['broken']}, "
                    f"{state['untypeset']} formulas MathJax did not typeset"
                )
            if not page.evaluate(KEEP_ARTICLE):
                raise SystemExit("the page lacks the article's title or the theme's print contents")
            page.add_style_tag(content=PRINT_CSS)
            parts = page.evaluate(OUTLINE, book_parts())
            page.add_style_tag(content=page.evaluate(RUNNING_HEADERS))
            chapters = page.evaluate(TOC_TARGETS)
            if None in chapters:
                raise SystemExit(f"a chapter of the contents has no section: {chapters}")
            # lay the page out at the printed column's width, so that what is measured below
            # is what is printed
            page.set_viewport_size({"width": int(COLUMN_PX), "height": 1400})
            formulas = page.evaluate(FIT_FORMULAS)
            report = {"parts": parts, "clipped_formulas": formulas.pop("clipped"), **formulas}
            if report["clipped_formulas"]:
                raise SystemExit(f"display formulas wider than the page: {report}")
            report["toc_pages"] = _number_contents(page, target, chapters)
            (output / REPORT).write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
        finally:
            browser.close()
    if refused:
        raise SystemExit(f"the page asked for the network, which a PDF build must not: {refused}")
    _undouble_bookmarks(target)
    return target


def _print(page, target: Path) -> None:  # type: ignore[no-untyped-def]
    page.pdf(
        path=str(target),
        format="A4",
        print_background=True,
        outline=True,
        tagged=True,
        prefer_css_page_size=True,
    )


def _chapter_pages(pdf: Path, chapters: list[str]) -> dict[str, int]:
    """The page number (from 1) where each chapter section named in ``chapters`` starts,
    from the PDF's named destinations (one per link target)."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    destinations = reader.named_destinations
    return {
        chapter: reader.get_destination_page_number(destinations[key]) + 1
        for chapter in chapters
        if (key := "/" + chapter) in destinations
    }


def _number_contents(page, target: Path, chapters: list[str]) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Print the book until the page numbers written into its contents are the pages where
    the chapters start (the numbers take no new line, so the second print normally agrees);
    return them."""
    numbers: dict[str, int] = {}
    for _ in range(3):
        _print(page, target)
        found = _chapter_pages(target, chapters)
        if len(found) != len(chapters):
            missing = sorted(set(chapters) - set(found))
            raise SystemExit(f"the PDF has no destination for the chapters {missing}")
        if found == numbers:
            return numbers
        numbers = found
        page.evaluate(TOC_NUMBERS, numbers)
    raise SystemExit(f"the contents' page numbers did not settle: {numbers}")


def _undouble_bookmarks(pdf: Path) -> None:
    """Write each bookmark title that Chromium ran together twice once.

    Chromium (156) gives the last section of the intro the bookmark "书中的数字书中的数字"
    although its heading, its id and its text are single; unique ids and the part headings
    above remove every other case. No heading of the book repeats itself, so a title made
    of one string twice is always this fault.
    """
    from pypdf import PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter(clone_from=str(pdf))
    outlines = writer.root_object.get("/Outlines")
    pending = [outlines.get_object().get("/First")] if outlines is not None else []
    changed = False
    while pending:
        item = pending.pop()
        if item is None:
            continue
        node = item.get_object()
        doubled = re.fullmatch(r"(.+)\1", str(node.get("/Title", "")), re.S)
        if doubled:
            node[NameObject("/Title")] = TextStringObject(doubled.group(1))
            changed = True
        pending += [node.get("/First"), node.get("/Next")]
    if changed:
        partial = pdf.with_suffix(".partial.pdf")
        with partial.open("wb") as handle:
            writer.write(handle)
        partial.replace(pdf)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("singlehtml", type=Path, help="the singlehtml build (_build/singlehtml)")
    parser.add_argument("output", type=Path, help="folder for the PDF (_build/pdf)")
    args = parser.parse_args(argv)
    print(print_book(args.singlehtml, args.output))


if __name__ == "__main__":
    sys.exit(main())
