"""Chapter 7 exercises (capstone, pinyin -> characters): the character error rate, the unigram
baseline and top-k accuracy of a candidate list."""

from __future__ import annotations

from lecturekit.exercises import Case, Exercise, register

# --------------------------------------------------------------------------------------
# Character error rate
# --------------------------------------------------------------------------------------


def reference_char_error_rate(prediction: str, reference: str) -> float:
    """Edit distance (insertions, deletions, substitutions) divided by ``len(reference)``."""
    previous = list(range(len(reference) + 1))
    for i, p in enumerate(prediction, start=1):
        current = [i]
        for j, r in enumerate(reference, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (p != r)))
        previous = current
    return previous[-1] / len(reference)


def _cer_position_by_position(prediction: str, reference: str) -> float:
    wrong = sum(a != b for a, b in zip(prediction, reference, strict=False))
    return (wrong + abs(len(prediction) - len(reference))) / len(reference)


def _cer_over_prediction_length(prediction: str, reference: str) -> float:
    return (
        reference_char_error_rate(prediction, reference) * len(reference) / max(len(prediction), 1)
    )


def _cer_substitutions_only(prediction: str, reference: str) -> float:
    return sum(a != b for a, b in zip(prediction, reference, strict=False)) / len(reference)


def _cer_cases() -> list[Case]:
    return [
        Case(args=("机器学习", "机器学习"), label="完全正确"),
        Case(args=("机器学系", "机器学习"), label="替换一个字"),
        Case(args=("机器学", "机器学习"), label="少写一个字"),
        Case(args=("器学习", "机器学习"), label="漏掉第一个字：后面的字并没有写错"),
        Case(args=("", "实施"), label="什么也没写"),
        Case(args=("是是实施", "实施"), label="多写两个字 (CER 可以大于 1)"),
    ]


register(
    Exercise(
        id="pinyin.char_error_rate",
        chapter=7,
        title="字错误率 (CER)",
        prompt=(
            "实现 char_error_rate(prediction, reference)：两个字符串，返回编辑距离除以 "
            "len(reference)。编辑距离是把 prediction 变成 reference 最少需要的插入、删除、"
            "替换次数 (每次一个字)。"
        ),
        hint=(
            "动态规划：d[i][j] 是 prediction 的前 i 个字变成 reference 的前 j 个字的最少次数，"
            "d[i][j] = min(d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + (两个字不同))；"
            "d[i][0] = i，d[0][j] = j。逐位比较不行：漏掉一个字会让后面每一位都对不上。"
        ),
        kind="function",
        cases=_cer_cases,
        reference=reference_char_error_rate,
        wrong_answers=[
            _cer_position_by_position,
            _cer_over_prediction_length,
            _cer_substitutions_only,
        ],
    )
)

# --------------------------------------------------------------------------------------
# The unigram baseline
# --------------------------------------------------------------------------------------


def reference_unigram_pick(counts: dict[str, dict[str, int]], pinyin: str) -> str:
    """For each syllable the character with the largest count (ties: the smaller character)."""
    return "".join(min(counts[s], key=lambda c: (-counts[s][c], c)) for s in pinyin.split())


def _unigram_first_listed(counts: dict[str, dict[str, int]], pinyin: str) -> str:
    return "".join(next(iter(counts[s])) for s in pinyin.split())


def _unigram_least_frequent(counts: dict[str, dict[str, int]], pinyin: str) -> str:
    return "".join(min(counts[s], key=lambda c: (counts[s][c], c)) for s in pinyin.split())


def _unigram_most_frequent_overall(counts: dict[str, dict[str, int]], pinyin: str) -> str:
    # ignores the syllable: the most frequent character of all, for every position
    totals: dict[str, int] = {}
    for chars in counts.values():
        for c, n in chars.items():
            totals[c] = totals.get(c, 0) + n
    best = min(totals, key=lambda c: (-totals[c], c))
    return best * len(pinyin.split())


