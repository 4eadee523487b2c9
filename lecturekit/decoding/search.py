"""Decoding: greedy search, beam search, sampling and exhaustive search (slides p47-p54).

Every strategy runs on the small *incremental-decoder protocol* below, so the same code
decodes a trained :class:`lecturekit.Transformer` (through its KV cache) and a
:class:`TableDecoder`, a "model" written down as a table of conditional probabilities with
which the book reproduces the lecture's example where greedy search loses to beam search.

The protocol (:class:`IncrementalDecoder`) has three methods::

    state = decoder.start(src, src_key_padding_mask)      # B sources -> state with B rows
    log_probs, state = decoder.step(tokens, state)        # tokens (N,) -> log-probs (N, V)
    state = decoder.select(state, index)                  # keep / repeat / reorder rows

and the attributes ``bos_id``, ``eos_id``, ``pad_id`` and ``vocab_size``. The first ``step``
receives BOS; each later one receives the token chosen for each row at the previous step.

All strategies forbid PAD and BOS as outputs (their log-probabilities are set to ``-inf``,
without renormalising the others, so a hypothesis' score is still the sum of the model's own
token log-probabilities). Generated sequences exclude BOS and include EOS when one was
produced; rows that stopped earlier are right-padded with ``pad_id``.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lecturekit.decoding.protocol import IncrementalDecoder, as_decoder

__all__ = [
    "Hypothesis",
    "greedy",
    "beam_search",
    "sample",
    "exhaustive_search",
    "filter_logits",
    "length_penalty",
    "sequence_log_prob",
]

MIN_TEMPERATURE = 1e-6
MAX_LENGTH_PENALTY = 10.0


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _forbid_specials(log_probs: Tensor, dec: IncrementalDecoder) -> Tensor:
    log_probs = log_probs.clone()
    log_probs[:, dec.pad_id] = -math.inf
    if dec.bos_id != dec.eos_id:
        log_probs[:, dec.bos_id] = -math.inf
    return log_probs


def _check_max_len(max_len: int) -> None:
    _check_count("max_len", max_len)


def _check_count(name: str, value: Any, minimum: int = 1) -> None:
    """``value`` must be an int >= ``minimum`` (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name}: expected an int >= {minimum}, got {type(value).__name__} {value!r}"
        )
    if value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")


def _check_alpha(alpha: Any) -> float:
    # ((5 + T) / 6) ** 10 stays far inside the float range for any length; GNMT uses 0.6-1
    expected = f"a finite alpha in [0, {MAX_LENGTH_PENALTY}] (the paper uses 0.6)"
    return _check_real("length_penalty", alpha, 0.0, MAX_LENGTH_PENALTY, expected)


def _check_filters(top_k: Any, top_p: Any) -> None:
    if top_k is not None:
        _check_count("top_k", top_k)
    if top_p is not None:
        expected = "a float in (0, 1] or None"
        if _check_real("top_p", top_p, 0.0, 1.0, expected) == 0.0:
            raise ValueError(f"top_p: expected {expected}, got {top_p!r}")


def _check_real(name: str, value: Any, low: float, high: float, expected: str) -> float:
    """``value`` as a float in ``[low, high]`` (finite unless a bound is infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected {expected}, got {type(value).__name__} {value!r}")
    if not low <= value <= high or math.isnan(value):
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return float(value)


def _prepare(model: Any, use_cache: bool) -> tuple[IncrementalDecoder, bool]:
    if not isinstance(use_cache, bool):
        raise TypeError(f"use_cache: expected True or False, got {type(use_cache).__name__}")
    dec = as_decoder(model, use_cache=use_cache)
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    return dec, was_training


def _device(src: Any) -> torch.device:
    return src.device if isinstance(src, Tensor) else torch.device("cpu")


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ``((5 + length) / 6) ** alpha`` (Wu et al., 2016).

    A hypothesis' beam-search score is ``log P(y) / length_penalty(len(y), alpha)``;
    ``alpha = 0`` gives the plain log-probability, larger ``alpha`` favours longer outputs
    (the Transformer paper uses ``alpha = 0.6``). ``alpha`` must be in
    ``[0, MAX_LENGTH_PENALTY]`` (10).
    """
    _check_alpha(alpha)
    return ((5.0 + length) / 6.0) ** alpha


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


# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------


