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
import torch.nn.functional as F
from torch import Tensor

from lecturekit._common import check_bool, check_int, check_number, eval_mode
from lecturekit.decoding.protocol import as_decoder
from lecturekit.decoding.search import Decoded, check_max_len, forbid_specials, stable_topk, start

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
    _, k, vocab = log_probs.shape
    n = k if n is None else n
    check_int("n", n, 1, k * vocab)
    return _beam_step(scores, log_probs, n)


def _beam_step(scores: Tensor, log_probs: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`beam_step` of checked arguments (beam search's own, at every step)."""
    batch, k, vocab = log_probs.shape
    candidates = (scores[:, :, None] + log_probs).reshape(batch, k * vocab)  # (B, k*V)
    top_scores, flat = stable_topk(candidates, n)  # (B, n)
    return top_scores, flat // vocab, flat % vocab


@dataclass
class _Beams:
    """The search state of ``B`` sources with ``k`` beams after ``t`` steps, as tensors.

    ``scores (B, k)`` float64: log-probability of each open prefix (``-inf``: empty slot);
    ``prefixes (B, k, t)``: their tokens; ``done (B,)``: the source has stopped.
    The ``n_best`` best finished hypotheses of each source, best first (earlier ones first
    among ties): ``finished_scores (B, n_best)`` their ranking scores (``-inf``: none yet),
    ``finished_log_probs``, ``finished_tokens (B, n_best, t')`` (EOS, then ``pad_id``) and
    ``finished_lengths (B, n_best)``. Only the ``n_best`` best are kept: a hypothesis that
    falls out can never come back, as later ones are only added.
    """

    scores: Tensor
    prefixes: Tensor
    done: Tensor
    finished_scores: Tensor
    finished_log_probs: Tensor
    finished_tokens: Tensor
    finished_lengths: Tensor

    @classmethod
    def start(cls, batch: int, k: int, n_best: int, device: Any) -> _Beams:
        """Before the first step: one live (empty) beam per source."""
        scores = torch.full((batch, k), -math.inf, dtype=torch.float64, device=device)
        scores[:, 0] = 0.0
        no_finished = torch.full((batch, n_best), -math.inf, dtype=torch.float64, device=device)
        return cls(
            scores=scores,
            prefixes=torch.zeros(batch, k, 0, dtype=torch.long, device=device),
            done=torch.zeros(batch, dtype=torch.bool, device=device),
            finished_scores=no_finished,
            finished_log_probs=no_finished.clone(),
            finished_tokens=torch.zeros(batch, n_best, 0, dtype=torch.long, device=device),
            finished_lengths=torch.zeros(batch, n_best, dtype=torch.long, device=device),
        )


def _advance(
    beams: _Beams, log_probs: Tensor, t: int, eos_id: int, pad_id: int, alpha: float
) -> tuple[Tensor, Tensor]:
    """Step ``t``: the ``k`` best extensions of each source's prefixes, in place in ``beams``.

    ``log_probs``: ``(B, k, V)``. Each source takes its candidates best first until ``k``
    do not end in EOS; those become its open prefixes, the EOS ones taken before them
    finished hypotheses. Returns the rows of the previous step each new beam extends and its
    last token, both ``(B * k,)`` (empty slots: the source's first row and ``pad_id``).
    """
    batch, k, vocab = log_probs.shape
    # 2k candidates: up to k of them may end in EOS and leave the beam
    top_scores, top_beams, top_tokens = _beam_step(beams.scores, log_probs, min(2 * k, k * vocab))
    # what the per-candidate loop of a plain implementation does, for all sources at once:
    # take candidates best first, an EOS one as finished, until k open ones are taken
    is_eos = top_tokens == eos_id
    valid = (top_scores != -math.inf) & ~beams.done[:, None]  # (B, 2k)
    opens = valid & ~is_eos
    opens_before = opens.cumsum(-1) - opens.long()  # open candidates ranked above each one
    taken = valid & (opens_before < k)
    ends, opens = taken & is_eos, taken & ~is_eos
    # every candidate's prefix plus its token, (B, 2k, t)
    extended = torch.cat(
        [
            beams.prefixes.gather(1, top_beams[:, :, None].expand(-1, -1, t - 1)),
            top_tokens[:, :, None],
        ],
        dim=-1,
    )
    if bool(ends.any()):
        _add_finished(beams, torch.where(ends, top_scores, -math.inf), extended, t, pad_id, alpha)
    # the open candidates, in rank order, fill the k slots
    slots = torch.sort(~opens, dim=-1, stable=True).indices[:, :k]  # (B, k)
    alive = opens.gather(1, slots)
    beams.scores = torch.where(alive, top_scores.gather(1, slots), -math.inf)
    beams.prefixes = extended.gather(1, slots[:, :, None].expand(-1, -1, t))
    tokens = torch.where(alive, top_tokens.gather(1, slots), pad_id)
    first_row = torch.arange(batch, device=slots.device)[:, None] * k
    rows = first_row + torch.where(alive, top_beams.gather(1, slots), 0)
    return rows.view(-1), tokens.view(-1)


def _add_finished(
    beams: _Beams, log_probs: Tensor, tokens: Tensor, t: int, pad_id: int, alpha: float
) -> None:
    """Merge step ``t``'s finished candidates into each source's ``n_best`` best.

    ``log_probs (B, c)``: their log-probabilities, best first (``-inf``: not finished);
    ``tokens (B, c, t)``: their tokens, EOS last.
    """
    n_best, kept_length = beams.finished_scores.size(1), beams.finished_tokens.size(2)
    # the kept ones first, so a stable sort ranks earlier hypotheses first among ties
    scores = torch.cat([beams.finished_scores, log_probs / _penalty(t, alpha)], dim=1)
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :n_best]
    kept_tokens = F.pad(beams.finished_tokens, (0, t - kept_length), value=pad_id)
    lengths = torch.full_like(log_probs, t, dtype=torch.long)

    def best(kept: Tensor, new: Tensor) -> Tensor:
        pooled = torch.cat([kept, new], dim=1)
        index = order if pooled.dim() == 2 else order[:, :, None].expand(-1, -1, t)
        return pooled.gather(1, index)

    beams.finished_scores = scores.gather(1, order)
    beams.finished_log_probs = best(beams.finished_log_probs, log_probs)
    beams.finished_tokens = best(kept_tokens, tokens)
    beams.finished_lengths = best(beams.finished_lengths, lengths)


def _update_done(beams: _Beams, t: int, max_len: int, alpha: float) -> None:
    """Stop each source that has no open prefix left, or whose ``n_best`` finished
    hypotheses beat anything its open prefixes can still become."""
    # an open prefix's log-prob can only fall; its best possible score divides by the
    # largest penalty it can reach (that of length max_len, since log-probs are <= 0)
    bound = max(_penalty(t, alpha), _penalty(max_len, alpha))
    best_possible = beams.scores.max(dim=1).values / bound
    worst_kept = beams.finished_scores[:, -1]
    settled = (worst_kept > -math.inf) & (best_possible <= worst_kept)
    beams.done |= ~(beams.scores > -math.inf).any(dim=1) | settled


def _ranked(beams: _Beams, t: int, alpha: float) -> list[list[Hypothesis]]:
    """Each source's ``n_best`` hypotheses after the last step ``t``, best first."""
    n_best = beams.finished_scores.size(1)
    finished = zip(
        beams.finished_scores.tolist(),
        beams.finished_log_probs.tolist(),
        beams.finished_tokens.tolist(),
        beams.finished_lengths.tolist(),
        strict=True,
    )
    rows = zip(
        finished, beams.done.tolist(), beams.scores.tolist(), beams.prefixes.tolist(), strict=True
    )
    results = []
    for (scores, log_probs, tokens, lengths), done, open_scores, prefixes in rows:
        pool = [
            Hypothesis(score, log_prob, seq[:length], True)
            for score, log_prob, seq, length in zip(scores, log_probs, tokens, lengths, strict=True)
            if score > -math.inf
        ]
        if not done:  # reached max_len: open prefixes compete as unfinished outputs
            pool += _kept(open_scores, prefixes, t, alpha)
        results.append(sorted(pool, reverse=True)[:n_best])
    return results


def _kept(scores: list[float], prefixes: list[list[int]], t: int, alpha: float) -> list[Hypothesis]:
    """The open prefixes (of length ``t``) of one source as unfinished hypotheses."""
    return [
        Hypothesis(s / _penalty(t, alpha), s, prefix, False)
        for s, prefix in zip(scores, prefixes, strict=True)
        if s > -math.inf
    ]


@torch.no_grad()
def beam_search(
    model: Any,
    src: Any,
    beam_size: int,
    max_len: int,
    *,
    min_len: int = 0,
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

    All sources and beams advance together: one decoder step over ``B * beam_size`` rows,
    one candidate selection over ``(B, beam_size * V)`` and one reordering of the decoder
    state per step, whatever the number of sources.

    Args:
        model, src, max_len, min_len, src_key_padding_mask, use_cache: as in
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
    check_int("min_len", min_len, 0, max_len)
    check_int("beam_size", beam_size, minimum=1)
    check_int("n_best", n_best, 1, beam_size)
    check_number("length_penalty", length_penalty, 0.0, MAX_LENGTH_PENALTY)
    check_bool("use_cache", use_cache)
    alpha = float(length_penalty)
    dec = as_decoder(model, use_cache=use_cache)
    k = _useful_beam_size(beam_size, n_best, dec.vocab_size, max_len)
    check_max_len(dec, max_len, k * (src.shape[0] if isinstance(src, Tensor) else 1))
    reorder = getattr(dec, "reorder", dec.select)  # in place where the decoder can
    with eval_mode(model), torch.inference_mode():
        state, batch, device = start(dec, src, src_key_padding_mask=src_key_padding_mask)
        # expand every source to k beam rows: row b * k + j is beam j of source b
        state = dec.select(state, torch.arange(batch, device=device).repeat_interleave(k))
        beams = _Beams.start(batch, k, n_best, device)
        steps: list[list[list[Hypothesis]]] = [[] for _ in range(batch)]
        tokens = torch.full((batch * k,), dec.bos_id, dtype=torch.long, device=device)
        for t in range(1, max_len + 1):
            log_probs, state = dec.step(tokens, state)
            log_probs = forbid_specials(
                log_probs, dec, torch.float64, forbid_eos=t <= min_len
            ).view(batch, k, dec.vocab_size)
            was_done = beams.done.tolist() if trace else []
            rows, tokens = _advance(beams, log_probs, t, dec.eos_id, dec.pad_id, alpha)
            _update_done(beams, t, max_len, alpha)
            if trace:
                _record(steps, was_done, beams, t, alpha)
            if bool(beams.done.all()) or t == max_len:
                break
            state = reorder(state, rows)
    result = _result(_ranked(beams, t, alpha), dec.pad_id, device)
    result.trace = steps if trace else None
    return result


def _useful_beam_size(beam_size: int, n_best: int, vocab_size: int, max_len: int) -> int:
    """The beam width that gives the same result as ``beam_size``: fewer than ``V ** max_len``
    sequences (finished or not) of at most ``max_len`` tokens exist, so a wider beam only
    carries dead rows (a beam of 10**6 over a 3-step search is exhaustive at a width of V**3)."""
    reachable = 1
    for _ in range(max_len):
        reachable *= vocab_size
        if reachable >= beam_size:
            return beam_size
    return min(beam_size, max(n_best, reachable))


def _record(
    steps: list[list[list[Hypothesis]]], was_done: list[bool], beams: _Beams, t: int, alpha: float
) -> None:
    """Append to ``steps[b]`` the prefixes source ``b`` kept at step ``t``, unless it had
    stopped before."""
    rows = zip(steps, was_done, beams.scores.tolist(), beams.prefixes.tolist(), strict=True)
    for trace, done, scores, prefixes in rows:
        if not done:
            trace.append(_kept(scores, prefixes, t, alpha))


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
            allowed = forbid_specials(log_probs, dec).double().tolist()
            keep, opened = _extend_all(
                rows, prefixes, scores, allowed, pool, t, t == max_len, dec.eos_id, alpha
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
