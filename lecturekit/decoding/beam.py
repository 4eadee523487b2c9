"""Beam search and exhaustive search: strategies that keep several prefixes (p53).

Beam search keeps, for each source, the ``beam_size`` best unfinished prefixes; exhaustive
search scores every possible output and is the exact search beam search approximates. Both
run on the step protocol of :mod:`lecturekit.decoding.protocol` and return a
:class:`lecturekit.decoding.search.Decoded` whose ``hypotheses`` hold the ranked outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lecturekit._common import check_bool, check_int, check_number, eval_mode
from lecturekit.decoding.protocol import as_decoder
from lecturekit.decoding.search import Decoded, forbid_specials, start

__all__ = ["Hypothesis", "beam_search", "beam_step", "exhaustive_search", "length_penalty"]

# ((5 + T) / 6) ** 10 stays far inside the float range for any length; GNMT uses 0.6-1
MAX_LENGTH_PENALTY = 10.0


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ``((5 + length) / 6) ** alpha`` (Wu et al., 2016).

    A hypothesis' beam-search score is ``log P(y) / length_penalty(len(y), alpha)``;
    ``alpha = 0`` gives the plain log-probability, larger ``alpha`` favours longer outputs
    (the Transformer paper uses ``alpha = 0.6``). ``alpha`` must be in
    ``[0, MAX_LENGTH_PENALTY]`` (10).
    """
    check_number("length_penalty", alpha, 0.0, MAX_LENGTH_PENALTY)
    return ((5.0 + length) / 6.0) ** alpha


def _penalty(length: int, alpha: float) -> float:
    return 1.0 if alpha == 0.0 else float(length_penalty(length, alpha))


@dataclass(order=True)
class Hypothesis:
    """One beam-search / exhaustive-search result.

    ``tokens``: generated ids (no BOS; ends with EOS when ``finished``); ``log_prob``: the sum
    of their token log-probabilities; ``score``: ``log_prob / length_penalty(len, alpha)``
    (equal to ``log_prob`` when ``alpha = 0``). Hypotheses sort by score.
    """

    score: float
    log_prob: float = field(compare=False)
    tokens: list[int] = field(compare=False)
    finished: bool = field(compare=False)


def _result(ranked: list[list[Hypothesis]], pad_id: int, device: Any) -> Decoded:
    """The :class:`Decoded` of ranked hypotheses: best tokens padded with ``pad_id``."""
    best = [hyps[0] if hyps else Hypothesis(-math.inf, -math.inf, [], False) for hyps in ranked]
    length = max(1, *(len(h.tokens) for h in best))
    tokens = torch.full((len(best), length), pad_id, dtype=torch.long, device=device)
    for b, hyp in enumerate(best):
        tokens[b, : len(hyp.tokens)] = torch.tensor(hyp.tokens, dtype=torch.long)
    scores = torch.tensor([h.score for h in best], dtype=torch.float64, device=device)
    return Decoded(tokens=tokens, scores=scores, hypotheses=ranked)


