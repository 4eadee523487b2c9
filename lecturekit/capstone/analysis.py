"""The sentence-level input method's analyses: a per-syllable baseline, homophones, attention.

- :class:`SyllableUnigram`: the baseline with no context at all: every syllable independently
  takes a character by its relative frequency with that syllable in training;
- :func:`homophones` and :func:`homophone_contrast`: at the positions whose syllable is written
  with several characters, where one system is right and the other wrong, both ways, with
  the examples (:class:`HomophoneSite`);
- :func:`attention_near_diagonal`: how much of the decoder's cross-attention falls on the
  syllable a character is written for (or its neighbours), and
  :func:`near_diagonal_chance`, the same measure for uniform attention;
- :func:`candidate_bar_text`: any input method's candidate bar for typed pinyin as one line
  (:func:`check_engine`: what an input method is);
- :func:`block_subsets`: nested subsets of the training clauses, whole blocks at a time (for
  a learning curve);
- :func:`paired_cer_difference`: the CER difference of two systems on the same clauses with a
  paired (optionally cluster) bootstrap interval.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from lecturekit._common import check_int, check_number, check_type
from lecturekit.capstone.engines import TransformerIME, cross_attention_batch
from lecturekit.capstone.ngram import MAX_RESAMPLES, UNKNOWN_CHAR
from lecturekit.capstone.pinyin_input import check_k, check_pairs, length_batches, read_pinyins
from lecturekit.capstone.tagger import k_best_independent, split_syllables
from lecturekit.data.sentences import MAX_CLAUSE
from lecturekit.model.config import TransformerConfig

__all__ = [
    "SyllableUnigram",
    "homophones",
    "HomophoneSite",
    "HomophoneContrast",
    "homophone_contrast",
    "attention_near_diagonal",
    "near_diagonal_chance",
    "check_engine",
    "candidate_bar_text",
    "paired_cer_difference",
    "block_subsets",
]


def _syllables_of(pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Each clause's syllables; ``ValueError`` unless there is one syllable per character."""
    out = []
    for pinyin, text in pairs:
        syllables = pinyin.split()
        if len(syllables) != len(text):
            raise ValueError(
                f"pairs must have one syllable per character, got {pinyin!r}, {text!r}"
            )
        out.append(syllables)
    return out


def homophones(pairs: Sequence[tuple[str, str]]) -> dict[str, Counter[str]]:
    """syllable -> the characters written for it in ``pairs`` (``(pinyin, text)`` clauses,
    ``(N,)``) with their counts: ``{"shi": Counter({"是": 9, "时": 4, ...}), ...}``."""
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for syllables, (_, text) in zip(_syllables_of(pairs), pairs, strict=True):
        for s, c in zip(syllables, text, strict=True):
            table[s][c] += 1
    return dict(table)


class SyllableUnigram:
    """Each syllable on its own: ``P(c | s)`` = the share of ``s``'s training occurrences
    written ``c``; a clause's score is the product over its positions.

    ``pairs``: training ``(pinyin, text)`` clauses. ``candidates(pinyins, k)`` gives each
    clause's ``k`` most probable clauses (exact, :func:`k_best_independent`; ``k`` at most
    ``max_candidates``, 100: the merge costs ``k * k`` per syllable). A syllable never
    seen in training is written :data:`UNKNOWN_CHAR` (``□``, always wrong, scoring nothing),
    as :class:`~lecturekit.capstone.ngram.NgramIME` writes it.
    """

    name = "syllable unigram"
    max_candidates = 100  # k_best_independent merges k x k partial clauses per syllable

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        check_pairs(pairs)
        # syllable -> (characters, log P(c | s)), most frequent first, ties by character
        self.ranked: dict[str, tuple[list[str], list[float]]] = {}
        for s, counter in homophones(pairs).items():
            total = sum(counter.values())
            ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
            self.ranked[s] = ([c for c, _ in ranked], [math.log(n / total) for _, n in ranked])

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        """For each of the ``(N,)`` space-separated pinyin clauses up to ``k`` clauses, most
        probable first (fewer when the syllables allow fewer); inputs are read by
        :func:`~lecturekit.capstone.pinyin_input.read_pinyins`, as by every engine."""
        check_k(k, self.max_candidates)
        return [self._one(" ".join(s), k) for s in read_pinyins(pinyins, self.ranked)]

    def _one(self, pinyin: str, k: int) -> list[str]:
        syllables = pinyin.split()
        known = [self.ranked[s] for s in syllables if s in self.ranked]
        if not known:
            return [UNKNOWN_CHAR * len(syllables)]
        # (S, k) table of each known position's k best log-probabilities, -inf padded
        table = torch.full((len(known), k), -math.inf, dtype=torch.float64)
        for row, (_, logp) in enumerate(known):
            table[row, : min(k, len(logp))] = torch.tensor(logp[:k], dtype=torch.float64)
        out = []
        for score, cols in k_best_independent(table, k):
            if score == -math.inf:  # a padding entry: fewer than k clauses exist
                break
            picked = iter(options[c] for (options, _), c in zip(known, cols, strict=True))
            out.append(
                "".join(next(picked) if s in self.ranked else UNKNOWN_CHAR for s in syllables)
            )
        return out


