"""Offline toy data: vocabularies, BPE, generated tasks and batching.

Names are resolved lazily so that ``lecturekit.data.make_task`` works without importing torch;
only the batching helpers need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "PAD_ID": "lecturekit.data.vocab",
    "BOS_ID": "lecturekit.data.vocab",
    "EOS_ID": "lecturekit.data.vocab",
    "UNK_ID": "lecturekit.data.vocab",
    "SPECIAL_TOKENS": "lecturekit.data.vocab",
    "Vocab": "lecturekit.data.vocab",
    "CharVocab": "lecturekit.data.vocab",
    "BPE": "lecturekit.data.bpe",
    "WordVocab": "lecturekit.data.vocab",
    "TASKS": "lecturekit.data.tasks",
    "TaskData": "lecturekit.data.tasks",
    "make_task": "lecturekit.data.tasks",
    "list_tasks": "lecturekit.data.tasks",
    "number_to_chinese": "lecturekit.data.tasks",
    "Batch": "lecturekit.data.batching",
    "collate": "lecturekit.data.batching",
    "pad_sequences": "lecturekit.data.batching",
    "BucketBatchSampler": "lecturekit.data.batching",
    "make_loader": "lecturekit.data.batching",
}

__all__ = [
    "BPE",
    "BOS_ID",
    "Batch",
    "BucketBatchSampler",
    "CharVocab",
    "EOS_ID",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "TASKS",
    "TaskData",
    "UNK_ID",
    "Vocab",
    "WordVocab",
    "collate",
    "list_tasks",
    "make_loader",
    "make_task",
    "number_to_chinese",
    "pad_sequences",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lecturekit.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | {"vocab", "bpe", "tasks", "batching"})


if TYPE_CHECKING:  # pragma: no cover - static analysers only
    from lecturekit.data.batching import (
        Batch,
        BucketBatchSampler,
        collate,
        make_loader,
        pad_sequences,
    )
    from lecturekit.data.bpe import BPE
    from lecturekit.data.tasks import TASKS, TaskData, list_tasks, make_task, number_to_chinese
    from lecturekit.data.vocab import (
        BOS_ID,
        EOS_ID,
        PAD_ID,
        SPECIAL_TOKENS,
        UNK_ID,
        CharVocab,
        Vocab,
        WordVocab,
    )
