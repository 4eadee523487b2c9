"""The debugging lab: the classic Transformer bugs, each planted by one switch.

``plant(name)`` is a context manager that swaps one piece of the course's own code (an entry
of ``ATTENTION_FUNCTIONS`` or ``LAYER_NORM_FUNCTIONS``, a module's function, a method) for a
version with one line changed, and restores the original on exit, also after an exception::

    with bugs.plant("softmax_query_axis"):
        logits = model(src, tgt)  # the same model object, now with the bug

There is no second copy of the model: the replacement wraps the original and changes one
thing. ``BUGS`` is the one list of switches, each with the healthy line of the course's code
and the line the bug puts in its place.
Bugs that act when a model is built (``tied_embedding_std1``) must be planted around
``Transformer(config)``; the others act while the block runs. The attention bugs change the
``"math"`` backend and ``layernorm_wrong_axis`` the ``"torch"`` one (the defaults); while they
are planted the other backends raise instead of silently running the healthy code, and so
does a Pre-LN layer under ``residual_missing`` (it removes a Post-LN residual).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lecturekit._common import check_choice, check_int
from lecturekit.lab import _patches
from lecturekit.lab._patches import Patch

__all__ = ["Bug", "BUGS", "MODEL_BUGS", "plant", "mystery"]

_LAZY_PACKAGES = (
    "lecturekit",
    "lecturekit.model",
    "lecturekit.data",
    "lecturekit.training",
    "lecturekit.decoding",
)


@dataclass(frozen=True)
class Bug:
    """One planted bug: ``where`` it lives, the ``healthy`` line of the course's code there
    and the ``line`` the bug puts in its place, what the learner sees (``symptom``) and the
    diagnostic of ``lecturekit.lab.diagnostics`` that catches it first (``diagnostic``).
    ``patches()`` builds the replacements."""

    name: str
    title: str
    where: str
    healthy: str
    line: str
    symptom: str
    diagnostic: str
    patches: Callable[[], list[Patch]]


BUGS: dict[str, Bug] = {
    bug.name: bug
    for bug in (
        Bug(
            "causal_mask_missing",
            "因果掩码缺失",
            "lecturekit.model.layers.Decoder.forward",
            "tgt_is_causal=tgt_is_causal,",
            "tgt_is_causal=False,",
            "训练损失很低，自由生成崩溃",
            "causality_probe",
            _patches._no_causal_mask,
        ),
        Bug(
            "causal_mask_inverted",
            "因果掩码反了（True 当成保留）",
            "lecturekit.model.masks._causal_mask",
            "return torch.ones(size, key_size, dtype=torch.bool, device=device).triu(1 + shift)",
            "return ~torch.ones(size, key_size, dtype=torch.bool, device=device).triu(1 + shift)",
            "只看未来，损失极低，生成崩溃",
            "mask_picture",
            _patches._inverted_causal_mask,
        ),
        Bug(
            "causal_mask_off_by_one",
            "因果掩码差一位（每个位置多看见下一个）",
            "lecturekit.model.masks._causal_mask",
            "return torch.ones(size, key_size, dtype=torch.bool, device=device).triu(1 + shift)",
            "return torch.ones(size, key_size, dtype=torch.bool, device=device).triu(2 + shift)",
            "训练损失很低，自由生成崩溃",
            "mask_picture",
            _patches._causal_off_by_one,
        ),
        Bug(
            "no_scaling",
            "分数没有除以 √d_k",
            "lecturekit.model.attention._attention_steps",
            "scores = (query @ key.transpose(-2, -1)) * scale  # (..., Tq, Tk)",
            "scores = query @ key.transpose(-2, -1)",
            "刚初始化时注意力就更尖（d_k 越大越明显）",
            "attention_reference_check",
            _patches._no_scaling,
        ),
        Bug(
            "softmax_query_axis",
            "softmax 沿查询轴",
            "lecturekit.model.attention._attention_steps",
            "weights = torch.softmax(scores, dim=-1)",
            "weights = torch.softmax(scores, dim=-2)",
            "注意力的行和不为 1，未来泄漏，批次有填充时损失变成 NaN",
            "attention_reference_check",
            _patches._softmax_query_axis,
        ),
        Bug(
            "heads_split_reshape",
            "拆分多头时用 reshape 代替 view + transpose",
            "lecturekit.model.attention.MultiHeadAttention.split_heads",
            "return x.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)",
            "return x.reshape(batch, self.n_heads, length, self.head_dim)",
            "形状都对，程序不报错，但不同位置的向量混在一起",
            "attention_module_check",
            _patches._heads_split_reshape,
        ),
        Bug(
            "source_padding_missing",
            "源句填充掩码缺失",
            "lecturekit.model.transformer.Transformer._derived_padding",
            "mask = tokens == self.config.pad_id  # (B, S), True = padding",
            "return given  # 不再由 tokens == pad_id 得出填充",
            "同一句话补齐长度不同，输出不同",
            "padding_probe",
            _patches._no_source_padding,
        ),
        Bug(
            "cross_padding_missing",
            "交叉注意力的填充掩码缺失",
            "lecturekit.model.transformer.Transformer.forward",
            'masks["memory_key_padding_mask"] = src_key_padding_mask',
            'masks["memory_key_padding_mask"] = None',
            "同一句话补齐长度不同，输出不同，编码器的输出却不变",
            "padding_probe",
            _patches._cross_padding_missing,
        ),
        Bug(
            "loss_counts_padding",
            "损失没有忽略填充",
            "lecturekit.training.losses.label_smoothed_nll",
            "keep = target != ignore_index",
            "keep = torch.ones_like(target, dtype=torch.bool)  # fit 也除以全部位置数",
            "损失随补齐长度变化，模型学着输出 <pad>",
            "loss_padding_probe",
            _patches._loss_counts_padding,
        ),
        Bug(
            "loss_on_probabilities",
            "交叉熵用在概率上（softmax 做了两次）",
            "lecturekit.training.losses.label_smoothed_nll",
            "log_probs = torch.log_softmax(logits.float(), dim=-1)",
            "log_probs = torch.log_softmax(logits.softmax(-1), dim=-1)",
            "损失几乎停在 ln V 附近，降得极慢",
            "loss_reference_check",
            _patches._loss_on_probabilities,
        ),
        Bug(
            "labels_not_shifted",
            "标签没有错位",
            "lecturekit.data.batching.collate",
            "tgt_in = pad_sequences([[bos_id, *t] for t in targets], pad_id)",
            "tgt_in = tgt_out  # 不是 <bos> + 目标",
            "损失几步就接近 0，生成是乱码",
            "label_shift_check",
            _patches._labels_not_shifted,
        ),
        Bug(
            "positions_missing",
            "没有位置编码",
            "lecturekit.model.layers.SinusoidalPositionalEncoding.forward",
            "return x + self.encoding(x.size(1), offset).to(x.dtype)",
            "return x  # 没有加位置编码",
            "倒序、复制这类输出取决于输入顺序的任务学不会",
            "permutation_probe",
            _patches._no_positions,
        ),
        Bug(
            "kv_cache_no_offset",
            "KV 缓存忘了位置偏移",
            "lecturekit.model.transformer.Transformer.decode_step",
            "x = self._embed(tokens[:, None], self.tgt_embedding, self.tgt_positions, len(cache))",
            "x = self._embed(tokens[:, None], self.tgt_embedding, self.tgt_positions)",
            "训练和教师强制的评估都正常，生成的句子却不对",
            "cache_consistency_probe",
            _patches._kv_cache_no_offset,
        ),
        Bug(
            "layernorm_wrong_axis",
            "层归一化沿序列轴",
            "lecturekit.model.layers.LAYER_NORM_FUNCTIONS",
            '"torch": F.layer_norm,',
            '"torch": lambda x, shape, w, b, eps: (x - x.mean(1, keepdim=True))'
            " / (x.var(1, unbiased=False, keepdim=True) + eps).sqrt() * w + b,  # 沿序列轴（第 1 维）",
            "输出随补齐长度和同一句里别的位置改变，未来泄漏",
            "layernorm_axis_check",
            _patches._layernorm_wrong_axis,
        ),
        Bug(
            "residual_missing",
            "解码器自注意力的残差连接缺失",
            "lecturekit.model.layers.DecoderLayer._add_and_norm",
            "x = self.norm1(x + self_attention(x))",
            "x = self.norm1(self_attention(x))",
            "（检查）子层输出清零后，改变解码器输入，输出不变",
            "residual_probe",
            _patches._no_residual,
        ),
        Bug(
            "dropout_at_decoding",
            "解码时 dropout 仍然开着",
            "lecturekit.decoding.search._token_by_token",
            "with eval_mode(model), torch.inference_mode():",
            "with torch.inference_mode():  # 少了 model.eval()",
            "同一输入两次解码结果不同",
            "determinism_probe",
            _patches._dropout_at_decoding,
        ),
        Bug(
            "post_ln_no_warmup",
            "后置层归一化不加预热",
            "lecturekit.training.schedules.learning_rate",
            "c = config  # validated when created: the formulas need no checks of its fields",
            "c, step = config, max(step, config.warmup_steps)  # 预热期间也用峰值",
            "第一步就用峰值学习率",
            "warmup_check",
            _patches._no_warmup,
        ),
        Bug(
            "beam_summed_log_prob",
            "束搜索不管 α，总按对数概率之和排序",
            "lecturekit.decoding.beam._penalty",
            "return 1.0 if alpha == 0.0 else float(length_penalty(length, alpha))",
            "return 1.0  # 不管 alpha，没有长度惩罚",
            "要了长度惩罚，返回的顺序仍与长度归一化的分数不符",
            "beam_ranking_check",
            _patches._beam_summed_log_prob,
        ),
        Bug(
            "tied_embedding_std1",
            "共享权重的嵌入按标准差 1 初始化",
            "lecturekit.model.transformer.init_weights",
            "nn.init.normal_(embedding.weight, std=d_model**-0.5)",
            "nn.init.normal_(embedding.weight, std=1.0)  # 共享权重的那张嵌入表",
            "初始损失远高于 ln V",
            "initial_loss_check",
            _patches._tied_embedding_std1,
        ),
        Bug(
            "tie_broken",
            "权重共享被一份拷贝悄悄断开",
            "lecturekit.model.transformer.Transformer.__init__",
            "self.output_proj.weight = self.tgt_embedding.weight",
            "self.output_proj.weight = nn.Parameter(self.tgt_embedding.weight.clone())",
            "参数比预期多，两个矩阵训练后不再相同",
            "weight_tie_check",
            _patches._tie_broken,
        ),
        Bug(
            "embedding_not_scaled",
            "嵌入没有乘 √D",
            "lecturekit.model.transformer.Transformer._embed",
            "x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T) -> (B, T, D)",
            "x = embedding(tokens)  # 没有乘 sqrt(D)",
            "（检查）词嵌入的均方根远小于位置编码",
            "embedding_scale_check",
            _patches._embedding_not_scaled,
        ),
    )
}

# the bugs of the model's forward pass that the lab's flag-pattern table lists: each trips
# its own set of the probes that need a model alone
MODEL_BUGS = (
    "causal_mask_missing",
    "causal_mask_inverted",
    "no_scaling",
    "softmax_query_axis",
    "source_padding_missing",
    "positions_missing",
    "layernorm_wrong_axis",
    "residual_missing",
    "embedding_not_scaled",
    "heads_split_reshape",
    "cross_padding_missing",
    "kv_cache_no_offset",
    "tie_broken",
)
# what mystery(case) hides: a bug the table leaves out, two bugs at once, a training bug
_MYSTERIES = {
    1: ("causal_mask_off_by_one",),
    2: ("causal_mask_missing", "source_padding_missing"),
    3: ("loss_on_probabilities",),
}
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


@contextlib.contextmanager
def mystery(case: int) -> Iterator[None]:
    """Plant the bug or bugs of the find-the-bug exercise ``lab.find_bug_<case>`` (1, 2 or 3)
    without saying which: while it runs, a backend or a Pre-LN layer that a hidden bug does
    not change refuses with a message that names the setting to use, not the bug."""
    check_int("case", case, 1, len(_MYSTERIES))
    hidden = set(_MYSTERIES[case]) - _patches.HIDDEN  # a nested mystery leaves the outer's
    with contextlib.ExitStack() as stack:
        _patches.HIDDEN.update(hidden)  # a backend's refusal must not name the hidden bug
        stack.callback(_patches.HIDDEN.difference_update, hidden)
        for name in _MYSTERIES[case]:
            stack.enter_context(plant(name))
        yield
