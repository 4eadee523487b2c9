"""The complete encoder-decoder Transformer (slides p15-p43), token ids in, logits out.

    src (B, S) -> embedding * sqrt(D) + positions -> Encoder -> memory (B, S, D)
    tgt (B, T) -> embedding * sqrt(D) + positions -> Decoder(memory) -> Linear -> logits (B, T, V)

Masks follow ``torch.nn.Transformer`` (bool True = not allowed, float = added). Padding masks
are derived from ``config.pad_id`` when not given, and the decoder is causal by default.
The public methods check their input once, with the shared checks of
``lecturekit._common``, then run the unchecked ``_encode``/``_decode``, which call the stacks
with ``validate=False``: nothing inside checks again.
"""

from __future__ import annotations

import math
from typing import Protocol, cast

from torch import Tensor, nn

from lecturekit._common import (
    check_allocation,
    check_attn_mask,
    check_int,
    check_key_padding_mask,
    check_mask_or_causal,
    check_memory,
    check_token_ids,
    check_type,
)
from lecturekit.model.cache import KVCache, decode_cached
from lecturekit.model.config import TransformerConfig
from lecturekit.model.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
)

__all__ = ["Transformer", "init_weights"]


def _check_fits_in_memory(config: TransformerConfig) -> None:
    """Refuse, before torch allocates anything, a model larger than this machine's memory
    (``d_model=2**20``, ``max_len=10**10``: torch would fail with an allocator error)."""
    check_allocation(
        f"config describes a model whose float32 values (d_model={config.d_model}, "
        f"d_ff={config.d_ff}, max_len={config.max_len}, n_encoder_layers="
        f"{config.n_encoder_layers}, n_decoder_layers={config.n_decoder_layers}, "
        f"src_vocab_size={config.src_vocab_size}, tgt_vocab_size={config.tgt_vocab_size})",
        4 * config.min_values,
        "make the largest of them smaller",
    )


def init_weights(stacks: list[nn.Module], embeddings: list[nn.Embedding], d_model: int) -> None:
    """The Transformer's initialisation: Xavier for the matrices of the ``stacks`` (as
    ``nn.Transformer``); ``embeddings`` with std ``d_model**-0.5``, so that after the
    ``sqrt(d_model)`` scaling the input vectors have unit variance."""
    for stack in stacks:
        for p in stack.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
    for embedding in embeddings:
        nn.init.normal_(embedding.weight, std=d_model**-0.5)


def positional_encoding(config: TransformerConfig) -> nn.Module:
    """The position table ``config.positional`` names: sinusoidal (no weights) or
    learned, for ``config.max_len`` positions of width ``config.d_model``."""
    if config.positional == "sinusoidal":
        return SinusoidalPositionalEncoding(config.d_model, config.max_len)
    return LearnedPositionalEncoding(config.d_model, config.max_len)


class _Embeds(Protocol):
    """What :meth:`Transformer._embed` and :meth:`Transformer._derived_padding` read of their
    model: the encoder-only :class:`~lecturekit.model.tagger.EncoderTagger` shares them."""

    @property
    def config(self) -> TransformerConfig: ...

    @property
    def dropout(self) -> nn.Module: ...


