"""Vector addition in Triton: the first kernel of chapter 7 (after Triton's tutorial 01).

Computes ``out = x + y`` for two tensors of the same shape, viewed as flat vectors of
``n`` elements.

The programming model
---------------------
A Triton kernel is written for **one program instance**; the launch grid says how many run.
On a GPU each program instance becomes one thread block on one streaming multiprocessor
(SM), and Triton spreads its ``BLOCK_SIZE`` elements over the block's threads. Here program
``pid`` handles elements ``pid * BLOCK_SIZE`` to ``pid * BLOCK_SIZE + BLOCK_SIZE - 1``, and
the grid has ``ceil(n / BLOCK_SIZE)`` programs. ``n`` need not be a multiple of
``BLOCK_SIZE``: the last program's block runs past the end, so its loads and stores are
*masked* (``offsets < n``); masked lanes read nothing and write nothing.

Memory traffic
--------------
Each element costs one addition, one read of ``x``, one read of ``y`` and one write of
``out``: ``1`` FLOP per ``3 * bytes_per_element`` bytes, i.e. an arithmetic intensity of
``1/12`` FLOP/byte in float32. A GPU does tens of float32 FLOPs in the time it moves one
byte from HBM (about 20 on an H100 SXM's CUDA cores: NVIDIA's datasheet gives about 67 TFLOP/s
of float32, counting a fused multiply-add as two FLOPs, over about 3.35 TB/s of HBM3; hundreds
with bf16 tensor cores), so this kernel is bound by memory: its speed is bytes moved
divided by bandwidth, and the best it can do is what a device-to-device copy of the same
bytes achieves. Fusing more element-wise work into the same pass (``out = relu(x + y)``)
would cost almost nothing extra, which is why fused kernels pay off.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lecturekit.kernels._utils import check_int32_offsets, check_operands, check_tensor
from lecturekit.kernels.reference import add_reference

#: elements per program instance (a power of two, as ``tl.arange`` requires)
DEFAULT_BLOCK_SIZE = 1024

__all__ = ["DEFAULT_BLOCK_SIZE", "add", "add_reference"]


@triton.jit
def _add_kernel(
    X,  # pointer to the first element of x (n contiguous elements)
    Y,  # pointer to the first element of y (n contiguous elements)
    OUT,  # pointer to the first element of out (n contiguous elements)
    n,  # number of elements
    BLOCK_SIZE: tl.constexpr,  # elements per program (a power of two)
):
    """Program ``pid`` adds elements ``[pid * BLOCK_SIZE, (pid + 1) * BLOCK_SIZE)``."""
    pid = tl.program_id(axis=0)  # which block of the vector this program handles
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,) element indices
    in_range = offsets < n  # False past the end: the last block may be partly outside
    x = tl.load(X + offsets, mask=in_range)  # (BLOCK_SIZE,) read once from HBM
    y = tl.load(Y + offsets, mask=in_range)
    tl.store(OUT + offsets, x + y, mask=in_range)  # written once


def add(x: torch.Tensor, y: torch.Tensor, *, block_size: int = DEFAULT_BLOCK_SIZE) -> torch.Tensor:
    """``x + y`` computed by the Triton kernel.

    Args:
        x: float32/float16/bfloat16 tensor, any shape (a CUDA tensor, or a CPU tensor under
            ``TRITON_INTERPRET=1``).
        y: a tensor of the same shape, dtype and device as ``x``.
        block_size: elements per program instance, a positive power of two.

    Returns:
        A new contiguous tensor of the shape of ``x``.
    """
    check_operands("x", x, "y", y, matmul=False)
    check_tensor("x", x)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive power of two, got {block_size!r}")
    if block_size & (block_size - 1):
        raise ValueError(f"block_size must be a positive power of two, got {block_size}")
    x, y = x.contiguous(), y.contiguous()  # the kernel reads flat, contiguous vectors
    check_int32_offsets("x", x)
    out = torch.empty_like(x)
    n = x.numel()
    if n > 0:
        grid = (triton.cdiv(n, block_size),)  # one program per block of the vector
        _add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out
