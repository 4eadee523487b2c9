"""The complete encoder-decoder Transformer (slides p15-p43), token ids in, logits out.

    src (B, S) -> embedding * sqrt(D) + positions -> Encoder -> memory (B, S, D)
    tgt (B, T) -> embedding * sqrt(D) + positions -> Decoder(memory) -> Linear -> logits (B, T, V)

Masks follow ``torch.nn.Transformer`` (bool True = not allowed, float = added). Padding masks
are derived from ``config.pad_id`` when not given, and the decoder is causal by default.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lecturekit._common import check_int
from lecturekit.model.cache import KVCache, LayerKVCache
from lecturekit.model.config import TransformerConfig
from lecturekit.model.layers import (
    Decoder,
    Encoder,
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
)
from lecturekit.model.masks import (
    check_attn_mask,
    check_key_padding_mask,
    padding_mask,
    prepare_mask,
)

__all__ = ["Transformer"]


class Transformer(nn.Module):
    """Encoder-decoder Transformer of "Attention Is All You Need", as in the lecture.

    Encoder blocks p18-p19 with residual + LayerNorm p19-p21; decoder p22-p43 with masked
    self attention p30-p31 and cross attention p38-p41; output projection + softmax p24.

    * ``forward(src, tgt)``: teacher-forced logits ``(B, T, V)``.
    * ``encode(src)`` -> memory ``(B, S, D)``; ``decode(tgt, memory)`` -> logits ``(B, T, V)``.
    * ``init_cache(memory)`` / ``decode_step(tokens, cache)``: incremental decoding.
    * ``need_weights=True`` stores the per-head attention weights of the last call in
      ``self.attention_weights``: a dict with keys ``"encoder"``, ``"decoder_self"``,
      ``"decoder_cross"``, each a list over layers of ``(B, H, T_query, T_key)`` tensors.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = config
        c = config
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = (
            self.src_embedding if c.share_vocab else nn.Embedding(c.tgt_vocab_size, c.d_model)
        )
        if c.positional == "sinusoidal":
            self.src_positions: nn.Module = SinusoidalPositionalEncoding(c.d_model, c.max_len)
            self.tgt_positions: nn.Module = self.src_positions
        else:
            self.src_positions = LearnedPositionalEncoding(c.d_model, c.max_len)
            self.tgt_positions = LearnedPositionalEncoding(c.d_model, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        stack_args = dict(
            d_model=c.d_model,
            n_heads=c.n_heads,
            d_ff=c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            norm_first=c.norm_first,
            layer_norm_eps=c.layer_norm_eps,
            attention_backend=c.attention_backend,
            layernorm_backend=c.layernorm_backend,
        )
        self.encoder = Encoder(c.n_encoder_layers, **stack_args)
        self.decoder = Decoder(c.n_decoder_layers, **stack_args)
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.attention_weights: dict[str, list[Tensor]] | None = None
        self._reset_parameters()
        if c.tie_embeddings:  # one matrix for target embedding and output projection (p24)
            self.output_proj.weight = self.tgt_embedding.weight

    def _reset_parameters(self) -> None:
        # Xavier for the stacks (as nn.Transformer); embeddings with std D^-1/2, so that after
        # the sqrt(D) scaling the input vectors have unit variance
        for p in [*self.encoder.parameters(), *self.decoder.parameters()]:
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.src_embedding.weight, std=self.config.d_model**-0.5)
        if self.tgt_embedding is not self.src_embedding:
            nn.init.normal_(self.tgt_embedding.weight, std=self.config.d_model**-0.5)

    # -- helpers -----------------------------------------------------------------------------
    def _embed(
        self, tokens: Tensor, embedding: nn.Embedding, positions: nn.Module, offset: int = 0
    ) -> Tensor:
        x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T) -> (B, T, D)
        return self.dropout(positions(x, offset))

    def _check_tokens(self, name: str, tokens: Tensor, vocab_size: int, dims: int = 2) -> None:
        shape = ("(B, S)" if name == "src" else "(B, T)") if dims == 2 else "(B,)"
        if not isinstance(tokens, Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor of token ids, got {type(tokens).__name__}"
            )
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer token ids (torch.long), got {tokens.dtype}")
        if tokens.dtype not in (torch.long, torch.int32):  # what nn.Embedding accepts
            raise TypeError(
                f"{name} must hold token ids as torch.long (or torch.int32), got {tokens.dtype}; "
                f"convert with {name}.long()"
            )
        if tokens.is_meta:
            raise ValueError(f"{name} is on the meta device (it holds no ids); pass real ids")
        if tokens.dim() != dims or tokens.numel() == 0:
            raise ValueError(
                f"{name} must have shape {shape} and not be empty, got {tuple(tokens.shape)}"
            )
        outside = (tokens < 0) | (tokens >= vocab_size)
        if bool(outside.any()):
            bad = int(tokens[outside][0])
            raise ValueError(f"{name} ids must be in [0, {vocab_size}), got {bad}")
        if (
            dims == 2
            and self.config.positional == "learned"
            and tokens.size(1) > self.config.max_len
        ):
            raise ValueError(
                f"{name} length must be <= max_len={self.config.max_len} with learned positions, "
                f"got {tokens.size(1)}"
            )

    def _derived_padding(self, tokens: Tensor, given: Tensor | None) -> Tensor | None:
        if given is not None:
            return given
        mask = padding_mask(tokens, self.config.pad_id)  # (B, S)
        return mask if bool(mask.any()) else None  # no padding: skip the masking work

    def _collect_weights(self, encoder: bool, decoder: bool) -> None:
        weights = {} if encoder else (self.attention_weights or {})
        if encoder:
            weights["encoder"] = [layer.attention_weights.detach() for layer in self.encoder.layers]
        if decoder:
            weights["decoder_self"] = [
                layer.attention_weights.detach() for layer in self.decoder.layers
            ]
            weights["decoder_cross"] = [
                layer.cross_attention_weights.detach() for layer in self.decoder.layers
            ]
        self.attention_weights = weights

    def _check_memory(self, memory: Tensor, batch: int | None) -> None:
        if not isinstance(memory, Tensor) or not memory.dtype.is_floating_point:
            raise TypeError(
                "memory must be a floating point torch.Tensor (the encoder output), got "
                f"{memory.dtype if isinstance(memory, Tensor) else type(memory).__name__}"
            )
        if memory.dim() != 3 or memory.size(-1) != self.config.d_model:
            raise ValueError(
                f"memory must have shape (B, S, d_model={self.config.d_model}), "
                f"got {tuple(memory.shape)}"
            )
        if batch is not None and memory.size(0) != batch:
            raise ValueError(
                f"memory and tgt must have the same batch size, got memory batch "
                f"{memory.size(0)} and tgt batch {batch}"
            )

    def _check_decoder_masks(
        self,
        batch: int,
        length: int,
        memory_length: int,
        *,
        tgt_mask: Tensor | None,
        memory_mask: Tensor | None,
        tgt_key_padding_mask: Tensor | None,
        memory_key_padding_mask: Tensor | None,
    ) -> None:
        heads = self.config.n_heads
        check_attn_mask(tgt_mask, "tgt_mask", batch, heads, length, length)
        check_attn_mask(memory_mask, "memory_mask", batch, heads, length, memory_length)
        check_key_padding_mask(tgt_key_padding_mask, "tgt_key_padding_mask", batch, length)
        check_key_padding_mask(
            memory_key_padding_mask, "memory_key_padding_mask", batch, memory_length
        )

    # -- public API --------------------------------------------------------------------------
    # Masks are keyword-only, named and ordered as in torch.nn.Transformer: src_mask,
    # tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask,
    # memory_key_padding_mask.
    def encode(
        self,
        src: Tensor,
        *,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """Source ids ``(B, S)`` -> memory ``(B, S, D)``. Padding mask from ``pad_id`` if None."""
        c = self.config
        self._check_tokens("src", src, c.src_vocab_size)
        batch, length = src.shape
        check_attn_mask(src_mask, "src_mask", batch, c.n_heads, length, length)
        check_key_padding_mask(src_key_padding_mask, "src_key_padding_mask", batch, length)
        src_key_padding_mask = self._derived_padding(src, src_key_padding_mask)
        x = self._embed(src, self.src_embedding, self.src_positions)
        memory = self.encoder(
            x, mask=src_mask, src_key_padding_mask=src_key_padding_mask, need_weights=need_weights
        )
        if need_weights:
            self._collect_weights(encoder=True, decoder=False)
        return memory

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        *,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """Target ids ``(B, T)`` and memory ``(B, S, D)`` -> logits ``(B, T, V)``.

        Causal by default: ``tgt_is_causal=None`` applies the causal mask unless a
        ``tgt_mask`` is given (then the mask decides); ``tgt_is_causal=False`` with no mask
        lets every position see the whole target (the "leak" experiment of chapter 4).
        """
        c = self.config
        self._check_tokens("tgt", tgt, c.tgt_vocab_size)
        batch, length = tgt.shape
        self._check_memory(memory, batch)
        masks = dict(
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        self._check_decoder_masks(batch, length, memory.size(1), **masks)
        # with a tgt_mask given, the mask decides and is_causal is only a hint (as in torch)
        causal = tgt_mask is None if tgt_is_causal is None else bool(tgt_is_causal)
        masks["tgt_key_padding_mask"] = self._derived_padding(tgt, tgt_key_padding_mask)
        x = self._embed(tgt, self.tgt_embedding, self.tgt_positions)
        x = self.decoder(x, memory, **masks, tgt_is_causal=causal, need_weights=need_weights)
        if need_weights:
            self._collect_weights(encoder=False, decoder=True)
        return self.output_proj(x)  # (B, T, D) -> (B, T, V)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        *,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """Teacher forcing: ``src (B, S)``, ``tgt (B, T)`` -> logits ``(B, T, V)`` (p44-p46).

        ``memory_key_padding_mask`` defaults to the source padding mask.
        """
        self._check_tokens("src", src, self.config.src_vocab_size)
        self._check_tokens("tgt", tgt, self.config.tgt_vocab_size)
        if src.size(0) != tgt.size(0):
            raise ValueError(
                f"src and tgt must have the same batch size, got src {tuple(src.shape)} "
                f"and tgt {tuple(tgt.shape)}"
            )
        (batch, src_length), tgt_length = src.shape, tgt.size(1)
        check_attn_mask(src_mask, "src_mask", batch, self.config.n_heads, src_length, src_length)
        check_key_padding_mask(src_key_padding_mask, "src_key_padding_mask", batch, src_length)
        decoder_masks = dict(
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        # all checks before any computation
        self._check_decoder_masks(batch, tgt_length, src_length, **decoder_masks)
        src_key_padding_mask = self._derived_padding(src, src_key_padding_mask)
        if memory_key_padding_mask is None:
            decoder_masks["memory_key_padding_mask"] = src_key_padding_mask
        if need_weights:
            self.attention_weights = None
        memory = self.encode(
            src,
            src_mask=src_mask,
            src_key_padding_mask=src_key_padding_mask,
            need_weights=need_weights,
        )
        return self.decode(
            tgt, memory, **decoder_masks, tgt_is_causal=tgt_is_causal, need_weights=need_weights
        )

    def init_cache(
        self,
        memory: Tensor,
        *,
        memory_key_padding_mask: Tensor | None = None,
        capacity: int | None = None,
    ) -> KVCache:
        """Start incremental decoding from memory ``(B, S, D)``: an empty self-attention cache
        with room for ``capacity`` steps (default ``config.max_len``; it grows when full), and
        the cross-attention keys/values of every decoder layer, computed once."""
        self._check_memory(memory, None)
        batch = memory.size(0)
        check_key_padding_mask(
            memory_key_padding_mask, "memory_key_padding_mask", batch, memory.size(1)
        )
        check_int("capacity", capacity, minimum=1, optional=True)
        capacity = self.config.max_len if capacity is None else capacity
        # the cross-attention mask of every step: additive (B, 1, 1, S), built once
        cross_mask = prepare_mask(
            (batch, self.config.n_heads, 1, memory.size(1)),
            memory.dtype,
            memory.device,
            key_padding_mask=memory_key_padding_mask,
        )
        layers = []
        for layer in self.decoder.layers:
            cross_keys, cross_values = layer.cross_attn.project_kv(memory)  # (B, H, S, Dh)
            layers.append(LayerKVCache.empty(capacity, cross_keys, cross_values, cross_mask))
        return KVCache(layers, batch, memory_key_padding_mask)

    def decode_step(self, tokens: Tensor, cache: KVCache, *, validate: bool = True) -> Tensor:
        """Feed the newest token of each row, ``(B,)``; return next-token logits ``(B, V)``.

        The first call gets BOS. This step's self-attention keys/values are written into
        ``cache`` in place, so step t costs O(t) instead of recomputing the O(t^2) prefix.
        ``validate=False`` skips the checks of ``tokens`` and ``cache``: the decoding
        strategies check once per call, not once per token (their tokens come from an
        argmax or a draw over the vocabulary, so they are valid ids by construction).
        """
        if validate:
            self._check_step(tokens, cache)
        x = self._embed(tokens[:, None], self.tgt_embedding, self.tgt_positions, len(cache))
        x = self.decoder(
            x, None, memory_key_padding_mask=cache.memory_key_padding_mask, cache=cache.layers
        )  # (B, 1, D)
        cache.steps += 1
        return self.output_proj(x[:, -1])  # (B, V)

    def _check_step(self, tokens: Tensor, cache: KVCache) -> None:
        c = self.config
        if not isinstance(cache, KVCache):
            raise TypeError(
                f"cache must be a KVCache (from init_cache), got {type(cache).__name__}"
            )
        self._check_tokens("tokens", tokens, c.tgt_vocab_size, dims=1)
        if tokens.size(0) != cache.batch_size:
            raise ValueError(
                f"tokens must have shape (B,)=({cache.batch_size},) to match the cache, "
                f"got {tuple(tokens.shape)}"
            )
        if c.positional == "learned" and len(cache) >= c.max_len:
            raise ValueError(
                f"cannot decode position {len(cache)}: learned positions stop at max_len={c.max_len}"
            )