@torch.no_grad()
def greedy(
    model: Any,
    src: Any,
    max_len: int,
    *,
    src_key_padding_mask: Tensor | None = None,
    return_scores: bool = False,
    use_cache: bool = True,
) -> Tensor | tuple[Tensor, Tensor]:
    """Greedy decoding: at each step take the most probable next token (p24, p53).

    Args:
        model: a :class:`lecturekit.Transformer` or any :class:`IncrementalDecoder`.
        src: source token ids ``(B, S)`` (padded with ``pad_id``); for a
            :class:`TableDecoder`, ``None`` or a batch size.
        max_len: maximum number of generated tokens (EOS included).
        src_key_padding_mask: ``(B, S)`` bool, True = padding; derived from ``pad_id`` when
            omitted.
        return_scores: also return each row's log-probability ``(B,)`` (float).
        use_cache: decode with the KV cache (True) or recompute the prefix each step.

    Returns:
        ``tokens`` ``(B, T)`` long, ``T <= max_len``: generated ids, no BOS, EOS included when
        produced, ``pad_id`` after it; with ``return_scores``, ``(tokens, log_probs)``.
    """
    _check_max_len(max_len)

    def most_probable(log_probs: Tensor) -> Tensor:
        return log_probs.argmax(dim=-1)

    return _decode_token_by_token(
        model, src, max_len, most_probable, src_key_padding_mask, return_scores, use_cache
    )


def _decode_token_by_token(
    model: Any,
    src: Any,
    max_len: int,
    choose: Callable[[Tensor], Tensor],
    src_key_padding_mask: Tensor | None,
    return_scores: bool,
    use_cache: bool,
) -> Tensor | tuple[Tensor, Tensor]:
    """The loop greedy and sampling share: ``choose`` maps log-probs ``(B, V)`` to ``(B,)``.

    Finished rows get ``pad_id`` and stop adding to their score; stops when every row has
    produced EOS or after ``max_len`` tokens.
    """
    dec, was_training = _prepare(model, use_cache)
    try:
        state = dec.start(src, src_key_padding_mask)
        batch = len(state) if isinstance(state, list) else _batch_of(src)
        device = _device(src)
        tokens = torch.full((batch,), dec.bos_id, dtype=torch.long, device=device)
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        scores = torch.zeros(batch, dtype=torch.float64, device=device)
        out = []
        for _ in range(max_len):
            log_probs, state = dec.step(tokens, state)
            log_probs = _forbid_specials(log_probs, dec)
            chosen = choose(log_probs)
            gained = log_probs.gather(1, chosen[:, None]).squeeze(1).double()
            scores += torch.where(done, torch.zeros_like(gained), gained)
            tokens = torch.where(done, torch.full_like(chosen, dec.pad_id), chosen)
            out.append(tokens)
            done |= tokens == dec.eos_id
            if bool(done.all()):
                break
        result = torch.stack(out, dim=1)
    finally:
        if was_training:
            model.train()
    return (result, scores) if return_scores else result


