"""Kernel tests run Triton's CPU interpreter; they need their own pytest process.

Triton decides between compiling for the GPU and interpreting when a kernel is *defined*, so
``TRITON_INTERPRET=1`` must be in the environment before triton is imported:

    TRITON_INTERPRET=1 pytest tests/kernels

Without it (or without triton) the kernel test modules are not collected; the one test left,
``test_environment.py``, is skipped and prints the reason.
"""

from __future__ import annotations

import pytest
import torch
from _kernel_testing import skip_reason

collect_ignore_glob = [] if skip_reason() is None else ["test_[!e]*.py"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
