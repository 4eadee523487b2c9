"""Hostile cases, part A: model & configs, training settings."""

from __future__ import annotations

import dataclasses

from hostile.cases import (
    INF,
    NAN,
    PAIRS,
    cfg,
    error,
    finite,
    fit,
    frozen,
    result,
    src,
    tcfg,
    tiny,
)


def _t():
    import torch

    return torch


# ------------------------------------------------------------------ model & configs
for field, bad in [
    ("d_model", 2**20),
    ("max_len", 10**10),
    ("d_ff", 10**10),
    ("n_decoder_layers", 10**9),
    ("src_vocab_size", 10**12),
]:
    # the size a model would need is refused when it is built, before torch allocates it
    error("model", f"model_{field}_{bad!r}", lambda f=field, b=bad: tiny(**{f: b}), field)
result("model", "config_src_vocab_size_3", lambda: tiny(src_vocab_size=3), lambda m: m is not None)
for field, bad in [
    ("d_model", -16),
    ("d_model", 0), ("n_heads", 0), ("n_heads", 3), ("d_ff", 0), ("d_ff", 32.5),
    ("dropout", 1.5), ("dropout", -0.1), ("dropout", NAN), ("layer_norm_eps", NAN),
    ("layer_norm_eps", 0.0), ("layer_norm_eps", -1.0), ("layer_norm_eps", INF),
    ("max_len", 0), ("max_len", True), ("src_vocab_size", 0), ("tgt_vocab_size", -1),
    ("n_encoder_layers", -1), ("n_decoder_layers", 0), ("activation", "tanhh"), ("positional", "rope"),
    ("attention_backend", "flash"), ("layernorm_backend", None), ("pad_id", 2),
    ("eos_id", 0), ("bos_id", 99), ("pad_id", -1), ("norm_first", "yes"),
    ("tie_embeddings", 1), ("share_vocab", "no"), ("d_model", 16.0), ("n_heads", True),
    ("d_model", "16"), ("dropout", INF), ("max_len", NAN),
]:  # fmt: skip
    error("model", f"config_{field}_{bad!r}", lambda f=field, b=bad: cfg(**{f: b}), field)

error("model", "config_share_vocab_sizes", lambda: cfg(share_vocab=True), "share_vocab", "vocab")
error("model", "config_d_model_odd_sinusoidal", lambda: cfg(d_model=15, n_heads=1), "d_model")
error("model", "config_unknown_field", lambda: cfg(d_modle=16), "d_modle")
for field, bad in [
    ("dropout", 1.5), ("layer_norm_eps", NAN), ("pad_id", 2), ("d_model", 2**20),
    ("max_len", 10**10), ("attention_backend", "x"),
]:  # fmt: skip
    error(
        "model", f"config_set_after_{field}",
        frozen(lambda f=field, b=bad: setattr(cfg(), f, b)), "frozen",
    )  # fmt: skip
error("model", "layer_config_set_after", frozen(lambda: setattr(cfg().layer, "d_ff", 0)), "frozen")
error(
    "model", "replace_revalidates",
    lambda: dataclasses.replace(cfg(), dropout=NAN), "dropout",
)  # fmt: skip


def _forward(src_ids, tgt_ids, **kw):
    return tiny()(src_ids, tgt_ids, **kw)


