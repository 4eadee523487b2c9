"""The chapter 6 exercises: the reference solutions against independent references, then
students' answers: correct solutions written in different styles must pass the checker and
typical mistakes must fail it, for the reason the feedback names."""

import math

import numpy as np
import pytest
import torch
from _answer_tests import (  # noqa: F401
    test_correct_solution_passes,
    test_every_exercise_has_solutions_and_mistakes,
    test_mistake_fails_for_its_reason,
)

from lecturekit.decoding.beam import beam_search, beam_step
from lecturekit.exercises import get_exercise
from lecturekit.exercises.ch06_decoding import (
    reference_beam_step,
    reference_top_k,
    reference_top_p,
)

INF = float("-inf")


def _mass_strictly_above(logits: torch.Tensor) -> torch.Tensor:
    """(B, V): for each token, the total probability of the strictly more probable tokens."""
    probs = logits.double().softmax(-1)
    above = probs[:, None, :] > probs[:, :, None]  # [b, i, j]: token j more probable than i
    return (probs[:, None, :] * above).sum(-1)


def test_top_k_keeps_what_fewer_than_k_tokens_beat():
    g = torch.Generator().manual_seed(0)
    for k in (1, 2, 5, 9):
        logits = torch.randint(-2, 3, (4, 7), generator=g).float()
        beaten_by = (logits[:, None, :] > logits[:, :, None]).sum(-1)  # (B, V)
        expected = logits.masked_fill(beaten_by >= k, INF)
        assert torch.equal(reference_top_k(logits, k), expected)


def test_top_p_follows_its_definition_token_by_token():
    g = torch.Generator().manual_seed(1)
    for p in (0.0, 0.3, 0.6, 0.95):
        logits = torch.randint(-2, 3, (5, 6), generator=g).float()
        is_max = logits == logits.amax(-1, keepdim=True)
        expected = logits.masked_fill(~((_mass_strictly_above(logits) < p) | is_max), INF)
        assert torch.equal(reference_top_p(logits, p), expected)


def test_top_p_cases_are_far_from_the_boundary():
    """No token's mass lies within 1e-4 of p, so float32 answers decide like the reference."""
    for case in get_exercise("decoding.top_p_filter").cases():
        logits, p = case.args
        if 0 < p < 1:
            assert (_mass_strictly_above(logits) - p).abs().min() > 1e-4, case.label


# --------------------------------------------------------------------------------------
# Students' answers: correct solutions in different styles must pass, typical mistakes fail
# --------------------------------------------------------------------------------------


def top_k_threshold(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[:, -1:]
    return torch.where(logits >= kth, logits, torch.tensor(INF))


def top_k_sorted_rows(logits, k):
    out = logits.clone()
    for row in out:
        values = sorted(row.tolist(), reverse=True)
        row[row < values[min(k, len(values)) - 1]] = INF
    return out


def top_k_keeps_k_plus_one(logits, k):
    kth = torch.topk(logits, min(k + 1, logits.shape[-1]), dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, INF)


def top_k_zero_instead_of_inf(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def top_k_whole_tensor(logits, k):  # one threshold for all rows
    kth = torch.topk(logits.flatten(), min(k, logits.shape[-1])).values[-1]
    return logits.masked_fill(logits < kth, INF)


def top_k_in_place(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]
    logits[logits < kth] = INF
    return logits


def top_k_exactly_k_indices(logits, k):  # drops tied logits beyond the first k
    index = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).indices
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, True)
    return logits.masked_fill(~keep, INF)


def top_k_without_min(logits, k):  # torch.topk fails for k > V
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, INF)


def top_k_float64(logits, k):
    return top_k_threshold(logits.double(), k)


def top_p_sorted_threshold(logits, p):
    if p >= 1:
        return logits.clone()
    values, _ = logits.sort(dim=-1, descending=True)
    probs = values.softmax(-1)
    before = probs.cumsum(-1) - probs
    n_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)  # kept tokens form a prefix
    threshold = values.gather(-1, n_kept - 1)
    return logits.masked_fill(logits < threshold, INF)


def top_p_pairwise(logits, p):
    probs = logits.softmax(-1)
    above = (probs[:, None, :] * (probs[:, None, :] > probs[:, :, None])).sum(-1)
    keep = (above < p) | (probs == probs.max(-1, keepdim=True).values) | (p >= 1)
    return logits.masked_fill(~keep, INF)


