"""Building blocks: positional encodings, feed-forward, encoder and decoder layers and stacks.

Forward signatures follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` /
``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` (batch first), so the same call works on
both and ``lecturekit.model.interop`` can copy weights either way.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit.kernels.backend import usable_kernels
from lecturekit.model.attention import MultiHeadAttention
from lecturekit.model.cache import LayerKVCache
from lecturekit.model.config import ACTIVATIONS, LAYERNORM_BACKENDS
from lecturekit.model.masks import causal_mask

__all__ = [
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "LayerNorm",
    "PositionwiseFeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
]


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sine/cosine positions of the paper: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(...).

    ``forward(x (B, T, D), offset=0)`` adds positions ``offset .. offset+T-1``. The table is
    precomputed for ``max_len`` positions and extended on demand (no parameters).
    """

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        if d_model % 2 != 0:
            raise ValueError(f"d_model must be even for sinusoidal positions, got {d_model}")
        self.d_model = d_model
        self.register_buffer("pe", self._table(max_len, d_model), persistent=False)

    @staticmethod
    def _table(length: int, d_model: int) -> Tensor:
        position = torch.arange(length, dtype=torch.float64)[:, None]  # (T, 1)
        frequency = torch.exp(
            torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
        )  # (D/2,)
        table = torch.zeros(length, d_model, dtype=torch.float64)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        return table.float()  # (T, D)

    def encoding(self, length: int, offset: int = 0) -> Tensor:
        """The ``(length, D)`` encodings of positions ``offset .. offset+length-1``."""
        if offset + length > self.pe.size(0):
            table = self._table(offset + length, self.d_model).to(self.pe.device)
            self.pe = table
        return self.pe[offset : offset + length]

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return x + self.encoding(x.size(1), offset).to(x.dtype)


