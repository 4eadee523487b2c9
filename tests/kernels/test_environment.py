"""The kernel suite's entry test: reports why everything is skipped, or checks availability."""

import os

import pytest
from _kernel_testing import skip_reason


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_kernels_available_under_interpreter() -> None:
    import lecturekit.kernels as kernels

    assert os.environ["TRITON_INTERPRET"] == "1"
    assert kernels.available()
