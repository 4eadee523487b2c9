"""Fused softmax kernel vs a float64 PyTorch reference."""

import pytest
import torch
from _kernel_testing import assert_within_torch_error

from lecturekit.kernels.fused_softmax import softmax, softmax_reference


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


def test_public_wrapper_survives_submodule_import(device):
    """``lecturekit.kernels.softmax`` stays the function after its module has been imported."""
    import lecturekit.kernels as kernels

    x = torch.randn(3, 5, device=device)
    for _ in range(2):
        torch.testing.assert_close(kernels.softmax(x, scale=2.0), torch.softmax(2 * x, dim=-1))
