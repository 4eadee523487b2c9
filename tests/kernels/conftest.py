"""Kernel tests: on the CPU through Triton's interpreter, or on a CUDA GPU.

Triton decides between compiling for the GPU and interpreting when a kernel is *defined*, so
``TRITON_INTERPRET=1`` must be in the environment before triton is imported; run these tests
in their own process:

    TRITON_INTERPRET=1 pytest tests/kernels

Without the interpreter and without a GPU (or without triton) the kernel test modules are not
collected; the one test left, ``test_environment.py``, is skipped and prints the reason.
"""

from __future__ import annotations

import pytest
import torch
from _kernel_testing import kernel_device, skip_reason

collect_ignore_glob = [] if skip_reason() is None else ["test_[!e]*.py"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def device() -> torch.device:
    return kernel_device()
