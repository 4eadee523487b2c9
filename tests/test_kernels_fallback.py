"""Chapter 7's first kernels where they cannot run (no GPU, no interpreter): ``kernels.add`` and
``kernels.matmul`` warn once and compute with PyTorch, as the model's layers do; bad input
gets the same clear errors as on the kernel path."""

import os
import sys
import warnings

import pytest
import torch

import lecturekit.kernels as kernels
from lecturekit import _common

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the fallback of a machine without a GPU"
)


@pytest.fixture
def no_kernels(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(_common, "_warned", set())


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


def test_interpret_without_gpu_sets_the_variable_once_and_respects_the_user(monkeypatch):
    monkeypatch.setattr(
        os, "environ", {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    )
    for name in list(sys.modules):  # as in a fresh notebook: no kernel module imported yet
        if name.startswith("lecturekit.kernels."):
            monkeypatch.delitem(sys.modules, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels.interpret_without_gpu() is True
    assert os.environ["TRITON_INTERPRET"] == "1"
    os.environ["TRITON_INTERPRET"] = "0"  # the user's explicit choice stays
    assert kernels.interpret_without_gpu() is False
    assert os.environ["TRITON_INTERPRET"] == "0"


def test_interpret_without_gpu_warns_when_a_kernel_module_came_first(monkeypatch):
    monkeypatch.setattr(
        os, "environ", {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    )
    monkeypatch.setitem(sys.modules, "lecturekit.kernels.fused_softmax", object())
    with pytest.warns(RuntimeWarning, match="fused_softmax was imported before TRITON_INTERPRET"):
        assert kernels.interpret_without_gpu() is True


def test_kernels_refuse_tensors_beyond_32_bit_offsets():
    from lecturekit.kernels._utils import check_int32_offsets

    check_int32_offsets("a", torch.empty(2**15, 2**16, device="meta"))  # 2**31 elements: fits
    with pytest.raises(ValueError, match="a spans 4294967296 elements.*32-bit offsets"):
        check_int32_offsets("a", torch.empty(2**16, 2**16, device="meta"))  # no memory used
    check_int32_offsets("b", torch.empty(2**16, 2**16, device="meta")[:1])
