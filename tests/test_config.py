"""TransformerConfig: validation and the paper presets."""

import pytest

from lecturekit import TransformerConfig


def small(**overrides):
    fields = dict(src_vocab_size=20, tgt_vocab_size=30, d_model=16, n_heads=4, d_ff=32)
    fields.update(overrides)
    return TransformerConfig(**fields)


def test_defaults_are_the_paper_base_sizes():
    config = small(d_model=512, n_heads=8, d_ff=2048)
    assert (config.n_encoder_layers, config.n_decoder_layers) == (6, 6)
    assert config.head_dim == 64
    assert config.norm_first is False and config.attention_backend == "math"


def test_presets():
    base = TransformerConfig.paper_base(37000)
    assert (base.d_model, base.n_heads, base.d_ff, base.dropout) == (512, 8, 2048, 0.1)
    assert base.share_vocab and base.tie_embeddings
    assert base.src_vocab_size == base.tgt_vocab_size == 37000
    big = TransformerConfig.paper_big(37000)
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout) == (1024, 16, 4096, 0.3)
    assert TransformerConfig.paper_base(100, n_encoder_layers=2).n_encoder_layers == 2


@pytest.mark.parametrize(
    ("overrides", "error", "words"),
    [
        (dict(d_model=18, n_heads=4), ValueError, "divisible by n_heads"),
        (dict(d_model=0), ValueError, "d_model must be >= 1"),
        (dict(n_heads=2.0), TypeError, "n_heads must be an int"),
        (dict(src_vocab_size=-3), ValueError, "src_vocab_size"),
        (dict(n_encoder_layers=-1), ValueError, "n_encoder_layers"),
        (dict(dropout=1.0), ValueError, "dropout"),
        (dict(activation="tanh"), ValueError, "activation"),
        (dict(positional="rotary"), ValueError, "positional"),
        (dict(attention_backend="flash"), ValueError, "attention_backend"),
        (dict(layernorm_backend="apex"), ValueError, "layernorm_backend"),
        (dict(pad_id=20), ValueError, "pad_id"),
        (dict(eos_id=30), ValueError, "eos_id"),
        (dict(bos_id=-1), ValueError, "bos_id"),
        (dict(share_vocab=True), ValueError, "share_vocab"),
        (dict(norm_first=1), TypeError, "norm_first"),
        (dict(d_model=9, n_heads=3, positional="sinusoidal"), ValueError, "even"),
        # impossible special ids and degenerate sizes (issue #20)
        (dict(pad_id=2, eos_id=2), ValueError, "pad_id and eos_id must differ.*never"),
        (dict(pad_id=1, bos_id=1, eos_id=2), ValueError, "pad_id and bos_id must differ"),
        (dict(n_decoder_layers=0), ValueError, "n_decoder_layers must be >= 1, got 0"),
        (dict(layer_norm_eps=float("inf")), ValueError, "layer_norm_eps must be a finite number"),
        (dict(layer_norm_eps=float("nan")), ValueError, "layer_norm_eps must be a finite number"),
        (dict(layer_norm_eps=0.0), ValueError, "layer_norm_eps"),
        (dict(layer_norm_eps=True), TypeError, "layer_norm_eps must be a number, got bool"),
        (dict(layer_norm_eps="1e-5"), TypeError, "layer_norm_eps must be a number, got str"),
        (dict(n_heads=True), TypeError, "n_heads must be an int, got bool"),
        (dict(d_ff=10**3 + 0.5), TypeError, "d_ff must be an int"),
        (dict(dropout=float("nan")), ValueError, "dropout must be a finite number"),
    ],
)
def test_bad_config_is_rejected_with_a_clear_message(overrides, error, words):
    with pytest.raises(error, match=words):
        small(**overrides)


def test_odd_width_is_fine_with_learned_positions():
    assert small(d_model=9, n_heads=3, positional="learned").head_dim == 3


def test_to_dict_round_trips():
    config = small(norm_first=True)
    assert TransformerConfig(**config.to_dict()) == config


def test_bos_may_equal_eos_and_encoder_may_be_empty():
    assert small(bos_id=2, eos_id=2).bos_id == 2  # one separator token, as in GPT-2
    assert small(n_encoder_layers=0).n_encoder_layers == 0
