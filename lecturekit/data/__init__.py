"""Offline toy data: vocabularies, BPE, generated tasks and batching.

``vocab`` (special ids, character and word vocabularies), ``bpe`` (byte-pair encoding,
appendix), ``tasks`` (the generated toy tasks), ``batching`` (padding, ``Batch``, loaders).
Names resolve lazily, so ``lecturekit.data.make_task`` works without importing torch; only
the batching helpers need it.
"""

from lecturekit._lazy import attach

__getattr__, __dir__ = attach(__name__)
