"""Chapter 4 (decoder, slides p22-p43) exercises: the causal mask, causal + padding masks
together, and the shapes of the decoder's two attention matrices."""

from __future__ import annotations

import torch

from lecturekit.exercises import Case, Exercise, register

# --------------------------------------------------------------------------------------
# decoder.causal_mask (p28-p31)
# --------------------------------------------------------------------------------------


def reference_causal_mask(size: int) -> torch.Tensor:
    """Bool ``(T, T)``, True above the diagonal: query i may not see keys j > i."""
    return torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)


def _causal_allowed_convention(size: int) -> torch.Tensor:
    # True = allowed: the scaled_dot_product_attention convention, the opposite of ours
    return torch.ones(size, size, dtype=torch.bool).tril()


def _causal_hides_diagonal(size: int) -> torch.Tensor:
    # also hides position i from itself: the first row is then fully masked
    return torch.ones(size, size, dtype=torch.bool).triu(diagonal=0)


def _causal_float(size: int) -> torch.Tensor:
    # an additive float mask is a valid mask, but not the boolean one asked for
    return torch.full((size, size), float("-inf")).triu(diagonal=1)


register(
    Exercise(
        id="decoder.causal_mask",
        chapter=4,
        title="构造因果掩码 (causal mask)",
        prompt=(
            "写函数 causal_mask(T)，返回形状 (T, T)、dtype 为 torch.bool 的张量：\n"
            "第 i 行第 j 列为 True 表示 query i 不允许看 key j（torch.nn.Transformer 的约定）。\n"
            "解码器第 i 个位置只能看位置 0..i，看不到未来的 i+1, i+2, ...（讲义 p30–p31）。"
        ),
        hint=(
            "True 表示“遮住”。要遮的是对角线以上的部分（j > i），对角线本身要保留；"
            "可以用 torch.ones(T, T, dtype=torch.bool).triu(diagonal=...)。"
        ),
        kind="function",
        cases=lambda: [Case(args=(t,), label=f"T={t}") for t in (1, 2, 4, 7)],
        reference=reference_causal_mask,
        wrong_answers=[_causal_allowed_convention, _causal_hides_diagonal, _causal_float],
    )
)

# --------------------------------------------------------------------------------------
# decoder.self_attention_mask: causal + padding (p30, notes Q5)
# --------------------------------------------------------------------------------------


def reference_self_attention_mask(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool ``(B, T, T)`` for the decoder self-attention of ``tgt (B, T)``: True where query
    i may not look at key j, because j is in the future (j > i) or key j is padding."""
    length = tgt.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)  # (T, T)
    padding_keys = (tgt == pad_id)[:, None, :]  # (B, 1, T): a padded key is hidden from all rows
    return future[None] | padding_keys


def _mask_padding_queries(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    # hides padding *rows* (queries) instead of padding *columns* (keys)
    length = tgt.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)
    return future[None] | (tgt == pad_id)[:, :, None]


def _causal_only(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    length = tgt.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)
    return future[None].expand(tgt.shape[0], length, length).clone()


def _and_instead_of_or(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    # a key is hidden only if it is BOTH future and padding: the future leaks again
    length = tgt.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)
    return future[None] & (tgt == pad_id)[:, None, :]


def _self_attention_cases() -> list[Case]:
    return [
        Case(args=(torch.tensor([[1, 5, 6, 7]]), 0), kwargs={}, label="没有填充"),
        Case(
            args=(torch.tensor([[1, 5, 6, 0, 0], [1, 8, 9, 4, 3]]), 0),
            kwargs={},
            label="第一句末尾有 2 个 <pad>",
        ),
        Case(
            args=(torch.tensor([[1, 4, 3, 3], [1, 3, 3, 3], [1, 6, 3, 3]]), 3),
            kwargs={},
            label="pad_id=3",
        ),
    ]


register(
    Exercise(
        id="decoder.self_attention_mask",
        chapter=4,
        title="因果掩码与填充掩码合并",
        prompt=(
            "写函数 self_attention_mask(tgt, pad_id)：tgt 是解码器输入的 token id，形状 (B, T)。\n"
            "返回形状 (B, T, T) 的 bool 张量，第 b 句第 i 行第 j 列为 True 表示 query i 不能看 key j：\n"
            "要么 j 在未来（j > i，因果掩码），要么第 j 个 token 是填充 <pad>（填充掩码）。"
        ),
        hint=(
            "先做 (T, T) 的因果掩码，再做 (B, 1, T) 的填充掩码（遮的是 key 那一列，"
            "所以 None 插在中间），两者用“或” | 合并，广播成 (B, T, T)。"
        ),
        kind="function",
        cases=_self_attention_cases,
        reference=reference_self_attention_mask,
        wrong_answers=[_mask_padding_queries, _causal_only, _and_instead_of_or],
    )
)

# --------------------------------------------------------------------------------------
# decoder.attention_shapes (p38-p41, notes Q1)
# --------------------------------------------------------------------------------------

register(
    Exercise(
        id="decoder.attention_shapes",
        chapter=4,
        title="解码器两种注意力矩阵的形状",
        prompt=(
            "输入是 50 帧语音（编码器输出 50 个向量），解码器此时有 8 个位置，d_k = 64，单头。\n"
            "给出一个二元组 (masked self-attention 权重矩阵的形状, cross attention 权重矩阵的形状)，"
            "每个形状写成 (行数, 列数) 的元组，行对应 query。"
        ),
        hint="行数 = query 的个数，列数 = key 的个数。cross attention 的 key 来自哪里？d_k 不出现在权重矩阵里。",
        kind="value",
        reference=((8, 8), (8, 50)),
        wrong_answers=[
            ((8, 8), (50, 8)),
            ((8, 8), (8, 8)),
            ((8, 64), (8, 50)),
            ((50, 50), (8, 50)),
        ],
    )
)
