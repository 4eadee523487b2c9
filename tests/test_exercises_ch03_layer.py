"""The chapter 3 exercise ``encoder.layer``: its reference against torch's own encoder layer, its
training case, and students' answers. ``LAYER_SOLUTIONS`` (written in different styles: a
function with matmul, one with einsum and torch's functions, one around lecturekit's
``MultiHeadAttention``, an ``nn.Module``) must pass the checker and ``LAYER_MISTAKES`` (the
mistakes people make assembling a layer) must fail it; tests/test_exercises_ch02_ch03.py runs
them with the other chapter 2 and 3 answers."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lecturekit
from lecturekit.exercises import check, get_exercise
from lecturekit.exercises.ch03_layer import (
    ACCURACY_BAR,
    TRAIN_STEPS,
    WEIGHT_NAMES,
    encoder_layer,
    layer_weights,
    reference_encoder_layer,
    train_reversal,
)

LAYER = "encoder.layer"


def _forward_cases():
    return [case for case in get_exercise(LAYER).cases() if case.harness is None]


def _torch_layer(weights, n_heads):
    """``nn.TransformerEncoderLayer`` holding ``weights`` (float64, Post-LN, no dropout); in
    training mode, so that torch takes its reference path, not the fused fast path."""
    d_ff, d_model = weights["w1"].shape
    layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True)
    layer = layer.double()
    torch_names = {
        "w_qkv": "self_attn.in_proj_weight",
        "b_qkv": "self_attn.in_proj_bias",
        "w_o": "self_attn.out_proj.weight",
        "b_o": "self_attn.out_proj.bias",
        "w1": "linear1.weight",
        "b1": "linear1.bias",
        "w2": "linear2.weight",
        "b2": "linear2.bias",
        "gamma1": "norm1.weight",
        "beta1": "norm1.bias",
        "gamma2": "norm2.weight",
        "beta2": "norm2.bias",
    }
    layer.load_state_dict({torch_names[key]: w for key, w in weights.items()})
    return layer


def test_reference_matches_torch_encoder_layer_on_every_hidden_case():
    for case in _forward_cases():
        x, mask, weights, n_heads = case.args
        expected = _torch_layer(weights, n_heads)(x, src_key_padding_mask=mask)
        torch.testing.assert_close(reference_encoder_layer(*case.args), expected, msg=case.label)


def test_model_answer_matches_the_reference_to_float64_precision():
    for case in _forward_cases():
        got, expected = encoder_layer(*case.args), reference_encoder_layer(*case.args)
        assert got.dtype == torch.float64
        assert (got - expected).abs().max() < 1e-12, case.label


def test_the_cases_use_padding_and_non_trivial_norms():
    cases = _forward_cases()
    assert any(case.args[1].any() for case in cases) and not cases[0].args[1].any()
    for case in cases:  # a missing γ or β, or a missing bias, changes the outputs
        weights = case.args[2]
        assert (weights["gamma2"] - 1).abs().mean() > 0.1 and weights["beta2"].abs().mean() > 0.1
        assert weights["b1"].abs().mean() > 0.1 and weights["b_qkv"].abs().mean() > 0.1


def test_layer_weights_name_every_parameter_of_the_package_layer():
    layer = lecturekit.EncoderLayer(lecturekit.LayerConfig(8, 2, 16, dropout=0.0))
    assert sorted(WEIGHT_NAMES.values()) == sorted(name for name, _ in layer.named_parameters())
    state = torch.get_rng_state()
    weights = layer_weights(8, 2, 16, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(w.dtype == torch.float64 and not w.requires_grad for w in weights.values())
    assert torch.equal(weights["gamma1"], torch.ones(8, dtype=torch.float64))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_model_answer_learns_reversal_well_above_the_bar(seed):
    assert train_reversal(encoder_layer, seed=seed) >= 0.99 > ACCURACY_BAR


def test_training_is_deterministic_and_leaves_the_callers_state_alone():
    torch.manual_seed(123)
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    first = train_reversal(encoder_layer, steps=20)
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads
    assert train_reversal(encoder_layer, steps=20) == first


def test_a_layer_whose_weights_get_no_gradient_learns_nothing():
    def frozen(x, padding_mask, weights, n_heads):
        return encoder_layer(x, padding_mask, {k: w.detach() for k, w in weights.items()}, n_heads)

    assert train_reversal(frozen) < 0.5


def test_the_training_case_states_its_bar_and_steps():
    (case,) = [case for case in get_exercise(LAYER).cases() if case.harness is not None]
    assert case.args == (TRAIN_STEPS, 0) and f"{ACCURACY_BAR:.0%}" in case.label
    assert case.harness(encoder_layer)(*case.args).item() == ACCURACY_BAR


def test_the_training_feedback_says_how_far_it_got(capsys):
    assert check(LAYER, layer_copies_weights) is False
    out = capsys.readouterr().out
    assert "训练" in out and f"期望 {ACCURACY_BAR:g}" in out and "steps=200, seed=0" in out, out


# --------------------------------------------------------------------------------------
# students' answers
# --------------------------------------------------------------------------------------


def _layer_norm(h, gamma, beta, eps=1e-5):
    mean = h.mean(dim=-1, keepdim=True)
    var = h.var(dim=-1, unbiased=False, keepdim=True)
    return (h - mean) * torch.rsqrt(var + eps) * gamma + beta


def _attention(x, padding_mask, w, n_heads, *, fill=float("-inf"), keep=False, scale=None):
    """Multi-head self attention as a student writes it; the keywords make its mistakes."""
    batch, length, d = x.shape
    dh = d // n_heads
    q, k, v = (
        t.reshape(batch, length, n_heads, dh).transpose(1, 2)
        for t in (x @ w["w_qkv"].T + w["b_qkv"]).chunk(3, dim=-1)
    )
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale or dh)
    if padding_mask is not None:
        hidden = ~padding_mask if keep else padding_mask
        scores = scores.masked_fill(hidden[:, None, None, :], fill)
    heads = scores.softmax(dim=-1) @ v
    return heads.transpose(1, 2).reshape(batch, length, d) @ w["w_o"].T + w["b_o"]


def _ffn(h, w, activation=torch.relu):
    return activation(h @ w["w1"].T + w["b1"]) @ w["w2"].T + w["b2"]


def layer_matmul(x, padding_mask, weights, n_heads):
    w = weights
    x1 = _layer_norm(x + _attention(x, padding_mask, w, n_heads), w["gamma1"], w["beta1"])
    return _layer_norm(x1 + _ffn(x1, w), w["gamma2"], w["beta2"])


def layer_einsum(x, padding_mask, weights, n_heads):  # einsum and torch's functions
    w = weights
    batch, length, d = x.shape
    q, k, v = torch.einsum("bsd,ed->bse", x, w["w_qkv"]).add(w["b_qkv"]).split(d, dim=-1)
    q, k, v = (t.view(batch, length, n_heads, d // n_heads) for t in (q, k, v))
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / (d // n_heads) ** 0.5
    scores = torch.where(padding_mask[:, None, None, :], -torch.inf, scores)
    heads = torch.einsum("bhqk,bkhe->bqhe", F.softmax(scores, dim=-1), v)
    z = F.linear(heads.reshape(batch, length, d), w["w_o"], w["b_o"])
    x1 = F.layer_norm(x + z, (d,), w["gamma1"], w["beta1"], eps=1e-5)
    f = F.linear(F.relu(F.linear(x1, w["w1"], w["b1"])), w["w2"], w["b2"])
    return F.layer_norm(x1 + f, (d,), w["gamma2"], w["beta2"], eps=1e-5)


def layer_with_package_attention(x, padding_mask, weights, n_heads):  # lecturekit's MHA
    w = weights
    attention = lecturekit.MultiHeadAttention(x.shape[-1], n_heads)
    attention_weights = {
        "qkv_proj.weight": w["w_qkv"],
        "qkv_proj.bias": w["b_qkv"],
        "out_proj.weight": w["w_o"],
        "out_proj.bias": w["b_o"],
    }
    z, _ = torch.func.functional_call(
        attention, attention_weights, (x, x, x), {"key_padding_mask": padding_mask}
    )
    x1 = _layer_norm(x + z, w["gamma1"], w["beta1"])
    return _layer_norm(x1 + _ffn(x1, w), w["gamma2"], w["beta2"])


class StudentEncoderLayer(nn.Module):
    """An ``nn.Module`` answer: the check calls the module itself."""

    def forward(self, x, padding_mask, weights, n_heads):
        self.sublayers = [("1", lambda h: _attention(h, padding_mask, weights, n_heads))]
        self.sublayers.append(("2", lambda h: _ffn(h, weights)))
        for number, sublayer in self.sublayers:
            x = _layer_norm(x + sublayer(x), weights[f"gamma{number}"], weights[f"beta{number}"])
        return x


def layer_norm_before_residual(x, padding_mask, weights, n_heads):  # x + LN(z): norm on z
    w = weights
    x1 = x + _layer_norm(_attention(x, padding_mask, w, n_heads), w["gamma1"], w["beta1"])
    return x1 + _layer_norm(_ffn(x1, w), w["gamma2"], w["beta2"])


def layer_ffn_without_relu(x, padding_mask, weights, n_heads):
    w = weights
    x1 = _layer_norm(x + _attention(x, padding_mask, w, n_heads), w["gamma1"], w["beta1"])
    return _layer_norm(x1 + _ffn(x1, w, activation=lambda h: h), w["gamma2"], w["beta2"])


def layer_ffn_without_residual(x, padding_mask, weights, n_heads):
    w = weights
    x1 = _layer_norm(x + _attention(x, padding_mask, w, n_heads), w["gamma1"], w["beta1"])
    return _layer_norm(_ffn(x1, w), w["gamma2"], w["beta2"])


def layer_dropout_left_on(x, padding_mask, weights, n_heads):  # F.dropout trains by default
    w = weights
    z = F.dropout(_attention(x, padding_mask, w, n_heads), p=0.1)
    x1 = _layer_norm(x + z, w["gamma1"], w["beta1"])
    return _layer_norm(x1 + F.dropout(_ffn(x1, w), p=0.1), w["gamma2"], w["beta2"])


def layer_ignores_mask(x, padding_mask, weights, n_heads):
    return layer_matmul(x, None, weights, n_heads)


def layer_mask_keeps_convention(x, padding_mask, weights, n_heads):  # True read as "may attend"
    w = weights
    z = _attention(x, padding_mask, w, n_heads, keep=True)
    x1 = _layer_norm(x + z, w["gamma1"], w["beta1"])
    return _layer_norm(x1 + _ffn(x1, w), w["gamma2"], w["beta2"])


def layer_mask_scores_to_zero(x, padding_mask, weights, n_heads):  # a zero score still weighs
    w = weights
    z = _attention(x, padding_mask, w, n_heads, fill=0.0)
    x1 = _layer_norm(x + z, w["gamma1"], w["beta1"])
    return _layer_norm(x1 + _ffn(x1, w), w["gamma2"], w["beta2"])


def layer_pre_ln(x, padding_mask, weights, n_heads):  # Pre-LN where Post-LN was asked
    w = weights
    x = x + _attention(_layer_norm(x, w["gamma1"], w["beta1"]), padding_mask, w, n_heads)
    return x + _ffn(_layer_norm(x, w["gamma2"], w["beta2"]), w)


def layer_scaled_by_d_model(x, padding_mask, weights, n_heads):
    w = weights
    z = _attention(x, padding_mask, w, n_heads, scale=x.shape[-1])
    x1 = _layer_norm(x + z, w["gamma1"], w["beta1"])
    return _layer_norm(x1 + _ffn(x1, w), w["gamma2"], w["beta2"])


def layer_without_gamma_beta(x, padding_mask, weights, n_heads):
    x1 = _layer_norm(x + _attention(x, padding_mask, weights, n_heads), 1.0, 0.0)
    return _layer_norm(x1 + _ffn(x1, weights), 1.0, 0.0)


def layer_in_float32(x, padding_mask, weights, n_heads):
    return layer_matmul(x, padding_mask, weights, n_heads).float()


def layer_copies_weights(x, padding_mask, weights, n_heads):  # new tensors: no gradient back
    copied = {key: nn.Parameter(w.detach().clone()) for key, w in weights.items()}
    return layer_matmul(x, padding_mask, copied, n_heads)


def layer_through_encoder_layer(x, padding_mask, weights, n_heads):  # the package's layer
    d_ff, d = weights["w1"].shape
    layer = lecturekit.EncoderLayer(lecturekit.LayerConfig(d, n_heads, d_ff, dropout=0.0))
    parameters = {name: weights[key] for key, name in WEIGHT_NAMES.items()}
    return torch.func.functional_call(
        layer, parameters, (x,), {"src_key_padding_mask": padding_mask}
    )


LAYER_SOLUTIONS = [layer_matmul, layer_einsum, layer_with_package_attention, StudentEncoderLayer()]

LAYER_MISTAKES = [
    (layer_norm_before_residual, "数值不对"),
    (layer_ffn_without_relu, "数值不对"),
    (layer_ffn_without_residual, "数值不对"),
    (layer_dropout_left_on, "数值不对"),
    (layer_ignores_mask, "句末有填充"),
    (layer_mask_keeps_convention, "数值不对"),
    (layer_mask_scores_to_zero, "句末有填充"),
    (layer_pre_ln, "数值不对"),
    (layer_scaled_by_d_model, "数值不对"),
    (layer_without_gamma_beta, "数值不对"),
    (layer_in_float32, "dtype 不对"),
    (layer_copies_weights, "在序列反转任务上训练"),
    (layer_through_encoder_layer, "EncoderLayer.forward"),
]
