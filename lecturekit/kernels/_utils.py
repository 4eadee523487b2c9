"""Small helpers shared by the kernel modules: the interpreter flag, constants and the argument
checks that every public kernel function runs first, on the kernel path and on the PyTorch
fallback alike (so a call fails, or works, the same way on a laptop and on a GPU).

This module imports torch but never triton.
"""

from __future__ import annotations

import math
import os

import torch

from lecturekit._common import check_bool, check_number

#: dtypes every kernel accepts
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: log2(e): ``exp(x) = exp2(x * LOG2E)``; the attention kernels take exponentials base 2
LOG2E = 1.4426950408889634

#: the widest row the fused LayerNorm keeps in registers (64 KiB of fp32, as in Triton's tutorial)
MAX_FEATURES = 65536 // 4

#: the largest head dimension of the attention kernels
MAX_HEAD_DIM = 128


def interpreter_enabled() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter (``TRITON_INTERPRET=1``).

    The one place that reads the variable. Triton reads it when a kernel is *defined*, so it
    must be set before ``lecturekit.kernels.<module>`` (and triton itself) is first imported.
    """
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= ``n`` (``tl.arange`` needs power-of-two block sizes)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def check_floating(name: str, t: object, ndim: int | None = None) -> torch.Tensor:
    """Raise a clear error unless ``t`` is a float32/float16/bfloat16 tensor (of ``ndim``
    dimensions when given). Says nothing about where it lives: see :func:`check_tensor`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} must be float32, float16 or bfloat16, got {t.dtype}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    return t


def check_tensor(name: str, t: object, ndim: int | None = None) -> torch.Tensor:
    """Raise a clear error unless ``t`` is a floating tensor the kernels can read.

    The kernels run on CUDA tensors, or on CPU tensors when the interpreter is enabled.
    """
    t = check_floating(name, t, ndim)
    if t.device.type != "cuda" and not interpreter_enabled():
        raise ValueError(
            f"{name} is on {t.device}; the Triton kernels need CUDA tensors "
            "(or TRITON_INTERPRET=1 set before import to run them on the CPU interpreter)"
        )
    return t


