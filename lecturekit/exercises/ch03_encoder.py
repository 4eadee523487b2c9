"""Chapter 3 (encoder, slides p16-p21) exercises: LayerNorm by hand, batch statistics that skip
padding, the parameter count of one encoder block, the key padding mask of a padded batch,
and a Pre-LN encoder block built from its sub-layers."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array, Integer
from lecturekit.model.config import LayerConfig
from lecturekit.model.layers import EncoderLayer

# --------------------------------------------------------------------------------------
# encoder.layernorm (p19)
# --------------------------------------------------------------------------------------


def reference_layernorm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm without the learned scale and shift: normalise each vector ``x[..., :]`` over
    its last dimension with the population variance (p19), ``(..., D) -> (..., D)``."""
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1)
    return (x - mean) / torch.sqrt(var + eps)


def _layernorm_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    # spread ~1e-3: the variance (~1e-6) is comparable to eps, so where eps goes matters
    tiny = torch.randn(3, 8, generator=g) * 1e-3
    cases = [
        Case(args=(torch.tensor([[1.0, 2.0, 3.0, 4.0]]),), label="p19 的例子 [1, 2, 3, 4]"),
        Case(
            args=(torch.tensor([[2.0, 4.0, 6.0, 8.0], [1.0, 10.0, 3.0, 14.0]]),), label="两个符号"
        ),
        Case(
            args=(torch.tensor([[5.0, 5.0, 5.0, 5.0], [0.0, 1.0, 0.0, 1.0]]),), label="一行全相等"
        ),
        Case(args=(tiny,), label="方差很小（约 1e-6，与 eps 相当）"),
        Case(args=(tiny,), kwargs={"eps": 1e-3}, label="方差很小，eps=1e-3"),
        Case(args=(torch.tensor([[1.0, 2.0, 3.0, 4.0]]),), kwargs={"eps": 0.5}, label="eps=0.5"),
    ]
    rng = random.Random(5)
    for _ in range(3):
        shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2))) + (rng.randint(2, 16),)
        x = torch.randn(shape, generator=g) * rng.choice([0.01, 1.0, 5.0]) + rng.uniform(-3, 3)
        eps = rng.choice([1e-5, 1e-3, 0.1])
        cases.append(Case(args=(x,), kwargs={"eps": eps}, label=f"随机输入 {shape}，eps={eps:g}"))
    return cases


