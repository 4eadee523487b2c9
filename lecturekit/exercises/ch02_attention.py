"""Chapter 2 (attention) exercises: scaled dot-product attention, the masked softmax, the
sinusoidal positional encoding, the parameter count of multi-head attention, splitting/merging
heads, and the whole multi-head attention layer assembled from those pieces."""

from __future__ import annotations

import math
import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array, Integer

# --------------------------------------------------------------------------------------
# attention.scaled_dot_product
# --------------------------------------------------------------------------------------


def reference_scaled_dot_product(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) V for q ``(..., Tq, d_k)``, k ``(..., Tk, d_k)``, v ``(..., Tk, d_v)``."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    return scores.softmax(dim=-1) @ v  # (..., Tq, d_v)


def _sdpa_cases() -> list[Case]:
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 8, generator=g)
    k = torch.randn(2, 3, 7, 8, generator=g)
    v = torch.randn(2, 3, 7, 4, generator=g)
    cases = [
        Case(args=(x, x, x), label="4 个符号的手算例子，Q = K = V = X"),
        Case(args=(q, k, v), label="批量、多头，Tq = 5, Tk = 7, d_k = 8, d_v = 4"),
        Case(args=(3 * q[0, 0], 3 * k[0, 0], v[0, 0]), label="没有批维度，分数较大"),
        Case(args=(q[:, :, :1], k[:, :, :1], v[:, :, :1]), label="Tq = Tk = 1"),
    ]
    rng = random.Random(2)
    for _ in range(3):
        batch = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
        tq, tk, d_k, d_v = (rng.randint(1, 9) for _ in range(4))
        shapes = [(*batch, tq, d_k), (*batch, tk, d_k), (*batch, tk, d_v)]
        q, k, v = (torch.randn(s, generator=g) * rng.choice([1.0, 4.0]) for s in shapes)
        cases.append(
            Case(args=(q, k, v), label=f"随机输入：q {shapes[0]}，k {shapes[1]}，v {shapes[2]}")
        )
    return cases


register(
    Exercise(
        id="attention.scaled_dot_product",
        chapter=2,
        title="实现缩放点积注意力 (scaled dot-product attention)",
        prompt=(
            "写函数 attention(q, k, v)，返回缩放点积注意力的输出（论文 3.2.1 节的式 (1)）。\n"
            "q 的形状是 (..., Tq, d_k)，k 是 (..., Tk, d_k)，v 是 (..., Tk, d_v)：前面的维度（批、头）"
            "可以有任意多个，也可以没有；Tq 与 Tk、d_k 与 d_v 可以不同，也可以是 1。\n"
            "输入都是 float32，只用 torch 的基本运算（矩阵乘法、softmax 等）。"
        ),
        hint=(
            "先想清楚每一步结果的形状：每个查询对每个键有一个分数，批和头的维度原样保留，"
            "所以转置只能动最后两维。缩放因子随 d_k 变大而变大（本章算过点积的方差）；"
            "softmax 沿哪一维做，决定了“谁的权重之和是 1”。"
        ),
        explanation=(
            "scores = q @ k.transpose(-2, -1) / sqrt(d_k)，形状 (..., Tq, Tk)；"
            "weights = scores.softmax(dim=-1)；输出 weights @ v，形状 (..., Tq, d_v)。"
        ),
        kind="function",
        returns=Array("float32", "(..., Tq, d_v)"),
        cases=_sdpa_cases,
        reference=reference_scaled_dot_product,
        forbidden=(
            "torch.nn.functional.scaled_dot_product_attention",
            "torch.nn.functional.multi_head_attention_forward",
            "lecturekit.scaled_dot_product_attention",
        ),
    )
)

# --------------------------------------------------------------------------------------
# attention.masked_softmax
# --------------------------------------------------------------------------------------


