"""Chapter 5 (training, slides p44-p46) exercises: the teacher-forcing input/label pair,
cross-entropy that ignores padding, and the paper's warmup / inverse-square-root schedule."""

from __future__ import annotations

import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array, Items, Real

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


def _right_padded(lengths: list[int], width: int, pad_id: int, g: torch.Generator) -> torch.Tensor:
    gold = torch.randint(5, 30, (len(lengths), width), generator=g)
    gold[torch.arange(width)[None, :] >= torch.tensor(lengths)[:, None]] = pad_id
    return gold


def _teacher_forcing_cases() -> list[Case]:
    cases = [
        Case(args=(torch.tensor([[5, 6, 7, 8]]), 1, 2, 0), label="一句、无填充"),
        Case(args=(torch.tensor([[5, 6, 7], [9, 4, 0], [3, 0, 0]]), 1, 2, 0), label="有填充"),
        Case(args=(torch.tensor([[7, 8, 3], [4, 3, 3]]), 0, 1, 3), label="pad_id=3, bos_id=0"),
        Case(
            args=(torch.tensor([[6, 7], [0, 0]]), 1, 2, 0), label="第二句是空句子（整行都是填充）"
        ),
        Case(args=(torch.tensor([[9], [4]]), 1, 2, 0), label="T = 1"),
    ]
    g = torch.Generator().manual_seed(10)
    rng = random.Random(10)
    for _ in range(3):
        b, t = rng.randint(1, 5), rng.randint(1, 7)
        lengths = [rng.randint(0, t) for _ in range(b)]
        bos, eos, pad = rng.sample([0, 1, 2, 3, 4], 3)
        cases.append(
            Case(
                args=(_right_padded(lengths, t, pad, g), bos, eos, pad),
                label=f"随机输入，长度 {lengths}，bos={bos}, eos={eos}, pad={pad}",
            )
        )
    return cases


register(
    Exercise(
        id="training.teacher_forcing",
        chapter=5,
        title="教师强制 (teacher forcing)：解码器输入与标签错开一位",
        prompt=(
            "写函数 teacher_forcing(gold, bos_id, eos_id, pad_id)。gold 形状 (B, T) (int64)，每行是一个目标句的\n"
            "符号编号（不含 <bos>/<eos>），句子靠左，右侧用 pad_id 补齐（句子中间没有 pad_id）。\n"
            "decoder_input = <bos> y1 ... ym 再补 pad；labels = y1 ... ym <eos> 再补 pad (p45–p46)，"
            "m 是这一行的真实长度（不超过 T）。\n"
            "没有填充的行，<eos> 落在新加的最后一列；整行都是填充的行（空句子），"
            "decoder_input 只有 <bos>，labels 只有 <eos>，其余都是 pad。"
        ),
        hint=(
            "两个序列是同一句话错开一位：解码器在每个位置看到的是前面的词，要预测的是当前的词。"
            "<eos> 紧跟在每句最后一个真实词后面，所以各行的 <eos> 位置不同。"
        ),
        explanation=(
            "decoder_input = torch.cat([torch.full((B, 1), bos_id), gold], dim=1)；"
            "labels = torch.cat([gold, torch.full((B, 1), pad_id)], dim=1)，"
            "再把每行第 m 个位置（m = 该行非 pad 的个数）设为 eos_id："
            "labels[torch.arange(B), m] = eos_id。"
        ),
        kind="function",
        returns=Items(
            (Array("int64", "(B, T + 1)"), Array("int64", "(B, T + 1)")),
            names=("decoder_input", "labels"),
        ),
        cases=_teacher_forcing_cases,
        reference=reference_teacher_forcing,
    )
)

# --------------------------------------------------------------------------------------
# training.masked_cross_entropy (p45, per-token loss with padding ignored)
# --------------------------------------------------------------------------------------


def reference_masked_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, pad_id: int
) -> torch.Tensor:
    """Mean of ``-log softmax(logits)[label]`` over the non-padding tokens; 0 if there are none.

    logits ``(B, T, V)``, labels ``(B, T)``; ``pad_id`` may lie outside the vocabulary.
    """
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    keep = labels != pad_id  # (B, T)
    safe = labels.where(keep, 0)  # a padding label may not be a valid index
    nll = -log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (nll * keep).sum() / keep.sum().clamp(min=1)


