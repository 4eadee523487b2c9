"""Backend dispatch: whether the Triton kernels can run on a tensor, else a warned fallback.

``MultiHeadAttention(backend="triton")`` and ``LayerNorm(backend="triton")`` in
:mod:`lecturekit.model` ask :func:`usable_kernels` before each call; when the kernels cannot
run (no CUDA device and no interpreter, or triton missing) they fall back to PyTorch with one
warning per process. Importing this module never imports triton or torch.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

from lecturekit._common import warn_once

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from torch import Tensor

__all__ = ["usable_kernels"]


def usable_kernels(tensor: Tensor, what: str) -> ModuleType | None:
    """``lecturekit.kernels`` if its Triton kernels can run on ``tensor``, else None (+ warning).

    The kernels run on CUDA tensors, or anywhere under ``TRITON_INTERPRET=1`` (how the kernel
    tests run on CPU).
    """
    from lecturekit import kernels

    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    if kernels.available() and (tensor.is_cuda or interpreted):
        return kernels
    warn_once(
        f"{what}: backend 'triton' requested but the Triton kernels cannot run here "
        f"(device {tensor.device}, kernels available: {kernels.available()}); "
        "falling back to PyTorch."
    )
    return None
