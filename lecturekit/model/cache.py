"""Key/value cache for token-by-token decoding (chapter 4; used by chapter 6's decoding).

When the decoder generates step t, the keys and values of positions 0..t-1 have not changed
(masked self attention never lets them see the future, p28-p30), so recomputing them every
step is wasted work. The cache keeps, per decoder layer,

* the self-attention keys/values of all steps so far, ``(B, H, t, Dh)``;
* the cross-attention keys/values of the encoder output, ``(B, H, S, Dh)``, computed once
  (the memory does not change while decoding, p38-p41), the memory's padding mask and the
  cross-attention mask built from it (``lecturekit.model.masks.prepare_mask``).

The self-attention part is a *static* cache, as in common inference libraries: one buffer
``(B, H, capacity, Dh)`` allocated up front, into which each step writes its keys/values in
place. Growing a tensor by ``torch.cat`` at every step would copy the whole past each time
(quadratic copying over a sequence); a buffer that runs full doubles its capacity, so even a
decode longer than planned copies each entry only a constant number of times on average.

The cached decoding step is here too (:func:`decode_cached`): it runs each decoder layer's
sub-layers with self and cross attention over the cache, so ``DecoderLayer`` reads as the
plain layer of the slides. ``Transformer.init_cache`` builds a cache (``KVCache.start``) and
``Transformer.decode_step`` calls ``decode_cached``, the one place that writes into it: every
layer's cache advances by the same number of positions in the same call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor

from lecturekit._common import check_type
from lecturekit.model.attention import MultiHeadAttention
from lecturekit.model.layers import Decoder, DecoderLayer
from lecturekit.model.masks import _causal_mask, _prepare_mask

__all__ = ["LayerKVCache", "KVCache", "decode_cached"]

# (additive mask (B, 1, 1, S), fully masked rows (B, 1, 1, 1) or None), from prepare_mask
CrossMask = tuple[Tensor | None, Tensor | None]


@dataclass
class LayerKVCache:
    """Cached keys/values of one decoder layer.

    ``key_buffer``/``value_buffer`` ``(B, H, capacity, Dh)``: self-attention keys/values, of
    which the first ``length`` positions are filled; ``cross_keys``/``cross_values``
    ``(B, H, S, Dh)``: the encoder output's keys/values; ``memory_key_padding_mask``
    ``(B, S)`` bool (True = padding) or None; ``cross_mask``: the cross-attention mask
    built from it, ``prepare_mask(...)``, or None to build it at every step.
    Build an empty one with :meth:`empty`.
    """

    key_buffer: Tensor
    value_buffer: Tensor
    cross_keys: Tensor
    cross_values: Tensor
    length: int = 0
    cross_mask: CrossMask | None = None
    memory_key_padding_mask: Tensor | None = None
    # the buffers reorder_ writes into, then swaps with the current ones
    _spare: tuple[Tensor, Tensor] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @classmethod
    def empty(
        cls,
        capacity: int,
        cross_keys: Tensor,
        cross_values: Tensor,
        *,
        cross_mask: CrossMask | None = None,
        memory_key_padding_mask: Tensor | None = None,
    ) -> LayerKVCache:
        """A cache with room for ``capacity`` self-attention steps, shaped after ``cross_keys``."""
        batch, heads, _, head_dim = cross_keys.shape
        shape = (batch, heads, capacity, head_dim)
        return cls(
            cross_keys.new_empty(shape),
            cross_keys.new_empty(shape),
            cross_keys,
            cross_values,
            cross_mask=cross_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )

    # -- the buffers -------------------------------------------------------------------------
    @property
    def self_keys(self) -> Tensor:
        """The self-attention keys of every step so far, ``(B, H, length, Dh)`` (a view)."""
        return self.key_buffer[:, :, : self.length]

    @property
    def self_values(self) -> Tensor:
        """The self-attention values of every step so far, ``(B, H, length, Dh)`` (a view)."""
        return self.value_buffer[:, :, : self.length]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Write this step's ``(B, H, T_new, Dh)`` keys/values in place; return all so far.

        :func:`decode_cached` appends to every layer of a :class:`KVCache` in one call;
        appending to one layer alone would leave it a step ahead of the others.
        """
        start, end = self.length, self.length + keys.size(2)
        if end > self.key_buffer.size(2):
            self._grow(end)
        self.key_buffer[:, :, start:end] = keys
        self.value_buffer[:, :, start:end] = values
        self.length = end
        return self.self_keys, self.self_values  # (B, H, end, Dh) each

    def _grow(self, needed: int) -> None:
        """Move to buffers of at least twice the capacity (amortised O(1) copies per step)."""
        batch, heads, capacity, head_dim = self.key_buffer.shape
        shape = (batch, heads, max(needed, 2 * capacity), head_dim)
        keys, values = self.key_buffer.new_empty(shape), self.value_buffer.new_empty(shape)
        keys[:, :, : self.length] = self.self_keys
        values[:, :, : self.length] = self.self_values
        self.key_buffer, self.value_buffer = keys, values

    def index_select(self, index: Tensor) -> LayerKVCache:
        """A new cache whose row i is this cache's row ``index[i]``, with the same capacity
        (only the filled positions are copied)."""
        selected = LayerKVCache.empty(
            self.key_buffer.size(2),
            self.cross_keys.index_select(0, index),
            self.cross_values.index_select(0, index),
            cross_mask=_select_mask(self.cross_mask, index),
            memory_key_padding_mask=_select(self.memory_key_padding_mask, index),
        )
        selected.append(
            self.self_keys.index_select(0, index), self.self_values.index_select(0, index)
        )
        return selected

    def reorder_(self, index: Tensor, *, within_sources: bool = False) -> None:
        """In place: row i becomes row ``index[i]``; ``index (B,)`` has one entry per row.

        Beam search reorders its beams every step and never looks at the old order again.
        The filled positions are gathered straight into a spare pair of buffers, which then
        swap with the current ones: one copy per step and no allocation, where
        :meth:`index_select` allocates a fresh buffer (page faults) and copies twice.
        ``within_sources=True`` promises that row ``index[i]`` was decoded from the same
        source as row i (beams trading places); the cross-attention keys, values and masks,
        which depend on the source only, are then left as they are.
        """
        if self._spare is None or self._spare[0].shape != self.key_buffer.shape:
            self._spare = (torch.empty_like(self.key_buffer), torch.empty_like(self.value_buffer))
        keys, values = self._spare
        torch.index_select(self.self_keys, 0, index, out=keys[:, :, : self.length])
        torch.index_select(self.self_values, 0, index, out=values[:, :, : self.length])
        self._spare = (self.key_buffer, self.value_buffer)
        self.key_buffer, self.value_buffer = keys, values
        if within_sources:
            return
        self.cross_keys = self.cross_keys.index_select(0, index)
        self.cross_values = self.cross_values.index_select(0, index)
        self.cross_mask = _select_mask(self.cross_mask, index)
        self.memory_key_padding_mask = _select(self.memory_key_padding_mask, index)


