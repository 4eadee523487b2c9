"""Fused row softmax with a scale and a boolean or additive mask, in Triton.

Computes ``y = softmax(x * scale + mask)`` along the last dimension of ``x`` viewed as
``(R, N)`` (``R`` rows of ``N`` columns).

Memory traffic
--------------
In eager PyTorch, ``torch.softmax(x * scale + mask, -1)`` runs three kernels (scale, add the
mask, softmax), about 4 reads and 3 writes of ``R * N`` elements: the two intermediate
results go to DRAM and come back. ``torch.softmax`` itself is already one fused kernel (max,
exp, sum and divide in one pass); only a softmax written out of separate max/exp/sum/divide
calls (Triton tutorial 02's ``naive_softmax``) reads and writes the whole tensor at every
step. Softmax does ~5 flops per element, far below what a GPU can do per byte loaded, so its
speed is set by bytes moved. The fused kernel reads ``x`` and the mask once and writes ``y``
once: ``3 * R * N`` elements with a mask, ``2 * R * N`` without, the minimum. Its bandwidth
can therefore approach that of a plain device-to-device copy, which is the yardstick of
``benchmarks/kernels_gpu.py``. That count holds when the mask already has ``x``'s shape: the
kernel reads the mask with ``x``'s row layout, so :func:`softmax` first expands a mask that
broadcasts (a ``(T, T)`` causal mask, a ``(B, 1, 1, T)`` padding mask) and copies it to
``x``'s shape, one more write and read of ``R * N`` elements before the kernel runs.

Algorithm
---------
One program handles one row.

* If the row fits in one block (``BLOCK_N >= N``, the common case) the program loads it into
  registers once, subtracts the row maximum (so ``exp`` cannot overflow), exponentiates,
  sums and divides, then stores.
* Longer rows are processed in blocks of ``BLOCK_N`` columns with the *online softmax*: each
  lane keeps a running maximum ``m`` and a running sum ``s`` of ``exp(z - m)``; when a new
  block raises the maximum to ``m'``, the old sum is rescaled by ``exp(m - m')``. A second
  pass over the row writes ``exp(z - m) / s``. This reads ``x`` (and the mask) twice (the
  second read may be served by the L2 cache; not measured).

Masked entries get the logit ``-inf``, so they contribute ``exp(-inf) = 0``. A row whose
entries are *all* masked would compute ``0 / 0``; we define its output as all zeros (no NaN),
the same convention as the model's attention (a fully padded query attends to nothing).

Backward: with ``z = x * scale + mask`` and ``y = softmax(z)``,
``dz = y * (dy - sum(dy * y))`` and ``dx = scale * dz``; one program per row again, reading
``y`` and ``dy`` once and writing ``dx`` once. The mask is treated as a constant.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lecturekit.kernels._utils import check_softmax_args, check_tensor, next_power_of_2
from lecturekit.kernels._utils import num_warps_for as _num_warps_for
from lecturekit.kernels.reference import softmax_reference

# Rows up to this many columns are kept in registers in one block.
MAX_SINGLE_BLOCK = 8192


@triton.jit
def _load_logits(
    x_row,  # pointer to the first element of this row of x
    mask_row,  # pointer to the first element of this row of the mask (unused without mask)
    cols,  # (BLOCK_N,) column indices
    n_cols,  # N
    scale,  # multiplier applied to x
    HAS_MASK: tl.constexpr,
    MASK_IS_BOOL: tl.constexpr,
):
    """z = x * scale + mask for one block of columns, in fp32; -inf outside the row."""
    in_row = cols < n_cols
    z = tl.load(x_row + cols, mask=in_row, other=0.0).to(tl.float32) * scale
    if HAS_MASK:
        if MASK_IS_BOOL:
            masked_out = tl.load(mask_row + cols, mask=in_row, other=1) != 0
            z = tl.where(masked_out, float("-inf"), z)
        else:
            z += tl.load(mask_row + cols, mask=in_row, other=0.0).to(tl.float32)
    return tl.where(in_row, z, float("-inf"))


@triton.jit
def _softmax_fwd_kernel(
    X,  # input (R, N), columns contiguous
    Y,  # output (R, N), contiguous
    MASK,  # mask (R, N) as uint8 (bool) or float, contiguous; a dummy pointer without mask
    stride_x,  # row stride of X, in elements
    n_cols,  # N
    scale,  # multiplier applied to x before masking
    HAS_MASK: tl.constexpr,
    MASK_IS_BOOL: tl.constexpr,
    BLOCK_N: tl.constexpr,  # columns per block (power of two)
    SINGLE_BLOCK: tl.constexpr,  # BLOCK_N >= N: keep the whole row in registers
):
    """One program per row: read x (and the mask) once, write y once (two passes if long)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * n_cols
    mask_row = MASK + row * n_cols
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_BLOCK:
        z = _load_logits(x_row, mask_row, cols, n_cols, scale, HAS_MASK, MASK_IS_BOOL)
        row_max = tl.max(z, axis=0)
        # all -inf (fully masked): subtract 0 instead of -inf so exp gives 0, not NaN
        row_max = tl.where(row_max == float("-inf"), 0.0, row_max)
        e = tl.exp(z - row_max)
        denom = tl.sum(e, axis=0)
        y = e / tl.where(denom > 0.0, denom, 1.0)
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < n_cols)
    else:
        # pass 1: per-lane online softmax statistics (running max m, running sum s)
        m = tl.full([BLOCK_N], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            z = _load_logits(
                x_row + start, mask_row + start, cols, n_cols - start, scale, HAS_MASK, MASK_IS_BOOL
            )
            m_new = tl.maximum(m, z)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * tl.exp(m - m_safe) + tl.exp(z - m_safe)
            m = m_new
        # combine the lanes: the row maximum and the sum rescaled to it
        row_max = tl.max(m, axis=0)
        row_max = tl.where(row_max == float("-inf"), 0.0, row_max)
        denom = tl.sum(s * tl.exp(m - row_max), axis=0)
        inv_denom = 1.0 / tl.where(denom > 0.0, denom, 1.0)
        # pass 2: normalise and write
        for start in range(0, n_cols, BLOCK_N):
            z = _load_logits(
                x_row + start, mask_row + start, cols, n_cols - start, scale, HAS_MASK, MASK_IS_BOOL
            )
            y = tl.exp(z - row_max) * inv_denom
            tl.store(y_row + start + cols, y.to(Y.dtype.element_ty), mask=start + cols < n_cols)


@triton.jit
def _softmax_bwd_kernel(
    Y,  # forward output (R, N), contiguous
    DY,  # upstream gradient (R, N), contiguous
    DX,  # gradient w.r.t. x (R, N), contiguous
    n_cols,  # N
    scale,  # the forward's scale (dx = scale * dz)
    BLOCK_N: tl.constexpr,
    SINGLE_BLOCK: tl.constexpr,
):
    """One program per row: dx = scale * y * (dy - sum(dy * y)); reads y, dy once, writes dx."""
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_BLOCK:
        in_row = cols < n_cols
        y = tl.load(Y + base + cols, mask=in_row, other=0.0).to(tl.float32)
        dy = tl.load(DY + base + cols, mask=in_row, other=0.0).to(tl.float32)
        dot = tl.sum(y * dy, axis=0)
        dx = scale * y * (dy - dot)
        tl.store(DX + base + cols, dx.to(DX.dtype.element_ty), mask=in_row)
    else:
        acc = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            in_row = start + cols < n_cols
            y = tl.load(Y + base + start + cols, mask=in_row, other=0.0).to(tl.float32)
            dy = tl.load(DY + base + start + cols, mask=in_row, other=0.0).to(tl.float32)
            acc += y * dy
        dot = tl.sum(acc, axis=0)
        for start in range(0, n_cols, BLOCK_N):
            in_row = start + cols < n_cols
            y = tl.load(Y + base + start + cols, mask=in_row, other=0.0).to(tl.float32)
            dy = tl.load(DY + base + start + cols, mask=in_row, other=0.0).to(tl.float32)
            dx = scale * y * (dy - dot)
            tl.store(DX + base + start + cols, dx.to(DX.dtype.element_ty), mask=in_row)


def _block_for(n_cols: int, block_n: int | None) -> tuple[int, bool]:
    if block_n is None:
        block_n = min(next_power_of_2(n_cols), MAX_SINGLE_BLOCK)
    elif block_n < 1 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a positive power of two, got {block_n}")
    return block_n, block_n >= n_cols


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2d, mask2d, scale, block_n):  # type: ignore[override]
        n_rows, n_cols = x2d.shape
        y = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device)
        block, single = _block_for(n_cols, block_n)
        has_mask = mask2d is not None
        mask_is_bool = has_mask and mask2d.dtype == torch.bool
        # triton reads bool masks as bytes; without a mask any pointer will do (never read)
        mask_arg = x2d if not has_mask else mask2d.view(torch.uint8) if mask_is_bool else mask2d
        if n_rows > 0 and n_cols > 0:
            _softmax_fwd_kernel[(n_rows,)](
                x2d,
                y,
                mask_arg,
                x2d.stride(0),
                n_cols,
                float(scale),
                HAS_MASK=has_mask,
                MASK_IS_BOOL=mask_is_bool,
                BLOCK_N=block,
                SINGLE_BLOCK=single,
                num_warps=_num_warps_for(block),
            )
        ctx.save_for_backward(y)
        ctx.scale, ctx.block_n = scale, block_n
        return y

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        (y,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(y)
        n_rows, n_cols = y.shape
        block, single = _block_for(n_cols, ctx.block_n)
        if n_rows > 0 and n_cols > 0:
            _softmax_bwd_kernel[(n_rows,)](
                y,
                dy,
                dx,
                n_cols,
                float(ctx.scale),
                BLOCK_N=block,
                SINGLE_BLOCK=single,
                num_warps=_num_warps_for(block),
            )
        return dx, None, None, None


def softmax(
    x: torch.Tensor,
    dim: int = -1,
    *,
    scale: float = 1.0,
    mask: torch.Tensor | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Fused ``softmax(x * scale + mask, dim)`` (differentiable w.r.t. ``x``).

    Args:
        x: float32/float16/bfloat16 tensor, any shape.
        dim: dimension to normalise over.
        scale: multiplier applied to ``x`` before the mask (e.g. ``1 / sqrt(d_k)``), finite.
        mask: broadcastable to ``x``; bool (True = masked out) or float (added to the logits,
            ``-inf`` = masked out; NaN and ``+inf`` are refused). Treated as a constant (no
            gradient).
        block_n: columns per block (power of two); default: the whole row in one block up to
            8192 columns, longer rows are processed in blocks with the online softmax.

    Returns:
        Tensor like ``x``; rows whose entries are all masked are zeros.
    """
    x, mask = check_softmax_args(x, scale, mask)
    check_tensor("x", x)
    return _launch(x, dim, scale, mask, block_n)


def _launch(
    x: torch.Tensor, dim: int, scale: float, mask: torch.Tensor | None, block_n: int | None
) -> torch.Tensor:
    """Run the kernels on validated arguments, ``mask`` expanded to ``x``'s shape or None."""
    xt = x.movedim(dim, -1)
    n_cols = xt.shape[-1]
    x2d = xt.reshape(-1, n_cols)
    if n_cols > 0 and x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    mask2d = None
    if mask is not None:
        mask2d = mask.movedim(dim, -1).reshape(-1, n_cols).contiguous()
    y = _Softmax.apply(x2d, mask2d, scale, block_n)
    return y.reshape(xt.shape).movedim(-1, dim)


__all__ = ["softmax", "softmax_reference"]
