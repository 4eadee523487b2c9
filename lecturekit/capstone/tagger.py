"""The sentence-level input method's neural engines: whole clauses of pinyin -> characters.

Two models read a clause's syllables (one token per syllable) and write its characters:

- the encoder-decoder :class:`lecturekit.Transformer`, autoregressive (AT): one character after
  another, greedy or beam search with the KV cache (``TransformerIME`` of
  :mod:`lecturekit.capstone.engines` runs it);
- the encoder-only :class:`~lecturekit.model.tagger.EncoderTagger`, its non-autoregressive
  (NAT) counterpart: the Transformer's encoder and one output layer, every character in
  parallel. A clause has exactly one character per syllable, so the output length is known and
  the tagger needs no length predictor (chapter 4's NAT).

Around them: the syllable splitter for unspaced input (:func:`split_syllables`, ``woaibeijing``
-> ``wo ai bei jing``), the vocabularies (:func:`sentence_vocabs`) and the tagger as an input
method with exact k-best candidates
(:class:`TaggerIME`, :func:`k_best_independent`), the tagger fused with an n-gram HMM
(:class:`FusedIME`), and the input method's call: :func:`ime_candidates`, typed pinyin -> the
k best clauses by beam search with the KV cache.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from lecturekit._common import check_int, check_number, check_type
from lecturekit.capstone.ngram import NgramIME
from lecturekit.capstone.pinyin_input import (
    MAX_BEAM,
    check_k,
    length_batches,
    pinyin_syllables,
    read_pinyins,
    split_syllables,
)
from lecturekit.data.vocab import CharVocab, WordVocab
from lecturekit.decoding.beam import beam_search
from lecturekit.model.tagger import EncoderTagger
from lecturekit.model.transformer import Transformer

__all__ = [
    "sentence_vocabs",
    "k_best_independent",
    "TaggerIME",
    "FusedIME",
    "ime_candidates",
]


def sentence_vocabs(
    train: Sequence[tuple[str, str]], min_count: int = 2
) -> tuple[WordVocab, CharVocab]:
    """The input and output vocabularies from training ``(pinyin, text)`` clauses.

    Input: every syllable of :func:`pinyin_syllables` and of ``train``, sorted (one token per
    syllable, so no unseen syllable becomes ``<unk>``). Output: the characters seen at least
    ``min_count`` times, most frequent first (ties by character); rarer ones become ``<unk>``.
    """
    check_int("min_count", min_count, 1)
    counts = Counter(c for _, text in train for c in text)
    syllables = pinyin_syllables() | {s for pinyin, _ in train for s in pinyin.split()}
    chars = sorted((c for c, n in counts.items() if n >= min_count), key=lambda c: (-counts[c], c))
    return WordVocab(sorted(syllables)), CharVocab(chars)


def k_best_independent(log_probs: Tensor, k: int) -> list[tuple[float, list[int]]]:
    """The ``k`` most probable sequences when positions are independent (the tagger).

    ``log_probs (S, V)``: per position log-probabilities. A sequence's score is the sum of its
    positions' scores; exact k-best by merging one position at a time and keeping the best
    ``k`` partial sequences (any top-k sequence has a top-k prefix). Returns ``(score, ids)``
    pairs, best first, ties by ids.
    """
    check_int("k", k, 1)
    if log_probs.dim() != 2 or log_probs.size(0) == 0:
        raise ValueError(
            f"log_probs must have shape (S, V) with S >= 1, got {tuple(log_probs.shape)}"
        )
    top_values, top_ids = log_probs.topk(min(k, log_probs.size(1)), dim=-1)  # (S, k)
    beams: list[tuple[float, list[int]]] = [(0.0, [])]
    for values, ids in zip(top_values.tolist(), top_ids.tolist(), strict=True):
        merged = [
            (s + v, [*prefix, i]) for s, prefix in beams for v, i in zip(values, ids, strict=True)
        ]
        beams = heapq.nsmallest(k, merged, key=lambda b: (-b[0], b[1]))
    return beams


class TaggerIME:
    """A trained :class:`~lecturekit.model.tagger.EncoderTagger` as an input method: ``candidates(pinyins, k)``, the
    ``k`` best clauses of each space-separated pinyin input (:func:`k_best_independent`),
    ``k`` at most ``max_candidates``. Inputs are read by
    :func:`~lecturekit.capstone.pinyin_input.read_pinyins`: what is not a syllable of the
    model's input vocabulary is refused, never tagged as ``<unk>``."""

    max_candidates = 100  # k_best_independent merges k x k partial clauses per syllable

    def __init__(self, model: EncoderTagger, src_vocab: WordVocab, tgt_vocab: CharVocab) -> None:
        check_type("model", model, EncoderTagger, "an EncoderTagger")
        self.model, self.src_vocab, self.tgt_vocab = model.eval(), src_vocab, tgt_vocab
        self.name = "Transformer tagger (NAT)"
        self.batch_size = 128

    def read(self, pinyins: Sequence[str]) -> list[list[str]]:
        """The inputs' syllables (:func:`~lecturekit.capstone.pinyin_input.read_pinyins`),
        each in the model's input vocabulary (``ValueError`` naming the first that is not)."""
        rows = read_pinyins(pinyins, self.src_vocab.stoi)
        for pinyin, syllables in zip(pinyins, rows, strict=True):
            unknown = [s for s in syllables if s not in self.src_vocab.stoi]
            if unknown:
                raise ValueError(
                    f"pinyins: {pinyin!r} has syllables the model does not know: {unknown}"
                )
        return rows

    @torch.no_grad()
    def log_probs(self, pinyins: Sequence[str]) -> list[Tensor]:
        """For each input (space-separated syllables, read by :meth:`read`) the tagger's
        ``log P(character | all syllables)`` at every syllable, ``(T_i, V)``, special tokens
        included (``<unk>`` stands for every rare character). Inputs are run in batches of
        equal length, at most ``batch_size`` at a time: no padding, so the others in a batch
        change an input's log-probabilities by float rounding only (about 1e-5)."""
        rows = self.read(pinyins)
        out: list[Tensor] = [torch.empty(0)] * len(rows)
        for chunk in length_batches([len(row) for row in rows], self.batch_size):
            src = torch.tensor([[self.src_vocab.token_to_id(s) for s in rows[i]] for i in chunk])
            log_probs = self.model(src).log_softmax(-1)  # (B, S, V)
            for i, row in zip(chunk, log_probs, strict=True):
                out[i] = row
        return out

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        """For each input up to ``k`` clauses, most probable first (inputs ``(N,)`` of
        space-separated syllables). Special tokens (padding, BOS, EOS, ``<unk>``) are never
        written."""
        check_k(k, self.max_candidates)
        out: list[list[str]] = []
        for row in self.log_probs(pinyins):
            row = row.clone()
            row[:, : self.tgt_vocab.unk_id + 1] = -math.inf  # specials are no output
            out.append([self.tgt_vocab.decode(ids) for _, ids in k_best_independent(row, k)])
        return out