def _masked_ce_cases() -> list[Case]:
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 5, 7, generator=g)
    labels = torch.tensor([[3, 4, 5, 2, 0], [6, 2, 0, 0, 0], [4, 4, 4, 4, 2]])
    single = torch.randn(1, 4, 6, generator=g)
    cases = [
        Case(args=(logits, labels, 0), label="3 句，有填充，pad_id=0"),
        Case(args=(single, torch.tensor([[5, 1, 2, 3]]), 0), label="1 句，无填充"),
        Case(args=(logits, labels.where(labels != 0, 6), 6), label="pad_id=6"),
        Case(args=(logits, labels.where(labels != 0, -100), -100), label="pad_id=-100（词表之外）"),
        Case(args=(logits, torch.zeros(3, 5, dtype=torch.long), 0), label="整批都是填充"),
        Case(args=(single, torch.full((1, 4), -100), -100), label="整批都是填充，pad_id=-100"),
    ]
    rng = random.Random(11)
    for _ in range(3):
        b, t, v = rng.randint(1, 4), rng.randint(1, 6), rng.randint(2, 10)
        pad_id = rng.choice([0, v - 1, -100])
        x = torch.randn(b, t, v, generator=g) * rng.choice([1.0, 3.0])
        y = torch.randint(0, v, (b, t), generator=g)
        y[torch.rand(b, t, generator=g) < 0.3] = pad_id
        y[0, 0] = (pad_id + 1) % v  # at least one real token
        cases.append(
            Case(args=(x, y, pad_id), label=f"随机输入 (B, T, V) = {(b, t, v)}，pad_id={pad_id}")
        )
    return cases


register(
    Exercise(
        id="training.masked_cross_entropy",
        chapter=5,
        title="忽略填充的逐符号交叉熵",
        prompt=(
            "写函数 masked_cross_entropy(logits, labels, pad_id)：logits 形状 (B, T, V) (float32)，"
            "labels 形状 (B, T) (int64)。\n"
            "对每个 labels 不等于 pad_id 的位置算交叉熵（正确答案那个符号的负对数概率），"
            "再对这些位置取平均；"
            "填充位置既不贡献损失，也不计入分母。\n"
            "pad_id 可以是词表里的 id（如 0），也可以在词表之外（如 -100，PyTorch 的惯例，"
            "这时填充位置的 label 不是合法下标）。整批都是填充（没有真实符号）时返回 0。"
        ),
        hint=(
            "先得到每个位置上正确答案那个符号的对数概率，再只对真实符号求平均：分子、分母都只算它们。"
            "填充位置的 label 可能不能当下标用，取值前先处理；没有真实符号时要避免 0/0。"
        ),
        explanation=(
            "log_probs = torch.log_softmax(logits, -1)；keep = labels != pad_id；"
            "nll = -log_probs.gather(-1, labels.where(keep, 0).unsqueeze(-1)).squeeze(-1)；"
            "loss = (nll * keep).sum() / keep.sum().clamp(min=1)。"
        ),
        kind="function",
        returns=Real(),
        cases=_masked_ce_cases,
        reference=reference_masked_cross_entropy,
        # the chapter's cell after the exercise computes this with them: write it out instead
        forbidden=(
            "torch.nn.functional.cross_entropy",
            "torch.nn.functional.nll_loss",
            "lecturekit.training.losses.label_smoothed_nll",
        ),
    )
)

# --------------------------------------------------------------------------------------
# training.noam_lr (Vaswani et al. 2017, section 5.3)
# --------------------------------------------------------------------------------------


def reference_noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``, steps counted from 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def _noam_cases() -> list[Case]:
    settings = [
        (1, 512, 4000),
        (100, 512, 4000),
        (4000, 512, 4000),
        (20000, 512, 4000),
        (50, 64, 100),
        (300, 64, 100),
        (7, 16, 1),
    ]
    rng = random.Random(12)
    drawn = []
    for _ in range(4):
        warmup = rng.randint(1, 5000)
        drawn.append((rng.randint(1, 3 * warmup), rng.choice([64, 256, 512, 1024]), warmup))
    return [
        Case(args=s, label=f"{prefix}step={s[0]}, d_model={s[1]}, warmup={s[2]}")
        for prefix, group in (("", settings), ("随机：", drawn))
        for s in group
    ]


register(
    Exercise(
        id="training.noam_lr",
        chapter=5,
        title="论文的学习率调度：预热 (warmup) 后按 1/√step 衰减",
        prompt=(
            "写函数 noam_lr(step, d_model, warmup_steps)，返回论文 5.3 节式 (3) 的学习率 lrate"
            "（本章“论文的公式”一节），warmup_steps 是公式里的 warmup。\n"
            "三个参数都是正整数，step 从 1 开始；测试包括 step = 1、step = warmup_steps 和 warmup_steps = 1。"
        ),
        hint=(
            "两项里一项随 step 上升、一项随 step 下降；取较小的那一项，就得到先升后降的曲线，"
            "转折点在 step 等于 warmup_steps 的地方。别漏掉与 step 无关的那个缩放因子。"
        ),
        explanation="d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)。",
        kind="function",
        returns=Real(),
        cases=_noam_cases,
        reference=reference_noam_lr,
        forbidden=("lecturekit.training.schedules.noam_lr",),  # the chapter imports it
    )
)
