"""Chapter 3 exercise ``encoder.layer``: a whole Post-LN encoder layer (slides p18-p21)
assembled from the reader's own pieces, then trained.

The answer is a function of the layer's input, its padding mask and a dict of its weights.
Its forward results are compared, in float64, with ``lecturekit.EncoderLayer`` run with the
same weights; a last case (a ``Case.harness``) builds a 2-layer encoder from it and trains it
on sequence reversal, so an answer whose gradient does not reach the weights fails too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array
from lecturekit.model.config import LayerConfig
from lecturekit.model.layers import EncoderLayer, SinusoidalPositionalEncoding

__all__ = [
    "ACCURACY_BAR",
    "TRAIN_STEPS",
    "WEIGHT_NAMES",
    "encoder_layer",
    "layer_weights",
    "reference_encoder_layer",
    "train_reversal",
]

# the task's name of each weight -> the parameter of lecturekit.EncoderLayer that holds it
WEIGHT_NAMES = {
    "w_qkv": "self_attn.qkv_proj.weight",
    "b_qkv": "self_attn.qkv_proj.bias",
    "w_o": "self_attn.out_proj.weight",
    "b_o": "self_attn.out_proj.bias",
    "w1": "ffn.linear1.weight",
    "b1": "ffn.linear1.bias",
    "w2": "ffn.linear2.weight",
    "b2": "ffn.linear2.bias",
    "gamma1": "norm1.weight",
    "beta1": "norm1.bias",
    "gamma2": "norm2.weight",
    "beta2": "norm2.bias",
}

# the training case: a 2-layer encoder (D = 16, 2 heads, d_ff = 32) learns to reverse
# sequences of 5 symbols out of 8; the model answer reaches 100% on 20 of 20 seeds
TRAIN_STEPS, ACCURACY_BAR = 200, 0.9
# the training case may take this many times a case's time limit: 200 steps take about 2 s on
# one idle core and several times that on a busy laptop (or a test machine running two checks)
TRAIN_TIME_FACTOR = 6.0
_TRAIN_SIZES = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_layers": 2, "vocab": 8, "length": 5}


def reference_encoder_layer(
    x: torch.Tensor, padding_mask: torch.Tensor, weights: dict[str, torch.Tensor], n_heads: int
) -> torch.Tensor:
    """The expected result: ``lecturekit.EncoderLayer`` (Post-LN, no dropout) run with
    ``weights`` in place of its parameters. x ``(B, S, D)``, padding_mask bool ``(B, S)``
    (True = padding) -> ``(B, S, D)``; differentiable in ``weights``."""
    d_ff, d_model = weights["w1"].shape
    with torch.device("meta"):  # the module only lends its forward: no weights of its own
        layer = EncoderLayer(LayerConfig(d_model, n_heads, d_ff, dropout=0.0))
    parameters = {name: weights[key] for key, name in WEIGHT_NAMES.items()}
    return torch.func.functional_call(
        layer, parameters, (x,), {"src_key_padding_mask": padding_mask}
    )


def encoder_layer(
    x: torch.Tensor, padding_mask: torch.Tensor, weights: dict[str, torch.Tensor], n_heads: int
) -> torch.Tensor:
    """The model answer: one Post-LN encoder layer (p19) from its pieces, ``(B, S, D) ->
    (B, S, D)``; padding_mask ``(B, S)``, True = a padded key nobody attends to."""
    w = weights
    batch, length, d_model = x.shape
    head_dim = d_model // n_heads

    def layer_norm(h, gamma, beta, eps=1e-5):  # encoder.layernorm, then the learned γ and β
        mean = h.mean(dim=-1, keepdim=True)
        var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + eps) * gamma + beta

    def split_heads(t):  # attention.split_heads: (B, S, D) -> (B, H, S, Dh)
        return t.reshape(batch, length, n_heads, head_dim).transpose(1, 2)

    # 1. multi-head self attention (attention.multi_head) with the padded keys masked out
    q, k, v = (split_heads(t) for t in (x @ w["w_qkv"].T + w["b_qkv"]).chunk(3, dim=-1))
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, S, S)
    scores = scores.masked_fill(padding_mask[:, None, None, :], float("-inf"))
    heads = scores.softmax(dim=-1) @ v  # (B, H, S, Dh)
    z = heads.transpose(1, 2).reshape(batch, length, d_model) @ w["w_o"].T + w["b_o"]
    # 2. add the sub-layer's input back (residual), then LayerNorm: Post-LN
    x1 = layer_norm(x + z, w["gamma1"], w["beta1"])  # (B, S, D)
    # 3. the position-wise FFN, again residual then LayerNorm
    f = torch.relu(x1 @ w["w1"].T + w["b1"]) @ w["w2"].T + w["b2"]  # (B, S, D)
    return layer_norm(x1 + f, w["gamma2"], w["beta2"])


def layer_weights(
    d_model: int, n_heads: int, d_ff: int, *, seed: int, spread: float = 0.0
) -> dict[str, torch.Tensor]:
    """The float64 weights of a freshly initialised ``EncoderLayer``, by the task's names,
    each moved by ``spread`` times a standard normal draw (so that LayerNorm's γ and β and the
    biases are not 1 and 0). Seeded without touching the caller's random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = EncoderLayer(LayerConfig(d_model, n_heads, d_ff, dropout=0.0))
        parameters = dict(layer.named_parameters())
        return {
            key: (p + spread * torch.randn_like(p)).detach().double()
            for key, p in ((key, parameters[name]) for key, name in WEIGHT_NAMES.items())
        }


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run on one thread (the result must not depend on the machine's thread count)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _Adam:
    """Adam (Kingma & Ba, 2015) with its default betas, written out: ``torch.optim`` imports
    ``torch._dynamo`` on first use, which replaces ``torch.manual_seed`` and would look to the
    checker as if the answer had replaced it."""

    def __init__(self, tensors: list[torch.Tensor], lr: float) -> None:
        self.tensors, self.lr, self.count = tensors, lr, 0
        self.mean = [torch.zeros_like(t) for t in tensors]
        self.square = [torch.zeros_like(t) for t in tensors]

    def step(self, grads: tuple[torch.Tensor | None, ...]) -> None:
        """Move each tensor by Adam's step for its gradient (None: no gradient, no step)."""
        self.count += 1
        fix_mean, fix_square = 1 - 0.9**self.count, 1 - 0.999**self.count
        with torch.no_grad():
            for t, g, m, v in zip(self.tensors, grads, self.mean, self.square, strict=True):
                if g is None:
                    continue
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                t.sub_(self.lr * (m / fix_mean) / ((v / fix_square).sqrt() + 1e-8))


def train_reversal(
    layer: Callable[..., torch.Tensor], *, steps: int = TRAIN_STEPS, seed: int = 0
) -> float:
    """Train a 2-layer encoder whose layers are ``layer(x, padding_mask, weights, n_heads)``
    to reverse sequences; return its accuracy on 256 new sequences (a fraction).

    Batches of 64 sequences of 5 symbols out of 8 are embedded (times √D, plus the sinusoidal
    positions), pass two layers whose weights start as ``EncoderLayer``'s, and a linear
    read-out predicts at position ``t`` the symbol at ``4 - t``; Adam, lr 0.01, float64, no
    padding. Deterministic: seeded by ``seed`` (the caller's random state is left as it was),
    on one thread.
    """
    s = _TRAIN_SIZES
    d_model, n_heads, vocab, length = s["d_model"], s["n_heads"], s["vocab"], s["length"]
    with torch.random.fork_rng(devices=[]), _one_thread():
        torch.manual_seed(seed)
        stack = [
            layer_weights(d_model, n_heads, s["d_ff"], seed=seed + i) for i in range(s["n_layers"])
        ]
        embed = torch.randn(vocab, d_model, dtype=torch.float64) / math.sqrt(d_model)
        readout = torch.randn(vocab, d_model, dtype=torch.float64) / math.sqrt(d_model)
        bias = torch.zeros(vocab, dtype=torch.float64)
        learned = [embed, readout, bias, *(w for weights in stack for w in weights.values())]
        for tensor in learned:
            tensor.requires_grad_()
        positions = SinusoidalPositionalEncoding(d_model, length).encoding(length).double()
        data = torch.Generator().manual_seed(seed)

        def logits(tokens: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
            x = embed[tokens] * math.sqrt(d_model) + positions  # (B, T, D)
            no_padding = torch.zeros(tokens.shape, dtype=torch.bool)
            for weights in stack:
                x = layer(x, no_padding, weights, n_heads)
            return x @ readout.T + bias

        adam = _Adam(learned, lr=0.01)
        for _ in range(steps):
            tokens = torch.randint(0, vocab, (64, length), generator=data)
            loss = F.cross_entropy(logits(tokens).reshape(-1, vocab), tokens.flip(1).reshape(-1))
            adam.step(torch.autograd.grad(loss, learned, allow_unused=True))
        with torch.no_grad():
            tokens = torch.randint(0, vocab, (256, length), generator=data)
            hits = logits(tokens).argmax(dim=-1) == tokens.flip(1)  # (256, T)
        return hits.double().mean().item()


def _reversal_trial(layer: Callable[..., torch.Tensor]) -> Callable[[int, int], torch.Tensor]:
    """The training case's harness: ``trial(steps, seed)`` returns ``train_reversal``'s accuracy
    capped at ``ACCURACY_BAR`` (a float64 0-d tensor), so every layer that reaches the bar
    gives the bar and one that does not shows how far it got."""

    def trial(steps: int, seed: int) -> torch.Tensor:
        accuracy = train_reversal(layer, steps=steps, seed=seed)
        return torch.tensor(min(accuracy, ACCURACY_BAR), dtype=torch.float64)

    return trial


def _padding(lengths: list[int], length: int, *, left: bool = False) -> torch.Tensor:
    """Bool ``(B, S)``, True on the padding of sentences of ``lengths`` padded to ``length``."""
    position = torch.arange(length)[None, :]
    real = torch.tensor(lengths)[:, None]
    return position < length - real if left else position >= real


def _layer_case(
    batch: int, d_model: int, n_heads: int, d_ff: int, mask: torch.Tensor, label: str, seed: int
) -> Case:
    weights = layer_weights(d_model, n_heads, d_ff, seed=seed, spread=0.3)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, mask.shape[1], d_model, generator=g, dtype=torch.float64) * 2
    sizes = f"(B, S, D) = {(batch, mask.shape[1], d_model)}，{n_heads} 个头，d_ff = {d_ff}"
    return Case(args=(x, mask, weights, n_heads), label=f"{label}{sizes}")


def _layer_cases() -> list[Case]:
    none = torch.zeros
    cases = [
        _layer_case(1, 8, 2, 16, none(1, 4, dtype=torch.bool), "没有填充，", 40),
        _layer_case(2, 8, 2, 16, _padding([5, 3], 5), "句末有填充（长度 5、3），", 41),
        _layer_case(2, 6, 1, 12, _padding([4, 2], 4, left=True), "1 个头，句首有填充，", 42),
        _layer_case(3, 8, 4, 8, none(3, 1, dtype=torch.bool), "S = 1，", 43),
    ]
    rng = torch.Generator().manual_seed(44)
    for i in range(3):
        b, s, h, dh, d_ff = (
            int(torch.randint(1, n, (1,), generator=rng)) for n in (4, 7, 4, 5, 20)
        )
        lengths = [int(torch.randint(1, s + 1, (1,), generator=rng)) for _ in range(b)]
        label = f"随机：长度 {lengths}，"
        cases.append(_layer_case(b, h * dh, h, d_ff, _padding(lengths, s), label, 45 + i))
    cases.append(
        Case(
            args=(TRAIN_STEPS, 0),
            label=(
                "训练：用你的函数搭一个 2 层编码器（D = 16，2 个头，d_ff = 32），在序列反转任务上"
                f"训练 {TRAIN_STEPS} 步，在新的序列上准确率要达到 {ACCURACY_BAR:.0%}"
            ),
            harness=_reversal_trial,
            time_factor=TRAIN_TIME_FACTOR,
        )
    )
    return cases


register(
    Exercise(
        id="encoder.layer",
        chapter=3,
        title="用自己的零件搭一个完整的编码器层，并训练它",
        prompt=(
            "写函数 encoder_layer(x, padding_mask, weights, n_heads)：按原论文和 p19 的顺序"
            "（后置层归一化，Post-LN）算一个编码器层，返回形状 (B, S, D) 的输出：\n"
            "x1 = LayerNorm1(x + MultiHead(x))，y = LayerNorm2(x1 + FFN(x1))。\n"
            "x 的形状是 (B, S, D)，float64。padding_mask 是 (B, S) 的 bool 张量，True 表示"
            "该位置是填充：所有查询都不能把注意力分给它（在 softmax 之前遮住这个键）；"
            "填充位置自己的输出照常计算，也会被比较。每个句子至少有一个真实符号。\n"
            "weights 是一个 dict，排列与 torch.nn.Linear 相同（投影是输入乘权重的转置再加偏置）："
            "w_qkv (3D, D) 和 b_qkv (3D,) 依次是 W_Q、W_K、W_V（与练习 attention.multi_head 相同），"
            "w_o (D, D)、b_o (D,) 是输出投影；FFN 是 w1 (d_ff, D)、b1 (d_ff,)，ReLU，"
            "w2 (D, d_ff)、b2 (D,)；gamma1、beta1、gamma2、beta2 (D,) 是两个 LayerNorm 的 γ、β，"
            "LayerNorm 的 eps = 1e-5。每个头 D / n_heads 维。\n"
            "这一层不带 dropout（相当于 p_drop = 0）。可以调用你在第 2 章和本章写好的函数"
            "（多头注意力要加上填充掩码）。\n"
            "最后一个测试用你的函数搭一个 2 层编码器，在序列反转任务上训练 "
            f"{TRAIN_STEPS} 步（固定的种子，一个线程），要求它在新的序列上准确率达到 "
            f"{ACCURACY_BAR:.0%}。所以梯度必须能从输出传回 weights 里的每个张量：不要 detach，"
            "不要在 torch.no_grad() 里计算，也不要把权重复制成新的张量。"
        ),
        hint=(
            "对照 p19 的图，一个子层一个子层地走：每个子层的输出先与这个子层自己的输入相加，"
            "再做层归一化（后置层归一化）；FFN 的两个线性变换之间有非线性；填充的键要在 softmax "
            "之前排除，这样它的权重才恰好是 0；这一层里不能有随机的置零。"
            "前面的测试都通过、只有训练那一项不通过，说明梯度没有传回权重。"
        ),
        explanation=(
            "z = MultiHead(x)（填充的键在 softmax 之前设为 -inf）；x1 = LN1(x + z)；"
            "f = relu(x1 @ w1.T + b1) @ w2.T + b2；y = LN2(x1 + f)，其中 LN(h) = (h - m) / "
            "sqrt(σ² + eps) * γ + β。前置层归一化 (Pre-LN) 则是 x1 = x + MultiHead(LN1(x))，"
            "y = x1 + FFN(LN2(x1))（练习 encoder.pre_ln_block）。"
        ),
        kind="function",
        returns=Array("float64", "(B, S, D)"),
        cases=_layer_cases,
        reference=reference_encoder_layer,
        model_answer="lecturekit.exercises.ch03_layer.encoder_layer",
        forbidden=(
            "lecturekit.model.layers.EncoderLayer.forward",
            "torch.nn.TransformerEncoderLayer.forward",
        ),
    )
)