@dataclass(frozen=True)
class HomophoneSite:
    """One compared position: clause ``clause`` of the pairs, character ``position`` of it,
    its ``syllable``, the reference ``text`` and the two systems' answers ``a`` and ``b``."""

    clause: int
    position: int
    syllable: str
    text: str
    a: str
    b: str

    def line(self, name_a: str = "A", name_b: str = "B") -> str:
        """``"北京欢【迎】你 (ying)  A 迎 · B 营"``: the reference with the position marked,
        then the syllable and each system's character there."""
        t, j = self.text, self.position
        marked = f"{t[:j]}【{t[j]}】{t[j + 1 :]}"
        return f"{marked} ({self.syllable})  {name_a} {self.a[j]} · {name_b} {self.b[j]}"


@dataclass(frozen=True)
class HomophoneContrast:
    """Two systems at the homophone positions of a set of clauses.

    ``positions``: the positions compared; ``a_only`` / ``b_only``: the sites where only A /
    only B wrote the reference character; ``both_wrong``: neither did (the rest, ``both_right``
    of them, both did). ``skipped_clauses``: clauses where an answer's length differs from
    the reference's, not compared; ``skipped_positions``: their homophone positions.
    """

    positions: int
    both_right: int
    a_only: list[HomophoneSite] = field(default_factory=list)
    b_only: list[HomophoneSite] = field(default_factory=list)
    both_wrong: list[HomophoneSite] = field(default_factory=list)
    skipped_clauses: int = 0
    skipped_positions: int = 0


def homophone_contrast(
    pairs: Sequence[tuple[str, str]],
    answers_a: Sequence[str],
    answers_b: Sequence[str],
    homophones: dict[str, Counter[str]],
    min_chars: int = 2,
) -> HomophoneContrast:
    """Compare two systems' top-1 clauses ``answers_a`` and ``answers_b`` (``(N,)`` strings)
    with the references of ``pairs`` (``(N,)`` ``(pinyin, text)``) at the positions whose
    syllable has at least ``min_chars`` different characters in ``homophones`` (from
    :func:`homophones` of the training clauses). Positions are aligned one to one, so a
    clause where either answer's length differs from the reference is skipped (and counted).
    """
    check_int("min_chars", min_chars, 1)
    for name, answers in (("answers_a", answers_a), ("answers_b", answers_b)):
        if isinstance(answers, str) or len(answers) != len(pairs):
            raise ValueError(
                f"{name} must be a list of {len(pairs)} strings (one per clause), got {answers!r:.80}"
            )
        for answer in answers:
            check_type(f"every item of {name}", answer, str, "a str (a system's top-1 clause)")
    sites: dict[str, list[HomophoneSite]] = {"a": [], "b": [], "none": []}
    positions = both_right = skipped_clauses = skipped_positions = 0
    for i, (syllables, (_, text)) in enumerate(zip(_syllables_of(pairs), pairs, strict=True)):
        a, b = answers_a[i], answers_b[i]
        here = [j for j, s in enumerate(syllables) if len(homophones.get(s, ())) >= min_chars]
        if len(a) != len(text) or len(b) != len(text):
            skipped_clauses += 1
            skipped_positions += len(here)
            continue
        for j in here:
            positions += 1
            right = (a[j] == text[j], b[j] == text[j])
            if right == (True, True):
                both_right += 1
                continue
            kind = {(True, False): "a", (False, True): "b", (False, False): "none"}[right]
            sites[kind].append(HomophoneSite(i, j, syllables[j], text, a, b))
    return HomophoneContrast(
        positions=positions,
        both_right=both_right,
        a_only=sites["a"],
        b_only=sites["b"],
        both_wrong=sites["none"],
        skipped_clauses=skipped_clauses,
        skipped_positions=skipped_positions,
    )