class FusedIME:
    """The tagger (NAT) and an n-gram HMM together (shallow fusion): each clause's ``k``
    best texts ``y`` under

        log P_HMM(y, pinyin) + weight * sum_t log P_NAT(y_t | pinyin),

    searched by the HMM's k-best Viterbi over the characters seen with each syllable. The HMM
    brings what the tagger lacks, a dependency between neighbouring characters (chapter 4's
    multi-modality); the tagger brings what the HMM lacks, a direct view of the syllables on
    the right.
    ``weight = 0`` is the HMM itself. A character the tagger has no id for (rare in
    training) gets the tagger's ``<unk>`` log-probability.
    """

    def __init__(self, tagger: TaggerIME, ngram: NgramIME, weight: float) -> None:
        check_type("tagger", tagger, TaggerIME, "a TaggerIME")
        check_type("ngram", ngram, NgramIME, "an NgramIME")
        check_number("weight", weight, 0.0)
        self.tagger, self.ngram, self.weight = tagger, ngram, float(weight)
        vocab = tagger.tgt_vocab
        # the tagger's id of every HMM character (<s> and </s> are never emitted)
        self.tagger_ids = torch.tensor([vocab.token_to_id(c) for c in ngram.itos])
        self.name = f"NAT + {ngram.name}"
        self.max_candidates = ngram.max_candidates
        # syllables -> per syllable the tagger's log-probabilities (float32) of the characters
        # the HMM may write there (None for a syllable the HMM never saw); shared by with_weight
        self._memo: dict[tuple[str, ...], list[np.ndarray | None]] = {}

    def with_weight(self, weight: float) -> FusedIME:
        """The same tagger and HMM fused with another ``weight``. It shares this fusion's
        memo of the tagger's log-probabilities, so a grid of weights runs the tagger once per
        clause."""
        other = FusedIME(self.tagger, self.ngram, weight)
        other._memo = self._memo
        return other

    def _tagger_scores(self, rows: list[list[str]]) -> list[list[np.ndarray | None]]:
        """The memo's entry of each clause ``rows (N,)`` (its syllables), running the tagger
        once on the clauses it does not hold yet (in their order, duplicates included)."""
        keys = [tuple(row) for row in rows]
        missing = [row for row, key in zip(rows, keys, strict=True) if key not in self._memo]
        if missing:
            if len(self._memo) + len(missing) > 100_000:  # a few KB per clause
                self._memo.clear()
            for row, log_probs in zip(
                missing, self.tagger.log_probs([" ".join(r) for r in missing]), strict=True
            ):
                steps = [self.ngram.emission.get(s) for s in row]
                at = log_probs[:, self.tagger_ids].numpy()  # (T, C)
                self._memo[tuple(row)] = [
                    None if step is None else at[t, step[0]] for t, step in enumerate(steps)
                ]
        return [self._memo[key] for key in keys]

    def candidates(self, pinyins: Sequence[str], k: int) -> list[list[str]]:
        """For each input (space-separated syllables) its ``k`` best clauses, best first
        (``k`` at most the n-gram engine's ``max_candidates``)."""
        check_k(k, self.max_candidates)
        rows = self.tagger.read(pinyins)
        bonuses = []
        for syllables, scores in zip(rows, self._tagger_scores(rows), strict=True):
            bonus = np.zeros((len(syllables), len(self.ngram.itos)))  # (T, C)
            for t, step in enumerate(scores):
                if step is not None:
                    ids = self.ngram.emission[syllables[t]][0]
                    bonus[t, ids] = self.weight * step  # float32, as the tagger gives it
            bonuses.append(bonus)
        return self.ngram.candidates([" ".join(s) for s in rows], k, bonuses)


