"""The reference solutions of the chapter 2 and 3 exercises against independent references:
lecturekit's and torch's own modules."""

import torch
from torch import nn

import lecturekit
from lecturekit.exercises.ch02_attention import (
    reference_mha_parameters,
    reference_scaled_dot_product,
    reference_sinusoidal_encoding,
)
from lecturekit.exercises.ch03_encoder import (
    reference_layer_parameters,
    reference_layernorm,
    reference_masked_feature_mean,
)


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_scaled_dot_product_matches_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    expected = nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(reference_scaled_dot_product(q, k, v), expected)


def test_sinusoidal_encoding_matches_lecturekit_layer():
    layer = lecturekit.SinusoidalPositionalEncoding(64, max_len=50)
    torch.testing.assert_close(reference_sinusoidal_encoding(50, 64), layer.encoding(50))


def test_mha_parameters_match_real_modules():
    for d_model, n_heads in [(512, 8), (512, 1), (64, 4), (768, 12)]:
        torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        ours = lecturekit.MultiHeadAttention(d_model, n_heads)
        assert reference_mha_parameters(d_model, n_heads) == n_params(torch_mha) == n_params(ours)


def test_layer_parameters_match_real_encoder_layers():
    for d_model, d_ff in [(512, 2048), (64, 256)]:
        torch_layer = nn.TransformerEncoderLayer(d_model, 8, d_ff, batch_first=True)
        ours = lecturekit.EncoderLayer(d_model, 8, d_ff)
        assert reference_layer_parameters(d_model, d_ff) == n_params(torch_layer) == n_params(ours)


def test_layernorm_matches_torch_functional():
    x = torch.randn(2, 5, 16, dtype=torch.float64) * 3 + 1
    torch.testing.assert_close(reference_layernorm(x), nn.functional.layer_norm(x, (16,)))


def test_masked_feature_mean_equals_mean_of_the_real_tokens():
    x = torch.randn(3, 4, 2, dtype=torch.float64)
    lengths = [4, 1, 3]
    mask = torch.arange(4)[None, :] >= torch.tensor(lengths)[:, None]
    real = torch.cat([x[b, :n] for b, n in enumerate(lengths)])  # (8, 2)
    torch.testing.assert_close(reference_masked_feature_mean(x, mask), real.mean(dim=0))
