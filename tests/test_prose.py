"""The book's prose keeps its promise that the reader needs only the slides and the paper.

The Markdown of every chapter notebook and every page in book/ may not send the reader to
material they do not have: our sources ("讲义笔记", "参考笔记", "讲义自测" ...) or our tests
(`tests/...`, `test_x.py`). A corrected common mistake is presented as a common mistake.

Every chapter closes with the same sections in the same order: 常见误区, 自测, 30 秒速记
(exercises and their code cells may sit inside 自测; the appendix's 常见误区 is the
summary of all chapters, 各章常见误区汇总).

One term per concept: the appendix glossary (术语表) lists in its fourth column (不用) the
variants of each term that the book does not use; no page uses one, except an English
variant glossed in parentheses after the Chinese term ("教师强制 (teacher forcing)").

Cross-references are links: the built book shows no section numbers, so a bare "4.3 节"
is an error; a section of the book is linked by its heading ("[标题](05_training.ipynb#标题)",
anchors as MyST's ``myst_heading_anchors`` makes them), a section of the paper is written
"论文 5.3 节" (or "论文第 5.3 节").
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PAGES = sorted((ROOT / "book").glob("*.md"))

SOURCE_REFERENCE = re.compile(
    r"讲义笔记|参考笔记|精读笔记|另一份笔记|一份笔记|讲义自测|笔记\s*\d{3}"
    r"|笔记(?!本)|lecture[ -]notes?|tests/|\btest_\w+\.py"
)


def source_references(text: str) -> list[str]:
    """Phrases of ``text`` that point the reader at material they do not have."""
    return [m.group(0) for m in SOURCE_REFERENCE.finditer(text)]


def reader_text(path: Path) -> list[str]:
    """The prose a reader sees: a page's text, or a notebook's Markdown cells."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    notebook = nbformat.read(path, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]


def test_source_references_are_found_in_planted_text() -> None:
    assert source_references("讲义笔记里写的是 0.2228") == ["讲义笔记"]
    assert source_references("（`tests/test_rnn.py` 逐项检查了这一点）") == [
        "tests/",
        "test_rnn.py",
    ]
    assert source_references("一份精读笔记把它说成了 512") == ["精读笔记"]
    assert source_references("笔记 003 说归纳偏置是“无”") == ["笔记 003"]
    assert source_references("### 自测 4.1　两种注意力的形状（讲义自测 Q1）") == ["讲义自测"]
    # the slides themselves, Jupyter notebooks and a common slip of the pen are fine
    assert source_references("讲义 p31 画了一个停不下来的解码器；打开笔记本运行它") == []
    assert source_references("这是一个常见的笔误") == []


def test_every_page_is_checked() -> None:
    names = {p.name for p in NOTEBOOKS + PAGES}
    assert {
        "00_setup.ipynb",
        "06_2_exposure_bias.ipynb",
        "chapter_06.md",
        "lecture_map.md",
    } <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_no_reference_to_our_sources(path: Path) -> None:
    found = [ref for text in reader_text(path) for ref in source_references(text)]
    assert not found, f"{path.name} refers the reader to material they do not have: {found}"


CLOSING_SECTIONS = ("常见误区", "自测", "30 秒速记")
SECTION_HEADING = re.compile(r"^## (.+?)\s*$", re.M)


def section_headings(markdown: list[str]) -> list[str]:
    """The level-2 headings of a notebook's Markdown cells, in order."""
    return [h for text in markdown for h in SECTION_HEADING.findall(text)]


def closing_sections(headings: list[str]) -> list[str]:
    """The last three level-2 headings, with 常见误区 summaries named 常见误区."""
    last = headings[-len(CLOSING_SECTIONS) :]
    return ["常见误区" if h.endswith("常见误区汇总") else h for h in last]


