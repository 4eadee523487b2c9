"""Prose and outputs stay together; one typography for quotes and brackets.

1. Every number the prose of a chapter states (with a decimal point, or of three or more
   digits) is printed by an output of the same notebook, or stands in a sentence that cites
   its source ("引自 ..."). Slide pages (p12), years, section numbers, exercise numbers and
   the constants of formulas are not measurements and are not checked.
2. Quotes and brackets: Chinese quotation marks “…” in prose (an ASCII ``"`` belongs to
   code and math only); a parenthesis around Chinese text is full width （…）, one around
   an English gloss or a formula is half width (self-attention).

Each check is a plain function of text, tested on planted examples, then applied to the
committed notebooks and pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from test_prose import NOTEBOOKS, PAGES, reader_text


@dataclass(frozen=True)
class Chapter:
    """The reader-facing text of one notebook: its Markdown cells, its printed outputs."""

    name: str
    markdown: tuple[str, ...]
    outputs: str


def read_chapter(path: Path) -> Chapter:
    markdown = tuple(reader_text(path))
    if path.suffix == ".md":
        return Chapter(path.name, markdown, "")
    notebook = nbformat.read(path, as_version=4)
    printed: list[str] = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                printed.append(output["text"])
            for mime, value in output.get("data", {}).items():
                if mime in {"text/plain", "text/markdown", "text/latex", "text/html"}:
                    printed.append(value if isinstance(value, str) else "".join(value))
    return Chapter(path.name, markdown, "\n".join(printed))


# ---------------------------------------------------------------------------------------
# 1. Every number in prose is printed by the chapter (or cited)
# ---------------------------------------------------------------------------------------

# a number with a decimal point, or an integer of three or more digits (thousands commas ok)
PROSE_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d{3,})(?![\w])")
OUTPUT_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
NOT_MEASUREMENTS = [
    re.compile(r"\$\$.*?\$\$", re.S),  # display math: equations and their constants
    re.compile(r"```.*?```", re.S),  # fenced code and directive headers
    re.compile(r"`[^`\n]*`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<[^>\n]+>"),  # HTML tags
    re.compile(r"arXiv:\s*\d+\.\d+", re.I),  # paper identifiers
    re.compile(r"\bp\d+(?:\s*[–-]\s*p?\d+)?"),  # slide pages
    re.compile(r"\d+(?:\.\d+)*(?:\s*[、,，]\s*\d+(?:\.\d+)*)*\s*节"),  # section numbers
    re.compile(r"(?m)^#+\s+\d+(?:\.\d+)+"),  # a section page's title: # 6.2 曝光偏差
    re.compile(r"(?:练习|自测|解答|表|图)\s*[A-Z\d]+(?:\.\d+)+"),  # exercise/table numbers
    re.compile(r"(?<!\d)(?:19|20)\d\d(?:\s*年)?(?!\d)"),  # years
]
SENTENCE = re.compile(r"[^。！？\n]+")
CITATION = "引自"


def _inline_math_integers(text: str) -> str:
    # integers inside inline math are constants of a formula ($10000^{2i/d}$); decimals
    # inside inline math ($z_3 = [0.670, 0.670]$) are measurements and stay checked
    def strip(match: re.Match[str]) -> str:
        return re.sub(r"(?<![\d.])\d+(?![\d.])", " ", match.group(0))

    return re.sub(r"\$[^$\n]+\$", strip, text)


def prose_numbers(text: str) -> list[str]:
    """The numbers ``text`` states as facts, outside sentences that cite a source."""
    for pattern in NOT_MEASUREMENTS:
        text = pattern.sub(" ", text)
    text = _inline_math_integers(text)
    found: list[str] = []
    for sentence in SENTENCE.findall(text):
        if CITATION not in sentence:
            found += PROSE_NUMBER.findall(sentence)
    return found


def printed_values(outputs: str) -> list[float]:
    return [float(token.replace(",", "")) for token in OUTPUT_NUMBER.findall(outputs)]


def is_printed(number: str, printed: Iterable[float]) -> bool:
    """True if some printed value, rounded to the decimals ``number`` shows, equals it."""
    plain = number.replace(",", "")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    value = float(plain)
    tolerance = 0.5 * 10**-decimals * 1e-6  # float round-off of the rounding itself
    return any(abs(round(p, decimals) - value) <= tolerance for p in printed)


def unprinted_numbers(chapter: Chapter) -> list[str]:
    printed = printed_values(chapter.outputs)
    return [
        number
        for text in chapter.markdown
        for number in prose_numbers(text)
        if not is_printed(number, printed)
    ]


def test_unprinted_numbers_are_found_in_a_planted_chapter() -> None:
    chapter = Chapter(
        "planted.ipynb",
        (
            "训练损失从约 1.07 降到约 0.99；100000 和 100001 各写成 6 个字。",
            "论文 5.3 节的调度见 p44–p46；2017 年；$$PE = \\sin(pos / 10000^{2i/d})$$",
            "$z_3 = [0.670, 0.670]$，峰值 6.988e-04。引自 Vaswani 等 (2017) 表 3：BLEU 27.3。",
            "### 自测 4.2\n\n<details><summary>解答 4.2</summary>见 arXiv:2204.05236。</details>",
            "词表有 1,000 个符号，实测 0.25 秒。",
            "# 6.2 曝光偏差\n\n正文里的 6.2 是测量。",
        ),
        outputs="loss 1.0681 -> 0.9876\n十万 100000 十万零一\nz = [0.6701 0.6699]\n1000",
    )
    assert unprinted_numbers(chapter) == ["100001", "0.25", "6.2"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_number_in_prose_is_printed_by_the_chapter(path: Path) -> None:
    missing = unprinted_numbers(read_chapter(path))
    assert not missing, (
        f"{path.name}: the prose states {missing}, which no output of the notebook prints "
        f"(print it in a cell, or cite the source in the same sentence with '{CITATION} ...')"
    )


# ---------------------------------------------------------------------------------------
# 2. Quotes and brackets
# ---------------------------------------------------------------------------------------

NOT_PROSE = re.compile(
    r"```.*?```"  # fenced code and directives
    r"|\$\$.*?\$\$|\$[^$\n]+\$"  # math
    r"|`[^`\n]*`"  # inline code
    r"|\]\([^)\s]*\)"  # link targets
    r"|<[^>\n]+>"  # HTML tags (with their attribute quotes)
    r"|^\s*:[\w-]+:.*$",  # directive options (:width: 80%)
    re.S | re.M,
)
CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef“”‘’]")
HALF_WIDTH_AROUND_CHINESE = re.compile(r"\(([^()（）\n]*)\)")
FULL_WIDTH_AROUND_ENGLISH = re.compile(r"（([^()（）\n]*)）")


def prose_only(text: str) -> str:
    """``text`` with code, math, link targets, HTML tags and directive options blanked."""
    return NOT_PROSE.sub(" ", text)


def typography_problems(text: str) -> list[str]:
    """ASCII double quotes, and brackets whose width does not match what they enclose."""
    prose = prose_only(text)
    problems = [
        f"ASCII quote in {line.strip()[:40]!r}" for line in prose.splitlines() if '"' in line
    ]
    problems += [
        f"({m.group(1)}) -> （{m.group(1)}）"
        for m in HALF_WIDTH_AROUND_CHINESE.finditer(prose)
        if CJK.search(m.group(1))
    ]
    problems += [
        f"（{m.group(1)}） -> ({m.group(1)})"
        for m in FULL_WIDTH_AROUND_ENGLISH.finditer(prose)
        if m.group(1).strip() and not CJK.search(m.group(1))
    ]
    return problems


def test_typography_problems_are_found_in_planted_text() -> None:
    assert typography_problems('所谓"曝光偏差"是') == ["ASCII quote in '所谓\"曝光偏差\"是'"]
    assert typography_problems("自注意力 (self-attention) 是“注意力”的一种（见下文）。") == []
    assert typography_problems("掩码 (见第 4 章)") == ["(见第 4 章) -> （见第 4 章）"]
    assert typography_problems("掩码（mask）") == ["（mask） -> (mask)"]
    # code, math, link targets, HTML attributes and directive options are not prose
    fine = (
        '`print("a")` 与 $f("x")$ 和 [第 4 章](04_decoder.ipynb#(a)) '
        '<img alt="图"> ```python\nx = "中文"\n```\n:alt: "x"'
    )
    assert typography_problems(fine) == []


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_quotes_and_brackets_follow_one_typography(path: Path) -> None:
    problems = [p for text in read_chapter(path).markdown for p in typography_problems(text)]
    assert not problems, f"{path.name}: {len(problems)} typography problems: {problems[:8]}"