def beam_step(
    scores: Tensor, log_probs: Tensor, n: int | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """One step of beam search: the ``n`` best one-token extensions of ``k`` beams (p53).

    A candidate is a beam's prefix extended by one token; its score is the prefix's
    log-probability plus the token's. All ``k * V`` candidates of a source compete together
    (not ``n`` per beam). Ties are broken by the lower (beam, token) index, as ``argmax`` in
    greedy search.

    Args:
        scores: ``(B, k)`` log-probability of each beam's prefix; ``-inf`` marks an empty slot
            (at the first step only beam 0 is alive).
        log_probs: ``(B, k, V)`` next-token log-probabilities after each beam.
        n: how many candidates to keep, ``1 <= n <= k * V``; default ``k``.

    Returns:
        ``(top_scores (B, n), beams (B, n), tokens (B, n))``, best first: the candidates'
        scores, the beam each extends (int64 in ``[0, k)``) and its new token (int64).
    """
    if not isinstance(scores, Tensor) or not isinstance(log_probs, Tensor):
        raise TypeError("scores and log_probs must be torch.Tensor")
    if log_probs.dim() != 3 or tuple(scores.shape) != tuple(log_probs.shape[:2]):
        raise ValueError(
            f"log_probs must be (B, k, V) and scores (B, k), got log_probs "
            f"{tuple(log_probs.shape)} and scores {tuple(scores.shape)}"
        )
    batch, k, vocab = log_probs.shape
    n = k if n is None else n
    check_int("n", n, 1, k * vocab)
    candidates = (scores[:, :, None] + log_probs).reshape(batch, k * vocab)  # (B, k*V)
    # a stable sort breaks ties by lower (beam, token) index
    top_scores, flat = torch.sort(candidates, dim=-1, descending=True, stable=True)
    top_scores, flat = top_scores[:, :n], flat[:, :n]  # (B, n)
    return top_scores, flat // vocab, flat % vocab


@dataclass
class _Beams:
    """The open prefixes of every source: ``scores (B, k)``, ``prefixes[b][j]``."""

    scores: Tensor
    prefixes: list[list[list[int]]]
    finished: list[list[Hypothesis]]
    trace: list[list[list[Hypothesis]]]
    done: list[bool]


def _advance(
    beams: _Beams, log_probs: Tensor, t: int, eos_id: int, pad_id: int, alpha: float
) -> tuple[Tensor, Tensor, list[list[list[int]]], Tensor]:
    """One step: the ``k`` best extensions of each source's prefixes.

    ``log_probs``: ``(B, k, V)``. Returns the new scores ``(B, k)``, the rows they extend
    ``(B, k)``, their prefixes and their last tokens ``(B, k)``; extensions ending in EOS
    become finished hypotheses instead.
    """
    batch, k, vocab = log_probs.shape
    # 2k candidates: up to k of them may end in EOS and leave the beam
    top_scores, top_beams, top_tokens = beam_step(beams.scores, log_probs, min(2 * k, k * vocab))
    top_index = (top_beams * vocab + top_tokens).tolist()
    top_scores = top_scores.tolist()
    new_scores = torch.full_like(beams.scores, -math.inf)
    new_rows = torch.zeros(batch, k, dtype=torch.long)
    new_tokens = torch.full((batch, k), pad_id, dtype=torch.long)
    new_prefixes: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(batch)]
    for b in range(batch):
        if beams.done[b]:
            continue
        n_alive = 0
        for score, flat in zip(top_scores[b], top_index[b], strict=True):
            if score == -math.inf or n_alive == k:
                break
            beam, token = divmod(flat, vocab)
            seq = beams.prefixes[b][beam] + [token]
            if token == eos_id:
                beams.finished[b].append(Hypothesis(score / _penalty(t, alpha), score, seq, True))
                continue
            new_scores[b, n_alive] = score
            new_rows[b, n_alive] = b * k + beam
            new_tokens[b, n_alive] = token
            new_prefixes[b][n_alive] = seq
            n_alive += 1
    return new_scores, new_rows, new_prefixes, new_tokens


def _source_done(
    finished: list[Hypothesis], alive: Tensor, n_best: int, t: int, max_len: int, alpha: float
) -> bool:
    if not bool((alive > -math.inf).any()):
        return True
    if len(finished) < n_best:
        return False
    worst_kept = sorted(finished, reverse=True)[n_best - 1].score
    # an open prefix's log-prob can only fall; its best possible score divides by the
    # largest penalty it can reach (that of length max_len, since log-probs are <= 0)
    best_possible = float(alive.max()) / max(_penalty(t, alpha), _penalty(max_len, alpha))
    return best_possible <= worst_kept


def _ranked(beams: _Beams, n_best: int, alpha: float) -> list[list[Hypothesis]]:
    results = []
    for b in range(len(beams.done)):
        pool = list(beams.finished[b])
        if not beams.done[b]:  # reached max_len: open prefixes compete as unfinished outputs
            pool += [
                Hypothesis(s / _penalty(len(p), alpha), s, p, False)
                for s, p in zip(beams.scores[b].tolist(), beams.prefixes[b], strict=True)
                if s > -math.inf
            ]
        results.append(sorted(pool, reverse=True)[:n_best])
    return results


