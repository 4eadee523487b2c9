"""Reference answers of the exercises whose answer is a Triton kernel (chapter 7).

Kept apart from ``ch07_kernels`` because defining a kernel imports triton, and Triton decides
*when a kernel is defined* whether it runs compiled (GPU) or interpreted (``TRITON_INTERPRET=1``,
CPU): this module is imported only by the tests, under the setting they choose.
``solution("kernels.row_sum_kernel")`` prints the source from this file without importing it.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["row_sum_kernel"]


@triton.jit
def row_sum_kernel(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):
    """Program ``row`` writes ``OUT[row] = sum(X[row, :n_cols])``, reading BLOCK columns a time."""
    row = tl.program_id(0)  # one program instance per row
    x_row = X + row * stride_row  # rows are stride_row elements apart, not n_cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)  # one partial sum per lane
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)  # (BLOCK,) columns of this step
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0)  # 0 past the row's end
    tl.store(OUT + row, tl.sum(acc, axis=0))
