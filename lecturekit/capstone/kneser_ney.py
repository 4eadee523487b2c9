"""Interpolated Kneser-Ney character n-gram models, the language model of the capstone's HMM
input methods (:class:`~lecturekit.capstone.ngram.NgramIME`).

Grams are counted with numpy on integer keys: a gram of ids ``(a, b, c)`` is the number
``(a * V + b) * V + c`` (:func:`_encode`), sorted once, and looked up by binary search.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lecturekit._common import check_int, check_number

__all__ = ["KneserNeyLM"]

BOS, EOS = 0, 1  # ids of the sentence start and end in every KneserNeyLM


def _encode(grams: np.ndarray, base: int) -> np.ndarray:
    """``(..., m)`` token ids -> ``(...)`` int64 keys, ``sum_i ids[i] * base**(m-1-i)``."""
    keys = np.zeros(grams.shape[:-1], dtype=np.int64)
    for i in range(grams.shape[-1]):
        keys = keys * base + grams[..., i]
    return keys


def _ranks(lengths: np.ndarray) -> np.ndarray:
    """``0, 1, ..., n - 1`` for every ``n`` in ``lengths (N,)``, concatenated."""
    total = int(lengths.sum())
    return np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values (K, ...)`` at ``query``'s positions in the sorted ``keys (K,)``, shape
    ``query.shape + values.shape[1:]``; 0 where absent."""
    if len(keys) == 0:
        return np.zeros(query.shape + values.shape[1:])
    idx = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    found = (keys[idx] == query).reshape(query.shape + (1,) * (values.ndim - 1))
    return np.where(found, values[idx], 0.0)


class KneserNeyLM:
    """An interpolated Kneser-Ney character n-gram model over ids (``BOS`` = 0, ``EOS`` = 1).

    ``sequences``: lists of character ids >= 2; each is padded with ``order - 1`` ``BOS`` in
    front and one ``EOS`` after. The highest order counts n-grams; each lower order counts
    how many distinct characters precede a gram (its continuation count), except for grams
    that start with ``BOS``, which keep their raw counts (they have no left context). With
    discount ``d`` (the same at every order)

        P_k(w | h) = max(c_k(h w) - d, 0) / c_k(h .) + d N_k(h .) / c_k(h .) P_{k-1}(w | h'),

    ``N_k(h .)`` the number of distinct ``w`` after ``h``; an unseen context falls back to
    ``P_{k-1}``; ``P_0`` is uniform over the ``vocab_size - 1`` predictable ids (all but BOS).
    So ``P(. | h)`` sums to 1 over those ids for every ``h``.
    """

    def __init__(
        self, sequences: Sequence[Sequence[int]], vocab_size: int, order: int, discount: float
    ) -> None:
        check_int("order", order, 1, 3)
        check_int("vocab_size", vocab_size, 3)
        check_number("discount", discount, 0, 1, exclusive=("maximum",))
        self.order, self.vocab_size, self.discount = order, vocab_size, float(discount)
        raw = self._raw_counts(sequences)  # raw[k - 1]: (sorted k-gram keys, counts)
        # levels[k - 1]: (gram keys, counts, context keys, context (totals, types) (K, 2))
        self.levels = []
        for k in range(1, order + 1):
            keys, counts = raw[k - 1] if k == order else self._continuation(raw[k - 1], raw[k], k)
            self.levels.append(self._tables(keys, counts))

    def _raw_counts(self, sequences: Sequence[Sequence[int]]) -> list[tuple[np.ndarray, ...]]:
        """Per order ``k`` (1 to ``order``): the sorted keys (:func:`_encode`) of the k-grams
        ending at every character and at ``EOS`` of the padded sequences, and their counts."""
        pad = self.order - 1
        lengths = np.array([len(seq) for seq in sequences], dtype=np.int64)  # (N,)
        flat = np.array([i for seq in sequences for i in seq], dtype=np.int64)  # (sum lengths,)
        bad = (flat < 2) | (flat >= self.vocab_size)
        if bad.any():
            first = int(np.searchsorted(np.cumsum(lengths), np.argmax(bad), side="right"))
            raise ValueError(
                f"sequences must hold ids in [2, {self.vocab_size}), got {list(sequences[first])!r}"
            )
        sizes = lengths + pad + 1  # every sequence padded (pad x BOS, ids, EOS), end to end
        starts = np.cumsum(sizes) - sizes  # (N,)
        padded = np.full(int(sizes.sum()), BOS, dtype=np.int64)
        inside = np.repeat(starts + pad, lengths) + _ranks(lengths)
        padded[inside] = flat
        padded[starts + pad + lengths] = EOS
        ends = np.repeat(starts + pad, lengths + 1) + _ranks(lengths + 1)  # grams end here
        raw = []
        for k in range(1, self.order + 1):
            grams = np.stack([padded[ends - k + 1 + i] for i in range(k)], axis=1)  # (G, k)
            keys, counts = np.unique(_encode(grams, self.vocab_size), return_counts=True)
            raw.append((keys, counts.astype(np.float64)))
        return raw

    def _continuation(
        self, grams: tuple[np.ndarray, ...], longer: tuple[np.ndarray, ...], k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sorted k-gram keys and their continuation counts (distinct (k+1)-grams a gram
        ends); a gram that starts with ``BOS`` keeps its raw count."""
        keys, counts = np.unique(longer[0] % self.vocab_size**k, return_counts=True)
        counts = counts.astype(np.float64)
        raw_keys, raw_counts = grams
        starts_bos = raw_keys < self.vocab_size ** (k - 1)  # BOS = 0 is the leading digit
        at = np.searchsorted(keys, raw_keys[starts_bos])  # every k-gram ends some (k+1)-gram
        counts[at] = raw_counts[starts_bos]
        return keys, counts

    def _tables(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
        ctx_keys, inverse = np.unique(keys // self.vocab_size, return_inverse=True)
        totals = np.bincount(inverse, weights=values)
        types = np.bincount(inverse).astype(np.float64)
        return keys, values, ctx_keys, np.stack([totals, types], axis=1)

    def prob(self, history: np.ndarray, new: np.ndarray) -> np.ndarray:
        """``P(new[j] | history[i])``: ``history (M, order - 1)`` ids, ``new (C,)`` ids ->
        ``(M, C)`` probabilities."""
        history = np.asarray(history, dtype=np.int64)
        if history.ndim != 2 or history.shape[1] != self.order - 1:
            raise ValueError(f"history must have shape (M, {self.order - 1}), got {history.shape}")
        new = np.asarray(new, dtype=np.int64)
        m, c = len(history), len(new)
        return self.pair_prob(np.repeat(history, c, axis=0), np.tile(new, m)).reshape(m, c)

    def pair_prob(self, history: np.ndarray, new: np.ndarray) -> np.ndarray:
        """``P(new[i] | history[i])`` for ``history (N, order - 1)`` and ``new (N,)`` ids (not
        checked: :meth:`prob` is the checked door), ``(N,)``; each entry is computed alone, so
        it does not depend on the others."""
        p = np.full(len(new), 1.0 / (self.vocab_size - 1))
        d = self.discount
        for k, (keys, values, ctx_keys, ctx_stats) in enumerate(self.levels, start=1):
            ctx = _encode(history[:, self.order - k :], self.vocab_size)  # (N,); 0 for k = 1
            total, kinds = _lookup(ctx_keys, ctx_stats, ctx).T  # (N,) each
            count = _lookup(keys, values, ctx * self.vocab_size + new)
            safe = np.maximum(total, 1.0)
            p = np.where(total > 0, (np.maximum(count - d, 0.0) + d * kinds * p) / safe, p)
        return p