def test_closing_sections_are_checked_on_planted_chapters() -> None:
    good = ["## 概念", "## 常见误区\n\n- …", "## 自测\n\n### 编程练习", "## 30 秒速记"]
    assert closing_sections(section_headings(good)) == list(CLOSING_SECTIONS)
    appendix = ["## 术语表", "## 各章常见误区汇总", "## 自测", "## 30 秒速记"]
    assert closing_sections(section_headings(appendix)) == list(CLOSING_SECTIONS)
    for bad in (
        ["## 常见误区", "## 自测", "## 30 秒小结"],  # another name for the summary
        ["## 常见误区", "## 自测题", "## 30 秒速记"],  # another name for the self-test
        ["## 常见误区", "## 30 秒速记", "## 自测"],  # the appendix's old order
        ["## 概念", "## 自测", "## 30 秒速记"],  # no misconceptions
        ["## 常见误区", "## 自测", "## 30 秒速记", "## 延伸阅读"],  # something after
    ):
        assert closing_sections(section_headings(bad)) != list(CLOSING_SECTIONS), bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_closes_with_the_same_sections(path: Path) -> None:
    found = closing_sections(section_headings(reader_text(path)))
    assert found == list(CLOSING_SECTIONS), (
        f"{path.name} closes with the sections {found}, "
        f"expected {list(CLOSING_SECTIONS)} in this order at the end"
    )


GLOSSARY = ROOT / "notebooks" / "08_3_appendix_reference.ipynb"
GLOSSARY_HEADING = "## 术语表"
# code blocks (and directive headers) and inline code: neither links nor prose
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
NOT_PROSE = [
    CODE,
    LINK_TARGET,
    re.compile(r"[(（][\x00-\x7f]*[)）]"),  # an English gloss in parentheses
]


