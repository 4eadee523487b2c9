"""What :func:`lecturekit.training.loop.fit` accepts as data, turned into batches; the
device it trains on; its progress bar."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from lecturekit.data.batching import make_loader
from lecturekit.data.vocab import BOS_ID, EOS_ID, PAD_ID
from lecturekit.training.checks import check_batch_ids, check_pair_shapes, check_pairs
from lecturekit.training.config import TrainConfig

_DATA_KINDS = "a TaskData, a list of (src ids, tgt ids) pairs or an iterable of Batch"


def as_batches(
    data: Any,
    config: TrainConfig,
    shuffle: bool,
    split: str,
    model_config: Any,
    auto: bool = False,
    tagging: bool = False,
) -> Iterable[Any] | None:
    """Accept a ``TaskData`` (its ``split``), a list of (src ids, tgt ids) pairs, or any
    re-iterable of ``Batch`` es (e.g. ``task.loader("train")``). Pairs for an encoder-only
    tagger (``tagging``) must have one target id per source id.

    Pairs are batched with the model's special ids and checked against the model first. An
    empty split is an error, except a validation split taken from the training ``TaskData``
    (``auto``), which means: no validation. A one-shot iterator of validation batches is
    read into a list, since every evaluation iterates it again.
    """
    if data is None:
        if split == "train":
            raise TypeError(f"train must be {_DATA_KINDS}, got None")
        return None
    c = model_config
    if hasattr(data, "encoded") and hasattr(data, "loader"):  # TaskData
        if (c.pad_id, c.bos_id, c.eos_id) != (PAD_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"{split}: a TaskData's vocabularies use pad_id={PAD_ID}, bos_id={BOS_ID}, "
                f"eos_id={EOS_ID}, but the model has {c.pad_id}, {c.bos_id}, {c.eos_id}; build "
                "the model with the vocabulary's special ids (the TransformerConfig defaults)"
            )
        data = data.encoded(split)
    if isinstance(data, Sequence) and not isinstance(data, str) and len(data) == 0:
        if auto:
            return None
        raise ValueError(
            f"{split} is empty; pass some examples"
            + (", or valid=None to train without validation" if split == "valid" else "")
        )
    if isinstance(data, Sequence) and isinstance(data[0], (tuple, list)):
        data = check_pair_shapes(data, split)
        check_pairs(data, split, c)
        unequal = (i for i, (s, t) in enumerate(data) if len(s) != len(t))
        if tagging and (bad := next(unequal, None)) is not None:
            raise ValueError(
                f"{split}[{bad}] has {len(data[bad][0])} source and {len(data[bad][1])} target "
                "ids; an EncoderTagger writes one target token per source token"
            )
        loader = make_loader(
            data,
            batch_size=config.batch_size,
            shuffle=shuffle,
            seed=config.seed,
            pad_id=c.pad_id,
            bos_id=c.bos_id,
            eos_id=c.eos_id,
        )
        # the validation batches never change (no shuffling): pad them once, not at every
        # evaluation
        return list(loader) if split == "valid" else loader
    if not isinstance(data, Iterable) or isinstance(data, str):
        raise TypeError(f"{split} must be {_DATA_KINDS}, got {type(data).__name__}")
    if split == "valid" and isinstance(data, Iterator):
        data = list(data)
    if split == "valid" and isinstance(data, list):  # read at every evaluation: check once
        for batch in data:
            check_batch_ids(batch, split, c)
    return data


def resolve_device(config: TrainConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device must be available, got 'cuda' with no CUDA device")
    return torch.device(config.device)


def safe_len(data: Iterable[Any]) -> int | None:
    try:
        return len(data)  # type: ignore[arg-type]
    except TypeError:
        return None


def progress_bar(total: int | None, enabled: bool, initial: int = 0) -> Any:
    """A tqdm bar of training steps (None when not ``enabled``), from step ``initial``."""
    if not enabled:
        return None
    from tqdm.auto import tqdm  # tqdm.auto reads the notebook setup: only when a bar is shown

    return tqdm(total=total, initial=initial, desc="training", unit="step", leave=True)
