"""Reference answers of the exercises whose answer is a Triton kernel (chapter 7).

Kept apart from ``ch07_kernels`` because defining a kernel imports triton, and Triton decides
*when a kernel is defined* whether it runs compiled (GPU) or interpreted (``TRITON_INTERPRET=1``,
CPU): this module is imported only by the tests, under the setting they choose.
``solution("kernels.row_sum_kernel")`` (and ``kernels.attention_kernel``) prints the source
from this file without importing it.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["attention_kernel", "row_sum_kernel"]


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


@triton.jit
def attention_kernel(
    Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr
):
    """Program ``pid`` writes ``softmax(Q_i K^T) V`` for its ``BLOCK_M`` queries, streaming K/V."""
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)  # this program's queries
    offs_d = tl.arange(0, D)
    q_ok = offs_m[:, None] < n_q
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=q_ok, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running maximum
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp(s - m_i)
    acc = tl.zeros([BLOCK_M, D], tl.float32)  # running sum of exp(s - m_i) @ V
    for start_n in range(0, n_k, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)  # keys of this step
        k_ok = offs_n[:, None] < n_k  # 0 past the last key, never NaN or garbage
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=k_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")  # (BLOCK_M, BLOCK_N)
        s = tl.where(offs_n[None, :] < n_k, s, float("-inf"))  # keys past n_k get no weight
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)  # rescales what was accumulated so far
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + offs_m[:, None] * D + offs_d[None, :], out, mask=q_ok)
