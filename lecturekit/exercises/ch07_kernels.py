"""Chapter 7 (GPU kernels, beyond the lecture) exercises: merging two online-softmax states,
and counting the bytes that naive attention moves."""

from __future__ import annotations

import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array, Integer, Items

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
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # -inf - -inf is NaN
    return m, l1 * torch.exp(m1 - m_safe) + l2 * torch.exp(m2 - m_safe)


def _state(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, l) of each row of ``x`` (rows of -inf are empty parts: m = -inf, l = 0)."""
    m = x.max(dim=-1).values
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, torch.exp(x - m_safe[..., None]).sum(dim=-1)


def _merge_cases() -> list[Case]:
    g = torch.Generator().manual_seed(7)
    a = torch.randn(4, 5, generator=g, dtype=torch.float64) * 3
    b = torch.randn(4, 3, generator=g, dtype=torch.float64) * 3 + 2
    empty = torch.full((2, 3), float("-inf"), dtype=torch.float64)
    some = torch.tensor([[1.0, -2.0, 0.5], [float("-inf"), 3.0, 2.0]], dtype=torch.float64)
    same = torch.tensor([[2.0, 0.0], [-1.0, -1.0]], dtype=torch.float64)
    cases = [
        Case(args=(*_state(a), *_state(b)), label="四行，两段各 5 和 3 个数"),
        Case(args=(*_state(some), *_state(empty)), label="第二段全被遮住 (m=-inf, l=0)"),
        Case(args=(*_state(empty), *_state(some)), label="第一段全被遮住"),
        Case(args=(*_state(empty), *_state(empty)), label="两段都被遮住"),
        Case(args=(*_state(same), *_state(same.flip(-1))), label="两段的最大值相等"),
    ]
    rng = random.Random(17)
    for _ in range(3):
        rows = tuple(rng.randint(1, 4) for _ in range(rng.randint(0, 2)))
        x = torch.randn(*rows, 2, rng.randint(1, 6), generator=g, dtype=torch.float64)
        x = x * rng.choice([1.0, 10.0])
        x[..., 0, :][torch.rand(rows, generator=g) < 0.3] = float("-inf")  # some empty parts
        cases.append(
            Case(
                args=(*_state(x[..., 0, :]), *_state(x[..., 1, :])), label=f"随机输入，形状 {rows}"
            )
        )
    return cases


register(
    Exercise(
        id="kernels.merge_softmax_state",
        chapter=7,
        title="合并两段的在线 softmax 状态",
        prompt=(
            "一行分数被切成两段。每段有状态 (m, l)：m 是这一段的最大值，l = Σ exp(x - m)。"
            "写 merge(m1, l1, m2, l2)，返回整行的 (m, l)。\n"
            "四个参数是形状相同的 float64 张量，每个元素对应一行（形状可以是 ()、(R,) 或更多维）。"
            "被完全遮住的段 m = -inf、l = 0：一段被遮住时，结果就是另一段的状态；"
            "两段都被遮住时结果是 (-inf, 0)，不能出现 NaN。"
        ),
        hint=(
            "两段的 l 是以各自的最大值为基准算的，不能直接相加：先把它们换算到同一个基准"
            "（整行的最大值）上。-inf 减 -inf 是 NaN，两段都被遮住的情况要单独处理。"
        ),
        explanation=(
            "m = torch.maximum(m1, m2)；m_safe = torch.where(m == -inf, 0, m)；"
            "l = l1 · exp(m1 - m_safe) + l2 · exp(m2 - m_safe)。被遮住的段 exp(-inf) = 0，贡献为 0。"
        ),
        kind="function",
        returns=Items(
            (Array("float64", "与 m1 相同"), Array("float64", "与 m1 相同")), names=("m", "l")
        ),
        cases=_merge_cases,
        reference=reference_merge_softmax_state,
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


def _bytes_cases() -> list[Case]:
    settings = [(1024, 64, 2), (17, 40, 4), (16384, 128, 2), (1, 1, 1)]
    rng = random.Random(18)
    drawn = [
        (rng.randint(1, 5000), rng.randint(1, 256), rng.choice([1, 2, 4, 8])) for _ in range(4)
    ]
    return [
        Case(args=s, label=f"{prefix}n={s[0]}, d={s[1]}, 每个元素 {s[2]} 字节")
        for prefix, group in (("", settings), ("随机：", drawn))
        for s in group
    ]


register(
    Exercise(
        id="kernels.naive_attention_bytes",
        chapter=7,
        title="数一数朴素注意力搬运的字节",
        prompt=(
            "不融合的注意力 (一个头，Nq = Nk = n，头维度 d)：读 Q、K，算出分数 S 写回显存；"
            "softmax 读 S、写 P；再读 P 和 V，写出 O。写 naive_bytes(n, d, bytes_per_element)，"
            "返回这些步骤一共读写的字节数。n、d、bytes_per_element 都是正整数。"
        ),
        hint=(
            "把每一步读写的矩阵列出来：有的是 n×n，有的是 n×d；一个矩阵每被读或写一次，"
            "就搬运它的全部元素。最后别忘了一个元素占几个字节。"
        ),
        explanation=(
            "n×n 的矩阵被读写 4 次（写 S、读 S、写 P、读 P），n×d 的矩阵 4 次（读 Q、K、V，写 O）："
            "(4n² + 4nd) · bytes_per_element。"
        ),
        kind="function",
        returns=Integer(),
        cases=_bytes_cases,
        reference=reference_naive_attention_bytes,
    )
)