error("model", "forward_float_src", lambda: _forward(src().float(), src()), "src")
error("model", "forward_src_id_99", lambda: _forward(src([4, 99]), src()), "src", "99")
error("model", "forward_tgt_id_negative", lambda: _forward(src(), src([-1, 4])), "tgt", "-1")
error("model", "forward_src_1d", lambda: _forward(src()[0], src()), "src")
error("model", "forward_batch_mismatch", lambda: _forward(src([4], [5]), src([4])), "batch", "tgt")
error("model", "forward_empty_src", lambda: _forward(src()[:, :0], src()), "src", "empty")
result(
    "model",
    "forward_longer_than_max_len_sinusoidal",
    lambda: _forward(src([4] * 30), src()),
    finite,
    "max_len",
)
error(
    "model",
    "forward_too_long_learned",
    lambda: tiny(positional="learned")(src([4] * 30), src()),
    "max_len",
)
error(
    "model", "forward_mask_wrong_shape",
    lambda: _forward(src(), src(), src_key_padding_mask=_t().zeros(1, 7, dtype=bool)),
    "src_key_padding_mask",
)  # fmt: skip
error(
    "model", "forward_mask_float_nan",
    lambda: _forward(src(), src(), src_mask=_t().full((3, 3), NAN)), "src_mask", "nan",
)  # fmt: skip
error(
    "model", "forward_mask_int",
    lambda: _forward(src(), src(), tgt_mask=_t().ones(3, 3, dtype=_t().int64)), "tgt_mask",
)  # fmt: skip
result(
    "model", "forward_all_padding_row",
    lambda: _forward(src([4, 5], [0, 0]), src([4, 5], [4, 5])), finite, "src", "padding",
)  # fmt: skip
error("model", "encode_list", lambda: tiny().encode([[4, 5]]), "src", "Tensor")
error("model", "encode_bool", lambda: tiny().encode(src().bool()), "src")


def _mha(**kw):
    from lecturekit.model import MultiHeadAttention

    x = _t().randn(1, 3, 16)
    return MultiHeadAttention(16, 2)(x, x, x, **kw)[0]


error(
    "model", "mha_mask_and_is_causal",
    lambda: _mha(attn_mask=_t().zeros(3, 3, dtype=bool), is_causal=True), "is_causal",
)  # fmt: skip
error("model", "mha_mask_nan", lambda: _mha(attn_mask=_t().full((3, 3), NAN)), "attn_mask")
error(
    "model",
    "mha_mask_wrong_shape",
    lambda: _mha(attn_mask=_t().zeros(2, 2, dtype=bool)),
    "attn_mask",
)
result(
    "model",
    "mha_padding_mask_float_additive",
    lambda: _mha(key_padding_mask=_t().zeros(1, 3)),
    finite,
)
error(
    "model",
    "mha_padding_mask_float_inf",
    lambda: _mha(key_padding_mask=_t().full((1, 3), INF)),
    "key_padding_mask",
)
error(
    "model",
    "mha_dropout_2",
    lambda: __import__("lecturekit").model.MultiHeadAttention(16, 2, 2.0),
    "dropout",
)
error(
    "model",
    "mha_heads_3",
    lambda: __import__("lecturekit").model.MultiHeadAttention(16, 3),
    "n_heads",
)


def _sdpa(**kw):
    from lecturekit.model import scaled_dot_product_attention

    x = _t().randn(1, 3, 4)
    return scaled_dot_product_attention(x, x, x, **kw)[0]


error(
    "model", "sdpa_mask_and_is_causal",
    lambda: _sdpa(attn_mask=_t().zeros(3, 3, dtype=bool), is_causal=True), "is_causal",
)  # fmt: skip
error("model", "sdpa_scale_nan", lambda: _sdpa(scale=NAN), "scale")
error("model", "sdpa_dropout_nan", lambda: _sdpa(dropout_p=NAN), "dropout")
error("model", "sdpa_mask_plus_inf", lambda: _sdpa(attn_mask=_t().full((3, 3), INF)), "attn_mask")
result(
    "model",
    "sdpa_fully_masked_row_zero",
    lambda: _sdpa(attn_mask=_t().ones(3, 3, dtype=bool)),
    lambda r: bool((r == 0).all()),
)
error(
    "model", "causal_mask_negative", lambda: __import__("lecturekit").model.causal_mask(-1), "size"
)
error("model", "causal_mask_float", lambda: __import__("lecturekit").model.causal_mask(2.5), "size")
error(
    "model", "causal_mask_huge", lambda: __import__("lecturekit").model.causal_mask(10**6), "size"
)
error(
    "model",
    "padding_mask_list",
    lambda: __import__("lecturekit").model.padding_mask([[1, 0]], 0),
    "tokens",
)
error(
    "model",
    "count_parameters_none",
    lambda: __import__("lecturekit").model.count_parameters(None),
    "model",
)

