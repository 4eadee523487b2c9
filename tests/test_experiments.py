import math

import pytest
import torch
from torch import nn

from lecturekit.chapters.ch02_scaling import attention_gradient_norms, softmax_saturation
from lecturekit.chapters.ch03_stacks import (
    SequenceTagger,
    adam_first_step_norms,
    deep_mlp_stack,
    make_regression_data,
    make_reversal_batch,
    per_layer_grad_norms,
    train_regression,
    train_sequence_stack,
)


def test_scaled_scores_have_unit_std_and_unscaled_ones_sqrt_dk():
    for d_k in (4, 64):
        scaled = softmax_saturation(d_k, scaled=True, n_queries=400)
        unscaled = softmax_saturation(d_k, scaled=False, n_queries=400)
        assert scaled["score_std"] == pytest.approx(1.0, rel=0.1)
        assert unscaled["score_std"] == pytest.approx(math.sqrt(d_k), rel=0.1)


def test_unscaled_softmax_saturates_and_its_jacobian_shrinks():
    small = softmax_saturation(4, scaled=False, n_queries=400)
    large = softmax_saturation(256, scaled=False, n_queries=400)
    assert large["max_weight"] > 0.85 > small["max_weight"]
    assert large["jacobian_norm"] < 0.5 * small["jacobian_norm"]
    assert 0 <= large["entropy"] < small["entropy"] <= math.log(16)


def test_softmax_jacobian_norm_matches_autograd():
    # one query, one key set: compare with torch.autograd.functional.jacobian of softmax
    stats = softmax_saturation(8, n_keys=5, n_queries=1, seed=2)
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(1, 1, 8, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 5, 8, generator=generator, dtype=torch.float64)
    scores = (q * k).sum(-1)[0] / math.sqrt(8)
    jac = torch.autograd.functional.jacobian(lambda s: s.softmax(-1), scores)
    assert stats["jacobian_norm"] == pytest.approx(jac.norm().item(), rel=1e-9)
    assert stats["max_weight"] == pytest.approx(scores.softmax(-1).max().item(), rel=1e-9)


def test_attention_gradient_norms_match_the_closed_form():
    # with scale = 1/sqrt(d_k) (1 unscaled): dL/de_j = scale p_j (g.v_j - sum_l p_l g.v_l);
    # dL/dq = sum_j dL/de_j k_j; dL/dk_j = dL/de_j q
    for scaled, qk_std in [(False, 1.0), (True, 1.0), (False, 0.5), (True, 3.0)]:
        stats = attention_gradient_norms(
            8, n_keys=5, n_queries=1, scaled=scaled, qk_std=qk_std, seed=3
        )
        generator = torch.Generator().manual_seed(3)
        q = torch.randn(1, 1, 8, generator=generator, dtype=torch.float64)[0, 0] * qk_std
        k = torch.randn(1, 5, 8, generator=generator, dtype=torch.float64)[0] * qk_std
        v = torch.randn(1, 5, 8, generator=generator, dtype=torch.float64)[0]
        g = torch.randn(1, 1, 8, generator=generator, dtype=torch.float64)[0, 0]
        scale = 1 / math.sqrt(8) if scaled else 1.0
        p = (k @ q * scale).softmax(-1)
        gv = v @ g
        d_dots = scale * p * (gv - (p * gv).sum())
        assert stats["dot_grad"] == pytest.approx(d_dots.norm().item(), rel=1e-9)
        assert stats["query_grad"] == pytest.approx((d_dots @ k).norm().item(), rel=1e-9)
        assert stats["key_grad"] == pytest.approx(torch.outer(d_dots, q).norm().item(), rel=1e-9)


def test_the_scale_also_shrinks_the_gradient_that_reaches_the_query():
    # d_k = 1: the scale is 1, both settings are the same draw
    assert attention_gradient_norms(1, n_queries=50) == attention_gradient_norms(
        1, n_queries=50, scaled=False
    )
    scaled = attention_gradient_norms(64, n_queries=200)
    unscaled = attention_gradient_norms(64, n_queries=200, scaled=False)
    assert unscaled["query_grad"] > 2 * scaled["query_grad"]
    with pytest.raises(ValueError, match="d_k"):
        attention_gradient_norms(0)


