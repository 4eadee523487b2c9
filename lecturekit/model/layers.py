"""Building blocks: positional encodings, feed-forward, encoder and decoder layers and stacks.

Every layer and stack is built from one :class:`~lecturekit.model.config.LayerConfig`, as
nanoGPT's ``Block(config)``: ``EncoderLayer(config)``, ``Encoder(config, n_layers)``.
Forward signatures follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` /
``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` (batch first), so the same call works on
both and ``lecturekit.model.interop`` can copy weights either way.

Checked at the door: called by a user, a layer or stack checks its input (through its
attention); called by its parent, it gets ``validate=False`` and trusts the input its parent
checked. The sub-modules are built from the ``LayerConfig``, which validated itself, so they
do not check its values again.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit._common import check_choice, check_mask_or_causal, check_type
from lecturekit.model.attention import MultiHeadAttention
from lecturekit.model.config import ACTIVATIONS, LAYERNORM_BACKENDS, LayerConfig

__all__ = [
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "LayerNorm",
    "LAYER_NORM_FUNCTIONS",
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

    pe: Tensor  # (T, D), a buffer (register_buffer below), not a parameter

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


def _layer_norm_triton(
    x: Tensor, shape: tuple[int, ...], weight: Tensor, bias: Tensor, eps: float
) -> Tensor:
    """The fused LayerNorm kernel of chapter 7, imported on first use (where it cannot run
    on ``x`` it falls back to PyTorch itself, with one warning)."""
    from lecturekit import kernels

    return kernels.layer_norm(x, weight, bias, eps)


# the one table of LayerNorm backends (their names are config.LAYERNORM_BACKENDS):
# (x, normalized_shape, weight, bias, eps) -> normalised x
LAYER_NORM_FUNCTIONS: dict[str, Callable[..., Tensor]] = {
    "torch": F.layer_norm,
    "triton": _layer_norm_triton,
}


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` that can run the course's Triton kernel (``backend="triton"``)."""

    def __init__(
        self, d_model: int, eps: float = 1e-5, backend: str = "torch", *, validate: bool = True
    ) -> None:
        super().__init__(d_model, eps=eps)
        if validate:
            check_choice("backend", backend, LAYERNORM_BACKENDS)
        self.backend = backend

    def forward(self, x: Tensor) -> Tensor:
        layer_norm = LAYER_NORM_FUNCTIONS[self.backend]
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, the same MLP at every position (p18-p19)."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        *,
        validate: bool = True,
    ) -> None:
        super().__init__()
        if validate:
            check_choice("activation", activation, ACTIVATIONS)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.relu(self.linear1(x)) if self.activation == "relu" else F.gelu(self.linear1(x))
        return self.linear2(self.dropout(hidden))  # (B, T, d_ff) -> (B, T, D)


# the sub-modules of a layer, from its LayerConfig (frozen and validated: not checked again)
def _attention(config: LayerConfig) -> MultiHeadAttention:
    c = config
    return MultiHeadAttention(
        c.d_model, c.n_heads, dropout=c.dropout, backend=c.attention_backend, validate=False
    )


def _feed_forward(config: LayerConfig) -> PositionwiseFeedForward:
    c = config
    return PositionwiseFeedForward(
        c.d_model, c.d_ff, dropout=c.dropout, activation=c.activation, validate=False
    )


def _norm(config: LayerConfig) -> LayerNorm:
    c = config
    return LayerNorm(c.d_model, eps=c.layer_norm_eps, backend=c.layernorm_backend, validate=False)


