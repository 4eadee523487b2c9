"""Decoding strategies that choose one token per step: greedy search and sampling (p53-p54).

Every strategy runs on the incremental-decoder protocol of :mod:`lecturekit.decoding.protocol`,
so the same code decodes a trained :class:`lecturekit.Transformer` (through its KV cache) and
a :class:`lecturekit.decoding.table.TableDecoder`. Beam search and exhaustive search are in
:mod:`lecturekit.decoding.beam`.

All strategies forbid PAD and BOS as outputs (their log-probabilities are set to ``-inf``,
without renormalising the others, so a hypothesis' score is still the sum of the model's own
token log-probabilities). Generated sequences exclude BOS and include EOS when one was
produced; rows that stopped earlier are right-padded with ``pad_id``. Every strategy returns
one :class:`Decoded` and runs the model in eval mode (no dropout), restoring its mode after.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lecturekit._common import (
    MAX_SEED,
    check_allocation,
    check_bool,
    check_int,
    check_number,
    check_type,
    eval_mode,
)
from lecturekit.decoding.protocol import IncrementalDecoder, as_decoder

__all__ = ["Decoded", "greedy", "sample", "filter_logits", "sequence_log_prob"]

# below this, log-probs / temperature could overflow to -inf in a whole row (greedy() is the
# limit 0)
MIN_TEMPERATURE = 1e-6
# above this every allowed token is equally likely to within 1e-4 (finite float32 log-probs
# are >= about -104, so log-probs / temperature differ by < 1e-4), and a float32 division by
# more than 3.4e38 gives -inf / inf = NaN: the limit infinity is uniform sampling
MAX_TEMPERATURE = 1e6
# Sinusoidal positions (Vaswani et al., section 3.5) have wavelengths from 2*pi to
# 10000*2*pi: past the longest, 62,832 positions, the slowest pair of dimensions repeats, so
# a longer output lies beyond anything the encoding was designed to tell apart. Every decoding
# strategy refuses a longer max_len up front (a model that never emits EOS would otherwise
# decode, and grow its cache, for as long as max_len allows).
MAX_DECODE_LEN = math.ceil(2 * math.pi * 10_000)


@dataclass
class Decoded:
    """What every decoding strategy returns.

    * ``tokens``: ``(B, T)`` long, the (best) output of each source: no BOS, EOS included when
      produced, ``pad_id`` after it.
    * ``scores``: ``(B,)`` float64: the output's log-probability under the model (greedy,
      sampling), or its ranking score ``log P / length_penalty`` (beam and exhaustive search).
    * ``hypotheses``: beam and exhaustive search only: per source its ``n_best``
      :class:`lecturekit.decoding.beam.Hypothesis` objects, best first (else None).
    * ``trace``: beam search with ``trace=True`` only: ``trace[b][t]`` lists the prefixes kept
      after step ``t + 1`` (for drawing the search tree; else None).
    """

    tokens: Tensor
    scores: Tensor
    hypotheses: list[list[Any]] | None = None
    trace: list[list[list[Any]]] | None = None


def forbid_specials(
    log_probs: Tensor,
    dec: IncrementalDecoder,
    dtype: torch.dtype | None = None,
    *,
    forbid_eos: bool = False,
) -> Tensor:
    """A copy of ``log_probs (N, V)`` with PAD and BOS set to ``-inf`` (never generated),
    and EOS too when ``forbid_eos`` (before ``min_len``), converted to ``dtype`` on the way
    (one copy, not two)."""
    log_probs = log_probs.to(dtype or log_probs.dtype, copy=True)
    log_probs[:, dec.pad_id] = -math.inf
    if dec.bos_id != dec.eos_id:
        log_probs[:, dec.bos_id] = -math.inf
    if forbid_eos:
        log_probs[:, dec.eos_id] = -math.inf
    return log_probs


def stable_topk(values: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """The ``n`` largest of ``values (B, N)`` and their indices, ties by lower index first:
    the first ``n`` of a stable descending sort, without sorting all ``N`` (``topk``)."""
    top, index = values.topk(n, dim=-1)  # ties in no defined order
    # more than n values >= the n-th: some tied with it were left out, and which ones topk
    # kept is arbitrary (the lower indices must win), so sort them all; rare but in tables
    if bool(((values >= top[:, -1:]).sum(-1) > n).any()):
        top, index = torch.sort(values, dim=-1, descending=True, stable=True)
        return top[:, :n], index[:, :n]
    # order the kept ones by (value descending, index ascending): by index, then stably
    index, order = index.sort(dim=-1)
    top, order = top.gather(-1, order).sort(dim=-1, descending=True, stable=True)
    return top, index.gather(-1, order)


def check_max_len(dec: IncrementalDecoder, max_len: Any, rows: int) -> None:
    """Refuse a ``max_len`` no decoding can reasonably run to, before the first step.

    Two bounds: ``MAX_DECODE_LEN`` (62,832: the longest wavelength of the sinusoidal
    positions) for every decoder; for a Transformer also the memory its KV cache would need
    after ``max_len`` steps (``rows`` decoder rows x layers x keys and values x d_model),
    which must fit in the memory of the device the model is on.
    """
    check_int("max_len", max_len, 1, MAX_DECODE_LEN)
    model: Any = getattr(dec, "model", None)  # the model a decoder wraps, if any
    config = getattr(model, "config", None)
    parameter = next(model.parameters(), None) if hasattr(model, "parameters") else None
    if config is None or parameter is None:
        return
    need = rows * max_len * config.n_decoder_layers * 2 * config.d_model
    need *= parameter.element_size()
    check_allocation(
        f"max_len must be small enough for the KV cache to fit in memory: {max_len:,} steps "
        f"over {rows:,} rows",
        need,
        "use a smaller max_len",
        parameter.device,
    )


def start(dec: IncrementalDecoder, src: Any, *, src_key_padding_mask: Tensor | None) -> tuple:
    """``(state, batch size, device)`` of a decoding run over ``src``."""
    state = dec.start(src, src_key_padding_mask=src_key_padding_mask)
    if isinstance(state, list):
        batch = len(state)
    elif isinstance(src, Tensor):
        batch = src.shape[0]
    else:
        batch = src if isinstance(src, int) else 1
    device = src.device if isinstance(src, Tensor) else torch.device("cpu")
    return state, batch, device


@torch.no_grad()
def greedy(
    model: Any,
    src: Any,
    max_len: int,
    *,
    min_len: int = 0,
    src_key_padding_mask: Tensor | None = None,
    use_cache: bool = True,
) -> Decoded:
    """Greedy decoding: at each step take the most probable next token (p24, p53).

    Args:
        model: a :class:`lecturekit.Transformer` or any :class:`IncrementalDecoder`.
        src: source token ids ``(B, S)`` (padded with ``pad_id``); for a
            :class:`TableDecoder`, ``None`` or a batch size.
        max_len: maximum number of generated tokens (EOS included), at most
            ``MAX_DECODE_LEN`` (62,832) and small enough for the KV cache to fit in the
            device's memory (see :func:`check_max_len`).
        min_len: EOS is not allowed as any of the first ``min_len`` tokens (0 to
            ``max_len``). When the output length is known (an input method writes one
            character per syllable), ``min_len = max_len = n`` gives exactly ``n`` tokens, no
            EOS, and ``scores`` are then ``log P`` of those tokens without the EOS term.
        src_key_padding_mask: ``(B, S)`` bool, True = padding; derived from ``pad_id`` when
            omitted.
        use_cache: decode with the KV cache (True) or recompute the prefix each step.

    Returns:
        :class:`Decoded`: ``tokens (B, T)``, ``T <= max_len``, and ``scores (B,)``, each row's
        log-probability.
    """
    check_int("max_len", max_len, minimum=1)
    check_int("min_len", min_len, 0, max_len)

    def most_probable(log_probs: Tensor) -> Tensor:
        return log_probs.argmax(dim=-1)

    return _token_by_token(
        model, src, max_len, most_probable, src_key_padding_mask, use_cache, min_len
    )


def _token_by_token(
    model: Any,
    src: Any,
    max_len: int,
    choose: Callable[[Tensor], Tensor],
    src_key_padding_mask: Tensor | None,
    use_cache: bool,
    min_len: int = 0,
) -> Decoded:
    """The loop greedy and sampling share: ``choose`` maps log-probs ``(B, V)`` to ``(B,)``;
    EOS is not allowed as one of the first ``min_len`` tokens.

    Finished rows get ``pad_id`` and stop adding to their score; stops when every row has
    produced EOS or after ``max_len`` tokens.
    """
    check_bool("use_cache", use_cache)
    dec = as_decoder(model, use_cache=use_cache)
    check_max_len(dec, max_len, src.shape[0] if isinstance(src, Tensor) else 1)
    # inference mode: no autograd bookkeeping at all (cheaper than no_grad for many small ops)
    with eval_mode(model), torch.inference_mode():
        state, batch, device = start(dec, src, src_key_padding_mask=src_key_padding_mask)
        tokens = torch.full((batch,), dec.bos_id, dtype=torch.long, device=device)
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        scores = torch.zeros(batch, dtype=torch.float64, device=device)
        out = []
        for t in range(1, max_len + 1):
            log_probs, state = dec.step(tokens, state)
            log_probs = forbid_specials(log_probs, dec, forbid_eos=t <= min_len)
            chosen = choose(log_probs)
            gained = log_probs.gather(1, chosen[:, None]).squeeze(1).double()
            scores += torch.where(done, torch.zeros_like(gained), gained)
            tokens = torch.where(done, torch.full_like(chosen, dec.pad_id), chosen)
            out.append(tokens)
            done |= tokens == dec.eos_id
            if bool(done.all()):
                break
    # built outside inference mode: ordinary tensors, which callers may modify in place
    return Decoded(tokens=torch.stack(out, dim=1), scores=scores.clone())


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """Set to ``-inf`` the logits that top-k / top-p (nucleus) sampling excludes (p54).

    ``top_k`` keeps exactly the k largest logits of each row. ``top_p`` keeps the smallest
    set of most probable tokens whose total probability reaches ``top_p`` (Holtzman et al.,
    2020); the most probable token is always kept. For both, ties at the boundary keep the
    lower token index first, so the result does not depend on the sort implementation.

    Args:
        logits: ``(N, V)``.
    Returns:
        ``(N, V)``, a filtered copy.
    """
    check_int("top_k", top_k, minimum=1, optional=True)
    check_number("top_p", top_p, 0.0, 1.0, exclusive=("minimum",), optional=True)
    check_type("logits", logits, Tensor, "a float tensor (N, V)")
    if bool(torch.isnan(logits).any()):  # a NaN would be kept and sampled as if it were likely
        raise ValueError("logits must not contain NaN (-inf marks an excluded token), got NaN")
    logits = logits.clone()
    if top_k is not None and top_k < logits.shape[-1]:
        kept = stable_topk(logits, top_k)[1]
        drop = torch.ones_like(logits, dtype=torch.bool).scatter(-1, kept, False)
        logits.masked_fill_(drop, -math.inf)
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
        probs = torch.softmax(sorted_logits.double(), dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the strictly more probable tokens
        drop_sorted = before >= top_p  # the set already reached top_p without this token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits.masked_fill_(drop, -math.inf)
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
    use_cache: bool = True,
) -> Decoded:
    """Ancestral sampling with temperature, top-k and top-p (p54).

    Each step draws the next token from ``softmax(logits / temperature)`` restricted by
    :func:`filter_logits`. Reproducible: pass ``seed`` (a fresh generator seeded with it) or
    your own ``generator``; the same seed gives the same samples.

    Args:
        model, src, max_len, src_key_padding_mask, use_cache: as in :func:`greedy`.
        temperature: in ``[MIN_TEMPERATURE, MAX_TEMPERATURE]`` (1e-6 to 1e6); below 1
            sharpens, above 1 flattens the distribution (its limit 0 is :func:`greedy`; at
            1e6 it is uniform over the allowed tokens to within 1e-4).
        top_k: keep only the k most probable tokens (None = all).
        top_p: keep the smallest set of tokens whose probability reaches ``top_p``.
        seed / generator: randomness source (at most one of them).

    Returns:
        :class:`Decoded`: ``tokens (B, T)`` as in :func:`greedy` and ``scores (B,)``, the
        model's log-probability of each sample (unaffected by temperature and filtering).
    """
    check_int("max_len", max_len, minimum=1)
    check_number("temperature", temperature, MIN_TEMPERATURE, MAX_TEMPERATURE)
    check_int("top_k", top_k, minimum=1, optional=True)
    check_number("top_p", top_p, 0.0, 1.0, exclusive=("minimum",), optional=True)
    # torch.Generator.manual_seed takes at most 64 bits; the bound fit's seed has, named
    check_int("seed", seed, 0, MAX_SEED, optional=True)
    if generator is not None:
        check_type("generator", generator, torch.Generator, "a torch.Generator or None")
    if seed is not None and generator is not None:
        raise ValueError("seed and generator must not both be given, got both")
    if generator is None:
        generator = torch.Generator(device=src.device if isinstance(src, Tensor) else "cpu")
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()

    def draw(log_probs: Tensor) -> Tensor:
        filtered = filter_logits(log_probs / temperature, top_k, top_p)
        probs = torch.softmax(filtered.double(), dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    return _token_by_token(model, src, max_len, draw, src_key_padding_mask, use_cache)


@torch.no_grad()
def sequence_log_prob(model: Any, src: Any, tokens: Sequence[Any] | Tensor) -> float | Tensor:
    """Log-probability the model gives to the output ``tokens`` (no BOS) of each source.

    Computed step by step through the protocol, so it works for a :class:`TableDecoder`
    (for which it is ``log`` of the product of the table's entries) as well as a model, which
    scores in eval mode (no dropout) like every decoding strategy.

    One source: ``src`` ``(1, S)`` for a Transformer (``None`` for a table) and ``tokens`` one
    sequence; returns a float. A batch: ``src`` ``(B, S)`` and ``tokens`` ``(B, T)`` (a tensor
    or B sequences, e.g. ``Decoded.tokens``); returns ``(B,)`` float64, row ``b`` the value of
    source ``b`` alone (its tokens up to its first EOS; the padding after it is not scored).
    """
    rows = src.shape[0] if isinstance(src, Tensor) and src.dim() == 2 else 1
    if isinstance(tokens, Tensor) and tokens.dim() == 2 or _nested(tokens):
        sequences = tokens.tolist() if isinstance(tokens, Tensor) else [list(t) for t in tokens]
        if len(sequences) != rows:
            raise ValueError(
                f"tokens must hold one sequence per source ({rows}), got {len(sequences)}"
            )
        eos = as_decoder(model).eos_id
        values = [
            _sequence_log_prob(model, src[b : b + 1] if rows > 1 else src, _until(seq, eos))
            for b, seq in enumerate(sequences)
        ]
        return torch.tensor(values, dtype=torch.float64)
    if rows != 1:
        raise ValueError(
            f"tokens must be one sequence per source: src has {rows} rows, got a single "
            f"sequence; pass tokens of shape ({rows}, T) (e.g. Decoded.tokens)"
        )
    return _sequence_log_prob(model, src, tokens)


def _nested(tokens: Any) -> bool:
    """True for a list of sequences (a batch of outputs), not one sequence of ids."""
    return (
        not isinstance(tokens, Tensor)
        and len(tokens) > 0
        and all(isinstance(t, (list, tuple, Tensor)) for t in tokens)
    )


def _until(sequence: list[Any], eos_id: int) -> list[Any]:
    """``sequence`` up to and including its first EOS (what follows is padding)."""
    return sequence[: sequence.index(eos_id) + 1] if eos_id in sequence else sequence


def _sequence_log_prob(model: Any, src: Any, tokens: Sequence[int] | Tensor) -> float:
    tokens = tokens.tolist() if isinstance(tokens, Tensor) else list(tokens)
    dec = as_decoder(model)
    outside = [t for t in tokens if isinstance(t, bool) or not 0 <= t < dec.vocab_size]
    if outside:  # checked here once: the steps below do not check their tokens
        raise ValueError(f"tokens must be ids in [0, {dec.vocab_size}), got {outside[0]!r}")
    total = 0.0
    with eval_mode(model), torch.inference_mode():
        state, _, device = start(dec, src, src_key_padding_mask=None)
        for prev, tok in zip(itertools.chain([dec.bos_id], tokens), tokens, strict=False):
            log_probs, state = dec.step(torch.tensor([prev], device=device), state)
            total += float(log_probs[0, tok])
    return total
