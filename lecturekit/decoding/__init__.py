"""Decoding (chapter 6, slides p47-p54): greedy search, sampling, beam search, exhaustive search.

``protocol`` (the incremental-decoder protocol every strategy runs on, and the adapter for a
``Transformer``), ``table`` (``TableDecoder``, a model written as a probability table),
``search`` (the strategies and their result type).
Names resolve lazily; every module's ``__all__`` is available here.
"""

from lecturekit._lazy import attach

__getattr__, __dir__ = attach(__name__)
