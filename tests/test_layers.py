"""Layers: positional encodings, feed-forward, LayerNorm backend, encoder/decoder blocks."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from lecturekit import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LearnedPositionalEncoding,
    PositionwiseFeedForward,
    SinusoidalPositionalEncoding,
    _common,
    causal_mask,
)
from lecturekit.model.layers import LayerNorm


def test_sinusoidal_matches_the_formula():
    encoding = SinusoidalPositionalEncoding(6, max_len=4)
    table = encoding.encoding(4)
    for pos in range(4):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_extends_past_max_len_and_offsets():
    encoding = SinusoidalPositionalEncoding(8, max_len=3)
    x = torch.zeros(2, 5, 8)
    full = encoding(x)
    assert full.shape == (2, 5, 8)
    torch.testing.assert_close(encoding(x[:, :2], offset=3), full[:, 3:])
    torch.testing.assert_close(full[0], SinusoidalPositionalEncoding(8, 10).encoding(5))


def test_learned_positions_and_their_limit():
    encoding = LearnedPositionalEncoding(4, max_len=3)
    x = torch.zeros(1, 3, 4)
    torch.testing.assert_close(encoding(x)[0], encoding.embedding.weight)
    torch.testing.assert_close(encoding(x[:, :1], offset=2)[0, 0], encoding.embedding.weight[2])
    with pytest.raises(ValueError, match="max_len=3"):
        encoding(torch.zeros(1, 4, 4))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_is_position_wise(activation):
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(4, 7, activation=activation)
    x = torch.randn(2, 3, 4)
    act = F.relu if activation == "relu" else F.gelu
    expected = (
        act(x @ ffn.linear1.weight.T + ffn.linear1.bias) @ ffn.linear2.weight.T + ffn.linear2.bias
    )
    torch.testing.assert_close(ffn(x), expected)
    torch.testing.assert_close(ffn(x[:, 1:2]), ffn(x)[:, 1:2])  # each position alone
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(4, 7, activation="swish")


def test_layer_norm_triton_backend_falls_back_on_cpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(_common, "_warned", set())
    norm = LayerNorm(5, backend="triton")
    x = torch.randn(2, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = norm(x)
        norm(x)
    assert len(caught) == 1 and "LayerNorm" in str(caught[0].message)
    torch.testing.assert_close(out, F.layer_norm(x, (5,)))


def manual_encoder_layer(layer, x):
    """Post-LN block written from the slides: norm(x + attn(x)), norm(x + ffn(x))."""
    attn, _ = layer.self_attn(x, x, x)
    x = F.layer_norm(x + attn, (x.size(-1),), layer.norm1.weight, layer.norm1.bias)
    return F.layer_norm(x + layer.ffn(x), (x.size(-1),), layer.norm2.weight, layer.norm2.bias)


def test_encoder_layer_post_ln_is_add_then_norm():
    torch.manual_seed(1)
    layer = EncoderLayer(8, 2, 16, dropout=0.0)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(layer(x), manual_encoder_layer(layer, x))


def test_pre_ln_keeps_a_residual_path():
    torch.manual_seed(2)
    layer = EncoderLayer(8, 2, 16, dropout=0.0, norm_first=True)
    for p in layer.parameters():  # zero every sub-layer output: the block must be the identity
        torch.nn.init.zeros_(p)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(layer(x), x)


def test_need_weights_keeps_per_head_weights():
    torch.manual_seed(3)
    layer = DecoderLayer(8, 2, 16, dropout=0.0)
    tgt, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    layer(tgt, memory, tgt_is_causal=True, need_weights=True)
    assert layer.attention_weights.shape == (2, 2, 3, 3)
    assert layer.cross_attention_weights.shape == (2, 2, 3, 5)
    assert torch.equal(layer.attention_weights[..., causal_mask(3)], torch.zeros(2, 2, 3))
    layer(tgt, memory)
    assert layer.attention_weights is None


def test_stacks_repeat_the_layer_and_add_final_norm_for_pre_ln():
    assert len(Encoder(3, 8, 2, 16).layers) == 3
    assert (
        Encoder(1, 8, 2, 16).norm is None and Encoder(1, 8, 2, 16, norm_first=True).norm is not None
    )
    assert Decoder(2, 8, 2, 16, final_norm=True).norm is not None


def test_decoder_stack_is_not_causal_unless_asked():
    """Like nn.TransformerDecoder: no tgt_mask and no tgt_is_causal means full attention."""
    torch.manual_seed(4)
    decoder = Decoder(1, 8, 2, 16, dropout=0.0).eval()
    tgt, memory = torch.randn(1, 4, 8), torch.randn(1, 3, 8)
    changed = tgt.clone()
    changed[:, 3] += 1.0
    free = decoder(tgt, memory)[:, 0] - decoder(changed, memory)[:, 0]
    causal = (
        decoder(tgt, memory, tgt_is_causal=True)[:, 0]
        - decoder(changed, memory, tgt_is_causal=True)[:, 0]
    )
    assert free.abs().max() > 1e-4 and causal.abs().max() == 0
    by_mask = decoder(tgt, memory, tgt_mask=causal_mask(4))
    torch.testing.assert_close(by_mask, decoder(tgt, memory, tgt_is_causal=True))
