"""Chapter 5 (training, slides p44-p46) exercises: the teacher-forcing input/label pair,
cross-entropy that ignores padding, and the paper's warmup / inverse-square-root schedule."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lecturekit.exercises import Case, Exercise, register

# --------------------------------------------------------------------------------------
# training.teacher_forcing (p45-p46)
# --------------------------------------------------------------------------------------


def reference_teacher_forcing(
    gold: torch.Tensor, bos_id: int, eos_id: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``gold (B, T)`` right-padded targets without specials -> ``(decoder_input, labels)``,
    both ``(B, T + 1)``: ``<bos> y_1 .. y_n`` and ``y_1 .. y_n <eos>``, padded with ``pad_id``."""
    batch = gold.shape[0]
    lengths = (gold != pad_id).sum(dim=1)  # (B,)
    pad_column = torch.full((batch, 1), pad_id, dtype=gold.dtype)
    labels = torch.cat([gold, pad_column], dim=1)  # (B, T + 1)
    labels[torch.arange(batch), lengths] = eos_id  # EOS right after each sentence's last token
    decoder_input = torch.cat([torch.full((batch, 1), bos_id, dtype=gold.dtype), gold], dim=1)
    return decoder_input, labels


def _labels_without_eos(gold, bos_id, eos_id, pad_id):
    # forgets EOS: the model never learns to stop (p31 "Never stop!")
    batch = gold.shape[0]
    decoder_input = torch.cat([torch.full((batch, 1), bos_id, dtype=gold.dtype), gold], dim=1)
    labels = torch.cat([gold, torch.full((batch, 1), pad_id, dtype=gold.dtype)], dim=1)
    return decoder_input, labels


def _not_shifted(gold, bos_id, eos_id, pad_id):
    # input equals the labels: position t is asked to output the token it already sees
    _, labels = reference_teacher_forcing(gold, bos_id, eos_id, pad_id)
    return labels.clone(), labels


def _eos_in_last_column(gold, bos_id, eos_id, pad_id):
    # puts EOS at the end of the padded row instead of right after the sentence
    batch = gold.shape[0]
    decoder_input = torch.cat([torch.full((batch, 1), bos_id, dtype=gold.dtype), gold], dim=1)
    labels = torch.cat([gold, torch.full((batch, 1), eos_id, dtype=gold.dtype)], dim=1)
    return decoder_input, labels


def _teacher_forcing_cases() -> list[Case]:
    return [
        Case(args=(torch.tensor([[5, 6, 7, 8]]), 1, 2, 0), label="一句、无填充"),
        Case(args=(torch.tensor([[5, 6, 7], [9, 4, 0], [3, 0, 0]]), 1, 2, 0), label="有填充"),
        Case(args=(torch.tensor([[7, 8, 3], [4, 3, 3]]), 0, 1, 3), label="pad_id=3, bos_id=0"),
    ]


register(
    Exercise(
        id="training.teacher_forcing",
        chapter=5,
        title="teacher forcing：解码器输入与标签错开一位",
        prompt=(
            "写函数 teacher_forcing(gold, bos_id, eos_id, pad_id)。gold 形状 (B, T)，每行是一个目标句的\n"
            "token id（不含 <bos>/<eos>），右侧用 pad_id 补齐。返回 (decoder_input, labels)，形状都是 (B, T+1)：\n"
            "decoder_input = <bos> y1 ... yn 再补 pad；labels = y1 ... yn <eos> 再补 pad（讲义 p45–p46）。"
        ),
        hint=(
            "decoder_input 就是在最左边拼一列 <bos>。labels 先在右边拼一列 pad，"
            "再把每行第 n 个位置（n = 该行非 pad 的个数）写成 <eos>，不是一律写在最后一列。"
        ),
        kind="function",
        cases=_teacher_forcing_cases,
        reference=reference_teacher_forcing,
        wrong_answers=[_labels_without_eos, _not_shifted, _eos_in_last_column],
    )
)

# --------------------------------------------------------------------------------------
# training.masked_cross_entropy (p45, per-token loss with padding ignored)
# --------------------------------------------------------------------------------------


def reference_masked_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, pad_id: int
) -> torch.Tensor:
    """Mean of ``-log softmax(logits)[label]`` over the non-padding tokens; a 0-d tensor."""
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    keep = labels != pad_id  # (B, T)
    nll = -log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (nll * keep).sum() / keep.sum()