class Transformer(nn.Module):
    """Encoder-decoder Transformer of "Attention Is All You Need", as in the lecture.

    Encoder blocks p18-p19 with residual + LayerNorm p19-p21; decoder p22-p43 with masked
    self attention p28-p30 and cross attention p38-p41; output projection + softmax p24.

    * ``forward(src, tgt)``: teacher-forced logits ``(B, T, V)``.
    * ``encode(src)`` -> memory ``(B, S, D)``; ``decode(tgt, memory)`` -> logits ``(B, T, V)``.
    * ``init_cache(memory)`` / ``decode_step(tokens, cache)``: incremental decoding.
    * ``need_weights=True`` stores the per-head attention weights of the last call in
      ``self.attention_weights``: a dict with keys ``"encoder"``, ``"decoder_self"``,
      ``"decoder_cross"``, each a list over layers of ``(B, H, T_query, T_key)`` tensors.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        check_type("config", config, TransformerConfig, "a TransformerConfig")
        _check_fits_in_memory(config)
        self.config = config
        c = config
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = (
            self.src_embedding if c.share_vocab else nn.Embedding(c.tgt_vocab_size, c.d_model)
        )
        self.src_positions = positional_encoding(c)
        # the sinusoidal table has no weights, so both sides share it; learned ones are two
        is_fixed = c.positional == "sinusoidal"
        self.tgt_positions = self.src_positions if is_fixed else positional_encoding(c)
        self.dropout = nn.Dropout(c.dropout)
        layer = c.layer  # built (and validated) once, shared by both stacks
        self.encoder = Encoder(layer, c.n_encoder_layers)
        self.decoder = Decoder(layer, c.n_decoder_layers)
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.attention_weights: dict[str, list[Tensor]] | None = None
        self._reset_parameters()
        if c.tie_embeddings:  # one matrix for target embedding and output projection (p24)
            self.output_proj.weight = self.tgt_embedding.weight

    def _reset_parameters(self) -> None:
        embeddings = [self.src_embedding]
        if self.tgt_embedding is not self.src_embedding:
            embeddings.append(self.tgt_embedding)
        init_weights([self.encoder, self.decoder], embeddings, self.config.d_model)

    # -- public API --------------------------------------------------------------------------
    # Masks are keyword-only, named and ordered as in torch.nn.Transformer: src_mask,
    # tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask,
    # memory_key_padding_mask.
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

        ``memory_key_padding_mask`` defaults to the source padding mask; ``tgt_is_causal``
        as in :meth:`decode`. Every input is checked before any computation.
        """
        self._check_source(src, src_mask, src_key_padding_mask)
        self._check_tokens("tgt", tgt, self.config.tgt_vocab_size)
        if src.size(0) != tgt.size(0):
            raise ValueError(
                f"src and tgt must have the same batch size, got src {tuple(src.shape)} "
                f"and tgt {tuple(tgt.shape)}"
            )
        masks = dict(
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        self._check_target(tgt, src.size(1), masks, tgt_is_causal)
        src_key_padding_mask = self._derived_padding(src, src_key_padding_mask)
        if memory_key_padding_mask is None:
            masks["memory_key_padding_mask"] = src_key_padding_mask
        memory = self._encode(src, src_mask, src_key_padding_mask, need_weights)
        return self._decode(tgt, memory, masks, tgt_is_causal, need_weights)

    def encode(
        self,
        src: Tensor,
        *,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """Source ids ``(B, S)`` -> memory ``(B, S, D)``. Padding mask from ``pad_id`` if None."""
        self._check_source(src, src_mask, src_key_padding_mask)
        src_key_padding_mask = self._derived_padding(src, src_key_padding_mask)
        return self._encode(src, src_mask, src_key_padding_mask, need_weights)

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
        validate: bool = True,
    ) -> Tensor:
        """Target ids ``(B, T)`` and memory ``(B, S, D)`` -> logits ``(B, T, V)``.

        ``tgt_is_causal=None`` (the default) means: causal unless a ``tgt_mask`` is given
        (then the mask alone decides). ``True`` applies the causal mask (no ``tgt_mask`` may
        come with it, as in torch); ``False`` with no mask lets every position see the whole
        target (the "leak" experiment of chapter 4). ``validate=False`` skips the checks of
        the input: decoding without the KV cache checks once per call, not once per token.
        """
        masks = dict(
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        if validate:
            self._check_tokens("tgt", tgt, self.config.tgt_vocab_size)
            check_memory(memory, self.config.d_model, tgt.size(0))
            self._check_target(tgt, memory.size(1), masks, tgt_is_causal)
        return self._decode(tgt, memory, masks, tgt_is_causal, need_weights)

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
        check_memory(memory, self.config.d_model)
        batch, length, _ = memory.shape
        check_key_padding_mask("memory_key_padding_mask", memory_key_padding_mask, batch, length)
        check_int("capacity", capacity, minimum=1, optional=True)
        return KVCache.start(
            [layer.cross_attn for layer in self._decoder_layers()],
            memory,
            memory_key_padding_mask=memory_key_padding_mask,
            capacity=self.config.max_len if capacity is None else capacity,
        )

    def decode_step(self, tokens: Tensor, cache: KVCache, *, validate: bool = True) -> Tensor:
        """Feed the newest token of each row, ``(B,)``; return next-token logits ``(B, V)``.

        The first call gets BOS. This step's self-attention keys/values are written into
        ``cache`` in place (:func:`lecturekit.model.cache.decode_cached`), so step t costs
        O(t) instead of recomputing the O(t^2) prefix. ``validate=False`` skips the checks of
        ``tokens`` and ``cache``: the decoding strategies check once per call, not once per
        token (their tokens come from an argmax or a draw over the vocabulary, so they are
        valid ids by construction).
        """
        if validate:
            self._check_step(tokens, cache)
        x = self._embed(tokens[:, None], self.tgt_embedding, self.tgt_positions, len(cache))
        x = decode_cached(self.decoder, x, cache, validate=validate)  # (B, 1, D)
        return self.output_proj(x[:, -1])  # (B, V)

    # -- the computation, on checked input ---------------------------------------------------
    def _embed(
        self: _Embeds,
        tokens: Tensor,
        embedding: nn.Embedding,
        positions: nn.Module,
        offset: int = 0,
    ) -> Tensor:
        x = embedding(tokens) * math.sqrt(self.config.d_model)  # (B, T) -> (B, T, D)
        return self.dropout(positions(x, offset))

    def _derived_padding(self: _Embeds, tokens: Tensor, given: Tensor | None) -> Tensor | None:
        if given is not None:
            return given
        mask = tokens == self.config.pad_id  # (B, S), True = padding
        return mask if bool(mask.any()) else None  # no padding: skip the masking work

    def _encode(
        self,
        src: Tensor,
        src_mask: Tensor | None,
        src_key_padding_mask: Tensor | None,
        need_weights: bool,
    ) -> Tensor:
        x = self._embed(src, self.src_embedding, self.src_positions)  # (B, S, D)
        memory = self.encoder(
            x,
            mask=src_mask,
            src_key_padding_mask=src_key_padding_mask,
            need_weights=need_weights,
            validate=False,  # checked by the public method
        )
        if need_weights:
            self._collect_weights(encoder=True, decoder=False)
        return memory

    def _decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        masks: dict[str, Tensor | None],
        tgt_is_causal: bool | None,
        need_weights: bool,
    ) -> Tensor:
        masks = {
            **masks,
            "tgt_key_padding_mask": self._derived_padding(tgt, masks["tgt_key_padding_mask"]),
        }
        x = self._embed(tgt, self.tgt_embedding, self.tgt_positions)  # (B, T, D)
        x = self.decoder(
            x,
            memory,
            **masks,
            # None: causal unless a tgt_mask is given (the one meaning, see decode)
            tgt_is_causal=masks["tgt_mask"] is None if tgt_is_causal is None else tgt_is_causal,
            need_weights=need_weights,
            validate=False,  # checked by the public method
        )
        if need_weights:
            self._collect_weights(encoder=False, decoder=True)
        return self.output_proj(x)  # (B, T, D) -> (B, T, V)

    def _collect_weights(self, encoder: bool, decoder: bool) -> None:
        weights = {} if encoder else (self.attention_weights or {})
        if encoder:
            encoder_layers = cast("list[EncoderLayer]", list(self.encoder.layers))
            weights["encoder"] = [_detached(layer.attention_weights) for layer in encoder_layers]
        if decoder:
            decoder_layers = self._decoder_layers()
            weights["decoder_self"] = [
                _detached(layer.attention_weights) for layer in decoder_layers
            ]
            weights["decoder_cross"] = [
                _detached(layer.cross_attention_weights) for layer in decoder_layers
            ]
        self.attention_weights = weights

    def _decoder_layers(self) -> list[DecoderLayer]:
        # the layers __init__ built (nn.ModuleList types its items as nn.Module)
        return cast("list[DecoderLayer]", list(self.decoder.layers))

    # -- checks of the public input (lecturekit._common holds the shared ones) ---------------
    def _check_tokens(self, name: str, tokens: Tensor, vocab_size: int) -> None:
        check_token_ids(name, tokens, vocab_size, shape="(B, S)" if name == "src" else "(B, T)")
        c = self.config
        if c.positional == "learned" and tokens.size(1) > c.max_len:
            raise ValueError(
                f"{name} length must be <= max_len={c.max_len} with learned positions, "
                f"got {tokens.size(1)}"
            )

    def _check_source(
        self, src: Tensor, src_mask: Tensor | None, src_key_padding_mask: Tensor | None
    ) -> None:
        self._check_tokens("src", src, self.config.src_vocab_size)
        batch, length = src.shape
        check_attn_mask("src_mask", src_mask, batch, self.config.n_heads, length, length)
        check_key_padding_mask("src_key_padding_mask", src_key_padding_mask, batch, length)

    def _check_target(
        self,
        tgt: Tensor,
        memory_length: int,
        masks: dict[str, Tensor | None],
        tgt_is_causal: bool | None,
    ) -> None:
        (batch, length), heads = tgt.shape, self.config.n_heads
        check_attn_mask("tgt_mask", masks["tgt_mask"], batch, heads, length, length)
        check_attn_mask("memory_mask", masks["memory_mask"], batch, heads, length, memory_length)
        check_key_padding_mask("tgt_key_padding_mask", masks["tgt_key_padding_mask"], batch, length)
        memory_padding = masks["memory_key_padding_mask"]
        check_key_padding_mask("memory_key_padding_mask", memory_padding, batch, memory_length)
        check_mask_or_causal("tgt_mask", masks["tgt_mask"], "tgt_is_causal", bool(tgt_is_causal))

    def _check_step(self, tokens: Tensor, cache: KVCache) -> None:
        """The tokens and the cache's length; ``decode_cached`` checks that the cache is
        this model's."""
        c = self.config
        check_type("cache", cache, KVCache, "a KVCache (from init_cache)")
        check_token_ids("tokens", tokens, c.tgt_vocab_size, shape="(B,)")
        if tokens.size(0) != cache.batch_size:
            raise ValueError(
                f"tokens must have shape (B,)=({cache.batch_size},) to match the cache, "
                f"got {tuple(tokens.shape)}"
            )
        if c.positional == "learned" and len(cache) >= c.max_len:
            raise ValueError(
                f"cannot decode position {len(cache)}: learned positions stop at max_len={c.max_len}"
            )


def _detached(weights: Tensor | None) -> Tensor:
    """A layer's attention weights, detached. ``_collect_weights`` runs only after a forward
    with ``need_weights=True``, which always keeps them (the "math" backend)."""
    assert weights is not None, "a layer ran without need_weights=True"
    return weights.detach()
