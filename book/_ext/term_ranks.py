"""Which page a glossary term's search ranks first: the page that teaches it.

Part of the ``search_terms`` extension (it ranks the chapter that teaches a term first when
the query is that term or its English name): the pages a glossary 首次出现 label names
(``chapter_pages``), the page its cell links to (``first_use_link``) and the ranking rule
(``teaching_chapters``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sphinx.errors import ExtensionError

if TYPE_CHECKING:  # annotations only: search_terms imports this module
    from search_terms import GlossaryRow

# a parenthesised qualifier of a glossary cell: "LayerNorm" of "layer normalization (LayerNorm)"
PARENTHESISED = re.compile(r"[(（]([^)）]*)[)）]")


# the landing page of a chapter split into section pages
LANDING = re.compile(r"book/(chapter_\d+|appendix)")


def _is_section(docname: str) -> bool:
    """A section page of a split chapter: ``notebooks/06_2_exposure_bias``."""
    return re.match(r"\d+_\d+_", docname.rsplit("/", 1)[-1]) is not None


def chapter_pages(label: str, docnames: list[str]) -> list[str]:
    """The pages of the glossary's 首次出现 label, in ``docnames``' order: ``"第 6 章"`` ->
    ``[notebooks/06_…]``, or for a chapter split into section pages its landing page and its
    sections, ``[book/chapter_06, notebooks/06_1_…, notebooks/06_2_…]``; ``"综合项目"`` ->
    ``notebooks/capstone_…``, ``"调试实验"`` -> ``notebooks/lab_…``, ``"附录"`` ->
    ``notebooks/…appendix`` or, split, ``[book/appendix, notebooks/08_1_appendix_…, …]``.
    A section label names one section page: ``"6.2"`` -> ``[notebooks/06_2_…]``, ``"A.1"``
    -> ``[notebooks/08_1_appendix_…]`` (the appendix's first section)."""
    label = label.strip()
    section = re.fullmatch(r"(\d+|A)\.(\d+)", label)
    if section:
        chapter, number = section.groups()
        pages = chapter_pages("附录" if chapter == "A" else f"第 {int(chapter)} 章", docnames)
        found = [d for d in pages if re.match(rf"\d+_{int(number)}_", d.rsplit("/", 1)[-1])]
        if len(found) == 1:
            return found
        raise ExtensionError(f"search_terms: the glossary names {label!r}, pages {found}")
    number = re.fullmatch(r"第\s*(\d+)\s*章", label)
    landing: list[str] = []
    if number:
        prefix = f"{int(number.group(1)):02d}"
        landing = [d for d in docnames if d == f"book/chapter_{prefix}"]
        found = [d for d in docnames if d.startswith(f"notebooks/{prefix}_")]
    elif label == "综合项目":
        found = [d for d in docnames if d.startswith("notebooks/capstone_")]
    elif label == "调试实验":
        found = [d for d in docnames if d.startswith("notebooks/lab_")]
    else:
        landing = [d for d in docnames if d == "book/appendix"]
        found = [d for d in docnames if d.startswith("notebooks/") and "appendix" in d]
    sections = [d for d in found if _is_section(d)]
    if len(found) == 1 and not landing or sections == found and (found or landing):
        return landing + found
    raise ExtensionError(f"search_terms: the glossary names {label!r}, pages {found}")


def chapter_docname(label: str, docnames: list[str]) -> str:
    """The page a 首次出现 cell links to: the chapter's page, or its landing page when the
    chapter is split into section pages (see ``chapter_pages``)."""
    return chapter_pages(label, docnames)[0]


def first_use_link(label: str, docnames: list[str], glossary: str) -> str | None:
    """The page the glossary's 首次出现 cell ``label`` links to, or None where that is the
    glossary's own page ``glossary``: an appendix on one page names itself; a split appendix
    links its landing page, which lists the section that first uses the term; a section
    label (``"A.1"``) links that section's page."""
    target = chapter_docname(label, docnames)
    return None if target == glossary else target


def _chapter_sections(docname: str, order: list[str]) -> list[str]:
    """The section pages of the chapter ``docname`` belongs to, for a landing page or one of
    its sections (``book/chapter_06`` or ``notebooks/06_2_…`` -> ``[notebooks/06_1_…,
    notebooks/06_2_…, …]``); ``[docname]`` for a page of an unsplit chapter."""
    if LANDING.fullmatch(docname):
        number = re.fullmatch(r"book/chapter_(\d+)", docname)
        label = f"第 {int(number.group(1))} 章" if number else "附录"
    elif _is_section(docname):
        label = f"第 {int(docname.rsplit('/', 1)[-1].split('_', 1)[0])} 章"
    else:
        return [docname]
    return [d for d in chapter_pages(label, order) if not d.startswith("book/")]


def teaching_chapters(
    glossary: list[GlossaryRow],
    order: list[str],
    titles: dict[str, str],
    headings: dict[str, list[str]],
    texts: dict[str, str] | None = None,
) -> dict[str, str]:
    """Query (lower case) -> the chapter that teaches it, for each Chinese term of a glossary
    row and each of its English names (``"beam search / beam size"`` gives two).

    The glossary's 首次出现 column names where a term is first used, which is not always
    where it is taught (注意力 is used in chapter 1 and taught in chapter 2). The teaching
    chapter is the first chapter, in reading order (``order``), whose title names the term
    (a chapter's title is its landing page's, or its page's when it is not split); else the
    first section page whose title names it; else the first numbered page whose section
    headings name it (self-tests and links left out; the capstone applies terms rather than
    teaching them); else the first-use chapter. A landing page teaches nothing: of a chapter
    split into section pages, the page that defines the term (whose text, ``texts``, glosses
    it with its English name) is taken, else (for a chapter found by its title) the first
    whose title names it, else the first whose text does. ``titles``, ``headings`` and
    ``texts`` are keyed by docname."""
    ranks: dict[str, str] = {}
    text = (texts or {}).get
    for row in glossary:
        term = row.terms[0]
        english = [e.strip() for e in re.split(r"\s+/\s+", row.english)]  # not "A100/H100"
        short = PARENTHESISED.findall(row.english)  # "LayerNorm" of "layer normalization (…)"

        # the first word of each English name: "自注意力 (self-attention" glosses 自注意力,
        # "多头自注意力 (multi-head …" does not; nor does "层归一化 (Post-LN" gloss 层归一化
        english_words = {
            re.split(r"[\s,;]+", e.strip())[0] for e in [*english, *short] if e.strip()
        }
        gloss = re.compile(
            re.escape(term)
            + r"\s*[(（]\s*(?:"
            + "|".join(map(re.escape, sorted(english_words)))
            + r")(?![A-Za-z])",
            re.IGNORECASE,
        )

        def glossed(pages: list[str], gloss: re.Pattern = gloss) -> list[str]:
            """The pages that define the term: give its English name beside it."""
            return [d for d in pages if gloss.search(text(d, ""))]

        def taught_in(pages: list[str], term: str = term) -> str:
            """Of one chapter's pages: where it defines the term, names it in a title, uses it."""
            titled = [d for d in pages if term in titles.get(d, "")]
            named = [d for d in pages if term in text(d, "")]
            return (glossed(pages) or titled or named or pages)[0]

        first_use = taught_in(
            [d for d in chapter_pages(row.chapter, order) if not d.startswith("book/")]
        )
        named = [d for d in order if term in titles.get(d, "")]
        # a chapter's title (a landing page's, or an unsplit chapter's), then a section's
        in_title = [taught_in(_chapter_sections(d, order)) for d in named if not _is_section(d)]
        in_title += [d for d in named if _is_section(d)]
        # a heading names the term by its Chinese name or its short English name, as
        # "LayerNorm 与 BatchNorm" names 层归一化 (a whole word: "at" is not in "attention")
        whole_words = [rf"(?<![A-Za-z]){re.escape(n)}(?![A-Za-z])" for n in short]
        heading_names = re.compile("|".join([*map(re.escape, row.terms), *whole_words]))
        in_heading = [
            d for d in order
            if re.match(r"\d", d.rsplit("/", 1)[-1])
            and any(heading_names.search(h) for h in headings.get(d, [])
                    if not h.startswith(("自测", "[")))
        ]  # fmt: skip
        chapter = (in_title or in_heading or [first_use])[0]
        # of a chapter split into sections, a section that defines the term: this page if it
        # does, else the first that does
        defined = glossed(_chapter_sections(chapter, order))
        chapter = chapter if chapter in defined else (defined or [chapter])[0]
        # "layer normalization (LayerNorm)" is also found as "layer normalization", "LayerNorm"
        names = [*row.terms, *english]
        names += [PARENTHESISED.sub("", e) for e in english]
        names += short
        for name in names:
            key = re.sub(r"\s+", " ", name.strip().lower())
            if key:
                ranks.setdefault(key, chapter)
    return ranks
