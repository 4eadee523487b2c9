"""Attention: the reference against float64 brute force and torch, backends agree, no NaN."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lecturekit.kernels as kernels
from lecturekit import MultiHeadAttention, _common, causal_mask, scaled_dot_product_attention
from lecturekit.model.attention import ATTENTION_FUNCTIONS
from lecturekit.model.config import ATTENTION_BACKENDS


def brute_force_attention(q, k, v, allowed):
    """Loops over every query in float64: softmax over the allowed keys, zeros if none."""
    out = torch.zeros(q.shape[:-1] + v.shape[-1:], dtype=torch.float64)
    for index in torch.cartesian_prod(*[torch.arange(n) for n in q.shape[:-1]]):
        *lead, i = index.tolist()
        keys = [j for j in range(k.shape[-2]) if allowed[i, j]]
        if not keys:
            continue
        scores = torch.tensor(
            [float(q[(*lead, i)].double() @ k[(*lead, j)].double()) for j in keys]
        )
        weights = torch.softmax(scores / math.sqrt(q.shape[-1]), dim=0)
        out[(*lead, i)] = sum(
            w * v[(*lead, j)].double() for w, j in zip(weights, keys, strict=True)
        )
    return out


def test_reference_matches_brute_force_with_causal_mask():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 3).unbind(0)
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(4))
    expected = brute_force_attention(q, k, v, ~causal_mask(4))
    torch.testing.assert_close(out.double(), expected, atol=1e-6, rtol=0)
    assert torch.equal(weights[..., causal_mask(4)], torch.zeros_like(weights[..., causal_mask(4)]))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4))


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal"])
def test_reference_matches_torch_sdpa(mask_kind):
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(5, 6) < 0.3
        mask[:, 0] = False
    elif mask_kind == "float":
        mask = torch.randn(5, 6)
    kwargs = dict(is_causal=True) if mask_kind == "causal" else {}
    torch_mask = None if mask is None else (~mask if mask.dtype == torch.bool else mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask, **kwargs)
    out, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_reference_scale_argument():
    torch.manual_seed(2)
    q, k, v = torch.randn(3, 4, 8).unbind(0)
    out, _ = scaled_dot_product_attention(q, k, v, scale=0.5)
    torch.testing.assert_close(out, torch.softmax(q @ k.T * 0.5, -1) @ v)


def random_masks(batch, heads, tq, tk, generator):
    attn = torch.rand(tq, tk, generator=generator) < 0.3
    padding = torch.rand(batch, tk, generator=generator) < 0.3
    padding[:, 0] = False
    attn[:, 0] = False
    return attn, padding


def test_multihead_matches_nn_multiheadattention():
    torch.manual_seed(3)
    ours = MultiHeadAttention(16, 4)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True)
    theirs.in_proj_weight.data.copy_(ours.qkv_proj.weight)
    theirs.in_proj_bias.data.copy_(ours.qkv_proj.bias)
    theirs.out_proj.load_state_dict(ours.out_proj.state_dict())
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    attn, padding = random_masks(2, 4, 5, 7, torch.Generator().manual_seed(0))
    for q, kv, am in ((x, x, causal_mask(5)), (x, memory, attn)):
        expected, expected_w = theirs(
            q,
            kv,
            kv,
            key_padding_mask=padding[:, : kv.size(1)],
            attn_mask=am,
            need_weights=True,
            average_attn_weights=False,
        )
        out, weights = ours(
            q, kv, kv, key_padding_mask=padding[:, : kv.size(1)], attn_mask=am, need_weights=True
        )
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(weights, expected_w, atol=1e-5, rtol=0)
        assert weights.shape == (2, 4, 5, kv.size(1))
        _, averaged = ours(
            q,
            kv,
            kv,
            key_padding_mask=padding[:, : kv.size(1)],
            attn_mask=am,
            need_weights=True,
            average_attn_weights=True,
        )
        torch.testing.assert_close(averaged, weights.mean(1))


def test_weights_are_none_unless_asked():
    x = torch.randn(1, 3, 8)
    assert MultiHeadAttention(8, 2)(x, x, x)[1] is None


@pytest.mark.parametrize("kind", ["self", "cross", "separate_kv"])
def test_backends_agree(kind):
    torch.manual_seed(4)
    module = MultiHeadAttention(24, 3).eval()
    x, memory, other = torch.randn(3, 6, 24), torch.randn(3, 4, 24), torch.randn(3, 4, 24)
    q, k, v = {"self": (x, x, x), "cross": (x, memory, memory), "separate_kv": (x, memory, other)}[
        kind
    ]
    attn, padding = random_masks(3, 3, 6, k.size(1), torch.Generator().manual_seed(1))
    padding[1] = True  # a row with every key masked
    float_attn = torch.randn(3 * 3, 6, k.size(1))
    cases = [
        dict(),
        dict(key_padding_mask=padding),
        dict(attn_mask=attn),
        dict(attn_mask=float_attn, key_padding_mask=padding),
    ]
    if kind == "self":
        cases.append(dict(is_causal=True))
        cases.append(dict(is_causal=True, key_padding_mask=padding))
    for masks in cases:
        results = []
        for backend in ("math", "sdpa"):
            module.backend = backend
            results.append(module(q, k, v, **masks)[0])
        torch.testing.assert_close(results[0], results[1], atol=1e-5, rtol=0)


def test_backends_agree_on_gradients():
    torch.manual_seed(5)
    module = MultiHeadAttention(16, 2)
    x = torch.randn(2, 5, 16)
    grads = []
    for backend in ("math", "sdpa"):
        module.zero_grad()
        module.backend = backend
        module(x, x, x, is_causal=True)[0].square().sum().backward()
        grads.append(module.qkv_proj.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_fully_masked_rows_give_zeros_not_nan(dtype, backend):
    torch.manual_seed(6)
    module = MultiHeadAttention(16, 4, backend=backend).to(dtype)
    x = torch.randn(2, 3, 16, dtype=dtype, requires_grad=True)
    padding = torch.tensor([[True, True, True], [False, True, False]])
    out, weights = module(x, x, x, key_padding_mask=padding, need_weights=backend == "math")
    assert not torch.isnan(out).any()
    # the output of a query that may see nothing is the output projection's bias
    torch.testing.assert_close(out[0], module.out_proj.bias.expand(3, 16))
    if weights is not None:
        assert torch.equal(weights[0], torch.zeros_like(weights[0]))
    out.float().sum().backward()
    assert torch.isfinite(x.grad.float()).all()


def test_fully_masked_rows_by_float_mask():
    q, k, v = torch.randn(3, 1, 2, 4).unbind(0)
    mask = torch.tensor([[float("-inf"), float("-inf")], [0.0, float("-inf")]])
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(out[0, 0], torch.zeros(4)) and torch.allclose(out[0, 1], v[0, 0])
    assert weights[0, 0].tolist() == [0.0, 0.0]


def test_gradcheck_float64():
    torch.manual_seed(7)
    module = MultiHeadAttention(6, 2).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    padding = torch.tensor([[False, False, True, False], [False, True, True, True]])
    assert torch.autograd.gradcheck(
        lambda a: module(a, a, a, is_causal=True)[0], (x,), fast_mode=True
    )
    assert torch.autograd.gradcheck(
        lambda a, m: module(a, m, m, key_padding_mask=padding)[0], (x, memory), fast_mode=True
    )


def test_backends_are_one_table():
    assert set(ATTENTION_FUNCTIONS) == set(ATTENTION_BACKENDS)


@pytest.fixture
def fake_kernel(monkeypatch):
    """``kernels.attention`` replaced by torch's function, recording its keyword arguments:
    the model's side of the contract, without a GPU."""
    calls = []

    def attention(q, k, v, *, key_padding_mask=None, is_causal=False, scale=None, dropout_p=0.0):
        calls.append(dict(key_padding_mask=key_padding_mask, is_causal=is_causal, scale=scale))
        allowed = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=is_causal)

    monkeypatch.setattr(kernels, "attention", attention)
    monkeypatch.setattr(_common, "_warned", set())
    return calls