class EncoderLayer(nn.Module):
    """One encoder block (p18-p19): self attention, add & norm, FFN, add & norm (p19-p21).

    Post-LN (``norm_first=False``, the paper): ``x = norm(x + sublayer(x))``.
    Pre-LN (``norm_first=True``): ``x = x + sublayer(norm(x))``.
    """

    def __init__(self, config: LayerConfig) -> None:
        super().__init__()
        check_type("config", config, LayerConfig, "a LayerConfig (TransformerConfig.layer)")
        self.config = config
        self.norm_first = config.norm_first
        self.self_attn = _attention(config)
        self.ffn = _feed_forward(config)
        self.norm1 = _norm(config)
        self.norm2 = _norm(config)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.attention_weights: Tensor | None = None

    def forward(
        self,
        src: Tensor,
        *,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        validate: bool = True,
    ) -> Tensor:
        """``src (B, S, D)`` -> ``(B, S, D)``; keeps per-head weights in ``attention_weights``.

        Masks are keyword-only, as everywhere in lecturekit (``nn.TransformerEncoderLayer``
        takes the same keywords); ``src_mask`` or ``is_causal=True``, not both.
        ``validate=False``: the caller (``Encoder``, ``Transformer``) has checked the input.
        """
        if validate:
            check_mask_or_causal("src_mask", src_mask, "is_causal", is_causal)

        def self_attention(x: Tensor) -> Tensor:
            out, self.attention_weights = self.self_attn(
                x,
                x,
                x,
                attn_mask=src_mask,
                key_padding_mask=src_key_padding_mask,
                is_causal=is_causal,
                need_weights=need_weights,
                validate=validate,
            )
            return self.dropout1(out)

        x = src  # (B, S, D)
        if self.norm_first:
            x = x + self_attention(self.norm1(x))
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    """One decoder block (p22-p43): masked self attention (p28-p30), cross attention (p38-p41), FFN.

    Each sub-layer is wrapped in add & norm as in the encoder (p19-p21).
    """

    def __init__(self, config: LayerConfig) -> None:
        super().__init__()
        check_type("config", config, LayerConfig, "a LayerConfig (TransformerConfig.layer)")
        self.config = config
        self.norm_first = config.norm_first
        self.self_attn = _attention(config)
        self.cross_attn = _attention(config)
        self.ffn = _feed_forward(config)
        self.norm1 = _norm(config)
        self.norm2 = _norm(config)
        self.norm3 = _norm(config)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.dropout3 = nn.Dropout(config.dropout)
        self.attention_weights: Tensor | None = None
        self.cross_attention_weights: Tensor | None = None

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        need_weights: bool = False,
        validate: bool = True,
    ) -> Tensor:
        """``tgt (B, T, D)``, ``memory (B, S, D)`` -> ``(B, T, D)``.

        Masks are keyword-only, in torch's order; a mask or its ``*_is_causal=True``, not
        both. ``validate=False``: the caller (``Decoder``, ``Transformer``) has checked the
        input.
        """
        if validate:
            check_mask_or_causal("tgt_mask", tgt_mask, "tgt_is_causal", tgt_is_causal)
            check_mask_or_causal("memory_mask", memory_mask, "memory_is_causal", memory_is_causal)

        def self_attention(x: Tensor) -> Tensor:  # masked self attention (p28-p30)
            out, self.attention_weights = self.self_attn(
                x,
                x,
                x,
                attn_mask=tgt_mask,
                key_padding_mask=tgt_key_padding_mask,
                is_causal=tgt_is_causal,
                need_weights=need_weights,
                validate=validate,
            )
            return self.dropout1(out)

        def cross_attention(x: Tensor) -> Tensor:  # queries from the decoder (p38-p41)
            out, self.cross_attention_weights = self.cross_attn(
                x,
                memory,
                memory,
                attn_mask=memory_mask,
                key_padding_mask=memory_key_padding_mask,
                is_causal=memory_is_causal,
                need_weights=need_weights,
                validate=validate,
            )
            return self.dropout2(out)

        return self._add_and_norm(tgt, self_attention, cross_attention)

    def _add_and_norm(
        self,
        x: Tensor,
        self_attention: Callable[[Tensor], Tensor],
        cross_attention: Callable[[Tensor], Tensor],
    ) -> Tensor:
        """The three sub-layers, each in add & norm (p19-p21): ``(B, T, D) -> (B, T, D)``.

        ``forward`` passes the two attentions of the slides; decoding one token at a time
        (``Transformer.decode_step``) passes attentions over the keys and values it kept.
        """
        if self.norm_first:  # Pre-LN: x + sublayer(norm(x))
            x = x + self_attention(self.norm1(x))
            x = x + cross_attention(self.norm2(x))
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:  # Post-LN, the paper: norm(x + sublayer(x))
            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + cross_attention(x))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x


class Encoder(nn.Module):
    """``n_layers`` encoder layers (p18: "the block is repeated N times"), optional final
    LayerNorm; ``Encoder(config, n_layers)`` as ``nn.TransformerEncoder(layer, num_layers)``.

    ``final_norm`` defaults to ``config.norm_first``: Pre-LN stacks need a last LayerNorm,
    Post-LN stacks (the paper) end with one already. ``nn.TransformerEncoder(norm=...)`` has
    it too.
    """

    def __init__(self, config: LayerConfig, n_layers: int, final_norm: bool | None = None) -> None:
        super().__init__()
        check_type("config", config, LayerConfig, "a LayerConfig (TransformerConfig.layer)")
        self.config = config
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(n_layers))
        final_norm = config.norm_first if final_norm is None else final_norm
        self.norm = _norm(config) if final_norm else None

    def forward(
        self,
        src: Tensor,
        *,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        validate: bool = True,
    ) -> Tensor:
        """``src (B, S, D)`` -> memory ``(B, S, D)``; masks keyword-only (``nn.TransformerEncoder``
        names the attention mask ``mask`` too); ``mask`` or ``is_causal=True``, not both.
        ``validate=False``: the caller (``Transformer``) has checked the input."""
        if validate:
            check_mask_or_causal("mask", mask, "is_causal", is_causal)
        x = src
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=is_causal,
                need_weights=need_weights,
                # the first layer checks the input; the others get input of the same shape
                validate=validate and i == 0,
            )
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """``n_layers`` decoder layers (p22-p43), optional final LayerNorm (see ``Encoder``)."""

    def __init__(self, config: LayerConfig, n_layers: int, final_norm: bool | None = None) -> None:
        super().__init__()
        check_type("config", config, LayerConfig, "a LayerConfig (TransformerConfig.layer)")
        self.config = config
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(n_layers))
        final_norm = config.norm_first if final_norm is None else final_norm
        self.norm = _norm(config) if final_norm else None

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
        need_weights: bool = False,
        validate: bool = True,
    ) -> Tensor:
        """``tgt (B, T, D)``, ``memory (B, S, D)`` -> ``(B, T, D)``.

        As in ``nn.TransformerDecoder``, no causal mask is applied unless ``tgt_mask`` or
        ``tgt_is_causal=True`` asks for it (``Transformer.decode`` is causal by default).
        ``validate=False``: the caller (``Transformer``) has checked the input.
        """
        x = tgt
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
                need_weights=need_weights,
                # the first layer checks the input; the others get input of the same shape
                validate=validate and i == 0,
            )
        return x if self.norm is None else self.norm(x)
