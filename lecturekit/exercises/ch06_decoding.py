"""Chapter 6 exercises: decoding strategies and the arithmetic of exposure bias (p47-p57)."""

from __future__ import annotations

import math

import torch

from lecturekit.exercises import Case, Exercise, register


def _same_filtered(expected: torch.Tensor, got: object) -> bool:
    """Filtered logits match: same shape, same removed (-inf) entries, same kept values."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return False
    removed = torch.isneginf(expected)
    if not torch.equal(removed, torch.isneginf(got)):
        return False
    return torch.allclose(expected[~removed], got[~removed].to(expected.dtype), atol=1e-6)


# --------------------------------------------------------------------------------------
# top-k
# --------------------------------------------------------------------------------------


def reference_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row ``(N, V)``; the others become ``-inf``."""
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (N, 1): k-th largest per row
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_keeps_k_plus_one(logits: torch.Tensor, k: int) -> torch.Tensor:
    kth = torch.topk(logits, min(k + 1, logits.shape[-1]), dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_zero_instead_of_inf(logits: torch.Tensor, k: int) -> torch.Tensor:
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def _top_k_whole_tensor(logits: torch.Tensor, k: int) -> torch.Tensor:
    kth = torch.topk(logits.flatten(), k).values[-1]  # one threshold for all rows
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)
    return [
        Case(args=(torch.tensor([[3.0, 1.0, 2.0, 0.5]]), 2), label="一行，k = 2"),
        Case(args=(torch.randn(3, 10, generator=g), 3), label="三行 (每行各自取前 k 个)"),
        Case(args=(torch.tensor([[0.1, 0.2, -1.0]]), 1), label="k = 1 等于贪心"),
        Case(args=(torch.randn(2, 5, generator=g) * 4, 5), label="k = V 时什么都不去掉"),
    ]


register(
    Exercise(
        id="decoding.top_k_filter",
        chapter=6,
        title="top-k 过滤",
        prompt=(
            "实现 top_k_filter(logits, k)：logits 形状为 (N, V)，对每一行只保留最大的 k 个 "
            "logit，其余位置设为 float('-inf')，保留下来的值不变。返回新的张量 (N, V)。"
        ),
        hint=(
            "torch.topk(logits, k, dim=-1).values[..., -1:] 是每行第 k 大的值；比它小的位置"
            "用 masked_fill 设为 -inf。注意每一行有自己的阈值，被去掉的位置是 -inf 而不是 0。"
        ),
        kind="function",
        cases=_top_k_cases,
        reference=reference_top_k,
        wrong_answers=[_top_k_keeps_k_plus_one, _top_k_zero_instead_of_inf, _top_k_whole_tensor],
        compare=_same_filtered,
    )
)


# --------------------------------------------------------------------------------------
# top-p (nucleus)
# --------------------------------------------------------------------------------------


