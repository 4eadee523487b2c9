"""The debugging lab: the classic Transformer bugs, each planted by one switch.

``plant(name)`` is a context manager that swaps one piece of the course's own code (an entry
of ``ATTENTION_FUNCTIONS`` or ``LAYER_NORM_FUNCTIONS``, a module's function, a method) for a
version with one line changed, and restores the original on exit, also after an exception::

    with bugs.plant("softmax_query_axis"):
        logits = model(src, tgt)  # the same model object, now with the bug

There is no second copy of the model: the replacement wraps the original and changes one
thing. ``BUGS`` is the one list of switches, each with the line of code it changes.
Bugs that act when a model is built (``tied_embedding_std1``) must be planted around
``Transformer(config)``; the others act while the block runs. The attention bugs change the
``"math"`` backend and ``layernorm_wrong_axis`` the ``"torch"`` one (the defaults); while they
are planted the other backends raise instead of silently running the healthy code, and so
does a Pre-LN layer under ``residual_missing`` (it removes a Post-LN residual).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from lecturekit._common import check_choice, check_int
from lecturekit.data import batching
from lecturekit.decoding import beam, search
from lecturekit.model import attention, layers, masks
from lecturekit.model.transformer import Transformer
from lecturekit.training import loop

__all__ = ["Bug", "BUGS", "MYSTERY_POOL", "plant", "mystery", "mystery_bug"]

_LAZY_PACKAGES = (
    "lecturekit",
    "lecturekit.model",
    "lecturekit.data",
    "lecturekit.training",
    "lecturekit.decoding",
)
# (object, attribute, replacement); plant sets each and puts the original back
Patch = tuple[Any, str, Any]


@dataclass(frozen=True)
class Bug:
    """One planted bug: ``where`` it lives, the one ``line`` it changes, what the learner
    sees (``symptom``) and the diagnostic of ``lecturekit.lab.diagnostics`` that
    catches it first (``diagnostic``). ``patches()`` builds the replacements."""

    name: str
    title: str
    where: str
    line: str
    symptom: str
    diagnostic: str
    patches: Callable[[], list[Patch]]


# -- the replacements: each wraps the original and changes one thing -------------------------
def _no_causal_mask() -> list[Patch]:
    original = layers.Decoder.forward

    def forward(self: Any, tgt: Tensor, memory: Any, **kwargs: Any) -> Tensor:
        kwargs["tgt_is_causal"], kwargs["tgt_mask"] = False, None
        return original(self, tgt, memory, **kwargs)

    return [(layers.Decoder, "forward", forward)]


def _only_backend(module: Any, table: str, keep: str, bug: str, setting: str) -> Patch:
    """The backend table ``module.table`` with every entry but ``keep`` refusing to run: the
    bug changes ``keep``'s code only, so another backend would silently run healthy code."""

    def refuse(backend: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            raise ValueError(
                f"{setting} must be {keep!r} while the bug {bug!r} is planted (it changes "
                f"that backend only), got {backend!r}; build the model with {setting}={keep!r}"
            )

        return run

    entries = getattr(module, table).items()
    return (module, table, {name: f if name == keep else refuse(name) for name, f in entries})


def _math_only(bug: str) -> Patch:
    return _only_backend(attention, "ATTENTION_FUNCTIONS", "math", bug, "attention_backend")


def _inverted_causal_mask() -> list[Patch]:
    # causal_mask checks its sizes, then builds the mask with _causal_mask, which the
    # model's attention calls directly (on sizes it has checked)
    original = masks._causal_mask

    def causal_mask(*args: Any, **kwargs: Any) -> Tensor:
        return ~original(*args, **kwargs)  # True read as "keep"

    return [
        (masks, "_causal_mask", causal_mask),
        (attention, "_causal_mask", causal_mask),
        _math_only("causal_mask_inverted"),
    ]


def _no_scaling() -> list[Patch]:
    original = attention._attention_steps

    def steps(
        q: Tensor, k: Tensor, v: Tensor, mask: Any, dropout_p: float, is_causal: bool = False,
        scale: float | None = None,
    ) -> Any:  # fmt: skip
        return original(q, k, v, mask, dropout_p, is_causal, 1.0)  # scale 1, not 1/sqrt(d_k)

    return [(attention, "_attention_steps", steps), _math_only("no_scaling")]


class _SoftmaxOverQueries:
    """``torch`` as the attention module sees it, except that softmax runs over dim -2."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def softmax(x: Tensor, dim: int) -> Tensor:
        return torch.softmax(x, dim=-2 if dim == -1 else dim)


def _softmax_query_axis() -> list[Patch]:
    return [(attention, "torch", _SoftmaxOverQueries()), _math_only("softmax_query_axis")]


def _no_source_padding() -> list[Patch]:
    def derived_padding(self: Any, tokens: Tensor, given: Tensor | None) -> Tensor | None:
        return given  # never derived from pad_id

    return [(Transformer, "_derived_padding", derived_padding)]


def _loss_counts_padding() -> list[Patch]:
    original = loop.label_smoothed_nll

    def loss(logits: Tensor, target: Tensor, smoothing: float = 0.1, *rest: Any, **kw: Any):
        kw.pop("ignore_index", None)
        rest = rest[1:]  # drop a positional ignore_index
        return original(logits, target, smoothing, None, *rest, **kw)

    return [(loop, "label_smoothed_nll", loss)]


def _labels_not_shifted() -> list[Patch]:
    original = batching.collate

    def collate(*args: Any, **kwargs: Any) -> batching.Batch:
        batch = original(*args, **kwargs)
        return dataclasses.replace(batch, tgt_in=batch.tgt_out.clone())

    return [(batching, "collate", collate)]


def _no_positions() -> list[Patch]:
    def forward(self: Any, x: Tensor, offset: int = 0) -> Tensor:
        return x  # positions never added

    return [(layers.SinusoidalPositionalEncoding, "forward", forward)]


def _layernorm_sequence_axis(x: Tensor, shape: Any, weight: Tensor, bias: Tensor, eps: float):
    mean = x.mean(dim=1, keepdim=True)  # over the sequence (B, T, D): dim 1, not -1
    var = x.var(dim=1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _layernorm_wrong_axis() -> list[Patch]:
    module, table, refusing = _only_backend(
        layers, "LAYER_NORM_FUNCTIONS", "torch", "layernorm_wrong_axis", "layernorm_backend"
    )
    return [(module, table, dict(refusing, torch=_layernorm_sequence_axis))]


def _no_residual() -> list[Patch]:
    original = layers.DecoderLayer._add_and_norm

    def add_and_norm(self: Any, x: Tensor, self_attention: Any, cross_attention: Any) -> Tensor:
        if self.norm_first:  # Pre-LN: the replacement below would not remove its residual
            raise ValueError(
                "norm_first must be False while the bug 'residual_missing' is planted (it "
                "removes a Post-LN residual), got True; build the model with norm_first=False"
            )
        # Post-LN: x + (f(x) - x) = f(x), the residual around self attention is gone
        return original(self, x, lambda y: self_attention(y) - y, cross_attention)

    return [(layers.DecoderLayer, "_add_and_norm", add_and_norm)]


@contextlib.contextmanager
def _leave_mode(model: Any) -> Iterator[Any]:
    yield model  # no model.eval(): dropout stays on if the model was training


def _dropout_at_decoding() -> list[Patch]:
    return [(search, "eval_mode", _leave_mode), (beam, "eval_mode", _leave_mode)]


def _no_warmup() -> list[Patch]:
    original = loop.learning_rate

    def learning_rate(step: int, config: Any, d_model: int) -> float:
        peak = max(original(s, config, d_model) for s in range(1, config.warmup_steps + 2))
        return peak if step <= config.warmup_steps else original(step, config, d_model)

    return [(loop, "learning_rate", learning_rate)]


def _beam_summed_log_prob() -> list[Patch]:
    def penalty(length: int, alpha: float) -> float:
        return 1.0  # rank by the summed log-probability, whatever alpha says

    return [(beam, "_penalty", penalty)]


def _tied_embedding_std1() -> list[Patch]:
    original = Transformer._reset_parameters

    def reset(self: Any) -> None:
        original(self)
        nn.init.normal_(self.tgt_embedding.weight, std=1.0)  # nn.Embedding's default, not D^-1/2

    return [(Transformer, "_reset_parameters", reset)]


def _embedding_not_scaled() -> list[Patch]:
    original = Transformer._embed

    def embed(self: Any, tokens: Tensor, embedding: Any, positions: Any, offset: int = 0):
        class Unscaled(nn.Module):  # the same table, read without the sqrt(D) factor
            def forward(self, ids: Tensor) -> Tensor:
                return embedding(ids) / math.sqrt(model_dim)

        model_dim = self.config.d_model
        return original(self, tokens, Unscaled(), positions, offset)

    return [(Transformer, "_embed", embed)]


_ATTENTION = "lecturekit.model.attention"
BUGS: dict[str, Bug] = {
    bug.name: bug
    for bug in (
        Bug(
            "causal_mask_missing",
            "因果掩码缺失",
            "lecturekit.model.layers.Decoder.forward",
            "tgt_is_causal=False",
            "训练损失很低，自由生成崩溃",
            "causality_probe",
            _no_causal_mask,
        ),
        Bug(
            "causal_mask_inverted",
            "因果掩码反了（True 当成保留）",
            "lecturekit.model.masks.causal_mask",
            "return ~ones(T, T).triu(1)",
            "只看未来，损失极低，生成崩溃",
            "mask_picture",
            _inverted_causal_mask,
        ),
        Bug(
            "no_scaling",
            "分数没有除以 √d_k",
            f"{_ATTENTION}._attention_steps",
            "scores = q @ k.transpose(-2, -1)  # no * scale",
            "刚初始化时注意力就更尖（d_k 越大越明显）",
            "attention_reference_check",
            _no_scaling,
        ),
        Bug(
            "softmax_query_axis",
            "softmax 沿查询轴",
            f"{_ATTENTION}._attention_steps",
            "weights = torch.softmax(scores, dim=-2)",
            "注意力的行和不为 1，未来泄漏，批次有填充时损失变成 NaN",
            "attention_reference_check",
            _softmax_query_axis,
        ),
        Bug(
            "source_padding_missing",
            "源句填充掩码缺失",
            "lecturekit.model.transformer.Transformer._derived_padding",
            "return given  # never tokens == pad_id",
            "同一句话补齐长度不同，输出不同",
            "padding_probe",
            _no_source_padding,
        ),
        Bug(
            "loss_counts_padding",
            "损失没有忽略填充",
            "lecturekit.training.loop.label_smoothed_nll",
            "label_smoothed_nll(logits, target, smoothing, ignore_index=None)",
            "损失随补齐长度变化，模型学着输出 <pad>",
            "loss_padding_probe",
            _loss_counts_padding,
        ),
        Bug(
            "labels_not_shifted",
            "标签没有错位",
            "lecturekit.data.batching.collate",
            "tgt_in = tgt_out  # not <bos> + target",
            "损失几步就接近 0，生成是乱码",
            "label_shift_check",
            _labels_not_shifted,
        ),
        Bug(
            "positions_missing",
            "没有位置编码",
            "lecturekit.model.layers.SinusoidalPositionalEncoding.forward",
            "return x  # not x + PE",
            "倒序、复制这类输出取决于输入顺序的任务学不会",
            "permutation_probe",
            _no_positions,
        ),
        Bug(
            "layernorm_wrong_axis",
            "层归一化沿序列轴",
            "lecturekit.model.layers.LAYER_NORM_FUNCTIONS",
            "mean = x.mean(dim=1)  # not dim=-1",
            "输出随同一批别的句子或补齐长度改变，未来泄漏",
            "layernorm_axis_check",
            _layernorm_wrong_axis,
        ),
        Bug(
            "residual_missing",
            "解码器自注意力的残差连接缺失",
            "lecturekit.model.layers.DecoderLayer._add_and_norm",
            "x = self.norm1(self_attention(x))  # no x +",
            "（检查）子层输出清零后，改变解码器输入，输出不变",
            "residual_probe",
            _no_residual,
        ),
        Bug(
            "dropout_at_decoding",
            "解码时 dropout 仍然开着",
            "lecturekit.decoding.search.eval_mode",
            "# model.eval() missing",
            "同一输入两次解码结果不同",
            "determinism_probe",
            _dropout_at_decoding,
        ),
        Bug(
            "post_ln_no_warmup",
            "后置层归一化不加预热",
            "lecturekit.training.loop.learning_rate",
            "lr = peak  # from step 1",
            "第一步就用峰值学习率",
            "warmup_check",
            _no_warmup,
        ),
        Bug(
            "beam_summed_log_prob",
            "束搜索不管 α，总按对数概率之和排序",
            "lecturekit.decoding.beam._penalty",
            "return 1.0  # no length penalty",
            "要了长度惩罚，返回的顺序仍与长度归一化的分数不符",
            "beam_ranking_check",
            _beam_summed_log_prob,
        ),
        Bug(
            "tied_embedding_std1",
            "共享权重的嵌入按标准差 1 初始化",
            "lecturekit.model.transformer.Transformer._reset_parameters",
            "nn.init.normal_(tgt_embedding.weight, std=1.0)  # not D**-0.5",
            "初始损失远高于 ln V",
            "initial_loss_check",
            _tied_embedding_std1,
        ),
        Bug(
            "embedding_not_scaled",
            "嵌入没有乘 √D",
            "lecturekit.model.transformer.Transformer._embed",
            "x = embedding(tokens)  # no * sqrt(D)",
            "（检查）词嵌入的均方根远小于位置编码",
            "embedding_scale_check",
            _embedding_not_scaled,
        ),
    )
}

# the bugs of the model's forward pass, found with a model alone: the find-the-bug pool
MYSTERY_POOL = (
    "causal_mask_missing",
    "causal_mask_inverted",
    "no_scaling",
    "softmax_query_axis",
    "source_padding_missing",
    "positions_missing",
    "layernorm_wrong_axis",
    "residual_missing",
    "embedding_not_scaled",
)


_PLANTED: set[str] = set()  # the bugs planted now (plant is idempotent)


@contextlib.contextmanager
def plant(name: str) -> Iterator[Bug]:
    """Plant bug ``name`` (a key of ``BUGS``) for the duration of the block; yields the
    ``Bug``. Every replaced attribute is restored on exit, also after an exception.

    Planting is idempotent: a bug already planted by an enclosing block (or by
    :func:`mystery`) stays planted once, unchanged, so a second switch cannot cancel it
    (an inverted mask inverted again would look healthy)."""
    check_choice("name", name, tuple(BUGS))
    bug = BUGS[name]
    if name in _PLANTED:
        yield bug  # already active: nothing to add, and nothing to restore on exit
        return
    patches = bug.patches()
    for _, attribute, _ in patches:
        _resolve_lazy_names(attribute)
    saved: list[Patch] = []
    try:
        _PLANTED.add(name)
        for target, attribute, replacement in patches:
            saved.append((target, attribute, getattr(target, attribute)))
            setattr(target, attribute, replacement)
        yield bug
    finally:
        _PLANTED.discard(name)
        for target, attribute, original in reversed(saved):
            setattr(target, attribute, original)


def _resolve_lazy_names(attribute: str) -> None:
    """Resolve ``attribute`` in the packages that export names lazily (``lecturekit.data
    .collate`` ...) before the patch: the first access caches the value on the package, and
    it must cache the original, not the planted bug."""
    for package in _LAZY_PACKAGES:
        getattr(importlib.import_module(package), attribute, None)


def mystery_bug(seed: int) -> str:
    """The bug hidden by :func:`mystery` for ``seed`` (a different one for neighbouring
    seeds: a seeded shuffle of ``MYSTERY_POOL``, cycled)."""
    check_int("seed", seed, minimum=0)
    order = list(MYSTERY_POOL)
    random.Random("lab-mystery").shuffle(order)
    return order[seed % len(order)]


@contextlib.contextmanager
def mystery(seed: int) -> Iterator[None]:
    """Plant the bug ``mystery_bug(seed)`` without saying which: the find-the-bug exercise."""
    with plant(mystery_bug(seed)):
        yield