def _unigram_cases() -> list[Case]:
    counts = {
        "shi": {"时": 50, "是": 90, "事": 40, "实": 30},
        "ji": {"机": 20, "及": 25, "几": 18},
        "qi": {"起": 30, "其": 35, "器": 10},
        "xue": {"学": 40, "雪": 5},
        "xi": {"系": 12, "西": 15, "习": 9},
    }
    tie = {"yi": {"意": 7, "以": 7}, "si": {"四": 3, "思": 1}}
    return [
        Case(args=(counts, "shi"), label="一个音节"),
        Case(args=(counts, "shi shi"), label="两个音节各自选"),
        Case(args=(counts, "ji qi xue xi"), label="机器学习"),
        Case(args=(tie, "yi si"), label="次数并列时取较小的字"),
    ]


register(
    Exercise(
        id="pinyin.unigram_pick",
        chapter=7,
        title="一元基线：每个音节选最常见的字",
        prompt=(
            "实现 unigram_pick(counts, pinyin)：counts 是 {音节: {字: 次数}}，pinyin 是空格分开的"
            "音节串，如 'ji qi xue xi'。对每个音节选次数最多的字 (次数并列时选较小的那个字，"
            "即 min 按字符比较)，连起来返回一个字符串。"
        ),
        hint=(
            "对每个音节 s：min(counts[s], key=lambda c: (-counts[s][c], c))，最后 ''.join(...)。"
            "注意每个音节只看它自己的字表，不看前后的音节：这正是这个基线的弱点。"
        ),
        kind="function",
        cases=_unigram_cases,
        reference=reference_unigram_pick,
        wrong_answers=[
            _unigram_first_listed,
            _unigram_least_frequent,
            _unigram_most_frequent_overall,
        ],
    )
)

# --------------------------------------------------------------------------------------
# Top-k accuracy of candidate lists
# --------------------------------------------------------------------------------------


def reference_top_k_accuracy(candidates: list[list[str]], references: list[str], k: int) -> float:
    """Fraction of inputs whose reference is among their first ``k`` candidates."""
    hits = sum(ref in cands[:k] for cands, ref in zip(candidates, references, strict=True))
    return hits / len(references)


def _top_k_whole_list(candidates: list[list[str]], references: list[str], k: int) -> float:
    return sum(r in c for c, r in zip(candidates, references, strict=True)) / len(references)


def _top_k_only_kth(candidates: list[list[str]], references: list[str], k: int) -> float:
    hits = sum(len(c) >= k and c[k - 1] == r for c, r in zip(candidates, references, strict=True))
    return hits / len(references)


def _top_k_first_only(candidates: list[list[str]], references: list[str], k: int) -> float:
    return sum(bool(c) and c[0] == r for c, r in zip(candidates, references, strict=True)) / len(
        references
    )


def _top_k_cases() -> list[Case]:
    bar = [["实施", "事实", "逝世", "时时", "实事"], ["机器", "及其"], [], ["自己", "子集"]]
    refs = ["事实", "机器", "学习", "子集"]
    return [
        Case(args=(bar, refs, 1), label="k = 1 就是 top-1"),
        Case(args=(bar, refs, 2), label="k = 2"),
        Case(args=(bar, refs, 5), label="k = 5，候选不足 5 个的也算"),
        Case(args=([["实施", "事实", "实时"]], ["实时"], 2), label="排在第 3 的不算 top-2"),
    ]


register(
    Exercise(
        id="pinyin.top_k_accuracy",
        chapter=7,
        title="候选栏的 top-k 准确率",
        prompt=(
            "实现 top_k_accuracy(candidates, references, k)：candidates[i] 是第 i 个输入的候选"
            "列表 (最好的在前，可能少于 k 个，也可能为空)，references[i] 是正确的词。返回正确"
            "词出现在前 k 个候选里的输入所占的比例 (一个 float)。"
        ),
        hint="对每个输入检查 ref in cands[:k]，数出命中的个数，再除以输入的个数。",
        kind="function",
        cases=_top_k_cases,
        reference=reference_top_k_accuracy,
        wrong_answers=[_top_k_whole_list, _top_k_only_kth, _top_k_first_only],
    )
)
