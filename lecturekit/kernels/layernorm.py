"""Fused LayerNorm forward and backward in Triton (an autograd Function).

``y = (x - mean(x)) / sqrt(var(x) + eps) * w + b`` over the last dimension of ``x`` viewed
as ``(M, N)`` (``M`` rows, ``N`` features), ``var`` the biased variance, as in
``torch.nn.LayerNorm``.

Memory traffic
--------------
Eager PyTorch would run mean, subtract, square, mean, rsqrt, multiply, multiply, add as
separate kernels, each reading and writing ``M * N`` elements. LayerNorm does ~10 flops per
element, so, like softmax, it is bound by memory. The fused forward reads ``x`` once and
writes ``y`` once (plus ``2 M`` floats of statistics and ``2 N`` parameters), so it can run
near copy bandwidth.

Forward algorithm
-----------------
One program per tile of ``ROWS`` rows (several rows when ``N`` is small, so that each program
has enough work): load the tile into registers (``BLOCK_N >= N``, fp32 math), compute each row's
mean, the centred values ``xc``, the variance ``mean(xc^2)`` (two reductions over registers,
numerically safer than ``E[x^2] - E[x]^2``), ``rstd = 1/sqrt(var + eps)``, then
``y = xc * rstd * w + b``. ``mean`` and ``rstd`` are saved for the backward pass
(``2 M`` floats instead of a normalised copy of ``x``).

Backward algorithm
------------------
With ``xhat = (x - mean) * rstd`` and ``g = w * dy``:

* ``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`` (row-wise, needs ``x``, ``dy``, ``w``);
* ``dw = sum over rows of dy * xhat`` and ``db = sum over rows of dy`` (column-wise).

``dx`` is row-local, but ``dw``/``db`` reduce over all ``M`` rows. Summing with atomics
would be nondeterministic, so the work is split in two kernels: (1) ``G`` programs each
take a contiguous chunk of rows, write ``dx`` for them and accumulate *partial* ``dw``/``db``
rows in registers, stored to a ``(G, N)`` buffer that each program owns one row of; (2) a
second kernel sums the ``G`` partial rows per column in a fixed order. Triton's LayerNorm
tutorial (05) also has two kernels, but unlike it this one takes no locks: there each row
program adds into one of ``GROUP_SIZE_M`` shared buffer rows under an ``atomic_cas`` spin
lock, so the order of the additions, and the rounding, still depends on scheduling; here
each partial row has one owner, so the result is bit-for-bit reproducible. Traffic: read ``x`` and ``dy``
once, write ``dx`` once, plus ``2 G N`` partial sums (small when ``G << M``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lecturekit.kernels._utils import (
    MAX_FEATURES,
    check_layer_norm_args,
    check_tensor,
    interpreter_enabled,
    next_power_of_2,
    num_warps_for,
)
from lecturekit.kernels.reference import layer_norm_reference


@triton.jit
def _layer_norm_fwd_kernel(
    X,  # input (M, N), columns contiguous
    Y,  # output (M, N), contiguous
    W,  # weight (N,)
    B,  # bias (N,)
    MEAN,  # saved row means (M,), fp32
    RSTD,  # saved row 1/std (M,), fp32
    stride_x,  # row stride of X, in elements
    n_rows,  # M
    n_cols,  # N
    eps,  # added to the variance
    ROWS: tl.constexpr,  # rows per program (power of two)
    BLOCK_N: tl.constexpr,  # power of two >= N
):
    """One program per ROWS rows: read x once, write y once, save mean and 1/std per row."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    ok = row_ok[:, None] & (cols[None, :] < n_cols)
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=ok, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    xc = tl.where(ok, x - mean[:, None], 0.0)  # padding lanes must not enter the variance
    var = tl.sum(xc * xc, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(Y + rows[:, None] * n_cols + cols[None, :], y.to(Y.dtype.element_ty), mask=ok)
    tl.store(MEAN + rows, mean, mask=row_ok)
    tl.store(RSTD + rows, rstd, mask=row_ok)


@triton.jit
def _layer_norm_bwd_dx_kernel(
    X,  # forward input (M, N), columns contiguous
    DY,  # upstream gradient (M, N), contiguous
    DX,  # gradient w.r.t. x (M, N), contiguous
    W,  # weight (N,)
    MEAN,  # saved means (M,)
    RSTD,  # saved 1/std (M,)
    DW_PARTIAL,  # (G, N) fp32: this program's share of dw
    DB_PARTIAL,  # (G, N) fp32: this program's share of db
    stride_x,  # row stride of X
    n_rows,  # M
    n_cols,  # N
    rows_per_program,  # chunk of rows handled by one program (a multiple of ROWS)
    ROWS: tl.constexpr,  # rows per step (power of two)
    BLOCK_N: tl.constexpr,
):
    """One program per chunk of rows: dx for each row, partial dw/db sums for the chunk."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([ROWS, BLOCK_N], tl.float32)
    db_acc = tl.zeros([ROWS, BLOCK_N], tl.float32)
    row_start = pid.to(tl.int64) * rows_per_program  # 64-bit: M * N may exceed 2**31
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    for first in range(row_start, row_end, ROWS):
        rows = first + tl.arange(0, ROWS)
        row_ok = rows < row_end
        ok = row_ok[:, None] & col_ok[None, :]
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=ok, other=0.0)
        dy = tl.load(DY + rows[:, None] * n_cols + cols[None, :], mask=ok, other=0.0)
        x = x.to(tl.float32)
        dy = dy.to(tl.float32)
        mean = tl.load(MEAN + rows, mask=row_ok, other=0.0)
        rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
        xhat = tl.where(ok, (x - mean[:, None]) * rstd[:, None], 0.0)
        g = w[None, :] * dy
        mean_g = tl.sum(g, axis=1) / n_cols
        mean_gx = tl.sum(g * xhat, axis=1) / n_cols
        dx = rstd[:, None] * (g - mean_g[:, None] - xhat * mean_gx[:, None])
        tl.store(DX + rows[:, None] * n_cols + cols[None, :], dx.to(DX.dtype.element_ty), mask=ok)
        dw_acc += dy * xhat
        db_acc += dy
    tl.store(DW_PARTIAL + pid * n_cols + cols, tl.sum(dw_acc, axis=0), mask=col_ok)
    tl.store(DB_PARTIAL + pid * n_cols + cols, tl.sum(db_acc, axis=0), mask=col_ok)


@triton.jit
def _layer_norm_bwd_dwdb_kernel(
    DW_PARTIAL,  # (G, N) fp32 partial sums
    DB_PARTIAL,  # (G, N) fp32 partial sums
    DW,  # (N,) gradient of the weight
    DB,  # (N,) gradient of the bias
    n_partials,  # G
    n_cols,  # N
    BLOCK_G: tl.constexpr,  # partial rows summed per step
    BLOCK_N: tl.constexpr,  # columns per program
):
    """One program per block of columns: sum the G partial rows of dw and db."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros([BLOCK_G, BLOCK_N], tl.float32)
    db = tl.zeros([BLOCK_G, BLOCK_N], tl.float32)
    for start in range(0, n_partials, BLOCK_G):
        rows = start + tl.arange(0, BLOCK_G)
        ok = (rows[:, None] < n_partials) & (cols[None, :] < n_cols)
        offs = rows[:, None] * n_cols + cols[None, :]
        dw += tl.load(DW_PARTIAL + offs, mask=ok, other=0.0)
        db += tl.load(DB_PARTIAL + offs, mask=ok, other=0.0)
    tl.store(DW + cols, tl.sum(dw, axis=0).to(DW.dtype.element_ty), mask=cols < n_cols)
    tl.store(DB + cols, tl.sum(db, axis=0).to(DB.dtype.element_ty), mask=cols < n_cols)


def _rows_per_tile(block_n: int) -> int:
    """Rows per program: about 4096 elements per tile (fewer launches when N is small)."""
    return max(1, min(16, 4096 // block_n))


def _num_partials(n_rows: int, device: torch.device) -> int:
    """How many programs share the backward rows (and so how many partial dw/db rows)."""
    if interpreter_enabled() or device.type != "cuda":
        return max(1, min(n_rows, 2))  # each program launch is slow in the interpreter
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(n_rows, 4 * sms))


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2d, weight, bias, eps):  # type: ignore[override]
        n_rows, n_cols = x2d.shape
        block = next_power_of_2(n_cols)
        y = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device)
        mean = torch.empty(n_rows, dtype=torch.float32, device=x2d.device)
        rstd = torch.empty(n_rows, dtype=torch.float32, device=x2d.device)
        rows = _rows_per_tile(block)
        if n_rows > 0:
            _layer_norm_fwd_kernel[(triton.cdiv(n_rows, rows),)](
                x2d,
                y,
                weight,
                bias,
                mean,
                rstd,
                x2d.stride(0),
                n_rows,
                n_cols,
                float(eps),
                ROWS=rows,
                BLOCK_N=block,
                num_warps=num_warps_for(rows * block),
            )
        ctx.save_for_backward(x2d, weight, mean, rstd)
        ctx.bias_dtype = bias.dtype
        return y

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        x2d, weight, mean, rstd = ctx.saved_tensors
        n_rows, n_cols = x2d.shape
        dy = dy.contiguous()
        block = next_power_of_2(n_cols)
        dx = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device)
        n_partials = _num_partials(n_rows, x2d.device)
        dw_partial = torch.zeros((n_partials, n_cols), dtype=torch.float32, device=x2d.device)
        db_partial = torch.zeros_like(dw_partial)
        rows = _rows_per_tile(block)
        if n_rows > 0:
            rows_per_program = triton.cdiv(triton.cdiv(n_rows, n_partials), rows) * rows
            _layer_norm_bwd_dx_kernel[(n_partials,)](
                x2d,
                dy,
                dx,
                weight,
                mean,
                rstd,
                dw_partial,
                db_partial,
                x2d.stride(0),
                n_rows,
                n_cols,
                rows_per_program,
                ROWS=rows,
                BLOCK_N=block,
                num_warps=num_warps_for(rows * block),
            )
        dw = torch.empty(n_cols, dtype=weight.dtype, device=x2d.device)
        db = torch.empty(n_cols, dtype=ctx.bias_dtype, device=x2d.device)
        block_cols = min(block, 128)
        _layer_norm_bwd_dwdb_kernel[(triton.cdiv(n_cols, block_cols),)](
            dw_partial,
            db_partial,
            dw,
            db,
            n_partials,
            n_cols,
            BLOCK_G=32,
            BLOCK_N=block_cols,
        )
        return dx, dw, db, None


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Fused LayerNorm over the last dimension (differentiable w.r.t. x, weight and bias).

    Args:
        x: ``(..., N)``, float32/float16/bfloat16, ``1 <= N <= 16384`` (a row must fit in
            registers: 64 KiB, as in Triton's tutorial).
        weight: ``(N,)`` scale, or None for ones.
        bias: ``(N,)`` shift, or None for zeros.
        eps: added to the variance, a finite number > 0.

    Returns:
        Tensor like ``x``.
    """
    check_layer_norm_args(x, weight, bias, eps)
    check_tensor("x", x)
    return _launch(x, weight, bias, eps)


def _launch(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    """Run the kernels on validated arguments (None weight/bias: ones/zeros)."""
    n_cols = x.shape[-1]
    if weight is None:
        weight = torch.ones(n_cols, dtype=x.dtype, device=x.device)
    if bias is None:
        bias = torch.zeros(n_cols, dtype=x.dtype, device=x.device)
    x2d = x.reshape(-1, n_cols)
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    y = _LayerNorm.apply(x2d, weight.contiguous(), bias.contiguous(), eps)
    return y.reshape(x.shape)


__all__ = ["MAX_FEATURES", "layer_norm", "layer_norm_reference"]
