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
    cosine_lr,
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
    with pytest.raises(ValueError, match=r"logits must have shape \(\.\.\., V\)"):
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


def test_cosine_lr_warmup_then_decay_to_zero() -> None:
    lr, w, total = 6e-3, 100, 500
    lrs = [cosine_lr(s, lr, w, total) for s in range(1, 601)]
    assert lrs[49] == pytest.approx(lr * 50 / w)  # linear warmup
    assert max(lrs) == lrs[w - 1] == pytest.approx(lr)  # peak at the end of warmup
    assert lrs[w + (total - w) // 2 - 1] == pytest.approx(lr / 2)  # half way: cos(pi/2) = 0
    decay = lrs[w - 1 : total]
    assert all(a > b for a, b in zip(decay, decay[1:], strict=False))  # strictly decreasing
    assert lrs[total - 1] == pytest.approx(0.0, abs=1e-15)
    assert lrs[total:] == [0.0] * 100  # the budget is spent
    cfg = TrainConfig(schedule="cosine", lr=lr, warmup_steps=w, decay_steps=total)
    assert learning_rate(300, cfg, 64) == pytest.approx(lr / 2)
    with pytest.raises(ValueError, match="decay_steps"):
        cosine_lr(1, lr, w, w)


def test_constant_lr_and_config_dispatch() -> None:
    assert constant_lr(5, 3e-4) == 3e-4
    cfg = TrainConfig(schedule="constant", lr=2e-3)
    assert learning_rate(1, cfg, 64) == learning_rate(1000, cfg, 64) == 2e-3
    cfg = TrainConfig(warmup_steps=10, lr_factor=0.5)
    assert learning_rate(10, cfg, 64) == pytest.approx(0.5 * (64 * 10) ** -0.5)


def test_train_config_validates() -> None:
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="linear")
    with pytest.raises(ValueError, match="decay_steps"):
        TrainConfig(schedule="cosine", lr=1e-3, warmup_steps=10)  # no budget given
    with pytest.raises(ValueError, match="decay_steps"):
        TrainConfig(schedule="cosine", lr=1e-3, warmup_steps=10, decay_steps=10)
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
    # last / first measured: 0.8475 on every CPU code path (AVX-512, AVX2, default ISA; one
    # thread, as this module runs; machine spread < 1e-7), 0.81-0.86 across seeds 0-5 (seed 3
    # failed the former bound 0.85); an untrained model (lr=1e-7) gives 0.995
    assert last < 0.93 * first
    assert history.eval_step == [24, 48]
    # measured: 0.218 -> 0.298 on every code path (machine spread 0), a rise of 0.04-0.12
    # across seeds 0-5; an untrained model does not rise
    assert history.valid_token_accuracy[-1] > history.valid_token_accuracy[0]
    assert history.lr[:3] == [learning_rate(s, config, 32) for s in (1, 2, 3)]
    assert all(0 <= em <= 1 for em in history.valid_exact_match)
    assert not model.training
    from lecturekit.book.plotting import plot_training

    fig = plot_training(history)
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
        out = greedy(model, batch.src, batch.tgt_out.shape[1] + 2).tokens
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
    assert train.batch_size == 7 and train.schedule == "cosine"
    assert train.max_steps == train.decay_steps  # training ends when the rate reaches 0


# ----------------------------------------------------------------------------------------
# Careless input to fit and TrainConfig (issue #20)
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error", "pattern"),
    [
        (dict(lr=float("inf")), ValueError, r"lr must be a finite number, got inf"),
        (dict(lr="1e-3"), TypeError, r"lr must be a number, got str \('1e-3'\); write lr=1e-3"),
        (dict(lr=float("nan")), ValueError, r"lr must be a finite"),
        (dict(lr_factor=0), ValueError, r"lr_factor must be > 0.0, got 0"),
        (dict(betas=(0.9,)), ValueError, r"betas must be two numbers \(beta1, beta2\)"),
        (dict(betas=(0.9, 1.0)), ValueError, r"betas\[1\] must be in \[0.0, 1.0\), got 1.0"),
        (dict(betas=0.9), ValueError, r"betas must be two numbers"),
        (dict(epochs=True), TypeError, r"epochs must be an int, got bool"),
        (dict(max_steps=True), TypeError, r"max_steps must be an int or None, got bool"),
        (dict(eval_every=0), ValueError, r"eval_every"),
        (dict(adam_eps=float("nan")), ValueError, r"adam_eps"),
        (dict(weight_decay=-1.0), ValueError, r"weight_decay"),
        (dict(clip_grad_norm=float("inf")), ValueError, r"clip_grad_norm must be a finite"),
        (dict(max_seconds=float("nan")), ValueError, r"max_seconds"),
        (dict(target_exact_match=1.5), ValueError, r"target_exact_match"),
        (dict(seed=0.5), TypeError, r"seed must be an int"),
        (dict(progress="yes"), TypeError, r"progress must be True or False"),
        (dict(scheduled_sampling=0.5), TypeError, r"scheduled_sampling must be"),
    ],
)
def test_train_config_names_the_bad_field(fields, error, pattern) -> None:
    with pytest.raises(error, match=pattern):
        TrainConfig(**fields)


