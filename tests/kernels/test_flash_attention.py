"""FlashAttention forward and backward vs a float64 PyTorch reference."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from _kernel_testing import assert_within_torch_error, interpreting

import lecturekit.kernels as kernels
from lecturekit.kernels.flash_attention import dropout_keep_mask, flash_attention
from lecturekit.kernels.reference import attention_reference

FP32, FP16, BF16 = torch.float32, torch.float16, torch.bfloat16
BF16_ON_GPU_ONLY = pytest.mark.skipif(
    interpreting(), reason="Triton's interpreter computes bf16 wrongly; bf16 is tested on a GPU"
)

# (batch, heads, Nq, Nk, head dim, causal, key padding, dtype, block size)
CASES = [
    (2, 2, 1, 1, 16, False, False, FP32, None),
    (2, 2, 17, 17, 16, True, True, FP32, None),
    (2, 1, 97, 97, 64, True, False, FP32, None),
    (2, 2, 17, 97, 40, False, True, FP32, None),  # cross attention, Nq < Nk
    (2, 1, 97, 17, 40, True, True, FP32, None),  # Nq > Nk
    (2, 1, 33, 40, 16, True, True, FP32, 16),  # smallest tiles
    (1, 1, 17, 17, 128, False, False, FP32, None),
    (2, 2, 17, 17, 40, False, True, FP16, None),
    (2, 1, 97, 33, 64, True, True, FP16, None),
    (2, 2, 1, 17, 64, False, True, FP16, None),  # one query: an incremental decoding step
    pytest.param(2, 2, 97, 97, 64, True, True, BF16, None, marks=BF16_ON_GPU_ONLY),
    pytest.param(2, 2, 17, 97, 128, False, True, BF16, None, marks=BF16_ON_GPU_ONLY),
]


def _model_layout(batch, heads, n, dim, dtype, device):
    """(B, H, N, D) views of a (B, N, H, D) tensor: non-contiguous, as the model passes them."""
    x = torch.randn(batch, n, heads, dim, dtype=torch.float64)
    return x.to(device, dtype).transpose(1, 2).detach().requires_grad_()


def _padding(batch, n_k, device):
    """Row 0: random padding; row 1: all padding (its queries attend to nothing)."""
    mask = torch.rand(batch, n_k) < 0.3
    mask[0, 0] = False
    if batch > 1:
        mask[1] = True
    return mask.to(device)


@pytest.mark.parametrize("batch, heads, n_q, n_k, dim, causal, padded, dtype, block", CASES)
def test_flash_attention_matches_reference(
    device, batch, heads, n_q, n_k, dim, causal, padded, dtype, block
):
    q = _model_layout(batch, heads, n_q, dim, dtype, device)
    k = _model_layout(batch, heads, n_k, dim, dtype, device)
    v = _model_layout(batch, heads, n_k, dim, dtype, device)
    kpm = _padding(batch, n_k, device) if padded else None
    scale = 0.8 / math.sqrt(dim)
    out = flash_attention(
        q, k, v, key_padding_mask=kpm, is_causal=causal, scale=scale, block_m=block, block_n=block
    )

    refs = [t.detach().cpu().double().requires_grad_() for t in (q, k, v)]
    kpm_cpu = kpm.cpu() if kpm is not None else None
    out_ref = attention_reference(*refs, key_padding_mask=kpm_cpu, is_causal=causal, scale=scale)
    same = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out_torch = attention_reference(*same, key_padding_mask=kpm, is_causal=causal, scale=scale)

    d_out = torch.randn_like(out_ref)
    out.backward(d_out.to(device, dtype))
    out_ref.backward(d_out)
    out_torch.backward(d_out.to(device, dtype))

    assert out.dtype == dtype
    assert_within_torch_error("out", out, out_ref, out_torch)
    for name, got, ref, tor in zip(("dq", "dk", "dv"), (q, k, v), refs, same, strict=True):
        assert_within_torch_error(name, got.grad, ref.grad, tor.grad)
    if padded and batch > 1:  # fully padded source: zeros out, zero gradients, no NaN
        assert (out[1] == 0).all()
        assert (q.grad[1] == 0).all() and (k.grad[1] == 0).all() and (v.grad[1] == 0).all()


@pytest.mark.skipif(not interpreting(), reason="checks the interpreter's bf16 -> fp32 path")
def test_interpreter_upcasts_bf16_after_loading(device):
    """Under the interpreter bf16 blocks are converted to fp32 right after loading."""
    q, k, v = (torch.randn(1, 2, 17, 16).to(BF16) for _ in range(3))
    out = flash_attention(q, k, v, is_causal=True)
    ref = attention_reference(q.double(), k.double(), v.double(), is_causal=True)
    assert out.dtype == BF16
    # only the final rounding to bf16 remains: half a bf16 ulp of values of size <= ~4
    assert (out.double() - ref).abs().max().item() <= 4 * 2.0**-8


@pytest.mark.parametrize("n_q, n_k", [(9, 9), (5, 9), (9, 5)])
def test_reference_matches_sdpa(n_q, n_k):
    """Causal is top-left for Nq != Nk too, as in torch (the package's one convention)."""
    q = torch.randn(2, 3, n_q, 8, dtype=torch.float64)
    k, v = (torch.randn(2, 3, n_k, 8, dtype=torch.float64) for _ in range(2))
    for causal in (False, True):
        torch.testing.assert_close(
            attention_reference(q, k, v, is_causal=causal),
            F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        )


def test_public_wrapper_uses_default_scale(device):
    q, k, v = (torch.randn(1, 2, 5, 24, device=device) for _ in range(3))
    mask = torch.tensor([[False, False, True, False, True]], device=device)
    torch.testing.assert_close(
        kernels.attention(q, k, v, key_padding_mask=mask),
        F.scaled_dot_product_attention(q, k, v, attn_mask=~mask[:, None, None, :]),
    )


def test_bad_arguments_raise(device):
    q = torch.randn(1, 2, 5, 16, device=device)
    with pytest.raises(ValueError, match="matching q"):
        flash_attention(q, q[:, :1], q[:, :1])
    with pytest.raises(TypeError, match="key_padding_mask must be a bool"):
        flash_attention(q, q, q, key_padding_mask=torch.zeros(1, 5, device=device))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(1, 5\)"):
        flash_attention(q, q, q, key_padding_mask=torch.zeros(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="head dim"):
        big = torch.randn(1, 1, 3, 160, device=device)
        flash_attention(big, big, big)
    with pytest.raises(TypeError, match="share a dtype"):
        flash_attention(q, q.half(), q)


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), "0.5"])
def test_scale_must_be_a_finite_number(device, scale):
    """A NaN scale used to pass (``scale <= 0`` is False for NaN) and return NaN."""
    q = torch.randn(1, 1, 4, 16, device=device)
    error = TypeError if isinstance(scale, str) else ValueError
    for attend in (flash_attention, kernels.attention):
        with pytest.raises(error, match="scale must be a"):
            attend(q, q, q, scale=scale)


