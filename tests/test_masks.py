"""Masks follow torch.nn.Transformer: bool True = not allowed, float masks are added."""

import pytest
import torch
from torch import nn

from lecturekit import causal_mask, padding_mask
from lecturekit.model.masks import fully_masked_rows, merge_masks, prepare_mask


def test_causal_mask_matches_torch():
    for size in (1, 2, 5):
        expected = torch.isinf(nn.Transformer.generate_square_subsequent_mask(size))
        assert torch.equal(causal_mask(size), expected)
    assert causal_mask(3).dtype == torch.bool


def test_causal_mask_rejects_bad_size():
    with pytest.raises(ValueError, match="size"):
        causal_mask(0)


def test_padding_mask():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 9]])
    expected = torch.tensor([[False, False, True, True], [False, True, False, False]])
    assert torch.equal(padding_mask(tokens, 0), expected)
    with pytest.raises(TypeError, match="integer"):
        padding_mask(tokens.float(), 0)
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        padding_mask(tokens[0], 0)


def test_merge_masks_bool_and_float_agree():
    batch, heads, length = 2, 3, 4
    padding = torch.tensor([[False, False, False, True], [False, True, False, False]])
    shape, cpu = (batch, heads, length, length), torch.device("cpu")
    from_bool = merge_masks(
        shape, torch.float32, cpu, attn_mask=causal_mask(length), key_padding_mask=padding
    )
    float_causal = nn.Transformer.generate_square_subsequent_mask(length)
    float_padding = torch.zeros(batch, length).masked_fill(padding, float("-inf"))
    from_float = merge_masks(
        shape, torch.float32, cpu, attn_mask=float_causal, key_padding_mask=float_padding
    )
    assert from_bool.shape == (batch, 1, length, length)
    assert torch.equal(from_bool, from_float)
    is_causal = merge_masks(shape, torch.float32, cpu, key_padding_mask=padding, is_causal=True)
    assert torch.equal(is_causal, from_bool)
    with pytest.raises(ValueError, match="is_causal must be False when attn_mask is given"):
        merge_masks(shape, torch.float32, cpu, attn_mask=causal_mask(length), is_causal=True)


def test_merge_masks_reshapes_per_head_masks():
    mask = torch.zeros(2 * 3, 4, 5, dtype=torch.bool)
    mask[4] = True  # batch 1, head 1
    merged = merge_masks((2, 3, 4, 5), torch.float32, torch.device("cpu"), attn_mask=mask)
    assert merged.shape == (2, 3, 4, 5)
    assert torch.isneginf(merged[1, 1]).all() and not torch.isneginf(merged[1, 0]).any()


def test_fully_masked_rows_are_found_and_neutralised():
    mask = torch.zeros(1, 1, 3, 2)
    mask[0, 0, 1] = float("-inf")
    mask[0, 0, 2, 0] = float("-inf")
    fixed, dead = fully_masked_rows(mask)
    assert dead.flatten().tolist() == [False, True, False]
    assert torch.isfinite(fixed[0, 0, 1]).all() and torch.isneginf(fixed[0, 0, 2, 0])
    assert fully_masked_rows(torch.zeros(1, 2, 2))[1] is None


def test_prepare_mask_is_merge_then_dead_rows():
    padding = torch.tensor([[False, True, False], [True, True, True]])  # row 1: all padding
    mask, dead = prepare_mask((2, 4, 1, 3), torch.float32, "cpu", key_padding_mask=padding)
    expected, expected_dead = fully_masked_rows(
        merge_masks((2, 4, 1, 3), torch.float32, "cpu", key_padding_mask=padding)
    )
    assert torch.equal(mask, expected) and torch.equal(dead, expected_dead)
    assert dead.flatten().tolist() == [False, True] and torch.isfinite(mask[1]).all()
    # no row can lose every key: no dead rows, and no reduction over the float mask
    mask, dead = prepare_mask((2, 4, 1, 3), torch.float32, "cpu", key_padding_mask=padding[:1])
    assert dead is None and torch.isneginf(mask[0, 0, 0, 1])
    assert prepare_mask((2, 4, 1, 3), torch.float32, "cpu") == (None, None)


def test_causal_mask_larger_than_memory_is_refused_by_name():
    from lecturekit._common import device_memory

    with pytest.raises(ValueError, match=r"causal_mask\(size=1000000.*smaller size"):
        causal_mask(10**6)
    assert device_memory("cpu") is None or device_memory("cpu") > 2**20