def _batch_of(src: Any) -> int:
    if isinstance(src, Tensor):
        return src.shape[0]
    if isinstance(src, int):
        return src
    return 1


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """Set to ``-inf`` the logits that top-k / top-p (nucleus) sampling excludes.

    ``top_k`` keeps exactly the k largest logits of each row. ``top_p`` keeps the smallest
    set of most probable tokens whose total probability reaches ``top_p`` (Holtzman et al.,
    2020); the most probable token is always kept. For both, ties at the boundary keep the
    lower token index first, so the result does not depend on the sort implementation.

    Args:
        logits: ``(N, V)``.
    Returns:
        ``(N, V)``, a filtered copy.
    """
    _check_filters(top_k, top_p)
    logits = logits.clone()
    if top_k is not None and top_k < logits.shape[-1]:
        order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
        drop = torch.ones_like(logits, dtype=torch.bool).scatter(-1, order[:, :top_k], False)
        logits[drop] = -math.inf
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
        probs = torch.softmax(sorted_logits.double(), dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the strictly more probable tokens
        drop_sorted = before >= top_p  # the set already reached top_p without this token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits[drop] = -math.inf
    return logits


@torch.no_grad()
def sample(
    model: Any,
    src: Any,
    max_len: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    src_key_padding_mask: Tensor | None = None,
    return_scores: bool = False,
    use_cache: bool = True,
) -> Tensor | tuple[Tensor, Tensor]:
    """Ancestral sampling with temperature, top-k and top-p (p54).

    Each step draws the next token from ``softmax(logits / temperature)`` restricted by
    :func:`filter_logits`. Reproducible: pass ``seed`` (a fresh generator seeded with it) or
    your own ``generator``; the same seed gives the same samples.

    Args:
        model, src, max_len, src_key_padding_mask, use_cache: as in :func:`greedy`.
        temperature: finite, >= ``MIN_TEMPERATURE`` (1e-6); below 1 sharpens, above 1
            flattens the distribution (its limit 0 is :func:`greedy`).
        top_k: keep only the k most probable tokens (None = all).
        top_p: keep the smallest set of tokens whose probability reaches ``top_p``.
        seed / generator: randomness source (at most one of them).
        return_scores: also return the model's log-probability of each sample ``(B,)``
            (unaffected by temperature and filtering).

    Returns:
        ``tokens`` ``(B, T)`` as in :func:`greedy` (and the log-probabilities).
    """
    _check_max_len(max_len)
    # below MIN_TEMPERATURE, log-probs / temperature could overflow to -inf in a whole row
    _check_real(
        "temperature",
        temperature,
        MIN_TEMPERATURE,
        sys.float_info.max,
        f"a finite number >= {MIN_TEMPERATURE} (use greedy() for the limit 0)",
    )
    _check_filters(top_k, top_p)
    if seed is not None and generator is not None:
        raise ValueError("seed, generator: pass at most one of them")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed: expected an int or None, got {type(seed).__name__} {seed!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    device = _device(src)
    if generator is None:
        generator = torch.Generator(device=device)
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()

    def draw(log_probs: Tensor) -> Tensor:
        filtered = filter_logits(log_probs / temperature, top_k, top_p)
        probs = torch.softmax(filtered.double(), dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    return _decode_token_by_token(
        model, src, max_len, draw, src_key_padding_mask, return_scores, use_cache
    )


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
    return_trace: bool = False,
    use_cache: bool = True,
) -> list[list[Hypothesis]] | tuple[list[list[Hypothesis]], list[list[list[Hypothesis]]]]:
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
        model, src, max_len, src_key_padding_mask, use_cache: as in :func:`greedy`.
        beam_size: number of prefixes kept per source (k >= 1).
        length_penalty: GNMT ``alpha`` in ``[0, 10]`` (0 = rank by plain log-probability).
        n_best: how many hypotheses to return per source (<= beam_size).
        return_trace: also return, per source and step, the kept prefixes (as unfinished
            :class:`Hypothesis` objects) for drawing the search tree.

    Returns:
        For each source, its ``n_best`` hypotheses, best first: ``result[b][0].tokens`` is the
        best output for source ``b``. With ``return_trace``: ``(result, trace)`` where
        ``trace[b][t]`` lists the prefixes kept after step ``t + 1``.
    """
    _check_max_len(max_len)
    _check_count("beam_size", beam_size)
    _check_count("n_best", n_best)
    if n_best > beam_size:
        raise ValueError(f"n_best: expected an int in [1, beam_size={beam_size}], got {n_best!r}")
    alpha = _check_alpha(length_penalty)
    k = beam_size
    dec, was_training = _prepare(model, use_cache)
    try:
        state = dec.start(src, src_key_padding_mask)
        batch = len(state) if isinstance(state, list) else _batch_of(src)
        device = _device(src)
        # expand every source to k beam rows: row b * k + j is beam j of source b
        state = dec.select(state, torch.arange(batch, device=device).repeat_interleave(k))
        scores = torch.full((batch, k), -math.inf, dtype=torch.float64, device=device)
        scores[:, 0] = 0.0  # one live beam per source at the start
        prefixes: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(batch)]
        finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
        trace: list[list[list[Hypothesis]]] = [[] for _ in range(batch)]
        done = [False] * batch
        tokens = torch.full((batch * k,), dec.bos_id, dtype=torch.long, device=device)
        vocab = dec.vocab_size
        for t in range(1, max_len + 1):
            log_probs, state = dec.step(tokens, state)
            log_probs = _forbid_specials(log_probs, dec).double().view(batch, k, vocab)
            cand = (scores[:, :, None] + log_probs).view(batch, k * vocab)
            n_cand = min(2 * k, k * vocab)
            # a stable sort breaks ties by lower (beam, token) index, as argmax does in greedy
            top_scores, top_index = torch.sort(cand, dim=-1, descending=True, stable=True)
            top_scores, top_index = top_scores[:, :n_cand], top_index[:, :n_cand]  # (B, 2k)
            top_scores, top_index = top_scores.tolist(), top_index.tolist()
            new_scores = torch.full_like(scores, -math.inf)
            new_rows = torch.zeros(batch, k, dtype=torch.long)
            new_tokens = torch.full((batch, k), dec.pad_id, dtype=torch.long)
            new_prefixes: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(batch)]
            for b in range(batch):
                if done[b]:
                    continue
                n_alive = 0
                for score, flat in zip(top_scores[b], top_index[b], strict=True):
                    if score == -math.inf or n_alive == k:
                        break
                    beam, token = divmod(flat, vocab)
                    seq = prefixes[b][beam] + [token]
                    if token == dec.eos_id:
                        lp = _penalty(t, alpha)
                        finished[b].append(Hypothesis(score / lp, score, seq, True))
                        continue
                    new_scores[b, n_alive] = score
                    new_rows[b, n_alive] = b * k + beam
                    new_tokens[b, n_alive] = token
                    new_prefixes[b][n_alive] = seq
                    n_alive += 1
                if return_trace:
                    trace[b].append(
                        [
                            Hypothesis(s / _penalty(t, alpha), s, new_prefixes[b][j], False)
                            for j, s in enumerate(new_scores[b].tolist())
                            if s > -math.inf
                        ]
                    )
                done[b] = _source_done(finished[b], new_scores[b], n_best, t, max_len, alpha)
            scores, prefixes = new_scores, new_prefixes
            if all(done) or t == max_len:
                break
            state = dec.select(state, new_rows.view(-1).to(device))
            tokens = new_tokens.view(-1).to(device)
        results = []
        for b in range(batch):
            pool = list(finished[b])
            if not done[b]:  # reached max_len: open prefixes compete as unfinished outputs
                pool += [
                    Hypothesis(s / _penalty(len(p), alpha), s, p, False)
                    for s, p in zip(scores[b].tolist(), prefixes[b], strict=True)
                    if s > -math.inf
                ]
            results.append(sorted(pool, reverse=True)[:n_best])
    finally:
        if was_training:
            model.train()
    return (results, trace) if return_trace else results


def _penalty(length: int, alpha: float) -> float:
    return 1.0 if alpha == 0.0 else float(length_penalty(length, alpha))


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
) -> list[list[Hypothesis]]:
    """Score every possible output and return the best: the exact search beam search approximates.

    Enumerates every sequence that ends with EOS within ``max_len`` tokens, or reaches
    ``max_len`` tokens without EOS (unfinished), over the whole vocabulary except PAD and BOS:
    ``V**T`` sequences (p53), so only for tiny vocabularies and lengths (the number of open
    prefixes is limited by ``max_hypotheses``). Ranking as in :func:`beam_search`.

    Returns:
        For each source, its ``n_best`` best hypotheses, best first.
    """
    _check_max_len(max_len)
    _check_count("n_best", n_best)
    _check_count("max_hypotheses", max_hypotheses)
    alpha = _check_alpha(length_penalty)
    dec, was_training = _prepare(model, True)
    try:
        state = dec.start(src, src_key_padding_mask)
        batch = len(state) if isinstance(state, list) else _batch_of(src)
        device = _device(src)
        rows = list(range(batch))  # source of each open prefix
        prefixes: list[list[int]] = [[] for _ in range(batch)]
        scores = [0.0] * batch
        tokens = torch.full((batch,), dec.bos_id, dtype=torch.long, device=device)
        pool: list[list[Hypothesis]] = [[] for _ in range(batch)]
        for t in range(1, max_len + 1):
            log_probs, state = dec.step(tokens, state)
            log_probs = _forbid_specials(log_probs, dec).double().tolist()
            keep, next_rows, next_prefixes, next_scores, next_tokens = [], [], [], [], []
            for i, (b, prefix, score) in enumerate(zip(rows, prefixes, scores, strict=True)):
                for token, lp in enumerate(log_probs[i]):
                    if lp == -math.inf:
                        continue
                    seq, total = prefix + [token], score + lp
                    if token == dec.eos_id or t == max_len:
                        finished = token == dec.eos_id
                        pool[b].append(Hypothesis(total / _penalty(t, alpha), total, seq, finished))
                    else:
                        keep.append(i)
                        next_rows.append(b)
                        next_prefixes.append(seq)
                        next_scores.append(total)
                        next_tokens.append(token)
            if not keep:
                break
            if len(keep) > max_hypotheses:
                raise ValueError(
                    f"max_hypotheses: {len(keep)} open prefixes at step {t} exceed the limit "
                    f"{max_hypotheses}; exhaustive search is for tiny vocabularies and lengths"
                )
            state = dec.select(state, torch.tensor(keep, dtype=torch.long, device=device))
            rows, prefixes, scores = next_rows, next_prefixes, next_scores
            tokens = torch.tensor(next_tokens, dtype=torch.long, device=device)
    finally:
        if was_training:
            model.train()
    return [sorted(p, reverse=True)[:n_best] for p in pool]


@torch.no_grad()
def sequence_log_prob(model: Any, src: Any, tokens: Sequence[int] | Tensor) -> float:
    """Log-probability the model gives to the output ``tokens`` (no BOS) for one source.

    Computed step by step through the protocol, so it works for a :class:`TableDecoder`
    (for which it is ``log`` of the product of the table's entries) as well as a model.
    ``src``: one source, ``(1, S)`` for a Transformer, ``None`` for a table.
    """
    tokens = tokens.tolist() if isinstance(tokens, Tensor) else list(tokens)
    dec = as_decoder(model)
    state = dec.start(src)
    device = _device(src)
    total = 0.0
    for prev, tok in zip(itertools.chain([dec.bos_id], tokens), tokens, strict=False):
        log_probs, state = dec.step(torch.tensor([prev], device=device), state)
        total += float(log_probs[0, tok])
    return total
