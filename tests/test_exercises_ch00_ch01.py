"""The chapter 0 and 1 exercises: the reference solutions against independent references
(torch's softmax with the chapter's widget, autograd through a tanh RNN), then students'
answers: correct solutions written in different styles must pass the checker and typical
mistakes must fail it."""

import numpy as np
import torch
from _answer_tests import (  # noqa: F401
    test_correct_solution_passes,
    test_every_exercise_has_solutions_and_mistakes,
    test_mistake_fails_for_its_reason,
)

from lecturekit.book.widgets import sampling_distribution
from lecturekit.exercises import check, get_exercise
from lecturekit.exercises.ch00_setup import reference_temperature_softmax
from lecturekit.exercises.ch01_seq2seq import reference_rnn_jacobian

CHAPTERS = (0, 1)


def test_temperature_softmax_matches_the_chapters_widget_on_every_1d_case():
    for case in get_exercise("setup.temperature_softmax").cases():
        scores, temperature = case.args
        for row in scores.reshape(-1, scores.shape[-1]):
            expected = sampling_distribution(row, temperature=temperature).float()
            got = reference_temperature_softmax(row, temperature)
            torch.testing.assert_close(got, expected, msg=case.label)
            assert torch.isfinite(got).all(), case.label


def test_rnn_jacobian_equals_autograd_through_a_tanh_rnn_on_every_hidden_case():
    """Drive a tanh RNN whose pre-activations are the case's rows (the inputs supply what
    W_h h_{s-1} does not) and differentiate h_n with respect to h_t by autograd."""
    for case in get_exercise("seq2seq.rnn_jacobian").cases():
        w_h, a = case.args
        d = w_h.shape[0]
        h_t = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

        def h_n(h, w_h=w_h, a=a):
            for a_s in a:
                drive = a_s - w_h @ h.detach()  # W_x x_s + b, fixed: a_s at h = h_t
                h = torch.tanh(w_h @ h + drive)
            return h

        expected = torch.autograd.functional.jacobian(h_n, h_t)
        torch.testing.assert_close(reference_rnn_jacobian(w_h, a), expected, msg=case.label)


def test_the_automatic_rnn_jacobian_hint_does_not_state_the_order(capsys):
    """Issue 45.11: check prints the hint after a wrong value; the order of the factors is
    what the exercise asks the reader to work out, so the hint must not state it."""
    assert check("seq2seq.rnn_jacobian", jacobian_wrong_order) is False
    out = capsys.readouterr().out
    assert "💡 提示" in out
    for giveaway in ("最左", "左乘", "右乘", "左边", "右边", "最近的那一步"):
        assert giveaway not in out, giveaway


def test_rnn_jacobian_norm_decays_like_the_chapters_bound():
    """Every factor has norm <= ||W_h||, so ||dh_n/dh_t|| <= ||W_h||^k."""
    g = torch.Generator().manual_seed(3)
    w_h = torch.randn(6, 6, dtype=torch.float64, generator=g) * 0.2
    a = torch.randn(12, 6, dtype=torch.float64, generator=g)
    bound = torch.linalg.matrix_norm(w_h, ord=2)
    for k in range(13):
        norm = torch.linalg.matrix_norm(reference_rnn_jacobian(w_h, a[:k]), ord=2)
        assert norm <= bound**k * (1 + 1e-12)


# --------------------------------------------------------------------------------------
# Students' answers: correct solutions in different styles must pass, typical mistakes fail
# --------------------------------------------------------------------------------------


def softmax_one_line(scores, temperature):
    return torch.softmax(scores / temperature, dim=-1)


def softmax_by_hand_stable(scores, temperature):
    z = scores / temperature
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def softmax_times_temperature(scores, temperature):
    return torch.softmax(scores * temperature, dim=-1)


def softmax_without_temperature(scores, temperature):
    return torch.softmax(scores, dim=-1)


def softmax_over_first_dim(scores, temperature):
    return torch.softmax(scores / temperature, dim=0)


def softmax_by_hand_overflows(scores, temperature):
    e = torch.exp(scores / temperature)
    return e / e.sum(dim=-1, keepdim=True)


def softmax_global_max(scores, temperature):  # one max for the whole batch, not per row
    z = scores / temperature
    e = torch.exp(z - z.max())
    return e / e.sum(dim=-1, keepdim=True)


def softmax_float64(scores, temperature):
    return torch.softmax(scores.double() / temperature, dim=-1)


def softmax_unfinished(scores, temperature): ...


def jacobian_loop(w_h, pre_activations):
    jacobian = torch.eye(w_h.shape[0], dtype=torch.float64)
    for a in pre_activations:
        jacobian = torch.diag(1 - torch.tanh(a) ** 2) @ w_h @ jacobian
    return jacobian


def jacobian_reversed_list(w_h, pre_activations):
    factors = [torch.diag(1 / torch.cosh(a) ** 2) @ w_h for a in pre_activations]
    result = np.eye(w_h.shape[0])
    for factor in reversed(factors):  # J_n first, on the left
        result = result @ factor.numpy()
    return torch.from_numpy(result)


def jacobian_wrong_order(w_h, pre_activations):  # J_{t+1} ... J_n: steps do not commute
    jacobian = torch.eye(w_h.shape[0], dtype=torch.float64)
    for a in pre_activations:
        jacobian = jacobian @ torch.diag(1 - torch.tanh(a) ** 2) @ w_h
    return jacobian


def jacobian_derivative_of_a(w_h, pre_activations):  # 1 - a^2 instead of 1 - tanh(a)^2
    jacobian = torch.eye(w_h.shape[0], dtype=torch.float64)
    for a in pre_activations:
        jacobian = torch.diag(1 - a**2) @ w_h @ jacobian
    return jacobian


def jacobian_diag_on_the_right(w_h, pre_activations):  # W_h diag(...) instead of diag(...) W_h
    jacobian = torch.eye(w_h.shape[0], dtype=torch.float64)
    for a in pre_activations:
        jacobian = w_h @ torch.diag(1 - torch.tanh(a) ** 2) @ jacobian
    return jacobian


def jacobian_power_only(w_h, pre_activations):  # forgets tanh': the linear RNN's W_h^k
    return torch.linalg.matrix_power(w_h, pre_activations.shape[0])


def jacobian_stacks_factors(w_h, pre_activations):  # no step (k = 0) gives an empty product
    factors = torch.stack([torch.diag(1 - torch.tanh(a) ** 2) @ w_h for a in pre_activations])
    return torch.linalg.multi_dot(list(factors.flip(0))) if len(factors) > 1 else factors[0]


SOLUTIONS = {
    "setup.temperature_softmax": [softmax_one_line, softmax_by_hand_stable],
    "seq2seq.rnn_jacobian": [jacobian_loop, jacobian_reversed_list],
}

MISTAKES = {
    "setup.temperature_softmax": [
        (softmax_times_temperature, "数值不对"),
        (softmax_without_temperature, "数值不对"),
        (softmax_over_first_dim, "数值不对"),
        (softmax_by_hand_overflows, "数值不对"),
        (softmax_global_max, "一行很大、一行很小"),  # issue 45.1
        (softmax_float64, "dtype 不对"),
        (softmax_unfinished, "尚未完成"),
    ],
    "seq2seq.rnn_jacobian": [
        (jacobian_wrong_order, "数值不对"),
        (jacobian_derivative_of_a, "数值不对"),
        (jacobian_diag_on_the_right, "数值不对"),
        (jacobian_power_only, "数值不对"),
        (jacobian_stacks_factors, "出错"),
    ],
}
