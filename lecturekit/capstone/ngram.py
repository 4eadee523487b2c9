"""The sentence-level input method's n-gram engines and its metrics.

A clause's pinyin ``s_1 ... s_n`` is turned into characters ``c_1 ... c_n`` by an HMM: hidden
states are characters, observations syllables, and the best clause maximises

    log P_LM(c_1 ... c_n </s>) + sum_i log P(s_i | c_i),

where ``P_LM`` is a character n-gram model and ``P(s | c)`` the share of ``c``'s training
occurrences read ``s``. Everything is estimated from the same training clauses:

- :class:`KneserNeyLM`: interpolated Kneser-Ney of order 1 to 3 (order 1 with discount 0 is the
  maximum-likelihood unigram, so the "unigram engine" picks each syllable's most frequent
  character);
- :class:`NgramIME`: the decoder, a Viterbi search over the characters seen with each syllable
  that keeps the ``k`` best paths per state (the state is the last ``order - 1`` characters),
  optionally pruned to a beam; exact for orders 1-2 and for order 3 without a beam;
- metrics over clauses: :func:`sentence_scores` (character error rate, exact match, top-k
  match, per clause), :func:`bootstrap_interval` (seeded 95 % intervals) and
  :func:`evaluate_clauses`, which times a system and summarises all three.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lecturekit._common import check_int, check_number
from lecturekit.capstone.pinyin_input import check_k, check_pairs, normalize_pinyin, read_pinyins
from lecturekit.training.metrics import edit_distance

__all__ = [
    "KneserNeyLM",
    "NgramIME",
    "ClauseScores",
    "sentence_scores",
    "bootstrap_interval",
    "evaluate_clauses",
    "UNKNOWN_CHAR",
]

BOS, EOS = 0, 1  # ids of the sentence start and end in every KneserNeyLM
UNKNOWN_CHAR = "□"  # written for a syllable that no training character was read as
MAX_RESAMPLES = 100_000  # bootstrap draws: n_resamples x clauses indices are held at once


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
        p = np.full((1, len(new)), 1.0 / (self.vocab_size - 1))  # broadcast over histories
        d = self.discount
        for k, (keys, values, ctx_keys, ctx_stats) in enumerate(self.levels, start=1):
            # the unigram level has one (empty) context for every history: computed once
            rows = history[:1, :0] if k == 1 else history[:, self.order - k :]
            ctx = _encode(rows, self.vocab_size)  # (M,), (1,) for the unigram level
            total, kinds = _lookup(ctx_keys, ctx_stats, ctx).T[:, :, None]  # (M, 1) each
            count = _lookup(keys, values, ctx[:, None] * self.vocab_size + new[None, :])
            safe = np.maximum(total, 1.0)
            p = np.where(total > 0, (np.maximum(count - d, 0.0) + d * kinds * p) / safe, p)
        return np.broadcast_to(p, (len(history), len(new))).copy()


class NgramIME:
    """An HMM input method: a :class:`KneserNeyLM` over characters, the emission
    ``P(syllable | character)``, and a k-best Viterbi search restricted to the characters seen
    with each syllable.

    ``pairs``: training ``(pinyin, text)`` clauses; ``order``: 1 (unigram: each syllable's
    most frequent character), 2 (bigram HMM) or 3 (trigram HMM); ``discount``: the
    Kneser-Ney discount (order 1 ignores it and uses 0); ``beam``: the most paths kept
    after each step (None: all, exact). ``max_candidates``: the largest ``k`` one call may ask
    for (1,000; 100 for the exact trigram search, whose memory grows with ``k``).
    """

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        order: int,
        discount: float = 0.75,
        beam: int | None = None,
    ) -> None:
        check_int("order", order, 1, 3)
        check_int("beam", beam, 1, optional=True)
        check_pairs(pairs)
        chars = sorted({c for _, text in pairs for c in text})
        self.itos = ["<s>", "</s>", *chars]
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.order, self.beam = order, beam
        self.name = {1: "unigram", 2: "bigram HMM", 3: "trigram HMM"}[order]
        # the exact trigram search keeps k paths per pair of characters: its memory grows as
        # k x characters^2 per step (k = 100: about 0.5 GB on the most ambiguous clauses)
        self.max_candidates = 100 if order == 3 and beam is None else 1_000
        self.lm = KneserNeyLM(
            [[self.stoi[c] for c in text] for _, text in pairs],
            len(self.itos),
            order,
            0.0 if order == 1 else discount,
        )
        self.emission = self._emission(pairs)
        self._memo: dict[tuple[bytes, bytes], np.ndarray] = {}
        self._row_memo: dict[tuple[bytes, bytes], np.ndarray] = {}

    def _emission(self, pairs: Sequence[tuple[str, str]]) -> dict[str, tuple[np.ndarray, ...]]:
        """syllable -> (character ids ``(C,)``, log P(syllable | character) ``(C,)``), the
        syllables in the order they are first seen."""
        index: dict[str, int] = {}
        syllables = np.array(  # one syllable per character: check_pairs
            [index.setdefault(s, len(index)) for s in " ".join(p for p, _ in pairs).split()]
        )
        chars = np.array([self.stoi[c] for _, text in pairs for c in text])
        keys, together = np.unique(syllables * len(self.itos) + chars, return_counts=True)
        per_char = np.bincount(chars, minlength=len(self.itos))
        ids = keys % len(self.itos)
        logp = np.log(together / per_char[ids])
        bounds = np.searchsorted(keys // len(self.itos), np.arange(len(index) + 1))
        return {
            s: (ids[bounds[i] : bounds[i + 1]], logp[bounds[i] : bounds[i + 1]])
            for s, i in index.items()
        }

    def set_discount(self, discount: float) -> None:
        """Use Kneser-Ney discount ``discount`` from now on (no re-estimation: the counts
        stay; order 1 keeps 0)."""
        check_number("discount", discount, 0, 1, exclusive=("maximum",))
        if self.order > 1:
            self.lm.discount = float(discount)
            self._memo.clear()  # the memoised log-probabilities belong to the old discount
            self._row_memo.clear()

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        """For each pinyin clause its ``k`` best character strings, best first (at most
        ``max_candidates``; the input is read by :func:`~lecturekit.capstone.pinyin_input
        .read_pinyins`: a piece that is not a pinyin syllable is refused)."""
        check_k(k, self.max_candidates)
        rows = read_pinyins(pinyins, self.emission)
        return [[text for text, _ in self._scored(s, k)] for s in rows]

    def scored(
        self, pinyin: str, k: int = 1, bonus: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(text, log score)`` for one clause, best first (``k`` at most
        ``max_candidates``); a pinyin syllable never seen in training is written
        :data:`UNKNOWN_CHAR` (and scores nothing), a piece that is not a pinyin syllable is
        refused (:func:`~lecturekit.capstone.pinyin_input.normalize_pinyin`).

        ``bonus`` ``(T, len(itos))``, one row per syllable: a log-score added to each
        character's emission at that syllable (another model's opinion, as
        :class:`~lecturekit.capstone.tagger.FusedIME` gives it); None adds
        nothing. The search stays exact in the same way: the bonus depends on the position
        and the character, not on the path."""
        check_k(k, self.max_candidates)
        return self._scored(normalize_pinyin(pinyin, self.emission), k, bonus)

    def _scored(
        self, syllables: list[str], k: int, bonus: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """:meth:`scored` of checked, normalised ``syllables``."""
        steps = [self.emission.get(s) for s in syllables]
        if bonus is not None:
            bonus = np.asarray(bonus, dtype=np.float64)
            bad = np.isnan(bonus).any() or np.isposinf(bonus).any()
            if bad or bonus.shape != (len(steps), len(self.itos)):
                raise ValueError(
                    f"bonus must be an array of shape (syllables, characters) = "
                    f"{(len(steps), len(self.itos))} without NaN or +inf, got {bonus.shape}"
                )
            steps = [
                None if step is None else (step[0], step[1] + bonus[t, step[0]])
                for t, step in enumerate(steps)
            ]
        known = [step for step in steps if step is not None]
        if not known:
            return [(UNKNOWN_CHAR * len(steps), 0.0)]
        paths, scores = self._search(known, k)
        out = []
        for row, score in zip(paths, scores, strict=True):
            chars = iter(self.itos[i] for i in row)
            text = "".join(UNKNOWN_CHAR if step is None else next(chars) for step in steps)
            out.append((text, float(score)))
        return out

    def _log_prob(self, states: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """``log P_LM(ids | states)`` ``(S, C)``, memoised twice: whole tables (for the bigram
        the states of a step are the characters of the previous syllable, so syllable pairs
        repeat) and single rows (a trigram state, two characters, recurs in other clauses
        and in every search over the same clauses: with another ``k`` or another bonus).
        ``prob`` is computed row by row, so a memoised row equals a freshly computed one."""
        key = (states.tobytes(), ids.tobytes())
        table = self._memo.get(key)
        if table is None:
            if len(self._memo) >= 4096:  # about 4096 x 30 KB at most
                self._memo.clear()
            table = self._memo[key] = self._rows(states, ids)
        return table

    def _rows(self, states: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """``log P_LM(ids | states)`` ``(S, C)`` from the row memo, computing the missing rows
        in one call."""
        new = ids.tobytes()
        keys = [(row.tobytes(), new) for row in states]
        rows = [self._row_memo.get(key) for key in keys]
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            if len(self._row_memo) >= 1_000_000:  # 0.7 KB each: a weight grid's rows fit
                self._row_memo.clear()
            computed = np.log(self.lm.prob(states[missing], ids))  # (len(missing), C)
            for i, row in zip(missing, computed, strict=True):
                rows[i] = self._row_memo[keys[i]] = row
        return np.stack(rows)

    def _search(self, steps: list[tuple[np.ndarray, ...]], k: int) -> tuple[list, np.ndarray]:
        """k-best Viterbi: ``steps`` of (ids, log emission) -> (id paths, scores), best first.

        Paths ending in the same state (last ``order - 1`` ids) are recombined, ``k`` kept
        per state; then, with a beam, the best ``beam`` overall.
        """
        history = np.full((1, self.order - 1), BOS, dtype=np.int64)  # (M, order - 1)
        scores = np.zeros(1)
        backs = []  # per step: (parent index (M,), id (M,))
        for ids, emit in steps:
            # the LM depends on the state, not the path: score each distinct state once
            # (keys sort as the rows do: the distinct states in the same order)
            _, first, inverse = np.unique(
                _encode(history, self.lm.vocab_size), return_index=True, return_inverse=True
            )
            logp = self._log_prob(history[first], ids)[inverse]  # (M, C)
            cand = scores[:, None] + logp + emit[None, :]  # (M, C)
            # a new state is (the parent's state without its oldest id, the new id)
            kept_part = _encode(history[:, 1:], self.lm.vocab_size)  # (M,)
            keep = _best_per_state(kept_part, cand, k)  # flat indices into cand
            if self.beam is not None and len(keep) > self.beam:
                keep = keep[np.argsort(-cand.ravel()[keep], kind="stable")[: self.beam]]
            parent, col = np.divmod(keep, len(ids))
            history = np.concatenate([history[parent], ids[col][:, None]], axis=1)[:, 1:]
            scores = cand.ravel()[keep]
            backs.append((parent, ids[col]))
        scores = scores + np.log(self.lm.prob(history, np.array([EOS])))[:, 0]
        best = np.argsort(-scores, kind="stable")[:k]
        paths = []
        for end in best.tolist():
            row, m = [], end
            for parent, chosen in reversed(backs):
                row.append(int(chosen[m]))
                m = int(parent[m])
            paths.append(row[::-1])
        return paths, scores[best]


def _best_per_state(groups: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
    """Flat indices into ``cand (M, C)`` of the ``k`` best entries of every new state, sorted.

    Entry ``(m, c)`` leads to the state ``(groups[m], c)``: parents of one group are laid
    out in a ``(G, P, C)`` array padded with -inf, and the ``k`` best along ``P`` are kept.
    """
    _, inverse = np.unique(groups, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.bincount(inverse)
    order = np.argsort(inverse, kind="stable")  # parents grouped
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    position = np.arange(len(order)) - starts[inverse[order]]
    padded = np.full((len(counts), counts.max(), cand.shape[1]), -np.inf)  # (G, P, C)
    padded[inverse[order], position] = cand[order]
    if padded.shape[1] > k:
        top = np.argpartition(-padded, k - 1, axis=1)[:, :k]  # (G, k, C)
    else:
        top = np.broadcast_to(np.arange(padded.shape[1])[None, :, None], padded.shape)
    group = np.arange(len(counts))[:, None, None]
    valid = top < counts[group]  # drop the padding
    parent = order[np.minimum(starts[group] + top, len(order) - 1)]
    flat = parent * cand.shape[1] + np.arange(cand.shape[1])[None, None, :]
    return np.sort(flat[valid])


# ---------------------------------------------------------------------------------------------
# Metrics over clauses
# ---------------------------------------------------------------------------------------------


def sentence_scores(
    candidates: Sequence[Sequence[str]], references: Sequence[str], k: int = 5
) -> dict[str, np.ndarray]:
    """Per clause: ``"edits"`` (edit distance of the first candidate to the reference; no
    candidate counts as deleting every character), ``"chars"`` (reference length),
    ``"exact"`` (first candidate equals the reference) and ``"topk"`` (the reference is among
    the first ``k``), each an array ``(N,)``. CER = ``edits.sum() / chars.sum()``."""
    check_int("k", k, 1)
    for row in candidates:
        if not isinstance(row, (list, tuple)) or not all(isinstance(t, str) for t in row):
            raise TypeError(
                f"candidates must hold one list of candidate strings per clause (best first), "
                f"got {row!r:.80}"
            )
    if len(candidates) != len(references):
        raise ValueError(
            f"candidates and references must have the same length, got "
            f"{len(candidates)} and {len(references)}"
        )
    first = [c[0] if c else "" for c in candidates]
    return {
        "edits": np.array([edit_distance(p, r) for p, r in zip(first, references, strict=True)]),
        "chars": np.array([len(r) for r in references]),
        "exact": np.array([p == r for p, r in zip(first, references, strict=True)], dtype=float),
        "topk": np.array(
            [r in c[:k] for c, r in zip(candidates, references, strict=True)], dtype=float
        ),
    }


def bootstrap_interval(
    numerator: np.ndarray,
    denominator: np.ndarray | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of ``sum(numerator) / sum(denominator)`` (the mean when
    ``denominator`` is None) and its percentile bootstrap interval: clauses ``(N,)`` drawn
    with replacement ``n_resamples`` times (at most ``MAX_RESAMPLES``) by
    ``numpy.random.default_rng(seed)``."""
    check_int("n_resamples", n_resamples, 1, MAX_RESAMPLES)
    check_number("level", level, 0, 1, exclusive=("minimum", "maximum"))
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.ones_like(numerator) if denominator is None else np.asarray(denominator)
    if numerator.ndim != 1 or numerator.shape != denominator.shape or len(numerator) == 0:
        raise ValueError(
            f"numerator and denominator must be equal non-empty 1-d arrays, got shapes "
            f"{numerator.shape} and {denominator.shape}"
        )
    if not (np.isfinite(numerator).all() and np.isfinite(denominator).all()):
        raise ValueError("numerator and denominator must hold finite numbers (no NaN or inf)")
    if (denominator < 0).any() or denominator.sum() == 0:
        raise ValueError(
            "denominator must be >= 0 with a positive sum (e.g. reference lengths: clauses "
            f"with no characters have no error rate), got a sum of {denominator.sum()}"
        )
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(numerator), size=(n_resamples, len(numerator)))
    totals = denominator[draws].sum(axis=1)
    if (totals == 0).any():  # a resample of zero-denominator items only: no ratio exists
        raise ValueError("denominator: too many zeros; leave out the items whose denominator is 0")
    ratios = numerator[draws].sum(axis=1) / totals
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(numerator.sum() / denominator.sum()), float(low), float(high)


@dataclass(frozen=True)
class ClauseScores:
    """A system on ``n`` clauses: ``cer``, ``exact``, ``topk`` as ``(estimate, low, high)``
    (95 % bootstrap intervals) and ``ms_per_clause`` (wall time of its decoding)."""

    cer: tuple[float, float, float]
    exact: tuple[float, float, float]
    topk: tuple[float, float, float]
    k: int
    n: int
    ms_per_clause: float

    def row(self, name: str) -> str:
        """One table row: ``name  CER [low, high]  exact [...]  top-k [...]  ms``."""
        cells = [f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in (self.cer, self.exact, self.topk)]
        return f"{name:22s} " + "  ".join(cells) + f"  {self.ms_per_clause:7.2f}"


def evaluate_clauses(
    decode: Callable[[list[str], int], list[list[str]]],
    pairs: Sequence[tuple[str, str]],
    k: int = 5,
    seed: int = 0,
) -> ClauseScores:
    """Decode ``pairs`` (pinyin, text) with ``decode(pinyins, k)`` (e.g. a system's
    ``candidates``), time it and score it with 95 % bootstrap intervals (seeded)."""
    check_pairs(pairs)
    check_int("k", k, 1)
    start = time.perf_counter()
    answers = decode([p for p, _ in pairs], k)
    elapsed = time.perf_counter() - start
    if not isinstance(answers, (list, tuple)) or len(answers) != len(pairs):
        raise ValueError(
            f"decode must return one list of candidates per clause ({len(pairs)}), got "
            f"{answers!r:.80}"
        )
    if not all(
        isinstance(c, (list, tuple)) and all(isinstance(t, str) for t in c) for c in answers
    ):
        raise ValueError("decode must return lists of candidate strings, best first")
    s = sentence_scores(answers, [t for _, t in pairs], k)
    return ClauseScores(
        cer=bootstrap_interval(s["edits"], s["chars"], seed=seed),
        exact=bootstrap_interval(s["exact"], seed=seed),
        topk=bootstrap_interval(s["topk"], seed=seed),
        k=k,
        n=len(pairs),
        ms_per_clause=1000 * elapsed / len(pairs),
    )
