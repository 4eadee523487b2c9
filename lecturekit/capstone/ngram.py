"""The sentence-level input method's n-gram engines and its metrics.

A clause's pinyin ``s_1 ... s_n`` is turned into characters ``c_1 ... c_n`` by an HMM: hidden
states are characters, observations syllables, and the best clause maximises

    log P_LM(c_1 ... c_n </s>) + sum_i log P(s_i | c_i),

where ``P_LM`` is a character n-gram model and ``P(s | c)`` the share of ``c``'s training
occurrences read ``s``. Everything is estimated from the same training clauses:

- :class:`~lecturekit.capstone.kneser_ney.KneserNeyLM` (its own module): interpolated
  Kneser-Ney of order 1 to 3 (order 1 with discount 0 is the maximum-likelihood unigram, so
  the "unigram engine" picks each syllable's most frequent character);
- :class:`NgramIME`: the decoder, a Viterbi search over the characters seen with each syllable
  that keeps the ``k`` best paths per state (the state is the last ``order - 1`` characters),
  optionally pruned to a beam; exact for orders 1-2 and for order 3 without a beam. Clauses
  of equal length are searched together, one numpy pass per step for all of them;
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
from lecturekit.capstone.kneser_ney import BOS, EOS, KneserNeyLM, _encode, _ranks
from lecturekit.capstone.pinyin_input import (
    check_k,
    check_pairs,
    length_batches,
    normalize_pinyin,
    read_pinyins,
)
from lecturekit.training.metrics import edit_distance

__all__ = [
    "NgramIME",
    "ClauseScores",
    "sentence_scores",
    "bootstrap_interval",
    "evaluate_clauses",
    "UNKNOWN_CHAR",
]

UNKNOWN_CHAR = "□"  # written for a syllable that no training character was read as
PATHS_PER_SEARCH = 8192  # NgramIME searches clauses together up to this many kept paths
MAX_RESAMPLES = 100_000  # bootstrap draws: n_resamples x clauses indices are held at once


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
        # the most characters one syllable may be: it bounds the paths an exact search keeps
        self._widest = max(len(ids) for ids, _ in self.emission.values())
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
            self._row_memo.clear()  # the memoised log-probabilities belong to the old discount

    def candidates(
        self,
        pinyins: Sequence[str],
        k: int,
        bonuses: Sequence[np.ndarray | None] | None = None,
    ) -> list[list[str]]:
        """For each pinyin clause its ``k`` best character strings, best first (at most
        ``max_candidates``; the input is read by :func:`~lecturekit.capstone.pinyin_input
        .read_pinyins`: a piece that is not a pinyin syllable is refused). ``bonuses``: one
        array per clause (or None), as :meth:`scored`'s ``bonus``."""
        check_k(k, self.max_candidates)
        rows = read_pinyins(pinyins, self.emission)
        if bonuses is not None and len(bonuses) != len(rows):
            raise ValueError(
                f"bonuses must hold one array (or None) per clause: {len(rows)}, got {len(bonuses)}"
            )
        return [[text for text, _ in found] for found in self._scored(rows, k, bonuses)]

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
        return self._scored([normalize_pinyin(pinyin, self.emission)], k, [bonus])[0]

    def _steps(self, syllables: list[str], bonus: np.ndarray | None) -> list[tuple | None]:
        """Per syllable (character ids, log emission plus ``bonus``), None where unseen."""
        steps = [self.emission.get(s) for s in syllables]
        if bonus is None:
            return steps
        bonus = np.asarray(bonus, dtype=np.float64)
        bad = np.isnan(bonus).any() or np.isposinf(bonus).any()
        if bad or bonus.shape != (len(steps), len(self.itos)):
            raise ValueError(
                f"bonus must be an array of shape (syllables, characters) = "
                f"{(len(steps), len(self.itos))} without NaN or +inf, got {bonus.shape}"
            )
        return [
            None if step is None else (step[0], step[1] + bonus[t, step[0]])
            for t, step in enumerate(steps)
        ]

    def _scored(
        self, rows: list[list[str]], k: int, bonuses: Sequence[np.ndarray | None] | None
    ) -> list[list[tuple[str, float]]]:
        """:meth:`scored` of checked, normalised clauses ``rows (N,)``: the clauses with the
        same number of known syllables are searched together, as many at a time as keep the
        paths of one search under :data:`PATHS_PER_SEARCH`."""
        steps = [
            self._steps(row, None if bonuses is None else bonuses[i]) for i, row in enumerate(rows)
        ]
        known = [[step for step in clause if step is not None] for clause in steps]
        out: list[list[tuple[str, float]]] = [[(UNKNOWN_CHAR * len(s), 0.0)] for s in steps]
        # a search keeps at most beam paths per clause, or k per state (states: characters
        # of the last max(order - 1, 1) syllables)
        paths = self.beam or k * self._widest ** max(self.order - 1, 1)
        per_search = max(1, PATHS_PER_SEARCH // paths)
        for chunk in length_batches([len(clause) for clause in known], per_search):
            if known[chunk[0]]:  # clauses without a known syllable keep UNKNOWN_CHAR
                for i, found in zip(chunk, self._search([known[i] for i in chunk], k), strict=True):
                    out[i] = [(self._text(steps[i], path), score) for path, score in found]
        return out

    def _text(self, steps: list[tuple | None], path: list[int]) -> str:
        chars = iter(self.itos[i] for i in path)
        return "".join(UNKNOWN_CHAR if step is None else next(chars) for step in steps)

    def _log_probs(self, states: np.ndarray, ids: list[np.ndarray]) -> list[np.ndarray]:
        """``log P_LM(ids[i] | states[i])`` per row, each ``(len(ids[i]),)``, memoised: a state
        (the last ``order - 1`` characters) and a syllable's characters recur in other
        clauses and in every search over the same clauses (with another ``k`` or another
        bonus). The missing rows are computed in one :meth:`KneserNeyLM.pair_prob` call, whose
        entries do not depend on each other, so a memoised row equals a fresh one."""
        keys = [(row.tobytes(), new.tobytes()) for row, new in zip(states, ids, strict=True)]
        rows = [self._row_memo.get(key) for key in keys]
        missing = [i for i, row in enumerate(rows) if row is None]
        if missing:
            if len(self._row_memo) >= 1_000_000:  # 0.7 KB each: a weight grid's rows fit
                self._row_memo.clear()
            widths = [len(ids[i]) for i in missing]
            new = np.concatenate([ids[i] for i in missing])
            logp = np.log(self.lm.pair_prob(np.repeat(states[missing], widths, axis=0), new))
            ends = np.cumsum(widths).tolist()
            for i, start, end in zip(missing, [0, *ends[:-1]], ends, strict=True):
                rows[i] = self._row_memo[keys[i]] = logp[start:end]
        return rows

    def _search(self, clauses: list[list[tuple[np.ndarray, ...]]], k: int) -> list[list]:
        """k-best Viterbi over clauses of equal length at once: ``clauses (N,)``, each a list of
        per-syllable (ids, log emission) -> per clause its ``(id path, score)``, best first.

        The kept paths of all clauses sit in one array, clause by clause. Per step each path
        is extended by every character of its clause's syllable (one entry per (path,
        character), :meth:`_extend`); entries that reach the same (clause, state) are
        recombined, ``k`` kept per state (the state is the last ``order - 1`` ids); then, with
        a beam, each clause keeps its best ``beam``, best first. Ties keep the earlier entry.
        """
        vocab = self.lm.vocab_size
        history = np.full((len(clauses), self.order - 1), BOS, dtype=np.int64)  # (M, order - 1)
        owner, scores = np.arange(len(clauses)), np.zeros(len(clauses))  # (M,) each
        backs = []  # per step: (parent index (M,), id (M,))
        for t in range(len(clauses[0])):
            parent, new, cand = self._extend(history, owner, scores, [c[t] for c in clauses])
            # an entry's new state: (its clause, the parent's state without its oldest id, new)
            state = (
                owner[parent] * vocab ** max(self.order - 2, 0)
                + _encode(history[parent, 1:], vocab)
            ) * vocab + new
            keep = np.sort(_first_per_group(state, cand, k))  # back in entry order
            if self.beam is not None:  # each clause's best beam, best first
                keep = keep[_first_per_group(owner[parent[keep]], cand[keep], self.beam)]
            history = np.concatenate([history[parent[keep]], new[keep, None]], axis=1)[:, 1:]
            owner, scores = owner[parent[keep]], cand[keep]
            backs.append((parent[keep], new[keep]))
        scores = scores + np.log(self.lm.pair_prob(history, np.full(len(owner), EOS)))
        best = _first_per_group(owner, scores, k)  # each clause's k best, best first
        paths = np.zeros((len(best), len(backs)), dtype=np.int64)
        m = best
        for t in range(len(backs) - 1, -1, -1):
            paths[:, t] = backs[t][1][m]
            m = backs[t][0][m]
        found: list[list] = [[] for _ in clauses]
        for b, path, score in zip(
            owner[best].tolist(), paths.tolist(), scores[best].tolist(), strict=True
        ):
            found[b].append((path, score))
        return found

    def _extend(
        self, history: np.ndarray, owner: np.ndarray, scores: np.ndarray, steps: list[tuple]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step of :meth:`_search`: kept paths ``history (M, order - 1)``, their clause
        ``owner (M,)`` (ascending) and ``scores (M,)``, and each clause's (ids, log emission)
        -> the entries' parent path, new id and score, each ``(E,)``, path by path.

        With a beam, entries that cannot survive it are dropped first: the entries of one
        path lead to distinct states, so if a clause's first path has ``beam`` entries at or
        above some score, ``beam`` kept entries are, and every entry below that is cut."""
        ids = [ids for ids, _ in steps]
        width = np.array([len(i) for i in ids])  # (N,) characters of each clause's syllable
        # the LM depends on (state, syllable), not on the path: each pair is scored once
        index = {key: n for n, key in enumerate(dict.fromkeys(map(id, ids)))}
        syllable = np.array([index[id(i)] for i in ids])  # (N,) same syllable, same number
        pair = _encode(history, self.lm.vocab_size) * len(index) + syllable[owner]  # (M,)
        _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
        rows = self._log_probs(history[first], [ids[owner[m]] for m in first])
        row_start = np.cumsum([len(r) for r in rows]) - [len(r) for r in rows]
        parent = np.repeat(np.arange(len(owner)), width[owner])  # (E,) each entry's path
        col = _ranks(width[owner])  # (E,) its character within the syllable
        at = (np.cumsum(width) - width)[owner[parent]] + col  # into the concatenated characters
        logp = np.concatenate(rows)[row_start[inverse.reshape(-1)[parent]] + col]
        cand = scores[parent] + logp + np.concatenate([emit for _, emit in steps])[at]
        if self.beam is not None and self.beam < width.max():
            lead = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])  # (N,) first paths
            starts = np.cumsum(width[owner]) - width[owner]  # (M,) each path's first entry
            padded = np.full((len(width), width.max()), -np.inf)  # (N, C) first paths' entries
            rows_of, cols_of = np.repeat(np.arange(len(width)), width), _ranks(width)
            padded[rows_of, cols_of] = cand[starts[lead][rows_of] + cols_of]
            floor = -np.partition(-padded, self.beam - 1, axis=1)[:, self.beam - 1]  # (N,)
            alive = cand >= floor[owner[parent]]
            parent, at, cand = parent[alive], at[alive], cand[alive]
        return parent, np.concatenate(ids)[at], cand


def _first_per_group(groups: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best ``scores`` of every value of ``groups`` (both ``(E,)``),
    group by group (in ascending group order), best first; ties keep the lower index."""
    order = np.argsort(-scores, kind="stable")  # best first; ties keep the lower index
    order = order[np.argsort(groups[order], kind="stable")]  # group by group, still best first
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return order[rank < k]


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
