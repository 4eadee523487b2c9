"""One symbol per concept in every chapter (the appendix's 记号表).

The prose names a symbol next to the concept it stands for ("序列长度 $n$", "头数 $h$"). Each
such pair must use the book's symbol for that concept, and the letters that the book gives
to another concept must not stand for a sequence length ($N$ is the number of layers, $T$
the target length, never a temperature). Each check is a plain function of text, tested on
planted sentences, then applied to every notebook and page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_prose import CODE, NOTEBOOKS, PAGES, ROOT, reader_text

# concept word -> the symbols the book uses for it (as written inside $...$)
SYMBOLS: dict[str, set[str]] = {
    "序列长度": {"n", "S", "T"},
    "输入长度": {"S", "n"},
    "源序列长度": {"S"},
    "输出长度": {"T", "n"},
    "目标序列长度": {"T"},
    "句子长度": {"n", "S", "T"},
    "批大小": {"B"},
    "头数": {"h"},
    "头维度": {"d_k", "d_v"},
    "层数": {"N"},
    "模型维度": {r"d_{\text{model}}", "d"},
    "词表大小": {"V"},
    "温度": {r"\tau"},
}
# a concept word, an optional English gloss and "为/是/取", then one inline math symbol
NAMED_SYMBOL = re.compile(
    "("
    + "|".join(sorted(SYMBOLS, key=len, reverse=True))
    + r")\s*(?:\([^()\n]{1,40}\)\s*)?(?:为|是|取)?\s*\$([^$=<>]+?)"
    r"(?:\s*[=<>][^$]*)?\$"
)
# "长度为 $x$ 的序列": a length of a sequence (a vector's 长度 is its size or norm, not checked)
SEQUENCE_OF_LENGTH = re.compile(
    r"长度\s*(?:为|是)?\s*\$([A-Za-z])\$\s*的(?:序列|输入|输出|句子|字符串|前缀)"
)
# "$N$ 个向量/位置": N (the number of layers) counting positions, i.e. used as a length
N_POSITIONS = re.compile(r"\$N\$\s*个(?:输入|输出|向量|位置|符号)")
# spellings the book does not use, and N (layers) written as a sequence length
FORBIDDEN = {
    r"d_{model}": re.compile(r"d_\{model\}"),
    r"d_{ff}": re.compile(r"d_\{ff\}"),
    "N^2 / N x N as a length": re.compile(r"(?<![A-Za-z_\\])N\s*\^|N\s*\\times\s*N(?![A-Za-z_])"),
    "N_q / N_k / N_enc": re.compile(r"N_\{?(?:q|k|\\text\{(?:enc|dec)\})"),
    "N x d as a length": re.compile(r"\{N\s*\\times|(?<![A-Za-z_\\])N\s*\\times\s*d"),
}
INLINE_MATH = re.compile(r"(?<!\$)\$(?!\$)([^$\n]+?)\$")


def misnamed_symbols(text: str) -> list[str]:
    """``concept $symbol$`` pairs of ``text`` whose symbol is not the book's for that concept."""
    text = CODE.sub(" ", text)
    found = []
    for concept, symbol in NAMED_SYMBOL.findall(text):
        symbol = symbol.strip()
        if re.fullmatch(r"[A-Za-z]|\\tau|d_\w|d_\{\\text\{\w+\}\}", symbol) is None:
            continue  # an expression or a number ("长度 $2n$"), not a symbol
        if symbol not in SYMBOLS[concept]:
            found.append(f"{concept} ${symbol}$")
    found += ["$N$ 个位置"] * len(N_POSITIONS.findall(text))
    for symbol in SEQUENCE_OF_LENGTH.findall(text):
        if symbol not in SYMBOLS["序列长度"]:
            found.append(f"长度 ${symbol}$ 的序列")
    return found


