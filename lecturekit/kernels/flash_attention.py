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
blocks, which the L2 cache then serves, so DRAM sees little more than reading the inputs
once and writing the output once.

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

Two kernels avoid atomic additions (so results are deterministic): one program per *key*
block accumulates ``dK`` and ``dV`` while streaming query blocks; one program per *query*
block accumulates ``dQ`` while streaming key blocks. Both recompute ``P`` from ``Q``, ``K``
and the saved ``LSE`` instead of reading an ``Nq * Nk`` matrix: recomputing costs flops, which
are cheap, and saves bytes, which are not.

Attention dropout
-----------------
With ``dropout_p > 0`` each weight ``P_ij`` is kept with probability ``1 - dropout_p`` and
scaled by ``1 / (1 - dropout_p)`` (as ``torch.nn.functional.dropout`` does), after the
softmax's denominator has been computed from all weights. The keep mask is never stored:
element ``(i, j)`` of head ``bh`` draws Philox random number number
``(bh * Nq + i) * Nk + j`` of a per-call seed, so the forward pass and both backward kernels
regenerate exactly the same mask. In the backward pass ``dV`` uses the dropped weights, and
``dP`` is masked and scaled the same way before ``dS = P * (dP - Delta)``;
``Delta = rowsum(dO * O)`` still holds because ``O`` is computed from the dropped weights.

Head dimensions ``D`` up to 128 are padded to a power of two (at least 16, the smallest
``tl.dot``) with masked loads; any ``Nq`` and ``Nk`` work (the last blocks are masked).
Inputs may be fp32, fp16 or bf16; accumulation is fp32. Under the CPU interpreter bf16
arithmetic is wrong, so there the kernels convert bf16 blocks to fp32 right after loading.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from lecturekit.kernels._utils import check_tensor, interpreter_enabled, next_power_of_2
from lecturekit.model.masks import causal_mask

