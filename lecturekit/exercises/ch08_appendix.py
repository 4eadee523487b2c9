"""Appendix exercises: one BPE merge step and the maximum path length of RNN/CNN/attention."""

from __future__ import annotations

import random
from collections import Counter

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Integer, Items, Text

# --------------------------------------------------------------------------------------
# BPE: the pair to merge next
# --------------------------------------------------------------------------------------


def reference_most_frequent_pair(word_counts: dict[str, int]) -> tuple[str, str]:
    """Most frequent adjacent character pair, counts weighted by word frequency.

    Ties go to the pair that sorts first (as ``lecturekit.data.bpe.BPE.train`` does).
    """
    pairs: Counter[tuple[str, str]] = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += count
    return min(pairs, key=lambda p: (-pairs[p], p))


def _pair_cases() -> list[Case]:
    cases = [
        Case(args=({"low": 5, "lower": 2, "newest": 6, "widest": 3},), label="Sennrich 的语料"),
        Case(args=({"ab": 1, "cd": 10, "abab": 3},), label="词频决定一切"),
        Case(args=({"xy": 2, "ab": 2},), label="并列时取排序最小的对"),
        Case(args=({"aaa": 2, "bc": 3},), label="重叠的 aa 数两次"),
        Case(args=({"机器学习": 3, "学习": 2, "机器": 1},), label="中文"),
        Case(args=({"a": 9, "b": 4, "ba": 1},), label="单字符的词没有相邻对"),
    ]
    rng = random.Random(19)
    for _ in range(4):
        words = {
            "".join(rng.choice("abcd") for _ in range(rng.randint(1, 6))): rng.randint(1, 5)
            for _ in range(rng.randint(2, 6))
        }
        if max(map(len, words)) < 2:
            words["ab"] = 1
        cases.append(Case(args=(words,), label=f"随机语料 {words}"))
    return cases


register(
    Exercise(
        id="appendix.most_frequent_pair",
        chapter=8,
        title="BPE 下一次合并哪一对",
        prompt=(
            "实现 most_frequent_pair(word_counts)：word_counts 是 {词: 出现次数} 的字典，每个词"
            "按字符拆开。统计所有相邻字符对 (a, b) 的出现次数（每个词里的每一对都要乘上这个词"
            "的出现次数），返回次数最多的那一对。\n"
            "同一个词里重叠的对都要数（'aaa' 里有两个 ('a', 'a')）；只有一个字符的词没有相邻对，"
            "但至少有一个词长度 >= 2。次数并列时返回排序最小的那一对（按 Python 的元组比较）。"
        ),
        hint=(
            "数的是相邻的“对”，不是单个字符；一个词每出现一次，它里面的每一对都跟着出现一次。"
            "并列时按题目的规则挑，不要依赖字典或计数器的遍历顺序。"
        ),
        explanation=(
            "对每个词 w 和它的次数 c：for pair in zip(w, w[1:]): counts[pair] += c。"
            "并列取最小：min(counts, key=lambda p: (-counts[p], p))。"
        ),
        kind="function",
        returns=Items((Text(), Text()), text="一个二元组 (a, b)，a 和 b 各是一个字符 (str)"),
        cases=_pair_cases,
        reference=reference_most_frequent_pair,
    )
)


# --------------------------------------------------------------------------------------
# maximum path length
# --------------------------------------------------------------------------------------


def reference_max_path_length(layer: str, n: int, k: int) -> int:
    """Layers (RNN: steps) before position 0 can influence position ``n - 1``.

    ``"rnn"``: one step per position, ``n - 1``. ``"conv"``: a causal kernel of width ``k``
    reaches ``k - 1`` positions further per layer, ``ceil((n - 1) / (k - 1))``.
    ``"dilated"``: dilation ``k ** layer``, reach ``k ** L - 1`` after ``L`` layers, so the
    smallest ``L`` with ``k ** L >= n``. ``"attention"``: one layer.
    """
    if n == 1:
        return 0
    if layer == "rnn":
        return n - 1
    if layer == "conv":
        return -(-(n - 1) // (k - 1))
    if layer == "dilated":
        layers = 0
        while k**layers < n:
            layers += 1
        return layers
    if layer == "attention":
        return 1
    raise ValueError(f"layer must be 'rnn', 'conv', 'dilated' or 'attention', got {layer!r}")


def _path_cases() -> list[Case]:
    settings = [
        ("rnn", 100, 3),
        ("rnn", 2, 2),
        ("attention", 4096, 3),
        ("conv", 9, 3),
        ("conv", 10, 3),
        ("conv", 100, 5),
        ("conv", 2, 2),
        ("dilated", 4096, 3),
        ("dilated", 27, 3),
        ("dilated", 28, 3),
        ("dilated", 125, 5),
        ("dilated", 126, 5),
        ("dilated", 243, 3),
        ("dilated", 244, 3),
        ("dilated", 2, 2),
    ]
    rng = random.Random(20)
    drawn = []
    for layer in ("rnn", "conv", "conv", "dilated", "dilated", "attention"):
        k = rng.randint(2, 7)
        n = rng.choice([rng.randint(2, 3000), k ** rng.randint(1, 5) + rng.choice([-1, 0, 1])])
        drawn.append((layer, max(n, 2), k))
    return [
        Case(args=s, label=f"{prefix}{s[0]}，n = {s[1]}，k = {s[2]}")
        for prefix, group in (("", settings), ("随机：", drawn))
        for s in group
    ]


register(
    Exercise(
        id="appendix.max_path_length",
        chapter=8,
        title="最长路径有多长",
        prompt=(
            "实现 max_path_length(layer, n, k)：返回第 1 个位置的信息至少经过多少层（RNN 为多少"
            "步）才能影响第 n 个位置。layer 取 'rnn'（每步右移 1）、'conv'（因果卷积，宽度 k，"
            "每层往右多看 k-1 个位置）、'dilated'（第 l 层的空洞为 k**l，l 从 0 数起，叠 N 层后"
            "能看到 k**N - 1 个位置之外）或 'attention'（一层看到所有位置）。\n"
            "n >= 2，k >= 2（'rnn' 和 'attention' 用不到 k）。测试包括恰好够到第 n 个位置的边界，"
            "例如 n 恰好是 k 的幂、或比它多 1。"
        ),
        hint=(
            "想一想每多一层（或一步），信息最多能再往右传多远；要的是够到第 n 个位置的最少层数，"
            "所以不够就得再加一层。浮点数的对数在 k 的幂附近可能差一点点，整数运算更可靠。"
        ),
        explanation=(
            "RNN：n - 1。卷积：N 层后覆盖 1 + N(k-1) 个位置，N = ceil((n-1)/(k-1))，"
            "整数写法 -(-(n - 1) // (k - 1))。空洞卷积：N 层后覆盖 k**N 个位置，"
            "从 N = 0 开始加一，直到 k**N >= n。自注意力：1。"
        ),
        kind="function",
        returns=Integer(),
        cases=_path_cases,
        reference=reference_max_path_length,
    )
)