def top_p_drops_crossing_token(logits, p):
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    drop_sorted = sorted_logits.double().softmax(-1).cumsum(-1) > p
    drop_sorted[..., 0] = False
    return logits.masked_fill(torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted), INF)


def top_p_unsorted(logits, p):  # cumulates in vocabulary order, not by probability
    probs = logits.double().softmax(-1)
    return logits.masked_fill(probs.cumsum(-1) - probs >= p, INF)


def top_p_threshold_on_probability(logits, p):
    return logits.masked_fill(logits.softmax(-1) < 1 - p, INF)


def top_p_by_sorted_position(logits, p):  # right except for ties: the later of two tied goes
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    probs = sorted_logits.double().softmax(-1)
    drop_sorted = probs.cumsum(-1) - probs >= p
    drop_sorted[..., 0] = False
    return logits.masked_fill(torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted), INF)


def top_p_in_place(logits, p):
    out = top_p_sorted_threshold(logits, p)
    logits.copy_(out)
    return logits


def top_p_nothing_left_for_small_p(logits, p):  # forgets that the top token always stays
    probs = logits.double().softmax(-1)
    above = (probs[:, None, :] * (probs[:, None, :] > probs[:, :, None])).sum(-1)
    return logits.masked_fill(~((above < p) | (p >= 1)), INF)


def accuracy_power(token_error, length):
    return (1 - token_error) ** length


def accuracy_float32_tensor(token_error, length):
    return torch.tensor(1 - token_error).pow(length).item()


def accuracy_numpy_product(token_error, length):
    return np.prod(np.full(length, 1 - token_error, dtype=np.float32))


def accuracy_linear(token_error, length):
    return 1 - token_error * length


def accuracy_error_power(token_error, length):
    return 1 - token_error**length


def accuracy_at_least_one_error(token_error, length):
    return 1 - (1 - token_error) ** length


def accuracy_one_step_short(token_error, length):
    return (1 - token_error) ** (length - 1)


def accuracy_through_log(token_error, length):  # log(0) fails when every step is wrong
    return math.exp(length * math.log(1 - token_error))


def score_formula(log_prob, length, alpha):
    return log_prob / ((5 + length) / 6) ** alpha


def score_numpy_float32(log_prob, length, alpha):
    return np.float32(log_prob) / np.power(np.float32((5 + length) / 6), np.float32(alpha))


def score_on_length_only(log_prob, length, alpha):
    return log_prob / length**alpha


def score_multiplied(log_prob, length, alpha):
    return log_prob * ((5 + length) / 6) ** alpha


def score_without_power(log_prob, length, alpha):
    return log_prob / (((5 + length) / 6) * alpha) if alpha else log_prob


def score_integer_division(log_prob, length, alpha):
    return log_prob / ((5 + length) // 6) ** alpha


def score_from_lecturekit(log_prob, length, alpha):  # the chapter's cell after: forbidden
    from lecturekit.decoding import length_penalty

    return log_prob / length_penalty(length, alpha)


def test_beam_step_matches_lecturekit_on_every_hidden_case():
    for case in get_exercise("decoding.beam_step").cases():
        expected = beam_step(*case.args)
        for got, want in zip(reference_beam_step(*case.args), expected, strict=True):
            assert torch.equal(got, want), case.label
        scores, log_probs = case.args
        new_scores, beams, tokens = expected
        rows = torch.arange(scores.shape[0])[:, None]
        rebuilt = scores[rows, beams] + log_probs[rows, beams, tokens]
        assert torch.equal(rebuilt, new_scores)  # each candidate is the prefix plus its token


def test_beam_step_breaks_ties_by_lower_beam_then_token_and_checks_its_arguments():
    scores = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    log_probs = torch.full((1, 2, 3), -1.0, dtype=torch.float64)
    _, beams, tokens = beam_step(scores, log_probs, 4)
    assert beams.tolist() == [[0, 0, 0, 1]] and tokens.tolist() == [[0, 1, 2, 0]]
    with pytest.raises(ValueError, match=r"scores \(B, k\)"):
        beam_step(scores[:, :1], log_probs)
    with pytest.raises(ValueError, match="n"):
        beam_step(scores, log_probs, 7)


def test_beam_search_with_beam_one_is_greedy_after_the_refactor(tiny_model):
    """beam_search runs on beam_step: beam size 1 still equals greedy search."""
    from lecturekit import greedy

    src = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 2]])
    beam = beam_search(tiny_model, src, beam_size=1, max_len=6)
    assert torch.equal(
        beam.tokens, greedy(tiny_model, src, max_len=6).tokens[:, : beam.tokens.shape[1]]
    )


