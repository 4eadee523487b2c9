"""FlashAttention forward and backward in Triton (an autograd Function).

Computes ``O = softmax(Q K^T * scale + masks) V`` for ``Q`` ``(B, H, Nq, D)`` and
``K``, ``V`` ``(B, H, Nk, D)``, with an optional causal mask (query ``i`` sees keys
``j <= i``, top-left aligned as in ``torch.nn.functional.scaled_dot_product_attention``) and
an optional key-padding mask ``(B, Nk)`` (True = padding).

Memory traffic
--------------
Standard attention writes the score matrix ``S = Q K^T`` (``Nq * Nk`` per head) to DRAM,
reads it back for the softmax, writes ``P``, reads ``P`` again for ``P V``: about
``4 * Nq * Nk`` elements of traffic per head, against ``4 * N * D`` for reading ``Q, K, V``
and writing ``O``. With ``D = 64`` and ``N = 4096`` one score matrix holds ``N / D = 64``
times as many elements as ``Q``; each score costs ~``2 D`` flops to compute but is moved
four times, so at long lengths the scores' traffic, not the arithmetic, sets the time.
FlashAttention never stores ``S`` or ``P``: a program keeps a block of ``BLOCK_M`` queries in
on-chip memory (registers/SRAM) and streams blocks of ``BLOCK_N`` keys and values past it.
Its traffic is ``Nq * D`` (read Q once) ``+ (Nq / BLOCK_M) * 2 * Nk * D`` (K and V streamed
once per query block) ``+ Nq * D`` (write O). The middle term still grows with ``Nq * Nk``,
but ``2 * BLOCK_M / D`` times slower than the ``4 * Nq * Nk`` of the score matrices (4x with
``BLOCK_M = 128``, ``D = 64``), and query blocks running at the same time read the same K/V
blocks, which the L2 cache may then serve, so that DRAM sees little more than reading the
inputs once and writing the output once (expected; not measured).

Forward algorithm (online softmax)
----------------------------------
For each query row the program keeps a running maximum ``m``, a running denominator ``l`` and an
unnormalised output ``acc``. For each key block with scores ``s`` (a row of ``BLOCK_N``)::

    m_new = max(m, max(s))
    p     = exp(s - m_new)                 # this block's weights, relative to m_new
    alpha = exp(m - m_new)                 # rescales what was accumulated so far
    l     = alpha * l + sum(p)
    acc   = alpha * acc + p @ V_block
    m     = m_new

At the end ``O = acc / l``, exactly ``softmax(s) V`` over all keys. The program also stores
``LSE = m + log(l)`` (the log-sum-exp of the row, ``Nq`` floats per head) so that the backward
pass can recompute ``P = exp(S - LSE)`` without a second online pass. Exponentials are taken
base 2 (``exp2``, the GPU's native instruction) with the scale multiplied by ``log2(e)``.

This is FlashAttention-2's arrangement (Dao 2023), and three of its changes to
FlashAttention-1 are in the code: (1) the loop over key blocks is the *inner* loop, so a
program owns a query block and its ``acc``, ``m`` and ``l`` stay on chip until the end
(FlashAttention-1 loops over key blocks outside and reads and writes ``O``, ``m`` and ``l``
in DRAM at every step); (2) ``acc`` stays unnormalised and is divided by ``l`` once, after the
loop (FlashAttention-1 rescales ``O`` by ``diag(l)^-1`` at every step: more non-matmul
flops); (3) only ``LSE`` is saved for the backward pass, not ``m`` and ``l``. FlashAttention-2
also parallelises over query blocks as well as batch x head (the grid's two axes here).

Masked scores are ``-inf`` and contribute ``exp(-inf) = 0``. A query row whose keys are *all*
masked (a fully padded source) would give ``0 / 0``; here its output is zeros and its LSE is
``+inf`` (so ``P = exp(S - inf) = 0`` in the backward pass and its gradients are zero). That
is the model's convention: a fully masked query attends to nothing and returns zeros, no NaN.

Backward algorithm
------------------
With ``P = exp(S - LSE)``, ``dO`` the upstream gradient and ``Delta = rowsum(dO * O)``
(computed by a small preprocessing kernel)::

    dV = P^T dO          dP = dO V^T          dS = P * (dP - Delta)
    dQ = dS K * scale    dK = dS^T Q * scale

One backward kernel, launched twice, avoids atomic additions (so results are deterministic):
with ``DKDV`` set, one program per *key* block accumulates ``dK`` and ``dV`` while streaming
query blocks; without, one program per *query* block accumulates ``dQ`` while streaming key
blocks. Both recompute ``P`` from ``Q``, ``K`` and the saved ``LSE`` instead of reading an
``Nq * Nk`` matrix: recomputing costs flops, which are cheap, and saves bytes, which are not.

Attention dropout
-----------------
With ``dropout_p > 0`` each weight ``P_ij`` is kept with probability ``1 - dropout_p`` and
scaled by ``1 / (1 - dropout_p)`` (as ``torch.nn.functional.dropout`` does), after the
softmax's denominator has been computed from all weights. The keep mask is never stored:
element ``(i, j)`` of head ``bh`` draws Philox random number number
``(bh * Nq + i) * Nk + j`` of a per-call seed, so the forward pass and both backward launches
regenerate exactly the same mask. In the backward pass ``dV`` uses the dropped weights, and
``dP`` is masked and scaled the same way before ``dS = P * (dP - Delta)``;
``Delta = rowsum(dO * O)`` still holds because ``O`` is computed from the dropped weights.

Head dimensions ``D`` up to 128 are padded to a power of two with masked loads, at least 16:
``D`` is the contracted dimension of ``Q K^T``, which Triton requires to be at least 16 for
16-bit inputs on NVIDIA GPUs (8 for fp32; Triton 3.9's ``min_dot_size``). Any ``Nq`` and ``Nk``
work (the last blocks are masked).
Inputs may be fp32, fp16 or bf16; accumulation is fp32. Under the CPU interpreter bf16
arithmetic is wrong, so there the kernels convert bf16 blocks to fp32 right after loading.

Code layout
-----------
The kernels share their building blocks as ``@triton.jit`` helpers, as Triton's
fused-attention tutorial does (the compiler inlines them): :func:`_program_ids` locates a
program in the grid; :func:`_load_tile` reads a masked tile of Q, K, V or dO through any
strides; :func:`_visible` combines the masks (queries past ``Nq``, keys past ``Nk``, padding,
causal); :func:`_online_softmax_update` is the recurrence above; :func:`_recompute_p` rebuilds
``P`` from the saved ``LSE`` in the backward pass; :func:`_attn_bwd_p_dp` does a backward tile's
work (``P``, ``dP``) in either orientation; and :func:`_dropout_keep` regenerates the
dropout mask. The autograd Function that launches the kernels, with its tile sizes, lives
in ``_attention_launch``; the PyTorch reference in :mod:`lecturekit.kernels.reference`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lecturekit.kernels._utils import LOG2E, MAX_HEAD_DIM, check_attention_args, check_tensor
from lecturekit.kernels.reference import attention_reference

__all__ = ["MAX_HEAD_DIM", "attention_reference", "dropout_keep_mask", "flash_attention"]

# the same constant as a compile-time value: a kernel reads only constexpr globals
_LOG2E = tl.constexpr(LOG2E)


@triton.jit
def _program_ids(n_heads):
    """This program's block number (grid axis 0), its (batch x head) index ``bh`` (axis 1),
    and the batch and head indices ``b``, ``h`` as 64-bit integers for pointer offsets."""
    bh = tl.program_id(1)
    return tl.program_id(0), bh, (bh // n_heads).to(tl.int64), (bh % n_heads).to(tl.int64)


@triton.jit
def _load_tile(ptr, rows, n_rows, stride_row, cols, n_cols, stride_col, UPCAST: tl.constexpr):
    """The ``(len(rows), len(cols))`` tile at ``ptr + rows * stride_row + cols * stride_col``,
    0 outside ``n_rows x n_cols``; converted to fp32 when ``UPCAST``."""
    ok = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    ptrs = ptr + rows[:, None] * stride_row + cols[None, :] * stride_col
    tile = tl.load(ptrs, mask=ok, other=0.0)
    if UPCAST:
        tile = tile.to(tl.float32)
    return tile


@triton.jit
def _visible(KPM_ROW, q_idx, k_idx, n_q, n_k, IS_CAUSAL: tl.constexpr, HAS_KPM: tl.constexpr):
    """Which (query, key) pairs take part: ``q_idx`` and ``k_idx`` broadcast against each other
    (``(M, 1)`` and ``(1, N)``, or transposed). Hidden: queries past Nq, keys past Nk, padding
    keys (``KPM_ROW``, this batch row of the mask, 1 = padding) and, causal, keys after the
    query."""
    valid = (q_idx < n_q) & (k_idx < n_k)
    if HAS_KPM:
        pad = tl.load(KPM_ROW + k_idx, mask=k_idx < n_k, other=1)
        valid = valid & (pad == 0)
    if IS_CAUSAL:
        valid = valid & (k_idx <= q_idx)
    return valid


@triton.jit
def _online_softmax_update(m_i, l_i, s):
    """One key block of the online softmax on base-2 scores ``s`` ``(BLOCK_M, BLOCK_N)``.

    Returns the new running maximum and denominator, the block's weights ``p`` relative to the
    new maximum, and ``alpha``, the factor that rescales what was accumulated so far. A row with
    no visible key yet keeps ``m = -inf``; it subtracts 0 instead, so ``exp2`` gives 0, not NaN.
    """
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, axis=1)  # the denominator counts every weight
    return m_new, l_i, p, alpha


@triton.jit
def _recompute_p(s, lse, valid):
    """``P = exp(S - LSE)`` from base-2 scores ``s`` and the natural-log ``lse`` (broadcast to
    ``s``); 0 where not ``valid``. Rows of LSE ``+inf`` (nothing visible) give 0 everywhere."""
    return tl.where(valid, tl.exp2(s - lse * _LOG2E), 0.0)


@triton.jit
def _dropout_keep(seed, bh, rows, cols, n_q, n_k, dropout_p):
    """Keep mask of attention dropout for query ``rows`` x key ``cols`` of head ``bh``.

    ``rows`` and ``cols`` broadcast against each other (``(M, 1)`` and ``(1, N)``, or
    transposed); each element draws Philox number ``(bh * Nq + row) * Nk + col`` (64-bit).
    """
    offsets = (bh.to(tl.int64) * n_q + rows) * n_k + cols
    return tl.rand(seed, offsets) >= dropout_p


@triton.jit
def _dropout_keep_kernel(
    KEEP,  # output (B * H, Nq, Nk) uint8
    seed, dropout_p, n_q, n_k,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    for start_n in range(0, n_k, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        keep = _dropout_keep(seed, bh, rows[:, None], cols[None, :], n_q, n_k, dropout_p)
        ok = (rows[:, None] < n_q) & (cols[None, :] < n_k)
        offs = (bh.to(tl.int64) * n_q + rows[:, None]) * n_k + cols[None, :]
        tl.store(KEEP + offs, keep.to(tl.uint8), mask=ok)


def dropout_keep_mask(
    seed: int, batch: int, heads: int, n_q: int, n_k: int, dropout_p: float, device
) -> torch.Tensor:
    """The keep mask ``(B, H, Nq, Nk)`` that :func:`flash_attention` uses with ``seed``.

    Materialises what the kernels regenerate on the fly (for tests and teaching).
    """
    keep = torch.empty((batch, heads, n_q, n_k), dtype=torch.uint8, device=device)
    _dropout_keep_kernel[(triton.cdiv(n_q, 32), batch * heads)](
        keep, seed, float(dropout_p), n_q, n_k, BLOCK_M=32, BLOCK_N=32
    )
    return keep.bool()


@triton.jit
def _attn_fwd_kernel(
    Q, K, V,  # inputs (B, H, Nq, D), (B, H, Nk, D), (B, H, Nk, D), any strides
    OUT,  # output (B, H, Nq, D), contiguous
    LSE,  # saved log-sum-exp (B * H, Nq), fp32, natural log; +inf for fully masked rows
    KPM,  # key padding mask (B, Nk) as uint8, 1 = padding (dummy pointer if HAS_KPM is False)
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_kpm_b,  # row stride of KPM
    n_heads,  # H
    n_q,  # Nq
    n_k,  # Nk
    head_dim,  # D (<= BLOCK_D)
    qk_scale,  # scale * log2(e): scores come out in base-2 units for exp2
    seed,  # Philox seed of attention dropout
    dropout_p,  # dropout rate
    dropout_scale,  # 1 / (1 - dropout_p)
    IS_CAUSAL: tl.constexpr,
    HAS_KPM: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    UPCAST: tl.constexpr,  # compute in fp32 (interpreter with bf16 inputs)
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (no TF32 rounding)
    BLOCK_M: tl.constexpr,  # queries per program
    BLOCK_N: tl.constexpr,  # keys per step
    BLOCK_D: tl.constexpr,  # head dim padded to a power of two
):  # fmt: skip
    """One program per (query block, batch x head): stream K/V blocks, online softmax."""
    start_m, bh, b, h = _program_ids(n_heads)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)

    # the query block stays on chip for the whole loop: (BLOCK_M, BLOCK_D)
    q = _load_tile(Q + b * stride_qb + h * stride_qh, offs_m, n_q, stride_qm,
                   offs_d, head_dim, stride_qd, UPCAST)  # fmt: skip
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    kpm_row = KPM + b * stride_kpm_b

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max (base 2)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running denominator
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running numerator @ V

    # causal: keys after the block's last query are invisible, stop the loop there
    hi = tl.minimum(n_k, (start_m + 1) * BLOCK_M) if IS_CAUSAL else n_k
    for start_n in range(0, hi, BLOCK_N):
        offs_kn = start_n + offs_n
        # K^T block (BLOCK_D, BLOCK_N), loaded transposed through the strides
        kt = _load_tile(k_base, offs_d, head_dim, stride_kd, offs_kn, n_k, stride_kn, UPCAST)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N)
        valid = _visible(kpm_row, offs_m[:, None], offs_kn[None, :], n_q, n_k, IS_CAUSAL, HAS_KPM)
        s = tl.where(valid, s, float("-inf"))

        m_new, l_i, p, alpha = _online_softmax_update(m_i, l_i, s)
        if HAS_DROPOUT:  # after the denominator: dropout acts on normalised weights
            keep = _dropout_keep(seed, bh, offs_m[:, None], offs_kn[None, :], n_q, n_k, dropout_p)
            p = tl.where(keep, p * dropout_scale, 0.0)

        v = _load_tile(v_base, offs_kn, n_k, stride_vn, offs_d, head_dim, stride_vd, UPCAST)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new

    # FlashAttention-2: divide by l once here, not at every step; save LSE, not m and l
    has_keys = l_i > 0.0
    l_safe = tl.where(has_keys, l_i, 1.0)
    out = acc / l_safe[:, None]  # fully masked rows: 0 / 1 = 0
    lse = tl.where(has_keys, (m_i + tl.log2(l_safe)) / _LOG2E, float("inf"))
    o_ptrs = OUT + bh.to(tl.int64) * n_q * head_dim
    o_ptrs += offs_m[:, None] * head_dim + offs_d[None, :]
    o_ok = (offs_m[:, None] < n_q) & (offs_d[None, :] < head_dim)
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=o_ok)
    tl.store(LSE + bh.to(tl.int64) * n_q + offs_m, lse, mask=offs_m < n_q)


@triton.jit
def _attn_bwd_preprocess_kernel(
    OUT,  # forward output (B * H, Nq, D), contiguous
    DO,  # upstream gradient (B, H, Nq, D), any strides
    DELTA,  # output (B * H, Nq), fp32: rowsum(dO * O)
    stride_dob, stride_doh, stride_dom, stride_dod,
    n_heads, n_q, head_dim,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Delta = rowsum(dO * O), one program per (query block, batch x head)."""
    start_m, bh, b, h = _program_ids(n_heads)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    o = _load_tile(OUT + bh.to(tl.int64) * n_q * head_dim, offs_m, n_q, head_dim,
                   offs_d, head_dim, 1, True)  # fmt: skip
    do = _load_tile(DO + b * stride_dob + h * stride_doh, offs_m, n_q, stride_dom,
                    offs_d, head_dim, stride_dod, True)  # fmt: skip
    tl.store(DELTA + bh.to(tl.int64) * n_q + offs_m, tl.sum(o * do, axis=1), mask=offs_m < n_q)


