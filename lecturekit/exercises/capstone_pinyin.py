"""Capstone exercises (pinyin -> characters): the character error rate, the unigram baseline
and the top-k accuracy of a candidate bar. Registered with ``chapter=CAPSTONE`` ("C")."""

from __future__ import annotations

import random

from lecturekit.exercises import CAPSTONE, Case, Exercise, register
from lecturekit.exercises.specs import Real, Text

# --------------------------------------------------------------------------------------
# Character error rate
# --------------------------------------------------------------------------------------


def reference_char_error_rate(prediction: str, reference: str) -> float:
    """Edit distance (insertions, deletions, substitutions) divided by ``len(reference)``."""
    previous = list(range(len(reference) + 1))  # d[0][j] = j
    for i, p in enumerate(prediction, start=1):
        current = [i]  # d[i][0] = i
        for j, r in enumerate(reference, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (p != r)))
        previous = current
    return previous[-1] / len(reference)


def _cer_cases() -> list[Case]:
    cases = [
        Case(args=("机器学习", "机器学习"), label="完全正确"),
        Case(args=("机器学系", "机器学习"), label="替换一个字"),
        Case(args=("机器学", "机器学习"), label="少写一个字"),
        Case(args=("器学习", "机器学习"), label="漏掉第一个字：后面的字并没有写错"),
        Case(args=("", "实施"), label="什么也没写"),
        Case(args=("是是是实施", "实施"), label="多写三个字（CER 可以大于 1）"),
        Case(args=("施实", "实施"), label="两个字写反了"),
    ]
    rng = random.Random(21)
    for _ in range(4):
        prediction = "".join(rng.choice("机器学习") for _ in range(rng.randint(0, 6)))
        reference = "".join(rng.choice("机器学习") for _ in range(rng.randint(1, 6)))
        cases.append(Case(args=(prediction, reference), label="随机的两串字"))
    return cases


register(
    Exercise(
        id="pinyin.char_error_rate",
        chapter=CAPSTONE,
        title="字错误率 (CER)",
        prompt=(
            "实现 char_error_rate(prediction, reference)：两个字符串，reference 不为空；返回编辑"
            "距离除以 len(reference)。编辑距离是把 prediction 变成 reference 最少需要的插入、"
            "删除、替换次数（每次一个字）。prediction 可以为空，也可以比 reference 长（这时结果"
            "可以大于 1）。"
        ),
        hint=(
            "逐位比较不行：漏掉一个字会让后面每一位都对不上。想一想“前 i 个字变成前 j 个字"
            "最少要几步”能不能由更短的前缀算出来。"
        ),
        explanation=(
            "动态规划：d[i][j] 是 prediction 的前 i 个字变成 reference 的前 j 个字的最少次数，"
            "d[i][0] = i，d[0][j] = j，d[i][j] = min(d[i-1][j] + 1, d[i][j-1] + 1, "
            "d[i-1][j-1] + c)，其中 c 在第 i 个字与第 j 个字不同时为 1、相同时为 0；"
            "答案是 d[m][n] / n。只保留上一行即可。"
        ),
        kind="function",
        returns=Real(),
        cases=_cer_cases,
        reference=reference_char_error_rate,
    )
)

# --------------------------------------------------------------------------------------
# The unigram baseline
# --------------------------------------------------------------------------------------


def reference_unigram_pick(counts: dict[str, dict[str, int]], pinyin: str) -> str:
    """For each syllable the character with the largest count (ties: the smaller character)."""
    return "".join(min(counts[s], key=lambda c: (-counts[s][c], c)) for s in pinyin.split())


