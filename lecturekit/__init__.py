"""lecturekit: the Transformer of Hung-yi Lee's ML 2021 lecture, as an importable package.

Every chapter notebook of the course imports from here. Importing the package is cheap: the
public names below are resolved lazily (PEP 562), so ``import lecturekit`` loads neither
torch nor triton until a name that needs them is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "TransformerConfig": "lecturekit.config",
    "causal_mask": "lecturekit.masks",
    "padding_mask": "lecturekit.masks",
    "scaled_dot_product_attention": "lecturekit.attention",
    "MultiHeadAttention": "lecturekit.attention",
    "SinusoidalPositionalEncoding": "lecturekit.layers",
    "LearnedPositionalEncoding": "lecturekit.layers",
    "PositionwiseFeedForward": "lecturekit.layers",
    "EncoderLayer": "lecturekit.layers",
    "DecoderLayer": "lecturekit.layers",
    "Encoder": "lecturekit.layers",
    "Decoder": "lecturekit.layers",
    "KVCache": "lecturekit.cache",
    "Transformer": "lecturekit.model",
    "count_parameters": "lecturekit.params",
    "TrainConfig": "lecturekit.training",
    "fit": "lecturekit.training",
    "save_checkpoint": "lecturekit.checkpoint",
    "load_checkpoint": "lecturekit.checkpoint",
    "greedy": "lecturekit.decoding",
    "beam_search": "lecturekit.decoding",
    "sample": "lecturekit.decoding",
    "TableDecoder": "lecturekit.decoding",
    "make_task": "lecturekit.data.tasks",
    "TaskData": "lecturekit.data.tasks",
    "CharVocab": "lecturekit.data.vocab",
    "WordVocab": "lecturekit.data.vocab",
    "Batch": "lecturekit.data.batching",
    "collate": "lecturekit.data.batching",
}

_SUBMODULES = {
    "attention",
    "cache",
    "checkpoint",
    "config",
    "data",
    "decoding",
    "distributed",
    "environment",
    "exercises",
    "interop",
    "kernels",
    "layers",
    "masks",
    "metrics",
    "model",
    "params",
    "plotting",
    "pretrained",
    "scheduled_sampling",
    "training",
    "widgets",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"lecturekit.{name}")
    raise AttributeError(f"module 'lecturekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | _SUBMODULES)


if TYPE_CHECKING:  # pragma: no cover - static analysers only
    from lecturekit.attention import MultiHeadAttention, scaled_dot_product_attention
    from lecturekit.cache import KVCache
    from lecturekit.checkpoint import load_checkpoint, save_checkpoint
    from lecturekit.config import TransformerConfig
    from lecturekit.decoding import TableDecoder, beam_search, greedy, sample
    from lecturekit.layers import (
        Decoder,
        DecoderLayer,
        Encoder,
        EncoderLayer,
        LearnedPositionalEncoding,
        PositionwiseFeedForward,
        SinusoidalPositionalEncoding,
    )
    from lecturekit.masks import causal_mask, padding_mask
    from lecturekit.model import Transformer
    from lecturekit.params import count_parameters
    from lecturekit.training import TrainConfig, fit