def test_query_key_std_trades_against_the_scale():
    # q, K with std d_k^(-1/4), unscaled, give the same logits as unit std, scaled; the
    # gradient to q is sum_j dL/de_j k_j, so it differs only by the keys' factor:
    # d_k^(-1/4) against the scale's d_k^(-1/2)
    d_k = 16
    small = attention_gradient_norms(d_k, n_queries=50, scaled=False, qk_std=d_k**-0.25)
    unit = attention_gradient_norms(d_k, n_queries=50, scaled=True)
    assert small["query_grad"] == pytest.approx(unit["query_grad"] * d_k**0.25, rel=1e-9)
    # larger q and K saturate the unscaled softmax further: the ratio shrinks, then reverses
    ratios = [
        attention_gradient_norms(512, n_queries=200, scaled=False, qk_std=std)["query_grad"]
        / attention_gradient_norms(512, n_queries=200, qk_std=std)["query_grad"]
        for std in (0.5, 1.0, 3.0)
    ]
    assert ratios[0] > ratios[1] > 1 > ratios[2]
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="qk_std"):
            attention_gradient_norms(4, qk_std=bad)


def test_residual_stack_passes_more_gradient_to_the_first_layer():
    x, y = make_regression_data(64, 16)
    norms = {}
    for residual in (False, True):
        model = deep_mlp_stack(30, 16, residual=residual)
        norms[residual] = per_layer_grad_norms(
            model.blocks, lambda m=model: nn.functional.mse_loss(m(x), y)
        )
    assert len(norms[True]) == 30
    # ratio measured: 4.1e8 on every CPU code path and 1 or 2 threads (machine spread 4e-7
    # relative), 3.0e8-1.0e9 across seeds 0-3
    assert norms[True][0] > 10 * norms[False][0]


def test_deep_mlp_stack_residual_flag_changes_only_the_skip_path():
    plain = deep_mlp_stack(3, 4, residual=False, seed=1)
    res = deep_mlp_stack(3, 4, residual=True, seed=1)
    x = torch.randn(2, 4)
    h = x
    for block in plain.blocks:
        h = torch.tanh(block.linear(h))
    torch.testing.assert_close(plain(x), plain.readout(h))
    h = x
    for block in res.blocks:
        h = h + torch.tanh(block.linear(h))
    torch.testing.assert_close(res(x), res.readout(h))