def quiet(**fields) -> TrainConfig:
    return TrainConfig(**{"progress": False, "batch_size": 32, **fields})


def test_one_shot_iterators_fail_instead_of_hanging() -> None:
    task, model = tiny_setup(n_train=96)
    loader = task.loader("train", batch_size=32)  # 3 batches

    def generator():
        yield from loader

    for data in (generator(), iter(loader)):
        with pytest.raises(ValueError, match=r"ran out after 3 steps.*max_steps <= 3"):
            fit(copy.deepcopy(model), data, None, quiet(max_steps=10))
    with pytest.raises(ValueError, match=r"train is an iterator.*epochs=5"):
        fit(model, generator(), None, quiet(epochs=5))
    assert fit(model, generator(), None, quiet(max_steps=3)).step == [1, 2, 3]
    assert len(fit(model, generator(), None, quiet(epochs=1)).step) == 3


def test_non_finite_gradients_stop_before_the_update() -> None:
    task, model = tiny_setup(n_train=64)
    before = copy.deepcopy(model.state_dict())
    model.output_proj.bias.register_hook(lambda grad: grad * float("nan"))
    with pytest.raises(FloatingPointError, match=r"gradients became nan at step 1.*not updated"):
        fit(model, task, config=quiet(max_steps=2))
    for name, value in model.state_dict().items():
        assert torch.equal(value.cpu(), before[name]), name


@pytest.mark.parametrize(("lr", "clip"), [(1e38, 1.0), (1e38, None), (1e30, 1.0)])
def test_non_finite_parameters_stop_with_the_step_and_lr(lr, clip) -> None:
    task, model = tiny_setup(n_train=64)
    config = quiet(max_steps=3, schedule="constant", lr=lr, clip_grad_norm=clip)
    with pytest.raises(FloatingPointError, match=r"parameters became (inf|nan) after the upd"):
        fit(model, task, config=config)


def test_batches_use_the_models_special_ids() -> None:
    from lecturekit import Transformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(12, 12, d_model=8, n_heads=2, d_ff=8, pad_id=11, bos_id=5, eos_id=6)
    model = Transformer(cfg)
    seen = []
    model.register_forward_pre_hook(lambda module, args: seen.append(args[1].clone()))
    pairs = [([3, 4, 7], [3, 4]), ([8, 9], [9, 7, 8])]
    fit(model, pairs, None, quiet(max_steps=1))
    tgt_in = seen[0]
    assert (tgt_in[:, 0] == 5).all()  # bos_id of the model, not the library default 1
    assert sorted(tgt_in[tgt_in == 11].tolist()) == [11]  # padding with the model's pad_id
    task, _ = tiny_setup(n_train=32)
    with pytest.raises(ValueError, match=r"TaskData's vocabularies use.*bos_id=1.*0, 5, 2"):
        fit(Transformer(TransformerConfig(13, 13, bos_id=5)), task, config=quiet(max_steps=1))
    loader = task.loader("train", batch_size=16)  # the library's default ids
    small = Transformer(TransformerConfig(13, 13, d_model=8, n_heads=2, d_ff=8, bos_id=3))
    with pytest.raises(ValueError, match=r"start with id 1, but the model's bos_id is 3"):
        fit(small, loader, None, quiet(max_steps=1))
    with pytest.raises(
        ValueError, match=r"train source ids must be in \[0, 12\), got 12 \(row 0, position 0\)"
    ):
        fit(model, [([12], [4])], None, quiet(max_steps=1))


