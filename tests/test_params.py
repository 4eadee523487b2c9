"""count_parameters: per-component table, shared weights counted once, the paper's sizes."""

import pytest
import torch
from torch import nn

from lecturekit import (
    Encoder,
    LayerConfig,
    MultiHeadAttention,
    Transformer,
    TransformerConfig,
    count_parameters,
)


def test_multihead_attention_has_4_d_squared_plus_4_d():
    d = 32
    assert count_parameters(MultiHeadAttention(d, 4)).total == 4 * d * d + 4 * d


def test_components_and_repeats():
    config = TransformerConfig(
        11, 13, d_model=8, n_heads=2, d_ff=12, n_encoder_layers=3, n_decoder_layers=2
    )
    model = Transformer(config)
    table = count_parameters(model)
    assert table.total == sum(p.numel() for p in model.parameters())
    rows = {row.name: row for row in table.rows}
    assert rows["encoder.layers.*.ffn"].repeats == 3
    assert rows["encoder.layers.*.ffn"].per_layer == 8 * 12 + 12 + 12 * 8 + 8
    assert rows["decoder.layers.*.cross_attn"].count == 2 * (4 * 64 + 32)
    assert rows["src_embedding"].count == 11 * 8 and rows["tgt_embedding"].count == 13 * 8
    assert "encoder.layers.*.ffn" in str(table) and f"{table.total:,}" in str(table)
    assert sum(table.to_dict().values()) == int(table)


def test_a_bare_stack_groups_its_layers():
    encoder = Encoder(LayerConfig(d_model=8, n_heads=2, d_ff=12), 4)
    rows = {row.name: row for row in count_parameters(encoder).rows}
    assert rows["layers.*.ffn"].repeats == 4
    assert rows["layers.*.ffn"].per_layer == 8 * 12 + 12 + 12 * 8 + 8
    assert sum(row.count for row in rows.values()) == sum(p.numel() for p in encoder.parameters())


def test_tied_weights_are_counted_once():
    config = TransformerConfig(
        17,
        17,
        d_model=8,
        n_heads=2,
        d_ff=12,
        n_encoder_layers=1,
        n_decoder_layers=1,
        share_vocab=True,
        tie_embeddings=True,
    )
    table = count_parameters(Transformer(config))
    rows = {row.name: row for row in table.rows}
    assert rows["src_embedding"].shared_with == ["tgt_embedding", "output_proj"]
    assert "tgt_embedding" not in rows
    assert rows["output_proj"].count == 17  # only the bias is its own


def test_trainable_only():
    layer = nn.Linear(3, 2)
    layer.bias.requires_grad_(False)
    assert count_parameters(layer, trainable_only=True).total == 6
    with pytest.raises(TypeError, match="nn.Module"):
        count_parameters(torch.zeros(3))


@pytest.mark.parametrize(("preset", "paper"), [("paper_base", 65e6), ("paper_big", 213e6)])
def test_paper_sizes_within_5_percent(preset, paper):
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        model = Transformer(getattr(TransformerConfig, preset)(37000))
    total = count_parameters(model).total
    assert abs(total - paper) / paper < 0.05