# ------------------------------------------------------------------ training settings
for field, bad in [
    ("adam_eps", 0.0), ("seed", 2**64), ("seed", -1), ("lr", NAN), ("lr", INF), ("lr", -1.0),
    ("lr_factor", NAN), ("clip_grad_norm", -1.0), ("clip_grad_norm", NAN), ("epochs", 0),
    ("epochs", 2.5), ("batch_size", 0), ("batch_size", True),
    ("schedule", "linear"), ("warmup_steps", -1), ("decay_steps", 0), ("betas", (0.9, 1.0)),
    ("betas", (NAN, 0.9)), ("betas", 0.9), ("weight_decay", -0.1), ("label_smoothing", 1.0),
    ("label_smoothing", NAN), ("max_steps", 0), ("max_seconds", -1.0), ("max_seconds", NAN),
    ("target_exact_match", 1.5), ("eval_every", 0), ("valid_decode_max_len", 10**9),
    ("valid_decode_max_len", 0), ("device", "mps"), ("device", "tpu"), ("progress", "no"),
    ("scheduled_sampling", "yes"),
]:  # fmt: skip
    error("training", f"train_{field}_{bad!r}", lambda f=field, b=bad: tcfg(**{f: b}), field)
error("training", "train_cosine_without_decay", lambda: tcfg(schedule="cosine"), "decay_steps")
for field, bad in [("clip_grad_norm", -1.0), ("lr", NAN), ("adam_eps", 0.0)]:
    error(
        "training", f"train_set_after_{field}",
        frozen(lambda f=field, b=bad: setattr(tcfg(), f, b)), "frozen",
    )  # fmt: skip


def _ss(**kw):
    from lecturekit.training import ScheduledSampling

    return ScheduledSampling(**kw)


for field, bad in [
    ("k", NAN), ("c", NAN), ("sample", "no"), ("min_prob", 1.5), ("min_prob", NAN),
    ("schedule", "cosine"), ("k", INF), ("k", -1.0), ("sample", 1),
]:  # fmt: skip
    error("training", f"ss_{field}_{bad!r}", lambda f=field, b=bad: _ss(**{f: b}), field)
error("training", "ss_set_after", frozen(lambda: setattr(_ss(), "k", NAN)), "frozen")
error("training", "ss_teacher_prob_negative_step", lambda: _ss().teacher_prob(-1), "step")


def _sched(name, *args, **kw):
    from lecturekit.training import schedules

    return getattr(schedules, name)(*args, **kw)


error("training", "noam_factor_nan", lambda: _sched("noam_lr", 1, 16, 4, factor=NAN), "factor")
error("training", "noam_d_model_0", lambda: _sched("noam_lr", 1, 0, 4), "d_model")
error("training", "noam_step_negative", lambda: _sched("noam_lr", -5, 16, 4), "step")
error("training", "noam_step_float", lambda: _sched("noam_lr", 1.5, 16, 4), "step")
result("training", "noam_step_0", lambda: _sched("noam_lr", 0, 16, 4), finite, "step")
error("training", "cosine_lr_nan", lambda: _sched("cosine_lr", 1, NAN, 2, 10), "lr")
error(
    "training",
    "cosine_decay_before_warmup",
    lambda: _sched("cosine_lr", 1, 0.1, 10, 5),
    "decay_steps",
    "warmup",
)
result(
    "training",
    "cosine_past_decay",
    lambda: _sched("cosine_lr", 100, 0.1, 2, 10),
    lambda r: r == 0.0 or finite(r),
    "step",
)
error("training", "constant_lr_inf", lambda: _sched("constant_lr", 1, INF), "lr")
error(
    "training",
    "warmup_lr_negative_warmup",
    lambda: _sched("linear_warmup_lr", 1, 0.1, -2),
    "warmup",
)


