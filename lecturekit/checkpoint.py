"""Checkpoints: save a trained model with everything needed to use it again, safely.

A checkpoint is one ``torch.save`` file holding only plain data (dicts, lists, strings,
numbers, tensors): the model configuration, the weights, the vocabularies, the training
configuration, free-form metadata and the ``lecturekit`` version that wrote it.

- **Atomic**: the file is written to a temporary file in the same directory, flushed to disk
  and renamed over the destination (``os.replace``); an interrupted save leaves the previous
  checkpoint intact.
- **Safe to load**: ``torch.load(weights_only=True)`` never runs pickled code.
- **Checked**: loading into an existing model whose configuration differs raises a
  ``ValueError`` naming the differing fields.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["Checkpoint", "save_checkpoint", "load_checkpoint", "RUNTIME_FIELDS"]

FORMAT = "lecturekit-checkpoint"
FORMAT_VERSION = 1
# configuration fields that change how the model computes, not its weights: a checkpoint
# loads into a model that differs only in these
RUNTIME_FIELDS = ("dropout", "attention_backend", "layernorm_backend")


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` returns.

    ``model`` (in eval mode), ``config`` (``TransformerConfig``), ``src_vocab`` /
    ``tgt_vocab`` (``lecturekit.data.Vocab`` or None), ``train_config`` (dict or None),
    ``metadata`` (dict) and ``lecturekit_version`` (of the writer).
    """

    model: nn.Module
    config: Any
    src_vocab: Any = None
    tgt_vocab: Any = None
    train_config: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    lecturekit_version: str = ""


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    *,
    src_vocab: Any = None,
    tgt_vocab: Any = None,
    train_config: Any = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` and its context to ``path`` atomically; return the path.

    Args:
        model: a :class:`lecturekit.Transformer` (a DDP-wrapped one is unwrapped).
        src_vocab, tgt_vocab: ``lecturekit.data.Vocab`` objects (stored with ``to_dict``).
        train_config: a ``TrainConfig`` (or a plain dict).
        metadata: plain data only (str, int, float, bool, None, lists, dicts, tensors).
    """
    from lecturekit import __version__

    model = getattr(model, "module", model)  # unwrap DistributedDataParallel
    if not hasattr(model, "config") or not hasattr(model.config, "to_dict"):
        raise TypeError(f"model: expected a lecturekit.Transformer, got {type(model).__name__}")
    if train_config is not None and hasattr(train_config, "to_dict"):
        train_config = train_config.to_dict()
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lecturekit_version": __version__,
        "model_config": model.config.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "src_vocab": None if src_vocab is None else src_vocab.to_dict(),
        "tgt_vocab": None if tgt_vocab is None else tgt_vocab.to_dict(),
        "train_config": _plain(train_config, "train_config"),
        "metadata": _plain(metadata or {}, "metadata"),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)  # the previous checkpoint at `path` is untouched
        raise
    return path


def _plain(value: Any, name: str) -> Any:
    """Check that ``value`` is plain data that ``weights_only`` loading accepts."""
    if value is None or isinstance(value, (str, int, float, bool, torch.Tensor)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, name) for v in value]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, (str, int)):
                raise TypeError(f"{name}: dict keys must be str or int, got {key!r}")
        return {k: _plain(v, f"{name}[{k!r}]") for k, v in value.items()}
    raise TypeError(
        f"{name}: expected plain data (str, numbers, lists, dicts, tensors), "
        f"got {type(value).__name__}"
    )


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module | None = None,
    *,
    map_location: str | torch.device = "cpu",
    **runtime_overrides: Any,
) -> Checkpoint:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Args:
        path: the checkpoint file.
        model: load the weights into this model; its configuration must equal the
            checkpoint's except for ``RUNTIME_FIELDS`` (dropout, attention and LayerNorm
            backends), else ``ValueError``. None: build a new ``Transformer``.
        map_location: where the tensors go (default CPU).
        runtime_overrides: for a new model, values of ``RUNTIME_FIELDS`` to use instead of
            the saved ones (e.g. ``attention_backend="sdpa"``).

    Returns:
        A :class:`Checkpoint`; its model is in eval mode.
    """
    from lecturekit.config import TransformerConfig
    from lecturekit.model import Transformer

    if bad := set(runtime_overrides) - set(RUNTIME_FIELDS):
        raise TypeError(f"runtime_overrides: only {RUNTIME_FIELDS} may be overridden, got {bad}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no checkpoint file at {str(path)!r}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # pickle.UnpicklingError and friends
        raise ValueError(
            f"path: {str(path)!r} is not a lecturekit checkpoint that loads safely with "
            f"weights_only=True ({type(err).__name__}: {str(err).splitlines()[0]})"
        ) from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"path: {str(path)!r} is not a lecturekit checkpoint")
    if payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"path: checkpoint format version {payload.get('format_version')} is not supported "
            f"(expected {FORMAT_VERSION})"
        )
    saved = dict(payload["model_config"])
    if model is None:
        config = TransformerConfig(**{**saved, **runtime_overrides})
        model = Transformer(config)
    else:
        model = getattr(model, "module", model)
        if not hasattr(model, "config"):
            raise TypeError(f"model: expected a lecturekit.Transformer, got {type(model).__name__}")
        current = model.config.to_dict()
        diff = {
            k: (saved.get(k), current.get(k))
            for k in sorted(set(saved) | set(current))
            if k not in RUNTIME_FIELDS and saved.get(k) != current.get(k)
        }
        if diff:
            details = ", ".join(
                f"{k}: checkpoint {a!r} vs model {b!r}" for k, (a, b) in diff.items()
            )
            raise ValueError(f"model: configuration does not match the checkpoint ({details})")
        config = model.config
    model.load_state_dict(payload["state_dict"])
    model.to(map_location)
    model.eval()
    return Checkpoint(
        model=model,
        config=config,
        src_vocab=_vocab(payload.get("src_vocab")),
        tgt_vocab=_vocab(payload.get("tgt_vocab")),
        train_config=payload.get("train_config"),
        metadata=payload.get("metadata") or {},
        lecturekit_version=payload.get("lecturekit_version", ""),
    )


def _vocab(state: dict[str, Any] | None) -> Any:
    if state is None:
        return None
    from lecturekit.data.vocab import Vocab

    return Vocab.from_dict(state)
