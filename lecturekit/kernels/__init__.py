"""GPU kernels of lecturekit, written in Triton, with PyTorch references beside them.

The first two are the on-ramp of chapter 7, the way Triton's tutorials start:

- :func:`add`: vector addition, one program instance per block of elements, masked at the
  end (:mod:`lecturekit.kernels.vector_add`).
- :func:`matmul`: tiled matrix multiplication, blocked over M, N and K with ``tl.dot``
  (:mod:`lecturekit.kernels.tiled_matmul`).

Then the kernels the model uses:

- :func:`softmax`: fused row softmax with a scale and a boolean or additive mask
  (:mod:`lecturekit.kernels.fused_softmax`).
- :func:`layer_norm`: fused LayerNorm forward and backward (:mod:`lecturekit.kernels.layernorm`).
- :func:`attention`: FlashAttention forward and backward (:mod:`lecturekit.kernels.flash_attention`).

Importing this package never imports triton: each function imports its kernel module when it
is first called, so ``lecturekit`` installs and works without the ``gpu`` extra. The kernels run
on CUDA tensors; with ``TRITON_INTERPRET=1`` set *before* the first import they also run on CPU
tensors through Triton's interpreter (slow, used by the tests and by chapter 7). :func:`add`
and :func:`matmul` dispatch as the model's layers do (:mod:`lecturekit.kernels.backend`):
where the kernels cannot run they warn once and compute with PyTorch.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - static analysers only
    import torch

from lecturekit._lazy import attach

__all__ = [
    "add",
    "attention",
    "available",
    "interpret_without_gpu",
    "layer_norm",
    "matmul",
    "softmax",
]

# the submodules that define kernels: each kernel keeps the mode it was defined in
_KERNEL_MODULES = ("vector_add", "tiled_matmul", "fused_softmax", "layernorm", "flash_attention")

# submodules (e.g. ``kernels.<module>``) resolve on first attribute access
__getattr__, __dir__ = attach(__name__, names=False)


def available() -> bool:
    """Whether the kernels can run here.

    True when triton is installed and either a CUDA device is present or Triton's CPU
    interpreter is enabled (``TRITON_INTERPRET=1``). Triton itself is not imported.
    """
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        return True
    import torch

    return torch.cuda.is_available()


def interpret_without_gpu() -> bool:
    """Turn on Triton's CPU interpreter (``TRITON_INTERPRET=1``) where there is no CUDA GPU.

    Triton chooses between compiling a kernel for the GPU and interpreting it on the CPU when
    the kernel is *defined* (``@triton.jit`` runs), so a notebook calls this in its first
    cell, before importing ``lecturekit.kernels``' submodules or defining a kernel of its own.
    A ``TRITON_INTERPRET`` already in the environment is left as it is. Warns when a kernel
    module was imported before the mode changed (restart the kernel and run from the top).

    Returns:
        True if kernels defined from now on run in the interpreter (on CPU tensors), False if
        they are compiled for the GPU (on CUDA tensors).
    """
    import sys
    import warnings

    if "TRITON_INTERPRET" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
            early = [m for m in _KERNEL_MODULES if f"{__name__}.{m}" in sys.modules]
            if early:
                warnings.warn(
                    f"lecturekit.kernels.{early[0]} was imported before TRITON_INTERPRET was set, "
                    "so its kernels are compiled for a GPU this machine lacks: restart the "
                    "Python kernel and call interpret_without_gpu() first",
                    RuntimeWarning,
                    stacklevel=2,
                )
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` by the vector-add kernel; any shape, ``y`` of the shape and dtype of ``x``.

    Where the kernels cannot run (no CUDA tensor and no interpreter, or no triton) this warns
    once and returns PyTorch's ``x + y`` (``vector_add.add_reference``).
    """
    from lecturekit.kernels._utils import check_operands
    from lecturekit.kernels.backend import usable_kernels

    check_operands("x", x, "y", y, matmul=False)
    if usable_kernels(x, "kernels.add") is None:
        return x + y
    from lecturekit.kernels.vector_add import add as _add

    return _add(x, y)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` by the tiled matmul kernel: ``a (M, K)``, ``b (K, N)`` -> ``(M, N)``.

    Where the kernels cannot run this warns once and returns PyTorch's ``a @ b``
    (``tiled_matmul.matmul_reference``).
    """
    from lecturekit.kernels._utils import check_operands
    from lecturekit.kernels.backend import usable_kernels

    check_operands("a", a, "b", b, matmul=True)
    if usable_kernels(a, "kernels.matmul") is None:
        return a @ b
    from lecturekit.kernels.tiled_matmul import matmul as _matmul

    return _matmul(a, b)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """FlashAttention: ``softmax(q k^T * scale + masks) v`` without materialising the scores.

    Args:
        q: queries ``(B, H, Tq, Dh)``.
        k: keys ``(B, H, Tk, Dh)``.
        v: values ``(B, H, Tk, Dh)``.
        key_padding_mask: bool ``(B, Tk)``, True = padding (key ignored).
        is_causal: query ``i`` only sees keys ``j <= i`` (top-left aligned, as in
            ``torch.nn.functional.scaled_dot_product_attention``).
        scale: score scale, default ``1 / sqrt(Dh)``.
        dropout_p: attention dropout on the weights (pass the module's rate while training);
            the mask is regenerated from a Philox seed in the backward pass, never stored.

    Returns:
        ``(B, H, Tq, Dh)``; query rows whose keys are all masked are zeros. Differentiable.
    """
    from lecturekit.kernels.flash_attention import flash_attention

    return flash_attention(
        q,
        k,
        v,
        key_padding_mask=key_padding_mask,
        is_causal=is_causal,
        scale=scale,
        dropout_p=dropout_p,
    )


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Fused LayerNorm over the last dimension of ``x`` ``(..., D)``; weight/bias ``(D,)``.

    Differentiable with respect to ``x``, ``weight`` and ``bias``.
    """
    from lecturekit.kernels.layernorm import layer_norm as _layer_norm

    return _layer_norm(x, weight, bias, eps)


def softmax(
    x: torch.Tensor,
    dim: int = -1,
    *,
    scale: float = 1.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Fused ``softmax(x * scale + mask, dim)``.

    ``mask`` broadcasts to ``x``: bool (True = masked out) or float (added to the scaled
    logits). Fully masked rows give zeros. Differentiable with respect to ``x``.
    """
    from lecturekit.kernels.fused_softmax import softmax as _softmax

    return _softmax(x, dim, scale=scale, mask=mask)