def test_train_regression_reduces_loss_and_is_deterministic():
    x, y = make_regression_data(256, 16, seed=1)
    runs = [
        train_regression(
            deep_mlp_stack(2, 16, residual=True), x, y, steps=60, lr=1e-2, optimizer="adam"
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    # last / first ten measured: 0.7003 on every CPU code path and 1 or 2 threads (machine
    # spread 1e-7), 0.62-0.74 across seeds 0-3
    assert sum(runs[0][-10:]) < sum(runs[0][:10])


def test_regression_targets_are_standardised():
    _, y = make_regression_data(500, 4)
    assert y.shape == (500, 1)
    assert y.mean().abs() < 1e-5 and y.std().item() == pytest.approx(1.0, rel=1e-5)


def test_reversal_batch_labels_are_reversed_tokens():
    tokens, labels = make_reversal_batch(3, 5, 7, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == labels.shape == (3, 5)
    assert torch.equal(labels[:, 0], tokens[:, -1]) and torch.equal(labels[:, 4], tokens[:, 0])


def test_sequence_tagger_learns_reversal_with_pre_ln_layers():
    torch.manual_seed(0)
    layers = [
        nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        for _ in range(2)
    ]
    model = SequenceTagger(8, 32, layers, final_norm=nn.LayerNorm(32))
    losses = train_sequence_stack(model, vocab_size=8, seq_len=6, steps=80, lr=5e-3)
    # last / first measured: 0.00215 on every CPU code path and 1 or 2 threads (machine spread
    # 1.2e-7), 0.0020-0.0024 across seeds 0-3
    assert losses[-1] < 0.5 * losses[0]


def test_per_layer_grad_norms_matches_manual_norm():
    layer = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    (norm,) = per_layer_grad_norms([layer], lambda: layer(x).pow(2).sum())
    grad_w = torch.autograd.grad(layer(x).pow(2).sum(), [layer.weight, layer.bias])
    expected = torch.sqrt(sum(g.pow(2).sum() for g in grad_w)).item()
    assert norm == pytest.approx(expected, rel=1e-6)


def test_adam_first_step_is_lr_times_sign_whatever_the_gradient_size():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    x = torch.randn(5, 3)
    before = [p.detach().clone() for p in model.parameters()]
    small = adam_first_step_norms(model, list(model), lambda m: m(x).pow(2).sum(), lr=0.1)
    large = adam_first_step_norms(model, list(model), lambda m: 100 * m(x).pow(2).sum(), lr=0.1)
    # every parameter moves by lr * sign(g): norm lr * sqrt(number of parameters)
    assert small == pytest.approx([0.1 * (12 + 4) ** 0.5, 0.1 * (8 + 2) ** 0.5], rel=1e-4)
    assert large == pytest.approx(small, rel=1e-6)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))
    with pytest.raises(ValueError, match="layers must be modules of model"):
        adam_first_step_norms(model, [nn.Linear(3, 4)], lambda m: m(x).sum(), lr=0.1)


def test_warmup_scales_the_first_updates_linearly():
    torch.manual_seed(0)
    seen = []

    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = SequenceTagger(4, 8, [])

        def forward(self, tokens):
            return self.inner(tokens)

    model = Recorder()
    original = torch.optim.Adam.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)

    torch.optim.Adam.step = spy
    try:
        train_sequence_stack(model, vocab_size=4, seq_len=3, steps=6, lr=0.04, warmup_steps=4)
    finally:
        torch.optim.Adam.step = original
    assert seen == pytest.approx([0.01, 0.02, 0.03, 0.04, 0.04, 0.04])
    with pytest.raises(ValueError, match="warmup_steps"):
        train_sequence_stack(model, vocab_size=4, seq_len=3, steps=2, warmup_steps=-1)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        softmax_saturation(0)
    with pytest.raises(TypeError):
        deep_mlp_stack(2.5, 4, residual=True)
    with pytest.raises(ValueError, match="optimizer"):
        train_regression(nn.Linear(2, 1), torch.zeros(4, 2), torch.zeros(4, 1), optimizer="lbfgs")
    with pytest.raises(ValueError, match="same number of rows"):
        train_regression(nn.Linear(2, 1), torch.zeros(4, 2), torch.zeros(3, 1))
    with pytest.raises(ValueError, match="layers must not be empty"):
        per_layer_grad_norms([], lambda: torch.zeros(()))
    with pytest.raises(ValueError, match="tokens must have shape"):
        SequenceTagger(4, 8, [])(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        SequenceTagger(4, 8, [], max_len=2)(torch.zeros(1, 3, dtype=torch.long))


def test_chapter_experiments_train_through_the_loop_pieces(monkeypatch):
    from lecturekit.chapters import ch03_stacks
    from lecturekit.training import loop

    calls = []

    def spy(*args, **kwargs):
        calls.append(args[2].max_steps)
        return loop.train_steps(*args, **kwargs)

    monkeypatch.setattr(ch03_stacks, "train_steps", spy)
    x, y = make_regression_data(64, 4)
    train_regression(deep_mlp_stack(1, 4, residual=True), x, y, steps=2)
    tagger = SequenceTagger(5, 8, [nn.Identity()])
    train_sequence_stack(tagger, vocab_size=5, seq_len=3, steps=3)
    assert calls == [2, 3]