def _select(tensor: Tensor | None, index: Tensor) -> Tensor | None:
    """Rows ``index`` of ``tensor`` (None stays None)."""
    return None if tensor is None else tensor.index_select(0, index)


def _select_mask(cross_mask: CrossMask | None, index: Tensor) -> CrossMask | None:
    """Rows ``index`` of a cross-attention mask ``((B, 1, 1, S), (B, 1, 1, 1) or None)``."""
    if cross_mask is None:
        return None
    mask, dead = cross_mask
    return _select(mask, index), _select(dead, index)


class KVCache:
    """The decoder's cache: one ``LayerKVCache`` per layer.

    ``len(cache)`` is the number of decoded steps so far (the next step's position), read
    from the layers (each counts the positions it holds, all the same number).
    ``cache.index_select(index)`` returns a new cache with rows ``index (B',)`` (beam search
    expands each source to its beams so); ``cache.reorder_(index)`` reorders the rows in
    place (beam search, after every step).
    """

    def __init__(self, layers: list[LayerKVCache]) -> None:
        if not layers:
            raise ValueError("layers must hold one LayerKVCache per decoder layer, got none")
        self.layers = layers

    @classmethod
    def start(
        cls,
        cross_attentions: Sequence[MultiHeadAttention],
        memory: Tensor,
        *,
        memory_key_padding_mask: Tensor | None = None,
        capacity: int,
    ) -> KVCache:
        """An empty cache for decoding from memory ``(B, S, D)``: room for ``capacity`` steps
        per layer, and the cross-attention keys/values of each layer's ``cross_attentions``,
        computed once."""
        batch, length, _ = memory.shape
        heads = cross_attentions[0].n_heads
        # the cross-attention mask of every step and layer: additive (B, 1, 1, S), built once
        shape = (batch, heads, 1, length)
        cross_mask = _prepare_mask(
            shape, memory.dtype, memory.device, None, memory_key_padding_mask, False
        )
        layers = []
        for attention in cross_attentions:
            cross_keys, cross_values = attention.project_kv(memory)  # (B, H, S, Dh)
            layers.append(
                LayerKVCache.empty(
                    capacity,
                    cross_keys,
                    cross_values,
                    cross_mask=cross_mask,
                    memory_key_padding_mask=memory_key_padding_mask,
                )
            )
        return cls(layers)

    @property
    def steps(self) -> int:
        """Decoded steps so far: the positions each layer holds."""
        return self.layers[0].length

    @property
    def batch_size(self) -> int:
        """Rows of the cache (sources times beams while beam searching)."""
        return self.layers[0].key_buffer.size(0)

    @property
    def memory_key_padding_mask(self) -> Tensor | None:
        """The memory's ``(B, S)`` padding mask the cache was started with (reordered with it)."""
        return self.layers[0].memory_key_padding_mask

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, layer: int) -> LayerKVCache:
        return self.layers[layer]

    def index_select(self, index: Tensor) -> KVCache:
        """A new cache whose row i is this cache's row ``index[i]``; ``index``: LongTensor (B',)."""
        self._check_index(index)
        return KVCache([layer.index_select(index) for layer in self.layers])

    def reorder_(
        self, index: Tensor, *, within_sources: bool = False, validate: bool = True
    ) -> None:
        """In place: row i becomes row ``index[i]``; ``index (B,)`` has one entry per row.

        What beam search does after every step (:meth:`LayerKVCache.reorder_`, which also
        says what ``within_sources`` promises); use :meth:`index_select` to keep this cache
        as it is or to change the batch size. ``validate=False`` skips the checks of
        ``index`` (two device-to-host copies): beam search built it from its own beams.
        """
        if validate:
            self._check_index(index, one_per_row=True)
        for layer in self.layers:
            layer.reorder_(index, within_sources=within_sources)

    def _check_index(self, index: Tensor, *, one_per_row: bool = False) -> None:
        """``index``: a 1-d integer tensor of rows of this cache (one per row: ``(B,)``)."""
        if not isinstance(index, Tensor) or index.dtype not in (torch.int64, torch.int32):
            raise TypeError(
                f"index must be an integer (long) tensor, got "
                f"{type(index).__name__ if not isinstance(index, Tensor) else index.dtype}"
            )
        if index.dim() != 1:
            raise ValueError(f"index must have shape (B',), got {tuple(index.shape)}")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self.batch_size):
            raise ValueError(
                f"index values must be in [0, {self.batch_size}), got "
                f"min {int(index.min())}, max {int(index.max())}"
            )
        if one_per_row and index.numel() != self.batch_size:
            raise ValueError(
                f"index must have shape (B,)=({self.batch_size},) to reorder in place, "
                f"got {tuple(index.shape)}"
            )

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self.layers)}, batch={self.batch_size}, steps={self.steps})"


