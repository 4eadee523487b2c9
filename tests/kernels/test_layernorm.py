"""Fused LayerNorm kernel (forward and backward) vs a float64 reference."""

import pytest
import torch
import torch.nn.functional as F
from _kernel_testing import assert_within_torch_error

import lecturekit.kernels as kernels
from lecturekit.kernels.layernorm import layer_norm
from lecturekit.kernels.reference import layer_norm_reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (2, 5, 97), (11, 40), (37, 24)])
def test_layer_norm_forward_backward(device, dtype, shape):
    n = shape[-1]
    x = (torch.randn(shape, dtype=torch.float64) * 2 + 1).to(device, dtype).requires_grad_()
    w = torch.randn(n, dtype=torch.float64).to(device, dtype).requires_grad_()
    b = torch.randn(n, dtype=torch.float64).to(device, dtype).requires_grad_()
    y = layer_norm(x, w, b, eps=1e-5)

    refs = [t.detach().cpu().double().requires_grad_() for t in (x, w, b)]
    y_ref = layer_norm_reference(*refs, eps=1e-5)
    torch_in = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    y_torch = F.layer_norm(torch_in[0], (n,), torch_in[1], torch_in[2], eps=1e-5)

    dy = torch.randn_like(y_ref)
    y.backward(dy.to(device, dtype))
    y_ref.backward(dy)
    y_torch.backward(dy.to(device, dtype))
    assert y.dtype == dtype
    assert_within_torch_error("y", y, y_ref, y_torch)
    for name, got, ref, tor in zip(("dx", "dw", "db"), (x, w, b), refs, torch_in, strict=True):
        assert_within_torch_error(name, got.grad, ref.grad, tor.grad)


def test_layer_norm_reference_matches_torch():
    x, w, b = (torch.randn(s, dtype=torch.float64) for s in ((4, 9), (9,), (9,)))
    torch.testing.assert_close(layer_norm_reference(x, w, b), F.layer_norm(x, (9,), w, b))


def test_layer_norm_without_affine_and_strided_rows(device):
    x = torch.randn(6, 32, device=device)[:, :24]  # rows with stride 32
    torch.testing.assert_close(layer_norm(x, None, None), F.layer_norm(x, (24,)))


def test_layer_norm_bad_arguments_raise(device):
    with pytest.raises(ValueError, match="weight must have shape"):
        layer_norm(torch.randn(2, 8, device=device), torch.ones(7, device=device), None)
    with pytest.raises(ValueError, match="eps must be > 0"):
        layer_norm(torch.randn(2, 8, device=device), None, None, eps=0.0)


@pytest.mark.parametrize("eps", [float("nan"), float("inf")])
def test_layer_norm_refuses_an_eps_that_is_not_finite(device, eps):
    """``eps=nan`` passed the old ``eps <= 0`` check and returned NaN."""
    x = torch.randn(2, 8, device=device)
    for fn in (layer_norm, kernels.layer_norm):
        with pytest.raises(ValueError, match="eps must be a finite number"):
            fn(x, None, None, eps=eps)


def test_public_wrapper(device):
    x, w, b = (torch.randn(s, device=device) for s in ((4, 9), (9,), (9,)))
    for _ in range(2):
        torch.testing.assert_close(kernels.layer_norm(x, w, b), F.layer_norm(x, (9,), w, b))
