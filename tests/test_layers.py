"""Layers: positional encodings, feed-forward, LayerNorm backend, encoder/decoder blocks."""

import dataclasses
import importlib
import inspect
import math
import pkgutil
import warnings

import pytest
import torch
import torch.nn.functional as F

import lecturekit.kernels as kernels
import lecturekit.model
from lecturekit import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerConfig,
    LearnedPositionalEncoding,
    PositionwiseFeedForward,
    SinusoidalPositionalEncoding,
    TransformerConfig,
    _common,
    causal_mask,
)
from lecturekit.model.config import LAYERNORM_BACKENDS
from lecturekit.model.layers import LAYER_NORM_FUNCTIONS, LayerNorm

SMALL = LayerConfig(d_model=8, n_heads=2, d_ff=16, dropout=0.0)


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


def test_layer_norm_backends_are_one_table():
    assert set(LAYER_NORM_FUNCTIONS) == set(LAYERNORM_BACKENDS)
    with pytest.raises(ValueError, match="backend must be one of"):
        LayerNorm(5, backend="apex")


def test_layer_norm_triton_backend_calls_the_public_kernel(monkeypatch):
    """The "triton" entry hands x, weight, bias and eps to ``kernels.layer_norm`` (which
    falls back to PyTorch itself where it cannot run)."""
    calls = []

    def fake_layer_norm(x, weight, bias, eps):
        calls.append(eps)
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)

    monkeypatch.setattr(kernels, "layer_norm", fake_layer_norm)
    norm = LayerNorm(5, eps=1e-3, backend="triton")
    torch.nn.init.normal_(norm.weight)
    x = torch.randn(2, 3, 5)
    torch.testing.assert_close(norm(x), F.layer_norm(x, (5,), norm.weight, norm.bias, 1e-3))
    assert calls == [1e-3]


def test_layer_norm_triton_backend_falls_back_on_cpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(_common, "_warned", set())
    norm = LayerNorm(5, backend="triton")
    x = torch.randn(2, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = norm(x)  # a kernel module without its fallback fails here, as it should
        norm(x)
    assert len(caught) == 1
    torch.testing.assert_close(out, F.layer_norm(x, (5,)))


def manual_encoder_layer(layer, x):
    """Post-LN block written from the slides: norm(x + attn(x)), norm(x + ffn(x))."""
    attn, _ = layer.self_attn(x, x, x)
    x = F.layer_norm(x + attn, (x.size(-1),), layer.norm1.weight, layer.norm1.bias)
    return F.layer_norm(x + layer.ffn(x), (x.size(-1),), layer.norm2.weight, layer.norm2.bias)


def test_encoder_layer_post_ln_is_add_then_norm():
    torch.manual_seed(1)
    layer = EncoderLayer(SMALL)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(layer(x), manual_encoder_layer(layer, x))


def test_pre_ln_keeps_a_residual_path():
    torch.manual_seed(2)
    layer = EncoderLayer(dataclasses.replace(SMALL, norm_first=True))
    for p in layer.parameters():  # zero every sub-layer output: the block must be the identity
        torch.nn.init.zeros_(p)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(layer(x), x)


def test_need_weights_keeps_per_head_weights():
    torch.manual_seed(3)
    layer = DecoderLayer(SMALL)
    tgt, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    layer(tgt, memory, tgt_is_causal=True, need_weights=True)
    assert layer.attention_weights.shape == (2, 2, 3, 3)
    assert layer.cross_attention_weights.shape == (2, 2, 3, 5)
    assert torch.equal(layer.attention_weights[..., causal_mask(3)], torch.zeros(2, 2, 3))
    layer(tgt, memory)
    assert layer.attention_weights is None


def test_stacks_repeat_the_layer_and_add_final_norm_for_pre_ln():
    assert len(Encoder(SMALL, 3).layers) == 3
    pre_ln = dataclasses.replace(SMALL, norm_first=True)
    assert Encoder(SMALL, 1).norm is None and Encoder(pre_ln, 1).norm is not None
    assert Decoder(SMALL, 2, final_norm=True).norm is not None


def test_decoder_stack_is_not_causal_unless_asked():
    """Like nn.TransformerDecoder: no tgt_mask and no tgt_is_causal means full attention."""
    torch.manual_seed(4)
    decoder = Decoder(SMALL, 1).eval()
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


def test_layer_config_is_the_model_configs_layer_part_frozen_and_validated():
    config = TransformerConfig(11, 13, d_model=8, n_heads=2, d_ff=16, activation="gelu")
    layer = config.layer
    assert layer == LayerConfig(8, 2, 16, dropout=0.1, activation="gelu")
    assert layer.head_dim == config.head_dim == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        layer.dropout = 0.5
    with pytest.raises(ValueError, match="layer_norm_eps must be > 0.0, got 0.0"):
        dataclasses.replace(layer, layer_norm_eps=0.0)  # replace validates again
    with pytest.raises(ValueError, match="divisible by n_heads"):
        LayerConfig(d_model=10, n_heads=3)
    with pytest.raises(TypeError, match="config must be a LayerConfig"):
        EncoderLayer(config)  # the model's config: pass config.layer


def test_layers_built_from_one_config_hold_its_settings():
    config = LayerConfig(12, 3, 20, dropout=0.25, activation="gelu", layer_norm_eps=1e-3)
    layer = DecoderLayer(config)
    for attention in (layer.self_attn, layer.cross_attn):
        assert (attention.d_model, attention.n_heads, attention.dropout) == (12, 3, 0.25)
    assert layer.ffn.linear1.out_features == 20 and layer.ffn.activation == "gelu"
    assert {norm.eps for norm in (layer.norm1, layer.norm2, layer.norm3)} == {1e-3}
    assert {d.p for d in (layer.dropout1, layer.dropout2, layer.dropout3)} == {0.25}
    assert all(layer.config is config for layer in Encoder(config, 2).layers)


def _model_modules():
    """Every nn.Module class defined in lecturekit.model (found by walking the package)."""
    for info in pkgutil.iter_modules(lecturekit.model.__path__, "lecturekit.model."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, torch.nn.Module)
                and value.__module__ == module.__name__
            ):
                yield value


def test_no_layer_constructor_takes_more_than_four_arguments():
    """Settings travel as one config (nanoGPT's Block(config)), not as lists of keywords
    (``validate=False``, which a layer passes to what it builds from its config, is no setting)."""
    found = {cls.__name__: cls for cls in _model_modules()}
    assert {"MultiHeadAttention", "EncoderLayer", "Decoder", "LayerNorm"} <= set(found)
    for name, cls in found.items():
        parameters = list(inspect.signature(cls.__init__).parameters)[1:]  # without self
        parameters = [p for p in parameters if p != "validate"]
        assert len(parameters) <= 4, (name, parameters)
