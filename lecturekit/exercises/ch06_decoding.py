"""Chapter 6 exercises: decoding strategies, one step of beam search and the arithmetic of
exposure bias (p47-p57)."""

from __future__ import annotations

import math
import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array, Items, Real

# --------------------------------------------------------------------------------------
# top-k
# --------------------------------------------------------------------------------------


def reference_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep, per row of ``(B, V)``, the logits not below the row's k-th largest (ties at the
    boundary all stay; k >= V keeps everything); the others become ``-inf``."""
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (B, 1): k-th largest per row
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)
    cases = [
        Case(args=(torch.tensor([[3.0, 1.0, 2.0, 0.5]]), 2), label="一行，k = 2"),
        Case(args=(torch.randn(3, 10, generator=g), 3), label="三行（每行各自取前 k 个）"),
        Case(args=(torch.tensor([[0.1, 0.2, -1.0]]), 1), label="k = 1 等于贪心"),
        Case(args=(torch.randn(2, 5, generator=g) * 4, 5), label="k = V 时什么都不去掉"),
        Case(args=(torch.randn(2, 5, generator=g), 9), label="k > V 时什么都不去掉"),
        Case(args=(torch.tensor([[1.0, 2.0, 3.0, 2.0, 0.0]]), 2), label="第 k 大的值有并列"),
        Case(args=(torch.tensor([[4.0, 1.0, 4.0], [2.0, 2.0, 2.0]]), 1), label="最大值并列，k = 1"),
    ]
    rng = random.Random(13)
    for _ in range(3):
        b, v = rng.randint(1, 4), rng.randint(2, 12)
        k = rng.randint(1, v + 2)
        logits = torch.randint(-3, 4, (b, v), generator=g).float()  # integers: ties are common
        logits += torch.randn(b, v, generator=g) * rng.choice([0.0, 1.0])
        cases.append(Case(args=(logits, k), label=f"随机输入 (B, V) = {(b, v)}，k = {k}"))
    return cases


register(
    Exercise(
        id="decoding.top_k_filter",
        chapter=6,
        title="top-k 过滤",
        prompt=(
            "实现 top_k_filter(logits, k)：logits 形状为 (B, V) (float32)。对每一行只保留最大的 k 个 "
            "logit，其余位置设为 float('-inf')，保留下来的值不变；返回一个新的张量。\n"
            "并列：与这一行第 k 大的值相等的 logit 都保留（所以并列时可能多于 k 个）。"
            "k >= 1；k >= V 时什么都不去掉。"
        ),
        hint=(
            "每一行有自己的门槛：这一行第 k 大的值。低于门槛的去掉（设为 -inf，不是 0），"
            "等于门槛的留下。k 比一行的长度还大时，门槛应该是什么？"
        ),
        explanation=(
            "kth = torch.topk(logits, min(k, V), dim=-1).values[..., -1:]，每行第 k 大的值，形状 (B, 1)；"
            "答案是 logits.masked_fill(logits < kth, float('-inf'))，masked_fill 返回新张量。"
        ),
        kind="function",
        returns=Array("float32", "(B, V)"),
        cases=_top_k_cases,
        reference=reference_top_k,
    )
)


# --------------------------------------------------------------------------------------
# top-p (nucleus)
# --------------------------------------------------------------------------------------


def reference_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep, per row of ``(B, V)``, the tokens whose strictly more probable tokens have total
    probability below ``p``: the smallest set of most probable tokens whose probability reaches
    ``p``, with tied tokens kept or dropped together. The most probable token always stays;
    ``p >= 1`` keeps everything."""
    if p >= 1:
        return logits.clone()
    sorted_logits, _ = torch.sort(logits, dim=-1, descending=True)
    probs = sorted_logits.double().softmax(dim=-1)  # (B, V), descending
    before = probs.cumsum(dim=-1) - probs  # mass of the tokens sorted before each one
    kept = before < p
    kept[..., 0] = True  # the most probable token always stays
    # the smallest kept logit is the row's threshold: ties with it stay too
    threshold = sorted_logits.masked_fill(~kept, float("inf")).min(dim=-1, keepdim=True).values
    return logits.masked_fill(logits < threshold, float("-inf"))