def glossary_table(markdown: list[str]) -> tuple[list[str], list[list[str]]]:
    """The glossary's header and rows, each a list of stripped cells."""
    cell = next((t for t in markdown if t.lstrip().startswith(GLOSSARY_HEADING)), None)
    assert cell is not None, f"no Markdown cell starts with {GLOSSARY_HEADING!r}"
    lines = [line for line in cell.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    return rows[0], rows[2:]  # rows[1] is the |---| line


def glossary_variants(markdown: list[str]) -> dict[str, str]:
    """Variant -> the term the book uses, from the glossary table's fourth column (不用)."""
    header, rows = glossary_table(markdown)
    assert header[3:4] == ["不用"], (
        f"the glossary's fourth column must list the variants the book does not use "
        f"('不用'); its header is {header}"
    )
    variants: dict[str, str] = {}
    for cells in rows:
        for variant in filter(None, (v.strip() for v in cells[3].split("、"))):
            variants[variant] = cells[0]
    return variants


def variants_used(text: str, variants: dict[str, str]) -> list[str]:
    """The ruled-out variants ``text`` uses in its prose, as 'variant (-> term)'."""
    for pattern in NOT_PROSE:
        text = pattern.sub(" ", text)
    return [
        f"{v} (-> {term})"
        for v, term in variants.items()
        if re.search(rf"(?<![A-Za-z]){re.escape(v)}(?![A-Za-z])", text)
    ]


def test_glossary_variants_are_found_in_planted_text() -> None:
    glossary = (
        f"{GLOSSARY_HEADING} (glossary)\n\n| 中文 | English | 首次出现 | 不用 |\n"
        "|---|---|---|---|\n| 掩码 | mask | 第 4 章 | 遮罩 |\n"
        "| 教师强制 | teacher forcing | 第 4 章 | teacher forcing |\n"
        "| 30 秒速记 | summary | 第 0 章 | 30 秒小结、30 秒总结 |\n| 注意力 | attention | 第 2 章 | |\n"
    )
    variants = glossary_variants(["# 附录", glossary])
    assert variants == {
        "遮罩": "掩码",
        "teacher forcing": "教师强制",
        "30 秒小结": "30 秒速记",
        "30 秒总结": "30 秒速记",
    }
    assert variants_used("加上遮罩以后", variants) == ["遮罩 (-> 掩码)"]
    assert variants_used("在 teacher forcing 下", variants) == ["teacher forcing (-> 教师强制)"]
    assert variants_used("## 30 秒总结", variants) == ["30 秒总结 (-> 30 秒速记)"]
    # an English variant is a word of its own: "tokens" is not "token"
    variants["token"] = "符号"
    assert variants_used("每个 token 的向量；tokens、tokenizer", variants) == ["token (-> 符号)"]
    # the English term glossed in parentheses, and code, are fine
    assert variants_used("教师强制 (teacher forcing)、教师强制（teacher forcing）", variants) == []
    assert variants_used("`遮罩` 与 ```\n遮罩\n```", variants) == []
    with pytest.raises(AssertionError, match="不用"):
        glossary_variants([f"{GLOSSARY_HEADING}\n\n| 中文 | English | 首次出现 |\n|---|---|---|\n"])


def test_glossary_lists_the_variants_the_book_avoids() -> None:
    variants = glossary_variants(reader_text(GLOSSARY))
    for variant in (
        *("遮罩", "词元", "token", "标准答案", "teacher forcing", "padding", "block"),
        *("30 秒小结", "30 秒总结"),
    ):
        assert variant in variants, f"the glossary does not list {variant!r} as a variant"


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_one_term_per_concept(path: Path) -> None:
    variants = glossary_variants(reader_text(GLOSSARY))
    texts = [t for t in reader_text(path) if not t.lstrip().startswith(GLOSSARY_HEADING)]
    used = sorted({u for text in texts for u in variants_used(text, variants)})
    assert not used, f"{path.name} uses variants the glossary rules out: {used}"


LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
SECTION_NUMBER = re.compile(
    r"(论文\s*(?:第\s*)?)?(\d+\.\d+(?:\.\d+)?)(?:\s*[、,，]\s*\d+\.\d+)*\s*节"
)
SLUG_DROPPED = re.compile(r"[^\w\u4e00-\u9fff\- ]")  # myst_parser's default_slugify


def bare_section_references(text: str) -> list[str]:
    """'N.M 节' mentions outside link texts that do not name a section of the paper."""
    text = LINK.sub(" ", text)
    return [m.group(0) for m in SECTION_NUMBER.finditer(text) if not m.group(1)]


def heading_anchor(heading: str) -> str:
    """The anchor MyST gives a heading: lower case, spaces as '-', punctuation dropped."""
    return SLUG_DROPPED.sub("", heading.strip().lower().replace(" ", "-"))


def heading_anchors(markdown: list[str]) -> set[str]:
    headings = [h for text in markdown for h in re.findall(r"^#{1,3} (.+?)\s*$", text, re.M)]
    return {heading_anchor(h) for h in headings}


def broken_anchors(path: Path) -> list[str]:
    """Links '(page#anchor)' or '(#anchor)' of ``path`` whose page has no such heading."""
    broken = []
    for text in reader_text(path):
        for _, target in LINK.findall(CODE.sub(" ", text)):
            page, _, anchor = target.partition("#")
            if not anchor or "://" in page:
                continue
            target_path = path.parent / page if page else path
            if not target_path.exists() or anchor not in heading_anchors(reader_text(target_path)):
                broken.append(target)
    return broken


def test_bare_section_references_are_found_in_planted_text() -> None:
    assert bare_section_references("这一点 4.4 节再谈；见论文 5.3 节和论文第 3.2、3.5 节") == [
        "4.4 节"
    ]
    assert bare_section_references("这是 5.3 节说过的下限；第 3.2、3.5 节") == [
        "5.3 节",
        "3.2、3.5 节",
    ]
    assert bare_section_references("见[整行都被遮住会怎样](#整行都被遮住会怎样)一节") == []
    assert bare_section_references("讲义 p44，第 5 章，0.907") == []


def test_heading_anchors_follow_myst(tmp_path: Path) -> None:
    assert heading_anchor("泄漏实验：去掉掩码会怎样") == "泄漏实验去掉掩码会怎样"
    assert heading_anchor("最优的概率不再是 1") == "最优的概率不再是-1"
    assert heading_anchor("动手训练一个小 Transformer") == "动手训练一个小-transformer"
    page = tmp_path / "a.md"
    page.write_text(
        "## 最优的概率不再是 1\n\n见[上文](#最优的概率不再是-1)、[别处](#没有这一节)、"
        "[b](b.md#x)、[网页](https://example.org/#top)。\n",
        encoding="utf-8",
    )
    assert broken_anchors(page) == ["#没有这一节", "b.md#x"]


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_cross_references_are_links(path: Path) -> None:
    bare = [ref for text in reader_text(path) for ref in bare_section_references(text)]
    assert not bare, (
        f"{path.name}: bare section numbers {bare}; the built book shows none: link the "
        "section by its heading ([标题](05_1_teacher_forcing_loss.ipynb#标题)), or write the paper's as "
        "'论文 5.3 节'"
    )
    broken = broken_anchors(path)
    assert not broken, f"{path.name}: links to headings that do not exist: {broken}"