class LearnedPositionalEncoding(nn.Module):
    """One trained vector per position (BERT, GPT); ``max_len`` positions, no extension."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        length = x.size(1)
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length must be <= max_len={self.max_len} with learned positions, "
                f"got positions up to {offset + length}"
            )
        positions = torch.arange(offset, offset + length, device=x.device)
        return x + self.embedding(positions)  # (B, T, D) + (T, D)


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` that can run the course's Triton kernel (``backend="triton"``)."""

    def __init__(self, d_model: int, eps: float = 1e-5, backend: str = "torch") -> None:
        super().__init__(d_model, eps=eps)
        if backend not in LAYERNORM_BACKENDS:
            raise ValueError(f"backend must be one of {LAYERNORM_BACKENDS}, got {backend!r}")
        self.backend = backend

    def forward(self, x: Tensor) -> Tensor:
        if self.backend == "triton":
            kernels = usable_kernels(x, "LayerNorm")
            if kernels is not None:
                return kernels.layer_norm(x, self.weight, self.bias, self.eps)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, the same MLP at every position (p18-p19)."""

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.relu(self.linear1(x)) if self.activation == "relu" else F.gelu(self.linear1(x))
        return self.linear2(self.dropout(hidden))  # (B, T, d_ff) -> (B, T, D)


class EncoderLayer(nn.Module):
    """One encoder block (p18-p19): self attention, add & norm, FFN, add & norm (p19-p21).

    Post-LN (``norm_first=False``, the paper): ``x = norm(x + sublayer(x))``.
    Pre-LN (``norm_first=True``): ``x = x + sublayer(norm(x))``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        attention_backend: str = "math",
        layernorm_backend: str = "torch",
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, backend=attention_backend)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, layernorm_backend)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, layernorm_backend)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def forward(
        self,
        src: Tensor,
        *,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> Tensor:
        """``src (B, S, D)`` -> ``(B, S, D)``; keeps per-head weights in ``attention_weights``.

        Masks are keyword-only, as everywhere in lecturekit (``nn.TransformerEncoderLayer``
        takes the same keywords).
        """

        def self_attention(x: Tensor) -> Tensor:
            out, self.attention_weights = self.self_attn(
                x,
                x,
                x,
                attn_mask=src_mask,
                key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
                need_weights=need_weights,
            )
            return self.dropout1(out)

        x = src
        if self.norm_first:
            x = x + self_attention(self.norm1(x))
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    """One decoder block (p22-p43): masked self attention (p30-p31), cross attention (p38-p41), FFN.

    Each sub-layer is wrapped in add & norm as in the encoder (p19-p21). With a
    ``cache`` (incremental decoding) the self attention appends this step's keys/values to it
    and the cross attention reuses the cached keys/values of the encoder output.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        attention_backend: str = "math",
        layernorm_backend: str = "torch",
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, backend=attention_backend)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, backend=attention_backend)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, layernorm_backend)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, layernorm_backend)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, layernorm_backend)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None
        self.cross_attention_weights: Tensor | None = None

    def _self_attention(
        self,
        x: Tensor,
        *,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
        need_weights: bool,
        cache: LayerKVCache | None,
    ) -> Tensor:
        if cache is None:
            out, self.attention_weights = self.self_attn(
                x,
                x,
                x,
                attn_mask=attn_mask,
                key_padding_mask=key_padding_mask,
                is_causal=is_causal,
                need_weights=need_weights,
            )
            return self.dropout1(out)
        q, k, v = self.self_attn.project_qkv(x)  # each (B, H, T_new, Dh)
        k, v = cache.append(k, v)  # (B, H, T_past + T_new, Dh)
        # the new queries are the last positions: causal aligned lower-right (a single new
        # query sees every cached key, so it needs no mask at all)
        new, total = q.size(2), k.size(2)
        future = None if new == 1 else causal_mask(new, total, lower_right=True, device=q.device)
        out, self.attention_weights = self.self_attn.attend(
            q, k, v, attn_mask=future, need_weights=need_weights
        )
        return self.dropout1(out)

    def _cross_attention(
        self,
        x: Tensor,
        memory: Tensor | None,
        *,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
        need_weights: bool,
        cache: LayerKVCache | None,
    ) -> Tensor:
        if cache is None:
            out, self.cross_attention_weights = self.cross_attn(
                x,
                memory,
                memory,
                attn_mask=attn_mask,
                key_padding_mask=key_padding_mask,
                is_causal=is_causal,
                need_weights=need_weights,
            )
        else:
            q = self.cross_attn.project_q(x)  # (B, H, T_new, Dh)
            out, self.cross_attention_weights = self.cross_attn.attend(
                q,
                cache.cross_keys,
                cache.cross_values,
                attn_mask=attn_mask,
                key_padding_mask=key_padding_mask,
                need_weights=need_weights,
                # the source padding's mask, built once by init_cache, not at every step
                prepared_mask=cache.cross_mask if attn_mask is None else None,
            )
        return self.dropout2(out)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        need_weights: bool = False,
        cache: LayerKVCache | None = None,
    ) -> Tensor:
        """``tgt (B, T, D)``, ``memory (B, S, D)`` -> ``(B, T, D)``.

        Masks are keyword-only, in torch's order. With ``cache``, ``tgt`` holds only the new
        positions, ``memory`` is not used, ``tgt_mask``/``tgt_key_padding_mask`` must be
        None (the cache applies causality) and ``memory_key_padding_mask`` must be the one
        the cache was built with (its ``cross_mask``).
        """

        def self_attention(x: Tensor) -> Tensor:
            return self._self_attention(
                x,
                attn_mask=tgt_mask,
                key_padding_mask=tgt_key_padding_mask,
                is_causal=bool(tgt_is_causal),
                need_weights=need_weights,
                cache=cache,
            )

        def cross_attention(x: Tensor) -> Tensor:
            return self._cross_attention(
                x,
                memory,
                attn_mask=memory_mask,
                key_padding_mask=memory_key_padding_mask,
                is_causal=bool(memory_is_causal),
                need_weights=need_weights,
                cache=cache,
            )

        x = tgt
        if self.norm_first:
            x = x + self_attention(self.norm1(x))
            x = x + cross_attention(self.norm2(x))
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + cross_attention(x))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x


def _resolve_causal(mask: Tensor | None, is_causal: bool | None) -> bool:
    """``is_causal=None`` as in torch: True only if ``mask`` is exactly the causal mask."""
    if is_causal is not None:
        return bool(is_causal)
    if mask is None or mask.dim() != 2 or mask.size(0) != mask.size(1):
        return False
    causal = causal_mask(mask.size(0), device=mask.device)
    if mask.dtype == torch.bool:
        return bool(torch.equal(mask, causal))
    return bool(torch.equal(torch.isneginf(mask), causal) and not mask[~causal].any())


class Encoder(nn.Module):
    """N encoder layers (p18: "the block is repeated N times"), optional final LayerNorm.

    ``final_norm`` defaults to ``norm_first``: Pre-LN stacks need a last LayerNorm, Post-LN
    stacks (the paper) end with one already. ``nn.TransformerEncoder(norm=...)`` has it too.
    """

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        attention_backend: str = "math",
        layernorm_backend: str = "torch",
        final_norm: bool | None = None,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(
                d_model,
                n_heads,
                d_ff,
                dropout,
                activation,
                norm_first,
                layer_norm_eps,
                attention_backend,
                layernorm_backend,
            )
            for _ in range(n_layers)
        )
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(d_model, layer_norm_eps, layernorm_backend) if final_norm else None

    def forward(
        self,
        src: Tensor,
        *,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """``src (B, S, D)`` -> memory ``(B, S, D)``; masks keyword-only (``nn.TransformerEncoder``
        names the attention mask ``mask`` too)."""
        causal = _resolve_causal(mask, is_causal)
        x = src
        for layer in self.layers:
            x = layer(
                x,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=causal,
                need_weights=need_weights,
            )
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """N decoder layers (p22-p43), optional final LayerNorm (see ``Encoder``)."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        attention_backend: str = "math",
        layernorm_backend: str = "torch",
        final_norm: bool | None = None,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(
                d_model,
                n_heads,
                d_ff,
                dropout,
                activation,
                norm_first,
                layer_norm_eps,
                attention_backend,
                layernorm_backend,
            )
            for _ in range(n_layers)
        )
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(d_model, layer_norm_eps, layernorm_backend) if final_norm else None

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
        need_weights: bool = False,
        cache: list[LayerKVCache] | None = None,
    ) -> Tensor:
        """``tgt (B, T, D)``, ``memory (B, S, D)`` -> ``(B, T, D)``.

        As in ``nn.TransformerDecoder``, no causal mask is applied unless ``tgt_mask`` or
        ``tgt_is_causal=True`` asks for it (``Transformer.decode`` applies one by default).
        """
        causal = _resolve_causal(tgt_mask, tgt_is_causal)
        x = tgt
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=causal,
                memory_is_causal=memory_is_causal,
                need_weights=need_weights,
                cache=None if cache is None else cache[i],
            )
        return x if self.norm is None else self.norm(x)
