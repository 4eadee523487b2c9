"""Scaled dot-product and multi-head attention (chapter 2).

``scaled_dot_product_attention`` is the reference, written out step by step so a reader can
follow it and plot the weights: scores = Q K^T / sqrt(d_k), mask, softmax, weighted sum of V.
``MultiHeadAttention`` projects Q, K, V, splits the heads, attends with one of three backends
and merges the heads again. ``ATTENTION_FUNCTIONS`` is the one table of backends:

* ``"math"``: the reference function above (the only one that returns the weights);
* ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` (fused, fast);
* ``"triton"``: ``lecturekit.kernels.attention``, the FlashAttention kernel of chapter 7,
  imported on first use (where the kernel cannot run it falls back to PyTorch itself).

All backends give the same output up to float rounding (tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit._common import (
    check_attn_mask,
    check_choice,
    check_key_padding_mask,
    check_mask_or_causal,
    check_mask_values,
    check_number,
    warn_once,
)
from lecturekit.model.config import ATTENTION_BACKENDS, check_heads
from lecturekit.model.masks import _causal_mask, _prepare_mask, to_additive

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "ATTENTION_FUNCTIONS"]

# (mask, dead rows) as built by prepare_mask: what the KV cache keeps for cross attention
PreparedMask = tuple[Tensor | None, Tensor | None]


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Reference attention, step by step; returns ``(output, weights)``.

    query ``(..., Tq, d_k)``, key ``(..., Tk, d_k)``, value ``(..., Tk, d_v)``;
    ``attn_mask`` broadcastable to ``(..., Tq, Tk)``: bool (True = not allowed) or float
    (added to the scores). ``is_causal`` masks the future, top-left aligned as in torch
    (query i sees keys j <= i; see :func:`lecturekit.model.masks.causal_mask`); give
    ``attn_mask`` or ``is_causal=True``, not both (the rule torch documents).
    Output ``(..., Tq, d_v)``, weights ``(..., Tq, Tk)`` (before dropout; each row sums to 1).
    A query whose keys are all masked gets zero weights and a zero output, not NaN.
    """
    check_mask_or_causal("attn_mask", attn_mask, "is_causal", is_causal)
    check_number("scale", scale, optional=True)  # NaN or inf would make every output NaN
    check_number("dropout_p", dropout_p, 0.0, 1.0, exclusive=("maximum",))
    if attn_mask is not None:  # +inf or NaN in a float mask would make the output NaN
        check_mask_values("attn_mask", attn_mask)
    return _attention_steps(query, key, value, attn_mask, dropout_p, is_causal, scale)


def _attention_steps(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """The steps of :func:`scaled_dot_product_attention`, its arguments already checked
    (the math backend calls it with a mask ``prepare_mask`` made)."""
    d_k = query.size(-1)
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    # 1. similarity of every query with every key, scaled so its variance does not grow
    #    with d_k (a large variance would push the softmax into saturation)
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., Tq, Tk)
    # 2. the mask: a masked score becomes -inf, so its weight after the softmax is exactly 0
    if is_causal:  # top-left: query i sees keys j <= i (lecturekit.model.masks)
        tq, tk = scores.shape[-2:]
        attn_mask = _causal_mask(tq, tk, device=scores.device)
    if attn_mask is not None:
        scores = scores + to_additive(attn_mask, scores.dtype)
    # 3. softmax over the keys; rows with every key masked get zeros instead of 0/0 = NaN
    dead = torch.isneginf(scores).all(dim=-1, keepdim=True)
    if bool(dead.any()):
        weights = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    else:  # the common case; skipping two passes over the scores saves time, not accuracy
        weights = torch.softmax(scores, dim=-1)
    # 4. weighted sum of the values
    output = F.dropout(weights, p=dropout_p) @ value if dropout_p > 0 else weights @ value
    return output, weights


