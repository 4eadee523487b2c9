"""Tests for lecturekit.chapters.ch06_exposure: teacher-forced vs free-running errors."""

import math

import pytest
import torch

from lecturekit.chapters.ch06_exposure import (
    error_after_mistake,
    exposure_report,
    free_running_predictions,
    teacher_forced_predictions,
)
from lecturekit.decoding import greedy


def _brute_force_split(pred, gold, pad):
    B, T = gold.shape
    stats = {"clean": [[0, 0] for _ in range(T)], "after": [[0, 0] for _ in range(T)]}
    for b in range(B):
        for t in range(T):
            if gold[b, t] == pad:
                continue
            bad_prefix = any(pred[b, u] != gold[b, u] for u in range(t) if gold[b, u] != pad)
            group = stats["after" if bad_prefix else "clean"][t]
            group[0] += int(pred[b, t] != gold[b, t])
            group[1] += 1
    return [[e / n if n else math.nan for e, n in stats[key]] for key in ("clean", "after")], [
        [n for _, n in stats[key]] for key in ("clean", "after")
    ]


def test_error_after_mistake_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    gold = torch.randint(3, 6, (40, 7), generator=g)
    gold[torch.rand(40, 7, generator=g) < 0.2] = 0
    gold = torch.where(torch.cumsum((gold == 0).long(), 1) > 0, torch.zeros_like(gold), gold)
    pred = torch.where(
        torch.rand(40, 7, generator=g) < 0.3, torch.randint(3, 6, (40, 7), generator=g), gold
    )
    clean, after, n_clean, n_after = error_after_mistake(pred, gold, pad_id=0)
    (exp_clean, exp_after), (exp_nc, exp_na) = _brute_force_split(pred, gold, 0)
    assert n_clean == exp_nc and n_after == exp_na
    for got, exp in ((clean, exp_clean), (after, exp_after)):
        for a, b in zip(got, exp, strict=True):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def test_error_after_mistake_rejects_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        error_after_mistake(
            torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long)
        )
    with pytest.raises(TypeError, match="dtype"):
        error_after_mistake(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))


def test_predictions_agree_with_model_and_greedy(tiny_model):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, 9, (4, 5), generator=g)
    tgt_in = torch.cat(
        [torch.ones(4, 1, dtype=torch.long), torch.randint(3, 9, (4, 5), generator=g)], 1
    )
    tf = teacher_forced_predictions(tiny_model, src, tgt_in)
    assert torch.equal(tf, tiny_model(src, tgt_in).argmax(-1))
    fr = free_running_predictions(tiny_model, src, 6)
    ref = greedy(tiny_model, src, 6).tokens
    assert fr.shape == (4, 6)
    assert torch.equal(fr[:, : ref.shape[1]], ref)
    assert (fr[:, ref.shape[1] :] == tiny_model.config.pad_id).all()
    with pytest.raises(ValueError, match="length"):
        free_running_predictions(tiny_model, src, 0)


def test_exposure_report_is_consistent(tiny_model):
    g = torch.Generator().manual_seed(2)
    src = torch.randint(3, 9, (30, 4), generator=g)
    gold = torch.randint(3, 9, (30, 5), generator=g)
    tgt_in = torch.cat([torch.ones(30, 1, dtype=torch.long), gold], 1)
    tgt_out = torch.cat([gold, torch.full((30, 1), 2)], 1)
    r = exposure_report(tiny_model, src, tgt_in, tgt_out, min_count=1)
    fr = free_running_predictions(tiny_model, src, 6)
    assert r.free_running == pytest.approx((fr != tgt_out).float().mean(0).tolist())
    assert r.token_error_free_running == pytest.approx((fr != tgt_out).float().mean().item())
    assert r.exact_match == pytest.approx((fr == tgt_out).all(1).float().mean().item())
    # position 0 has an empty prefix: every row is "clean" there and errors match
    assert r.clean_count[0] == 30 and r.after_count[0] == 0
    assert r.clean[0] == pytest.approx(r.free_running[0])
    with pytest.raises(ValueError, match="same shape"):
        exposure_report(tiny_model, src, tgt_in[:, :-1], tgt_out)
