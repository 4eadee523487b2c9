"""Hostile cases, part C: decoding."""

from __future__ import annotations

from hostile.cases import (
    NAN,
    error,
    finite,
    result,
    src,
    tiny,
)


def _t():
    import torch

    return torch


# ------------------------------------------------------------------ decoding


def _dec(fn, *args, **kw):
    from lecturekit import decoding

    return getattr(decoding, fn)(tiny(), *args, **kw)


def _beam_vs_exhaustive(beam_size: int) -> bool:
    """A beam wider than the search space is exhaustive search: same best output."""
    beam = _dec("beam_search", src(), beam_size, 3)
    full = _dec("exhaustive_search", src(), 3)
    return beam.hypotheses[0][0].tokens == full.hypotheses[0][0].tokens


def _tokens_ok(r) -> bool:
    return r.tokens.dtype == _t().long and r.tokens.shape[0] >= 1


error("decoding", "greedy_max_len_1e9", lambda: _dec("greedy", src(), 10**9), "max_len")
error("decoding", "beam_max_len_1e9", lambda: _dec("beam_search", src(), 2, 10**9), "max_len")
result(
    "decoding", "beam_size_1e6_is_exhaustive", lambda: _beam_vs_exhaustive(10**6), bool, "beam_size"
)
error("decoding", "beam_size_0", lambda: _dec("beam_search", src(), 0, 5), "beam_size")
error("decoding", "beam_size_float", lambda: _dec("beam_search", src(), 2.5, 5), "beam_size")
error(
    "decoding", "beam_n_best_gt_beam", lambda: _dec("beam_search", src(), 2, 5, n_best=3), "n_best"
)
error(
    "decoding",
    "beam_length_penalty_nan",
    lambda: _dec("beam_search", src(), 2, 5, length_penalty=NAN),
    "length_penalty",
    "alpha",
)
error("decoding", "greedy_max_len_0", lambda: _dec("greedy", src(), 0), "max_len")
error("decoding", "greedy_max_len_bool", lambda: _dec("greedy", src(), True), "max_len")
error("decoding", "greedy_max_len_nan", lambda: _dec("greedy", src(), NAN), "max_len")
error("decoding", "greedy_src_float", lambda: _dec("greedy", src().float(), 5), "src")
error("decoding", "greedy_src_oov", lambda: _dec("greedy", src([4, 77]), 5), "src", "77")
error("decoding", "greedy_src_empty", lambda: _dec("greedy", src()[:, :0], 5), "src")
error("decoding", "greedy_src_list", lambda: _dec("greedy", [[4, 5]], 5), "src")
error(
    "decoding",
    "greedy_mask_wrong_shape",
    lambda: _dec("greedy", src(), 5, src_key_padding_mask=_t().zeros(1, 9, dtype=bool)),
    "src_key_padding_mask",
)
error(
    "decoding",
    "temperature_1e300",
    lambda: _dec("sample", src(), 5, temperature=1e300, seed=0),
    "temperature",
)
error(
    "decoding",
    "temperature_0",
    lambda: _dec("sample", src(), 5, temperature=0.0, seed=0),
    "temperature",
)
error(
    "decoding",
    "temperature_nan",
    lambda: _dec("sample", src(), 5, temperature=NAN, seed=0),
    "temperature",
)
error(
    "decoding",
    "temperature_negative",
    lambda: _dec("sample", src(), 5, temperature=-1.0, seed=0),
    "temperature",
)
error("decoding", "top_k_0", lambda: _dec("sample", src(), 5, top_k=0, seed=0), "top_k")
error("decoding", "top_p_nan", lambda: _dec("sample", src(), 5, top_p=NAN, seed=0), "top_p")
error("decoding", "top_p_2", lambda: _dec("sample", src(), 5, top_p=2.0, seed=0), "top_p")
error("decoding", "sample_seed_2_64", lambda: _dec("sample", src(), 5, seed=2**64), "seed")
error("decoding", "sample_seed_str", lambda: _dec("sample", src(), 5, seed="0"), "seed")
result(
    "decoding",
    "sample_top_k_huge",
    lambda: _dec("sample", src(), 5, top_k=10**9, seed=0),
    _tokens_ok,
    "top_k",
)
result(
    "decoding",
    "sample_temperature_tiny",
    lambda: _dec("sample", src(), 5, temperature=1e-30, seed=0),
    lambda r: finite(r.scores),
    "temperature",
)


def _per_item(fn: str, *args, **kw) -> bool:
    both = _dec(fn, src([4, 5, 6], [7, 8, 9]), *args, **kw)
    one = _dec(fn, src([7, 8, 9]), *args, **kw)
    n = one.tokens.shape[1]
    return bool((both.tokens[1, :n] == one.tokens[0]).all()) and finite(both.scores)


result("decoding", "greedy_batch_equals_item", lambda: _per_item("greedy", 6), bool)
result("decoding", "beam_batch_equals_item", lambda: _per_item("beam_search", 3, 6), bool)


def _seq_lp_batch() -> bool:
    from lecturekit.decoding import sequence_log_prob

    model, tokens = tiny(), [[4, 5, 2], [6, 2]]
    both = sequence_log_prob(model, src([4, 5, 6], [7, 8, 9]), tokens)
    rows = [
        sequence_log_prob(model, src(s), t)
        for s, t in zip([[4, 5, 6], [7, 8, 9]], tokens, strict=True)
    ]
    return bool(_t().allclose(_t().as_tensor(both).double(), _t().tensor(rows).double()))


result("decoding", "sequence_log_prob_batch_2", _seq_lp_batch, bool, "src", "batch")
error(
    "decoding", "sequence_log_prob_token_99",
    lambda: __import__("lecturekit").decoding.sequence_log_prob(tiny(), src(), [4, 99]), "99", "tokens",
)  # fmt: skip
error(
    "decoding",
    "filter_logits_top_k_negative",
    lambda: __import__("lecturekit").decoding.filter_logits(_t().randn(2, 5), top_k=-1),
    "top_k",
)
error(
    "decoding",
    "filter_logits_nan",
    lambda: __import__("lecturekit").decoding.filter_logits(_t().full((2, 5), NAN), top_k=2),
    "logits",
)
error(
    "decoding",
    "length_penalty_nan",
    lambda: __import__("lecturekit").decoding.length_penalty(3, NAN),
    "alpha",
    "length_penalty",
)
result(
    "decoding",
    "length_penalty_zero_length",
    lambda: __import__("lecturekit").decoding.length_penalty(0, 0.6),
    lambda r: abs(r - (5 / 6) ** 0.6) < 1e-12,
)
error(
    "decoding",
    "greedy_model_none",
    lambda: __import__("lecturekit").decoding.greedy(None, src(), 5),
    "model",
)
