"""Chapter 2 (attention) exercises: scaled dot-product attention, the sinusoidal positional
encoding, and the parameter count of multi-head attention."""

from __future__ import annotations

import math

import torch

from lecturekit.exercises import Case, Exercise, register

# --------------------------------------------------------------------------------------
# attention.scaled_dot_product
# --------------------------------------------------------------------------------------


def reference_scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) V for q ``(..., Tq, d_k)``, k ``(..., Tk, d_k)``, v ``(..., Tk, d_v)``."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    return scores.softmax(dim=-1) @ v  # (..., Tq, d_v)


def _sdpa_unscaled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v


def _sdpa_divide_by_d_k(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(dim=-1) @ v


def _sdpa_softmax_over_queries(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-2) @ v


def _sdpa_returns_weights(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)


def _sdpa_cases() -> list[Case]:
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 8, generator=g)
    k = torch.randn(2, 3, 7, 8, generator=g)
    v = torch.randn(2, 3, 7, 4, generator=g)
    return [
        Case(args=(x, x, x), label="4 个 token 的手算例子，Q = K = V = X"),
        Case(args=(q, k, v), label="批量、多头，Tq = 5, Tk = 7, d_k = 8, d_v = 4"),
        Case(args=(3 * q[0, 0], 3 * k[0, 0], v[0, 0]), label="分数较大的二维输入"),
    ]


register(
    Exercise(
        id="attention.scaled_dot_product",
        chapter=2,
        title="实现缩放点积注意力 (scaled dot-product attention)",
        prompt=(
            "写函数 attention(q, k, v)，返回 softmax(Q K^T / sqrt(d_k)) V。\n"
            "q 的形状是 (..., Tq, d_k)，k 是 (..., Tk, d_k)，v 是 (..., Tk, d_v)，前面的维度（批、头）"
            "可以有任意多个；返回 (..., Tq, d_v)。只用 torch 的基本运算，不要调用现成的注意力函数。"
        ),
        hint=(
            "k.transpose(-2, -1) 只交换最后两个维度；d_k 是 q.shape[-1]，要除以它的平方根；"
            "softmax 沿着 key 的维度（最后一维）做，使每个 query 的权重之和为 1。"
        ),
        kind="function",
        cases=_sdpa_cases,
        reference=reference_scaled_dot_product,
        wrong_answers=[
            _sdpa_unscaled,
            _sdpa_divide_by_d_k,
            _sdpa_softmax_over_queries,
            _sdpa_returns_weights,
        ],
    )
)

# --------------------------------------------------------------------------------------
# attention.sinusoidal_encoding
# --------------------------------------------------------------------------------------


def reference_sinusoidal_encoding(length: int, d_model: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)); ``(length, d)``."""
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    angle = position / 10000 ** (two_i / d_model)  # (L, d/2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


def _pe_sin_cos_swapped(length: int, d_model: int) -> torch.Tensor:
    pe = reference_sinusoidal_encoding(length, d_model)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(length, d_model)


def _pe_exponent_i_over_d(length: int, d_model: int) -> torch.Tensor:
    # uses i instead of 2i in the exponent: frequencies fall off twice as slowly
    position = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angle = position / 10000 ** (i / d_model)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


def _pe_halves_concatenated(length: int, d_model: int) -> torch.Tensor:
    # all sines first, then all cosines: a valid encoding, but not the paper's layout
    pe = reference_sinusoidal_encoding(length, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)


def _pe_positions_from_one(length: int, d_model: int) -> torch.Tensor:
    return reference_sinusoidal_encoding(length + 1, d_model)[1:]


register(
    Exercise(
        id="attention.sinusoidal_encoding",
        chapter=2,
        title="实现正弦位置编码 (sinusoidal positional encoding)",
        prompt=(
            "写函数 sinusoidal_encoding(length, d_model)，返回形状 (length, d_model) 的 float32 张量：\n"
            "PE[pos, 2i] = sin(pos / 10000^(2i/d_model))，PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))，\n"
            "pos 从 0 开始，i = 0, 1, ..., d_model/2 - 1（d_model 是偶数）。"
        ),
        hint=(
            "偶数列放 sin、奇数列放 cos，两者用同一个角度；指数里是 2i（也就是偶数列的列号）除以 d_model；"
            "位置从 0 开始，所以第 0 行是 [0, 1, 0, 1, ...]。可以用 pe[:, 0::2] 和 pe[:, 1::2] 赋值。"
        ),
        kind="function",
        cases=lambda: [
            Case(args=(4, 2), label="length=4, d_model=2"),
            Case(args=(10, 8), label="length=10, d_model=8"),
            Case(args=(50, 64), label="length=50, d_model=64"),
        ],
        reference=reference_sinusoidal_encoding,
        wrong_answers=[
            _pe_sin_cos_swapped,
            _pe_exponent_i_over_d,
            _pe_halves_concatenated,
            _pe_positions_from_one,
        ],
    )
)

# --------------------------------------------------------------------------------------
# attention.mha_parameters
# --------------------------------------------------------------------------------------


def reference_mha_parameters(d_model: int, n_heads: int) -> int:
    """Parameters of multi-head attention with biases: W_Q, W_K, W_V, W_O (d x d) + 4 biases (d)."""
    return 4 * d_model * d_model + 4 * d_model


def _mha_without_bias(d_model: int, n_heads: int) -> int:
    return 4 * d_model * d_model


def _mha_full_size_heads(d_model: int, n_heads: int) -> int:
    # every head with full-size d x d projections
    return n_heads * 3 * (d_model * d_model + d_model) + d_model * d_model + d_model


def _mha_without_output_projection(d_model: int, n_heads: int) -> int:
    return 3 * d_model * d_model + 3 * d_model


register(
    Exercise(
        id="attention.mha_parameters",
        chapter=2,
        title="多头注意力的参数量",
        prompt=(
            "写函数 mha_parameters(d_model, n_heads)，返回一个多头注意力层（带偏置，"
            "与 torch.nn.MultiheadAttention 和 lecturekit.MultiHeadAttention 相同）的参数个数（int）。\n"
            "每个头的维度是 d_model / n_heads；W_Q、W_K、W_V 把所有头拼在一起，最后还有输出投影 W_O。"
        ),
        hint=(
            "h 个头、每头 d/h 维，拼起来 Q 的投影仍是 d x d；所以 Q、K、V、O 四个投影各有 d*d 个权重和 "
            "d 个偏置，与头数无关。可以用 sum(p.numel() for p in module.parameters()) 验证。"
        ),
        kind="function",
        cases=lambda: [
            Case(args=(512, 8), label="d_model=512, h=8"),
            Case(args=(512, 1), label="d_model=512, h=1"),
            Case(args=(64, 4), label="d_model=64, h=4"),
            Case(args=(768, 12), label="d_model=768, h=12"),
        ],
        reference=reference_mha_parameters,
        wrong_answers=[_mha_without_bias, _mha_full_size_heads, _mha_without_output_projection],
    )
)
