"""Small helpers shared by the kernel modules: interpreter detection and argument checks."""

from __future__ import annotations

import os

import torch

#: dtypes every kernel accepts
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreter_enabled() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter (``TRITON_INTERPRET=1``).

    Triton reads the variable when a kernel is *defined*, so it must be set before
    ``lecturekit.kernels.<module>`` (and triton itself) is first imported.
    """
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= ``n`` (``tl.arange`` needs power-of-two block sizes)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def check_tensor(name: str, t: object, ndim: int | None = None) -> torch.Tensor:
    """Raise a clear error unless ``t`` is a floating tensor the kernels can read.

    The kernels run on CUDA tensors, or on CPU tensors when the interpreter is enabled.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} must be float32, float16 or bfloat16, got {t.dtype}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
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
