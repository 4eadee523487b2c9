"""The fallback rule of ``lecturekit.kernels`` where the kernels cannot run (no GPU, no
interpreter): each of the five public functions validates its arguments as on the kernel path,
warns once, and returns what its PyTorch reference in ``kernels.reference`` returns (checked
here against torch's own functions, so a wrong reference fails too). Runs without triton's
interpreter; ``kernels.reference`` must import without triton."""

import math
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import lecturekit.kernels as kernels
from lecturekit import _common

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the fallback of a machine without a GPU"
)


@pytest.fixture
def no_kernels(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(_common, "_warned", set())


def _five_calls():
    """``{name: (call, expected)}``: each public function on CPU tensors, and torch's answer."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    w, b = torch.randn(4, generator=g), torch.randn(4, generator=g)
    mask = torch.tensor([False, True, False, True])
    full = torch.ones(3, 4, dtype=torch.bool)
    q, k, v = (torch.randn(2, 2, n, 8, generator=g) for n in (5, 6, 6))
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[0, 4:] = True
    kpm[1] = True  # a fully padded source: its queries attend to nothing
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=~kpm[:, None, None, :], scale=0.3)
    sdpa[1] = 0.0
    return {
        "add": (lambda: kernels.add(x, y), x + y),
        "matmul": (lambda: kernels.matmul(x, y.t()), x @ y.t()),
        "softmax": (
            lambda: kernels.softmax(x, scale=0.5, mask=mask),
            torch.softmax((0.5 * x).masked_fill(mask, -math.inf), dim=-1),
        ),
        "softmax_fully_masked": (lambda: kernels.softmax(x, mask=full), torch.zeros(3, 4)),
        "layer_norm": (lambda: kernels.layer_norm(x, w, b, 1e-5), F.layer_norm(x, (4,), w, b)),
        "attention": (lambda: kernels.attention(q, k, v, key_padding_mask=kpm, scale=0.3), sdpa),
    }


def test_every_public_function_falls_back_to_its_reference_with_one_warning(no_kernels):
    calls = _five_calls()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            for name, (call, expected) in calls.items():
                torch.testing.assert_close(call(), expected, msg=name)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 5, messages  # one per function, not one per call
    names = ["add", "matmul", "softmax", "layer_norm", "attention"]
    for name, message in zip(names, messages, strict=True):
        assert message.startswith(f"kernels.{name}:") and "falling back to PyTorch" in message
        assert f"reference.{name}_reference" in message
    assert all(issubclass(w.category, RuntimeWarning) for w in caught)


def test_attention_fallback_is_causal_top_left_and_drops_out_like_torch(no_kernels):
    q, k, v = (torch.randn(1, 2, n, 8) for n in (4, 7, 7))
    torch.testing.assert_close(
        kernels.attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )
    torch.manual_seed(3)
    dropped = kernels.attention(q, k, v, dropout_p=0.4)
    torch.manual_seed(3)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(dropped, F.dropout(weights, 0.4, training=True) @ v)


def test_fallback_rejects_what_the_kernels_reject(no_kernels):
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"y must have the shape of x \(3, 4\)"):
        kernels.add(x, torch.randn(1, 4))  # PyTorch would broadcast silently
    with pytest.raises(ValueError, match=r"same K"):
        kernels.matmul(x, x)
    with pytest.raises(TypeError, match="b must be a torch.Tensor"):
        kernels.matmul(x, None)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        kernels.add(x.double(), x.double())
    with pytest.raises(ValueError, match="eps must be a finite number"):
        kernels.layer_norm(x, None, None, eps=math.nan)
    with pytest.raises(ValueError, match="scale must be a finite number"):
        kernels.softmax(x, scale=math.nan)
    with pytest.raises(ValueError, match="mask must hold finite values or -inf"):
        kernels.softmax(x, mask=torch.tensor([0.0, math.inf, 0.0, 0.0]))
    q = torch.randn(1, 1, 3, 8)
    with pytest.raises(ValueError, match="scale must be a finite number"):
        kernels.attention(q, q, q, scale=math.nan)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0.0, 1.0\)"):
        kernels.attention(q, q, q, dropout_p=1.0)
    with pytest.raises(ValueError, match="head dim must be in"):
        kernels.attention(*(torch.randn(1, 1, 3, 130) for _ in range(3)))


def test_runnable_says_where_the_kernels_run_without_warning(no_kernels, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels.runnable(torch.zeros(1)) is False
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        assert kernels.runnable(torch.zeros(1)) is kernels.available()


def test_references_import_without_triton():
    probe = (
        "import sys; sys.modules['triton'] = None\n"  # any import of triton now fails
        "import torch, lecturekit.kernels.reference as r\n"
        "x = torch.randn(2, 3)\n"
        "assert torch.equal(r.add_reference(x, x), x + x)\n"
        "import lecturekit.kernels as k\n"
        "assert k.available() is False and k.runnable(x) is False\n"
        "print(torch.equal(k.add(x, x), x + x), 'triton' in sys.modules)"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]  # sys.modules holds the None we put there


def test_the_interpreter_flag_is_read_in_one_place():
    from pathlib import Path

    package = Path(kernels.__file__).resolve().parents[1]
    readers = []
    for path in package.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "os.environ" in line and "TRITON_INTERPRET" in line and "] = " not in line:
                readers.append(f"{path.relative_to(package)}: {line.strip()}")
    assert readers == [
        'kernels/__init__.py: if "TRITON_INTERPRET" not in os.environ:',
        'kernels/_utils.py: return os.environ.get("TRITON_INTERPRET", "0") == "1"',
    ], readers


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
    for name in list(sys.modules):  # only fused_softmax was imported (whatever ran before)
        if name.startswith("lecturekit.kernels."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "lecturekit.kernels.fused_softmax", object())
    with pytest.warns(RuntimeWarning, match="fused_softmax was imported before TRITON_INTERPRET"):
        assert kernels.interpret_without_gpu() is True


def test_kernels_refuse_tensors_beyond_32_bit_offsets():
    from lecturekit.kernels._utils import check_int32_offsets

    check_int32_offsets("a", torch.empty(2**15, 2**16, device="meta"))  # 2**31 elements: fits
    with pytest.raises(ValueError, match="a spans 4294967296 elements.*32-bit offsets"):
        check_int32_offsets("a", torch.empty(2**16, 2**16, device="meta"))  # no memory used
    check_int32_offsets("b", torch.empty(2**16, 2**16, device="meta")[:1])
