"""Tiled matrix multiplication in Triton: the second kernel of chapter 7 (after Triton's
tutorial 03).

Computes ``C = A @ B`` for ``A (M, K)`` and ``B (K, N)``, giving ``C (M, N)``. Attention is
two of these (``Q K^T`` and ``P V``), and FlashAttention (``flash_attention``) is this
kernel's loop with a softmax inside.

Algorithm
---------
``C`` is cut into tiles of ``BLOCK_M x BLOCK_N``; the launch grid has one program instance
per tile, ``ceil(M / BLOCK_M) x ceil(N / BLOCK_N)`` of them. Program ``(pid_m, pid_n)``
computes the tile of rows ``pid_m * BLOCK_M ...`` and columns ``pid_n * BLOCK_N ...``:

* it keeps an accumulator ``acc (BLOCK_M, BLOCK_N)`` in float32 registers;
* it walks along ``K`` in steps of ``BLOCK_K``: it loads a ``(BLOCK_M, BLOCK_K)`` tile of
  ``A`` and a ``(BLOCK_K, BLOCK_N)`` tile of ``B`` (into on-chip memory) and adds their
  product, ``acc += tl.dot(a, b)`` (on a GPU, tensor-core instructions);
* it writes ``acc`` to ``C`` once, converted to ``C``'s dtype.

Shapes need not be multiples of the block sizes: rows past ``M``, columns past ``N`` and the
last ``K`` step past ``K`` are *masked*; masked loads read ``0``, which adds nothing to the
dot product, and masked stores write nothing. Pointers are computed from strides, so ``A``
and ``B`` may be transposed views (``b.t()``) without a copy.

Memory traffic and arithmetic intensity
---------------------------------------
The product costs ``2 M N K`` FLOPs. A naive kernel with one program per element of ``C``
reads a row of ``A`` and a column of ``B`` for every output: ``2 K`` elements for ``2 K``
FLOPs, i.e. ``1 / bytes_per_element`` FLOP/byte, as memory-bound as vector addition. With
tiles, each element of ``A`` is loaded once per *column tile* and each element of ``B``
once per *row tile*:

    bytes = bytes_per_element * (M K * ceil(N / BLOCK_N) + K N * ceil(M / BLOCK_M) + M N)

so the arithmetic intensity is about ``2 / (bytes_per_element * (1/BLOCK_M + 1/BLOCK_N))``
FLOP/byte: 32 for float16 with 64 x 64 tiles, 64 with 128 x 128 tiles. Bigger tiles reuse
more data, up to the limit of registers and shared memory per SM. A GPU's ridge point (peak
FLOP/s over bandwidth) is in the hundreds of FLOP/byte for float16 tensor cores (H100 SXM,
NVIDIA's datasheet: about 990 TFLOP/s dense float16 and 3.35 TB/s), so real kernels also
reorder the tiles so that programs running together share tiles in the L2 cache (Triton's
tutorial 03 "grouped ordering"); this kernel leaves that out to stay readable.

Float32 inputs are multiplied in full float32 precision (``input_precision="ieee"``); GPUs
could use TF32 tensor cores instead, faster but with a 10-bit mantissa.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lecturekit.kernels._utils import check_int32_offsets, check_operands, check_tensor
from lecturekit.kernels.reference import matmul_reference

#: tile sizes (powers of two, at least 16: on NVIDIA GPUs ``tl.dot`` needs BLOCK_K >= 16 for
#: 16-bit inputs; this module asks the same of all three)
DEFAULT_BLOCKS = (64, 64, 32)

__all__ = ["DEFAULT_BLOCKS", "matmul", "matmul_reference"]


@triton.jit
def _matmul_kernel(
    A,  # pointer to A (M, K)
    B,  # pointer to B (K, N)
    C,  # pointer to C (M, N)
    M,
    N,
    K,
    stride_am,  # A[i, k] is at A + i * stride_am + k * stride_ak (strides in elements)
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXACT_FP32: tl.constexpr,  # float32 inputs: full-precision products, not TF32
):
    """Program ``(pid_m, pid_n)`` computes the ``(BLOCK_M, BLOCK_N)`` tile of C."""
    pid_m = tl.program_id(axis=0)  # which tile of rows
    pid_n = tl.program_id(axis=1)  # which tile of columns
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) rows of A and C
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) columns of B and C
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,) offsets inside one step along K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # stays in registers
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        # (BLOCK_M, BLOCK_K) tile of A and (BLOCK_K, BLOCK_N) tile of B; 0 outside the matrix
        a_ptrs = A + rows[:, None] * stride_am + k[None, :] * stride_ak
        b_ptrs = B + k[:, None] * stride_bk + cols[None, :] * stride_bn
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        if EXACT_FP32:
            acc += tl.dot(a, b, input_precision="ieee")  # (BLOCK_M, BLOCK_N)
        else:
            acc += tl.dot(a, b)  # float16/bfloat16 products, float32 sums
    c_ptrs = C + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    c_mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=c_mask)  # each element written once


def _check_blocks(blocks: tuple[int, int, int]) -> tuple[int, int, int]:
    if not isinstance(blocks, tuple) or len(blocks) != 3:
        raise ValueError(f"blocks must be a tuple (BLOCK_M, BLOCK_N, BLOCK_K), got {blocks!r}")
    for name, size in zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), blocks, strict=True):
        if isinstance(size, bool) or not isinstance(size, int) or size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two >= 16 (tl.dot), got {size!r}")
    return blocks


def matmul(
    a: torch.Tensor, b: torch.Tensor, *, blocks: tuple[int, int, int] = DEFAULT_BLOCKS
) -> torch.Tensor:
    """``a @ b`` computed by the tiled Triton kernel, accumulating in float32.

    Args:
        a: ``(M, K)`` float32/float16/bfloat16 matrix (a CUDA tensor, or a CPU tensor under
            ``TRITON_INTERPRET=1``); any strides.
        b: ``(K, N)`` matrix of the same dtype and device.
        blocks: ``(BLOCK_M, BLOCK_N, BLOCK_K)``, powers of two >= 16.

    Returns:
        ``(M, N)`` tensor of the dtype of ``a``.
    """
    check_operands("a", a, "b", b, matmul=True)
    check_tensor("a", a)
    block_m, block_n, block_k = _check_blocks(blocks)
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    for name, t in (("a", a), ("b", b), ("the result (M, N)", c)):
        check_int32_offsets(name, t)
    if m == 0 or n == 0:
        return c
    if k == 0:
        return c.zero_()  # an empty sum
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))  # one program per tile of C
    _matmul_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, EXACT_FP32=a.dtype == torch.float32,
    )  # fmt: skip
    return c