@torch.no_grad()
def ime_candidates(
    model: nn.Module,
    src_vocab: WordVocab,
    tgt_vocab: CharVocab,
    text: str,
    k: int = 5,
    use_cache: bool = True,
) -> list[tuple[str, float]]:
    """What the input method shows for typed pinyin ``text`` (spaced or not: it goes through
    :func:`split_syllables`): up to ``k`` ``(clause, log P)`` pairs, best first, from beam
    search of width ``k`` with the encoder-decoder ``model``, exactly one character per
    syllable (``min_len = max_len``: the length of the answer is known), ``k`` at most
    :data:`~lecturekit.capstone.pinyin_input.MAX_BEAM`. ``use_cache`` keeps the decoder's keys
    and values between steps (chapter 6), so a step costs one new position instead of the
    whole prefix.
    """
    check_k(k, MAX_BEAM)
    check_type("model", model, Transformer, "the encoder-decoder Transformer (the AT model)")
    check_type("src_vocab", src_vocab, WordVocab, "the model's syllable vocabulary (a WordVocab)")
    check_type("tgt_vocab", tgt_vocab, CharVocab, "the model's character vocabulary (a CharVocab)")
    syllables = split_syllables(text)
    if not syllables:
        raise ValueError(f"text must hold at least one pinyin syllable, got {text!r}")
    unknown = [s for s in syllables if s not in src_vocab.stoi]
    if unknown:
        raise ValueError(f"text: {text!r} has syllables the model does not know: {unknown}")
    src = torch.tensor([[src_vocab.token_to_id(s) for s in syllables]])  # (1, S)
    was_training = model.training
    model.eval()
    try:
        n = len(syllables)
        out = beam_search(model, src, k, n, min_len=n, n_best=k, use_cache=use_cache)
    finally:
        model.train(was_training)
    return [(tgt_vocab.decode(h.tokens), float(h.log_prob)) for h in out.hypotheses[0]]
