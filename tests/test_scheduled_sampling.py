"""Scheduled sampling: the three schedules and the two-pass input mixing."""

from __future__ import annotations

import math

import pytest
import torch

from lecturekit.training.scheduled_sampling import (
    ScheduledSampling,
    mix_decoder_inputs,
    teacher_forcing_prob,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_schedules_follow_bengio_formulas() -> None:
    for i in (0, 10, 500, 5000):
        assert teacher_forcing_prob(i, "linear", k=1.0, c=1e-3) == pytest.approx(
            max(0.0, 1.0 - 1e-3 * i)
        )
        assert teacher_forcing_prob(i, "exponential", k=0.999) == pytest.approx(0.999**i)
        assert teacher_forcing_prob(i, "inverse_sigmoid", k=100.0) == pytest.approx(
            100.0 / (100.0 + math.exp(i / 100.0))
        )
    assert teacher_forcing_prob(10**7, "inverse_sigmoid", k=10.0) == 0.0  # no overflow
    assert teacher_forcing_prob(10**4, "linear", k=1.0, c=1.0, min_prob=0.25) == 0.25
    ss = ScheduledSampling("exponential", k=0.99, min_prob=0.1)
    values = [ss.teacher_prob(i) for i in range(0, 1000, 50)]
    assert values == sorted(values, reverse=True) and values[-1] == 0.1


def test_schedule_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="schedule"):
        ScheduledSampling("cosine")
    with pytest.raises(ValueError, match="k"):
        ScheduledSampling("exponential", k=1.5)
    with pytest.raises(ValueError, match="k"):
        ScheduledSampling("inverse_sigmoid", k=0.5)


class ShiftModel(torch.nn.Module):
    """A fake decoder whose prediction at position t is always token 7 + t (argmax)."""

    def __init__(self, vocab: int = 20) -> None:
        super().__init__()
        self.vocab = vocab
        self.calls = 0

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        b, t = tgt.shape
        logits = torch.zeros(b, t, self.vocab)
        logits[:, torch.arange(t), 7 + torch.arange(t)] = 5.0
        return logits


def test_mixing_replaces_with_the_prediction_for_that_position() -> None:
    model = ShiftModel()
    tgt_in = torch.tensor([[1, 3, 4, 5, 6], [1, 3, 4, 0, 0]])
    src = torch.zeros(2, 3, dtype=torch.long)
    all_model = mix_decoder_inputs(model, src, tgt_in, teacher_prob=0.0)
    # input position t (t >= 1) gets the guess made at position t - 1, i.e. 7 + (t - 1)
    assert all_model.tolist() == [[1, 7, 8, 9, 10], [1, 7, 8, 0, 0]]
    assert torch.equal(mix_decoder_inputs(model, src, tgt_in, teacher_prob=1.0), tgt_in)


def test_mixing_rate_matches_teacher_prob_and_is_seeded() -> None:
    model = ShiftModel()
    tgt_in = torch.cat([torch.ones(4000, 1), torch.full((4000, 9), 3)], 1).long()
    src = torch.zeros(4000, 2, dtype=torch.long)
    gen = torch.Generator().manual_seed(0)
    mixed = mix_decoder_inputs(model, src, tgt_in, teacher_prob=0.7, generator=gen)
    kept = (mixed[:, 1:] == 3).double().mean().item()
    assert kept == pytest.approx(0.7, abs=0.01)  # 36000 coin flips: std 0.0024
    assert (mixed[:, 0] == 1).all()
    again = mix_decoder_inputs(
        model, src, tgt_in, teacher_prob=0.7, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(mixed, again)
    with pytest.raises(ValueError, match="teacher_prob"):
        mix_decoder_inputs(model, src, tgt_in, teacher_prob=1.5)


class SpecialsFirstModel(torch.nn.Module):
    """A fake decoder that rates <eos> highest, then <pad>, <bos>, token 5, then the rest."""

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*tgt.shape, 8)
        logits[..., 2], logits[..., 0], logits[..., 1], logits[..., 5] = 3.0, 2.5, 2.2, 2.0
        return logits


def test_forbid_specials_never_feeds_a_special_token() -> None:
    model = SpecialsFirstModel()
    tgt_in = torch.tensor([[1, 4, 6, 7, 0], [1, 6, 0, 0, 0]])
    src = torch.zeros(2, 3, dtype=torch.long)
    plain = mix_decoder_inputs(model, src, tgt_in, teacher_prob=0.0)
    assert plain.tolist() == [[1, 2, 2, 2, 0], [1, 2, 0, 0, 0]]  # <eos> fed mid-sentence
    kept = mix_decoder_inputs(model, src, tgt_in, teacher_prob=0.0, forbid_specials=True)
    assert kept.tolist() == [[1, 5, 5, 5, 0], [1, 5, 0, 0, 0]]  # the best other token
    many = tgt_in.repeat(500, 1)
    drawn = mix_decoder_inputs(
        model,
        src.repeat(500, 1),
        many,
        teacher_prob=0.0,
        sample=True,
        forbid_specials=True,
        generator=torch.Generator().manual_seed(0),
    )
    real = many != 0
    real[:, 0] = False
    assert (drawn[real] >= 3).all() and (drawn[~real] == many[~real]).all()
    assert len(drawn[real].unique()) == 5  # tokens 3-7 are all drawn: only 0-2 are cut


def test_forbid_specials_is_checked() -> None:
    with pytest.raises(TypeError, match="forbid_specials"):
        ScheduledSampling(forbid_specials="yes")  # type: ignore[arg-type]
    tgt_in = torch.tensor([[1, 3, 2]])

    class OnlySpecials(torch.nn.Module):
        def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            return torch.zeros(*tgt.shape, 3)  # a vocabulary of <pad>, <bos>, <eos> only

    only_specials = OnlySpecials()
    with pytest.raises(ValueError, match="forbid_specials"):
        mix_decoder_inputs(
            only_specials, torch.zeros(1, 2, dtype=torch.long), tgt_in, 0.0, forbid_specials=True
        )


def test_fit_with_scheduled_sampling_records_teacher_prob() -> None:
    from lecturekit import Transformer, TransformerConfig
    from lecturekit.data import make_task
    from lecturekit.training import TrainConfig, fit

    task = make_task("reverse", n_train=96, n_valid=16, n_test=4)
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(
            len(task.src_vocab),
            len(task.tgt_vocab),
            d_model=16,
            n_heads=2,
            d_ff=32,
            n_encoder_layers=1,
            n_decoder_layers=1,
            max_len=32,
        )
    )
    ss = ScheduledSampling("linear", k=1.0, c=0.2, forbid_specials=True)
    history = fit(
        model,
        task,
        config=TrainConfig(epochs=1, batch_size=16, progress=False, scheduled_sampling=ss),
    )
    assert history.teacher_prob == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2, 0.0], abs=1e-12)
    assert all(math.isfinite(x) for x in history.loss)
