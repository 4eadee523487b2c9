"""Chapter 7 (GPU kernels, beyond the lecture) exercises: merging two online-softmax states,
and counting the bytes that naive attention moves."""

from __future__ import annotations

import math

import torch

from lecturekit.exercises import Case, Exercise, register

# --------------------------------------------------------------------------------------
# kernels.merge_softmax_state
# --------------------------------------------------------------------------------------


def reference_merge_softmax_state(
    m1: torch.Tensor, l1: torch.Tensor, m2: torch.Tensor, l2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two online-softmax states ``(m, l)`` of disjoint parts of a row.

    ``m`` is a part's maximum, ``l = sum(exp(x - m))`` over that part. Returns the state of
    the union: ``m = max(m1, m2)``, ``l = l1 exp(m1 - m) + l2 exp(m2 - m)``. Parts with no
    entries (``m = -inf``, ``l = 0``) must not produce NaN.
    """
    m = torch.maximum(m1, m2)
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, l1 * torch.exp(m1 - m_safe) + l2 * torch.exp(m2 - m_safe)


def _sum_without_rescaling(m1, l1, m2, l2):
    # forgets that l1 and l2 are measured against different maxima
    return torch.maximum(m1, m2), l1 + l2


def _rescale_wrong_direction(m1, l1, m2, l2):
    # exp(m - m1) instead of exp(m1 - m): overflows instead of shrinking
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m - m1) + l2 * torch.exp(m - m2)


def _nan_for_empty_parts(m1, l1, m2, l2):
    # right formula, but -inf - (-inf) = NaN when both parts are empty
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)


def _same_state(expected: tuple, got: object) -> bool:
    """Both (m, l) tensors allclose; -inf equals -inf (allclose treats equal infinities as
    close), and any NaN fails."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return False
    return all(
        isinstance(g, torch.Tensor)
        and g.shape == e.shape
        and not torch.isnan(g).any()
        and torch.allclose(g.double(), e.double(), rtol=1e-7, atol=1e-9)
        for e, g in zip(expected, got, strict=True)
    )


def _state(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m = x.max(dim=-1).values
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, torch.exp(x - m_safe[..., None]).sum(dim=-1)


def _merge_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(4, 5, generator=generator, dtype=torch.float64) * 3
    b = torch.randn(4, 3, generator=generator, dtype=torch.float64) * 3 + 2
    empty = torch.full((2, 3), float("-inf"), dtype=torch.float64)
    some = torch.tensor([[1.0, -2.0, 0.5], [float("-inf"), 3.0, 2.0]], dtype=torch.float64)
    return [
        Case(args=(*_state(a), *_state(b)), label="四行，两块各 5 和 3 个数"),
        Case(args=(*_state(some), *_state(empty)), label="第二块全被遮住 (m=-inf, l=0)"),
        Case(args=(*_state(empty), *_state(empty)), label="两块都被遮住"),
    ]


register(
    Exercise(
        id="kernels.merge_softmax_state",
        chapter=7,
        title="合并两段的在线 softmax 状态",
        prompt=(
            "一行分数被切成两段。每段有状态 (m, l)：m 是这一段的最大值，l = Σ exp(x - m)。"
            "写 merge(m1, l1, m2, l2)，返回整行的 (m, l)。四个参数都是形状相同的张量 "
            "(每个元素对应一行)。被完全遮住的段 m = -inf、l = 0，结果不能出现 NaN。"
        ),
        hint=(
            "新最大值 m = max(m1, m2)；旧的和要换算到新的基准：l1·exp(m1 - m)。"
            "当 m 也是 -inf 时，先把它换成 0 再做减法。"
        ),
        kind="function",
        cases=_merge_cases,
        reference=reference_merge_softmax_state,
        wrong_answers=[_sum_without_rescaling, _rescale_wrong_direction, _nan_for_empty_parts],
        compare=_same_state,
    )
)

# --------------------------------------------------------------------------------------
# kernels.naive_attention_bytes
# --------------------------------------------------------------------------------------


def reference_naive_attention_bytes(n: int, d: int, bytes_per_element: int) -> int:
    """DRAM bytes of one head of unfused attention with ``Nq = Nk = n``, head dim ``d``.

    Read Q, K (``2 n d``), write S, read S, write P (``3 n^2``), read P and V (``n^2 + n d``),
    write O (``n d``): ``4 n^2 + 4 n d`` elements.
    """
    return (4 * n * n + 4 * n * d) * bytes_per_element


def _forgets_element_size(n, d, bytes_per_element):
    return 4 * n * n + 4 * n * d


def _counts_scores_once(n, d, bytes_per_element):
    # as if S were written once and never read back
    return (n * n + 4 * n * d) * bytes_per_element


def _only_inputs_and_output(n, d, bytes_per_element):
    # the tiled kernel's ideal, not the naive one's
    return 4 * n * d * bytes_per_element


register(
    Exercise(
        id="kernels.naive_attention_bytes",
        chapter=7,
        title="数一数朴素注意力搬运的字节",
        prompt=(
            "不融合的注意力 (一个头，Nq = Nk = n，头维度 d)：读 Q、K，算出分数 S 写回显存；"
            "softmax 读 S、写 P；再读 P 和 V，写出 O。写 naive_bytes(n, d, bytes_per_element)，"
            "返回这些步骤一共读写的字节数 (整数)。"
        ),
        hint="n×n 的矩阵一共被读写了 4 次 (写 S、读 S、写 P、读 P)；n×d 的矩阵有 Q、K、V、O 四个。",
        kind="function",
        cases=lambda: [
            Case(args=(1024, 64, 2), label="n=1024, d=64, bf16"),
            Case(args=(17, 40, 4), label="n=17, d=40, fp32"),
            Case(args=(16384, 128, 2), label="n=16384, d=128, bf16"),
        ],
        reference=reference_naive_attention_bytes,
        wrong_answers=[_forgets_element_size, _counts_scores_once, _only_inputs_and_output],
        compare=lambda expected, got: (
            isinstance(got, (int, float))
            and not isinstance(got, bool)
            and math.isclose(float(got), float(expected), rel_tol=1e-9)
        ),
    )
)
