"""Shared helpers of the kernel tests (where they run, the error-bound rule)."""

from __future__ import annotations

import importlib.util
import os

import torch


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def skip_reason() -> str | None:
    """Why the kernel tests cannot run in this process, or None if they can.

    They run on the CPU through Triton's interpreter (``TRITON_INTERPRET=1``), or on a CUDA
    GPU when one is present and the interpreter is off.
    """
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install 'lecturekit[gpu]')"
    if interpreting() or torch.cuda.is_available():
        return None
    return (
        "no CUDA GPU and TRITON_INTERPRET is not '1': run the kernel tests in their own "
        "process with `TRITON_INTERPRET=1 pytest tests/kernels` (set before triton is imported)"
    )


def kernel_device() -> torch.device:
    """CPU tensors under the interpreter, CUDA tensors otherwise."""
    return torch.device("cpu" if interpreting() else "cuda")


def max_abs_err(a: torch.Tensor, ref64: torch.Tensor) -> float:
    return (a.double() - ref64).abs().max().item() if a.numel() else 0.0


def assert_within_torch_error(
    name: str, got: torch.Tensor, ref64: torch.Tensor, torch_same_dtype: torch.Tensor
) -> None:
    """Flash-attention's rule: kernel error <= 2 x PyTorch's own error (same dtype) + 1e-5.

    ``ref64`` is the float64 reference; ``torch_same_dtype`` is PyTorch's result computed in
    the kernel's dtype, whose distance to ``ref64`` measures what that dtype costs anyway.
    """
    ref64 = ref64.to(got.device)
    assert got.shape == ref64.shape, f"{name}: shape {tuple(got.shape)} != {tuple(ref64.shape)}"
    assert not torch.isnan(got).any(), f"{name}: NaN in kernel output"
    err = max_abs_err(got, ref64)
    torch_err = max_abs_err(torch_same_dtype.to(got.device), ref64)
    bound = 2 * torch_err + 1e-5
    assert err <= bound, f"{name}: max error {err:.3g} > {bound:.3g} (torch's own {torch_err:.3g})"
