"""Launching the FlashAttention kernels of :mod:`lecturekit.kernels.flash_attention`: tile
sizes, the fallback to smaller tiles where a GPU lacks shared memory, and the autograd
Function that runs the forward kernel and, in the backward pass, the preprocessing kernel and
the backward kernel's two launches (dK/dV, then dQ).

Arguments arrive validated (``_utils.check_attention_args``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
from triton.runtime.errors import OutOfResources

from lecturekit.kernels._utils import LOG2E, interpreter_enabled, next_power_of_2
from lecturekit.kernels.flash_attention import (
    _attn_bwd_kernel,
    _attn_bwd_preprocess_kernel,
    _attn_fwd_kernel,
)

__all__ = ["launch_attention"]


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
        args = (
            q, k, v, do, dq, dk, dv, lse, delta, kpm_arg,
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
            # one kernel, two launches: a program per key block for dK and dV, then a
            # program per query block for dQ (no atomics, so the result is deterministic)
            if n_k > 0:
                _attn_bwd_kernel[(triton.cdiv(n_k, cfg.dkdv_n), batch * n_heads)](
                    *args, DKDV=True, BLOCK_M=cfg.dkdv_m, BLOCK_N=cfg.dkdv_n, **flags
                )
            _attn_bwd_kernel[(triton.cdiv(n_q, cfg.dq_m), batch * n_heads)](
                *args, DKDV=False, BLOCK_M=cfg.dq_m, BLOCK_N=cfg.dq_n, **flags
            )

        # a fallback reruns all three launches: each one overwrites what it writes
        _launch_fitting(("backward", q.device, q.dtype, block_d) if tuned else None, cfg, launch)
        return dq, dk, dv, None, None, None, None, None, None, None


def launch_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    is_causal: bool,
    scale: float,
    dropout_p: float,
    seed: int | None,
    block_m: int | None,
    block_n: int | None,
) -> torch.Tensor:
    """Run FlashAttention on validated arguments (see ``flash_attention.flash_attention``):
    ``q (B, H, Nq, D)``, ``k``, ``v`` ``(B, H, Nk, D)`` -> ``(B, H, Nq, D)``, differentiable."""
    if seed is None:
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item()) if dropout_p > 0 else 0
    kpm = None if key_padding_mask is None else key_padding_mask.contiguous().view(torch.uint8)
    return _FlashAttention.apply(
        q, k, v, kpm, is_causal, float(scale), float(dropout_p), int(seed), block_m, block_n
    )