def _near_diagonal(weights: Tensor, width: int) -> Tensor:
    """``weights (L, H, T, S)`` cross-attention of a clause of ``S`` syllables (``T >= S``
    rows: row ``t < S`` writes syllable ``t``'s character, later rows, such as EOS, are left
    out) -> ``(L,)``: per layer, the mean over heads and the ``S`` rows of the mass on the
    sources ``s`` with ``|s - t| <= width``."""
    n = weights.size(-1)
    t = torch.arange(n)
    band = (t[:, None] - t[None, :]).abs() <= width  # (S, S), True = near the diagonal
    mass = (weights[:, :, :n, :] * band).sum(-1)  # (L, H, S)
    return mass.mean(dim=(1, 2))


def attention_near_diagonal(
    ime: TransformerIME,
    pairs: Sequence[tuple[str, str]],
    width: int = 0,
    *,
    layer: int | None = None,
) -> Tensor:
    """Per clause ``(N,)``: the share of the decoder's cross-attention that falls on the
    syllable being written, or within ``width`` syllables of it.

    The decoder is teacher-forced on each reference clause (:func:`cross_attention_batch`,
    the clauses of one length together); the row that writes character ``t`` (syllable
    ``t``'s) counts the weight on the source positions ``s`` with ``|s - t| <= width``; the
    EOS row is left out (it writes no syllable). The shares are averaged over the rows, the heads and, by default, the decoder
    layers: which layer lines characters up with syllables is not fixed in advance (it can
    differ between trainings), and the question is whether the model reads its own syllable
    at all. ``layer`` (0-based) measures one layer instead. Uniform attention gives
    :func:`near_diagonal_chance`.
    """
    check_type("ime", ime, TransformerIME, "a TransformerIME")
    check_int("width", width, 0)
    config = cast(TransformerConfig, ime.model.config)
    check_int("layer", layer, 0, config.n_decoder_layers - 1, optional=True)
    _syllables_of(pairs)  # one syllable per character: a length fixes both
    out = [torch.zeros(())] * len(pairs)
    for chunk in length_batches([len(text) for _, text in pairs], ime.batch_size):
        weights = cross_attention_batch(ime, [pairs[i] for i in chunk], strict=False)
        for j, i in enumerate(chunk):  # weights[:, j]: (L, H, T + 1, S)
            per_layer = _near_diagonal(weights[:, j], width)
            out[i] = per_layer.mean() if layer is None else per_layer[layer]
    return torch.stack(out) if out else torch.zeros(0)


def near_diagonal_chance(pairs: Sequence[tuple[str, str]], width: int = 0) -> Tensor:
    """:func:`attention_near_diagonal` for attention spread evenly over a clause's syllables,
    per clause ``(N,)``: the chance level (``1 / S`` at ``width = 0`` for ``S`` syllables)."""
    check_int("width", width, 0)
    out = []
    for syllables in _syllables_of(pairs):
        n = len(syllables)
        uniform = torch.full((1, 1, n + 1, n), 1.0 / n)  # (L, H, T, S), one layer and head
        out.append(_near_diagonal(uniform, width)[0])
    return torch.stack(out) if out else torch.zeros(0)


def _typed_syllables(typed: str) -> list[str]:
    """The syllables of typed pinyin, or a ``ValueError`` a reader can act on."""
    check_type("typed", typed, str, "a str of pinyin")
    syllables = split_syllables(typed)
    if not syllables:
        raise ValueError(f"typed must hold at least one pinyin syllable, got {typed!r}")
    if len(syllables) > MAX_CLAUSE:
        raise ValueError(
            f"typed must have at most {MAX_CLAUSE} syllables (the longest training clause), "
            f"got {len(syllables)}: type a shorter clause"
        )
    return syllables


def check_engine(name: str, engine: object) -> None:
    """``TypeError`` unless ``engine`` is an input method: it has a ``candidates(pinyins, k)``
    method (every engine of the chapter: the n-gram HMMs, the Transformer, the tagger, the
    fused engine)."""
    if not callable(getattr(engine, "candidates", None)):
        raise TypeError(
            f"{name} must be an input method with a method candidates(pinyins, k) -> one list "
            f"of k clauses per input (NgramIME, TransformerIME, TaggerIME, FusedIME, ...), "
            f"got {type(engine).__name__}"
        )


