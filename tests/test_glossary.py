"""Each glossary term is introduced with its English name in the chapter the glossary names.

The book's rule is "the English term at first use". For every term of the appendix's
术语表, in reading order (_toc.yml): the first chapter whose prose uses the term is the
chapter in the glossary's 首次出现 column, and that chapter writes the English name right
after the term at least once ("自回归 (autoregressive)"). A term used before the chapter
that introduces it reaches a reader who has not been told what it is.

Learning goals list terms before the section that explains them, so the gloss may come
anywhere in the chapter, not at the very first occurrence.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from test_notebooks import toc_files
from test_prose import (
    CODE,
    GLOSSARY,
    GLOSSARY_HEADING,
    LINK_TARGET,
    ROOT,
    glossary_table,
    reader_text,
)

# words that are also everyday words for another thing: 后置 (a postposed adjective in a
# sentence), 步长 (an optimiser's step size before chapter 7's stride), 网格 (a grid of plots
# before chapter 7's launch grid)
HOMONYMS = {"后置", "步长", "网格"}
# the recap page after chapter 6 names what later chapters teach, with links to them
RECAP_PAGES = {"book/lecture_map.md"}
HIDDEN = [
    CODE,
    LINK_TARGET,
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"\$[^$\n]*\$"),  # inline math
]
# the term, closing emphasis or quotes, then an English name in brackets:
# 自回归 (autoregressive), **算术强度** (arithmetic intensity), “分组顺序” (grouped ordering),
# （梯度消失, vanishing gradient）, 核采样 (nucleus sampling)
GLOSS_AFTER = r"(?:[*”]*\s*[(（]\s*[A-Za-z0-9]|[*”]*\s*,\s*[A-Za-z][\w -]*[)）])"


def reading_order() -> list[Path]:
    """The chapters in the order of _toc.yml (the root page and book pages included)."""
    files = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8")))
    return [ROOT / (f + (".md" if f.startswith("book/") else ".ipynb")) for f in files]


def chapter_label(path: Path) -> str:
    """How the glossary's 首次出现 column names a chapter: 第 N 章, 综合项目, 调试实验; the
    appendix by its section, A.1, A.2 … (附录 for its landing page)."""
    match = re.match(r"(?:chapter_)?(\d\d)[_.]", path.name)
    section = re.match(r"08_(\d+)_", path.name)
    if section:
        return f"A.{int(section.group(1))}"
    if path.name.startswith("08_") or path.stem == "appendix":
        return "附录"
    if path.name.startswith("lab_"):
        return "调试实验"
    if match:
        return f"第 {int(match.group(1))} 章"
    return "综合项目" if path.name.startswith("capstone") else path.name


def prose(path: Path) -> str:
    """The reader's prose of one chapter, without code, math, link targets, 记号表 or 术语表."""
    cells = [
        t for t in reader_text(path) if not t.lstrip().startswith((GLOSSARY_HEADING, "## 记号表"))
    ]
    text = "\n".join(cells)
    for pattern in HIDDEN:
        text = pattern.sub(" ", text)
    return text


def glossary_terms(markdown: list[str]) -> list[tuple[str, str]]:
    """(term, first-use chapter) for every Chinese term of the glossary ("A / B" gives two)."""
    terms = []
    for chinese, _, first, *_ in glossary_table(markdown)[1]:
        chinese = re.sub(r"（[^）]*）", "", chinese)  # 预热（学习率） -> 预热
        terms += [(t.strip(), first) for t in chinese.split(" / ") if len(t.strip()) >= 2]
    return terms


