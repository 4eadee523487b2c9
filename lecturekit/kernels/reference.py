"""PyTorch references of the five public kernel functions: what each kernel computes, written
the plain way (materialising every intermediate), in torch only.

They serve twice: the kernel tests compare each Triton kernel with its reference (in float64,
and in the kernel's own dtype to measure what that dtype costs anyway), and where the kernels
cannot run (no triton, no CUDA tensor, no interpreter) the public functions of
:mod:`lecturekit.kernels` compute their result with them, after one warning. So the
semantics live here, once: a fully masked row gives zeros (no NaN, in the output or in the
gradients), causal masks are top-left aligned, dropout acts on the normalised weights.

Importing this module never imports triton.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lecturekit.kernels._utils import attention_scale

__all__ = [
    "add_reference",
    "attention_reference",
    "layer_norm_reference",
    "matmul_reference",
    "softmax_reference",
]


def add_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` (same shape, same dtype)."""
    return x + y


def matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for ``a (M, K)``, ``b (K, N)`` -> ``(M, N)``."""
    return a @ b


def softmax_reference(
    x: torch.Tensor, dim: int = -1, *, scale: float = 1.0, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``softmax(x * scale + mask, dim)``; ``mask`` broadcasts to ``x``, bool (True = masked
    out) or float (added); fully masked rows -> zeros."""
    z = x * scale
    if mask is not None:
        z = z.masked_fill(mask, float("-inf")) if mask.dtype == torch.bool else z + mask
    # A row of -inf makes softmax return NaN (0/0); the convention here is zeros. The row
    # is replaced before the softmax too, so that no NaN reaches the backward pass.
    all_masked = torch.isneginf(z).all(dim=dim, keepdim=True)
    y = torch.softmax(z.masked_fill(all_masked, 0.0), dim=dim)
    return y.masked_fill(all_masked, 0.0)


def layer_norm_reference(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float = 1e-5
) -> torch.Tensor:
    """LayerNorm over the last dimension, written out: ``(x - mean) / sqrt(var + eps) * w + b``
    (``var`` the biased variance, as in ``torch.nn.LayerNorm``); ``x (..., N)``, ``w``, ``b``
    ``(N,)`` or None."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_keep: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """``softmax(q k^T * scale + masks) v``, materialising the scores.

    Args:
        q: ``(B, H, Nq, D)``; k, v: ``(B, H, Nk, D)``.
        key_padding_mask: bool ``(B, Nk)``, True = padding.
        is_causal: query ``i`` sees keys ``j <= i`` (top-left, as in
            ``torch.nn.functional.scaled_dot_product_attention``).
        scale: default ``1 / sqrt(D)``.
        dropout_keep: bool ``(B, H, Nq, Nk)`` keep mask of attention dropout (e.g. the one
            ``flash_attention.dropout_keep_mask`` materialises), applied with rate ``dropout_p``.
        dropout_p: attention dropout rate; without ``dropout_keep`` the weights go through
            ``torch.nn.functional.dropout`` (torch's generator draws the mask).

    Returns:
        ``(B, H, Nq, D)``; query rows whose keys are all masked are zeros.
    """
    scale = attention_scale(scale, q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, Nq, Nk)
    n_q, n_k = scores.shape[-2:]
    masked = torch.zeros((n_q, n_k), dtype=torch.bool, device=q.device)
    if is_causal:  # the package's one causal convention: top-left, key j > query i masked
        masked = torch.ones_like(masked).triu(diagonal=1)
    masked = masked.expand(scores.shape)
    if key_padding_mask is not None:
        masked = masked | key_padding_mask[:, None, None, :]
    all_masked = masked.all(dim=-1, keepdim=True)
    # fill fully masked rows with finite scores first so no NaN reaches the backward pass
    scores = scores.masked_fill(masked & ~all_masked, float("-inf"))
    weights = torch.softmax(scores, dim=-1).masked_fill(all_masked, 0.0)
    if dropout_keep is not None:
        weights = weights * dropout_keep / (1.0 - dropout_p)
    elif dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, training=True)
    return weights @ v