@torch.no_grad()
def beam_search(
    model: Any,
    src: Any,
    beam_size: int,
    max_len: int,
    *,
    length_penalty: float = 0.0,
    n_best: int = 1,
    src_key_padding_mask: Tensor | None = None,
    trace: bool = False,
    use_cache: bool = True,
) -> Decoded:
    """Beam search over a batch of sources (p53).

    Keeps, for each source, the ``beam_size`` best unfinished prefixes. Each step extends
    every kept prefix by every token and keeps the ``beam_size`` best extensions; an extension
    ending in EOS becomes a finished hypothesis. Prefixes still open after ``max_len`` tokens
    are returned as unfinished hypotheses. Hypotheses are ranked by
    ``log P(y) / length_penalty(len(y), alpha)`` with ``alpha = length_penalty``. A source
    stops early once its ``n_best`` finished hypotheses provably beat anything its open
    prefixes can still become (log-probabilities only decrease as tokens are added).
    Beam search is not exact search: with a small beam the best sequence can be pruned
    (compare :func:`exhaustive_search`); ``beam_size = 1`` is greedy search.

    Args:
        model, src, max_len, src_key_padding_mask, use_cache: as in
            :func:`lecturekit.decoding.search.greedy`.
        beam_size: number of prefixes kept per source (k >= 1).
        length_penalty: GNMT ``alpha`` in ``[0, 10]`` (0 = rank by plain log-probability).
        n_best: how many hypotheses to return per source (<= beam_size).
        trace: also record, per source and step, the kept prefixes (as unfinished
            :class:`Hypothesis` objects) for drawing the search tree.

    Returns:
        :class:`Decoded`: ``hypotheses[b]`` are source ``b``'s ``n_best`` hypotheses, best
        first; ``tokens``/``scores`` are the best one's; ``trace[b][t]`` (with ``trace``)
        lists the prefixes kept after step ``t + 1``.
    """
    check_int("max_len", max_len, minimum=1)
    check_int("beam_size", beam_size, minimum=1)
    check_int("n_best", n_best, 1, beam_size)
    check_number("length_penalty", length_penalty, 0.0, MAX_LENGTH_PENALTY)
    check_bool("use_cache", use_cache)
    alpha, k = float(length_penalty), beam_size
    dec = as_decoder(model, use_cache=use_cache)
    with eval_mode(model), torch.inference_mode():
        state, batch, device = start(dec, src, src_key_padding_mask=src_key_padding_mask)
        # expand every source to k beam rows: row b * k + j is beam j of source b
        state = dec.select(state, torch.arange(batch, device=device).repeat_interleave(k))
        scores = torch.full((batch, k), -math.inf, dtype=torch.float64, device=device)
        scores[:, 0] = 0.0  # one live beam per source at the start
        empty = [[[] for _ in range(k)] for _ in range(batch)]
        beams = _Beams(scores, empty, [[] for _ in range(batch)], [[] for _ in range(batch)], [])
        beams.done = [False] * batch
        tokens = torch.full((batch * k,), dec.bos_id, dtype=torch.long, device=device)
        for t in range(1, max_len + 1):
            log_probs, state = dec.step(tokens, state)
            log_probs = forbid_specials(log_probs, dec).double().view(batch, k, dec.vocab_size)
            scores, rows, prefixes, new_tokens = _advance(
                beams, log_probs, t, dec.eos_id, dec.pad_id, alpha
            )
            for b in range(batch):
                if beams.done[b]:
                    continue
                if trace:
                    beams.trace[b].append(_kept(scores[b], prefixes[b], t, alpha))
                beams.done[b] = _source_done(
                    beams.finished[b], scores[b], n_best, t, max_len, alpha
                )
            beams.scores, beams.prefixes = scores, prefixes
            if all(beams.done) or t == max_len:
                break
            state = dec.select(state, rows.view(-1).to(device))
            tokens = new_tokens.view(-1).to(device)
    result = _result(_ranked(beams, n_best, alpha), dec.pad_id, device)
    result.trace = beams.trace if trace else None
    return result