def test_learned_positions_fail_before_training_or_evaluate_within_max_len() -> None:
    from lecturekit import Transformer, TransformerConfig

    task, _ = tiny_setup(n_train=64)  # sources up to 12 tokens, targets up to 12 (+ <eos>)

    def learned(max_len: int) -> Transformer:
        torch.manual_seed(0)
        vocab = len(task.src_vocab)
        return Transformer(
            TransformerConfig(vocab, vocab, d_model=8, n_heads=2, d_ff=8, max_len=max_len,
                              positional="learned")
        )  # fmt: skip

    history = fit(learned(13), task, config=quiet(epochs=1))  # decoding is clamped to 13
    assert history.eval_step == [2]
    with pytest.raises(ValueError, match=r"valid_decode_max_len must be <= the model's max_len"):
        fit(learned(13), task, config=quiet(epochs=1, valid_decode_max_len=20))
    with pytest.raises(ValueError, match=r"longest source has 12 tokens.*allow 8 \(max_len=8\)"):
        fit(learned(8), task, config=quiet(epochs=1))


def test_empty_validation_is_skipped_or_refused_before_training() -> None:
    from lecturekit.data import make_task

    task, model = tiny_setup(n_train=32)
    no_valid = make_task("copy", n_train=32, n_valid=0, n_test=0)
    history = fit(model, no_valid, config=quiet(epochs=1))
    assert history.step == [1] and history.eval_step == []
    with pytest.raises(ValueError, match=r"valid is empty.*valid=None"):
        fit(model, no_valid, [], quiet(epochs=1))
    with pytest.raises(ValueError, match=r"train is empty"):
        fit(model, [], None, quiet(epochs=1))
    # a one-shot iterator of validation batches is read once and serves every evaluation
    history = fit(model, task, iter(task.loader("valid")), quiet(max_steps=2, eval_every=1))
    assert history.eval_step == [1, 2]


def test_update_is_one_clipped_optimizer_step() -> None:
    from lecturekit.training.loop import update

    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    twin = copy.deepcopy(layer)
    x = torch.randn(5, 4)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    update(optimizer, layer(x).square().sum(), parameters=layer.parameters(), clip_grad_norm=0.5)
    twin(x).square().sum().backward()  # by hand: gradients scaled to norm 0.5, one SGD step
    norm = torch.cat([p.grad.flatten() for p in twin.parameters()]).norm()
    for p, q in zip(layer.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q - 0.1 * q.grad * min(1.0, 0.5 / float(norm)))
    before = [p.detach().clone() for p in layer.parameters()]
    with pytest.raises(FloatingPointError, match="gradients became nan at step 7"):
        update(optimizer, layer(x).sum() * float("nan"), step=7)  # parameters: the optimizer's
    assert all(torch.equal(a, b) for a, b in zip(before, layer.parameters(), strict=True))


def test_stopping_and_train_steps() -> None:
    from lecturekit.training.loop import Stopping, train_steps

    stopping = Stopping(max_steps=3, target_exact_match=0.9)
    assert [stopping.budget_spent(s) for s in (0, 2, 3)] == [False, False, True]
    assert stopping.target_reached({"exact_match": 0.95})
    assert not stopping.target_reached({"exact_match": 0.5})
    assert not Stopping(max_steps=3).target_reached({"exact_match": 1.0})
    with pytest.raises(ValueError, match="max_steps"):
        Stopping(max_steps=0)

    weight = torch.nn.Parameter(torch.tensor(2.0))
    optimizer = torch.optim.SGD([weight], lr=0.25)
    seen = []

    def step_loss(step: int):
        seen.append(step)
        loss = weight.square()
        return loss + 0.0 * weight, loss  # (objective, reported)

    losses = train_steps(step_loss, optimizer, Stopping(max_steps=3))
    assert seen == [1, 2, 3]
    assert losses == pytest.approx([4.0, 1.0, 0.25])  # w <- w - 0.25 * 2w halves w
    with pytest.raises(ValueError, match="stopping"):
        train_steps(step_loss, optimizer, Stopping())


def test_fit_trains_through_update(monkeypatch) -> None:
    from lecturekit.training import loop

    calls = []
    original = loop.update

    def spy(*args, **kwargs):
        calls.append(kwargs.get("clip_grad_norm"))
        return original(*args, **kwargs)

    monkeypatch.setattr(loop, "update", spy)
    task, model = tiny_setup(n_train=64)
    history = fit(model, task, config=TrainConfig(max_steps=3, batch_size=32, progress=False))
    assert len(calls) == 3 == len(history.step)
    assert calls[0] == TrainConfig().clip_grad_norm