def num_warps_for(block: int) -> int:
    """More warps for wider rows, as in Triton's fused-softmax tutorial."""
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def check_operands(name_a: str, a: object, name_b: str, b: object, *, matmul: bool) -> None:
    """Raise a clear error unless ``a`` and ``b`` are tensors of one dtype and device whose
    shapes fit: equal for an element-wise kernel, ``(M, K)`` and ``(K, N)`` for ``matmul``.
    (No broadcasting: the kernels read both operands element by element.)"""
    for name, t in ((name_a, a), (name_b, b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if matmul and (a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]):
        raise ValueError(
            f"{name_a} must be (M, K) and {name_b} (K, N) with the same K, got "
            f"{name_a} {tuple(a.shape)} and {name_b} {tuple(b.shape)}"
        )
    if not matmul and a.shape != b.shape:
        raise ValueError(
            f"{name_b} must have the shape of {name_a} {tuple(a.shape)}, got {tuple(b.shape)}"
        )
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(
            f"{name_a} and {name_b} must share dtype and device, got {a.dtype} on {a.device} "
            f"and {b.dtype} on {b.device}"
        )


def check_softmax_args(
    x: object, scale: object, mask: object
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Validate the arguments of ``softmax(x, dim, scale=..., mask=...)``.

    Returns ``x`` and the mask expanded to ``x``'s shape (or None). A float mask may hold
    ``-inf`` (masked out) but not ``+inf`` or NaN, which would turn whole rows into NaN.
    """
    x = check_floating("x", x)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension")
    check_number("scale", scale)
    if mask is None:
        return x, None
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"mask must be bool or floating point, got {mask.dtype}")
    if mask.requires_grad:
        raise ValueError("mask must not require grad: the kernel treats it as a constant")
    if mask.device != x.device:
        raise ValueError(f"mask is on {mask.device} but x is on {x.device}")
    try:
        expanded = mask.expand(x.shape)
    except RuntimeError as err:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to x {tuple(x.shape)}"
        ) from err
    if mask.is_floating_point() and bool((mask.isnan() | mask.isposinf()).any()):
        raise ValueError(
            "mask must hold finite values or -inf (masked out), got NaN or +inf; "
            "use a bool mask (True = masked out) or -inf to hide an entry"
        )
    return x, expanded


def check_layer_norm_args(x: object, weight: object, bias: object, eps: object) -> torch.Tensor:
    """Validate the arguments of ``layer_norm(x, weight, bias, eps)``; returns ``x``.

    ``x (..., N)`` with ``1 <= N <= MAX_FEATURES``; ``weight``, ``bias`` ``(N,)`` or None, on
    ``x``'s device; ``eps`` a finite number > 0.
    """
    x = check_floating("x", x)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension")
    n_cols = x.shape[-1]
    if not 1 <= n_cols <= MAX_FEATURES:
        raise ValueError(f"x's last dimension must be in [1, {MAX_FEATURES}], got {n_cols}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        check_floating(name, p, ndim=1)
        if p.shape[0] != n_cols:
            raise ValueError(f"{name} must have shape ({n_cols},), got {tuple(p.shape)}")
        if p.device != x.device:
            raise ValueError(f"{name} is on {p.device} but x is on {x.device}")
    check_number("eps", eps, 0, exclusive=("minimum",))
    return x


def check_attention_args(
    q: object,
    k: object,
    v: object,
    key_padding_mask: object,
    is_causal: object,
    scale: object,
    dropout_p: object,
) -> float:
    """Validate the arguments of ``attention(q, k, v, ...)``; returns the scale to use.

    ``q (B, H, Nq, D)``, ``k`` and ``v`` ``(B, H, Nk, D)`` of one dtype and device with
    ``1 <= D <= MAX_HEAD_DIM`` and ``B * H * Nq > 0``; ``key_padding_mask`` bool ``(B, Nk)`` or
    None; ``scale`` a finite number or None (``1 / sqrt(D)``); ``dropout_p`` in ``[0, 1)``.
    """
    q, k, v = (check_floating(name, t, ndim=4) for name, t in (("q", q), ("k", k), ("v", v)))
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
    if batch * n_heads * n_q == 0:
        raise ValueError(f"q must have non-empty batch, head and query dims, got {tuple(q.shape)}")
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
            got = getattr(key_padding_mask, "dtype", type(key_padding_mask).__name__)
            raise TypeError(f"key_padding_mask must be a bool tensor, got {got}")
        if key_padding_mask.shape != (batch, k.shape[2]):
            raise ValueError(
                f"key_padding_mask must have shape ({batch}, {k.shape[2]}), "
                f"got {tuple(key_padding_mask.shape)}"
            )
        if key_padding_mask.device != q.device:
            raise ValueError(f"key_padding_mask is on {key_padding_mask.device}, q on {q.device}")
    check_bool("is_causal", is_causal)
    check_number("scale", scale, optional=True)
    check_number("dropout_p", dropout_p, 0.0, 1.0, exclusive=("maximum",))
    return attention_scale(scale, head_dim)


def attention_scale(scale: float | None, head_dim: int) -> float:
    """The score scale of attention: ``scale``, or ``1 / sqrt(head_dim)`` when it is None (the
    one place that default is written, for the kernels and the reference alike)."""
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


#: offsets inside a kernel are 32-bit integers unless it widens them (as the softmax does)
MAX_INT32_OFFSET = 2**31 - 1


def check_int32_offsets(name: str, t: torch.Tensor) -> None:
    """Raise unless every element of ``t`` is within a 32-bit offset of its first one."""
    last = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))
    if t.numel() and last > MAX_INT32_OFFSET:
        raise ValueError(
            f"{name} spans {last + 1} elements, more than this kernel's 32-bit offsets reach "
            f"({MAX_INT32_OFFSET + 1}); split it into smaller pieces"
        )
