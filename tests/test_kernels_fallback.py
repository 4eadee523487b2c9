"""Chapter 7's first kernels where they cannot run (no GPU, no interpreter): ``kernels.add`` and
``kernels.matmul`` warn once and compute with PyTorch, as the model's layers do; bad input
gets the same clear errors as on the kernel path."""

import warnings

import pytest
import torch

import lecturekit.kernels as kernels
from lecturekit.kernels import backend as kernel_backend

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the fallback of a machine without a GPU"
)


@pytest.fixture
def no_kernels(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(kernel_backend, "_warned", set())


def test_add_and_matmul_fall_back_with_one_warning_each(no_kernels):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(kernels.add(x, y), x + y)
        assert torch.equal(kernels.add(y, x), x + y)
        torch.testing.assert_close(kernels.matmul(x, y.t()), x @ y.t())
        kernels.matmul(y, x.t())
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2, messages
    assert "kernels.add" in messages[0] and "falling back to PyTorch" in messages[0]
    assert "kernels.matmul" in messages[1]


def test_fallback_rejects_what_the_kernels_reject(no_kernels):
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"y must have the shape of x \(3, 4\)"):
        kernels.add(x, torch.randn(1, 4))  # PyTorch would broadcast silently
    with pytest.raises(ValueError, match=r"same K"):
        kernels.matmul(x, x)
    with pytest.raises(TypeError, match="b must be a torch.Tensor"):
        kernels.matmul(x, None)
