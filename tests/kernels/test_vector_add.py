"""The vector-add kernel (chapter 7's first kernel) vs a float64 PyTorch reference."""

import pytest
import torch

import lecturekit.kernels as kernels
from lecturekit.kernels.reference import add_reference
from lecturekit.kernels.vector_add import add


@pytest.mark.parametrize("n", [1, 7, 16, 17, 100])  # below, at and above one block of 16
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_add_matches_float64_reference_for_ragged_lengths(device, n, dtype):
    x64, y64 = torch.randn(n, dtype=torch.float64), torch.randn(n, dtype=torch.float64)
    x, y = x64.to(device, dtype), y64.to(device, dtype)
    out = add(x, y, block_size=16)
    assert out.dtype == dtype and out.shape == (n,)
    # one rounding of the exact sum of the rounded inputs: what PyTorch's own x + y gives
    expected = (x.double() + y.double()).to(dtype)
    assert torch.equal(out, expected)
    torch.testing.assert_close(out.double().cpu(), add_reference(x64, y64), atol=2e-2, rtol=1e-2)


def test_add_keeps_the_shape_and_reads_non_contiguous_inputs(device):
    x = torch.randn(3, 5, 4, device=device).transpose(0, 2)  # (4, 5, 3), not contiguous
    y = torch.randn(4, 5, 3, device=device)
    out = add(x, y, block_size=32)
    assert out.shape == (4, 5, 3) and out.is_contiguous()
    assert torch.equal(out, x + y)
    assert add(x[:0], y[:0]).shape == (0, 5, 3)


def test_public_add_runs_the_kernel(device):
    x, y = torch.randn(2, 9, device=device), torch.randn(2, 9, device=device)
    assert torch.equal(kernels.add(x, y), x + y)


def test_add_rejects_bad_input_with_clear_errors(device):
    x = torch.randn(8, device=device)
    with pytest.raises(ValueError, match=r"y must have the shape of x \(8,\)"):
        add(x, torch.randn(1, device=device))  # no silent broadcasting
    with pytest.raises(ValueError, match="share dtype"):
        add(x, x.half())
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        add(x.long(), x.long())
    with pytest.raises(TypeError, match="y must be a torch.Tensor"):
        add(x, [1.0] * 8)
    for block_size in (0, 12, 2.0):
        with pytest.raises(ValueError, match="block_size must be a positive power of two"):
            add(x, x, block_size=block_size)
