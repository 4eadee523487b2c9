"""Fused softmax kernel vs a float64 PyTorch reference."""

import pytest
import torch
from _kernel_testing import assert_within_torch_error

import lecturekit.kernels as kernels
from lecturekit.kernels.fused_softmax import softmax
from lecturekit.kernels.reference import softmax_reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n_cols, block_n", [(1, None), (17, None), (97, None), (97, 16)])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
def test_softmax_matches_reference(device, dtype, n_cols, mask_kind, block_n):
    x64 = torch.randn(2, 3, n_cols, dtype=torch.float64) * 3
    if mask_kind == "bool":
        mask = torch.rand(2, 1, n_cols) < 0.3
        mask[0, 0, :] = True  # a fully masked row must give zeros, not NaN
    elif mask_kind == "additive":
        mask = torch.randn(n_cols, dtype=torch.float64).to(dtype)
        mask[0] = float("-inf")
    else:
        mask = None
    scale = 0.37
    x = x64.to(device, dtype).requires_grad_()
    mask_k = mask.to(device) if mask is not None else None
    y = softmax(x, scale=scale, mask=mask_k, block_n=block_n)

    x_ref = x.detach().cpu().double().requires_grad_()
    mask_ref = mask.double() if mask is not None and mask.is_floating_point() else mask
    y_ref = softmax_reference(x_ref, scale=scale, mask=mask_ref)
    x_torch = x.detach().clone().requires_grad_()
    y_torch = softmax_reference(x_torch, scale=scale, mask=mask_k)

    dy = torch.randn_like(y_ref)
    y.backward(dy.to(device, dtype))
    y_ref.backward(dy)
    y_torch.backward(dy.to(device, dtype))
    assert y.dtype == dtype
    assert_within_torch_error("y", y, y_ref, y_torch)
    assert_within_torch_error("dx", x.grad, x_ref.grad, x_torch.grad)
    if mask_kind == "bool":
        assert (y[0, 0] == 0).all()


def test_softmax_other_dim_and_strided_input(device):
    x = torch.randn(5, 7, 4, device=device).transpose(0, 2)  # non-contiguous (4, 7, 5)
    torch.testing.assert_close(softmax(x, dim=1), torch.softmax(x, dim=1))


def test_softmax_bad_arguments_raise(device):
    x = torch.randn(3, 5, device=device)
    with pytest.raises(ValueError, match="broadcast"):
        softmax(x, mask=torch.zeros(4, dtype=torch.bool, device=device))
    with pytest.raises(TypeError, match="mask must be bool"):
        softmax(x, mask=torch.zeros(5, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="power of two"):
        softmax(x, block_n=12)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        softmax(x.double())


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), float("-inf")])
def test_softmax_refuses_a_scale_that_is_not_finite(device, scale):
    """``scale=nan`` used to return NaN silently."""
    x = torch.randn(3, 5, device=device)
    for fn in (softmax, kernels.softmax):
        with pytest.raises(ValueError, match="scale must be a finite number"):
            fn(x, scale=scale)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_softmax_refuses_nan_and_plus_inf_in_a_float_mask(device, bad):
    """A +inf (or NaN) logit makes its whole row NaN: refused, while -inf still masks out."""
    x = torch.randn(3, 5, device=device)
    mask = torch.zeros(5, device=device)
    mask[1] = float("-inf")
    expected = softmax_reference(x, mask=mask)
    assert (softmax(x, mask=mask)[:, 1] == 0).all()
    torch.testing.assert_close(softmax(x, mask=mask), expected)
    mask[2] = bad
    for fn in (softmax, kernels.softmax):
        with pytest.raises(ValueError, match=r"mask must hold finite values or -inf"):
            fn(x, mask=mask)


def test_public_wrapper_survives_submodule_import(device):
    """``lecturekit.kernels.softmax`` stays the function after its module has been imported."""
    x = torch.randn(3, 5, device=device)
    for _ in range(2):
        torch.testing.assert_close(kernels.softmax(x, scale=2.0), torch.softmax(2 * x, dim=-1))