def first_use_problems(chapters: list[tuple[str, str]], terms: list[tuple[str, str]]) -> list[str]:
    """Terms used before their chapter, or never glossed in it; ``chapters``: (label, prose).

    A longer term glossed in that chapter glosses the shorter one it contains: 填充掩码
    (padding mask) tells the reader what 掩码 is.
    """
    problems = []
    for term, first in terms:
        if term in HOMONYMS:
            continue
        # mask longer terms that contain this one (自注意力 is not a use of 注意力)
        longer = [other for other, _ in terms if term in other and other != term]

        def masked(text: str, longer: list[str] = longer) -> str:
            for other in sorted(longer, key=len, reverse=True):
                text = text.replace(other, "＃" * len(other))
            return text

        used = [(label, masked(text)) for label, text in chapters if term in masked(text)]
        if not used:
            continue
        label, text = used[0]
        if label != first:
            problems.append(f"{term}: first used in {label}, the glossary says {first}")
            continue
        if not re.search(r"[\u4e00-\u9fff]", term):
            continue  # a name in Latin letters (FlashAttention) is its own English name
        unmasked = dict(chapters)[label]
        glossed = re.search(re.escape(term) + GLOSS_AFTER, text) or any(
            re.search(re.escape(other) + GLOSS_AFTER, unmasked) for other in longer
        )
        if not glossed:
            problems.append(f"{term}: {label} never writes its English name after it")
    return problems


def test_first_use_problems_are_found_in_planted_chapters() -> None:
    terms = [("自回归", "第 4 章"), ("非自回归", "第 4 章"), ("验证集", "第 6 章")]
    chapters = [
        ("第 1 章", "训练集、验证集和测试集"),
        ("第 4 章", "**自回归** (autoregressive) 与非自回归 (NAT)"),
        ("第 6 章", "验证集 (validation set)"),
    ]
    assert first_use_problems(chapters, terms) == [
        "验证集: first used in 第 1 章, the glossary says 第 6 章"
    ]
    # a term of its chapter without its English name; 非自回归 is not a use of 自回归
    chapters[1] = ("第 4 章", "自回归的解码器；非自回归的解码器")
    assert first_use_problems(chapters, terms[:2]) == [
        "自回归: 第 4 章 never writes its English name after it",
        "非自回归: 第 4 章 never writes its English name after it",
    ]
    # a longer glossed term introduces the shorter one
    chapters[1] = ("第 4 章", "非自回归 (NAT) 与自回归的区别")
    assert first_use_problems(chapters, terms[:2]) == []
    # glossed in quotes, or with a comma inside full-width brackets
    chapters[1] = ("第 4 章", "“自回归” (autoregressive)；（非自回归, non-autoregressive）")
    assert first_use_problems(chapters, terms[:2]) == []
    # a name in Latin letters needs no gloss, but is still first used where the glossary says
    latin = [("FlashAttention", "第 4 章")]
    assert first_use_problems([("第 4 章", "FlashAttention 的做法")], latin) == []
    assert first_use_problems([("第 1 章", "FlashAttention"), ("第 4 章", "")], latin) == [
        "FlashAttention: first used in 第 1 章, the glossary says 第 4 章"
    ]


def test_reading_order_lists_every_chapter() -> None:
    names = {p.name for p in reading_order()}
    assert {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} <= names
    assert "08_3_appendix_reference.ipynb" in names and "appendix.md" in names


def test_glossary_terms_are_introduced_where_the_glossary_says() -> None:
    # the preface previews the whole book; the appendix's landing page lists what its
    # sections (A.1, A.2, A.3: the glossary's labels) teach
    front_matter = {"intro.md", "how_to_use.md", "appendix.md"}
    chapters: dict[str, str] = {}  # a chapter's pages (landing page, sections) read as one
    for path in reading_order():
        if path.name not in front_matter and str(path.relative_to(ROOT)) not in RECAP_PAGES:
            label = chapter_label(path)
            chapters[label] = chapters.get(label, "") + "\n" + prose(path)
    problems = first_use_problems(list(chapters.items()), glossary_terms(reader_text(GLOSSARY)))
    assert not problems, "glossary first uses:\n" + "\n".join(problems)


@pytest.mark.parametrize("label", ["第 0 章", "A.1", "A.2", "综合项目", "调试实验"])
def test_chapter_labels_match_the_glossary_column(label: str) -> None:
    labels = {chapter_label(p) for p in reading_order()}
    assert label in labels