def _top_p_cases() -> list[Case]:
    g = torch.Generator().manual_seed(60)
    words = torch.tensor([[3.0, 2.2, 1.9, 1.0, 0.5, 0.2, -0.5, -1.2]])
    cases = [
        Case(args=(words, 0.5), label="本章的 8 个词，p = 0.5"),
        Case(args=(words, 0.9), label="同一分布，p = 0.9"),
        Case(args=(torch.tensor([[0.0, 2.0, 1.0, 3.0]]), 0.7), label="logits 不是有序的"),
        Case(args=(torch.randn(4, 12, generator=g) * 2, 0.8), label="四行随机 logits"),
        Case(args=(torch.tensor([[5.0, 0.0, 0.0]]), 0.5), label="很尖的分布只剩 1 个词"),
        Case(args=(torch.tensor([[2.0, 1.0, 1.0, 0.0]]), 0.6), label="越过 p 的词有并列"),
        Case(args=(torch.zeros(1, 4), 0.3), label="四个词概率相等"),
        Case(args=(words, 0.0), label="p = 0 只保留概率最大的词"),
        Case(args=(torch.tensor([[1.0, 3.0, 3.0]]), -0.5), label="p < 0，最大的词有并列"),
        Case(
            args=(torch.tensor([[0.0, -800.0, 1.0]]), 1.0),
            label="p = 1 什么都不去掉，概率为 0 的词也留下",
        ),
        Case(args=(words, 1.5), label="p > 1 什么都不去掉"),
    ]
    rng = random.Random(14)
    for _ in range(3):
        b, v, p = rng.randint(1, 4), rng.randint(2, 12), round(rng.uniform(0.05, 0.95), 2)
        cases.append(
            Case(
                args=(torch.randn(b, v, generator=g) * rng.choice([1.0, 3.0]), p),
                label=f"随机输入 (B, V) = {(b, v)}，p = {p}",
            )
        )
    return cases


register(
    Exercise(
        id="decoding.top_p_filter",
        chapter=6,
        title="核采样的 top-p 过滤",
        prompt=(
            "实现 top_p_filter(logits, p)：logits 形状为 (B, V) (float32)。对每一行，一个词保留，"
            "当且仅当概率 softmax(logits) 严格大于它的那些词的概率之和小于 p——也就是按概率从大到小"
            "累加、刚好达到 p 的最小集合（让累计概率越过 p 的那个词也保留）。其余位置设为 "
            "float('-inf')，保留的值不变，顺序与输入相同；返回一个新的张量。\n"
            "并列：概率相等的词同进同出。概率最大的词（及与它并列的词）总是保留，"
            "所以 p <= 0 时只剩它们；p >= 1 时什么都不去掉。"
        ),
        hint=(
            "先把每行的词按概率从大到小排好，算出每个词“前面”那些词的概率之和，和 p 比较；"
            "决定好之后，要把结果放回词原来的位置。并列的词要么都留、要么都去："
            "想一想怎样用“门槛”代替逐个判断。"
        ),
        explanation=(
            "sorted_logits = torch.sort(logits, descending=True).values；probs = softmax(sorted_logits)；"
            "before = probs.cumsum(-1) - probs；kept = before < p，并令 kept[..., 0] = True；"
            "门槛是被保留的最小 logit：threshold = sorted_logits[kept] 中每行的最小值；"
            "答案 logits.masked_fill(logits < threshold, -inf)（p >= 1 时直接返回副本）。"
            "用门槛而不是按排序位置去掉，并列的词就同进同出。"
        ),
        kind="function",
        returns=Array("float32", "(B, V)"),
        cases=_top_p_cases,
        reference=reference_top_p,
    )
)


# --------------------------------------------------------------------------------------
# exposure-bias arithmetic
# --------------------------------------------------------------------------------------


def reference_sequence_accuracy(token_error: float, length: int) -> float:
    """Probability that ``length`` independent steps, each wrong with ``token_error``, are all right."""
    return (1.0 - token_error) ** length