def test_validation_pairs_are_padded_once_into_the_same_batches() -> None:
    from lecturekit.data import make_loader
    from lecturekit.training._inputs import as_batches

    task, model = tiny_setup(n_train=32)
    pairs = task.encoded("valid")
    batches = as_batches(pairs, quiet(), False, "valid", model.config)
    assert isinstance(batches, list)  # iterated again at every evaluation, padded once
    expected = list(make_loader(pairs, batch_size=32, shuffle=False))
    assert len(batches) == len(expected)
    for got, want in zip(batches, expected, strict=True):
        assert torch.equal(got.src, want.src) and torch.equal(got.tgt_out, want.tgt_out)
    assert not isinstance(as_batches(pairs, quiet(), True, "train", model.config), list)


def test_fit_and_decoding_refuse_a_model_on_the_meta_device() -> None:
    from lecturekit import Transformer, TransformerConfig
    from lecturekit.decoding import greedy

    config = TransformerConfig(
        src_vocab_size=13, tgt_vocab_size=11, d_model=16, n_heads=2, d_ff=32,
        n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=20,
    )  # fmt: skip
    with torch.device("meta"):
        model = Transformer(config)
    pairs = [([4, 5, 6], [4, 5])] * 4
    train = TrainConfig(epochs=1, batch_size=2, progress=False, device="cpu", warmup_steps=2)
    with pytest.raises(ValueError, match="meta device.*to_empty"):
        fit(model, pairs, None, train)
    with pytest.raises(ValueError, match="meta device"):
        greedy(model, torch.tensor([[4, 5, 6]]), 5)


def test_fit_accepts_integer_tensor_pairs_and_says_which_type_it_expects(make_tiny_model) -> None:
    def run(pairs):
        model = make_tiny_model()
        config = TrainConfig(epochs=1, batch_size=2, progress=False, device="cpu", warmup_steps=2)
        return fit(model, pairs, None, config).loss

    lists = [([19 % 13, 4, 5], [4, 5]), ([6, 7], [8])] * 2
    tensors = [(torch.tensor(s), torch.tensor(t)) for s, t in lists]
    assert run(tensors) == run(lists)
    with pytest.raises(TypeError, match="train\\[0\\] source must be a list of int ids or a 1-d"):
        run([(torch.tensor([4.0, 5.0]), torch.tensor([4]))] * 4)


def test_check_weights_names_the_update_that_broke_them() -> None:
    from lecturekit.training.checks import check_weights

    check_weights([torch.ones(3), torch.full((2,), 1e18)], 4, 0.1)  # large but finite
    with pytest.raises(FloatingPointError, match=r"became inf after the update of step 4 \(lr 0.1"):
        check_weights([torch.ones(2), torch.tensor([float("inf")])], 4, 0.1)
    with pytest.raises(FloatingPointError, match=r"became nan after the update of step 2"):
        check_weights([torch.tensor([float("nan")])], 2, 0.1)


@pytest.mark.parametrize("bad", [50, 11, -100, -1])
def test_label_smoothed_nll_names_a_label_outside_the_vocabulary(bad) -> None:
    logits = torch.randn(2, 3, 11)
    target = torch.tensor([[4, 5, 0], [6, bad, 7]])
    with pytest.raises(ValueError, match=rf"target must hold ids in \[0, 11\).*got {bad} at"):
        label_smoothed_nll(logits, target)
    if bad < 0:  # the fix the message suggests works
        ok = label_smoothed_nll(logits, target, ignore_index=bad)
        assert torch.isfinite(ok)


def test_label_smoothed_nll_refuses_float_targets() -> None:
    with pytest.raises(TypeError, match="target must hold integer token ids"):
        label_smoothed_nll(torch.randn(2, 5), torch.tensor([1.0, 2.0]))


def test_a_bad_label_in_a_later_batch_is_named_by_fit(make_tiny_model) -> None:
    """The first batches are fine; batch 3 has a label outside the output vocabulary."""
    from lecturekit.data import collate
    from lecturekit.training import TrainConfig, fit

    model = make_tiny_model()
    good = [([4, 5, 6], [4, 5, 6])] * 4
    bad = [([4, 5, 6], [4, 50, 6])] * 4
    batches = [collate(good), collate(good), collate(bad)]
    with pytest.raises(ValueError, match=r"must be in \[0, 11\).*got 50") as raised:
        fit(model, batches, valid=None, config=TrainConfig(epochs=1, lr=1e-3, warmup_steps=1))
    assert "IndexError" not in repr(raised.value)
