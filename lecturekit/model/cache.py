"""Key/value cache for incremental (token by token) decoding.

When the decoder generates step t, the keys and values of positions 0..t-1 have not changed
(masked self attention never lets them see the future, p30-p31), so recomputing them every
step is wasted work. The cache keeps, per decoder layer,

* the self-attention keys/values of all steps so far, ``(B, H, t, Dh)``, appended each step;
* the cross-attention keys/values of the encoder output, ``(B, H, S, Dh)``, computed once
  (the memory does not change while decoding, p38-p41).

``Transformer.init_cache`` builds one and ``Transformer.decode_step`` appends to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["LayerKVCache", "KVCache"]


@dataclass
class LayerKVCache:
    """Cached keys/values of one decoder layer (all ``(B, H, *, Dh)``)."""

    self_keys: Tensor
    self_values: Tensor
    cross_keys: Tensor
    cross_values: Tensor

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Append this step's ``(B, H, T_new, Dh)`` keys/values; return all of them so far."""
        self.self_keys = torch.cat([self.self_keys, keys], dim=2)  # (B, H, t + T_new, Dh)
        self.self_values = torch.cat([self.self_values, values], dim=2)
        return self.self_keys, self.self_values

    def index_select(self, index: Tensor) -> LayerKVCache:
        return LayerKVCache(
            self.self_keys.index_select(0, index),
            self.self_values.index_select(0, index),
            self.cross_keys.index_select(0, index),
            self.cross_values.index_select(0, index),
        )


class KVCache:
    """The decoder's cache: one ``LayerKVCache`` per layer, plus the memory padding mask.

    ``len(cache)`` is the number of decoded steps so far (the next step's position).
    ``cache.index_select(index)`` returns a new cache with rows ``index (B',)`` (beam search:
    expand each source to its beams, reorder beams after a step).
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
        mask = self.memory_key_padding_mask
        return KVCache(
            [layer.index_select(index) for layer in self.layers],
            index.numel(),
            None if mask is None else mask.index_select(0, index),
            self.steps,
        )

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self.layers)}, batch={self.batch_size}, steps={self.steps})"
