"""When randomness is a feature (p54): counted language models to decode with the book's code.

The lecture's p54 argues that for tasks with many equally good outputs (story writing,
dialogue, speech synthesis) always taking the most probable token can be worse than sampling.
The chapter looks at it on the smallest models that show what happens:

* :func:`bigram_table` counts a bigram model (the next word depends on the last word only)
  from a few sentences and writes it as the table a
  :class:`lecturekit.decoding.TableDecoder` takes, for every prefix reachable in ``max_len``
  steps, so the book's own :func:`~lecturekit.decoding.greedy`,
  :func:`~lecturekit.decoding.sample` and :func:`~lecturekit.decoding.beam_search` decode it.
* :func:`prefix_table` counts the model that sees the whole prefix (``P(next | prefix)`` from
  the sentences that start with that prefix), the control that separates the bigram model's
  one-word memory from the task having many right answers.
* :func:`repeated_bigram_rate` measures how repetitive an output is.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import pairwise

from lecturekit._common import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, check_int

__all__ = ["bigram_table", "prefix_table", "repeated_bigram_rate"]

# the special tokens as the tables write them: "<pad>", "<bos>", "<eos>"
PAD, BOS, EOS = (SPECIAL_TOKENS[i] for i in (PAD_ID, BOS_ID, EOS_ID))


def bigram_table(
    sentences: Sequence[Sequence[str]], max_len: int, max_prefixes: int = 10_000
) -> dict[tuple[str, ...], dict[str, float]]:
    """The maximum-likelihood bigram model of ``sentences`` as a prefix table.

    ``P(next | prefix)`` is the count of the pair (last word of the prefix, next) divided by
    the count of the last word, with ``<bos>`` before and ``<eos>`` after every sentence.

    Args:
        sentences: the training sentences, each a non-empty sequence of words (strings).
        max_len: decoding length the table must cover: it lists every prefix of at most
            ``max_len - 1`` words that the model can produce.
        max_prefixes: refuse to build a table with more prefixes than this.

    Returns:
        ``{prefix tuple: {word or "<eos>": probability}}``, ready for ``TableDecoder``.
    """
    check_int("max_len", max_len, minimum=1)
    check_int("max_prefixes", max_prefixes, minimum=1)
    _check_sentences(sentences)
    pairs: dict[str, Counter[str]] = defaultdict(Counter)
    for sentence in sentences:
        words = [BOS, *sentence, EOS]
        for a, b in pairwise(words):
            pairs[a][b] += 1
    model = {a: {b: n / sum(c.values()) for b, n in c.items()} for a, c in pairs.items()}
    table: dict[tuple[str, ...], dict[str, float]] = {}
    frontier: list[tuple[str, ...]] = [()]
    for _ in range(max_len):
        grown = []
        for prefix in frontier:
            table[prefix] = model[prefix[-1] if prefix else BOS]
            grown += [(*prefix, w) for w in table[prefix] if w != EOS]
        if len(table) + len(grown) > max_prefixes:
            raise ValueError(f"the table would exceed max_prefixes={max_prefixes} prefixes")
        frontier = grown
    return table


def prefix_table(sentences: Sequence[Sequence[str]]) -> dict[tuple[str, ...], dict[str, float]]:
    """The maximum-likelihood model that conditions on the whole prefix, as a prefix table.

    ``P(next | prefix)`` is the number of sentences that continue ``prefix`` with ``next``
    divided by the number of sentences that start with ``prefix`` (``"<eos>"`` after a whole
    sentence). Every prefix such a model can produce is a prefix of a training sentence, so
    the table lists them all.

    Args:
        sentences: the training sentences, each a non-empty sequence of words (strings).

    Returns:
        ``{prefix tuple: {word or "<eos>": probability}}``, ready for ``TableDecoder``.
    """
    _check_sentences(sentences)
    counts: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for sentence in sentences:
        words = [*sentence, EOS]
        for i, word in enumerate(words):
            counts[tuple(words[:i])][word] += 1
    return {p: {w: n / sum(c.values()) for w, n in c.items()} for p, c in counts.items()}


def _check_sentences(sentences: Sequence[Sequence[str]]) -> None:
    if not sentences or any(len(s) == 0 for s in sentences):
        raise ValueError("sentences must be a non-empty list of non-empty word sequences")
    if any(not isinstance(w, str) or w in {EOS, BOS, PAD} for s in sentences for w in s):
        raise ValueError("sentences must hold words (strings) other than <bos>, <eos>, <pad>")


def repeated_bigram_rate(words: Sequence[str]) -> float:
    """Share of the word pairs of an output that repeat an earlier pair (0 = no repetition).

    ``1 - distinct pairs / pairs``; an output with fewer than two words has no pairs and
    a rate of 0.
    """
    pairs = list(pairwise(words))
    return 0.0 if not pairs else 1.0 - len(set(pairs)) / len(pairs)
