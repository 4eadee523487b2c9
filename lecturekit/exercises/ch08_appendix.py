"""Appendix exercises: one BPE merge step and the maximum path length of RNN/CNN/attention."""

from __future__ import annotations

from collections import Counter

from lecturekit.exercises import Case, Exercise, register

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


def _pair_unweighted(word_counts: dict[str, int]) -> tuple[str, str]:
    pairs: Counter[tuple[str, str]] = Counter()
    for word in word_counts:
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += 1  # ignores how often the word occurs
    return min(pairs, key=lambda p: (-pairs[p], p))


def _pair_tie_last(word_counts: dict[str, int]) -> tuple[str, str]:
    pairs: Counter[tuple[str, str]] = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += count
    return max(pairs, key=lambda p: (pairs[p], p))


def _pair_most_frequent_characters(word_counts: dict[str, int]) -> tuple[str, str]:
    chars: Counter[str] = Counter()
    for word, count in word_counts.items():
        for ch in word:
            chars[ch] += count
    (a, _), (b, _) = sorted(chars.items(), key=lambda item: (-item[1], item[0]))[:2]
    return (a, b)


def _pair_cases() -> list[Case]:
    return [
        Case(args=({"low": 5, "lower": 2, "newest": 6, "widest": 3},), label="Sennrich 的语料"),
        Case(args=({"ab": 1, "cd": 10, "abab": 3},), label="词频决定一切"),
        Case(args=({"xy": 2, "ab": 2},), label="并列时取字典序在前的对"),
        Case(args=({"aaa": 1, "bc": 1},), label="重叠的 aa 数两次"),
        Case(args=({"机器学习": 3, "学习": 2, "机器": 1},), label="中文"),
    ]


register(
    Exercise(
        id="appendix.most_frequent_pair",
        chapter=8,
        title="BPE 下一次合并哪一对",
        prompt=(
            "实现 most_frequent_pair(word_counts)：word_counts 是 {词: 出现次数} 的字典，每个词"
            "按字符拆开。统计所有相邻字符对 (a, b) 的出现次数 (每个词里的每一对都要乘上这个词"
            "的出现次数)，返回次数最多的那一对 (一个二元组)。次数并列时返回排序最小的那一对。"
        ),
        hint=(
            "对每个词 w 和它的次数 c：for pair in zip(w, w[1:]): counts[pair] += c。"
            "并列取最小：min(counts, key=lambda p: (-counts[p], p))。"
        ),
        kind="function",
        cases=_pair_cases,
        reference=reference_most_frequent_pair,
        wrong_answers=[_pair_unweighted, _pair_tie_last, _pair_most_frequent_characters],
        compare=lambda expected, got: isinstance(got, tuple) and tuple(got) == expected,
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


def _path_n_over_k(layer: str, n: int, k: int) -> int:
    if layer == "conv":
        return n // k
    return reference_max_path_length(layer, n, k)


def _path_rnn_n(layer: str, n: int, k: int) -> int:
    if layer == "rnn":
        return n
    return reference_max_path_length(layer, n, k)


def _path_dilated_floor(layer: str, n: int, k: int) -> int:
    if layer == "dilated":
        layers = 0
        while k ** (layers + 1) <= n:
            layers += 1
        return layers
    return reference_max_path_length(layer, n, k)


def _path_cases() -> list[Case]:
    return [
        Case(args=("rnn", 100, 3), label="RNN，n = 100"),
        Case(args=("attention", 4096, 3), label="自注意力，n = 4096"),
        Case(args=("conv", 9, 3), label="连续卷积，n = 9，k = 3"),
        Case(args=("conv", 100, 5), label="连续卷积，n = 100，k = 5"),
        Case(args=("dilated", 4096, 3), label="空洞卷积，n = 4096，k = 3"),
        Case(args=("dilated", 27, 3), label="空洞卷积，n = 27 恰好是 3 的幂"),
    ]


register(
    Exercise(
        id="appendix.max_path_length",
        chapter=8,
        title="最长路径有多长",
        prompt=(
            "实现 max_path_length(layer, n, k)：返回第 1 个位置的信息至少经过多少层 (RNN 为多少"
            "步) 才能影响第 n 个位置。layer 取 'rnn' (每步右移 1)、'conv' (因果卷积，宽度 k，"
            "每层往右多看 k-1 个位置)、'dilated' (第 L 层的空洞为 k**L，L 从 0 开始，L 层后能"
            "看到 k**L - 1 个位置之外) 或 'attention' (一层看到所有位置)。n >= 2。"
        ),
        hint=(
            "RNN：n-1。连续卷积：向上取整 (n-1)/(k-1)。空洞卷积：最小的 L 使 k**L >= n。"
            "自注意力：1。"
        ),
        kind="function",
        cases=_path_cases,
        reference=reference_max_path_length,
        wrong_answers=[_path_n_over_k, _path_rnn_n, _path_dilated_floor],
        compare=lambda expected, got: (
            isinstance(got, int) and not isinstance(got, bool) and got == expected
        ),
    )
)