def beam_flat_topk(scores, log_probs):
    b, k, v = log_probs.shape
    top, flat = (scores.unsqueeze(-1) + log_probs).flatten(1).topk(k)
    return top, torch.div(flat, v, rounding_mode="floor"), flat.remainder(v)


def beam_sorted_loop(scores, log_probs):
    b, k, v = log_probs.shape
    out = ([], [], [])
    for row in range(b):
        cand = sorted(
            (
                (float(scores[row, j] + log_probs[row, j, t]), j, t)
                for j in range(k)
                for t in range(v)
            ),
            key=lambda c: -c[0],
        )[:k]
        for part, values in zip(out, zip(*cand, strict=True), strict=True):
            part.append(list(values))
    return (torch.tensor(out[0], dtype=torch.float64), torch.tensor(out[1]), torch.tensor(out[2]))


def beam_forgets_prefix(scores, log_probs):  # ranks by the new token's log-prob only
    b, k, v = log_probs.shape
    top, flat = log_probs.reshape(b, k * v).topk(k)
    rows = torch.arange(b)[:, None]
    return scores[rows, flat // v] + top, flat // v, flat % v


def beam_best_token_per_beam(scores, log_probs):  # k candidates per beam, not per sentence
    top, tokens = log_probs.max(dim=-1)
    total = scores + top
    order = total.argsort(dim=-1, descending=True)
    return total.gather(1, order), order, tokens.gather(1, order)


def beam_index_modulo_k(scores, log_probs):  # recovers the beam with % k instead of // V
    b, k, v = log_probs.shape
    top, flat = (scores[:, :, None] + log_probs).reshape(b, k * v).topk(k)
    return top, flat % k, flat % v


def beam_flattens_token_major(scores, log_probs):  # transposes, then divides as if beam-major
    b, k, v = log_probs.shape
    top, flat = (scores[:, :, None] + log_probs).transpose(1, 2).reshape(b, k * v).topk(k)
    return top, flat // v, flat % v


def beam_float_indices(scores, log_probs):
    new_scores, beams, tokens = beam_flat_topk(scores, log_probs)
    return new_scores, beams.double(), tokens


SOLUTIONS = {
    "decoding.top_k_filter": [top_k_threshold, top_k_sorted_rows],
    "decoding.top_p_filter": [top_p_sorted_threshold, top_p_pairwise],
    "decoding.sequence_accuracy": [accuracy_power, accuracy_float32_tensor, accuracy_numpy_product],
    "decoding.length_penalised_score": [score_formula, score_numpy_float32],
    "decoding.beam_step": [beam_flat_topk, beam_sorted_loop],
}

MISTAKES = {
    "decoding.top_k_filter": [
        (top_k_keeps_k_plus_one, "数值不对"),
        (top_k_zero_instead_of_inf, "数值不对"),
        (top_k_whole_tensor, "数值不对"),
        (top_k_in_place, "修改了输入参数 logits"),
        (top_k_exactly_k_indices, "并列"),
        (top_k_without_min, "k > V"),
        (top_k_float64, "dtype 不对"),
    ],
    "decoding.top_p_filter": [
        (top_p_drops_crossing_token, "数值不对"),
        (top_p_unsorted, "数值不对"),
        (top_p_threshold_on_probability, "数值不对"),
        (top_p_by_sorted_position, "并列"),
        (top_p_in_place, "修改了输入参数 logits"),
        (top_p_nothing_left_for_small_p, "p = 0"),
    ],
    "decoding.sequence_accuracy": [
        (accuracy_linear, "期望"),
        (accuracy_error_power, "期望"),
        (accuracy_at_least_one_error, "期望"),
        (accuracy_one_step_short, "期望"),
        (accuracy_through_log, "math domain error"),
    ],
    "decoding.length_penalised_score": [
        (score_on_length_only, "期望"),
        (score_multiplied, "期望"),
        (score_without_power, "期望"),
        (score_integer_division, "期望"),
        (score_from_lecturekit, "不允许用它"),
    ],
    "decoding.beam_step": [
        (beam_forgets_prefix, "数值不对"),
        (beam_best_token_per_beam, "数值不对"),
        (beam_index_modulo_k, "数值不对"),
        (beam_flattens_token_major, "数值不对"),
        (beam_float_indices, "dtype 不对"),
    ],
}


# SOLUTIONS and MISTAKES cover every exercise of these chapters (tests/_answer_tests.py)
CHAPTERS = (6,)