def forbidden_spellings(text: str) -> list[str]:
    """Names of the FORBIDDEN patterns that occur inside the inline or display math of ``text``."""
    text = CODE.sub(" ", text)
    math = " ".join(m.group(1) for m in INLINE_MATH.finditer(text))
    math += " ".join(re.findall(r"\$\$(.*?)\$\$", text, re.S))
    return [name for name, pattern in FORBIDDEN.items() if pattern.search(math)]


def test_misnamed_symbols_are_found_in_planted_text() -> None:
    assert misnamed_symbols("编码器读入序列长度 $N$") == ["序列长度 $N$"]
    assert misnamed_symbols("带温度 (temperature) $T$ 的 softmax") == ["温度 $T$"]
    assert misnamed_symbols("温度 $T$ 越低，分布越尖") == ["温度 $T$"]
    assert misnamed_symbols("头数为 $H$、头维度 $D$") == ["头数 $H$", "头维度 $D$"]
    assert misnamed_symbols("层数 $L$ 按 $1/\\sqrt{L}$ 缩小") == ["层数 $L$"]
    # the book's symbols, expressions and code pass
    assert misnamed_symbols("序列长度 $n$、批大小 $B$、头数 $h$、头维度 $d_k$、层数 $N$") == []
    assert misnamed_symbols("温度 $\\tau = 0.5$ 时") == []
    assert misnamed_symbols("编码器把 $N$ 个输入变成 $N$ 个输出") == ["$N$ 个位置"] * 2
    assert misnamed_symbols("词表有 $V$ 个符号，前 $t$ 个位置") == []
    assert misnamed_symbols("长度为 $L$ 的序列有 $V^L$ 种") == ["长度 $L$ 的序列"]
    assert misnamed_symbols("长度为 $2n$ 的序列；`长度 $N$` 在代码里") == []
    assert misnamed_symbols("4 个长度为 $d$ 的偏置；查询长度 $r$ 调大") == []
    assert misnamed_symbols("模型维度 $d_{\\text{model}} = 512$，输出长度 $T$") == []


def test_forbidden_spellings_are_found_in_planted_text() -> None:
    assert forbidden_spellings("每个头一张 $N \\times N$ 的表") == ["N^2 / N x N as a length"]
    assert forbidden_spellings("朴素实现要 $4N^2D$ 次运算") == ["N^2 / N x N as a length"]
    assert forbidden_spellings("$N_q = N_k$") == ["N_q / N_k / N_enc"]
    assert forbidden_spellings("$Q \\in \\mathbb{R}^{N \\times d_k}$") == ["N x d as a length"]
    assert forbidden_spellings("$d_{ff} = 4 d_{model}$") == [r"d_{model}", r"d_{ff}"]
    # the book's spellings, the matmul's local K x N, and code pass
    assert (
        forbidden_spellings(
            "$n \\times n$、$d_{\\text{ff}}$、$K \\times N$、$\\lceil N/B_N \\rceil$"
        )
        == []
    )
    assert forbidden_spellings("`x.view(N, N)` 与 $n^2$") == []


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_one_symbol_per_concept(path: Path) -> None:
    text = "\n".join(reader_text(path))
    misnamed, forbidden = misnamed_symbols(text), forbidden_spellings(text)
    assert not misnamed, f"{path.name}: these symbols differ from the appendix's 记号表: {misnamed}"
    assert not forbidden, f"{path.name}: spellings the book does not use: {forbidden}"


def test_notation_table_lists_every_symbol() -> None:
    appendix = "\n".join(reader_text(ROOT / "notebooks" / "08_3_appendix_reference.ipynb"))
    table = appendix.split("## 记号表", 1)
    assert len(table) == 2, "the appendix has no section '## 记号表'"
    table = table[1].split("\n## ", 1)[0]
    for concept, symbols in SYMBOLS.items():
        if concept in {"句子长度", "输入长度", "输出长度", "源序列长度", "目标序列长度"}:
            continue  # variants of the sequence length row
        assert any(f"${s}$" in table for s in symbols), f"记号表 lacks {concept} {symbols}"
