"""Hostile cases, part F (issue #45): the debugging lab (planting bugs, the diagnostics on NaN
and on a broken ``attend``) and the training and checkpoint code's obscure errors."""

from __future__ import annotations

import math
from typing import Any

from hostile.cases import PAIRS, TINY, error, fit, result, src, tiny, tmp


def _t():
    import torch

    return torch


def _lab():
    from lecturekit.lab import bugs

    return bugs


def _d():
    from lecturekit.lab import diagnostics

    return diagnostics


SRC = [[4, 5, 6, 7, 8, 9], [5, 6, 7, 8, 9, 10], [6, 7, 8, 9, 10, 4]]
TGT = [[1, 4, 5, 6, 7, 8], [1, 5, 6, 7, 8, 9], [1, 6, 7, 8, 9, 10]]


def _probes(model: Any) -> set[str]:
    """The model probes that flag ``model`` (unpadded inputs)."""
    torch, d = _t(), _d()
    s, t = torch.tensor(SRC), torch.tensor(TGT)
    verdicts = [
        d.causality_probe(model, s, t),
        d.mask_sanity(model, s, t),
        d.attention_reference_check(),
        d.residual_probe(model, s, t),
        d.embedding_scale_check(model, s),
        d.permutation_probe(model, s),
    ]
    return {v.probe for v in verdicts if v.flagged}


# ------------------------------------------------------------------ planting twice (item 4)
def _twice(name: str) -> bool:
    model = tiny()
    with _lab().plant(name):
        once = _probes(model)
        with _lab().plant(name):
            twice = _probes(model)
    return bool(once) and once == twice and not _probes(model)


def _guess_inside_mystery(case: int) -> bool:
    lab = _lab()
    model = tiny()
    with lab.mystery(case):
        hidden = _probes(model)
        with lab.plant(lab._MYSTERIES[case][0]):  # the learner's (right) guess, to compare
            guessed = _probes(model)
    return bool(hidden) and hidden == guessed


for _bug in ("causal_mask_inverted", "residual_missing", "no_scaling"):
    result("lab", f"plant_twice_{_bug}", lambda b=_bug: _twice(b), bool)
for _case in (1, 2):
    result("lab", f"mystery_then_guess_{_case}", lambda c=_case: _guess_inside_mystery(c), bool)
error("lab", "plant_unknown_bug", lambda: _lab().plant("no_such_bug").__enter__(), "name")


# ------------------------------------------------------------------ diagnostics on NaN (item 8)
def _nan_model() -> Any:
    model = tiny()
    with _t().no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    return model


def _flagged_nan(verdict: Any) -> bool:
    return verdict.flagged and "NaN" in verdict.message


result("lab", "embedding_scale_check_nan",
       lambda: _d().embedding_scale_check(_nan_model(), _t().tensor(SRC)), _flagged_nan)  # fmt: skip
result("lab", "mask_picture_nan",
       lambda: _d().mask_picture(_nan_model(), _t().tensor(SRC), _t().tensor(TGT)),
       lambda r: "?" in r and "·" not in r)  # fmt: skip
result("lab", "warmup_check_nan", lambda: _d().warmup_check(lambda s: math.nan), _flagged_nan)
result("lab", "warmup_check_inf_later",
       lambda: _d().warmup_check(lambda s: 1e-4 * s if s < 9 else math.inf), _flagged_nan)  # fmt: skip
result("lab", "beam_ranking_check_nan",
       lambda: _d().beam_ranking_check([(3, -1.0), (4, math.nan)], 1.0), _flagged_nan)  # fmt: skip
error(
    "lab", "free_running_check_no_batches", lambda: _d().free_running_check(tiny(), []), "batches"
)


def _attend(kind: str):
    import torch.nn.functional as F

    def attend(q: Any, k: Any, v: Any) -> Any:
        if kind == "ignores_k":
            return F.scaled_dot_product_attention(q, q, v, is_causal=True)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if kind == "tuple":
            return out, None
        if kind == "detached":
            return out.detach()
        if kind == "nan":
            return out * math.nan
        if kind == "transposed":
            return out.transpose(-1, -2)
        raise IndexError("Dimension out of range (expected to be in range of [-2, 1], got 3)")

    return attend


for _kind in ("ignores_k", "tuple", "detached", "nan", "transposed", "raises"):
    result("lab", f"attention_check_attend_{_kind}",
           lambda k=_kind: _d().attention_reference_check(_attend(k)),
           lambda v: v.flagged)  # fmt: skip


# ------------------------------------------------------------------ the component checks
def _loss(kind: str):
    def loss(logits: Any, target: Any) -> Any:
        if kind == "tuple":
            return logits.mean(), None
        if kind == "per_token":
            return logits.mean(dim=-1)
        if kind == "none":
            return None
        raise KeyError("labels")

    return loss


