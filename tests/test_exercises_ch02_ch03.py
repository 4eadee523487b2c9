"""The chapter 2 and 3 exercises: the reference solutions against independent references
(lecturekit's and torch's own modules), then students' answers: correct solutions written in
different styles must pass the checker and typical mistakes must fail it."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _answer_tests import (  # noqa: F401
    test_correct_solution_passes,
    test_every_exercise_has_solutions_and_mistakes,
    test_mistake_fails_for_its_reason,
)
from test_exercises_ch03_layer import LAYER_MISTAKES, LAYER_SOLUTIONS
from torch import nn

import lecturekit
from lecturekit.exercises import check, get_exercise
from lecturekit.exercises.ch02_attention import (
    reference_masked_softmax,
    reference_merge_heads,
    reference_mha_parameters,
    reference_multi_head,
    reference_scaled_dot_product,
    reference_sinusoidal_encoding,
    reference_split_heads,
)
from lecturekit.exercises.ch03_encoder import (
    _pre_ln_layers,
    reference_key_padding_mask,
    reference_layer_parameters,
    reference_layernorm,
    reference_masked_feature_mean,
    reference_pre_ln_block,
)
from lecturekit.model.masks import padding_mask


def _project_heads(x, w_qkv, b_qkv, n_heads):
    batch, length, d = x.shape
    q, k, v = (x @ w_qkv.T + b_qkv).chunk(3, dim=-1)
    return [t.reshape(batch, length, n_heads, d // n_heads).transpose(1, 2) for t in (q, k, v)]


def _merge_project(heads, w_o, b_o):
    batch, n_heads, length, dh = heads.shape
    return heads.transpose(1, 2).reshape(batch, length, n_heads * dh) @ w_o.T + b_o


def mha_calls_the_reference(x, w_qkv, b_qkv, w_o, b_o, n_heads):  # issue 45.6
    return reference_multi_head(x, w_qkv, b_qkv, w_o, b_o, n_heads)


def mha_native_fast_path(x, w_qkv, b_qkv, w_o, b_o, n_heads):  # what nn.MultiheadAttention calls
    d = x.shape[-1]
    return torch._native_multi_head_attention(
        x, x, x, d, n_heads, w_qkv, b_qkv, w_o, b_o, need_weights=False
    )[0]


def mha_backend_table(x, w_qkv, b_qkv, w_o, b_o, n_heads):  # a public alias of the attention
    heads, _ = lecturekit.model.ATTENTION_FUNCTIONS["math"](
        *_project_heads(x, w_qkv, b_qkv, n_heads),
        attn_mask=None,
        key_padding_mask=None,
        is_causal=False,
        dropout_p=0.0,
    )
    return _merge_project(heads, w_o, b_o)


def sdpa_backend_table(q, k, v):
    q4, k4, v4 = (t.reshape(-1, 1, *t.shape[-2:]) for t in (q, k, v))  # (B, H, T, d)
    out, _ = lecturekit.model.ATTENTION_FUNCTIONS["math"](
        q4, k4, v4, attn_mask=None, key_padding_mask=None, is_causal=False, dropout_p=0.0
    )
    return out.reshape(*q.shape[:-1], v.shape[-1])


@pytest.mark.parametrize(
    ("exercise_id", "answer", "name"),
    [
        ("attention.multi_head", mha_calls_the_reference, "reference_multi_head"),
        ("attention.multi_head", mha_native_fast_path, "torch._native_multi_head_attention"),
        ("attention.multi_head", mha_backend_table, "lecturekit.scaled_dot_product_attention"),
        ("attention.scaled_dot_product", sdpa_backend_table, "lecturekit.scaled_dot_product"),
    ],
    ids=["own-reference", "native-fast-path", "mha-backend-table", "sdpa-backend-table"],
)
def test_the_attention_by_another_name_is_forbidden(exercise_id, answer, name, capsys):
    """Issue 45.6 and the public alias: each computes the right result (without the checker's
    watch it passes) and is refused on the first case, by name."""
    case = get_exercise(exercise_id).cases()[0]
    expected = get_exercise(exercise_id).reference(*case.args)
    torch.testing.assert_close(answer(*case.args), expected)
    assert check(exercise_id, answer) is False
    out = capsys.readouterr().out
    assert "第 1/" in out and "这道题不允许用它" in out and name in out, out


def test_the_forbidden_message_names_the_public_function(capsys):
    """Issue 45.9: F.scaled_dot_product_attention is torch._C._nn's function itself."""
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention
    assert check("attention.scaled_dot_product", F.scaled_dot_product_attention) is False
    out = capsys.readouterr().out
    assert "调用了 torch.nn.functional.scaled_dot_product_attention。" in out, out
    assert "torch._C._nn" not in out


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_scaled_dot_product_matches_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    expected = nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(reference_scaled_dot_product(q, k, v), expected)


