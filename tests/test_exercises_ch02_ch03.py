"""The chapter 2 and 3 exercises: the reference solutions against independent references
(lecturekit's and torch's own modules), then students' answers: correct solutions written in
different styles must pass the checker and typical mistakes must fail it."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from _answer_tests import test_correct_solution_passes, test_mistake_fails_for_its_reason  # noqa: F401
from torch import nn

import lecturekit
from lecturekit.exercises import list_exercises
from lecturekit.exercises.ch02_attention import (
    reference_mha_parameters,
    reference_scaled_dot_product,
    reference_sinusoidal_encoding,
)
from lecturekit.exercises.ch03_encoder import (
    reference_layer_parameters,
    reference_layernorm,
    reference_masked_feature_mean,
)


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_scaled_dot_product_matches_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    expected = nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(reference_scaled_dot_product(q, k, v), expected)


def test_sinusoidal_encoding_matches_lecturekit_layer():
    layer = lecturekit.SinusoidalPositionalEncoding(64, max_len=50)
    torch.testing.assert_close(reference_sinusoidal_encoding(50, 64), layer.encoding(50))


def test_mha_parameters_match_real_modules():
    for d_model, n_heads in [(512, 8), (512, 1), (64, 4), (768, 12)]:
        torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        ours = lecturekit.MultiHeadAttention(d_model, n_heads)
        assert reference_mha_parameters(d_model, n_heads) == n_params(torch_mha) == n_params(ours)


def test_layer_parameters_match_real_encoder_layers():
    for d_model, d_ff in [(512, 2048), (64, 256)]:
        torch_layer = nn.TransformerEncoderLayer(d_model, 8, d_ff, batch_first=True)
        ours = lecturekit.EncoderLayer(d_model, 8, d_ff)
        assert reference_layer_parameters(d_model, d_ff) == n_params(torch_layer) == n_params(ours)


def test_layernorm_matches_torch_functional():
    x = torch.randn(2, 5, 16, dtype=torch.float64) * 3 + 1
    torch.testing.assert_close(reference_layernorm(x), nn.functional.layer_norm(x, (16,)))


def test_masked_feature_mean_equals_mean_of_the_real_tokens():
    x = torch.randn(3, 4, 2, dtype=torch.float64)
    lengths = [4, 1, 3]
    mask = torch.arange(4)[None, :] >= torch.tensor(lengths)[:, None]
    real = torch.cat([x[b, :n] for b, n in enumerate(lengths)])  # (8, 2)
    torch.testing.assert_close(reference_masked_feature_mean(x, mask), real.mean(dim=0))


# --------------------------------------------------------------------------------------
# Students' answers: correct solutions in different styles must pass, typical mistakes fail
# --------------------------------------------------------------------------------------


def sdpa_matmul(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def sdpa_einsum_manual_softmax(q, k, v):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return torch.einsum("...qk,...kv->...qv", e / e.sum(dim=-1, keepdim=True), v)


def sdpa_unscaled(q, k, v):
    return (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v


def sdpa_divide_by_d_k(q, k, v):
    return (q @ k.transpose(-2, -1) / q.shape[-1]).softmax(dim=-1) @ v


def sdpa_softmax_over_queries(q, k, v):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-2) @ v


def sdpa_returns_weights(q, k, v):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)


def sdpa_calls_torch(q, k, v):  # the task forbids the ready-made function
    return F.scaled_dot_product_attention(q, k, v)


def sdpa_in_float64(q, k, v):
    return sdpa_matmul(q.double(), k.double(), v.double())


def sdpa_transposes_2d_only(q, k, v):  # right for one matrix, an error for batched inputs
    return torch.softmax(q @ k.t() / math.sqrt(q.shape[-1]), dim=-1) @ v


def pe_vectorised(length, d_model):
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
    pe = torch.empty(length, d_model)
    pe[:, 0::2] = torch.sin(position * frequency)
    pe[:, 1::2] = torch.cos(position * frequency)
    return pe


def pe_loops_numpy(length, d_model):
    pe = np.zeros((length, d_model), dtype=np.float32)
    for pos in range(length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def pe_sin_cos_swapped(length, d_model):
    pe = reference_sinusoidal_encoding(length, d_model)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(length, d_model)


def pe_exponent_i_over_d(length, d_model):
    angle = torch.arange(length)[:, None] / 10000 ** (torch.arange(d_model // 2) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(length, d_model).float()


def pe_halves_concatenated(length, d_model):
    pe = reference_sinusoidal_encoding(length, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)


def pe_positions_from_one(length, d_model):
    return reference_sinusoidal_encoding(length + 1, d_model)[1:]


def pe_float64(length, d_model):
    return reference_sinusoidal_encoding(length, d_model).double()


def mha_formula(d_model, n_heads):
    return 4 * (d_model * d_model + d_model)


def mha_count_module(d_model, n_heads):
    return sum(p.numel() for p in nn.MultiheadAttention(d_model, n_heads).parameters())


def mha_without_bias(d_model, n_heads):
    return 4 * d_model * d_model


def mha_full_size_heads(d_model, n_heads):
    return n_heads * 3 * (d_model * d_model + d_model) + d_model * d_model + d_model


def mha_without_output_projection(d_model, n_heads):
    return 3 * d_model * d_model + 3 * d_model


def mha_float_head_dim(d_model, n_heads):  # right value, but a float: d_model / n_heads
    head_dim = d_model / n_heads
    return 4 * (n_heads * head_dim * d_model + n_heads * head_dim)


def ln_by_hand(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def ln_var_rsqrt(x, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps)


def ln_unbiased_variance(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)


def ln_over_batch_axis(x, eps=1e-5):
    mean = x.mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(dim=0, keepdim=True) + eps)


def ln_ignores_eps_argument(x, eps=1e-5):
    return ln_by_hand(x, 1e-5)


def ln_std_plus_eps(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / (((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt() + eps)


def ln_divide_by_variance(x, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / (((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)


def ln_calls_torch(x, eps=1e-5):  # the task forbids the ready-made function
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def ln_module(x, eps=1e-5):  # nn.LayerNorm calls F.layer_norm
    return nn.LayerNorm(x.shape[-1], eps=eps, elementwise_affine=False)(x)


def masked_mean_sum(x, padding_mask):
    keep = (~padding_mask).unsqueeze(-1).float()
    return (x * keep).sum(dim=(0, 1)) / keep.sum()


def masked_mean_indexing(x, padding_mask):
    return x[~padding_mask].mean(dim=0)


def masked_mean_including_padding(x, padding_mask):
    return x.mean(dim=(0, 1))


def masked_mean_divides_by_all(x, padding_mask):
    keep = (~padding_mask).unsqueeze(-1).float()
    return (x * keep).sum(dim=(0, 1)) / (x.shape[0] * x.shape[1])


def masked_mean_keeps_padding(x, padding_mask):  # inverted mask convention
    keep = padding_mask.unsqueeze(-1).float()
    return (x * keep).sum(dim=(0, 1)) / keep.sum().clamp(min=1)


def masked_mean_per_sentence(x, padding_mask):
    keep = (~padding_mask).unsqueeze(-1).float()
    return ((x * keep).sum(dim=1) / keep.sum(dim=1)).nanmean(dim=0)


def masked_mean_assumes_zero_padding(x, padding_mask):  # right only if padding holds zeros
    return x.sum(dim=(0, 1)) / (~padding_mask).sum()


def masked_mean_float64(x, padding_mask):
    return x[~padding_mask].double().mean(dim=0)


def layer_formula(d_model, d_ff):
    return 4 * d_model**2 + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model


def layer_count_module(d_model, d_ff):
    layer = nn.TransformerEncoderLayer(d_model, 1, d_ff, batch_first=True)
    return sum(p.numel() for p in layer.parameters())


def layer_without_norms(d_model, d_ff):
    return 4 * d_model * d_model + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model


def layer_weights_only(d_model, d_ff):
    return 4 * d_model * d_model + 2 * d_model * d_ff


def layer_one_ffn_matrix(d_model, d_ff):
    return 4 * d_model * d_model + 4 * d_model + d_model * d_ff + d_ff + 4 * d_model


def layer_one_norm(d_model, d_ff):
    return layer_formula(d_model, d_ff) - 2 * d_model


SOLUTIONS = {
    "attention.scaled_dot_product": [sdpa_matmul, sdpa_einsum_manual_softmax],
    "attention.sinusoidal_encoding": [pe_vectorised, pe_loops_numpy],
    "attention.mha_parameters": [mha_formula, mha_count_module],
    "encoder.layernorm": [ln_by_hand, ln_var_rsqrt],
    "encoder.masked_feature_mean": [masked_mean_sum, masked_mean_indexing],
    "encoder.layer_parameters": [layer_formula, layer_count_module],
}

MISTAKES = {
    "attention.scaled_dot_product": [
        (sdpa_unscaled, "数值不对"),
        (sdpa_divide_by_d_k, "数值不对"),
        (sdpa_softmax_over_queries, "数值不对"),
        (sdpa_returns_weights, "形状不对"),
        (sdpa_calls_torch, "不允许用它"),
        (sdpa_in_float64, "dtype 不对"),
        (sdpa_transposes_2d_only, "出错"),
    ],
    "attention.sinusoidal_encoding": [
        (pe_sin_cos_swapped, "数值不对"),
        (pe_exponent_i_over_d, "数值不对"),
        (pe_halves_concatenated, "数值不对"),
        (pe_positions_from_one, "数值不对"),
        (pe_float64, "dtype 不对"),
    ],
    "attention.mha_parameters": [
        (mha_without_bias, "期望 1050624"),
        (mha_full_size_heads, "期望 1050624"),
        (mha_without_output_projection, "期望 1050624"),
        (mha_float_head_dim, "题目要求一个整数"),
    ],
    "encoder.layernorm": [
        (ln_unbiased_variance, "数值不对"),
        (ln_over_batch_axis, "数值不对"),
        (ln_ignores_eps_argument, "eps=1e-3"),
        (ln_std_plus_eps, "方差很小"),
        (ln_divide_by_variance, "数值不对"),
        (ln_calls_torch, "不允许用它"),
        (ln_module, "不允许用它"),
    ],
    "encoder.masked_feature_mean": [
        (masked_mean_including_padding, "数值不对"),
        (masked_mean_divides_by_all, "数值不对"),
        (masked_mean_keeps_padding, "数值不对"),
        (masked_mean_per_sentence, "数值不对"),
        (masked_mean_assumes_zero_padding, "填充处不是 0"),
        (masked_mean_float64, "dtype 不对"),
    ],
    "encoder.layer_parameters": [
        (layer_without_norms, "期望 3152384"),
        (layer_weights_only, "期望 3152384"),
        (layer_one_ffn_matrix, "期望 3152384"),
        (layer_one_norm, "期望 3152384"),
    ],
}


def test_every_exercise_of_chapters_2_and_3_has_solutions_and_mistakes():
    ids = list_exercises(chapter=2) + list_exercises(chapter=3)
    assert sorted(SOLUTIONS) == sorted(MISTAKES) == sorted(ids)
    assert all(len(SOLUTIONS[i]) >= 2 and len(MISTAKES[i]) >= 3 for i in ids)