@pytest.mark.parametrize("causal, padded", [(False, True), (True, False)])
def test_dropout_matches_reference_with_the_same_mask(device, causal, padded):
    batch, heads, n_q, n_k, dim, p = 2, 1, 17, 24, 16, 0.3
    q = _model_layout(batch, heads, n_q, dim, FP32, device)
    k = _model_layout(batch, heads, n_k, dim, FP32, device)
    v = _model_layout(batch, heads, n_k, dim, FP32, device)
    kpm = _padding(batch, n_k, device) if padded else None
    out = flash_attention(q, k, v, key_padding_mask=kpm, is_causal=causal, dropout_p=p, seed=123)

    keep = dropout_keep_mask(123, batch, heads, n_q, n_k, p, device).cpu()
    refs = [t.detach().cpu().double().requires_grad_() for t in (q, k, v)]
    kpm_cpu = kpm.cpu() if kpm is not None else None
    out_ref = attention_reference(
        *refs, key_padding_mask=kpm_cpu, is_causal=causal, dropout_keep=keep, dropout_p=p
    )
    d_out = torch.randn_like(out_ref)
    out.backward(d_out.to(device, FP32))
    out_ref.backward(d_out)
    torch.testing.assert_close(out.cpu().double(), out_ref, atol=1e-5, rtol=1e-5)
    for name, got, ref in zip(("dq", "dk", "dv"), (q, k, v), refs, strict=True):
        torch.testing.assert_close(
            got.grad.cpu().double(), ref.grad, atol=1e-5, rtol=1e-5, msg=name
        )


