"""Training: the loss against float64 references, the schedules, and fit() end to end."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from lecturekit.training import (
    History,
    TrainConfig,
    constant_lr,
    evaluate,
    fit,
    label_smoothed_nll,
    learning_rate,
    noam_lr,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def reference_loss(logits: torch.Tensor, target: torch.Tensor, eps: float, pad: int) -> float:
    """Float64, loop over tokens: cross-entropy with the smoothed target distribution."""
    total, count = 0.0, 0
    v = logits.shape[-1]
    for row, label in zip(logits.reshape(-1, v).double(), target.reshape(-1).tolist(), strict=True):
        if label == pad:
            continue
        log_p = row - torch.logsumexp(row, 0)
        q = torch.full((v,), eps / v, dtype=torch.float64)
        q[label] += 1.0 - eps
        total += float(-(q * log_p).sum())
        count += 1
    return total / count


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothed_nll_matches_references(eps: float) -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 7, 11, generator=gen) * 3
    target = torch.randint(1, 11, (4, 7), generator=gen)
    target[0, 4:] = 0
    target[2, 1:] = 0
    ours = label_smoothed_nll(logits, target, eps, ignore_index=0)
    assert float(ours) == pytest.approx(reference_loss(logits, target, eps, 0), rel=1e-5)
    torch_ref = F.cross_entropy(
        logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, label_smoothing=eps
    )
    assert torch.allclose(ours, torch_ref, atol=1e-5)
    n = int((target != 0).sum())
    total = label_smoothed_nll(logits, target, eps, reduction="sum")
    assert float(total) == pytest.approx(float(ours) * n, rel=1e-5)
    per_token = label_smoothed_nll(logits, target, eps, reduction="none")
    assert (per_token[target == 0] == 0).all()


def test_label_smoothed_nll_gradient_ignores_padding() -> None:
    logits = torch.randn(2, 5, 6, requires_grad=True)
    target = torch.tensor([[3, 4, 0, 0, 0], [5, 0, 0, 0, 0]])
    label_smoothed_nll(logits, target, 0.1).backward()
    assert (logits.grad[target == 0] == 0).all()
    assert (logits.grad[target != 0].abs().sum(-1) > 0).all()


def test_label_smoothed_nll_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="logits/target"):
        label_smoothed_nll(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_nll(torch.zeros(2, 5), torch.zeros(2, dtype=torch.long), smoothing=1.0)


def test_noam_lr_warmup_peak_and_decay() -> None:
    d, w = 512, 4000
    lrs = [noam_lr(s, d, w) for s in range(1, 20001)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == w
    assert lrs[w - 1] == pytest.approx((d * w) ** -0.5)
    assert lrs[99] == pytest.approx(100 * d**-0.5 * w**-1.5)  # linear warmup
    assert lrs[15999] / lrs[3999] == pytest.approx(0.5)  # 1/sqrt(step): 4x steps, half lr
    assert noam_lr(10, d, w, factor=2.0) == pytest.approx(2 * noam_lr(10, d, w))
    with pytest.raises(ValueError, match="step"):
        noam_lr(0, d, w)


def test_constant_lr_and_config_dispatch() -> None:
    assert constant_lr(5, 3e-4) == 3e-4
    cfg = TrainConfig(schedule="constant", lr=2e-3)
    assert learning_rate(1, cfg, 64) == learning_rate(1000, cfg, 64) == 2e-3
    cfg = TrainConfig(warmup_steps=10, lr_factor=0.5)
    assert learning_rate(10, cfg, 64) == pytest.approx(0.5 * (64 * 10) ** -0.5)


def test_train_config_validates() -> None:
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="cosine")
    with pytest.raises(ValueError, match="batch_size"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.5)


# ----------------------------------------------------------------------------------------
# fit() on a tiny copy task
# ----------------------------------------------------------------------------------------


def tiny_setup(seed: int = 0, n_train: int = 256):
    from lecturekit import Transformer, TransformerConfig
    from lecturekit.data import make_task

    task = make_task("copy", n_train=n_train, n_valid=32, n_test=8, seed=seed)
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        src_vocab_size=len(task.src_vocab),
        tgt_vocab_size=len(task.tgt_vocab),
        d_model=32,
        n_heads=2,
        d_ff=64,
        n_encoder_layers=1,
        n_decoder_layers=1,
        dropout=0.1,
        max_len=32,
    )
    return task, Transformer(cfg)


def test_fit_same_seed_same_losses() -> None:
    config = TrainConfig(epochs=1, batch_size=32, warmup_steps=4, progress=False, seed=3)
    task, initial = tiny_setup()
    losses = []
    for _ in range(2):
        history = fit(copy.deepcopy(initial), task.encoded("train"), None, config)
        losses.append(history.loss)
    assert len(losses[0]) == 8
    assert losses[0] == losses[1]
    other_config = TrainConfig(**{**config.to_dict(), "seed": 4})
    other = fit(copy.deepcopy(initial), task.encoded("train"), None, other_config)
    assert other.loss != losses[0]


def test_fit_learns_and_records_history() -> None:
    task, model = tiny_setup(n_train=512)
    config = TrainConfig(
        epochs=3,
        batch_size=32,
        schedule="constant",
        lr=3e-3,
        progress=False,
        eval_every=24,
    )
    history = fit(model, task.encoded("train"), task.encoded("valid"), config)
    assert isinstance(history, History)
    assert len(history.step) == len(history.loss) == len(history.lr) == 48
    first, last = sum(history.loss[:10]) / 10, sum(history.loss[-10:]) / 10
    assert last < 0.85 * first
    assert history.eval_step == [24, 48]
    assert history.valid_token_accuracy[-1] > history.valid_token_accuracy[0]
    assert history.lr[:3] == [learning_rate(s, config, 32) for s in (1, 2, 3)]
    assert all(0 <= em <= 1 for em in history.valid_exact_match)
    assert not model.training
    fig = history.plot()
    assert len(fig.axes) == 3


def test_fit_stops_at_max_steps_and_evaluate_matches_manual_count(capsys) -> None:
    task, model = tiny_setup()
    history = fit(model, task, config=TrainConfig(max_steps=3, progress=True, batch_size=16))
    assert "training" in capsys.readouterr().err  # the tqdm progress bar
    assert history.step == [1, 2, 3]
    assert history.eval_step == [3]
    metrics = evaluate(model, task.loader("valid", batch_size=8))
    assert metrics["exact_match"] == pytest.approx(history.valid_exact_match[0])
    from lecturekit.decoding import greedy

    exact = total = 0
    for batch in task.loader("valid", batch_size=32):
        out = greedy(model, batch.src, batch.tgt_out.shape[1] + 2)
        for pred, gold in zip(out.tolist(), batch.tgt_out.tolist(), strict=True):
            exact += 2 in pred and task.decode_tgt(pred) == task.decode_tgt(gold)
            total += 1
    assert metrics["exact_match"] == pytest.approx(exact / total)


def test_fit_rejects_bad_arguments() -> None:
    task, model = tiny_setup()
    with pytest.raises(TypeError, match="config"):
        fit(model, task, config={"epochs": 1})
    with pytest.raises(TypeError, match="train"):
        fit(model, 42, config=TrainConfig(progress=False))


def test_small_config_and_small_train_config_defaults_and_overrides() -> None:
    from lecturekit import Transformer
    from lecturekit.training import small_config, small_train_config

    cfg = small_config(14, 19, n_decoder_layers=3)
    assert (cfg.src_vocab_size, cfg.tgt_vocab_size, cfg.n_decoder_layers) == (14, 19, 3)
    assert cfg.d_model % cfg.n_heads == 0
    assert Transformer(cfg)(torch.tensor([[4, 5]]), torch.tensor([[1, 6]])).shape == (1, 2, 19)
    train = small_train_config(batch_size=7)
    assert train.batch_size == 7 and train.schedule == "noam"
