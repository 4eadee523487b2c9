"""Issue #28 for the model: sizes the machine cannot hold are refused before torch allocates
them; the public step-by-step attention refuses a NaN scale or dropout and a +inf/NaN mask."""

from __future__ import annotations

import pytest
import torch

from lecturekit import Transformer, TransformerConfig
from lecturekit.model import scaled_dot_product_attention

TINY = dict(src_vocab_size=13, tgt_vocab_size=11, d_model=16, n_heads=2, d_ff=32,
            n_encoder_layers=1, n_decoder_layers=1, max_len=20)  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [("d_model", 2**20), ("max_len", 10**10), ("d_ff", 10**10), ("n_decoder_layers", 10**9)],
)
def test_a_model_larger_than_memory_is_refused_naming_its_size(field, value) -> None:
    config = TransformerConfig(**{**TINY, field: value})
    with pytest.raises(ValueError, match=f"{field}={value}.*GiB"):
        Transformer(config)


def test_the_lower_bound_is_below_the_real_parameter_count() -> None:
    model = Transformer(TransformerConfig(**TINY))
    assert model.config.min_values <= sum(p.numel() for p in model.parameters()) + 16 * 20


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"scale": float("nan")}, "scale"),
        ({"dropout_p": float("nan")}, "dropout_p"),
        ({"attn_mask": torch.full((3, 3), float("inf"))}, "attn_mask"),
        ({"attn_mask": torch.full((3, 3), float("nan"))}, "attn_mask"),
    ],
)
def test_scaled_dot_product_attention_refuses_what_would_give_nan(kwargs, name) -> None:
    x = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match=name):
        scaled_dot_product_attention(x, x, x, **kwargs)