def reference_masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of ``scores`` ``(..., Tq, Tk)`` with the keys where ``mask``
    (bool, True = masked out, broadcastable to ``scores``) is True excluded; a row whose keys
    are all masked gets zeros. Returns weights of the shape of ``scores``."""
    masked = mask.expand(scores.shape)  # (..., Tq, Tk)
    dead = masked.all(dim=-1, keepdim=True)  # (..., Tq, 1): rows that may see nothing
    filled = scores.masked_fill(masked, float("-inf")).masked_fill(dead, 0.0)  # no 0/0 row
    return filled.softmax(dim=-1).masked_fill(masked, 0.0)


def _masked_softmax_cases() -> list[Case]:
    g = torch.Generator().manual_seed(27)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    scores_4 = x @ x.T / math.sqrt(2)  # the chapter's 4-symbol example
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # query i sees keys j <= i
    padded = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])[:, None, :]  # (B, 1, Tk)
    dead_rows = torch.ones(4, 4, dtype=torch.bool).triu(0)  # the diagonal masked too
    big = torch.tensor([[120.0, 0.0, 1.0], [0.0, 120.0, -3.0]])  # masked keys score highest
    cases = [
        Case(
            args=(scores_4, torch.tensor([False, False, False, True])),
            label="4 个符号的例子，遮住第 4 个键",
        ),
        Case(
            args=(torch.randn(2, 5, 5, generator=g), causal),
            label="因果掩码 (Tq, Tk)，分数有批维度",
        ),
        Case(
            args=(torch.randn(2, 3, 4, 6, generator=g), padded[:, None]),
            label="填充掩码 (B, 1, 1, Tk)，分数 (B, H, Tq, Tk)",
        ),
        Case(
            args=(torch.randn(4, 4, generator=g), dead_rows),
            label="连对角线也遮住：第 1 行的键全被遮住",
        ),
        Case(
            args=(big, torch.tensor([[True, False, False], [False, True, False]])),
            label="被遮住的键分数最大 (120)",
        ),
        Case(
            args=(torch.randn(3, 5, generator=g) * 40, torch.zeros(3, 5, dtype=torch.bool)),
            label="没有键被遮住，分数很大（标准差 40）",
        ),
        Case(
            args=(torch.randn(2, 2, 3, generator=g), torch.ones(2, 1, 3, dtype=torch.bool)),
            label="整句都是填充：每一行都全被遮住",
        ),
    ]
    rng = random.Random(28)
    for _ in range(3):  # random masks: some rows may end up fully masked
        b, tq, tk = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6)
        scores = torch.randn(b, tq, tk, generator=g) * rng.choice([1.0, 10.0])
        mask = torch.rand(rng.choice([(b, tq, tk), (b, 1, tk), (tq, tk)]), generator=g) < 0.4
        label = f"随机输入：scores {(b, tq, tk)}，mask {tuple(mask.shape)}"
        cases.append(Case(args=(scores, mask), label=label))
    return cases


register(
    Exercise(
        id="attention.masked_softmax",
        chapter=2,
        title="带掩码的 softmax (masked softmax)",
        prompt=(
            "写函数 masked_softmax(scores, mask)：scores 是注意力分数，形状 (..., Tq, Tk)，float32；"
            "mask 是布尔张量，True 表示这个键不许看（本书和 torch.nn.MultiheadAttention 的约定），形状可以比 scores "
            "少几维或有长度为 1 的维，按广播规则扩展到 scores 的形状（例如因果掩码 (Tq, Tk)、"
            "填充掩码 (B, 1, 1, Tk)）。\n"
            "返回沿最后一维的 softmax 权重：被遮住的键权重恰好为 0，其余的键和为 1；"
            "一行的键全被遮住时，这一行返回全 0（不是 NaN）。分数可能很大（上百）。"
        ),
        hint=(
            "被遮住的键要在 softmax 之前就退出比赛，而且退出得彻底：什么数取指数以后恰好是 0？"
            "先 softmax 再把权重乘 0，和就不是 1 了。一行全被遮住时，分母里一项也不剩，"
            "先想清楚要返回什么，再把这些行单独改掉。"
        ),
        explanation=(
            "w = scores.masked_fill(mask, float('-inf')).softmax(dim=-1)：exp(-inf) = 0，被遮住的键"
            "权重恰好为 0，结果等于只在其余的键上做 softmax；全被遮住的行是 0/0 = NaN，"
            "用 torch.nan_to_num(w, nan=0.0)（或先找出这些行再 masked_fill）改成 0。"
            "用 -1e9 代替 -inf 时，全被遮住的行会把权重平均分给被遮住的键。"
        ),
        kind="function",
        returns=Array("float32", "与 scores 相同"),
        cases=_masked_softmax_cases,
        reference=reference_masked_softmax,
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


def _pe_cases() -> list[Case]:
    sizes = [(1, 2), (4, 2), (10, 8), (50, 64)]
    rng = random.Random(3)
    sizes += [(rng.randint(1, 60), 2 * rng.randint(1, 16)) for _ in range(3)]
    return [
        Case(args=size, label=f"{'随机：' if i >= 4 else ''}length={size[0]}, d_model={size[1]}")
        for i, size in enumerate(sizes)
    ]


register(
    Exercise(
        id="attention.sinusoidal_encoding",
        chapter=2,
        title="实现正弦位置编码 (sinusoidal positional encoding)",
        prompt=(
            "写函数 sinusoidal_encoding(length, d_model)，返回论文 3.5 节的正弦位置编码表：\n"
            "第 pos 行是位置 pos 的 d_model 维编码，pos = 0, 1, ..., length - 1；"
            "列的排列与论文的公式相同（第 2i 列用 sin，第 2i+1 列用 cos）。"
            "length >= 1，d_model 是正偶数。"
        ),
        hint=(
            "每一对相邻的列（偶数列和它右边的奇数列）用同一个角度，一个取 sin、一个取 cos；"
            "越往右的列频率越低；位置从 0 开始数，所以第 0 行很好验算。注意返回的 dtype。"
        ),
        explanation=(
            "angle[pos, i] = pos / 10000^(2i / d_model)，形状 (length, d_model/2)；"
            "pe[:, 0::2] = sin(angle)，pe[:, 1::2] = cos(angle)。用 float64 算角度再转成 float32 更准。"
        ),
        kind="function",
        returns=Array("float32", "(length, d_model)"),
        cases=_pe_cases,
        reference=reference_sinusoidal_encoding,
    )
)

# --------------------------------------------------------------------------------------
# attention.mha_parameters
# --------------------------------------------------------------------------------------


def reference_mha_parameters(d_model: int, n_heads: int) -> int:
    """Parameters of multi-head attention with biases: W_Q, W_K, W_V, W_O (d x d) + 4 biases (d)."""
    return 4 * d_model * d_model + 4 * d_model


def _mha_cases() -> list[Case]:
    sizes = [(512, 8), (512, 1), (64, 4), (768, 12)]
    rng = random.Random(4)
    for _ in range(4):
        n_heads = rng.randint(1, 16)
        sizes.append((n_heads * rng.randint(1, 64), n_heads))
    return [
        Case(args=size, label=f"{'随机：' if i >= 4 else ''}d_model={size[0]}, h={size[1]}")
        for i, size in enumerate(sizes)
    ]


register(
    Exercise(
        id="attention.mha_parameters",
        chapter=2,
        title="多头注意力的参数量",
        prompt=(
            "写函数 mha_parameters(d_model, n_heads)，返回一个多头注意力层（带偏置，"
            "与 torch.nn.MultiheadAttention 和 lecturekit.MultiHeadAttention 相同）的参数个数。\n"
            "每个头的维度是 d_model / n_heads（d_model 能被 n_heads 整除，n_heads 可以是 1）；"
            "W_Q、W_K、W_V 把所有头拼在一起，最后还有输出投影 W_O。"
        ),
        hint=(
            "想一想所有头的投影拼在一起是多大的矩阵；每个投影既有权重也有偏置。"
            "头数改变的是怎样切分，不是总大小。可以数一个真实模块的参数来验证。"
        ),
        explanation=(
            "h 个头、每头 d/h 维，拼起来每个投影仍是 d×d 的权重加 d 个偏置；"
            "Q、K、V、O 四个投影共 4·d² + 4·d 个参数，与头数无关。"
        ),
        kind="function",
        returns=Integer(),
        cases=_mha_cases,
        reference=reference_mha_parameters,
    )
)

# --------------------------------------------------------------------------------------
# attention.split_heads and attention.merge_heads: multi-head attention as one batched matmul
# --------------------------------------------------------------------------------------


def reference_split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(B, T, D)`` -> ``(B, H, T, D/H)``: head ``h`` holds features ``h*Dh:(h+1)*Dh``, the
    layout of ``MultiHeadAttention.split_heads`` (and ``nn.MultiheadAttention``)."""
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


