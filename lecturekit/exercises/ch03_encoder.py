"""Chapter 3 (encoder, slides p16-p21) exercises: LayerNorm by hand, batch statistics that skip
padding, and the parameter count of one encoder block."""

from __future__ import annotations

import torch

from lecturekit.exercises import Case, Exercise, register

# --------------------------------------------------------------------------------------
# encoder.layernorm (p19)
# --------------------------------------------------------------------------------------


def reference_layernorm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm without the learned scale and shift: normalise each vector ``x[..., :]`` over
    its last dimension with the population variance (p19), ``(..., D) -> (..., D)``."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def _ln_unbiased_variance(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)


def _ln_over_batch_axis(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    # BatchNorm's axis: statistics across samples, per feature
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def _ln_divide_by_variance(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / (((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)


def _ln_without_eps(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / ((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()


def _layernorm_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    return [
        Case(args=(torch.tensor([[1.0, 2.0, 3.0, 4.0]]),), label="讲义的例子 [1, 2, 3, 4]"),
        Case(
            args=(torch.tensor([[2.0, 4.0, 6.0, 8.0], [1.0, 10.0, 3.0, 14.0]]),), label="两个 token"
        ),
        Case(args=(torch.randn(2, 5, 16, generator=g) * 3 + 1,), label="(B, T, D) = (2, 5, 16)"),
        Case(
            args=(torch.tensor([[5.0, 5.0, 5.0, 5.0], [0.0, 1.0, 0.0, 1.0]]),), label="一行全相等"
        ),
    ]


register(
    Exercise(
        id="encoder.layernorm",
        chapter=3,
        title="手写 LayerNorm",
        prompt=(
            "写函数 layernorm(x, eps=1e-5)：对 x 的最后一维（一个 token 的 D 个特征）做归一化，\n"
            "x' = (x - m) / sqrt(σ² + eps)，m 和 σ² 是这 D 个数的均值和（总体）方差（讲义 p19）。\n"
            "不需要可学习的 γ、β；x 可以是 (N, D) 或 (B, T, D)，返回同样形状。"
        ),
        hint=(
            "统计量沿 dim=-1 计算并 keepdim=True；总体方差是 ((x - m)**2).mean(-1)，"
            "而 x.var() 默认除以 D - 1；eps 加在方差上，再开平方根。"
        ),
        kind="function",
        cases=_layernorm_cases,
        reference=reference_layernorm,
        wrong_answers=[
            _ln_unbiased_variance,
            _ln_over_batch_axis,
            _ln_divide_by_variance,
            _ln_without_eps,
        ],
    )
)

# --------------------------------------------------------------------------------------
# encoder.masked_feature_mean (BatchNorm statistics on a padded batch)
# --------------------------------------------------------------------------------------


def reference_masked_feature_mean(x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    """Per-feature mean over the real (non-padding) tokens of a batch.

    x ``(B, T, D)``, padding_mask bool ``(B, T)`` (True = padding) -> ``(D,)``.
    """
    keep = (~padding_mask).unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * keep).sum(dim=(0, 1)) / keep.sum()


def _masked_mean_including_padding(x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    return x.mean(dim=(0, 1))


def _masked_mean_divides_by_all(x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
    return (x * keep).sum(dim=(0, 1)) / (x.shape[0] * x.shape[1])


def _masked_mean_keeps_padding(x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    # inverted mask convention: averages the padding instead of the tokens
    keep = padding_mask.unsqueeze(-1).to(x.dtype)
    return (x * keep).sum(dim=(0, 1)) / keep.sum().clamp(min=1)


def _masked_mean_per_sentence(x: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    # mean of per-sentence means: short sentences get the same weight as long ones
    keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
    return ((x * keep).sum(dim=1) / keep.sum(dim=1)).mean(dim=0)


def _masked_mean_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, 4, generator=g) + 2.0
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6)[None, :] >= lengths[:, None]  # (3, 6) True = padding
    x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # padded positions hold zeros, as after padding
    one = torch.tensor([[[1.0, 10.0], [3.0, 14.0], [0.0, 0.0]]])
    one_mask = torch.tensor([[False, False, True]])
    return [
        Case(args=(one, one_mask), label="一个句子，2 个 token + 1 个 padding"),
        Case(args=(x, mask), label="3 个句子，长度 6、2、4"),
    ]


register(
    Exercise(
        id="encoder.masked_feature_mean",
        chapter=3,
        title="跳过 padding 的逐特征均值（BatchNorm 的统计量）",
        prompt=(
            "写函数 masked_feature_mean(x, padding_mask)：x 的形状是 (B, T, D)，padding_mask 是 (B, T) 的 bool，\n"
            "True 表示该位置是 padding。返回形状 (D,) 的张量：每个特征在这一批所有**真实 token** 上的均值。\n"
            "这正是 BatchNorm 在变长序列上应当使用、却常被 padding 污染的统计量。"
        ),
        hint=(
            "先把 mask 取反得到“保留”的位置，扩成 (B, T, 1)；对 x * keep 在 dim=(0, 1) 上求和，"
            "再除以真实 token 的个数 keep.sum()，而不是 B * T。"
        ),
        kind="function",
        cases=_masked_mean_cases,
        reference=reference_masked_feature_mean,
        wrong_answers=[
            _masked_mean_including_padding,
            _masked_mean_divides_by_all,
            _masked_mean_keeps_padding,
            _masked_mean_per_sentence,
        ],
    )
)

# --------------------------------------------------------------------------------------
# encoder.layer_parameters (p18-p19)
# --------------------------------------------------------------------------------------


def reference_layer_parameters(d_model: int, d_ff: int) -> int:
    """Parameters of one encoder block: multi-head attention (4 d^2 + 4 d), FFN
    (2 d d_ff + d_ff + d) and two LayerNorms (2 x 2 d)."""
    attention = 4 * d_model * d_model + 4 * d_model
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norms = 2 * 2 * d_model
    return attention + ffn + norms


def _layer_without_norms(d_model: int, d_ff: int) -> int:
    return 4 * d_model * d_model + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model


def _layer_weights_only(d_model: int, d_ff: int) -> int:
    return 4 * d_model * d_model + 2 * d_model * d_ff


def _layer_one_ffn_matrix(d_model: int, d_ff: int) -> int:
    return 4 * d_model * d_model + 4 * d_model + d_model * d_ff + d_ff + 4 * d_model


register(
    Exercise(
        id="encoder.layer_parameters",
        chapter=3,
        title="一个编码器 block 的参数量",
        prompt=(
            "写函数 layer_parameters(d_model, d_ff)，返回一个编码器 block（lecturekit.EncoderLayer 或\n"
            "torch.nn.TransformerEncoderLayer：多头自注意力 + FFN + 两个 LayerNorm，全部带偏置）的参数个数（int）。\n"
            "头数不影响答案。"
        ),
        hint=(
            "三部分相加：注意力 4d² + 4d；FFN 两个线性层 d→d_ff→d，权重 2·d·d_ff，偏置 d_ff + d；"
            "每个 LayerNorm 有 γ 和 β 各 d 个，一共两个 LayerNorm。"
        ),
        kind="function",
        cases=lambda: [
            Case(args=(512, 2048), label="d_model=512, d_ff=2048（论文 base）"),
            Case(args=(64, 256), label="d_model=64, d_ff=256"),
            Case(args=(768, 3072), label="d_model=768, d_ff=3072（BERT-base）"),
        ],
        reference=reference_layer_parameters,
        wrong_answers=[_layer_without_norms, _layer_weights_only, _layer_one_ffn_matrix],
    )
)