def reference_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep, per row, the smallest set of most probable tokens whose probability reaches ``p``.

    A token is kept when the probability of the strictly more probable tokens is below ``p``
    (so the token that crosses the threshold stays, and the top token always stays).
    """
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    probs = sorted_logits.double().softmax(-1)
    before = probs.cumsum(-1) - probs  # (N, V): mass strictly before each sorted token
    drop_sorted = before >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def _top_p_drops_crossing_token(logits: torch.Tensor, p: float) -> torch.Tensor:
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    cum = sorted_logits.double().softmax(-1).cumsum(-1)
    drop_sorted = cum > p  # removes the token that makes the mass reach p
    drop_sorted[..., 0] = False
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def _top_p_unsorted(logits: torch.Tensor, p: float) -> torch.Tensor:
    probs = logits.double().softmax(-1)
    before = probs.cumsum(-1) - probs  # cumulates in vocabulary order, not by probability
    return logits.masked_fill(before >= p, float("-inf"))


def _top_p_threshold_on_probability(logits: torch.Tensor, p: float) -> torch.Tensor:
    probs = logits.softmax(-1)
    return logits.masked_fill(probs < 1 - p, float("-inf"))


def _top_p_cases() -> list[Case]:
    g = torch.Generator().manual_seed(60)
    words = torch.tensor([[3.0, 2.2, 1.9, 1.0, 0.5, 0.2, -0.5, -1.2]])
    return [
        Case(args=(words, 0.5), label="本章的 8 个词，p = 0.5"),
        Case(args=(words, 0.9), label="同一分布，p = 0.9"),
        Case(args=(torch.tensor([[0.0, 2.0, 1.0, 3.0]]), 0.7), label="logits 不是有序的"),
        Case(args=(torch.randn(4, 12, generator=g) * 2, 0.8), label="四行随机 logits"),
        Case(args=(torch.tensor([[5.0, 0.0, 0.0]]), 0.5), label="很尖的分布只剩 1 个词"),
    ]


register(
    Exercise(
        id="decoding.top_p_filter",
        chapter=6,
        title="top-p (nucleus) 过滤",
        prompt=(
            "实现 top_p_filter(logits, p)：logits 形状为 (N, V)。对每一行，把词按概率 "
            "softmax(logits) 从大到小排序，保留累计概率刚好达到 p 的最小集合 (让累计概率越过 p "
            "的那个词也要保留；概率最大的词总是保留)，其余位置设为 float('-inf')。返回 (N, V)，"
            "顺序与输入相同。"
        ),
        hint=(
            "先 torch.sort(logits, descending=True) 得到排序和下标 order；probs = softmax；"
            "一个词“之前”的累计概率是 probs.cumsum(-1) - probs，它 >= p 时才去掉这个词。"
            "最后用 scatter 按 order 把“去掉”的标记放回原来的位置。"
        ),
        kind="function",
        cases=_top_p_cases,
        reference=reference_top_p,
        wrong_answers=[
            _top_p_drops_crossing_token,
            _top_p_unsorted,
            _top_p_threshold_on_probability,
        ],
        compare=_same_filtered,
    )
)


# --------------------------------------------------------------------------------------
# exposure-bias arithmetic
# --------------------------------------------------------------------------------------


def reference_sequence_accuracy(token_error: float, length: int) -> float:
    """Probability that ``length`` independent steps, each wrong with ``token_error``, are all right."""
    return (1.0 - token_error) ** length


def _sequence_accuracy_linear(token_error: float, length: int) -> float:
    return 1.0 - token_error * length


def _sequence_accuracy_error_power(token_error: float, length: int) -> float:
    return 1.0 - token_error**length


def _sequence_accuracy_at_least_one_error(token_error: float, length: int) -> float:
    return 1.0 - (1.0 - token_error) ** length


def _sequence_accuracy_cases() -> list[Case]:
    return [
        Case(args=(0.02, 10), label="讲义的例子：每步错 2%，长 10"),
        Case(args=(0.05, 20), label="每步错 5%，长 20"),
        Case(args=(0.01, 100), label="每步错 1%，长 100"),
        Case(args=(0.3, 1), label="长度 1"),
        Case(args=(0.0, 50), label="从不出错"),
    ]


register(
    Exercise(
        id="decoding.sequence_accuracy",
        chapter=6,
        title="整句全对的概率",
        prompt=(
            "实现 sequence_accuracy(token_error, length)：假设每一步独立地以概率 token_error "
            "出错，返回长度为 length 的输出每一步都正确的概率 (一个 float)。"
        ),
        hint="每一步正确的概率是 1 - token_error，length 个独立事件同时发生，概率相乘。",
        kind="function",
        cases=_sequence_accuracy_cases,
        reference=reference_sequence_accuracy,
        wrong_answers=[
            _sequence_accuracy_linear,
            _sequence_accuracy_error_power,
            _sequence_accuracy_at_least_one_error,
        ],
        compare=lambda expected, got: (
            isinstance(got, (int, float))
            and not isinstance(got, bool)
            and math.isclose(expected, float(got), rel_tol=1e-9, abs_tol=1e-12)
        ),
    )
)


# --------------------------------------------------------------------------------------
# length-penalised beam score
# --------------------------------------------------------------------------------------


def reference_length_penalised_score(log_prob: float, length: int, alpha: float) -> float:
    """GNMT beam score ``log_prob / ((5 + length) / 6) ** alpha`` (Wu et al., 2016)."""
    return log_prob / ((5.0 + length) / 6.0) ** alpha


def _penalty_on_length_only(log_prob: float, length: int, alpha: float) -> float:
    return log_prob / length**alpha


def _penalty_multiplied(log_prob: float, length: int, alpha: float) -> float:
    return log_prob * ((5.0 + length) / 6.0) ** alpha


def _penalty_without_power(log_prob: float, length: int, alpha: float) -> float:
    return log_prob / (((5.0 + length) / 6.0) * alpha)


def _penalty_cases() -> list[Case]:
    return [
        Case(args=(math.log(0.3), 3, 0.6), label="短句，alpha = 0.6"),
        Case(args=(math.log(0.15), 8, 0.6), label="长句，alpha = 0.6"),
        Case(args=(-4.2, 12, 1.0), label="alpha = 1"),
        Case(args=(-2.0, 5, 0.0), label="alpha = 0 时就是对数概率本身"),
    ]


register(
    Exercise(
        id="decoding.length_penalised_score",
        chapter=6,
        title="带长度惩罚的束搜索得分",
        prompt=(
            "实现 length_penalised_score(log_prob, length, alpha)：返回 GNMT 的束搜索得分 "
            "log_prob / lp(length)，其中 lp(L) = ((5 + L) / 6) ** alpha。"
        ),
        hint="lp(L) = ((5 + L) / 6) ** alpha；alpha = 0 时 lp = 1，得分就是 log_prob。",
        kind="function",
        cases=_penalty_cases,
        reference=reference_length_penalised_score,
        wrong_answers=[_penalty_on_length_only, _penalty_multiplied, _penalty_without_power],
        compare=lambda expected, got: (
            isinstance(got, (int, float))
            and not isinstance(got, bool)
            and math.isclose(expected, float(got), rel_tol=1e-9, abs_tol=1e-12)
        ),
    )
)
