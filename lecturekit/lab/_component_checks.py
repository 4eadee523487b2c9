"""Diagnostics of :mod:`lecturekit.lab.diagnostics` that check one component against a
reference or a second path through the same code: each attention module against
``nn.MultiheadAttention`` with the same weights, cached against uncached decoding, the
encoder alone under extra padding, the training loss against ``F.cross_entropy``, and the
weight tie. Like the others, each returns a :class:`Diagnosis` and never passes on NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit._common import check_int, eval_mode
from lecturekit.decoding.search import greedy
from lecturekit.lab._verdict import Diagnosis, _diagnosis, _gap, _max_gap, _not_finite
from lecturekit.model.attention import MultiHeadAttention

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.model.transformer import Transformer

__all__ = [
    "attention_module_check",
    "cache_consistency_probe",
    "encoder_padding_probe",
    "loss_reference_check",
    "weight_tie_check",
]


@torch.no_grad()
def attention_module_check(model: nn.Module) -> Diagnosis:
    """Every ``MultiHeadAttention`` in ``model`` against ``nn.MultiheadAttention`` holding
    the same weights (``qkv_proj`` has the layout of its ``in_proj_weight``), on a random
    self-attention input ``(2, 5, D)`` without a mask: the per-module reference check that
    catches heads split or merged in the wrong layout, and any other step of the module
    (scaling, the softmax axis) that differs; its message names the steps to check."""
    gaps = []
    for module in (m for m in model.modules() if isinstance(m, MultiHeadAttention)):
        reference = nn.MultiheadAttention(module.d_model, module.n_heads, batch_first=True)
        reference.in_proj_weight.copy_(module.qkv_proj.weight)
        reference.in_proj_bias.copy_(module.qkv_proj.bias)
        reference.out_proj.load_state_dict(module.out_proj.state_dict())
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(2, 5, module.d_model, generator=gen)
        with eval_mode(module), eval_mode(reference):
            gaps.append(_max_gap(module(x, x, x)[0], reference(x, x, x, need_weights=False)[0]))
    if not gaps:
        raise ValueError("model must contain at least one MultiHeadAttention, got none")
    return _gap(
        "attention_module_check",
        math.nan if any(math.isnan(g) for g in gaps) else max(gaps),
        False,
        "与权重相同的 nn.MultiheadAttention 不一致：检查缩放、softmax 的轴和拆分、合并多头",
        "每个注意力模块都与权重相同的 nn.MultiheadAttention 一致",
    )


@torch.no_grad()
def cache_consistency_probe(model: Transformer, src: Tensor, steps: int = 6) -> Diagnosis:
    """Greedy decoding of ``src (B, S)`` for exactly ``steps`` tokens with the KV cache and
    without it (recomputing the whole prefix each step): the tokens and their
    log-probabilities must agree, since the cache only saves work."""
    check_int("steps", steps, minimum=1)
    runs = [greedy(model, src, steps, min_len=steps, use_cache=c) for c in (True, False)]
    cached, full = runs
    if not (torch.isfinite(cached.scores).all() and torch.isfinite(full.scores).all()):
        return _not_finite("cache_consistency_probe", math.nan)
    same = cached.tokens.shape == full.tokens.shape and bool((cached.tokens == full.tokens).all())
    gap = float((cached.scores - full.scores).abs().max()) if same else math.inf
    return _diagnosis(
        "cache_consistency_probe",
        not same or gap > 1e-4,
        "用 KV 缓存与不用缓存解码的结果不同：缓存的那条路径算错了（例如位置偏移）",
        "用不用 KV 缓存，解码的符号和概率都相同",
        gap,
    )


@torch.no_grad()
def encoder_padding_probe(model: Transformer, src: Tensor, extra: int = 3) -> Diagnosis:
    """Append ``extra`` padding tokens to every source ``(B, S)``: the encoder's memory at
    the real positions must not change. With :func:`padding_probe` it tells the encoder's
    padding mask from the cross attention's (that one flags only ``padding_probe``)."""
    check_int("extra", extra, minimum=1)
    pads = torch.full((src.size(0), extra), model.config.pad_id, dtype=src.dtype)
    with eval_mode(model):
        before = model.encode(src)
        after = model.encode(torch.cat([src, pads], dim=1))[:, : src.size(1)]
    return _gap(
        "encoder_padding_probe",
        _max_gap(before, after),
        False,
        "多补几个 <pad>，编码器的输出就变了：编码器没有遮住填充",
        "多补 <pad> 不改变编码器的输出",
    )


def loss_reference_check(
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    vocab_size: int,
    smoothing: float = 0.1,
    pad_id: int = 0,
) -> Diagnosis:
    """``loss_fn(logits (B, T, V), target (B, T))`` (a mean over the real tokens) against
    ``F.cross_entropy`` with the same ``label_smoothing`` and ``ignore_index=pad_id``, on
    large random logits and a padded target: catches a loss fed probabilities (softmax
    twice), one that counts padding, or one with the wrong smoothing. A ``loss_fn`` that
    raises or returns no scalar is the finding, reported as a flagged verdict."""
    check_int("vocab_size", vocab_size, minimum=2)
    gen = torch.Generator().manual_seed(0)
    logits = 3.0 * torch.randn(3, 7, vocab_size, generator=gen)
    target = torch.randint(0, vocab_size, (3, 7), generator=gen)
    target[target == pad_id] = (pad_id + 1) % vocab_size
    target[:, 5:] = pad_id  # two padded positions per row
    expected = F.cross_entropy(
        logits.reshape(-1, vocab_size),
        target.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
    )
    try:
        with torch.no_grad():
            got = loss_fn(logits, target)
    except Exception as err:  # noqa: BLE001 - the learner's loss failing is the finding
        return Diagnosis(
            "loss_reference_check", True, f"loss_fn 运行出错：{type(err).__name__}", math.nan
        )
    if not isinstance(got, Tensor | float) or (isinstance(got, Tensor) and got.numel() != 1):
        return Diagnosis(
            "loss_reference_check", True, "loss_fn 应返回一个标量（按符号平均的损失）", math.nan
        )
    return _gap(
        "loss_reference_check",
        _max_gap(torch.as_tensor(got, dtype=torch.float32).reshape(()), expected),
        False,
        "损失与 F.cross_entropy 不一致：检查它收到的是不是 logits，以及填充和平滑",
        "损失与 F.cross_entropy（同样的平滑，忽略填充）一致",
    )


def weight_tie_check(model: Transformer) -> Diagnosis:
    """A model built with ``tie_embeddings=True`` must hold one matrix for the target
    embedding and the output projection (the same storage), not two equal copies that
    training then moves apart. A model without the tie passes."""
    out, emb = model.output_proj.weight, model.tgt_embedding.weight
    shared = out is emb or (out.shape == emb.shape and out.data_ptr() == emb.data_ptr())
    return _diagnosis(
        "weight_tie_check",
        bool(model.config.tie_embeddings) and not shared,
        "配置要求共享权重，输出层却有自己的一份矩阵：共享被一份拷贝断开了",
        "共享权重的矩阵只有一份（或者配置本就不共享）",
        float(shared),
    )
