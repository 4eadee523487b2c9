"""Batched beam search against a one-hypothesis-at-a-time reference, and its candidate step.

``beam_search`` advances all sources and beams with tensor operations. The reference below
is the definition written as plain Python loops over one source's hypotheses; on a decoder
whose distributions are exact and differ between sources (so sources stop at different
steps), the two must agree exactly: tokens, scores, log-probabilities, order (ties
included), finished flags, n-best lists and traces.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

from lecturekit.decoding import Hypothesis, beam_search, beam_step, length_penalty

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class HashedDecoder:
    """A protocol decoder whose next-token distribution is a seeded random function of
    (source, prefix). ``levels`` small gives many exactly tied probabilities; ``eos_weight``
    makes EOS more or less likely. Ids 0-2 are PAD, BOS, EOS, then ``symbols`` more."""

    pad_id, bos_id, eos_id = 0, 1, 2

    def __init__(self, symbols: int = 3, levels: int = 1000, eos_weight: float = 1.0) -> None:
        self.vocab_size = 3 + symbols
        self.levels, self.eos_weight = levels, eos_weight

    def distribution(self, source: int, prefix: tuple[int, ...]) -> torch.Tensor:
        """Log-probabilities ``(V,)`` after ``prefix``; the same whichever batch asks."""
        gen = torch.Generator().manual_seed(hash((source, prefix)) % 2**31)
        weights = torch.randint(1, self.levels + 1, (self.vocab_size,), generator=gen).double()
        weights[self.eos_id] *= self.eos_weight
        weights[: self.eos_id] = 0.0  # PAD and BOS are never generated
        return (weights / weights.sum()).log()

    def start(self, src: torch.Tensor, *, src_key_padding_mask=None) -> list:
        return [(source, None) for source in src.tolist()]  # None: BOS not fed yet

    def step(self, tokens: torch.Tensor, state: list) -> tuple[torch.Tensor, list]:
        new_state = []
        for tok, (source, prefix) in zip(tokens.tolist(), state, strict=True):
            if prefix is None:
                prefix = ()
            elif tok != self.pad_id:  # PAD feeds an empty slot: its prefix stays
                prefix = (*prefix, tok)
            new_state.append((source, prefix))
        return torch.stack([self.distribution(*s) for s in new_state]), new_state

    def select(self, state: list, index: torch.Tensor) -> list:
        return [state[i] for i in index.tolist()]


def penalty(length: int, alpha: float) -> float:
    return 1.0 if alpha == 0.0 else float(length_penalty(length, alpha))


def reference_beam_search(
    dec: HashedDecoder, source: int, k: int, max_len: int, alpha: float, n_best: int
) -> tuple[list[Hypothesis], list[list[Hypothesis]]]:
    """Beam search for one source, one hypothesis at a time: ``(n_best, trace)``.

    Each step ranks every (beam, token) extension by log-probability, ties by lower (beam,
    token), and takes them best first among the 2k best: one ending in EOS is finished, any
    other opens a beam, until k beams are open. The source stops when no beam is open or
    its n_best finished ones beat what the open ones can still reach."""
    beams: list[tuple[float, list[int]]] = [(0.0, [])]
    finished: list[Hypothesis] = []
    trace = []
    for t in range(1, max_len + 1):
        candidates = [
            (score + lp, j, tok)
            for j, (score, prefix) in enumerate(beams)
            for tok, lp in enumerate(dec.distribution(source, tuple(prefix)).tolist())
        ]
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep (beam, token) order
        opened = []
        for score, j, tok in candidates[: 2 * k]:
            if score == -math.inf or len(opened) == k:
                break
            seq = beams[j][1] + [tok]
            if tok == dec.eos_id:
                finished.append(Hypothesis(score / penalty(t, alpha), score, seq, True))
            else:
                opened.append((score, seq))
        beams = opened
        trace.append([Hypothesis(s / penalty(t, alpha), s, p, False) for s, p in beams])
        if not beams:
            return sorted(finished, reverse=True)[:n_best], trace
        if len(finished) >= n_best:
            worst = sorted(finished, reverse=True)[n_best - 1].score
            bound = max(penalty(t, alpha), penalty(max_len, alpha))
            if max(s for s, _ in beams) / bound <= worst:
                return sorted(finished, reverse=True)[:n_best], trace
    pool = finished + [Hypothesis(s / penalty(max_len, alpha), s, p, False) for s, p in beams]
    return sorted(pool, reverse=True)[:n_best], trace


def as_tuples(hyps: list[Hypothesis]) -> list[tuple]:
    return [(h.score, h.log_prob, h.tokens, h.finished) for h in hyps]


@pytest.mark.parametrize(
    ("k", "alpha", "n_best", "levels", "eos_weight", "max_len"),
    [
        (1, 0.0, 1, 1000, 1.0, 6),
        (2, 0.0, 2, 1000, 2.0, 6),
        (3, 0.6, 2, 1000, 1.0, 5),
        (3, 0.0, 3, 2, 1.0, 5),  # weights 1 or 2: ties everywhere
        (4, 2.0, 4, 3, 3.0, 5),
        (5, 10.0, 1, 1000, 0.5, 4),
        (2, 1.0, 1, 1, 1.0, 4),  # uniform: every candidate tied
        (24, 0.6, 6, 4, 1.0, 3),  # wider than the candidates of the first steps
    ],
)
def test_batched_beam_search_equals_the_reference_per_source(
    k: int, alpha: float, n_best: int, levels: int, eos_weight: float, max_len: int
) -> None:
    dec = HashedDecoder(levels=levels, eos_weight=eos_weight)
    sources = list(range(7))
    result = beam_search(
        dec,
        torch.tensor(sources),
        k,
        max_len,
        length_penalty=alpha,
        n_best=n_best,
        trace=True,
    )
    for b, source in enumerate(sources):
        best, trace = reference_beam_search(dec, source, k, max_len, alpha, n_best)
        assert as_tuples(result.hypotheses[b]) == as_tuples(best)
        assert [as_tuples(step) for step in result.trace[b]] == [as_tuples(s) for s in trace]
        assert result.scores[b].item() == best[0].score
        tokens = result.tokens[b].tolist()
        assert tokens[: len(best[0].tokens)] == best[0].tokens
        assert all(tok == dec.pad_id for tok in tokens[len(best[0].tokens) :])


def test_sources_that_stop_at_different_steps_decode_as_if_alone() -> None:
    """A batch in which sources stop at different steps, some of them only at max_len with
    unfinished hypotheses, gives each source what it gets alone."""
    dec = HashedDecoder(levels=50, eos_weight=0.7)
    sources = torch.arange(10)
    batched = beam_search(dec, sources, 3, 8, n_best=2, length_penalty=0.6, trace=True)
    stopped_at = {len(steps) for steps in batched.trace}
    assert len(stopped_at) > 2 and 8 in stopped_at  # several stopping steps, some at max_len
    assert any(not h.finished for hyps in batched.hypotheses for h in hyps)
    for b in range(len(sources)):
        alone = beam_search(dec, sources[b : b + 1], 3, 8, n_best=2, length_penalty=0.6)
        assert as_tuples(batched.hypotheses[b]) == as_tuples(alone.hypotheses[0])


@pytest.mark.parametrize("seed", range(3))
def test_beam_step_equals_a_stable_sort_of_all_candidates(seed: int) -> None:
    """beam_step finds the best candidates with topk and orders ties itself; it must give
    the first n of a stable descending sort, also when ties straddle the n-th place."""
    gen = torch.Generator().manual_seed(seed)
    for levels in (2, 5, 1000):  # few levels: many ties, often across the boundary
        scores = -torch.randint(0, levels, (6, 3), generator=gen).double()
        scores[0, 1:] = -math.inf  # the first step: one live beam
        log_probs = -torch.randint(0, levels, (6, 3, 7), generator=gen).double()
        log_probs[:, :, 0] = -math.inf  # a forbidden token
        candidates = (scores[:, :, None] + log_probs).reshape(6, 21)
        expected_scores, expected = torch.sort(candidates, dim=-1, descending=True, stable=True)
        for n in (1, 3, 6, 10, 21):
            top_scores, beams, tokens = beam_step(scores, log_probs, n)
            assert torch.equal(beams * 7 + tokens, expected[:, :n])
            assert torch.equal(top_scores, expected_scores[:, :n])


SRC = torch.tensor([[4, 5, 6], [7, 8, 0]])


def test_a_beam_wider_than_the_search_space_is_exhaustive_and_fast(tiny_model):
    """``beam_size=10**6`` over 3 steps gives exhaustive search's result without carrying a
    million decoder rows (it used to run past any time limit)."""
    from lecturekit.decoding.beam import exhaustive_search

    start = time.perf_counter()
    wide = beam_search(tiny_model, SRC[:1], beam_size=10**6, max_len=3, n_best=2)
    assert time.perf_counter() - start < 30
    full = exhaustive_search(tiny_model, SRC[:1], max_len=3, n_best=2)
    assert [h.tokens for h in wide.hypotheses[0]] == [h.tokens for h in full.hypotheses[0]]
    assert [h.score for h in wide.hypotheses[0]] == pytest.approx(
        [h.score for h in full.hypotheses[0]]
    )
