"""Chapter 4 (decoder, slides p22-p43) exercises: the causal mask, causal + padding masks
together, and the shapes of the decoder's two attention matrices."""

from __future__ import annotations

import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array, Integer, Items

# --------------------------------------------------------------------------------------
# decoder.causal_mask (p28-p30)
# --------------------------------------------------------------------------------------


def reference_causal_mask(T: int) -> torch.Tensor:
    """Bool ``(T, T)``, True above the diagonal: query i may not see keys j > i."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


def _causal_cases() -> list[Case]:
    rng = random.Random(8)
    sizes = [1, 2, 4, 7] + [rng.randint(3, 20) for _ in range(3)]
    return [
        Case(args=(t,), label=f"{'随机：' if i >= 4 else ''}T={t}") for i, t in enumerate(sizes)
    ]


register(
    Exercise(
        id="decoder.causal_mask",
        chapter=4,
        title="构造因果掩码 (causal mask)",
        prompt=(
            "写函数 causal_mask(T)：第 i 行第 j 列为 True 表示 query i 不允许看 key j"
            "（torch.nn.Transformer 的约定）。\n"
            "解码器第 i 个位置只能看位置 0..i，看不到未来的 i+1, i+2, ... (p28–p30)。\n"
            "T >= 1；T = 1 时只有一个位置，它可以看自己。"
        ),
        hint=(
            "True 表示“遮住”。对 query i 来说，哪些 key 在它的未来？它自己的位置算不算未来？"
            "画出 3×3 的表格，看看 True 组成什么形状。"
        ),
        explanation=(
            "要遮的是对角线以上的部分 (j > i)，对角线本身保留："
            "torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)，"
            "或者 torch.arange(T)[None, :] > torch.arange(T)[:, None]。"
        ),
        kind="function",
        returns=Array("bool", "(T, T)"),
        cases=_causal_cases,
        reference=reference_causal_mask,
        forbidden=("lecturekit.causal_mask",),
    )
)

# --------------------------------------------------------------------------------------
# decoder.self_attention_mask: causal + padding (p30)
# --------------------------------------------------------------------------------------


def reference_self_attention_mask(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool ``(B, T, T)`` for the decoder self-attention of ``tgt (B, T)``: True where query
    i may not look at key j, because j is in the future (j > i) or key j is padding."""
    length = tgt.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(diagonal=1)  # (T, T)
    padding_keys = (tgt == pad_id)[:, None, :]  # (B, 1, T): a padded key is hidden from all rows
    return future[None] | padding_keys


def _self_attention_cases() -> list[Case]:
    cases = [
        Case(args=(torch.tensor([[1, 5, 6, 7]]), 0), label="没有填充"),
        Case(
            args=(torch.tensor([[1, 5, 6, 0, 0], [1, 8, 9, 4, 3]]), 0),
            label="第一句末尾有 2 个 <pad>",
        ),
        Case(args=(torch.tensor([[1, 4, 3, 3], [1, 3, 3, 3], [1, 6, 3, 3]]), 3), label="pad_id=3"),
        Case(args=(torch.tensor([[0, 0, 1, 5], [1, 7, 8, 9]]), 0), label="填充在句首"),
        Case(args=(torch.tensor([[2, 2, 2], [1, 4, 2]]), 2), label="第一句整句都是填充"),
        Case(args=(torch.tensor([[9], [0]]), 0), label="T = 1"),
    ]
    g = torch.Generator().manual_seed(9)
    rng = random.Random(9)
    for _ in range(3):
        b, t, pad_id = rng.randint(1, 4), rng.randint(2, 8), rng.choice([0, 1, 5, -100])
        tgt = torch.randint(6, 20, (b, t), generator=g)
        tgt[torch.rand(b, t, generator=g) < 0.35] = pad_id
        cases.append(Case(args=(tgt, pad_id), label=f"随机输入 (B, T) = {(b, t)}，pad_id={pad_id}"))
    return cases


register(
    Exercise(
        id="decoder.self_attention_mask",
        chapter=4,
        title="因果掩码与填充掩码合并",
        prompt=(
            "写函数 self_attention_mask(tgt, pad_id)：tgt 是解码器输入的符号编号，形状 (B, T) (int64)。\n"
            "结果的第 b 句第 i 行第 j 列为 True 表示 query i 不能看 key j：要么 j 在未来"
            "（j > i，因果掩码），要么第 j 个符号等于 pad_id（填充掩码）。\n"
            "填充可以出现在任何位置（不只在句末），一句也可以整句都是填充；pad_id 可以是任意整数"
            "（例如 -100）。填充位置作为 query 的那一行同样按上面的规则计算。"
        ),
        hint=(
            "两个掩码各管一件事：因果掩码只看行号和列号，填充掩码只看 key（列）是不是填充。"
            "合在一起时，只要有一个说“遮”就要遮。想清楚广播时填充掩码该补在哪一维。"
        ),
        explanation=(
            "future = torch.ones(T, T, dtype=torch.bool).triu(1)，形状 (T, T)；"
            "padding_keys = (tgt == pad_id)[:, None, :]，形状 (B, 1, T)，遮的是列；"
            "mask = future | padding_keys，广播成 (B, T, T)。"
        ),
        kind="function",
        returns=Array("bool", "(B, T, T)"),
        cases=_self_attention_cases,
        reference=reference_self_attention_mask,
        # the chapter combines the library's two masks right after this exercise
        forbidden=("lecturekit.causal_mask", "lecturekit.padding_mask"),
    )
)

# --------------------------------------------------------------------------------------
# decoder.attention_shapes (p38-p41)
# --------------------------------------------------------------------------------------

_SHAPE = Items((Integer(), Integer()))

register(
    Exercise(
        id="decoder.attention_shapes",
        chapter=4,
        title="解码器两种注意力矩阵的形状",
        prompt=(
            "输入是 50 帧语音（编码器输出 50 个向量），解码器此时有 8 个位置，d_k = 64，单头。\n"
            "给出 (带掩码的自注意力 (masked self-attention) 权重矩阵的形状, "
            "交叉注意力 (cross attention) 权重矩阵的形状)，"
            "每个形状写成 (行数, 列数)，行对应 query。"
        ),
        hint=(
            "行数是 query 的个数，列数是 key 的个数。两种注意力的 query 都来自解码器；"
            "交叉注意力的 key 来自哪里？权重矩阵里没有 d_k 这一维。"
        ),
        explanation=(
            "带掩码的自注意力：解码器 8 个位置两两打分，(8, 8)；"
            "交叉注意力：解码器的 8 个 query 对编码器的 50 个 key 打分，(8, 50)。"
        ),
        kind="value",
        returns=Items(
            (_SHAPE, _SHAPE),
            names=("自注意力", "交叉注意力"),
            text="一个二元组 (自注意力的形状, 交叉注意力的形状)，每个形状是两个整数 (行数, 列数)",
            reveal=False,  # a wrong answer is told which shape is wrong; solution() shows both
        ),
        reference=((8, 8), (8, 50)),
    )
)
