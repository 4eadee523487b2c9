"""One causal convention: ``is_causal=True`` is top-left (as in torch) on every path; the
lower-right alignment is asked for by name (``causal_mask(..., lower_right=True)``); an
explicit mask together with ``is_causal=True`` is an error everywhere, as in torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturekit.model.attention import MultiHeadAttention, scaled_dot_product_attention
from lecturekit.model.cache import KVCache, decode_cached
from lecturekit.model.config import LayerConfig, TransformerConfig
from lecturekit.model.layers import Decoder, EncoderLayer
from lecturekit.model.masks import causal_mask, merge_masks, prepare_mask
from lecturekit.model.transformer import Transformer

SHAPES = [(3, 5), (4, 4), (5, 3)]  # Tq < Tk, Tq = Tk, Tq > Tk


def qkv(tq: int, tk: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(2, 3, t, 8, generator=generator, dtype=torch.float64) for t in (tq, tk, tk)
    )


@pytest.mark.parametrize(("tq", "tk"), SHAPES)
def test_causal_mask_is_top_left_unless_lower_right_is_asked(tq: int, tk: int) -> None:
    rows, cols = torch.arange(tq)[:, None], torch.arange(tk)[None, :]
    assert torch.equal(causal_mask(tq, tk), cols > rows)  # query i sees keys j <= i
    assert torch.equal(causal_mask(tq, tk, lower_right=True), cols > rows + (tk - tq))
    assert torch.equal(causal_mask(tq), causal_mask(tq, tq, lower_right=True))


@pytest.mark.parametrize(("tq", "tk"), SHAPES)
def test_reference_is_causal_equals_torch_sdpa(tq: int, tk: int) -> None:
    q, k, v = qkv(tq, tk)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected)
    by_mask, _ = scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(tq, tk))
    torch.testing.assert_close(by_mask, expected)
    merged = merge_masks((2, 3, tq, tk), torch.float64, q.device, is_causal=True)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, attn_mask=merged)[0], expected)


@pytest.mark.parametrize(("tq", "tk"), [(1, 4), (2, 5), (4, 4)])
def test_lower_right_equals_torch_causal_lower_right(tq: int, tk: int) -> None:
    bias = pytest.importorskip("torch.nn.attention.bias")
    q, k, v = qkv(tq, tk, seed=1)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.causal_lower_right(tq, tk))
    mask = causal_mask(tq, tk, lower_right=True)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, attn_mask=mask)[0], expected)


@pytest.mark.parametrize(("tq", "tk"), SHAPES)
@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_multi_head_attention_is_causal_matches_the_function(tq, tk, backend) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 2, backend=backend).double().eval()
    x, memory = torch.randn(2, tq, 16).double(), torch.randn(2, tk, 16).double()
    out, _ = module(x, memory, memory, is_causal=True)
    q, (k, v) = module.project_q(x), module.project_kv(memory)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, module.out_proj(module.merge_heads(expected)))


def test_cached_decoding_with_several_new_queries_is_lower_right() -> None:
    """Feeding 2 new positions after 3 cached ones equals the full causal pass."""
    torch.manual_seed(0)
    decoder = Decoder(LayerConfig(16, 2, 32, dropout=0.0), 1).eval()
    tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    full = decoder(tgt, memory, tgt_is_causal=True)
    cache = KVCache.start([decoder.layers[0].cross_attn], memory, capacity=1)
    first = decode_cached(decoder, tgt[:, :3], cache)
    second = decode_cached(decoder, tgt[:, 3:], cache)
    torch.testing.assert_close(torch.cat([first, second], dim=1), full, atol=1e-6, rtol=1e-5)


# -- "a mask that hides key 0", through every path ---------------------------------------------
HIDE_KEY_0 = torch.zeros(4, 4, dtype=torch.bool).index_fill(1, torch.tensor([0]), True)
CAUSAL = causal_mask(4)
BOTH = "must be False when"  # the words of every refusal of a mask together with is_causal


def _seen(weights: torch.Tensor) -> torch.Tensor:
    """The ``(Tq, Tk)`` keys each query attends to (True = weight > 0), head 0 of row 0."""
    return weights[0, 0] > 0


def test_mask_hiding_key_0_in_the_reference_and_torch() -> None:
    q, k, v = qkv(4, 4, seed=2)
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=HIDE_KEY_0)
    assert torch.equal(_seen(weights), ~HIDE_KEY_0)  # row 0 sees keys [0, 1, 1, 1]
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=~HIDE_KEY_0))
    causal_out, causal_weights = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.equal(_seen(causal_weights), ~CAUSAL)
    torch.testing.assert_close(causal_out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    # torch documents "An error is thrown if both attn_mask and is_causal are set" (its
    # reference code asserts attn_mask is None); its CPU kernels in torch 2.13 do not check
    # and apply both, so the documented rule is what lecturekit follows, everywhere
    with pytest.raises(ValueError, match=BOTH):
        scaled_dot_product_attention(q, k, v, attn_mask=HIDE_KEY_0, is_causal=True)
    for build in (merge_masks, prepare_mask):
        with pytest.raises(ValueError, match=BOTH):
            build((2, 3, 4, 4), q.dtype, q.device, attn_mask=HIDE_KEY_0, is_causal=True)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_mask_hiding_key_0_in_multi_head_attention(backend: str) -> None:
    torch.manual_seed(3)
    module = MultiHeadAttention(16, 2, backend=backend).double().eval()
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    q, k, v = module.project_qkv(x)
    for kwargs, allowed in (
        (dict(attn_mask=HIDE_KEY_0), ~HIDE_KEY_0),
        (dict(is_causal=True), ~CAUSAL),
    ):
        out, _ = module(x, x, x, **kwargs)
        expected = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=allowed if "attn_mask" in kwargs else None,
            is_causal="is_causal" in kwargs,
        )
        torch.testing.assert_close(out, module.out_proj(module.merge_heads(expected)))
        assert torch.equal(_seen(module(x, x, x, **kwargs, need_weights=True)[1]), allowed)
    with pytest.raises(ValueError, match=BOTH):
        module(x, x, x, attn_mask=HIDE_KEY_0, is_causal=True)


def test_mask_hiding_key_0_in_the_layers_stacks_and_model() -> None:
    torch.manual_seed(4)
    config = LayerConfig(16, 2, 32, dropout=0.0)
    encoder_layer, decoder = EncoderLayer(config).eval(), Decoder(config, 1).eval()
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 3, 16)
    model = Transformer(TransformerConfig(11, 13, 16, 2, 32, 1, 1, dropout=0.0)).eval()
    src, tgt = torch.randint(3, 11, (2, 3)), torch.randint(3, 13, (2, 4))

    def seen_by_encoder_layer(**kwargs: object) -> torch.Tensor:
        encoder_layer(x, **kwargs, need_weights=True)
        return _seen(encoder_layer.attention_weights)

    def seen_by_decoder(**kwargs: object) -> torch.Tensor:
        decoder(x, memory, **kwargs, need_weights=True)
        return _seen(decoder.layers[0].attention_weights)

    def seen_by_model(**kwargs: object) -> torch.Tensor:
        model(src, tgt, **kwargs, need_weights=True)
        return _seen(model.attention_weights["decoder_self"][0])

    assert torch.equal(seen_by_encoder_layer(src_mask=HIDE_KEY_0), ~HIDE_KEY_0)
    assert torch.equal(seen_by_encoder_layer(is_causal=True), ~CAUSAL)
    assert torch.equal(seen_by_decoder(tgt_mask=HIDE_KEY_0), ~HIDE_KEY_0)
    assert torch.equal(seen_by_decoder(tgt_is_causal=True), ~CAUSAL)
    # the model: tgt_is_causal=None is "causal unless a tgt_mask is given"
    assert torch.equal(seen_by_model(tgt_mask=HIDE_KEY_0), ~HIDE_KEY_0)
    assert torch.equal(seen_by_model(), ~CAUSAL)
    assert torch.equal(seen_by_model(tgt_is_causal=True), ~CAUSAL)
    with pytest.raises(ValueError, match=BOTH):
        encoder_layer(x, src_mask=HIDE_KEY_0, is_causal=True)
    with pytest.raises(ValueError, match=BOTH):
        decoder(x, memory, tgt_mask=HIDE_KEY_0, tgt_is_causal=True)
    with pytest.raises(ValueError, match="tgt_is_causal must be False when tgt_mask is given"):
        model(src, tgt, tgt_mask=HIDE_KEY_0, tgt_is_causal=True)
