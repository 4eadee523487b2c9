"""The replacements behind :data:`lecturekit.lab.bugs.BUGS`: each factory returns the
``(object, attribute, replacement)`` patches of one bug; every replacement wraps the course's
original code and changes one thing (the line the bug's entry prints)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from lecturekit.data import batching
from lecturekit.decoding import beam, search
from lecturekit.model import attention, layers, masks
from lecturekit.model.transformer import Transformer
from lecturekit.training import loop

# (object, attribute, replacement); plant sets each and puts the original back
Patch = tuple[Any, str, Any]


def _no_causal_mask() -> list[Patch]:
    original = layers.Decoder.forward

    def forward(self: Any, tgt: Tensor, memory: Any, **kwargs: Any) -> Tensor:
        kwargs["tgt_is_causal"], kwargs["tgt_mask"] = False, None
        return original(self, tgt, memory, **kwargs)

    return [(layers.Decoder, "forward", forward)]


# the bugs bugs.mystery plants now: a refusal must not give their names away
HIDDEN: set[str] = set()


def _refusal(bug: str, setting: str, keep: object, got: object) -> ValueError:
    """The error of a model built with ``setting=got`` while ``bug`` (which changes the
    ``setting=keep`` code only) is planted; it does not name a bug that ``mystery`` hides."""
    if bug in HIDDEN:
        return ValueError(
            f"这道练习藏着的 bug 只改了 {setting}={keep!r} 的代码，模型用的却是 {got!r}；"
            f"请用 {setting}={keep!r} 建模型"
        )
    return ValueError(
        f"{setting} must be {keep!r} while the bug {bug!r} is planted (it changes that code "
        f"only), got {got!r}; build the model with {setting}={keep!r}"
    )


def _only_backend(module: Any, table: str, keep: str, bug: str, setting: str) -> Patch:
    """The backend table ``module.table`` with every entry but ``keep`` refusing to run: the
    bug changes ``keep``'s code only, so another backend would silently run healthy code."""

    def refuse(backend: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            raise _refusal(bug, setting, keep, backend)

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

    def loss(
        logits: Tensor, target: Tensor, smoothing: float = 0.1, *rest: Any, **kw: Any
    ) -> Tensor:
        kw.pop("ignore_index", None)
        rest = rest[1:]  # drop a positional ignore_index
        return original(logits, target, smoothing, None, *rest, **kw)

    counts = loop._global_counts

    def global_counts(run: Any, logits: Tensor, tgt_out: Tensor, loss_sum: Tensor) -> Any:
        # fit divides the summed loss by this count: every position, as F.cross_entropy's mean
        # without ignore_index does (-1 is no id, so no position is left out as padding)
        every = tgt_out.masked_fill(tgt_out == run.model.config.pad_id, -1)
        return counts(run, logits, every, loss_sum)

    return [(loop, "label_smoothed_nll", loss), (loop, "_global_counts", global_counts)]


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


def _layernorm_sequence_axis(
    x: Tensor, shape: Any, weight: Tensor, bias: Tensor, eps: float
) -> Any:
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
            raise _refusal("residual_missing", "norm_first", False, True)
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
        # every schedule peaks at the end of its warmup: the peak from step 1 on
        return original(max(step, config.warmup_steps), config, d_model)

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

    def embed(self: Any, tokens: Tensor, embedding: Any, positions: Any, offset: int = 0) -> Tensor:
        class Unscaled(nn.Module):  # the same table, read without the sqrt(D) factor
            def forward(self, ids: Tensor) -> Tensor:
                return embedding(ids) / math.sqrt(model_dim)

        model_dim = self.config.d_model
        return original(self, tokens, Unscaled(), positions, offset)  # type: ignore[arg-type]

    return [(Transformer, "_embed", embed)]


def _heads_split_reshape() -> list[Patch]:
    def split_heads(self: Any, x: Tensor) -> Tensor:
        batch, length, _ = x.shape  # rows of different positions and heads get mixed
        return x.reshape(batch, self.n_heads, length, self.head_dim)

    return [(attention.MultiHeadAttention, "split_heads", split_heads)]


def _kv_cache_no_offset() -> list[Patch]:
    original = Transformer._embed

    def embed(self: Any, tokens: Tensor, embedding: Any, positions: Any, offset: int = 0) -> Tensor:
        return original(self, tokens, embedding, positions, 0)  # every cached step at position 0

    return [(Transformer, "_embed", embed)]


def _causal_off_by_one() -> list[Patch]:
    original = masks._causal_mask

    def causal_mask(*args: Any, **kwargs: Any) -> Tensor:
        future = original(*args, **kwargs)  # (Tq, Tk), True = masked
        # the first masked key of each row becomes visible: triu(2) instead of triu(1)
        return torch.cat([future[:, :1], future[:, 1:] & future[:, :-1]], dim=1)

    return [
        (masks, "_causal_mask", causal_mask),
        (attention, "_causal_mask", causal_mask),
        _math_only("causal_mask_off_by_one"),
    ]


def _loss_on_probabilities() -> list[Patch]:
    original = loop.label_smoothed_nll

    def loss(logits: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return original(logits.softmax(dim=-1), *args, **kwargs)  # softmax twice

    return [(loop, "label_smoothed_nll", loss)]


def _cross_padding_missing() -> list[Patch]:
    original = Transformer._decode

    def decode(self: Any, tgt: Tensor, memory: Tensor, masks: dict[str, Any], *rest: Any) -> Tensor:
        # the encoder still masks the padding; the cross attention no longer does
        return original(self, tgt, memory, dict(masks, memory_key_padding_mask=None), *rest)

    return [(Transformer, "_decode", decode)]


def _tie_broken() -> list[Patch]:
    original = Transformer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if self.config.tie_embeddings:  # a copy: equal at the start, then trained apart
            self.output_proj.weight = nn.Parameter(self.tgt_embedding.weight.detach().clone())

    return [(Transformer, "__init__", init)]