def _unigram_cases() -> list[Case]:
    counts = {
        "shi": {"时": 50, "是": 90, "事": 40, "实": 30},
        "ji": {"机": 20, "及": 25, "几": 18},
        "qi": {"起": 30, "其": 35, "器": 10},
        "xue": {"学": 40, "雪": 5},
        "xi": {"系": 12, "西": 15, "习": 9},
    }
    tie = {"yi": {"意": 7, "以": 7}, "si": {"四": 3, "思": 1}}
    cases = [
        Case(args=(counts, "shi"), label="一个音节"),
        Case(args=(counts, "shi shi"), label="两个音节各自选"),
        Case(args=(counts, "ji qi xue xi"), label="机器学习"),
        Case(args=(tie, "yi si"), label="次数并列时取较小的字"),
    ]
    rng = random.Random(22)
    for _ in range(3):
        table = {
            s: {c: rng.randint(1, 4) for c in rng.sample(chars, rng.randint(1, len(chars)))}
            for s, chars in (("shi", "是时事实市"), ("yi", "一以已意"), ("ji", "机几及记"))
        }  # counts from 1 to 4: ties are common
        pinyin = " ".join(rng.choice(list(table)) for _ in range(rng.randint(1, 4)))
        cases.append(Case(args=(table, pinyin), label=f"随机的次数表，输入 {pinyin!r}"))
    return cases


register(
    Exercise(
        id="pinyin.unigram_pick",
        chapter=CAPSTONE,
        title="一元基线：每个音节选最常见的字",
        prompt=(
            "实现 unigram_pick(counts, pinyin)：counts 是 {音节: {字: 次数}}，pinyin 是空格分开的"
            "音节串，如 'ji qi xue xi'。对每个音节选次数最多的字（次数并列时选较小的那个字，"
            "即按 Python 的字符串比较取 min），连起来返回一个字符串。"
        ),
        hint=(
            "每个音节只看它自己的字表，不看前后的音节。次数最多、并列时字最小：一个排序键"
            "就能同时表达这两条。"
        ),
        explanation=(
            "对每个音节 s 取 min(counts[s], key=lambda c: (-counts[s][c], c))，最后 "
            "''.join(...)。负号让次数大的排在前面，第二个键在并列时取较小的字。"
        ),
        kind="function",
        returns=Text(),
        cases=_unigram_cases,
        reference=reference_unigram_pick,
    )
)

# --------------------------------------------------------------------------------------
# Top-k accuracy of candidate lists
# --------------------------------------------------------------------------------------


def reference_top_k_accuracy(candidates: list[list[str]], references: list[str], k: int) -> float:
    """Fraction of inputs whose reference is among their first ``k`` candidates."""
    hits = sum(ref in cands[:k] for cands, ref in zip(candidates, references, strict=True))
    return hits / len(references)


def _top_k_cases() -> list[Case]:
    bar = [["实施", "事实", "逝世", "时时", "实事"], ["机器", "及其"], [], ["自己", "子集"]]
    refs = ["事实", "机器", "学习", "子集"]
    cases = [
        Case(args=(bar, refs, 1), label="k = 1 就是 top-1"),
        Case(args=(bar, refs, 2), label="k = 2"),
        Case(args=(bar, refs, 5), label="k = 5，候选不足 5 个的也算"),
        Case(args=([["实施", "事实", "实时"]], ["实时"], 2), label="排在第 3 的不算 top-2"),
    ]
    rng = random.Random(23)
    words = ["事实", "实施", "实时", "逝世", "时事", "试试"]
    for k in (1, 3):
        bars = [rng.sample(words, rng.randint(0, 5)) for _ in range(8)]
        refs = [rng.choice(words) for _ in bars]
        cases.append(Case(args=(bars, refs, k), label=f"随机的 8 个候选栏，k = {k}"))
    return cases


register(
    Exercise(
        id="pinyin.top_k_accuracy",
        chapter=CAPSTONE,
        title="候选栏的 top-k 完全匹配率",
        prompt=(
            "实现 top_k_accuracy(candidates, references, k)：candidates[i] 是第 i 个输入的候选"
            "列表（最好的在前，可能少于 k 个，也可能为空），references[i] 是正确的输出（一个词"
            "或一个分句）。返回正确输出出现在前 k 个候选里的输入所占的比例（一个 float）。"
        ),
        hint="只看每个列表的前 k 个候选；候选不足 k 个的列表照样参加，分母是输入的个数。",
        explanation=(
            "对每个输入检查 ref in cands[:k]（切片在列表较短时自动截断），数出命中的个数，"
            "再除以 len(references)。"
        ),
        kind="function",
        returns=Real(),
        cases=_top_k_cases,
        reference=reference_top_k_accuracy,
    )
)
