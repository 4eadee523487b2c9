import pytest
import torch

from lecturekit.chapters.ch01_rnn import (
    context_recoverability,
    make_rnn_weights,
    module_gradient_norms,
    rnn_gradient_norms,
    run_rnn,
)


def test_weights_have_every_singular_value_equal_to_gain():
    w_h, w_x = make_rnn_weights(12, 3, 0.7, seed=3)
    assert w_h.shape == (12, 12) and w_x.shape == (12, 3)
    torch.testing.assert_close(
        torch.linalg.svdvals(w_h), torch.full((12,), 0.7, dtype=torch.float64)
    )


def test_run_rnn_matches_torch_rnn_cell():
    w_h, w_x = make_rnn_weights(6, 4, 1.2, seed=1)
    cell = torch.nn.RNNCell(4, 6, bias=False, nonlinearity="tanh").double()
    with torch.no_grad():
        cell.weight_hh.copy_(w_h)
        cell.weight_ih.copy_(w_x)
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    h = torch.zeros(3, 6, dtype=torch.float64)
    expected = []
    for t in range(5):
        h = cell(x[:, t], h)
        expected.append(h)
    torch.testing.assert_close(run_rnn(x, w_h, w_x), torch.stack(expected, dim=1))


def test_linear_rnn_gradient_scales_like_gain_to_the_distance():
    # For a linear RNN with W_h = g * Q (Q orthogonal) the gradient w.r.t. x_{T-k} is
    # g**k * u^T Q^k W_x: the ratio to the gain-1 run with the same Q, W_x, x, u is g**k.
    base = rnn_gradient_norms(12, gain=1.0, nonlinearity="linear", seed=5)
    scaled = rnn_gradient_norms(12, gain=0.8, nonlinearity="linear", seed=5)
    expected = 0.8 ** torch.arange(12, dtype=torch.float64)
    torch.testing.assert_close(scaled / base, expected, rtol=1e-6, atol=0)


def test_tanh_rnn_gradient_vanishes_with_distance_for_small_gain():
    norms = rnn_gradient_norms(30, gain=0.5)
    assert norms.shape == (30,)
    # ratio measured: 7.45e-14 on every CPU code path and 1 or 2 threads (float64: machine
    # spread 0 to 5 digits), 6.0e-15-7.5e-14 across seeds 0-3
    assert norms[-1] < 1e-8 * norms[0]


def test_input_scale_leaves_a_linear_rnn_alone_and_saturates_a_tanh_rnn():
    # a linear RNN's Jacobians do not depend on the inputs
    base = rnn_gradient_norms(20, gain=1.0, nonlinearity="linear", seed=3)
    scaled = rnn_gradient_norms(20, gain=1.0, nonlinearity="linear", seed=3, input_scale=2.0)
    torch.testing.assert_close(scaled, base)
    # a tanh RNN: larger inputs, smaller tanh', faster decay with distance
    tanh1 = rnn_gradient_norms(20, gain=1.0, seed=3)
    tanh2 = rnn_gradient_norms(20, gain=1.0, seed=3, input_scale=2.0)
    # the ratio of ratios measured: 0.0051 on every CPU code path and 1 or 2 threads (machine
    # spread 0 to 9 digits), 0.0051-0.0092 across seeds 3-6
    assert tanh2[-1] / tanh2[0] < 0.5 * (tanh1[-1] / tanh1[0])


def test_gradient_norms_match_brute_force_jacobian():
    w_h, w_x = make_rnn_weights(32, 8, 1.3, seed=0)
    norms = rnn_gradient_norms(4, gain=1.3, batch_size=1, seed=0)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1, 4, 8, generator=generator, dtype=torch.float64)
    u = torch.randn(1, 32, generator=generator, dtype=torch.float64)
    u = u / u.norm()
    jac = torch.autograd.functional.jacobian(lambda inp: run_rnn(inp, w_h, w_x)[0, -1], x)
    grad = torch.einsum("h,hbti->ti", u[0], jac)  # (T, I)
    torch.testing.assert_close(norms, grad.norm(dim=-1).flip(0))


def test_linear_context_holds_at_most_hidden_over_input_positions():
    r2 = context_recoverability(20, hidden_size=8, input_size=2, gain=1.0, nonlinearity="linear")
    assert r2.shape == (20,)
    # 8 numbers of context can explain at most 8 / 2 = 4 positions' worth of variance.
    # measured: 3.9227 on every CPU code path and 1 or 2 threads (machine spread 0 to 9
    # digits), 3.84-3.96 across seeds 0-3
    assert r2.sum() <= 4.0 + 0.1
    assert r2.sum() > 3.0
    # and exactly 4 positions fit: their 8 numbers fill the 8 of the context (a square, full
    # rank fit). Measured: R^2 = 1.0 exactly on every code path, 1 or 2 threads, seeds 0-7.
    # Not 3 positions: 6 numbers leave 2 context directions of pure rounding noise, which the
    # least-squares fit reads, so R^2 moved between 0.9974 and 1.0 with the code path and the
    # thread settings, and down to 0.972 for seed 2
    short = context_recoverability(4, hidden_size=8, input_size=2, gain=1.0, nonlinearity="linear")
    assert torch.all(short > 0.98)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"seq_len": 0}, ValueError),
        ({"seq_len": 3.0}, TypeError),
        ({"seq_len": 3, "gain": -1.0}, ValueError),
        ({"seq_len": 3, "nonlinearity": "relu"}, ValueError),
        ({"seq_len": 3, "input_scale": 0.0}, ValueError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        rnn_gradient_norms(**kwargs)


def test_run_rnn_rejects_wrong_shapes():
    w_h, w_x = make_rnn_weights(4, 3, 1.0)
    with pytest.raises(ValueError, match="x must have shape"):
        run_rnn(torch.zeros(5, 3, dtype=torch.float64), w_h, w_x)
    with pytest.raises(ValueError, match="weights do not fit"):
        run_rnn(torch.zeros(2, 5, 2, dtype=torch.float64), w_h, w_x)


def test_module_gradient_norms_matches_the_hand_written_rnn():
    w_h, w_x = make_rnn_weights(32, 8, 0.9, seed=2)
    module = torch.nn.RNN(8, 32, bias=False, batch_first=True).double()
    with torch.no_grad():
        module.weight_hh_l0.copy_(w_h)
        module.weight_ih_l0.copy_(w_x)
    expected = rnn_gradient_norms(15, gain=0.9, seed=2)
    torch.testing.assert_close(module_gradient_norms(module, 15, input_size=8, seed=2), expected)


def test_lstm_with_open_forget_gate_keeps_long_range_gradient():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 32, batch_first=True).double()
    default = module_gradient_norms(lstm, 40, input_size=8)
    with torch.no_grad():
        lstm.bias_ih_l0[32:64] = 3.0  # forget gate sigma(3) ~ 0.95
    opened = module_gradient_norms(lstm, 40, input_size=8)
    # the ratio of ratios measured: 5.86e7 on every CPU code path and 1 or 2 threads (float64:
    # machine spread 0 to 5 digits), 5.9e7-1.8e8 across seeds 0-3
    assert opened[-1] / opened[0] > 1e3 * default[-1] / default[0]


def test_module_gradient_norms_rejects_sequence_first_modules():
    with pytest.raises(ValueError, match="batch first"):
        module_gradient_norms(torch.nn.GRU(4, 4), 3, input_size=4)
