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

What each computes is written out in PyTorch in :mod:`lecturekit.kernels.reference`.

The fallback rule
-----------------
Every public kernel function (:func:`add`, :func:`matmul`, :func:`softmax`,
:func:`layer_norm`, :func:`attention`) does the same three things:

1. It validates its arguments, with the same checks and the same errors whether the kernels
   run or not (a call fails, or works, alike on a laptop and on a GPU).
2. If the kernels can run on the given tensor (:func:`runnable`: triton is installed and the
   tensor is on CUDA, or Triton's CPU interpreter is enabled), the Triton kernel computes the
   result.
3. Otherwise it warns once (one ``RuntimeWarning`` per function and reason, per process) and
   computes the same result with its PyTorch reference from :mod:`lecturekit.kernels.reference`:
   the same semantics (fully masked rows give zeros, top-left causal masks, attention dropout as
   ``torch.nn.functional.dropout`` on the weights), up to rounding.

Importing this package never imports triton: each function imports its kernel module when it
first runs a kernel, so ``lecturekit`` installs and works without the ``gpu`` extra. With
``TRITON_INTERPRET=1`` set *before* the first import the kernels also run on CPU tensors
through Triton's interpreter (slow, used by the tests and by chapter 7).
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - static analysers only
    import torch

from lecturekit._common import warn_once
from lecturekit._lazy import attach

__all__ = [
    "add",
    "attention",
    "available",
    "interpret_without_gpu",
    "layer_norm",
    "matmul",
    "runnable",
    "softmax",
]

# the submodules that define kernels: each kernel keeps the mode it was defined in
_KERNEL_MODULES = ("vector_add", "tiled_matmul", "fused_softmax", "layernorm", "flash_attention")

# submodules (e.g. ``kernels.<module>``) resolve on first attribute access
__getattr__, __dir__ = attach(__name__, names=False)


def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def available() -> bool:
    """Whether the kernels can run here at all.

    True when triton is installed and either a CUDA device is present or Triton's CPU
    interpreter is enabled (``TRITON_INTERPRET=1``). Triton itself is not imported.
    """
    from lecturekit.kernels._utils import interpreter_enabled

    if not _triton_installed():
        return False
    if interpreter_enabled():
        return True
    import torch

    return torch.cuda.is_available()


def runnable(tensor: torch.Tensor) -> bool:
    """Whether the kernels can run on ``tensor`` here: triton is installed and ``tensor`` is on
    CUDA, or the interpreter is enabled. Never warns, never imports triton."""
    from lecturekit.kernels._utils import interpreter_enabled

    return _triton_installed() and (tensor.device.type == "cuda" or interpreter_enabled())


def _run_kernels(name: str, tensor: torch.Tensor) -> bool:
    """:func:`runnable`, with the fallback's one warning when it is False."""
    if runnable(tensor):
        return True
    if _triton_installed():
        why = (
            f"the triton kernels cannot run on a {tensor.device.type} tensor here (they run on "
            "CUDA tensors, or on any tensor under TRITON_INTERPRET=1)"
        )
    else:
        why = "triton is not installed (pip install 'lecturekit[gpu]', Linux)"
    warn_once(
        f"kernels.{name}: {why}; falling back to PyTorch "
        f"(lecturekit.kernels.reference.{name}_reference)."
    )
    return False


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

    from lecturekit.kernels._utils import interpreter_enabled

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
    return interpreter_enabled()


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` by the vector-add kernel; any shape, ``y`` of the shape and dtype of ``x``
    (no broadcasting). Follows the fallback rule (reference: ``x + y``)."""
    from lecturekit.kernels._utils import check_floating, check_operands

    check_operands("x", x, "y", y, matmul=False)
    check_floating("x", x)
    if not _run_kernels("add", x):
        from lecturekit.kernels.reference import add_reference

        return add_reference(x, y)
    from lecturekit.kernels.vector_add import add as _add

    return _add(x, y)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` by the tiled matmul kernel: ``a (M, K)``, ``b (K, N)`` -> ``(M, N)``.
    Follows the fallback rule (reference: ``a @ b``)."""
    from lecturekit.kernels._utils import check_floating, check_operands

    check_operands("a", a, "b", b, matmul=True)
    check_floating("a", a)
    if not _run_kernels("matmul", a):
        from lecturekit.kernels.reference import matmul_reference

        return matmul_reference(a, b)
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

    Follows the fallback rule (reference: ``reference.attention_reference``).

    Args:
        q: queries ``(B, H, Tq, Dh)``, float32/float16/bfloat16, ``1 <= Dh <= 128``.
        k: keys ``(B, H, Tk, Dh)``.
        v: values ``(B, H, Tk, Dh)``.
        key_padding_mask: bool ``(B, Tk)``, True = padding (key ignored).
        is_causal: query ``i`` only sees keys ``j <= i`` (top-left aligned, as in
            ``torch.nn.functional.scaled_dot_product_attention``).
        scale: score scale, a finite number; default ``1 / sqrt(Dh)``.
        dropout_p: attention dropout on the weights, in ``[0, 1)`` (pass the module's rate
            while training); the kernels regenerate the mask from a Philox seed in the
            backward pass, never store it.

    Returns:
        ``(B, H, Tq, Dh)``; query rows whose keys are all masked are zeros. Differentiable.
    """
    from lecturekit.kernels._utils import check_attention_args

    scale = check_attention_args(q, k, v, key_padding_mask, is_causal, scale, dropout_p)
    if not _run_kernels("attention", q):
        from lecturekit.kernels.reference import attention_reference

        return attention_reference(
            q, k, v, key_padding_mask=key_padding_mask, is_causal=is_causal, scale=scale,
            dropout_p=dropout_p,
        )  # fmt: skip
    from lecturekit.kernels._attention_launch import launch_attention

    return launch_attention(
        q, k, v, key_padding_mask, is_causal, scale, dropout_p, None, None, None
    )


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Fused LayerNorm over the last dimension of ``x`` ``(..., D)``; weight/bias ``(D,)`` or
    None; ``eps`` a finite number > 0. Differentiable with respect to ``x``, ``weight`` and
    ``bias``. Follows the fallback rule (reference: ``reference.layer_norm_reference``)."""
    from lecturekit.kernels._utils import check_layer_norm_args

    check_layer_norm_args(x, weight, bias, eps)
    if not _run_kernels("layer_norm", x):
        from lecturekit.kernels.reference import layer_norm_reference

        return layer_norm_reference(x, weight, bias, eps)
    from lecturekit.kernels.layernorm import _launch

    return _launch(x, weight, bias, eps)


def softmax(
    x: torch.Tensor,
    dim: int = -1,
    *,
    scale: float = 1.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Fused ``softmax(x * scale + mask, dim)``; ``scale`` a finite number.

    ``mask`` broadcasts to ``x``: bool (True = masked out) or float (added to the scaled
    logits; ``-inf`` masks out, NaN and ``+inf`` are refused). Fully masked rows give zeros.
    Differentiable with respect to ``x``. Follows the fallback rule (reference:
    ``reference.softmax_reference``).
    """
    from lecturekit.kernels._utils import check_softmax_args

    x, expanded = check_softmax_args(x, scale, mask)
    if not _run_kernels("softmax", x):
        from lecturekit.kernels.reference import softmax_reference

        return softmax_reference(x, dim, scale=scale, mask=mask)
    from lecturekit.kernels.fused_softmax import _launch

    return _launch(x, dim, scale, expanded, None)