def _sequence_accuracy_cases() -> list[Case]:
    settings = [(0.02, 10), (0.05, 20), (0.01, 100), (0.3, 1), (0.0, 50), (1.0, 3)]
    rng = random.Random(15)
    drawn = [(round(rng.uniform(0.001, 0.05), 4), rng.randint(1, 100)) for _ in range(4)]
    return [
        Case(args=s, label=f"{prefix}每步出错概率 {s[0]:g}，长 {s[1]}")
        for prefix, group in (("", settings), ("随机：", drawn))
        for s in group
    ]


register(
    Exercise(
        id="decoding.sequence_accuracy",
        chapter=6,
        title="整句全对的概率",
        prompt=(
            "实现 sequence_accuracy(token_error, length)：假设每一步独立地以概率 token_error "
            "出错，返回长度为 length 的输出每一步都正确的概率。\n"
            "0 <= token_error <= 1，length >= 1；token_error = 0 时答案是 1，token_error = 1 时是 0。"
        ),
        hint="一步正确的概率是多少？整句正确要求每一步都正确，而各步是相互独立的。",
        explanation="独立事件同时发生，概率相乘：(1 - token_error) ** length。",
        kind="function",
        returns=Real(),
        cases=_sequence_accuracy_cases,
        reference=reference_sequence_accuracy,
    )
)


# --------------------------------------------------------------------------------------
# length-penalised beam score
# --------------------------------------------------------------------------------------


def reference_length_penalised_score(log_prob: float, length: int, alpha: float) -> float:
    """GNMT beam score ``log_prob / ((5 + length) / 6) ** alpha`` (Wu et al., 2016)."""
    return log_prob / ((5.0 + length) / 6.0) ** alpha


def _penalty_cases() -> list[Case]:
    settings = [
        (math.log(0.3), 3, 0.6),
        (math.log(0.15), 8, 0.6),
        (-4.2, 12, 1.0),
        (-2.0, 5, 0.0),
        (-3.0, 1, 0.6),
        (0.0, 7, 0.6),
    ]
    rng = random.Random(16)
    drawn = [
        (round(-rng.uniform(0.1, 20), 3), rng.randint(1, 40), round(rng.uniform(0, 1.5), 2))
        for _ in range(4)
    ]
    return [
        Case(args=s, label=f"{prefix}log_prob={s[0]:.4g}, length={s[1]}, alpha={s[2]}")
        for prefix, group in (("", settings), ("随机：", drawn))
        for s in group
    ]


register(
    Exercise(
        id="decoding.length_penalised_score",
        chapter=6,
        title="带长度惩罚的束搜索得分",
        prompt=(
            "实现 length_penalised_score(log_prob, length, alpha)：返回本章介绍的 GNMT 束搜索得分，"
            "即对数概率 log_prob 除以长度为 length 时的长度惩罚 lp(length)（指数为 alpha）。\n"
            "log_prob <= 0（可以是 0），length >= 1 是整数，alpha >= 0；alpha = 0 时不惩罚。"
        ),
        hint=(
            "得分是对数概率除以一个只和长度有关的因子：这个因子在 alpha 为 0 时等于 1，"
            "length 为 1 时也等于 1。注意整数除法会把分数截掉。"
        ),
        explanation="log_prob / ((5 + length) / 6) ** alpha，其中 / 是浮点除法。",
        kind="function",
        returns=Real(),
        cases=_penalty_cases,
        reference=reference_length_penalised_score,
        forbidden=("lecturekit.decoding.beam.length_penalty",),  # the chapter calls it after
    )
)


# --------------------------------------------------------------------------------------
# one beam-search step
# --------------------------------------------------------------------------------------