def test_triton_backend_hands_padding_and_causality_to_the_kernel(fake_kernel):
    torch.manual_seed(8)
    module = MultiHeadAttention(8, 2, backend="triton")
    x = torch.randn(2, 3, 8)
    padding = torch.tensor([[False, False, True], [False, False, False]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback, no warning
        out = module(x, x, x, is_causal=True)[0]
        padded = module(x, x, x, key_padding_mask=padding)[0]
    assert [call["is_causal"] for call in fake_kernel] == [True, False]
    assert fake_kernel[1]["key_padding_mask"] is padding and fake_kernel[0]["scale"] is None
    module.backend = "math"
    torch.testing.assert_close(out, module(x, x, x, is_causal=True)[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(padded, module(x, x, x, key_padding_mask=padding)[0])


def test_triton_backend_sends_what_the_kernel_cannot_do_to_sdpa(fake_kernel):
    """A general attn_mask or a float padding mask: one warning, then "sdpa"; need_weights:
    "math"."""
    torch.manual_seed(9)
    module = MultiHeadAttention(8, 2, backend="triton")
    x = torch.randn(2, 3, 8)
    float_padding = torch.zeros(2, 3).index_fill(1, torch.tensor([2]), float("-inf"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        by_mask = module(x, x, x, attn_mask=causal_mask(3))[0]
        by_float = module(x, x, x, key_padding_mask=float_padding)[0]
        _, weights = module(x, x, x, need_weights=True)
    assert fake_kernel == [] and weights.shape == (2, 2, 3, 3)
    assert len([w for w in caught if "attn_mask" in str(w.message)]) == 1
    module.backend = "sdpa"
    torch.testing.assert_close(by_mask, module(x, x, x, is_causal=True)[0])
    torch.testing.assert_close(by_float, module(x, x, x, key_padding_mask=float_padding)[0])


def test_triton_backend_without_a_gpu_computes_with_pytorch(monkeypatch):
    """Where the kernel cannot run, ``kernels.attention`` falls back itself (one warning)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(_common, "_warned", set())
    torch.manual_seed(8)
    module = MultiHeadAttention(8, 2, backend="triton")
    x = torch.randn(1, 3, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = module(x, x, x, is_causal=True)[0]  # a kernel without its fallback fails here
        module(x, x, x)
    assert len(caught) == 1
    module.backend = "math"
    torch.testing.assert_close(out, module(x, x, x, is_causal=True)[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda m, x: m(x[0], x, x), ValueError, "query must have shape"),
        (lambda m, x: m(x, x[..., :4], x), ValueError, "key must have shape"),
        (lambda m, x: m(x, x[:, :2], x), ValueError, "key/value"),
        (
            lambda m, x: m(x, x, x, attn_mask=torch.zeros(3, 4, dtype=torch.bool)),
            ValueError,
            "attn_mask",
        ),
        (
            lambda m, x: m(x, x, x, attn_mask=torch.zeros(3, 3, dtype=torch.long)),
            TypeError,
            "attn_mask",
        ),
        (
            lambda m, x: m(x, x, x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)),
            ValueError,
            "key_padding_mask",
        ),
        (
            lambda m, x: m(x, x, x, key_padding_mask=torch.zeros(2, 3, dtype=torch.int64)),
            TypeError,
            "key_padding_mask",
        ),
        (lambda m, x: m(x.tolist(), x, x), TypeError, "query"),
        (
            lambda m, x: m(x, x, x, attn_mask=causal_mask(3), is_causal=True),
            ValueError,
            "is_causal must be False when attn_mask is given",
        ),
    ],
)
def test_bad_input_is_rejected(call, error, words):
    with pytest.raises(error, match=words):
        call(MultiHeadAttention(8, 2), torch.randn(2, 3, 8))


def test_bad_construction():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="backend"):
        MultiHeadAttention(8, 2, backend="cuda")
    with pytest.raises(ValueError, match=r"dropout must be in \[0.0, 1.0\)"):
        MultiHeadAttention(8, 2, dropout=1.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"scale": float("nan")}, "scale"),
        ({"dropout_p": float("nan")}, "dropout_p"),
        ({"attn_mask": torch.full((3, 3), float("inf"))}, "attn_mask"),
        ({"attn_mask": torch.full((3, 3), float("nan"))}, "attn_mask"),
    ],
)
def test_scaled_dot_product_attention_refuses_what_would_give_nan(kwargs, name) -> None:
    x = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match=name):
        scaled_dot_product_attention(x, x, x, **kwargs)