def reference_merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, T, Dh)`` -> ``(B, T, H*Dh)``: the inverse of ``split_heads`` (heads side by side)."""
    batch, n_heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, n_heads * head_dim)


def _split_cases() -> list[Case]:
    numbered = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)  # easy to read
    g = torch.Generator().manual_seed(21)
    cases = [
        Case(args=(numbered, 2), label="B=2, T=3, D=4, 2 个头（元素是 0, 1, 2, …）"),
        Case(args=(numbered, 1), label="1 个头"),
        Case(args=(numbered, 4), label="每个头只有 1 维"),
        Case(args=(torch.randn(1, 1, 6, generator=g), 3), label="T = 1"),
    ]
    rng = random.Random(22)
    for _ in range(3):
        b, t, h, dh = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 4), rng.randint(1, 5)
        cases.append(
            Case(
                args=(torch.randn(b, t, h * dh, generator=g), h),
                label=f"随机输入 (B, T, D) = {(b, t, h * dh)}，{h} 个头",
            )
        )
    return cases


def _merge_cases() -> list[Case]:
    numbered = torch.arange(2 * 2 * 3 * 2, dtype=torch.float32).reshape(2, 2, 3, 2)
    g = torch.Generator().manual_seed(23)
    cases = [
        Case(args=(numbered,), label="B=2, H=2, T=3, Dh=2（元素是 0, 1, 2, …）"),
        Case(args=(numbered[:, :1],), label="1 个头"),
        Case(args=(torch.randn(1, 3, 1, 2, generator=g),), label="T = 1"),
    ]
    rng = random.Random(24)
    for _ in range(3):
        shape = (rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 6), rng.randint(1, 5))
        cases.append(
            Case(args=(torch.randn(shape, generator=g),), label=f"随机输入 (B, H, T, Dh) = {shape}")
        )
    return cases


_HEAD_FUNCTIONS = (
    "lecturekit.model.attention.MultiHeadAttention.split_heads",
    "lecturekit.model.attention.MultiHeadAttention.merge_heads",
)

register(
    Exercise(
        id="attention.split_heads",
        chapter=2,
        title="把 d_model 维切成 h 个头 (split heads)",
        prompt=(
            "写函数 split_heads(x, n_heads)：x 是 Q（或 K、V）投影后的结果，形状 (B, T, D)，float32。"
            "把每个符号的 D 维切成 n_heads 段，每段 Dh = D / n_heads 维，第 j 段（j 从 0 数起，"
            "特征 j·Dh 到 (j+1)·Dh - 1）属于第 j 个头；返回形状 (B, H, T, Dh) 的张量 (H = n_heads)，"
            "out[b, j, t] 是第 b 句第 t 个符号在第 j 个头里的向量。这样 n_heads 个头的注意力"
            "就是一次批量矩阵乘法。\n"
            "D 能被 n_heads 整除；n_heads 可以是 1，也可以等于 D；T 可以是 1。"
        ),
        hint=(
            "分两步想：先在符号自己的特征维里切段（这一步不改变元素的内存顺序），"
            "再把“头”这一维挪到“位置”这一维前面。只改形状、不挪维度，得到的形状可能碰巧对，"
            "但每个头里装的已经不是同一个符号的特征了。"
        ),
        explanation=(
            "x.reshape(B, T, H, Dh) 把最后一维切成 H 段，形状 (B, T, H, Dh)；"
            ".transpose(1, 2) 交换 T 和 H，得到 (B, H, T, Dh)。直接 reshape(B, H, T, Dh) 是错的："
            "它把不同符号的特征混进同一个头。"
        ),
        kind="function",
        returns=Array("float32", "(B, H, T, Dh)"),
        cases=_split_cases,
        reference=reference_split_heads,
        forbidden=_HEAD_FUNCTIONS,
    )
)

register(
    Exercise(
        id="attention.merge_heads",
        chapter=2,
        title="把 h 个头的输出拼回 d_model 维 (merge heads)",
        prompt=(
            "写函数 merge_heads(x)：x 是 h 个头各自的注意力输出，形状 (B, H, T, Dh)，float32。"
            "返回形状 (B, T, H·Dh) 的张量：每个符号的向量是它在第 0, 1, …, H-1 个头里的输出"
            "依次拼接，正好是 split_heads 的逆运算；之后再乘输出投影 W_O。\n"
            "H 可以是 1，T 可以是 1。"
        ),
        hint=(
            "先让同一个符号的各个头挨在一起（哪两个维度该换位置？），再把最后两维并成一维。"
            "只改形状、不挪维度，形状会对，数值却会把不同符号的输出拼在一起。"
            "换过维度的张量在内存里不再连续，有的改形状的办法会因此报错。"
        ),
        explanation=(
            "x.transpose(1, 2) 得到 (B, T, H, Dh)，再 .reshape(B, T, H * Dh)（transpose 之后"
            "内存不连续，view 会报错，reshape 或 .contiguous().view 可以）。"
        ),
        kind="function",
        returns=Array("float32", "(B, T, H·Dh)"),
        cases=_merge_cases,
        reference=reference_merge_heads,
        forbidden=_HEAD_FUNCTIONS,
    )
)

# --------------------------------------------------------------------------------------
# attention.multi_head: the whole layer from the pieces above
# --------------------------------------------------------------------------------------


def reference_multi_head(
    x: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: torch.Tensor,
    w_o: torch.Tensor,
    b_o: torch.Tensor,
    n_heads: int,
) -> torch.Tensor:
    """Multi-head self-attention ``(B, T, D) -> (B, T, D)`` from the chapter's pieces.

    ``w_qkv`` ``(3D, D)`` and ``b_qkv`` ``(3D,)`` stack the Q, K and V projections in
    ``nn.Linear`` layout (``y = x W^T + b``), as ``nn.MultiheadAttention.in_proj_weight`` and
    ``MultiHeadAttention.qkv_proj`` do; ``w_o`` ``(D, D)`` and ``b_o`` ``(D,)`` project the output.
    """
    q, k, v = (x @ w_qkv.T + b_qkv).chunk(3, dim=-1)  # 3 x (B, T, D)
    heads = reference_scaled_dot_product(
        *(reference_split_heads(t, n_heads) for t in (q, k, v))
    )  # (B, H, T, Dh)
    return reference_merge_heads(heads) @ w_o.T + b_o  # (B, T, D)


def _multi_head_case(
    g: torch.Generator, batch: int, length: int, d_model: int, n_heads: int, label: str
) -> Case:
    scale = d_model**-0.5  # nn.Linear's order of magnitude: outputs of variance ~1
    x = torch.randn(batch, length, d_model, generator=g)
    w_qkv = torch.randn(3 * d_model, d_model, generator=g) * scale
    b_qkv = torch.randn(3 * d_model, generator=g) * 0.1
    w_o = torch.randn(d_model, d_model, generator=g) * scale
    b_o = torch.randn(d_model, generator=g) * 0.1
    return Case(args=(x, w_qkv, b_qkv, w_o, b_o, n_heads), label=label)


def _multi_head_cases() -> list[Case]:
    g = torch.Generator().manual_seed(25)
    sizes = [
        (2, 5, 8, 2, "B=2, T=5, D=8, 2 个头"),
        (1, 4, 6, 1, "1 个头"),
        (1, 3, 4, 4, "每个头只有 1 维"),
        (3, 1, 12, 3, "T = 1"),
    ]
    cases = [_multi_head_case(g, *size) for size in sizes]
    rng = random.Random(26)
    for _ in range(3):
        b, t, h, dh = rng.randint(1, 3), rng.randint(1, 7), rng.randint(1, 4), rng.randint(1, 6)
        label = f"随机输入 (B, T, D) = {(b, t, h * dh)}，{h} 个头"
        cases.append(_multi_head_case(g, b, t, h * dh, h, label))
    return cases


register(
    Exercise(
        id="attention.multi_head",
        chapter=2,
        title="用自己的零件拼出多头自注意力 (multi-head attention)",
        prompt=(
            "写函数 multi_head_attention(x, w_qkv, b_qkv, w_o, b_o, n_heads)，返回多头自注意力"
            "层的输出，形状 (B, T, D)。可以直接调用你前面写好的 attention、split_heads 和 "
            "merge_heads。\n"
            "x 是输入，形状 (B, T, D)。w_qkv 形状 (3D, D)、b_qkv 形状 (3D,)：前 D 行是 W_Q，"
            "中间 D 行是 W_K，最后 D 行是 W_V，排列与 torch.nn.Linear 相同，"
            "即投影是 x 乘 w_qkv 的转置再加 b_qkv（与 torch.nn.MultiheadAttention 的 "
            "in_proj_weight 相同）。w_o 形状 (D, D)、b_o 形状 (D,) 是输出投影，排列也相同。"
            "每个头 Dh = D / n_heads 维，缩放用每个头的维度。\n"
            "没有掩码，也不需要 dropout；D 能被 n_heads 整除，n_heads 可以是 1 或 D，T 可以是 1。"
            "输入都是 float32。"
        ),
        hint=(
            "按本章的四步走：一次投影得到 Q、K、V 再沿特征维分成三份；三者各自拆成多头；"
            "每个头做缩放点积注意力，缩放看的是一个头的宽度而不是整个模型的宽度；"
            "拼回去以后别忘了输出投影。torch 的线性层存的是转置过的矩阵。"
        ),
        explanation=(
            "q, k, v = (x @ w_qkv.T + b_qkv).chunk(3, dim=-1)，各 (B, T, D)；"
            "heads = attention(split_heads(q, h), split_heads(k, h), split_heads(v, h))，"
            "(B, H, T, Dh)，分数除以 sqrt(Dh)；输出 merge_heads(heads) @ w_o.T + b_o，(B, T, D)。"
        ),
        kind="function",
        returns=Array("float32", "(B, T, D)"),
        cases=_multi_head_cases,
        reference=reference_multi_head,
        forbidden=(
            "torch.nn.functional.scaled_dot_product_attention",
            "torch.nn.functional.multi_head_attention_forward",
            "lecturekit.scaled_dot_product_attention",
            "lecturekit.model.attention.MultiHeadAttention.forward",
        ),
    )
)
