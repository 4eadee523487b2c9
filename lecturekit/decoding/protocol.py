"""The incremental-decoder protocol every decoding strategy runs on (slides p47-p54).

A strategy (greedy, sampling, beam search) needs three methods of a model::

    state = decoder.start(src, src_key_padding_mask=m)   # B sources -> state with B rows
    log_probs, state = decoder.step(tokens, state)        # tokens (N,) -> log-probs (N, V)
    state = decoder.select(state, index)                  # keep / repeat / reorder rows

and the attributes ``bos_id``, ``eos_id``, ``pad_id`` and ``vocab_size``. The first ``step``
receives BOS; each later one receives the token chosen for each row at the previous step.
A decoder may also offer ``reorder(state, index)``: ``select`` for a caller that never uses
the old ``state`` again and keeps every row with its source (``index`` has one entry per row,
and row ``index[i]`` was decoded from the same source as row ``i``), so the decoder may work
in place and leave alone what depends on the source only. Beam search reorders its beams so
after every step, and calls ``select`` instead where a decoder has no ``reorder``.
:class:`TransformerDecoder` adapts a :class:`lecturekit.Transformer` (through its KV cache);
:class:`lecturekit.decoding.table.TableDecoder` is a model written down as a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from lecturekit._common import check_has_data

if TYPE_CHECKING:
    from lecturekit.model.cache import KVCache
    from lecturekit.model.transformer import Transformer

__all__ = ["IncrementalDecoder", "TransformerDecoder", "as_decoder"]


@runtime_checkable
class IncrementalDecoder(Protocol):
    """What the decoding strategies need from a model (see the module docstring)."""

    bos_id: int
    eos_id: int
    pad_id: int
    vocab_size: int

    def start(self, src: Any, *, src_key_padding_mask: Tensor | None = None) -> Any: ...

    def step(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]: ...

    def select(self, state: Any, index: Tensor) -> Any: ...


@dataclass
class _CachedState:
    cache: KVCache


@dataclass
class _PrefixState:
    memory: Tensor  # (N, S, D)
    memory_key_padding_mask: Tensor | None  # (N, S) True = padding
    prefix: Tensor  # (N, t) tokens fed so far


# cached decoding keeps the KV cache; uncached decoding re-runs the decoder on the prefix
_TransformerState = _CachedState | _PrefixState


class TransformerDecoder:
    """Adapter from :class:`lecturekit.Transformer` to the incremental-decoder protocol.

    With ``use_cache=True`` (default) each step feeds one token to ``model.decode_step`` and
    the self-attention keys/values of earlier steps come from the KV cache
    (``model.init_cache``, ``KVCache.index_select``, ``KVCache.reorder_``). With
    ``use_cache=False`` every step re-runs ``model.decode`` on the whole prefix: same
    numbers, quadratic cost; it exists to test the cache and to show in the book what the
    cache saves.
    """

    def __init__(self, model: Transformer, use_cache: bool = True) -> None:
        for name in ("encode", "decode", "init_cache", "decode_step", "config"):
            if not hasattr(model, name):
                raise TypeError(
                    f"model must be a lecturekit.Transformer (with .{name}), "
                    f"got {type(model).__name__}"
                )
        check_has_data("model", model)
        self.model = model
        self.use_cache = use_cache
        cfg = model.config
        self.bos_id = int(cfg.bos_id)
        self.eos_id = int(cfg.eos_id)
        self.pad_id = int(cfg.pad_id)
        self.vocab_size = int(cfg.tgt_vocab_size)

    def start(
        self, src: Tensor, *, src_key_padding_mask: Tensor | None = None
    ) -> _TransformerState:
        """Encode ``src`` ``(B, S)`` once; the returned state has B rows."""
        if not isinstance(src, Tensor) or src.dim() != 2:
            raise ValueError(
                f"src must be a LongTensor of shape (B, S), got "
                f"{tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__}"
            )
        if src_key_padding_mask is None:
            src_key_padding_mask = src == self.model.config.pad_id
        memory = self.model.encode(src, src_key_padding_mask=src_key_padding_mask)
        if self.use_cache:
            cache = self.model.init_cache(memory, memory_key_padding_mask=src_key_padding_mask)
            return _CachedState(cache)
        empty = torch.empty(src.shape[0], 0, dtype=torch.long, device=src.device)
        return _PrefixState(
            memory=memory, memory_key_padding_mask=src_key_padding_mask, prefix=empty
        )

    def step(self, tokens: Tensor, state: _TransformerState) -> tuple[Tensor, _TransformerState]:
        """Feed ``tokens`` ``(N,)``; return next-token log-probs ``(N, V)``."""
        if isinstance(state, _CachedState):
            # the strategies feed ids they chose from the vocabulary: no per-token checks
            logits = self.model.decode_step(tokens, state.cache, validate=False)
            return torch.log_softmax(logits.float(), dim=-1), state
        prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)  # (N, t+1)
        logits = self.model.decode(  # checked by start: the prefix holds the chosen ids
            prefix,
            state.memory,
            memory_key_padding_mask=state.memory_key_padding_mask,
            validate=False,
        )  # (N, t+1, V)
        state = _PrefixState(state.memory, state.memory_key_padding_mask, prefix)
        return torch.log_softmax(logits[:, -1].float(), dim=-1), state

    def select(self, state: _TransformerState, index: Tensor) -> _TransformerState:
        """Rows ``index`` ``(N',)`` of ``state``."""
        if isinstance(state, _CachedState):
            return _CachedState(state.cache.index_select(index))
        mask = state.memory_key_padding_mask
        return _PrefixState(
            memory=state.memory.index_select(0, index),
            memory_key_padding_mask=None if mask is None else mask.index_select(0, index),
            prefix=state.prefix.index_select(0, index),
        )

    def reorder(self, state: _TransformerState, index: Tensor) -> _TransformerState:
        """:meth:`select` with ``index (N,)``, one entry per row, each from the row's own
        source; ``state`` is used up: the KV cache is reordered in place and keeps its
        cross-attention part (:meth:`lecturekit.model.cache.KVCache.reorder_`)."""
        if not isinstance(state, _CachedState):
            return self.select(state, index)
        # the index comes from the search (beam_search), not from a user: not checked again
        state.cache.reorder_(index, within_sources=True, validate=False)
        return state


def as_decoder(model: Any, use_cache: bool = True) -> IncrementalDecoder:
    """``model`` if it already follows the protocol, else a :class:`TransformerDecoder`."""
    if isinstance(model, IncrementalDecoder):
        return model
    return TransformerDecoder(model, use_cache=use_cache)
