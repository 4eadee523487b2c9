"""One causal convention: ``is_causal=True`` is top-left (as in torch) on every path; the
lower-right alignment is asked for by name (``causal_mask(..., lower_right=True)``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturekit.model.attention import MultiHeadAttention, scaled_dot_product_attention
from lecturekit.model.cache import LayerKVCache
from lecturekit.model.layers import DecoderLayer
from lecturekit.model.masks import causal_mask, merge_masks

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
    layer = DecoderLayer(16, 2, 32, dropout=0.0).eval()
    tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    full = layer(tgt, memory, tgt_is_causal=True)
    cross_k, cross_v = layer.cross_attn.project_kv(memory)
    empty = memory.new_zeros(2, 2, 0, 8)
    cache = LayerKVCache(empty, empty, cross_k, cross_v)
    first = layer(tgt[:, :3], None, cache=cache)
    second = layer(tgt[:, 3:], None, cache=cache)
    torch.testing.assert_close(torch.cat([first, second], dim=1), full, atol=1e-6, rtol=1e-5)
