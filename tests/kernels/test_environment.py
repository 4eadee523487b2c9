"""The kernel suite's entry test: reports why everything is skipped, or checks availability."""

import pytest
from _kernel_testing import skip_reason


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_kernels_available() -> None:
    import lecturekit.kernels as kernels

    assert kernels.available()
