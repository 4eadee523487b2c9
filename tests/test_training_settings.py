"""Training settings: every config is frozen with one validator, each field has one rule
wherever it is read, and fit refuses careless data with a clear error (issues 27 and 28)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from lecturekit.data import collate
from lecturekit.training import (
    KeepLastCheckpoints,
    ScheduledSampling,
    TrainConfig,
    constant_lr,
    cosine_lr,
    fit,
    linear_warmup_lr,
    noam_lr,
    set_lr,
    teacher_forcing_prob,
)
from lecturekit.training.checks import MAX_SEED
from lecturekit.training.loop import Stopping, train_steps

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PAIRS = [([3, 4, 5], [3, 4, 5]), ([6, 7], [6, 7]), ([8], [8]), ([9, 10, 3], [9, 10, 3])]


def quiet(**fields) -> TrainConfig:
    return TrainConfig(**{"progress": False, "device": "cpu", "batch_size": 2, **fields})


# -- frozen configs, changed through dataclasses.replace ----------------------------------


@pytest.mark.parametrize(
    ("config", "field", "bad"),
    [
        (TrainConfig(), "clip_grad_norm", -1.0),
        (TrainConfig(), "lr", math.nan),
        (ScheduledSampling(), "k", math.nan),
        (KeepLastCheckpoints(every=2, keep=3), "keep", 0),
        (Stopping(max_steps=3), "max_steps", 0),
    ],
)
def test_configs_are_frozen_and_replace_validates_again(config, field, bad) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, field, bad)
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(config, **{field: bad})


def test_replace_keeps_the_conversions_of_creation() -> None:
    config = TrainConfig(betas=[0.9, 0.99], scheduled_sampling={"schedule": "linear", "k": 1.0})
    assert config.betas == (0.9, 0.99)
    assert config.scheduled_sampling == ScheduledSampling("linear", k=1.0)
    changed = dataclasses.replace(config, lr=2e-3)
    assert (changed.lr, changed.betas) == (2e-3, (0.9, 0.99))
    assert changed.scheduled_sampling is config.scheduled_sampling
    with pytest.raises(TypeError, match="scheduled_sampling"):
        TrainConfig(scheduled_sampling="linear")


# -- one rule per field, wherever it is read ---------------------------------------------


def test_max_seconds_inf_means_no_limit_in_config_stopping_and_fit(make_tiny_model) -> None:
    history = fit(make_tiny_model(), PAIRS, None, quiet(max_steps=2, max_seconds=math.inf))
    assert history.step == [1, 2]
    stopping = Stopping(max_seconds=math.inf)
    assert not stopping.budget_spent(10**9)
    # a loop with no other limit would never end: train_steps refuses it
    weight = torch.nn.Parameter(torch.tensor(1.0))
    with pytest.raises(ValueError, match="max_seconds"):
        train_steps(lambda step: weight.square(), torch.optim.SGD([weight], lr=0.1), stopping)


def test_stopping_restarted_keeps_the_rules_and_restarts_the_clock() -> None:
    stopping = Stopping(max_steps=3, max_seconds=0.0)
    restarted = stopping.restarted()
    assert (restarted.max_steps, restarted.max_seconds) == (3, 0.0)
    assert restarted.start >= stopping.start and restarted is not stopping


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"schedule": "linear", "k": math.nan}, "k"),
        ({"schedule": "inverse_sigmoid", "k": math.nan}, "k"),
        ({"schedule": "exponential", "k": math.nan}, "k"),
        ({"schedule": "linear", "k": 1.0, "c": math.nan}, "c"),
        ({"schedule": "linear", "k": 1.0, "c": -0.1}, "c"),
        ({"schedule": "linear", "k": math.inf}, "k"),
        ({"min_prob": math.nan}, "min_prob"),
    ],
)
def test_scheduled_sampling_refuses_nan_settings(fields, name) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be"):
        ScheduledSampling(**fields)
    args = {"schedule": "inverse_sigmoid", "k": 300.0, "c": 0.0, "min_prob": 0.0, **fields}
    with pytest.raises(ValueError, match=f"^{name} must be"):
        teacher_forcing_prob(0, **args)


def test_scheduled_sampling_sample_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="sample must be True or False, got str"):
        ScheduledSampling(sample="no")
    assert ScheduledSampling(sample=True).sample is True


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: noam_lr(1, 8, 4, factor=math.nan), "factor"),
        (lambda: noam_lr(1, 8, 4, factor=0.0), "factor"),
        (lambda: cosine_lr(1, math.nan, 2, 4), "lr"),
        (lambda: cosine_lr(1, -1.0, 2, 4), "lr"),
        (lambda: constant_lr(1, math.inf), "lr"),
        (lambda: linear_warmup_lr(1, math.nan, 4), "lr"),
        (lambda: set_lr(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0), -1.0), "lr"),
    ],
)
def test_schedules_refuse_nan_and_non_positive_rates(call, name) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be"):
        call()


def test_linear_warmup_and_set_lr() -> None:
    lrs = [linear_warmup_lr(step, 0.5, 4) for step in range(1, 7)]
    assert lrs == [0.125, 0.25, 0.375, 0.5, 0.5, 0.5]
    assert linear_warmup_lr(1, 0.5, 0) == 0.5  # no warmup
    params = [torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))]
    optimizer = torch.optim.SGD([{"params": params[:1]}, {"params": params[1:]}], lr=1.0)
    set_lr(optimizer, 0.0)  # the end of a cosine schedule
    assert [group["lr"] for group in optimizer.param_groups] == [0.0, 0.0]


def test_adam_eps_zero_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="^adam_eps must be"):
        TrainConfig(adam_eps=0.0)
    with pytest.raises(ValueError, match="^adam_eps must be"):
        TrainConfig(adam_eps=1e-300)  # float32 rounds it to 0


def test_seed_range_is_checked_and_the_largest_seed_trains(make_tiny_model) -> None:
    for seed in (2**64, -1):
        with pytest.raises(ValueError, match=rf"^seed must be in \[0, {MAX_SEED}\]"):
            TrainConfig(seed=seed)
    history = fit(make_tiny_model(), PAIRS, None, quiet(max_steps=1, seed=MAX_SEED))
    assert math.isfinite(history.loss[0])


# -- fit's data -----------------------------------------------------------------------------


def test_fit_refuses_missing_and_unencoded_data(make_tiny_model) -> None:
    model = make_tiny_model()
    with pytest.raises(TypeError, match="train must be a TaskData.*got None"):
        fit(model, None, None, quiet(max_steps=1))
    with pytest.raises(TypeError, match=r"train\[0\] source must be a sequence of token ids"):
        fit(model, [("abc", "de")], None, quiet(max_steps=1))
    with pytest.raises(TypeError, match=r"train\[1\] must be a \(source ids, target ids\) pair"):
        fit(model, [([3], [4]), [3, 4, 5]], None, quiet(max_steps=1))
    with pytest.raises(TypeError, match="train batches must be lecturekit.data.Batch"):
        fit(model, [object()], None, quiet(max_steps=1))


def test_fit_takes_list_pairs_like_tuple_pairs(make_tiny_model) -> None:
    as_lists = [[list(src), list(tgt)] for src, tgt in PAIRS]
    runs = [fit(make_tiny_model(), data, None, quiet(max_steps=3)) for data in (PAIRS, as_lists)]
    assert runs[0].loss == runs[1].loss


def test_fit_notices_a_wrong_pad_id_in_a_later_batch(make_tiny_model) -> None:
    # the first batch has no padding at all, so it cannot show which pad_id it was built with
    no_padding = collate([([3, 4], [5, 6]), ([7, 8], [9, 3])], pad_id=10)
    padded_src = collate([([3, 4, 5], [5, 6]), ([7], [9, 3])], pad_id=10)
    padded_tgt = collate([([3, 4], [5, 6, 7]), ([7, 8], [9])], pad_id=10)
    for later in (padded_src, padded_tgt):
        mask = "src_padding_mask" if later is padded_src else "tgt_padding_mask"
        with pytest.raises(ValueError, match=f"train: the batches' {mask} .* pad_id=0"):
            fit(make_tiny_model(), [no_padding, later], None, quiet(max_steps=2))
    with pytest.raises(ValueError, match="valid: the batches' src_padding_mask"):
        fit(make_tiny_model(), [no_padding], [padded_src], quiet(max_steps=1))


def test_an_unreasonable_valid_decode_max_len_is_refused_when_the_config_is_made() -> None:
    """fit would otherwise train first and fail (or, before, hang) at the first validation
    decode; the bound is the one greedy() applies."""
    from lecturekit.decoding.search import MAX_DECODE_LEN

    TrainConfig(valid_decode_max_len=MAX_DECODE_LEN)
    with pytest.raises(ValueError, match="valid_decode_max_len must be in"):
        TrainConfig(valid_decode_max_len=10**9)