def test_dropout_mask_rate_and_seeding(device):
    keep = dropout_keep_mask(7, 1, 2, 40, 50, 0.25, device)
    assert abs(keep.float().mean().item() - 0.75) < 0.03
    assert not torch.equal(keep, dropout_keep_mask(8, 1, 2, 40, 50, 0.25, device))
    q = torch.randn(1, 2, 9, 16, device=device)
    torch.manual_seed(5)
    first = flash_attention(q, q, q, dropout_p=0.5)
    torch.manual_seed(5)
    torch.testing.assert_close(flash_attention(q, q, q, dropout_p=0.5), first)
    torch.testing.assert_close(
        flash_attention(q, q, q, dropout_p=0.0), attention_reference(q, q, q), atol=1e-5, rtol=0
    )
    with pytest.raises(ValueError, match="dropout_p must be in"):
        flash_attention(q, q, q, dropout_p=1.0)


def test_public_wrapper_passes_dropout(device):
    q = torch.randn(1, 1, 8, 16, device=device)
    torch.manual_seed(3)
    dropped = kernels.attention(q, q, q, dropout_p=0.5)
    torch.manual_seed(3)
    torch.testing.assert_close(dropped, flash_attention(q, q, q, dropout_p=0.5))
    assert not torch.allclose(dropped, kernels.attention(q, q, q))


class _SmallSharedMemory:
    """Stands in for a kernel on a GPU whose shared memory only fits tiles of ``max_area``
    elements: larger tiles raise Triton's OutOfResources before launching, as Triton does."""

    def __init__(self, kernel, max_area: int) -> None:
        self.kernel, self.max_area, self.launched = kernel, max_area, []

    def __getitem__(self, grid):
        from triton.runtime.errors import OutOfResources

        run = self.kernel[grid]

        def launch(*args, **kwargs):
            tile = (kwargs["BLOCK_M"], kwargs["BLOCK_N"])
            if tile[0] * tile[1] > self.max_area:
                raise OutOfResources(tile[0] * tile[1] * 64, self.max_area * 64, "shared memory")
            self.launched.append(tile)
            return run(*args, **kwargs)

        return launch


def test_tiles_shrink_to_fit_a_gpu_with_little_shared_memory(device, monkeypatch):
    from triton.runtime.errors import OutOfResources

    from lecturekit.kernels import _attention_launch as fa

    tuned = fa._LaunchConfig(64, 32, 32, 64, 64, 32, num_warps=4, num_stages=1)  # fp32 on a GPU
    monkeypatch.setattr(fa, "_launch_config", lambda *args: tuned)
    monkeypatch.setattr(fa, "_fitting_configs", {})
    # the forward fits 32 x 32 tiles, the backward (two tiles on chip) only 16 x 16
    fwd = _SmallSharedMemory(fa._attn_fwd_kernel, 32 * 32)
    bwd = _SmallSharedMemory(fa._attn_bwd_kernel, 16 * 16)
    monkeypatch.setattr(fa, "_attn_fwd_kernel", fwd)
    monkeypatch.setattr(fa, "_attn_bwd_kernel", bwd)

    q, k, v = (_model_layout(2, 2, 37, 24, FP32, device) for _ in range(3))
    kpm = _padding(2, 37, device)
    with pytest.warns(UserWarning, match="too little shared memory") as caught:
        out = flash_attention(q, k, v, key_padding_mask=kpm, is_causal=True)
        out.backward(torch.ones_like(out))
    assert len(caught) == 2  # once for the forward pass, once for the backward pass
    assert fwd.launched == [(32, 32)]
    assert bwd.launched == [(16, 16)] * 2  # the dK/dV launch, then the dQ launch

    refs = [t.detach().cpu().double().requires_grad_() for t in (q, k, v)]
    out_ref = attention_reference(*refs, key_padding_mask=kpm.cpu(), is_causal=True)
    out_ref.backward(torch.ones_like(out_ref))
    torch.testing.assert_close(out.double().cpu(), out_ref, atol=1e-5, rtol=1e-5)
    for got, ref in zip((q, k, v), refs, strict=True):
        torch.testing.assert_close(got.grad.double().cpu(), ref.grad, atol=1e-5, rtol=1e-5)

    # the tiles that fit are remembered: no second warning, no failed attempt
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flash_attention(q, k, v, key_padding_mask=kpm, is_causal=True).sum().backward()
    assert fwd.launched == [(32, 32)] * 2 and bwd.launched == [(16, 16)] * 4

    # tiles the caller chose are used as given: too large is an error, not a silent change
    with pytest.raises(OutOfResources):
        flash_attention(q, k, v, block_m=64, block_n=64)