def test_masked_softmax_matches_lecturekit_attention_on_every_hidden_case():
    """The reference's weights are those of the book's reference attention given the same
    scores (queries ``scores * sqrt(Tk)`` against the identity keys) and the same mask."""
    for case in get_exercise("attention.masked_softmax").cases():
        scores, mask = (a.double() if a.is_floating_point() else a for a in case.args)
        n_keys = scores.shape[-1]
        keys = torch.eye(n_keys, dtype=torch.float64)
        _, weights = lecturekit.scaled_dot_product_attention(
            scores * math.sqrt(n_keys), keys, keys, attn_mask=mask
        )
        torch.testing.assert_close(
            reference_masked_softmax(*case.args).double(), weights, msg=case.label
        )


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
        ours = lecturekit.EncoderLayer(lecturekit.LayerConfig(d_model, 8, d_ff))
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


def test_split_and_merge_heads_match_multi_head_attention_on_every_hidden_case():
    for case in get_exercise("attention.split_heads").cases():
        x, n_heads = case.args
        mha = lecturekit.MultiHeadAttention(x.shape[-1], n_heads)
        split = reference_split_heads(x, n_heads)
        assert torch.equal(split, mha.split_heads(x)), case.label
        assert torch.equal(reference_merge_heads(split), x), case.label
    for case in get_exercise("attention.merge_heads").cases():
        (x,) = case.args
        mha = lecturekit.MultiHeadAttention(x.shape[1] * x.shape[3], x.shape[1])
        assert torch.equal(reference_merge_heads(x), mha.merge_heads(x)), case.label


