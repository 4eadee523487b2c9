"""Decoding (chapter 6, slides p47-p54): greedy search, sampling, beam search, exhaustive search.

``protocol`` (the incremental-decoder protocol every strategy runs on, and the adapter for a
``Transformer``), ``table`` (``TableDecoder``, a model written as a probability table),
``search`` (the strategies and their result type).
Names resolve lazily; every module's ``__all__`` is available here.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.decoding import beam as beam
    from lecturekit.decoding import protocol as protocol
    from lecturekit.decoding import search as search
    from lecturekit.decoding import table as table
    from lecturekit.decoding.beam import Hypothesis as Hypothesis
    from lecturekit.decoding.beam import beam_search as beam_search
    from lecturekit.decoding.beam import beam_step as beam_step
    from lecturekit.decoding.beam import exhaustive_search as exhaustive_search
    from lecturekit.decoding.beam import length_penalty as length_penalty
    from lecturekit.decoding.protocol import IncrementalDecoder as IncrementalDecoder
    from lecturekit.decoding.protocol import TransformerDecoder as TransformerDecoder
    from lecturekit.decoding.protocol import as_decoder as as_decoder
    from lecturekit.decoding.search import Decoded as Decoded
    from lecturekit.decoding.search import filter_logits as filter_logits
    from lecturekit.decoding.search import greedy as greedy
    from lecturekit.decoding.search import sample as sample
    from lecturekit.decoding.search import sequence_log_prob as sequence_log_prob
    from lecturekit.decoding.table import TableDecoder as TableDecoder
else:
    __getattr__, __dir__ = attach(__name__)
