"""The tiled matmul kernel (chapter 7's second kernel) vs a float64 PyTorch reference."""

import pytest
import torch

import lecturekit.kernels as kernels
from lecturekit.kernels.reference import matmul_reference
from lecturekit.kernels.tiled_matmul import matmul

SMALL = (16, 16, 16)  # the smallest tiles matmul takes: several tiles even for tiny shapes


# (M, K, N): one tile, exact multiples of the tiles, and ragged edges on every side
@pytest.mark.parametrize(
    "m, k, n", [(1, 1, 1), (16, 16, 16), (32, 48, 16), (17, 33, 20), (5, 40, 3)]
)
def test_matmul_matches_float64_reference_in_float32(device, m, k, n):
    a = torch.randn(m, k, dtype=torch.float64).float().to(device)
    b = torch.randn(k, n, dtype=torch.float64).float().to(device)
    c = matmul(a, b, blocks=SMALL)
    expected = matmul_reference(
        a.cpu().double(), b.cpu().double()
    )  # exact products, rounded inputs
    assert c.dtype == torch.float32 and c.shape == (m, n)
    # float32 sums of k products: a few ulps of the largest partial sum
    bound = (
        4 * k * torch.finfo(torch.float32).eps * (a.abs().cpu().double() @ b.abs().cpu().double())
    )
    assert ((c.cpu().double() - expected).abs() <= bound + 1e-30).all()


def test_matmul_in_float16_is_as_close_as_pytorchs_own_float16_result(device):
    a64, b64 = torch.randn(20, 37, dtype=torch.float64), torch.randn(37, 18, dtype=torch.float64)
    a, b = a64.half().to(device), b64.half().to(device)
    c = matmul(a, b, blocks=SMALL)
    exact = a.cpu().double() @ b.cpu().double()
    assert c.dtype == torch.float16
    # float32 accumulation, one rounding to float16 at the end: half an ulp of float16 + sums
    err = (c.cpu().double() - exact).abs()
    assert (err <= exact.abs() * 2.0**-10 + 1e-3).all(), err.max()


def test_matmul_reads_transposed_views_without_a_copy(device):
    a = torch.randn(24, 19, device=device)
    b = torch.randn(21, 19, device=device).t()  # (19, 21), column-major
    assert not b.is_contiguous()
    torch.testing.assert_close(matmul(a, b, blocks=SMALL), a @ b, atol=1e-5, rtol=1e-5)


def test_matmul_empty_dimensions(device):
    a, b = torch.randn(3, 0, device=device), torch.randn(0, 4, device=device)
    assert torch.equal(matmul(a, b), torch.zeros(3, 4, device=device))
    assert matmul(torch.randn(0, 5, device=device), torch.randn(5, 2, device=device)).shape == (
        0,
        2,
    )


def test_public_matmul_runs_the_kernel(device):
    a, b = torch.randn(9, 17, device=device), torch.randn(17, 5, device=device)
    torch.testing.assert_close(kernels.matmul(a, b), a @ b, atol=1e-5, rtol=1e-5)


def test_matmul_rejects_bad_input_with_clear_errors(device):
    a = torch.randn(4, 8, device=device)
    with pytest.raises(ValueError, match=r"a must be \(M, K\) and b \(K, N\) with the same K"):
        matmul(a, torch.randn(4, 8, device=device))  # forgot to transpose b
    with pytest.raises(ValueError, match=r"got a \(8,\)"):
        matmul(a[0], a.t())
    with pytest.raises(ValueError, match="share dtype"):
        matmul(a, a.t().half())
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        matmul(a.long(), a.t().long())
    with pytest.raises(ValueError, match="BLOCK_K must be a power of two >= 16"):
        matmul(a, a.t(), blocks=(16, 16, 8))
    with pytest.raises(ValueError, match="blocks must be a tuple"):
        matmul(a, a.t(), blocks=[16, 16, 16])