def test_split_heads_makes_multi_head_attention_one_batched_matmul():
    """Per-head attention on column slices equals one batched call on the split tensors."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 12, generator=g, dtype=torch.float64) for _ in range(3))
    batched = reference_merge_heads(
        reference_scaled_dot_product(*(reference_split_heads(t, 3) for t in (q, k, v)))
    )
    per_head = torch.cat(
        [
            reference_scaled_dot_product(*(t[..., 4 * h : 4 * h + 4] for t in (q, k, v)))
            for h in range(3)
        ],
        dim=-1,
    )
    torch.testing.assert_close(batched, per_head)


def test_multi_head_matches_torch_and_lecturekit_on_every_hidden_case():
    """The assembled layer equals nn.MultiheadAttention and lecturekit.MultiHeadAttention
    given the same weights, on every hidden case."""
    for case in get_exercise("attention.multi_head").cases():
        x, w_qkv, b_qkv, w_o, b_o, n_heads = case.args
        d_model = x.shape[-1]
        torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        ours = lecturekit.MultiHeadAttention(d_model, n_heads)
        with torch.no_grad():
            torch_mha.in_proj_weight.copy_(w_qkv)
            torch_mha.in_proj_bias.copy_(b_qkv)
            torch_mha.out_proj.weight.copy_(w_o)
            torch_mha.out_proj.bias.copy_(b_o)
            ours.load_state_dict(
                {
                    "qkv_proj.weight": w_qkv,
                    "qkv_proj.bias": b_qkv,
                    "out_proj.weight": w_o,
                    "out_proj.bias": b_o,
                }
            )
            got = reference_multi_head(*case.args)
            torch.testing.assert_close(got, torch_mha(x, x, x)[0], msg=case.label)
            torch.testing.assert_close(got, ours(x, x, x)[0], msg=case.label)


def test_key_padding_mask_matches_lecturekit_on_every_hidden_case():
    for case in get_exercise("encoder.key_padding_mask").cases():
        assert torch.equal(reference_key_padding_mask(*case.args), padding_mask(*case.args))


def test_pre_ln_block_matches_encoder_layer_with_norm_first_on_every_hidden_case():
    for layer, x, mask, label in _pre_ln_layers():
        assert layer.norm_first
        with torch.no_grad():
            expected = layer(x, src_key_padding_mask=mask)

            def attention(h, layer=layer, mask=mask):
                return layer.self_attn(h, h, h, key_padding_mask=mask)[0]

            got = reference_pre_ln_block(x, attention, layer.ffn, layer.norm1, layer.norm2)
        torch.testing.assert_close(got, expected, msg=label)
        assert not torch.allclose(layer.norm1.weight, layer.norm2.weight)


def test_pre_ln_cases_leave_the_global_random_state_alone():
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    get_exercise("encoder.pre_ln_block").cases()
    assert torch.equal(torch.rand(3), before)


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


def msm_nan_to_num(scores, mask):
    return torch.nan_to_num(scores.masked_fill(mask, float("-inf")).softmax(dim=-1), nan=0.0)


def msm_by_hand(scores, mask):  # exp with the row maximum of the visible keys subtracted
    visible = scores.masked_fill(mask, float("-inf"))
    top = visible.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    e = torch.exp(visible - top)
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp_min(1e-30), torch.zeros_like(e))


def msm_plain_softmax(scores, mask):  # a row with every key masked: 0/0 = NaN
    return scores.masked_fill(mask, float("-inf")).softmax(dim=-1)


def msm_large_negative(scores, mask):  # a fully masked row spreads its weight over the masked
    return scores.masked_fill(mask, -1e9).softmax(dim=-1)


def msm_after_softmax(scores, mask):  # the mask after the softmax: rows no longer sum to 1
    return scores.softmax(dim=-1) * ~mask


def msm_after_softmax_renormalised(scores, mask):  # right in exact arithmetic, not in float32
    w = scores.softmax(dim=-1) * ~mask
    return torch.nan_to_num(w / w.sum(dim=-1, keepdim=True), nan=0.0)


def msm_keep_convention(scores, mask):  # True = "may attend", the opposite convention
    return torch.nan_to_num(scores.masked_fill(~mask, float("-inf")).softmax(dim=-1), nan=0.0)


def msm_fill_zero(scores, mask):  # a score of 0 is not "excluded"
    return scores.masked_fill(mask, 0.0).softmax(dim=-1).masked_fill(mask, 0.0)


def msm_exp_without_max(scores, mask):  # exp of a large score overflows to inf
    e = torch.exp(scores) * ~mask
    return torch.nan_to_num(e / e.sum(dim=-1, keepdim=True), nan=0.0)


def msm_in_place(scores, mask):  # writes -inf into the caller's scores
    return torch.nan_to_num(scores.masked_fill_(mask, float("-inf")).softmax(dim=-1), nan=0.0)


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
    return torch.from_numpy(pe)


def pe_numpy_array(length, d_model):  # the right values, as a numpy array, not a tensor
    return pe_loops_numpy(length, d_model).numpy()


# the mistakes below start from a correct table of the student's own (an answer that calls
# the exercise's reference solution is refused for that reason alone)


def pe_sin_cos_swapped(length, d_model):
    pe = pe_vectorised(length, d_model)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(length, d_model)


def pe_exponent_i_over_d(length, d_model):
    angle = torch.arange(length)[:, None] / 10000 ** (torch.arange(d_model // 2) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(length, d_model).float()


def pe_halves_concatenated(length, d_model):
    pe = pe_vectorised(length, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)


def pe_positions_from_one(length, d_model):
    return pe_vectorised(length + 1, d_model)[1:]


def pe_float64(length, d_model):
    return pe_vectorised(length, d_model).double()


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


def split_view_transpose(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def split_permute_contiguous(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3).contiguous()


def split_without_transpose(x, n_heads):  # right shape, features of different tokens mixed
    b, t, d = x.shape
    return x.reshape(b, n_heads, t, d // n_heads)


def split_heads_last(x, n_heads):  # head index varies fastest: interleaved features
    b, t, d = x.shape
    return x.reshape(b, t, d // n_heads, n_heads).permute(0, 3, 1, 2)


def split_keeps_tokens_first(x, n_heads):  # forgets to move the head dimension
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads)


def merge_transpose_reshape(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


def merge_cat_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_without_transpose(x):  # right shape, outputs of different tokens mixed
    b, h, t, dh = x.shape
    return x.reshape(b, t, h * dh)


def merge_view_after_transpose(x):  # a view of a non-contiguous tensor: an error
    b, h, t, dh = x.shape
    return x.transpose(1, 2).view(b, t, h * dh)


def merge_sums_heads(x):  # adds the heads instead of concatenating them
    return x.sum(dim=1)


def assembled_from_pieces(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    q, k, v = F.linear(x, w_qkv, b_qkv).chunk(3, dim=-1)
    heads = sdpa_matmul(*(split_view_transpose(t, n_heads) for t in (q, k, v)))
    return F.linear(merge_transpose_reshape(heads), w_o, b_o)


def assembled_einsum(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    b, t, d = x.shape
    qkv = (x @ w_qkv.T + b_qkv).view(b, t, 3, n_heads, d // n_heads)
    q, k, v = qkv.unbind(dim=2)  # each (B, T, H, Dh)
    weights = torch.einsum("bqhd,bkhd->bhqk", q, k).div(math.sqrt(d // n_heads)).softmax(-1)
    return torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, d) @ w_o.T + b_o


def assembled_untransposed_weights(x, w_qkv, b_qkv, w_o, b_o, n_heads):  # x W, not x W^T
    q, k, v = (x @ w + b for w, b in zip(w_qkv.chunk(3), b_qkv.chunk(3), strict=True))
    heads = sdpa_matmul(*(split_view_transpose(t, n_heads) for t in (q, k, v)))
    return merge_transpose_reshape(heads) @ w_o + b_o


def assembled_scaled_by_d_model(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    q, k, v = F.linear(x, w_qkv, b_qkv).chunk(3, dim=-1)
    qh, kh, vh = (split_view_transpose(t, n_heads) for t in (q, k, v))
    weights = (qh @ kh.transpose(-2, -1) / math.sqrt(x.shape[-1])).softmax(dim=-1)
    return F.linear(merge_transpose_reshape(weights @ vh), w_o, b_o)


def assembled_without_output_projection(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    q, k, v = F.linear(x, w_qkv, b_qkv).chunk(3, dim=-1)
    return merge_transpose_reshape(
        sdpa_matmul(*(split_view_transpose(t, n_heads) for t in (q, k, v)))
    )


def assembled_split_without_transpose(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    q, k, v = F.linear(x, w_qkv, b_qkv).chunk(3, dim=-1)
    heads = sdpa_matmul(*(split_without_transpose(t, n_heads) for t in (q, k, v)))
    return F.linear(merge_without_transpose(heads), w_o, b_o)


def assembled_calls_torch(x, w_qkv, b_qkv, w_o, b_o, n_heads):  # the task forbids it
    d = x.shape[-1]
    layer = nn.MultiheadAttention(d, n_heads, batch_first=True)
    with torch.no_grad():
        layer.in_proj_weight.copy_(w_qkv)
        layer.in_proj_bias.copy_(b_qkv)
        layer.out_proj.weight.copy_(w_o)
        layer.out_proj.bias.copy_(b_o)
    return layer(x, x, x, need_weights=False)[0]


def kpm_equal(tokens, pad_id):
    return tokens == pad_id


def kpm_eq_method(tokens, pad_id):
    return tokens.eq(torch.tensor(pad_id))


def kpm_keep_convention(tokens, pad_id):  # True = "may attend", the opposite convention
    return tokens != pad_id


def kpm_broadcast_shape(tokens, pad_id):  # already shaped for the scores: (B, 1, 1, S)
    return (tokens == pad_id)[:, None, None, :]


def kpm_as_integers(tokens, pad_id):
    return (tokens == pad_id).long()


def kpm_from_lengths(tokens, pad_id):  # assumes padding only at the end of a sentence
    lengths = (tokens != pad_id).sum(dim=1, keepdim=True)
    return torch.arange(tokens.shape[1])[None, :] >= lengths


def kpm_pad_id_zero(tokens, pad_id):  # ignores the pad_id argument
    return tokens == 0


def kpm_calls_lecturekit(tokens, pad_id):
    return padding_mask(tokens, pad_id)


def pre_ln_two_lines(x, self_attention, ffn, norm1, norm2):
    x = x + self_attention(norm1(x))
    return x + ffn(norm2(x))


def pre_ln_named_steps(x, self_attention, ffn, norm1, norm2):
    h = self_attention(norm1(x))
    y = x.clone()
    y += h
    return y + ffn(norm2(y))


def post_ln(x, self_attention, ffn, norm1, norm2):  # the paper's order, not Pre-LN
    x = norm1(x + self_attention(x))
    return norm2(x + ffn(x))


def pre_ln_normalised_residual(x, self_attention, ffn, norm1, norm2):
    x = norm1(x)
    x = x + self_attention(x)
    x = norm2(x)
    return x + ffn(x)


def pre_ln_without_residual(x, self_attention, ffn, norm1, norm2):
    return ffn(norm2(self_attention(norm1(x))))


def pre_ln_parallel_sublayers(x, self_attention, ffn, norm1, norm2):  # FFN reads the old x
    return x + self_attention(norm1(x)) + ffn(norm2(x))


def pre_ln_one_norm(x, self_attention, ffn, norm1, norm2):
    x = x + self_attention(norm1(x))
    return x + ffn(norm1(x))


def pre_ln_final_norm(x, self_attention, ffn, norm1, norm2):  # normalises the block output
    return norm2(pre_ln_two_lines(x, self_attention, ffn, norm1, norm2))


SOLUTIONS = {
    "attention.scaled_dot_product": [sdpa_matmul, sdpa_einsum_manual_softmax],
    "attention.masked_softmax": [msm_nan_to_num, msm_by_hand],
    "attention.sinusoidal_encoding": [pe_vectorised, pe_loops_numpy],
    "attention.mha_parameters": [mha_formula, mha_count_module],
    "encoder.layernorm": [ln_by_hand, ln_var_rsqrt],
    "encoder.masked_feature_mean": [masked_mean_sum, masked_mean_indexing],
    "encoder.layer_parameters": [layer_formula, layer_count_module],
    "attention.split_heads": [split_view_transpose, split_permute_contiguous],
    "attention.merge_heads": [merge_transpose_reshape, merge_cat_heads],
    "attention.multi_head": [assembled_from_pieces, assembled_einsum],
    "encoder.key_padding_mask": [kpm_equal, kpm_eq_method],
    "encoder.pre_ln_block": [pre_ln_two_lines, pre_ln_named_steps],
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
    "attention.masked_softmax": [
        (msm_plain_softmax, "得到 nan"),
        (msm_large_negative, "第 1 行的键全被遮住"),
        (msm_after_softmax, "遮住第 4 个键"),
        (msm_after_softmax_renormalised, "被遮住的键分数最大"),
        (msm_keep_convention, "数值不对"),
        (msm_fill_zero, "数值不对"),
        (msm_exp_without_max, "被遮住的键分数最大"),
        (msm_in_place, "修改了输入参数"),
    ],
    "attention.sinusoidal_encoding": [
        (pe_sin_cos_swapped, "数值不对"),
        (pe_exponent_i_over_d, "数值不对"),
        (pe_halves_concatenated, "数值不对"),
        (pe_positions_from_one, "数值不对"),
        (pe_float64, "dtype 不对"),
        (pe_numpy_array, "题目要的是 torch 张量"),
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
    "attention.split_heads": [
        (split_without_transpose, "数值不对"),
        (split_heads_last, "数值不对"),
        (split_keeps_tokens_first, "形状不对"),
    ],
    "attention.merge_heads": [
        (merge_without_transpose, "数值不对"),
        (merge_view_after_transpose, "出错"),
        (merge_sums_heads, "形状不对"),
    ],
    "attention.multi_head": [
        (assembled_untransposed_weights, "数值不对"),
        (assembled_scaled_by_d_model, "数值不对"),
        (assembled_without_output_projection, "数值不对"),
        (assembled_split_without_transpose, "数值不对"),
        (assembled_calls_torch, "不允许用它"),
    ],
    "encoder.key_padding_mask": [
        (kpm_keep_convention, "数值不对"),
        (kpm_broadcast_shape, "形状不对"),
        (kpm_as_integers, "dtype 不对"),
        (kpm_from_lengths, "填充在句首"),
        (kpm_pad_id_zero, "pad_id=3"),
        (kpm_calls_lecturekit, "不允许用它"),
    ],
    "encoder.pre_ln_block": [
        (post_ln, "数值不对"),
        (pre_ln_normalised_residual, "数值不对"),
        (pre_ln_without_residual, "数值不对"),
        (pre_ln_parallel_sublayers, "数值不对"),
        (pre_ln_one_norm, "数值不对"),
        (pre_ln_final_norm, "数值不对"),
    ],
}


# the whole encoder layer's answers live beside its own tests
SOLUTIONS["encoder.layer"] = LAYER_SOLUTIONS
MISTAKES["encoder.layer"] = LAYER_MISTAKES

# SOLUTIONS and MISTAKES cover every exercise of these chapters (tests/_answer_tests.py)
CHAPTERS = (2, 3)