@triton.jit
def _attn_bwd_p_dp(a, b, c, d, lse, kpm_row, q_idx, k_idx, n_q, n_k, qk_scale, seed, bh,
                   dropout_p, dropout_scale, IS_CAUSAL: tl.constexpr, HAS_KPM: tl.constexpr,
                   HAS_DROPOUT: tl.constexpr, DOT_PRECISION: tl.constexpr):  # fmt: skip
    """The backward pass's work on one tile: recompute ``P``, then ``dP``.

    ``a b^T`` are the scores and ``c d^T`` is ``dP``: ``(q, k, dO, v)`` for a tile of queries x
    keys, ``(k, q, v, dO)`` for its transpose; ``lse``, ``q_idx`` and ``k_idx`` broadcast to the
    tile the same way. Returns ``P``, ``P`` after dropout (for ``dV``) and ``dP`` after dropout,
    from which the caller forms ``dS = P * (dP - Delta)``.
    """
    s = tl.dot(a, tl.trans(b), input_precision=DOT_PRECISION) * qk_scale
    p = _recompute_p(s, lse, _visible(kpm_row, q_idx, k_idx, n_q, n_k, IS_CAUSAL, HAS_KPM))
    dp = tl.dot(c, tl.trans(d), input_precision=DOT_PRECISION)
    p_dropped = p
    if HAS_DROPOUT:
        keep = _dropout_keep(seed, bh, q_idx, k_idx, n_q, n_k, dropout_p)
        p_dropped = tl.where(keep, p * dropout_scale, 0.0)
        dp = tl.where(keep, dp * dropout_scale, 0.0)
    return p, p_dropped, dp