# -- the backends: (q, k, v, masks, dropout) -> (head outputs (B, H, Tq, Dh), weights or None)
def _merged_mask(
    q: Tensor,
    k: Tensor,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    prepared_mask: PreparedMask | None,
) -> PreparedMask:
    """The additive mask of these scores and their fully masked rows (``prepare_mask``)."""
    if prepared_mask is not None:
        return prepared_mask
    batch, heads, tq, _ = q.shape
    shape = (batch, heads, tq, k.size(2))
    return _prepare_mask(shape, q.dtype, q.device, attn_mask, key_padding_mask, is_causal)


def _attend_math(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    prepared_mask: PreparedMask | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The reference, step by step (returns the weights)."""
    mask, dead = _merged_mask(q, k, attn_mask, key_padding_mask, is_causal, prepared_mask)
    out, weights = _attention_steps(q, k, v, mask, dropout_p)
    if dead is not None:  # defined result for queries that may see nothing: zeros
        out, weights = out.masked_fill(dead, 0.0), weights.masked_fill(dead, 0.0)
    return out, weights


def _attend_sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    prepared_mask: PreparedMask | None = None,
) -> tuple[Tensor, Tensor | None]:
    """``torch.nn.functional.scaled_dot_product_attention`` (fused; no weights)."""
    if attn_mask is None and key_padding_mask is None:
        # causal only (or no mask): the fused kernel builds the same top-left mask itself
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)
        return out, None
    mask, dead = _merged_mask(q, k, attn_mask, key_padding_mask, is_causal, prepared_mask)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    return (out if dead is None else out.masked_fill(dead, 0.0)), None


def _attend_triton(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    prepared_mask: PreparedMask | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The FlashAttention kernel of chapter 7 (no weights); it takes a bool key padding
    mask and ``is_causal``, so a general ``attn_mask`` or a float padding mask goes to
    ``"sdpa"`` (one warning). The kernel module is imported here, on first use."""
    if attn_mask is not None or (
        key_padding_mask is not None and key_padding_mask.dtype != torch.bool
    ):
        warn_once(
            "MultiHeadAttention: the Triton kernel supports boolean key padding masks and "
            "is_causal, not a general attn_mask; using 'sdpa' for this call."
        )
        return _attend_sdpa(
            q,
            k,
            v,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            dropout_p=dropout_p,
            prepared_mask=prepared_mask,
        )
    from lecturekit import kernels

    out = kernels.attention(
        q,
        k,
        v,
        key_padding_mask=key_padding_mask,
        is_causal=is_causal,
        scale=None,
        dropout_p=dropout_p,
    )
    return out, None


# the one table of attention backends (their names are config.ATTENTION_BACKENDS)
ATTENTION_FUNCTIONS: dict[str, Callable[..., tuple[Tensor, Tensor | None]]] = {
    "math": _attend_math,
    "sdpa": _attend_sdpa,
    "triton": _attend_triton,
}


class MultiHeadAttention(nn.Module):
    """Multi-head attention for self attention (p18, masked p28-p30) and cross attention (p38-p41).

    Q, K and V are one fused projection ``qkv_proj`` (``(D, 3D)``, the layout of
    ``nn.MultiheadAttention.in_proj_weight``), so self attention costs one matrix multiply.
    ``forward`` takes the arguments of ``nn.MultiheadAttention.forward`` (batch first) and
    returns ``(output (B, Tq, D), weights)``; ``weights`` is None unless ``need_weights=True``,
    then it is per head ``(B, H, Tq, Tk)`` (or averaged ``(B, Tq, Tk)`` with
    ``average_attn_weights=True``). ``backend`` names an entry of ``ATTENTION_FUNCTIONS``;
    ``self.backend`` may be changed at any time.

    Checked at the door: the constructor checks its arguments and ``forward`` its input,
    unless ``validate=False`` says the caller has (the layers build their attention from a
    ``LayerConfig``, which validated itself, and pass on input the model has checked).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        backend: str = "math",
        *,
        validate: bool = True,
    ) -> None:
        super().__init__()
        if validate:
            check_heads(d_model, n_heads)
            check_number("dropout", dropout, 0.0, 1.0, exclusive=("maximum",))
            check_choice("backend", backend, ATTENTION_BACKENDS)
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.dropout = dropout
        self.backend = backend
        self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        # the initialisation of nn.MultiheadAttention
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        nn.init.zeros_(self.qkv_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    # -- projections -------------------------------------------------------------------------
    def split_heads(self, x: Tensor) -> Tensor:
        """``(B, T, D)`` -> ``(B, H, T, Dh)``."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self attention: Q, K, V of ``x (B, T, D)`` in one matmul, each ``(B, H, T, Dh)``."""
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)  # 3 x (B, T, D)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def project_q(self, x: Tensor) -> Tensor:
        """Queries of ``x (B, T, D)`` -> ``(B, H, T, Dh)``."""
        d = self.d_model
        return self.split_heads(F.linear(x, self.qkv_proj.weight[:d], self.qkv_proj.bias[:d]))

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of ``memory (B, S, D)`` -> two ``(B, H, S, Dh)`` (cross attention)."""
        d = self.d_model
        kv = F.linear(memory, self.qkv_proj.weight[d:], self.qkv_proj.bias[d:])
        k, v = kv.chunk(2, dim=-1)
        return self.split_heads(k), self.split_heads(v)

    def _project_k_v(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Keys of ``key`` and values of ``value`` when they are different tensors."""
        d = self.d_model
        w, b = self.qkv_proj.weight, self.qkv_proj.bias
        k = F.linear(key, w[d : 2 * d], b[d : 2 * d])
        v = F.linear(value, w[2 * d :], b[2 * d :])
        return self.split_heads(k), self.split_heads(v)

    # -- attention ---------------------------------------------------------------------------
    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        prepared_mask: PreparedMask | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention of projected heads q ``(B, H, Tq, Dh)``, k/v ``(B, H, Tk, Dh)``.

        Returns the head outputs merged and projected, ``(B, Tq, D)``, and the per-head
        weights ``(B, H, Tq, Tk)`` when ``need_weights`` (always computed by "math").
        ``prepared_mask``: ``prepare_mask(...)`` of these same masks, built once by the
        caller (the KV cache's cross attention), so "math" and "sdpa" need not rebuild it.
        """
        backend = ATTENTION_FUNCTIONS["math" if need_weights else self.backend]
        out, weights = backend(  # (B, H, Tq, Dh), (B, H, Tq, Tk) or None
            q,
            k,
            v,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0,
            prepared_mask=prepared_mask,
        )
        return self.out_proj(self.merge_heads(out)), weights if need_weights else None

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        average_attn_weights: bool = False,
        validate: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """query ``(B, Tq, D)``, key/value ``(B, Tk, D)`` -> ``(B, Tq, D)``, weights or None.

        Masks are keyword-only and follow ``nn.MultiheadAttention``: ``attn_mask``
        ``(Tq, Tk)`` or ``(B*H, Tq, Tk)``, ``key_padding_mask (B, Tk)``; bool True = not
        allowed, float = added. ``is_causal=True`` applies the causal mask (top-left, see
        :func:`lecturekit.model.masks.causal_mask`) and may not come with an ``attn_mask``.
        ``validate=False`` skips the checks of the input (the caller has checked it).
        """
        if validate:
            self._check_inputs(query, key, value, attn_mask, key_padding_mask, is_causal)
        if query is key and key is value:  # self attention: one fused projection
            q, k, v = self.project_qkv(query)
        else:
            q = self.project_q(query)
            k, v = self.project_kv(key) if key is value else self._project_k_v(key, value)
        out, weights = self.attend(
            q,
            k,
            v,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=need_weights,
        )
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, H, Tq, Tk) -> (B, Tq, Tk)
        return out, weights

    def _check_inputs(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
    ) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if not isinstance(x, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
            if x.dim() != 3 or x.size(-1) != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}"
                )
        if key.shape != value.shape or key.size(0) != query.size(0):
            raise ValueError(
                "query, key and value must share the batch size and key/value the length, got "
                f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        batch, tq, tk = query.size(0), query.size(1), key.size(1)
        check_attn_mask("attn_mask", attn_mask, batch, self.n_heads, tq, tk)
        check_key_padding_mask("key_padding_mask", key_padding_mask, batch, tk)
        check_mask_or_causal("attn_mask", attn_mask, "is_causal", is_causal)