def _counts_padding(logits, labels, pad_id):
    # padding positions are scored as if <pad> were a word to predict
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def _mean_of_sentence_means(logits, labels, pad_id):
    # averages per sentence first: tokens of short sentences weigh more
    nll = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=pad_id, reduction="none")
    keep = (labels != pad_id).float()
    return ((nll * keep).sum(1) / keep.sum(1)).mean()


def _divides_by_all_positions(logits, labels, pad_id):
    # zeroes the padding loss but divides by B * T: shorter sentences lower the loss
    nll = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=pad_id, reduction="none")
    return nll.sum() / labels.numel()


def _same_scalar(expected: torch.Tensor, got: object) -> bool:
    # a 0-d tensor or a plain number; compared as floats
    if isinstance(got, torch.Tensor) and got.numel() != 1:
        return False
    return math.isclose(float(got), float(expected), rel_tol=1e-5, abs_tol=1e-6)


def _masked_ce_cases() -> list[Case]:
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 5, 7, generator=g)
    labels = torch.tensor([[3, 4, 5, 2, 0], [6, 2, 0, 0, 0], [4, 4, 4, 4, 2]])
    single = torch.randn(1, 4, 6, generator=g)
    single_labels = torch.tensor([[5, 1, 2, 3]])
    return [
        Case(args=(logits, labels, 0), label="3 句，有填充"),
        Case(args=(single, single_labels, 0), label="1 句，无填充"),
        Case(args=(logits, labels.where(labels != 0, 6), 6), label="pad_id=6"),
    ]


register(
    Exercise(
        id="training.masked_cross_entropy",
        chapter=5,
        title="忽略填充的逐 token 交叉熵",
        prompt=(
            "写函数 masked_cross_entropy(logits, labels, pad_id)：logits 形状 (B, T, V)，labels 形状 (B, T)。\n"
            "对每个不是 pad_id 的位置算 -ln softmax(logits)[label]，再对这些位置取平均，\n"
            "返回一个 0 维张量。填充位置既不贡献损失，也不计入分母。"
        ),
        hint=(
            "torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)) 取出每个位置金标 token 的对数概率；"
            "keep = labels != pad_id；答案是 (nll * keep).sum() / keep.sum()。"
            "也可以用 F.cross_entropy(..., ignore_index=pad_id)，注意它要求类别维在第 1 维。"
        ),
        kind="function",
        cases=_masked_ce_cases,
        reference=reference_masked_cross_entropy,
        wrong_answers=[_counts_padding, _mean_of_sentence_means, _divides_by_all_positions],
        compare=_same_scalar,
    )
)

# --------------------------------------------------------------------------------------
# training.noam_lr (Vaswani et al. 2017, section 5.3)
# --------------------------------------------------------------------------------------


def reference_noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``, steps counted from 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def _noam_max(step, d_model, warmup_steps):
    return d_model**-0.5 * max(step**-0.5, step * warmup_steps**-1.5)


def _noam_without_d_model(step, d_model, warmup_steps):
    return min(step**-0.5, step * warmup_steps**-1.5)


def _noam_wrong_warmup_power(step, d_model, warmup_steps):
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-0.5)


def _noam_cases() -> list[Case]:
    return [
        Case(args=(s, d, w), label=f"step={s}, d_model={d}, warmup={w}")
        for s, d, w in [
            (1, 512, 4000),
            (100, 512, 4000),
            (4000, 512, 4000),
            (20000, 512, 4000),
            (50, 64, 100),
            (300, 64, 100),
        ]  # fmt: skip
    ]


register(
    Exercise(
        id="training.noam_lr",
        chapter=5,
        title="论文的学习率调度：warmup 后按 1/√step 衰减",
        prompt=(
            "写函数 noam_lr(step, d_model, warmup_steps)，返回论文 5.3 节的学习率（一个 float）：\n"
            "lrate = d_model^(-0.5) · min(step^(-0.5), step · warmup_steps^(-1.5))，step 从 1 开始。"
        ),
        hint=(
            "前 warmup_steps 步里 step·warmup^(-1.5) 更小（线性上升），之后 step^(-0.5) 更小（衰减），"
            "所以用 min；别忘了最前面的 d_model^(-0.5)。"
        ),
        kind="function",
        cases=_noam_cases,
        reference=reference_noam_lr,
        wrong_answers=[_noam_max, _noam_without_d_model, _noam_wrong_warmup_power],
        compare=lambda expected, got: math.isclose(float(got), expected, rel_tol=1e-6),
    )
)