register(
    Exercise(
        id="encoder.layernorm",
        chapter=3,
        title="手写层归一化 (LayerNorm)",
        prompt=(
            "写函数 layernorm(x, eps=1e-5)：对 x 的最后一维（一个符号的 D 个特征）做 p19 的"
            "层归一化，结果与不带 γ、β 的 torch.nn.LayerNorm 相同：\n"
            "方差用总体方差（除以 D），eps 的用法也按 torch 的约定。x 是 float32，形状 (..., D)，例如 (T, D) 或 (B, T, D)。\n"
            "测试会用关键字传入别的 eps（例如 eps=0.5），也有方差很小的行；"
            "一行全相等时方差为 0，这一行的结果是 0。"
        ),
        hint=(
            "统计量是每个符号自己的：沿最后一维计算，并保持维度以便广播。总体方差除以 D，"
            "而 torch 的 var 默认不是。eps 在开平方之前加到方差上，而且要用传进来的那个 eps。"
        ),
        explanation=(
            "m = x.mean(-1, keepdim=True)；σ² = ((x - m) ** 2).mean(-1, keepdim=True)；"
            "x' = (x - m) / torch.sqrt(σ² + eps)。"
        ),
        kind="function",
        returns=Array("float32", "(..., D)"),
        cases=_layernorm_cases,
        reference=reference_layernorm,
        forbidden=("torch.nn.functional.layer_norm", "torch.layer_norm"),
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


def _padded(x: torch.Tensor, lengths: list[int], fill: torch.Tensor | float) -> tuple:
    """(x with padding positions set to ``fill``, the bool padding mask)."""
    mask = torch.arange(x.shape[1])[None, :] >= torch.tensor(lengths)[:, None]  # (B, T)
    return torch.where(mask.unsqueeze(-1), fill, x), mask


def _masked_mean_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    one = torch.tensor([[[1.0, 10.0], [3.0, 14.0], [0.0, 0.0]]])
    cases = [
        Case(
            args=(one, torch.tensor([[False, False, True]])),
            label="一个句子，2 个符号 + 1 个填充（填充处是 0）",
        )
    ]
    x = torch.randn(3, 6, 4, generator=g) + 2.0
    garbage = torch.randn(3, 6, 4, generator=g) * 5 + 7  # padding need not hold zeros
    cases.append(
        Case(args=_padded(x, [6, 2, 4], garbage), label="3 个句子，长度 6、2、4，填充处不是 0")
    )
    cases.append(Case(args=_padded(x, [0, 5, 1], garbage), label="第一句整句都是填充"))
    cases.append(Case(args=_padded(x, [6, 6, 6], garbage), label="没有填充"))
    rng = random.Random(6)
    for _ in range(3):
        b, t, d = rng.randint(1, 4), rng.randint(1, 7), rng.randint(1, 5)
        lengths = [rng.randint(0, t) for _ in range(b)]
        lengths[rng.randrange(b)] = rng.randint(1, t)  # at least one real token
        x = torch.randn(b, t, d, generator=g) * 3 + rng.uniform(-2, 2)
        noise = torch.randn(b, t, d, generator=g) * 10
        cases.append(
            Case(
                args=_padded(x, lengths, noise),
                label=f"随机输入 (B, T, D) = {(b, t, d)}，长度 {lengths}",
            )
        )
    return cases


register(
    Exercise(
        id="encoder.masked_feature_mean",
        chapter=3,
        title="跳过填充的逐特征均值（批归一化的统计量）",
        prompt=(
            "写函数 masked_feature_mean(x, padding_mask)：x 的形状是 (B, T, D) (float32)，"
            "padding_mask 是 (B, T) 的 bool 张量，True 表示该位置是填充 (padding)。\n"
            "返回每个特征在这一批所有**真实符号**上的均值（所有句子的真实符号放在一起平均）。"
            "这是批归一化 (BatchNorm) 在变长序列上更合理的（跳过填充的）统计量；不跳过时，它会被填充污染。\n"
            "填充位置上的 x 可以是任意有限值（不一定是 0）；有的句子没有填充，也可能整句都是填充，"
            "但整批至少有一个真实符号。"
        ),
        hint=(
            "填充既不能进分子，也不能进分母：求和时把填充位置排除掉，除数是真实符号的个数，"
            "不是 B·T。不要先对每句求平均再平均，那样短句的符号权重更大。"
        ),
        explanation=(
            "keep = ~padding_mask；均值 = (x * keep[..., None]).sum(dim=(0, 1)) / keep.sum()，"
            "也可以写成 x[keep].mean(dim=0)（布尔下标取出所有真实符号，形状 (n, D)）。"
        ),
        kind="function",
        returns=Array("float32", "(D,)"),
        cases=_masked_mean_cases,
        reference=reference_masked_feature_mean,
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


def _layer_cases() -> list[Case]:
    cases = [
        Case(args=(512, 2048), label="d_model=512, d_ff=2048（论文 base）"),
        Case(args=(64, 256), label="d_model=64, d_ff=256"),
        Case(args=(768, 3072), label="d_model=768, d_ff=3072 (BERT-base)"),
    ]
    rng = random.Random(7)
    for _ in range(3):
        d_model, d_ff = rng.randint(1, 300), rng.randint(1, 1000)
        cases.append(Case(args=(d_model, d_ff), label=f"随机：d_model={d_model}, d_ff={d_ff}"))
    return cases


register(
    Exercise(
        id="encoder.layer_parameters",
        chapter=3,
        title="一个编码器层的参数量",
        prompt=(
            "写函数 layer_parameters(d_model, d_ff)，返回一个编码器层（lecturekit.EncoderLayer 或\n"
            "torch.nn.TransformerEncoderLayer：多头自注意力 + FFN + 两个 LayerNorm，全部带偏置）"
            "的参数个数。d_model、d_ff 是正整数（d_ff 不一定是 4·d_model），头数不影响答案。"
        ),
        hint=(
            "分三部分数：注意力、两层的 FFN、两个 LayerNorm。每个线性层既有权重也有偏置，"
            "每个 LayerNorm 有两组可学习的参数。可以数一个真实模块的参数来验证。"
        ),
        explanation=(
            "注意力 4d² + 4d；FFN 两个线性层 d→d_ff→d：权重 2·d·d_ff，偏置 d_ff + d；"
            "两个 LayerNorm 各有 γ、β 共 2d 个参数。合计 4d² + 4d + 2·d·d_ff + d_ff + d + 4d。"
        ),
        kind="function",
        returns=Integer(),
        cases=_layer_cases,
        reference=reference_layer_parameters,
    )
)

# --------------------------------------------------------------------------------------
# encoder.key_padding_mask: the padding mask a padded batch of sources needs
# --------------------------------------------------------------------------------------


def reference_key_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool ``(B, S)``, True where ``tokens (B, S)`` is padding (torch's
    ``src_key_padding_mask``); the same as ``lecturekit.model.masks.padding_mask``."""
    return tokens == pad_id


def _key_padding_cases() -> list[Case]:
    cases = [
        Case(args=(torch.tensor([[5, 6, 7, 0, 0], [8, 9, 4, 3, 2]]), 0), label="句末补 <pad>"),
        Case(args=(torch.tensor([[4, 5, 6], [7, 8, 9]]), 0), label="没有填充"),
        Case(args=(torch.tensor([[0, 0, 5, 6], [0, 7, 8, 9]]), 0), label="填充在句首（左补齐）"),
        Case(args=(torch.tensor([[3, 3, 3], [5, 3, 3]]), 3), label="pad_id=3，第一句整句都是填充"),
        Case(args=(torch.tensor([[1, -100, -100]]), -100), label="pad_id=-100（词表之外）"),
        Case(args=(torch.tensor([[7]]), 7), label="B = S = 1"),
    ]
    g = torch.Generator().manual_seed(31)
    rng = random.Random(31)
    for _ in range(3):
        b, s, pad_id = rng.randint(1, 4), rng.randint(1, 8), rng.choice([0, 1, 2, -100])
        tokens = torch.randint(3, 20, (b, s), generator=g)
        tokens[torch.rand(b, s, generator=g) < 0.4] = pad_id
        cases.append(
            Case(args=(tokens, pad_id), label=f"随机输入 (B, S) = {(b, s)}，pad_id={pad_id}")
        )
    return cases


register(
    Exercise(
        id="encoder.key_padding_mask",
        chapter=3,
        title="为补齐的一批句子构造填充掩码 (padding mask)",
        prompt=(
            "一批长短不一的句子补齐成 tokens（形状 (B, S)，int64）后送进编码器，注意力不能分给填充。"
            "写函数 key_padding_mask(tokens, pad_id)：返回形状 (B, S) 的 bool 张量，按 PyTorch 的约定"
            "（torch.nn.Transformer 的 src_key_padding_mask），True 表示这个位置的 key 被遮住，"
            "False 表示正常参与注意力。\n"
            "填充可以在句末，也可以在句首；一句可以没有填充，也可以整句都是填充；"
            "pad_id 可以是任意整数（例如 3 或 -100）。"
        ),
        hint=(
            "掩码只回答一个问题：这个位置是不是填充。留意约定：有的教程用 True 表示“可以看”，"
            "PyTorch 用 True 表示“遮住”。形状就是 (B, S)，把它变成能广播到分数矩阵的形状，"
            "是注意力层自己的事。"
        ),
        explanation=(
            "tokens == pad_id，形状 (B, S)，dtype bool，与 lecturekit.model.masks.padding_mask 相同。"
            "注意力层把它变成 (B, 1, 1, S) 广播到每个头、每个 query：被遮住的列在 softmax 之前"
            "设为 -inf。"
        ),
        kind="function",
        returns=Array("bool", "(B, S)"),
        cases=_key_padding_cases,
        reference=reference_key_padding_mask,
        forbidden=("lecturekit.model.masks.padding_mask",),
    )
)

# --------------------------------------------------------------------------------------
# encoder.pre_ln_block: one Pre-LN encoder block from its sub-layers
# --------------------------------------------------------------------------------------


class _Sublayer:
    """A sub-layer handed to the student: a named function ``(B, S, D) -> (B, S, D)``.

    Copies are the object itself (it holds no state the answer may change), so the checker's
    snapshot of the inputs compares equal.
    """

    def __init__(self, name: str, function: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.name, self.function = name, function

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)

    def __deepcopy__(self, memo: dict) -> _Sublayer:
        return self

    def __repr__(self) -> str:
        return self.name


def reference_pre_ln_block(
    x: torch.Tensor,
    self_attention: Callable[[torch.Tensor], torch.Tensor],
    ffn: Callable[[torch.Tensor], torch.Tensor],
    norm1: Callable[[torch.Tensor], torch.Tensor],
    norm2: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Pre-LN block ``x + sublayer(norm(x))`` twice, ``(B, S, D) -> (B, S, D)``: the forward of
    ``EncoderLayer(norm_first=True)`` (dropout off)."""
    x = x + self_attention(norm1(x))  # (B, S, D)
    return x + ffn(norm2(x))  # (B, S, D)


def _pre_ln_layers() -> list[tuple[EncoderLayer, torch.Tensor, torch.Tensor | None, str]]:
    """The hidden cases' layers: ``(EncoderLayer(norm_first=True), x, padding mask, label)``."""
    rng = random.Random(32)
    sizes = [(2, 4, 8, 2, 16, [4, 2]), (1, 3, 4, 1, 8, None), (1, 1, 6, 3, 12, None)]
    for _ in range(3):
        b, s, h = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 3)
        lengths = [rng.randint(1, s) for _ in range(b)]
        sizes.append((b, s, 2 * h, h, rng.randint(2, 16), lengths))
    layers = []
    for i, (b, s, d, h, d_ff, lengths) in enumerate(sizes):
        with torch.random.fork_rng(devices=[]):  # seeded, without touching the caller's RNG
            torch.manual_seed(33 + i)
            config = LayerConfig(d, h, d_ff, dropout=0.0, norm_first=True)
            layer = EncoderLayer(config).eval()
            with torch.no_grad():  # LayerNorms away from (1, 0), so norm1 and norm2 differ
                for p in layer.parameters():
                    p.add_(torch.randn_like(p) * 0.3)
            x = torch.randn(b, s, d) * 2
        mask = (
            None if lengths is None else torch.arange(s)[None, :] >= torch.tensor(lengths)[:, None]
        )
        what = f"(B, S, D) = {(b, s, d)}，{h} 个头，d_ff = {d_ff}"
        label = f"{'随机：' if i >= 3 else ''}{what}" + (
            "" if mask is None else f"，长度 {lengths}"
        )
        layers.append((layer, x, mask, label))
    return layers


def _pre_ln_cases() -> list[Case]:
    cases = []
    for layer, x, mask, label in _pre_ln_layers():

        def attend(h: torch.Tensor, layer: EncoderLayer = layer, mask: Any = mask) -> torch.Tensor:
            return layer.self_attn(h, h, h, key_padding_mask=mask)[0]

        sublayers = [
            _Sublayer("self_attention", attend),
            _Sublayer("ffn", layer.ffn),
            _Sublayer("norm1", layer.norm1),
            _Sublayer("norm2", layer.norm2),
        ]
        cases.append(Case(args=(x, *sublayers), label=label))
    return cases


register(
    Exercise(
        id="encoder.pre_ln_block",
        chapter=3,
        title="搭一个前置层归一化 (Pre-LN) 的编码器层",
        prompt=(
            "写函数 pre_ln_block(x, self_attention, ffn, norm1, norm2)：x 是编码器层的输入，"
            "形状 (B, S, D)，float32；其余四个参数是这一层已经建好的子层，每个都是函数，"
            "输入输出形状都是 (B, S, D)：self_attention（多头自注意力，已经带上了这批句子的"
            "填充掩码）、ffn（逐位置前馈网络）、norm1 和 norm2（两个参数不同的 LayerNorm，"
            "norm1 配注意力，norm2 配 FFN）。\n"
            "按前置层归一化 (Pre-LN) 的顺序把它们连成一层：层归一化放在子层之前，"
            "即 torch 的 norm_first=True；"
            "返回这一层的输出 (B, S, D)。层的最后不再额外归一化（那是整个编码器栈最后的事）；"
            "不需要 dropout。"
        ),
        hint=(
            "前置与后置层归一化的区别只在归一化放在哪里：前置时，子层读的是归一化过的输入，"
            "而残差那条路上流动的始终是没有归一化的向量。两个子层各有自己的归一化，"
            "第二个子层要用第一个子层加回残差之后的结果。"
        ),
        explanation=(
            "x = x + self_attention(norm1(x))；x = x + ffn(norm2(x))；返回 x。"
            "后置层归一化 (Post-LN) 是论文和 p21 的设计：x = norm1(x + self_attention(x))；"
            "x = norm2(x + ffn(x))。先写 x = norm1(x) 再写 x = x + self_attention(x)"
            "（先归一化、再加残差）也不对：那样残差流本身被归一化了。"
        ),
        kind="function",
        returns=Array("float32", "(B, S, D)"),
        cases=_pre_ln_cases,
        reference=reference_pre_ln_block,
        forbidden=("lecturekit.model.layers.EncoderLayer.forward",),
    )
)