def _kept(scores: Tensor, prefixes: list[list[int]], t: int, alpha: float) -> list[Hypothesis]:
    return [
        Hypothesis(s / _penalty(t, alpha), s, prefixes[j], False)
        for j, s in enumerate(scores.tolist())
        if s > -math.inf
    ]


@torch.no_grad()
def exhaustive_search(
    model: Any,
    src: Any,
    max_len: int,
    *,
    length_penalty: float = 0.0,
    n_best: int = 1,
    src_key_padding_mask: Tensor | None = None,
    max_hypotheses: int = 200_000,
) -> Decoded:
    """Score every possible output and return the best: the exact search beam search approximates.

    Enumerates every sequence that ends with EOS within ``max_len`` tokens, or reaches
    ``max_len`` tokens without EOS (unfinished), over the whole vocabulary except PAD and BOS:
    ``V**T`` sequences (p53), so only for tiny vocabularies and lengths (the number of open
    prefixes is limited by ``max_hypotheses``). Ranking as in :func:`beam_search`.

    Returns:
        :class:`Decoded` whose ``hypotheses[b]`` are source ``b``'s ``n_best`` best, best first.
    """
    check_int("max_len", max_len, minimum=1)
    check_int("n_best", n_best, minimum=1)
    check_int("max_hypotheses", max_hypotheses, minimum=1)
    check_number("length_penalty", length_penalty, 0.0, MAX_LENGTH_PENALTY)
    alpha = float(length_penalty)
    dec = as_decoder(model)
    with eval_mode(model), torch.inference_mode():
        state, batch, device = start(dec, src, src_key_padding_mask=src_key_padding_mask)
        rows = list(range(batch))  # source of each open prefix
        prefixes: list[list[int]] = [[] for _ in range(batch)]
        scores = [0.0] * batch
        tokens = torch.full((batch,), dec.bos_id, dtype=torch.long, device=device)
        pool: list[list[Hypothesis]] = [[] for _ in range(batch)]
        for t in range(1, max_len + 1):
            log_probs, state = dec.step(tokens, state)
            log_probs = forbid_specials(log_probs, dec).double().tolist()
            keep, opened = _extend_all(
                rows, prefixes, scores, log_probs, pool, t, t == max_len, dec.eos_id, alpha
            )
            if not keep:
                break
            if len(keep) > max_hypotheses:
                raise ValueError(
                    f"max_hypotheses must be >= the {len(keep)} open prefixes at step {t}, got "
                    f"{max_hypotheses}; exhaustive search is for tiny vocabularies and lengths"
                )
            state = dec.select(state, torch.tensor(keep, dtype=torch.long, device=device))
            rows, prefixes, scores, next_tokens = opened
            tokens = torch.tensor(next_tokens, dtype=torch.long, device=device)
    ranked = [sorted(p, reverse=True)[:n_best] for p in pool]
    return _result(ranked, dec.pad_id, device)


def _extend_all(
    rows: list[int],
    prefixes: list[list[int]],
    scores: list[float],
    log_probs: list[list[float]],
    pool: list[list[Hypothesis]],
    t: int,
    last: bool,
    eos_id: int,
    alpha: float,
) -> tuple[list[int], tuple[list[int], list[list[int]], list[float], list[int]]]:
    """Extend every open prefix by every allowed token; finished ones go to ``pool``.

    Returns the rows of the prefixes kept open and their ``(sources, prefixes, scores,
    last tokens)``; at the ``last`` step every extension goes to ``pool``.
    """
    keep, next_rows, next_prefixes, next_scores, next_tokens = [], [], [], [], []
    for i, (b, prefix, score) in enumerate(zip(rows, prefixes, scores, strict=True)):
        for token, lp in enumerate(log_probs[i]):
            if lp == -math.inf:
                continue
            seq, total = prefix + [token], score + lp
            if token == eos_id or last:
                finished = token == eos_id
                pool[b].append(Hypothesis(total / _penalty(t, alpha), total, seq, finished))
            else:
                keep.append(i)
                next_rows.append(b)
                next_prefixes.append(seq)
                next_scores.append(total)
                next_tokens.append(token)
    return keep, (next_rows, next_prefixes, next_scores, next_tokens)