def decode_cached(decoder: Decoder, x: Tensor, cache: KVCache, *, validate: bool = True) -> Tensor:
    """The decoder on new positions, over the cache: ``x (B, T_new, D)`` -> ``(B, T_new, D)``.

    ``x`` holds the embedded new positions (positions ``len(cache)`` onwards). Each layer runs
    its sub-layers in add & norm (``DecoderLayer._add_and_norm``) with self attention over
    every position so far (this step's keys and values are appended to the cache) and cross
    attention over the memory's keys and values kept since ``init_cache``; then comes the
    decoder's final norm. Every layer's cache advances by ``T_new``, in this one call.
    ``validate=False``: the caller (``Transformer.decode_step``) has checked the input.
    """
    layers = cast("list[DecoderLayer]", list(decoder.layers))
    if validate:
        _check_step(layers, x, cache)
    for layer, kept in zip(layers, cache.layers, strict=True):
        x = _cached_layer(layer, kept, x)
    return x if decoder.norm is None else decoder.norm(x)


def _cached_layer(layer: DecoderLayer, kept: LayerKVCache, x: Tensor) -> Tensor:
    """One decoder layer on the new positions ``x (B, T_new, D)``, its attentions over ``kept``."""

    def self_attention(h: Tensor) -> Tensor:  # the new positions against every position so far
        q, k, v = layer.self_attn.project_qkv(h)  # each (B, H, T_new, Dh)
        k, v = kept.append(k, v)  # (B, H, T_past + T_new, Dh)
        # the new queries are the last positions: causal aligned lower-right (a single new
        # query sees every cached key, so it needs no mask at all)
        new, total = q.size(2), k.size(2)
        future = None if new == 1 else _causal_mask(new, total, lower_right=True, device=q.device)
        out, layer.attention_weights = layer.self_attn.attend(q, k, v, attn_mask=future)
        return layer.dropout1(out)

    def cross_attention(h: Tensor) -> Tensor:  # the memory's keys and values, computed once
        out, layer.cross_attention_weights = layer.cross_attn.attend(
            layer.cross_attn.project_q(h),  # (B, H, T_new, Dh)
            kept.cross_keys,
            kept.cross_values,
            key_padding_mask=kept.memory_key_padding_mask,
            prepared_mask=kept.cross_mask,
        )
        return layer.dropout2(out)

    return layer._add_and_norm(x, self_attention, cross_attention)