def _nll(target, logits=None, **kw):
    from lecturekit.training import label_smoothed_nll

    logits = _t().randn(2, 3, 11) if logits is None else logits
    return label_smoothed_nll(logits, _t().tensor(target), **kw)


error("training", "nll_target_50", lambda: _nll([[4, 50, 0], [4, 5, 0]]), "target", "50")
error("training", "nll_target_minus_100", lambda: _nll([[4, -100, 0], [4, 5, 0]]), "target", "-100")
error(
    "training",
    "nll_smoothing_nan",
    lambda: _nll([[4, 5, 0], [4, 5, 0]], smoothing=NAN),
    "smoothing",
)
error(
    "training", "nll_smoothing_2", lambda: _nll([[4, 5, 0], [4, 5, 0]], smoothing=2.0), "smoothing"
)
error(
    "training",
    "nll_reduction_avg",
    lambda: _nll([[4, 5, 0], [4, 5, 0]], reduction="avg"),
    "reduction",
)
error("training", "nll_float_target", lambda: _nll([[4.0, 5.0, 0.0], [4.0, 5.0, 0.0]]), "target")
error("training", "nll_shape_mismatch", lambda: _nll([[4, 5], [4, 5]]), "target", "shape")
result(
    "training", "nll_all_ignored",
    lambda: _nll([[0, 0, 0], [0, 0, 0]]), finite, "target", "ignore",
)  # fmt: skip
result(
    "training",
    "nll_logits_nan_propagates",
    lambda: _nll([[4, 5, 0], [4, 5, 0]], logits=_t().full((2, 3, 11), NAN)),
    lambda r: bool(r.isnan()),
)
error("training", "fit_train_none", lambda: fit(None), "train")
error("training", "fit_string_pairs", lambda: fit([("abc", "ab")] * 4), "train", "str", "ids")
result(
    "training",
    "fit_list_pairs",
    lambda: fit([[[4, 5], [4]]] * 4).loss,
    lambda r: all(map(finite, r)),
    "train",
)
result(
    "training",
    "fit_batch_size_1e12",
    lambda: fit(batch_size=10**12).loss,
    lambda r: len(r) == 1 and finite(r[0]),
)
error("training", "fit_empty_list", lambda: fit([]), "train", "empty")
error(
    "training", "fit_later_label_50", lambda: fit(PAIRS + [([4, 5], [50])]), "50", "tgt", "target"
)
error("training", "fit_source_id_99", lambda: fit(PAIRS + [([99], [4])]), "99", "src", "source")
error("training", "fit_negative_id", lambda: fit(PAIRS + [([4], [-3])]), "-3", "tgt", "target")
error("training", "fit_float_ids", lambda: fit([([4.5, 5.0], [4.0])] * 4), "int", "train", "ids")
error(
    "training",
    "fit_config_dict",
    lambda: __import__("lecturekit").fit(tiny(), PAIRS, None, {"epochs": 1}),
    "config",
)
error(
    "training",
    "fit_model_none",
    lambda: __import__("lecturekit").fit(None, PAIRS, None, tcfg()),
    "model",
)
error(
    "training",
    "fit_valid_decode_max_len_huge",
    lambda: fit(valid=PAIRS, valid_decode_max_len=10**9),
    "valid_decode_max_len",
)
result(
    "training",
    "fit_long_pair_sinusoidal",
    lambda: fit(PAIRS + [([4] * 40, [4])]).loss,
    lambda r: all(map(finite, r)),
    "max_len",
)
error(
    "training",
    "fit_too_long_pair_learned",
    lambda: __import__("lecturekit").fit(
        tiny(positional="learned"), PAIRS + [([4] * 40, [4])], None, tcfg()
    ),
    "max_len",
)
result("training", "fit_one_step_finite", lambda: fit(max_steps=1).loss[-1], finite)
error(
    "training",
    "fit_on_step_not_callable",
    lambda: __import__("lecturekit").fit(tiny(), PAIRS, None, tcfg(), on_step=3),
    "on_step",
)
