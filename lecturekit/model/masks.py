"""Attention masks, with the conventions of ``torch.nn.Transformer``.

* A **boolean** mask marks what a query may NOT look at: ``True`` = masked out.
* A **float** mask is *added* to the attention scores (``-inf`` = masked out).
* ``causal_mask(T)`` is True above the diagonal: position t may not see t+1, t+2, ...
  (masked self-attention, slides p28-p30).
* ``padding_mask(tokens, pad_id)`` is True at padding tokens (the keys nobody should attend to).

``torch.nn.functional.scaled_dot_product_attention`` uses the *opposite* boolean convention
(True = allowed). This module is the one place that converts: ``merge_masks`` turns the
torch.nn.Transformer-style masks into one additive float mask, which both the reference
attention and ``scaled_dot_product_attention`` add to the scores unchanged.

**One causal convention.** ``is_causal=True`` means the causal mask built by
``causal_mask(Tq, Tk)``, aligned **top-left** as in ``torch.nn.functional.
scaled_dot_product_attention``: query ``i`` sees keys ``j <= i``. Every path uses it: the
reference attention, ``MultiHeadAttention`` (all backends), the layers, the ``Transformer``
and the Triton kernel. For ``Tq == Tk`` (a whole sequence) it is the mask of p28-p30. When
the queries are the *last* ``Tq`` positions of ``Tk`` keys (incremental decoding with a KV
cache, ``Tq < Tk``), ask for the other alignment by name:
``causal_mask(Tq, Tk, lower_right=True)`` (query ``i`` sees keys ``j <= i + Tk - Tq``, like
``torch.nn.attention.bias.causal_lower_right``) and pass it as ``attn_mask``.

**A mask or is_causal, not both.** As ``torch.nn.functional.scaled_dot_product_attention``
documents ("an error is thrown if both attn_mask and is_causal are set"), an explicit mask
together with ``is_causal=True`` is a ``ValueError`` everywhere: pass one of them, and there
is never a question which of the two wins. ``Transformer.decode``'s ``tgt_is_causal=None``
means "causal unless a ``tgt_mask`` is given".

A query row whose keys are all masked has no defined softmax (0/0). The course defines its
output as zeros (never NaN): see ``fully_masked_rows``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lecturekit._common import check_allocation, check_int, check_mask_or_causal, check_token_ids

__all__ = [
    "causal_mask",
    "padding_mask",
    "to_additive",
    "merge_masks",
    "fully_masked_rows",
    "prepare_mask",
]


def causal_mask(
    size: int,
    key_size: int | None = None,
    *,
    lower_right: bool = False,
    device: torch.device | str | None = None,
) -> Tensor:
    """Boolean ``(Tq, Tk)`` causal mask, True where a query may not look (the future). p28-p30.

    ``size`` is ``Tq``, ``key_size`` is ``Tk`` (default ``Tq``). Top-left aligned (the
    convention of ``is_causal=True`` everywhere, as in torch): query ``i`` sees keys
    ``j <= i``. ``lower_right=True``: query ``i`` sees keys ``j <= i + Tk - Tq``, so the last
    query sees every key (new queries appended after ``Tk - Tq`` cached keys).
    """
    key_size = size if key_size is None else key_size
    check_int("size", size, minimum=1)
    check_int("key_size", key_size, minimum=1)
    check_allocation(
        f"causal_mask(size={size}, key_size={key_size}): {size * key_size:,} booleans",
        size * key_size,
        "use a smaller size (the number of query positions)",
        device if device is not None else "cpu",
    )
    return _causal_mask(size, key_size, lower_right=lower_right, device=device)


def _causal_mask(
    size: int,
    key_size: int,
    *,
    lower_right: bool = False,
    device: torch.device | str | None = None,
) -> Tensor:
    """:func:`causal_mask` of sizes the caller took from tensors it holds (not checked)."""
    shift = key_size - size if lower_right else 0
    return torch.ones(size, key_size, dtype=torch.bool, device=device).triu(1 + shift)


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Boolean ``(B, S)`` mask, True where ``tokens (B, S)`` equals ``pad_id``."""
    check_token_ids("tokens", tokens, shape="(B, S)")
    return tokens == pad_id


