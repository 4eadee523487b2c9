"""Key/value cache for incremental (token by token) decoding (chapter 6).

When the decoder generates step t, the keys and values of positions 0..t-1 have not changed
(masked self attention never lets them see the future, p30-p31), so recomputing them every
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

The cached attention itself is here too (``LayerKVCache.self_attention`` and
``cross_attention``), so ``DecoderLayer`` reads as the plain layer of the slides.
``Transformer.init_cache`` builds a cache (``KVCache.start``) and ``Transformer.decode_step``
writes into it. The number of decoded steps is counted once, by the layers' ``length``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from lecturekit.model.masks import causal_mask, prepare_mask

if TYPE_CHECKING:  # annotations only: the cache calls the attention it is given
    from lecturekit.model.attention import MultiHeadAttention

__all__ = ["LayerKVCache", "KVCache"]

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

    # -- the cached attention of DecoderLayer ------------------------------------------------
    def self_attention(
        self, attention: MultiHeadAttention, x: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Masked self attention of the new positions ``x (B, T_new, D)`` over every position
        so far: their keys/values are appended, then the queries attend; ``(B, T_new, D)``."""
        q, k, v = attention.project_qkv(x)  # each (B, H, T_new, Dh)
        k, v = self.append(k, v)  # (B, H, T_past + T_new, Dh)
        # the new queries are the last positions: causal aligned lower-right (a single new
        # query sees every cached key, so it needs no mask at all)
        new, total = q.size(2), k.size(2)
        future = None if new == 1 else causal_mask(new, total, lower_right=True, device=q.device)
        return attention.attend(q, k, v, attn_mask=future, need_weights=need_weights)

    def cross_attention(
        self, attention: MultiHeadAttention, x: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Cross attention of ``x (B, T_new, D)`` over the cached memory keys/values, with the
        memory padding and its mask kept since ``init_cache``; ``(B, T_new, D)``."""
        return attention.attend(
            attention.project_q(x),  # (B, H, T_new, Dh)
            self.cross_keys,
            self.cross_values,
            key_padding_mask=self.memory_key_padding_mask,
            need_weights=need_weights,
            prepared_mask=self.cross_mask,
        )

    @staticmethod
    def check_inputs(
        memory: Tensor | None,
        tgt_mask: Tensor | None,
        memory_mask: Tensor | None,
        tgt_key_padding_mask: Tensor | None,
        memory_key_padding_mask: Tensor | None,
    ) -> None:
        """With a cache the decoder takes only the new positions: the memory, its padding
        and causality come from the cache, so a ``memory`` or mask given besides would be
        ignored; refuse it instead."""
        if memory is not None:
            raise ValueError(
                "memory must be None with a KV cache (init_cache keeps the memory's keys and "
                f"values), got a {tuple(memory.shape)} tensor"
            )
        masks = dict(
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
        )
        for name, mask in masks.items():
            if mask is not None:
                raise ValueError(
                    f"{name} must be None with a KV cache, got a {tuple(mask.shape)} tensor: "
                    "the cache applies the causal mask and the memory padding of init_cache; "
                    "decode without a cache to use other masks"
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
        """Write this step's ``(B, H, T_new, Dh)`` keys/values in place; return all so far."""
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
        cross_mask = prepare_mask(
            (batch, heads, 1, length),
            memory.dtype,
            memory.device,
            key_padding_mask=memory_key_padding_mask,
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

    def reorder_(self, index: Tensor, *, within_sources: bool = False) -> None:
        """In place: row i becomes row ``index[i]``; ``index (B,)`` has one entry per row.

        What beam search does after every step (:meth:`LayerKVCache.reorder_`, which also
        says what ``within_sources`` promises); use :meth:`index_select` to keep this cache
        as it is or to change the batch size.
        """
        self._check_index(index)
        if index.numel() != self.batch_size:
            raise ValueError(
                f"index must have shape (B,)=({self.batch_size},) to reorder in place, "
                f"got {tuple(index.shape)}"
            )
        for layer in self.layers:
            layer.reorder_(index, within_sources=within_sources)

    def _check_index(self, index: Tensor) -> None:
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

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self.layers)}, batch={self.batch_size}, steps={self.steps})"