def reference_beam_step(
    scores: torch.Tensor, log_probs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``k`` best extensions of ``k`` beams: ``scores (B, k)``, ``log_probs (B, k, V)`` ->
    ``(new_scores (B, k), beams (B, k), tokens (B, k))``, best first, as
    ``lecturekit.decoding.beam.beam_step``."""
    batch, k, vocab = log_probs.shape
    candidates = (scores[:, :, None] + log_probs).reshape(batch, k * vocab)  # (B, k*V)
    new_scores, flat = candidates.topk(k, dim=-1)  # (B, k), best first
    return new_scores, flat // vocab, flat % vocab


def _log_probs(shape: tuple[int, ...], g: torch.Generator, spread: float = 2.0) -> torch.Tensor:
    return (torch.randn(shape, generator=g, dtype=torch.float64) * spread).log_softmax(dim=-1)


def _beam_step_cases() -> list[Case]:
    g = torch.Generator().manual_seed(61)
    first = torch.tensor([[0.0, -math.inf, -math.inf]], dtype=torch.float64)
    forbidden = _log_probs((2, 2, 6), g)
    forbidden[..., :2] = -math.inf  # e.g. <pad> and <bos> can never be generated
    cases = [
        Case(
            args=(torch.tensor([[-0.5, -1.5]], dtype=torch.float64), _log_probs((1, 2, 4), g)),
            label="一个句子，k = 2，V = 4",
        ),
        Case(args=(first, _log_probs((1, 3, 5), g)), label="第一步：束里只有第 0 个前缀"),
        Case(
            args=(torch.tensor([[-0.1, -6.0]], dtype=torch.float64), _log_probs((1, 2, 5), g, 0.3)),
            label="最好的几个候选都接在同一个前缀后面",
        ),
        Case(args=(-torch.rand(2, 2, generator=g).double(), forbidden), label="有的词概率为 0"),
        Case(
            args=(torch.zeros(3, 1, dtype=torch.float64), _log_probs((3, 1, 4), g)), label="k = 1"
        ),
    ]
    rng = random.Random(62)
    for _ in range(3):
        b, k = rng.randint(1, 3), rng.randint(1, 4)
        v = rng.randint(k, 8)
        scores = -torch.rand(b, k, generator=g, dtype=torch.float64) * 5
        cases.append(
            Case(
                args=(scores, _log_probs((b, k, v), g)), label=f"随机输入 B = {b}，k = {k}，V = {v}"
            )
        )
    return cases


register(
    Exercise(
        id="decoding.beam_step",
        chapter=6,
        title="束搜索的一步",
        prompt=(
            "实现 beam_step(scores, log_probs)：每个句子的束 (beam) 里有 k 个前缀，scores 形状 (B, k)"
            " 是这些前缀的对数概率 log P(前缀)；log_probs 形状 (B, k, V) 是每个前缀的下一个词的对数"
            "概率。两者都是 float64。把每个前缀接上一个词得到候选，每个句子在自己的全部 k·V 个候选里"
            "选出整句对数概率最大的 k 个。\n"
            "返回三元组 (new_scores, beams, tokens)，形状都是 (B, k)，按得分从大到小排列："
            "new_scores 是候选前缀的对数概率 (float64)，beams 是它接在束里第几个前缀后面"
            "（0 到 k-1，int64），tokens 是接上的词（0 到 V-1，int64）。\n"
            "scores 里的 -inf 表示束里这个位置是空的（第一步束里只有第 0 个前缀）；log_probs 里也"
            "可能有 -inf（不许生成的词）。V >= k，测试里得分最大的 k 个候选没有并列，也都是有限的数。"
        ),
        hint=(
            "候选的得分是整句的对数概率，不只是新词的对数概率；候选来自束里所有的前缀，"
            "不是每个前缀各选若干个。把 (前缀, 词) 两维摊平成一维再挑，挑完以后，"
            "要从摊平后的位置还原出它接在第几个前缀后面、是哪个词。"
        ),
        explanation=(
            "candidates = (scores[:, :, None] + log_probs).reshape(B, k * V)；"
            "new_scores, flat = candidates.topk(k, dim=-1)；beams = flat // V，tokens = flat % V。"
            "lecturekit 的 beam_search 每一步都这样做（lecturekit.decoding.beam.beam_step，"
            "它多取 2k 个候选，因为以 <eos> 结尾的候选会离开束）。"
        ),
        kind="function",
        returns=Items(
            (Array("float64", "(B, k)"), Array("int64", "(B, k)"), Array("int64", "(B, k)")),
            names=("new_scores", "beams", "tokens"),
        ),
        cases=_beam_step_cases,
        reference=reference_beam_step,
        forbidden=("lecturekit.decoding.beam.beam_step",),
    )
)