def _check_step(layers: list[DecoderLayer], x: Tensor, cache: KVCache) -> None:
    """``cache`` comes from the init_cache of the model these decoder ``layers`` belong to,
    and ``x`` is a ``(B, T_new, D)`` float tensor with the cache's batch size."""
    check_type("cache", cache, KVCache, "a KVCache (from init_cache)")
    config = layers[0].config
    heads, head_dim = config.n_heads, config.head_dim
    shapes = {tuple(layer.cross_keys.shape[1::2]) for layer in cache.layers}  # (H, Dh)
    if len(cache.layers) != len(layers) or shapes != {(heads, head_dim)}:
        raise ValueError(
            f"cache must come from this model's init_cache ({len(layers)} layers of "
            f"{heads} heads x {head_dim}), got one of {len(cache.layers)} layers shaped "
            f"{sorted(shapes)}: another model's cache"
        )
    expected = (cache.batch_size, config.d_model)
    if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
        raise TypeError(f"x must be a float tensor (B, T_new, D), got {type(x).__name__}")
    if x.dim() != 3 or x.size(1) == 0 or (x.size(0), x.size(2)) != expected:
        raise ValueError(
            f"x must have shape (B, T_new, D)=({expected[0]}, T_new >= 1, {expected[1]}) to "
            f"match the cache, got {tuple(x.shape)}"
        )
