"""Shared helpers of the kernel tests (interpreter detection, the error-bound rule)."""

from __future__ import annotations

import importlib.util
import os

import torch


def skip_reason() -> str | None:
    """Why the interpreter tests cannot run in this process, or None if they can."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install 'lecturekit[gpu]')"
    if os.environ.get("TRITON_INTERPRET") != "1":
        return (
            "kernel tests need TRITON_INTERPRET=1 set before import: "
            "run them in their own process with `TRITON_INTERPRET=1 pytest tests/kernels`"
        )
    return None


def max_abs_err(a: torch.Tensor, ref64: torch.Tensor) -> float:
    return (a.double() - ref64).abs().max().item() if a.numel() else 0.0


def assert_within_torch_error(
    name: str, got: torch.Tensor, ref64: torch.Tensor, torch_same_dtype: torch.Tensor
) -> None:
    """Flash-attention's rule: kernel error <= 2 x PyTorch's own error (same dtype) + 1e-5.

    ``ref64`` is the float64 reference; ``torch_same_dtype`` is PyTorch's result computed in
    the kernel's dtype, whose distance to ``ref64`` measures what that dtype costs anyway.
    """
    assert got.shape == ref64.shape, f"{name}: shape {tuple(got.shape)} != {tuple(ref64.shape)}"
    assert not torch.isnan(got).any(), f"{name}: NaN in kernel output"
    err = max_abs_err(got, ref64)
    torch_err = max_abs_err(torch_same_dtype, ref64)
    bound = 2 * torch_err + 1e-5
    assert err <= bound, f"{name}: max error {err:.3g} > {bound:.3g} (torch's own {torch_err:.3g})"
