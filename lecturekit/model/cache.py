"""Key/value cache for incremental (token by token) decoding.

When the decoder generates step t, the keys and values of positions 0..t-1 have not changed
(masked self attention never lets them see the future, p30-p31), so recomputing them every
step is wasted work. The cache keeps, per decoder layer,

* the self-attention keys/values of all steps so far, ``(B, H, t, Dh)``;
* the cross-attention keys/values of the encoder output, ``(B, H, S, Dh)``, computed once
  (the memory does not change while decoding, p38-p41), and likewise the cross-attention
  mask built from the source padding (``lecturekit.model.masks.prepare_mask``).

The self-attention part is a *static* cache, as in common inference libraries: one buffer
``(B, H, capacity, Dh)`` allocated up front, into which each step writes its keys/values in
place. Growing a tensor by ``torch.cat`` at every step would copy the whole past each time
(quadratic copying over a sequence); a buffer that runs full doubles its capacity, so even a
decode longer than planned copies each entry only a constant number of times on average.

``Transformer.init_cache`` builds one and ``Transformer.decode_step`` writes into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["LayerKVCache", "KVCache"]


@dataclass
class LayerKVCache:
    """Cached keys/values of one decoder layer.

    ``key_buffer``/``value_buffer`` ``(B, H, capacity, Dh)``: self-attention keys/values, of
    which the first ``length`` positions are filled; ``cross_keys``/``cross_values``
    ``(B, H, S, Dh)``: the encoder output's keys/values; ``cross_mask``: the
    cross-attention mask and its fully masked rows, ``prepare_mask(...)`` of the source
    padding, ``((B, 1, 1, S), (B, 1, 1, 1) or None)``, or None to build it at every step.
    Build an empty one with :meth:`empty`.
    """

    key_buffer: Tensor
    value_buffer: Tensor
    cross_keys: Tensor
    cross_values: Tensor
    length: int = 0
    cross_mask: tuple[Tensor | None, Tensor | None] | None = None
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
        cross_mask: tuple[Tensor | None, Tensor | None] | None = None,
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
        )

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
        cross_mask = None if self.cross_mask is None else _select_mask(self.cross_mask, index)
        selected = LayerKVCache.empty(
            self.key_buffer.size(2),
            self.cross_keys.index_select(0, index),
            self.cross_values.index_select(0, index),
            cross_mask,
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
        source as row i (beams trading places); the cross-attention keys, values and mask,
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
        if self.cross_mask is not None:
            self.cross_mask = _select_mask(self.cross_mask, index)


def _select_mask(
    cross_mask: tuple[Tensor | None, Tensor | None], index: Tensor
) -> tuple[Tensor | None, Tensor | None]:
    """Rows ``index`` of a cross-attention mask ``((B, 1, 1, S), (B, 1, 1, 1) or None)``."""
    mask, dead = cross_mask
    return (
        None if mask is None else mask.index_select(0, index),
        None if dead is None else dead.index_select(0, index),
    )


class KVCache:
    """The decoder's cache: one ``LayerKVCache`` per layer, plus the memory padding mask.

    ``len(cache)`` is the number of decoded steps so far (the next step's position).
    ``cache.index_select(index)`` returns a new cache with rows ``index (B',)`` (beam search
    expands each source to its beams so); ``cache.reorder_(index)`` reorders the rows in
    place (beam search, after every step).
    """

    def __init__(
        self,
        layers: list[LayerKVCache],
        batch_size: int,
        memory_key_padding_mask: Tensor | None = None,
        steps: int = 0,
    ) -> None:
        self.layers = layers
        self.batch_size = batch_size
        self.memory_key_padding_mask = memory_key_padding_mask  # (B, S) bool or None
        self.steps = steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, layer: int) -> LayerKVCache:
        return self.layers[layer]

    def index_select(self, index: Tensor) -> KVCache:
        """A new cache whose row i is this cache's row ``index[i]``; ``index``: LongTensor (B',)."""
        self._check_index(index)
        mask = self.memory_key_padding_mask
        return KVCache(
            [layer.index_select(index) for layer in self.layers],
            index.numel(),
            None if mask is None else mask.index_select(0, index),
            self.steps,
        )

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
        if self.memory_key_padding_mask is not None and not within_sources:
            self.memory_key_padding_mask = self.memory_key_padding_mask.index_select(0, index)

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