for _kind in ("tuple", "per_token", "none", "raises"):
    result("lab", f"loss_reference_check_{_kind}",
           lambda k=_kind: _d().loss_reference_check(_loss(k), 11), lambda v: v.flagged)  # fmt: skip
result("lab", "cache_consistency_probe_nan",
       lambda: _d().cache_consistency_probe(_nan_model(), _t().tensor(SRC)), _flagged_nan)  # fmt: skip
result("lab", "attention_module_check_nan",
       lambda: _d().attention_module_check(_nan_model()), _flagged_nan)  # fmt: skip
result("lab", "encoder_padding_probe_nan",
       lambda: _d().encoder_padding_probe(_nan_model(), _t().tensor(SRC)), _flagged_nan)  # fmt: skip
error("lab", "attention_module_check_no_attention",
      lambda: _d().attention_module_check(_t().nn.Linear(4, 4)), "MultiHeadAttention")  # fmt: skip
error("lab", "layernorm_axis_check_no_layernorm",
      lambda: _d().layernorm_axis_check(_t().nn.Linear(4, 4), _t().randn(2, 4)), "nn.LayerNorm")  # fmt: skip
error("lab", "cache_consistency_probe_zero_steps",
      lambda: _d().cache_consistency_probe(tiny(), _t().tensor(SRC), 0), "steps")  # fmt: skip
error("lab", "mystery_unknown_case", lambda: _lab().mystery(0).__enter__(), "case")
error("lab", "train_with_bug_unknown",
      lambda: __import__("lecturekit.lab.gallery").lab.gallery.train_with_bug("typo"), "bug")  # fmt: skip


# ------------------------------------------------------------------ training, checkpoints (12)
def _fit_tensors(dtype: Any = None) -> Any:
    torch = _t()
    pairs = [(torch.tensor(s, dtype=dtype), torch.tensor(t, dtype=dtype)) for s, t in PAIRS]
    return fit(pairs)


result("training", "fit_integer_tensor_pairs", _fit_tensors, lambda h: len(h.loss) > 0)
error("training", "fit_float_tensor_pairs", lambda: _fit_tensors(_t().float32), "source", "int")
error("training", "fit_2d_tensor_pairs", lambda: fit([(_t().tensor([[4, 5]]), [4])] * 4), "source")


def _meta() -> Any:
    from lecturekit import Transformer, TransformerConfig

    with _t().device("meta"):
        return Transformer(TransformerConfig(**TINY))


def _fit_meta() -> Any:
    from lecturekit.training import TrainConfig
    from lecturekit.training import fit as _fit

    config = TrainConfig(epochs=1, batch_size=4, progress=False, device="cpu", warmup_steps=4)
    return _fit(_meta(), PAIRS, None, config)


def _greedy_meta() -> Any:
    from lecturekit.decoding import greedy

    return greedy(_meta(), src(), 5)


error("training", "fit_meta_model", _fit_meta, "meta")
error("decoding", "greedy_meta_model", _greedy_meta, "meta")


def _other_cache() -> Any:
    torch = _t()
    model, other = tiny(), tiny(d_model=32, n_decoder_layers=2)
    cache = other.init_cache(other.encode(src()))
    return model.decode_step(torch.tensor([1]), cache)


error("model", "decode_step_other_models_cache", _other_cache, "cache")


def _average(states: Any) -> Any:
    from lecturekit.training import average_checkpoints

    return average_checkpoints(states)


error("checkpoints", "average_models_not_state_dicts", lambda: _average([tiny(), tiny()]),
      "state dict", "states")  # fmt: skip


def _save(**kw: Any) -> Any:
    from lecturekit.training import save_checkpoint

    return save_checkpoint(tmp(), tiny(), **kw)


error("checkpoints", "save_vocab_list", lambda: _save(src_vocab=["a", "b"]), "src_vocab")
error("checkpoints", "save_vocab_dict", lambda: _save(tgt_vocab={"a": 1}), "tgt_vocab")
error("checkpoints", "save_metadata_function", lambda: _save(metadata={"f": print}), "metadata")
error("checkpoints", "save_train_config_lock", lambda: _save(train_config=_lock()), "train_config")


def _lock() -> Any:
    import threading

    return threading.Lock()


def _sampler(lengths: Any) -> Any:
    from lecturekit.data import BucketBatchSampler

    return list(BucketBatchSampler(lengths, 2))


error("data", "bucket_sampler_string_lengths", lambda: _sampler(["5", "x"]), "lengths")
error("data", "bucket_sampler_one_string", lambda: _sampler("57"), "lengths")
error("data", "bucket_sampler_negative_length", lambda: _sampler([3, -1]), "lengths")