@triton.jit
def _attn_bwd_kernel(
    Q, K, V, DO,  # (B, H, N, D) each, any strides
    DQ, DK, DV,  # outputs (B, H, Nq, D), (B, H, Nk, D), (B, H, Nk, D), contiguous
    LSE, DELTA,  # (B * H, Nq) fp32 from the forward pass and the preprocessing kernel
    KPM,  # key padding mask (B, Nk) uint8
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_kpm_b,
    n_heads, n_q, n_k, head_dim,
    sm_scale,  # the scale itself (dQ = dS K * scale, dK = dS^T Q * scale)
    qk_scale,  # scale * log2(e)
    seed,  # Philox seed of attention dropout (the forward's)
    dropout_p,
    dropout_scale,  # 1 / (1 - dropout_p)
    IS_CAUSAL: tl.constexpr,
    HAS_KPM: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    DKDV: tl.constexpr,  # True: a program per key block, dK and dV; False: per query block, dQ
    BLOCK_M: tl.constexpr,  # queries per step (DKDV) or per program
    BLOCK_N: tl.constexpr,  # keys per program (DKDV) or per step
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program per (key block, batch x head) accumulating dK and dV while query blocks
    stream past (``DKDV``), or per (query block, batch x head) accumulating dQ while key blocks
    stream past. The block a program owns stays on chip; the other side is re-read."""
    start, bh, b, h = _program_ids(n_heads)
    offs_d = tl.arange(0, BLOCK_D)
    q_base = Q + b * stride_qb + h * stride_qh
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    do_base = DO + b * stride_dob + h * stride_doh
    kpm_row = KPM + b * stride_kpm_b
    row_base = bh.to(tl.int64) * n_q
    if DKDV:
        offs_n = start * BLOCK_N + tl.arange(0, BLOCK_N)
        k = _load_tile(k_base, offs_n, n_k, stride_kn, offs_d, head_dim, stride_kd, UPCAST)
        v = _load_tile(v_base, offs_n, n_k, stride_vn, offs_d, head_dim, stride_vd, UPCAST)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        # causal: queries before this block's first key cannot see any of its keys
        lo = (start * BLOCK_N // BLOCK_M) * BLOCK_M if IS_CAUSAL else 0
        for start_m in range(lo, n_q, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            q = _load_tile(q_base, offs_m, n_q, stride_qm, offs_d, head_dim, stride_qd, UPCAST)
            do = _load_tile(do_base, offs_m, n_q, stride_dom, offs_d, head_dim, stride_dod,
                            UPCAST)  # fmt: skip
            # rows beyond Nq read LSE = +inf, so their P is exactly 0
            lse = tl.load(LSE + row_base + offs_m, mask=offs_m < n_q, other=float("inf"))
            delta = tl.load(DELTA + row_base + offs_m, mask=offs_m < n_q, other=0.0)
            # transposed tiles, (BLOCK_N, BLOCK_M), so that dK and dV need no transposes
            pt, pt_dropped, dpt = _attn_bwd_p_dp(k, q, v, do, lse[None, :], kpm_row,
                                                 offs_m[None, :], offs_n[:, None], n_q, n_k,
                                                 qk_scale, seed, bh, dropout_p, dropout_scale,
                                                 IS_CAUSAL, HAS_KPM, HAS_DROPOUT,
                                                 DOT_PRECISION)  # fmt: skip
            dv = tl.dot(pt_dropped.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
            dst = pt * (dpt - delta[None, :])
            dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=DOT_PRECISION)
        out_offs = bh.to(tl.int64) * n_k * head_dim + offs_n[:, None] * head_dim + offs_d[None, :]
        kv_ok = (offs_n[:, None] < n_k) & (offs_d[None, :] < head_dim)
        tl.store(DK + out_offs, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_ok)
        tl.store(DV + out_offs, dv.to(DV.dtype.element_ty), mask=kv_ok)
    else:
        offs_m = start * BLOCK_M + tl.arange(0, BLOCK_M)
        q = _load_tile(q_base, offs_m, n_q, stride_qm, offs_d, head_dim, stride_qd, UPCAST)
        do = _load_tile(do_base, offs_m, n_q, stride_dom, offs_d, head_dim, stride_dod, UPCAST)
        lse = tl.load(LSE + row_base + offs_m, mask=offs_m < n_q, other=float("inf"))
        delta = tl.load(DELTA + row_base + offs_m, mask=offs_m < n_q, other=0.0)
        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        hi = tl.minimum(n_k, (start + 1) * BLOCK_M) if IS_CAUSAL else n_k
        for start_n in range(0, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            k = _load_tile(k_base, offs_n, n_k, stride_kn, offs_d, head_dim, stride_kd, UPCAST)
            v = _load_tile(v_base, offs_n, n_k, stride_vn, offs_d, head_dim, stride_vd, UPCAST)
            p, _, dp = _attn_bwd_p_dp(q, k, do, v, lse[:, None], kpm_row, offs_m[:, None],
                                      offs_n[None, :], n_q, n_k, qk_scale, seed, bh, dropout_p,
                                      dropout_scale, IS_CAUSAL, HAS_KPM, HAS_DROPOUT,
                                      DOT_PRECISION)  # fmt: skip
            ds = p * (dp - delta[:, None])
            dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
        out_offs = row_base * head_dim + offs_m[:, None] * head_dim + offs_d[None, :]
        q_ok = (offs_m[:, None] < n_q) & (offs_d[None, :] < head_dim)
        tl.store(DQ + out_offs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=q_ok)


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    seed: int | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """FlashAttention by these kernels (differentiable w.r.t. q, k and v).

    Args:
        q: queries ``(B, H, Nq, D)``, float32/float16/bfloat16, ``1 <= D <= 128``; a CUDA
            tensor, or a CPU tensor under the interpreter.
        k: keys ``(B, H, Nk, D)``, same dtype and device.
        v: values ``(B, H, Nk, D)``.
        key_padding_mask: bool ``(B, Nk)``, True = padding.
        is_causal: query ``i`` sees keys ``j <= i`` only.
        scale: score scale, a finite number; default ``1 / sqrt(D)``.
        dropout_p: attention dropout rate in ``[0, 1)`` (apply only while training).
        seed: Philox seed of the dropout mask; default: drawn from torch's CPU generator,
            so ``torch.manual_seed`` makes runs repeatable.
        block_m, block_n: tile sizes (powers of two >= 16); default: tuned values on a GPU
            (smaller ones, with one warning, where the GPU lacks the shared memory for them),
            32 under the interpreter. Given sizes are used as they are.

    Returns:
        ``(B, H, Nq, D)`` in q's dtype; fully masked query rows are zeros.
    """
    scale = check_attention_args(q, k, v, key_padding_mask, is_causal, scale, dropout_p)
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t)
    # imported here: the launcher imports this module's kernels
    from lecturekit.kernels._attention_launch import launch_attention

    return launch_attention(
        q, k, v, key_padding_mask, is_causal, scale, dropout_p, seed, block_m, block_n
    )