def to_additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean mask (True = masked) -> float mask with -inf there; float masks pass through."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, float("-inf")
        )
    return mask.to(dtype)


def merge_masks(
    shape: tuple[int, int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
) -> Tensor | None:
    """One additive float mask, broadcastable to the scores ``shape = (B, H, Tq, Tk)``, or None.

    ``attn_mask`` or ``is_causal`` (``causal_mask(tq, tk)``, top-left), not both, plus the
    ``key_padding_mask`` broadcast over heads and queries.
    """
    check_mask_or_causal("attn_mask", attn_mask, "is_causal", is_causal)
    return _merge_masks(shape, dtype, device, attn_mask, key_padding_mask, is_causal)


def _merge_masks(
    shape: tuple[int, int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
) -> Tensor | None:
    """:func:`merge_masks` of masks the caller has checked."""
    batch, n_heads, tq, tk = shape
    merged: Tensor | None = None
    if attn_mask is not None:
        merged = to_additive(attn_mask, dtype)
        if merged.dim() == 3:  # (B*H, Tq, Tk) -> (B, H, Tq, Tk)
            merged = merged.view(batch, n_heads, tq, tk)
    elif is_causal:
        merged = to_additive(_causal_mask(tq, tk, device=device), dtype)
    if key_padding_mask is not None:
        padding = to_additive(key_padding_mask, dtype)[:, None, None, :]  # (B, 1, 1, Tk)
        merged = padding if merged is None else merged + padding
    return merged


def fully_masked_rows(mask: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """Find query rows with every key masked; make them harmless for the softmax.

    Returns ``(mask, dead)``: ``dead`` is a bool tensor shaped like ``mask`` but with a last
    dimension of 1 (True = every key of this row is masked), or None when there is no such
    row; in the returned mask these rows are set to 0, so the softmax stays finite (a
    uniform, never NaN, also in its gradient). The caller writes zeros to the dead rows' output.
    """
    if mask is None:
        return None, None
    dead = torch.isneginf(mask).all(dim=-1, keepdim=True)
    if not bool(dead.any()):
        return mask, None
    return mask.masked_fill(dead, 0.0), dead


def _may_mask_whole_rows(
    attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool
) -> bool:
    """Cheap test on the small ``(B, Tk)`` padding mask: can a query row lose every key?

    Without an ``attn_mask`` a row loses every key only if its batch row's keys are all
    padding, or, with the causal mask (which always leaves key 0 visible), if key 0 is padding.
    An ``attn_mask`` may hide anything, so it always needs the full search.
    """
    if attn_mask is not None or key_padding_mask is None:
        return attn_mask is not None
    if key_padding_mask.dtype != torch.bool:
        return True
    blocked = key_padding_mask[:, 0] if is_causal else key_padding_mask.all(dim=-1)
    return bool(blocked.any())


def prepare_mask(
    shape: tuple[int, int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
) -> tuple[Tensor | None, Tensor | None]:
    """``merge_masks`` then ``fully_masked_rows``: what attention adds to its scores.

    Returns ``(mask, dead)``: the additive mask broadcastable to ``shape = (B, H, Tq, Tk)``
    (or None) with its fully masked rows set to 0, and those rows (True = write a zero
    output) or None. The KV cache builds the cross-attention one once per generation, since
    the source padding does not change from step to step.
    """
    check_mask_or_causal("attn_mask", attn_mask, "is_causal", is_causal)
    return _prepare_mask(shape, dtype, device, attn_mask, key_padding_mask, is_causal)


def _prepare_mask(
    shape: tuple[int, int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
) -> tuple[Tensor | None, Tensor | None]:
    """:func:`prepare_mask` of masks the caller has checked (attention, the KV cache)."""
    mask = _merge_masks(shape, dtype, device, attn_mask, key_padding_mask, is_causal)
    if not _may_mask_whole_rows(attn_mask, key_padding_mask, is_causal):
        return mask, None
    return fully_masked_rows(mask)  # dead: (B|1, H|1, Tq, 1) or None