MAX_HEAD_DIM = 128
LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * LOG2E)


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_keep: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """PyTorch reference: materialises the scores; fully masked query rows -> zeros.

    ``dropout_keep`` (bool ``(B, H, Nq, Nk)``, e.g. from :func:`dropout_keep_mask`) applies
    attention dropout with rate ``dropout_p`` to the weights.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, Nq, Nk)
    masked = torch.zeros(scores.shape[-2:], dtype=torch.bool, device=q.device)
    if is_causal:  # the package's one causal convention: top-left, key j > query i masked
        masked = causal_mask(*scores.shape[-2:], device=q.device)
    masked = masked.expand(scores.shape)
    if key_padding_mask is not None:
        masked = masked | key_padding_mask[:, None, None, :]
    all_masked = masked.all(dim=-1, keepdim=True)
    # fill fully masked rows with finite scores first so no NaN reaches the backward pass
    scores = scores.masked_fill(masked & ~all_masked, float("-inf"))
    weights = torch.softmax(scores, dim=-1).masked_fill(all_masked, 0.0)
    if dropout_keep is not None:
        weights = weights * dropout_keep / (1.0 - dropout_p)
    return weights @ v


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
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim

    # the query block stays on chip for the whole loop: (BLOCK_M, BLOCK_D)
    q_ptrs = Q + b * stride_qb + h * stride_qh
    q_ptrs += offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < n_q) & d_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max (base 2)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running denominator
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running numerator @ V

    # causal: keys after the block's last query are invisible, stop the loop there
    hi = tl.minimum(n_k, (start_m + 1) * BLOCK_M) if IS_CAUSAL else n_k
    for start_n in range(0, hi, BLOCK_N):
        offs_kn = start_n + offs_n
        k_ok = offs_kn < n_k
        # K^T block (BLOCK_D, BLOCK_N), loaded transposed through the strides
        kt = tl.load(
            k_base + offs_kn[None, :] * stride_kn + offs_d[:, None] * stride_kd,
            mask=k_ok[None, :] & d_ok[:, None],
            other=0.0,
        )
        if UPCAST:
            kt = kt.to(tl.float32)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N)

        valid = k_ok[None, :]
        if HAS_KPM:
            pad = tl.load(KPM + b * stride_kpm_b + offs_kn, mask=k_ok, other=1)
            valid = valid & (pad == 0)[None, :]
        if IS_CAUSAL:
            valid = valid & (offs_kn[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))

        # online softmax update; a row with no visible key yet keeps m = -inf, so subtract 0
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)  # the denominator counts every weight
        if HAS_DROPOUT:
            keep = _dropout_keep(seed, bh, offs_m[:, None], offs_kn[None, :], n_q, n_k, dropout_p)
            p = tl.where(keep, p * dropout_scale, 0.0)

        v = tl.load(
            v_base + offs_kn[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=k_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new

    has_keys = l_i > 0.0
    out = acc / tl.where(has_keys, l_i, 1.0)[:, None]  # fully masked rows: 0 / 1 = 0
    lse = tl.where(has_keys, (m_i + tl.log2(tl.where(has_keys, l_i, 1.0))) / 1.4426950408889634,
                   float("inf"))  # fmt: skip
    o_ptrs = OUT + bh.to(tl.int64) * n_q * head_dim
    o_ptrs += offs_m[:, None] * head_dim + offs_d[None, :]
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=(offs_m[:, None] < n_q) & d_ok[None, :])
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
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    ok = (offs_m[:, None] < n_q) & (offs_d[None, :] < head_dim)
    o = tl.load(
        OUT + bh.to(tl.int64) * n_q * head_dim + offs_m[:, None] * head_dim + offs_d[None, :],
        mask=ok,
        other=0.0,
    ).to(tl.float32)
    do = tl.load(
        DO + b * stride_dob + h * stride_doh
        + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
        mask=ok,
        other=0.0,
    ).to(tl.float32)  # fmt: skip
    tl.store(DELTA + bh.to(tl.int64) * n_q + offs_m, tl.sum(o * do, axis=1), mask=offs_m < n_q)


@triton.jit
def _attn_bwd_dkdv_kernel(
    Q, K, V, DO,  # (B, H, N, D) each, any strides
    DK, DV,  # outputs (B, H, Nk, D), contiguous
    LSE, DELTA,  # (B * H, Nq) fp32 from the forward pass and the preprocessing kernel
    KPM,  # key padding mask (B, Nk) uint8
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_kpm_b,
    n_heads, n_q, n_k, head_dim,
    sm_scale,  # the scale itself (dK = dS^T Q * scale)
    qk_scale,  # scale * log2(e)
    seed,  # Philox seed of attention dropout (the forward's)
    dropout_p,
    dropout_scale,  # 1 / (1 - dropout_p)
    IS_CAUSAL: tl.constexpr,
    HAS_KPM: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per step
    BLOCK_N: tl.constexpr,  # keys per program
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program per (key block, batch x head): stream query blocks, accumulate dK and dV."""
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    k_ok = offs_n < n_k

    # this program's keys and values stay on chip: (BLOCK_N, BLOCK_D)
    kv_mask = k_ok[:, None] & d_ok[None, :]
    k = tl.load(
        K + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
        mask=kv_mask, other=0.0,
    )  # fmt: skip
    v = tl.load(
        V + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
        mask=kv_mask, other=0.0,
    )  # fmt: skip
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    key_valid = k_ok
    if HAS_KPM:
        pad = tl.load(KPM + b * stride_kpm_b + offs_n, mask=k_ok, other=1)
        key_valid = key_valid & (pad == 0)

    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    q_base = Q + b * stride_qb + h * stride_qh
    do_base = DO + b * stride_dob + h * stride_doh
    row_base = bh.to(tl.int64) * n_q

    # causal: queries before this block's first key cannot see any of its keys
    lo = (start_n * BLOCK_N // BLOCK_M) * BLOCK_M if IS_CAUSAL else 0
    for start_m in range(lo, n_q, BLOCK_M):
        offs_m = start_m + offs_m0
        m_ok = offs_m < n_q
        qd_mask = m_ok[:, None] & d_ok[None, :]
        q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                    mask=qd_mask, other=0.0)  # fmt: skip
        do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
                     mask=qd_mask, other=0.0)  # fmt: skip
        if UPCAST:
            q = q.to(tl.float32)
            do = do.to(tl.float32)
        # rows beyond Nq read LSE = +inf, so their P is exactly 0
        lse = tl.load(LSE + row_base + offs_m, mask=m_ok, other=float("inf"))
        delta = tl.load(DELTA + row_base + offs_m, mask=m_ok, other=0.0)

        # work with transposed blocks, (BLOCK_N, BLOCK_M), so dK and dV need no transposes
        st = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION) * qk_scale
        pt = tl.exp2(st - lse[None, :] * 1.4426950408889634)
        valid = key_valid[:, None] & m_ok[None, :]
        if IS_CAUSAL:
            valid = valid & (offs_m[None, :] >= offs_n[:, None])
        pt = tl.where(valid, pt, 0.0)
        dpt = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
        if HAS_DROPOUT:
            keep = _dropout_keep(seed, bh, offs_m[None, :], offs_n[:, None], n_q, n_k, dropout_p)
            pt_dropped = tl.where(keep, pt * dropout_scale, 0.0)
            dpt = tl.where(keep, dpt * dropout_scale, 0.0)
        else:
            pt_dropped = pt
        dv = tl.dot(pt_dropped.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=DOT_PRECISION)

    dk *= sm_scale
    out_offs = bh.to(tl.int64) * n_k * head_dim + offs_n[:, None] * head_dim + offs_d[None, :]
    tl.store(DK + out_offs, dk.to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + out_offs, dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _attn_bwd_dq_kernel(
    Q, K, V, DO,  # (B, H, N, D) each, any strides
    DQ,  # output (B, H, Nq, D), contiguous
    LSE, DELTA,  # (B * H, Nq) fp32
    KPM,  # key padding mask (B, Nk) uint8
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_kpm_b,
    n_heads, n_q, n_k, head_dim,
    sm_scale,
    qk_scale,
    seed,
    dropout_p,
    dropout_scale,
    IS_CAUSAL: tl.constexpr,
    HAS_KPM: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per program
    BLOCK_N: tl.constexpr,  # keys per step
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program per (query block, batch x head): stream key blocks, accumulate dQ."""
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    m_ok = offs_m < n_q

    # this program's queries, their dO, LSE and Delta stay on chip
    qd_mask = m_ok[:, None] & d_ok[None, :]
    q = tl.load(
        Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
        mask=qd_mask, other=0.0,
    )  # fmt: skip
    do = tl.load(
        DO + b * stride_dob + h * stride_doh
        + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod,
        mask=qd_mask, other=0.0,
    )  # fmt: skip
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    row_base = bh.to(tl.int64) * n_q
    lse = tl.load(LSE + row_base + offs_m, mask=m_ok, other=float("inf"))
    delta = tl.load(DELTA + row_base + offs_m, mask=m_ok, other=0.0)

    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    hi = tl.minimum(n_k, (start_m + 1) * BLOCK_M) if IS_CAUSAL else n_k
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + offs_n0
        k_ok = offs_n < n_k
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                    mask=kv_mask, other=0.0)  # fmt: skip
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=kv_mask, other=0.0)  # fmt: skip
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        p = tl.exp2(s - lse[:, None] * 1.4426950408889634)
        valid = k_ok[None, :]
        if HAS_KPM:
            pad = tl.load(KPM + b * stride_kpm_b + offs_n, mask=k_ok, other=1)
            valid = valid & (pad == 0)[None, :]
        if IS_CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(valid, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
        if HAS_DROPOUT:
            keep = _dropout_keep(seed, bh, offs_m[:, None], offs_n[None, :], n_q, n_k, dropout_p)
            dp = tl.where(keep, dp * dropout_scale, 0.0)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PRECISION)

    dq *= sm_scale
    out_offs = row_base * head_dim + offs_m[:, None] * head_dim + offs_d[None, :]
    tl.store(DQ + out_offs, dq.to(DQ.dtype.element_ty), mask=qd_mask)


@dataclass(frozen=True)
class _LaunchConfig:
    """Block sizes and warps: large tiles on a GPU, small ones under the interpreter."""

    fwd_m: int
    fwd_n: int
    dkdv_m: int
    dkdv_n: int
    dq_m: int
    dq_n: int
    num_warps: int
    num_stages: int


def _launch_config(
    head_dim_padded: int, dtype: torch.dtype, block_m: int | None, block_n: int | None
) -> _LaunchConfig:
    if block_m is not None or block_n is not None or interpreter_enabled():
        bm = block_m or 32
        bn = block_n or 32
        for name, value in (("block_m", bm), ("block_n", bn)):
            if value < 16 or value & (value - 1):
                raise ValueError(f"{name} must be a power of two >= 16, got {value}")
        return _LaunchConfig(bm, bn, bm, bn, bm, bn, num_warps=4, num_stages=1)
    if dtype == torch.float32:
        # fp32 tiles take twice the shared memory: smaller ones fit GPUs with ~100 KiB per SM
        return _LaunchConfig(64, 32, 32, 64, 64, 32, num_warps=4, num_stages=2)
    if head_dim_padded <= 64:
        # Triton's fused-attention tutorial settings for D = 64 on recent GPUs
        return _LaunchConfig(128, 64, 32, 128, 128, 32, num_warps=4, num_stages=3)
    # D = 128: smaller backward tiles keep the fp32 accumulators in registers
    return _LaunchConfig(128, 64, 32, 64, 64, 32, num_warps=8, num_stages=2)


# Smaller tiles, tried in this order when the GPU lacks the shared memory for the tuned ones.
# A T4 (Colab's free GPU) allows 64 KiB per block, and Triton's code for it needs more than
# on newer GPUs: the tuned fp16 backward takes 80 KiB, 32 x 32 tiles 48 KiB, and fp32 with
# D = 128 needs 16 x 16 tiles (33 KiB; ``benchmarks/kernels_compile.py --arch 75``).
_FALLBACK_CONFIGS = (
    _LaunchConfig(32, 32, 32, 32, 32, 32, num_warps=4, num_stages=1),
    _LaunchConfig(16, 16, 16, 16, 16, 16, num_warps=4, num_stages=1),
)
_fitting_configs: dict[tuple[Any, ...], _LaunchConfig] = {}


def _tile_area(cfg: _LaunchConfig) -> int:
    return max(cfg.fwd_m * cfg.fwd_n, cfg.dkdv_m * cfg.dkdv_n, cfg.dq_m * cfg.dq_n)


def _launch_fitting(
    key: tuple[Any, ...] | None, cfg: _LaunchConfig, launch: Callable[[_LaunchConfig], Any]
) -> Any:
    """Run ``launch(cfg)``; where the GPU has too little shared memory for ``cfg``, run it
    with the first smaller ``_FALLBACK_CONFIGS`` entry that fits, and remember that one.

    Triton compares a kernel's shared memory with the device's limit before launching, so a
    configuration that does not fit raises ``OutOfResources`` without side effects. ``key``
    is ``(pass, device, dtype, padded head dim)``, or None for tile sizes the caller chose,
    which are used as given.
    """
    if key is None:
        return launch(cfg)
    cfg = _fitting_configs.get(key, cfg)
    candidates = [cfg, *(c for c in _FALLBACK_CONFIGS if _tile_area(c) < _tile_area(cfg))]
    for candidate in candidates:
        try:
            result = launch(candidate)
        except OutOfResources:
            if candidate is candidates[-1]:
                raise
            continue
        if candidate is not cfg:
            warnings.warn(
                f"flash_attention: this GPU has too little shared memory for the tuned tiles "
                f"of the {key[0]} pass ({key[2]}, head dim {key[3]}); using "
                f"{candidate.fwd_m} x {candidate.fwd_n} tiles (same result up to rounding, slower)",
                stacklevel=2,
            )
        _fitting_configs[key] = candidate
        return result
    raise AssertionError("unreachable: the last candidate returns or raises")


def _strides4(t: torch.Tensor) -> tuple[int, int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2), t.stride(3)


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, kpm, is_causal, scale, dropout_p, seed, block_m, block_n):  # type: ignore[override]
        batch, n_heads, n_q, head_dim = q.shape
        n_k = k.shape[2]
        block_d = max(16, next_power_of_2(head_dim))
        cfg = _launch_config(block_d, q.dtype, block_m, block_n)
        dropout = (seed, dropout_p, 1.0 / (1.0 - dropout_p))
        upcast = interpreter_enabled() and q.dtype == torch.bfloat16
        precision = "ieee" if q.dtype == torch.float32 or upcast else "tf32"
        o = torch.empty((batch, n_heads, n_q, head_dim), dtype=q.dtype, device=q.device)
        lse = torch.empty((batch * n_heads, n_q), dtype=torch.float32, device=q.device)
        kpm_arg = kpm if kpm is not None else lse  # dummy pointer, never read

        def launch(cfg: _LaunchConfig) -> None:
            _attn_fwd_kernel[(triton.cdiv(n_q, cfg.fwd_m), batch * n_heads)](
                q, k, v, o, lse, kpm_arg,
                *_strides4(q), *_strides4(k), *_strides4(v),
                kpm.stride(0) if kpm is not None else 0,
                n_heads, n_q, n_k, head_dim,
                scale * LOG2E, *dropout,
                IS_CAUSAL=is_causal, HAS_KPM=kpm is not None, HAS_DROPOUT=dropout_p > 0,
                UPCAST=upcast, DOT_PRECISION=precision,
                BLOCK_M=cfg.fwd_m, BLOCK_N=cfg.fwd_n, BLOCK_D=block_d,
                num_warps=cfg.num_warps, num_stages=cfg.num_stages,
            )  # fmt: skip

        tuned = block_m is None and block_n is None
        _launch_fitting(("forward", q.device, q.dtype, block_d) if tuned else None, cfg, launch)
        ctx.save_for_backward(q, k, v, o, lse, kpm)
        ctx.meta = (is_causal, scale, dropout, cfg, tuned, block_d, upcast, precision)
        return o

    @staticmethod
    def backward(ctx, do):  # type: ignore[override]
        q, k, v, o, lse, kpm = ctx.saved_tensors
        is_causal, scale, dropout, cfg, tuned, block_d, upcast, precision = ctx.meta
        batch, n_heads, n_q, head_dim = q.shape
        n_k = k.shape[2]
        delta = torch.empty_like(lse)
        dq = torch.empty((batch, n_heads, n_q, head_dim), dtype=q.dtype, device=q.device)
        dk = torch.empty((batch, n_heads, n_k, head_dim), dtype=k.dtype, device=k.device)
        dv = torch.empty_like(dk)
        kpm_arg = kpm if kpm is not None else lse
        common = (
            *_strides4(q), *_strides4(k), *_strides4(v), *_strides4(do),
            kpm.stride(0) if kpm is not None else 0,
            n_heads, n_q, n_k, head_dim, scale, scale * LOG2E, *dropout,
        )  # fmt: skip

        def launch(cfg: _LaunchConfig) -> None:
            _attn_bwd_preprocess_kernel[(triton.cdiv(n_q, cfg.dq_m), batch * n_heads)](
                o, do, delta, *_strides4(do), n_heads, n_q, head_dim,
                BLOCK_M=cfg.dq_m, BLOCK_D=block_d,
            )  # fmt: skip
            flags = dict(
                IS_CAUSAL=is_causal, HAS_KPM=kpm is not None, HAS_DROPOUT=dropout[1] > 0,
                UPCAST=upcast, DOT_PRECISION=precision,
                BLOCK_D=block_d, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
            )  # fmt: skip
            if n_k > 0:
                _attn_bwd_dkdv_kernel[(triton.cdiv(n_k, cfg.dkdv_n), batch * n_heads)](
                    q, k, v, do, dk, dv, lse, delta, kpm_arg, *common,
                    BLOCK_M=cfg.dkdv_m, BLOCK_N=cfg.dkdv_n, **flags,
                )  # fmt: skip
            _attn_bwd_dq_kernel[(triton.cdiv(n_q, cfg.dq_m), batch * n_heads)](
                q, k, v, do, dq, lse, delta, kpm_arg, *common,
                BLOCK_M=cfg.dq_m, BLOCK_N=cfg.dq_n, **flags,
            )  # fmt: skip

        # a fallback reruns all three kernels: each one overwrites what it writes
        _launch_fitting(("backward", q.device, q.dtype, block_d) if tuned else None, cfg, launch)
        return dq, dk, dv, None, None, None, None, None, None, None


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
    """FlashAttention (differentiable w.r.t. q, k and v).

    Args:
        q: queries ``(B, H, Nq, D)``, float32/float16/bfloat16, ``1 <= D <= 128``.
        k: keys ``(B, H, Nk, D)``, same dtype and device.
        v: values ``(B, H, Nk, D)``.
        key_padding_mask: bool ``(B, Nk)``, True = padding.
        is_causal: query ``i`` sees keys ``j <= i`` only.
        scale: score scale, default ``1 / sqrt(D)``.
        dropout_p: attention dropout rate in ``[0, 1)`` (apply only while training).
        seed: Philox seed of the dropout mask; default: drawn from torch's CPU generator,
            so ``torch.manual_seed`` makes runs repeatable.
        block_m, block_n: tile sizes (powers of two >= 16); default: tuned values on a GPU
            (smaller ones, with one warning, where the GPU lacks the shared memory for them),
            32 under the interpreter. Given sizes are used as they are.

    Returns:
        ``(B, H, Nq, D)`` in q's dtype; fully masked query rows are zeros.
    """
    check_tensor("q", q, ndim=4)
    check_tensor("k", k, ndim=4)
    check_tensor("v", v, ndim=4)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must share a device, got {q.device}, {k.device}, {v.device}")
    batch, n_heads, n_q, head_dim = q.shape
    if k.shape[:2] != (batch, n_heads) or k.shape[3] != head_dim or v.shape != k.shape:
        raise ValueError(
            f"expected k and v of shape ({batch}, {n_heads}, Nk, {head_dim}) matching q "
            f"{tuple(q.shape)}, got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head dim must be in [1, {MAX_HEAD_DIM}], got {head_dim}")
    n_k = k.shape[2]
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
            got = getattr(key_padding_mask, "dtype", type(key_padding_mask).__name__)
            raise TypeError(f"key_padding_mask must be a bool tensor, got {got}")
        if key_padding_mask.shape != (batch, n_k):
            raise ValueError(
                f"key_padding_mask must have shape ({batch}, {n_k}), "
                f"got {tuple(key_padding_mask.shape)}"
            )
        if key_padding_mask.device != q.device:
            raise ValueError(f"key_padding_mask is on {key_padding_mask.device}, q on {q.device}")
        key_padding_mask = key_padding_mask.contiguous().view(torch.uint8)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"dropout_p must be a float, got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if seed is None:
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item()) if dropout_p > 0 else 0
    if batch * n_heads * n_q == 0:
        raise ValueError(f"q must have non-empty batch, head and query dims, got {tuple(q.shape)}")
    return _FlashAttention.apply(
        q, k, v, key_padding_mask, bool(is_causal), scale, float(dropout_p), int(seed),
        block_m, block_n,
    )  # fmt: skip


__all__ = ["attention_reference", "dropout_keep_mask", "flash_attention"]