def candidate_bar_text(engine: object, typed: str, k: int = 5) -> str:
    """The candidate bar for typed pinyin (spaced or not): ``"1. 我爱北京  2. 我爱背景 ..."``,
    the first ``k`` clauses of ``engine.candidates`` (any input method, :func:`check_engine`).

    Raises ``ValueError`` with a readable message for input that cannot be split into
    syllables, a clause longer than any the models were trained on
    (:data:`~lecturekit.data.sentences.MAX_CLAUSE`, 30 syllables; beyond it a Transformer
    would write at positions it has never seen) and, from the engine, a syllable it does not
    know; ``k`` larger than the engine allows is refused by the engine."""
    check_engine("engine", engine)
    check_int("k", k, 1)
    syllables = _typed_syllables(typed)
    found = engine.candidates([" ".join(syllables)], k)[0]  # type: ignore[attr-defined]
    return "  ".join(f"{i}. {clause}" for i, clause in enumerate(found[:k], 1))


def paired_cer_difference(
    edits_a: Sequence[float],
    edits_b: Sequence[float],
    chars: Sequence[float],
    *,
    groups: Sequence[object] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """``(difference, low, high)``: CER of system a minus CER of system b on the same clauses.

    ``edits_a``, ``edits_b`` and ``chars`` are per clause, shape ``(N,)`` (as from
    :func:`~lecturekit.capstone.ngram.sentence_scores`). The interval is a percentile
    bootstrap that draws the *same* clauses for both systems (paired), ``n_resamples`` times
    with ``numpy.random.default_rng(seed)``. With ``groups`` (one id per clause, e.g. the block
    a clause came from) it draws whole groups with replacement (cluster bootstrap), so the
    interval also covers the variation from group to group.
    """
    check_int("n_resamples", n_resamples, 1, MAX_RESAMPLES)
    check_number("level", level, 0, 1, exclusive=("minimum", "maximum"))
    a, b, n = (np.asarray(x, dtype=float) for x in (edits_a, edits_b, chars))
    if a.ndim != 1 or not a.shape == b.shape == n.shape or len(a) == 0:
        raise ValueError(
            f"edits_a, edits_b and chars must be equal non-empty 1-d arrays, got shapes "
            f"{a.shape}, {b.shape} and {n.shape}"
        )
    if not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(n).all()):
        raise ValueError("edits_a, edits_b and chars must hold finite numbers (no NaN or inf)")
    if (n < 0).any() or n.sum() == 0:
        raise ValueError(
            f"chars must be >= 0 with a positive sum (clauses without characters have no "
            f"error rate), got a sum of {n.sum()}"
        )
    if groups is None:
        ids = np.arange(len(a))
    else:
        if len(groups) != len(a):
            raise ValueError(
                f"groups must have one id per clause ({len(a)}), got {len(groups)}: "
                f"pass e.g. [clause.line // split.block_lines for clause in clauses]"
            )
        ids = np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    # per-group sums (G, 3): a cluster draw adds up whole groups
    sums = np.zeros((ids.max() + 1, 3))
    np.add.at(sums, ids, np.stack([a, b, n], axis=1))
    rng = np.random.default_rng(seed)
    draws = sums[rng.integers(0, len(sums), size=(n_resamples, len(sums)))].sum(axis=1)
    if (draws[:, 2] == 0).any():  # a resample of character-less clauses only: no rate exists
        raise ValueError("chars: too many zeros; leave out the clauses without characters")
    diffs = (draws[:, 0] - draws[:, 1]) / draws[:, 2]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return float((a.sum() - b.sum()) / n.sum()), float(low), float(high)


def block_subsets(
    clauses: Sequence[Any], fractions: Sequence[float], block_lines: int, seed: int | str = "curve"
) -> list[list[Any]]:
    """For each of ``fractions`` (in ``(0, 1]``) the clauses of that share of the blocks:
    ``clauses`` (``(N,)``, each with the corpus ``line`` it came from) are grouped in blocks
    of ``block_lines`` lines, as the split groups them; the blocks are shuffled once by
    ``random.Random(seed)`` and a fraction ``f`` takes the first ``round(f * blocks)`` of
    them (at least one), so every subset holds every smaller one (nested) and never part of
    a block. Clauses keep their order."""
    check_int("block_lines", block_lines, 1)
    for f in fractions:
        check_number("every fraction", f, 0, 1, exclusive=("minimum",))
    blocks = sorted({c.line // block_lines for c in clauses})
    random.Random(seed).shuffle(blocks)
    rank = {b: i for i, b in enumerate(blocks)}
    out = []
    for f in fractions:
        n = max(1, round(f * len(blocks)))
        out.append([c for c in clauses if rank[c.line // block_lines] < n])
    return out
