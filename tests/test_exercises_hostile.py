"""Issue 45: hostile and careless answers to the shipped exercises. Each must be refused with a
clear message in Simplified Chinese, in bounded time, and leave this process alive and its
modules as they were. ``HOSTILE`` lists them as (exercise, answer, a fragment of the
feedback); the comment after each says which of them needed a fix of the checker in issue 45.
The tests after the table (issue #28 and later) call ``check`` directly: answers that loop,
exit, signal themselves or print without end, the torch twins of a forbidden function, and a
verdict that IPython does not echo.
"""

from __future__ import annotations

import _thread
import builtins
import concurrent.futures
import gc
import math
import os
import signal
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lecturekit
from lecturekit.exercises import Verdict, check, get_exercise, running, specs, watch
from lecturekit.exercises.ch02_attention import (
    reference_multi_head,
    reference_scaled_dot_product,
)
from lecturekit.exercises.ch03_layer import encoder_layer, reference_encoder_layer
from lecturekit.lab.bugs import BUGS

SOFTMAX, SDPA, MHA = (
    "setup.temperature_softmax",
    "attention.scaled_dot_product",
    "attention.multi_head",
)
NOAM, PARAMS, SHAPES = "training.noam_lr", "attention.mha_parameters", "decoder.attention_shapes"
BUG, LAYER = "lab.find_bug_1", "encoder.layer"
# a real bug name, but not the one hidden in BUG
_WRONG_BUG = next(name for name in sorted(BUGS) if name != get_exercise(BUG).reference)
LIMIT = 2.0  # seconds per case in these checks (a loaded machine starts workers slowly)

needs_fork = pytest.mark.skipif(not running.can_fork(), reason="needs a forked worker (Linux)")


def softmax(scores, temperature):  # a right answer to SOFTMAX, the base of the hostile ones
    return torch.softmax(scores / temperature, dim=-1)


def attention(q, k, v):  # a right answer to SDPA
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _stolen(name: str):
    """A tensor called ``name`` in any frame of any thread of this process, if there is one."""
    for frame in sys._current_frames().values():
        while frame is not None:
            value = frame.f_locals.get(name)
            if isinstance(value, torch.Tensor):
                return value
            frame = frame.f_back
    return None


# --- stealing the expected result (45.5) -------------------------------------------------


def steal_from_frames(scores, temperature):
    found = _stolen("expected")
    return found.clone() if found is not None else torch.zeros_like(scores)


def steal_in_a_thread(scores, temperature):  # fills its result in once the checker has one
    out = torch.zeros_like(scores)

    def wait():
        time.sleep(0.05)  # looks once the answer returned (and the watch is off)
        for _ in range(300):
            found = _stolen("expected")
            if found is not None and found.shape == out.shape:
                out.copy_(found)
                return
            time.sleep(0.01)

    threading.Thread(target=wait, daemon=True).start()
    return out


class _StealingNumber:
    def __float__(self):
        for frame in sys._current_frames().values():
            while frame is not None:
                value = frame.f_locals.get("expected")
                if isinstance(value, float):
                    return value
                frame = frame.f_back
        return 0.0


def edit_the_hidden_inputs(scores, temperature):  # zero every stored copy of the inputs
    for obj in gc.get_objects():
        if type(obj).__name__ == "Frozen":
            obj._blob = None
            obj._copy = ((torch.zeros_like(scores), temperature), {})
    return softmax(torch.zeros_like(scores), temperature)


# --- patching the checker, torch or numpy (45.7) -----------------------------------------


def patch_array_compare(scores, temperature):
    specs.Array._compare = lambda self, expected, got, where: None
    return torch.zeros_like(scores)


def patch_spec_compare(scores, temperature):
    specs.Spec.compare = lambda self, expected, got, where="": None
    return torch.zeros_like(scores)


def patch_compare_code(scores, temperature):
    specs.Array._compare.__code__ = (lambda self, expected, got, where: None).__code__
    return torch.zeros_like(scores)


def patch_torch_softmax(scores, temperature):  # the reference would agree with zeros
    torch.softmax = lambda x, dim=-1: torch.zeros_like(x)
    return torch.zeros_like(scores)


def patch_tensor_method(q, k, v):
    torch.Tensor.softmax = lambda self, dim=-1: torch.zeros_like(self)
    return torch.zeros(*q.shape[:-1], v.shape[-1])


def delete_torch_function(scores, temperature):
    del torch.softmax
    return torch.zeros_like(scores)


def patch_the_reference(scores, temperature):
    get_exercise(SOFTMAX).reference = lambda s, t: torch.zeros_like(s)
    return torch.zeros_like(scores)


def patch_the_dtype(scores, temperature):
    object.__setattr__(get_exercise(SOFTMAX).returns, "dtype", "float64")
    return softmax(scores, temperature).double()


def patch_isinstance(scores, temperature):
    builtins.isinstance = lambda obj, cls: True
    return torch.zeros_like(scores)


def patch_numpy(scores, temperature):
    np.isfinite = lambda x: np.zeros_like(x, dtype=bool)
    return torch.zeros_like(scores)


def patch_plain(scores, temperature):
    from lecturekit.exercises import guard

    guard.plain = lambda x, depth=0: x
    return torch.zeros_like(scores)


def replace_stdout(scores, temperature):
    import io

    sys.stdout = io.StringIO()  # the feedback would vanish
    return torch.zeros_like(scores)


# --- switching the watch off or escaping it (45.7, 45.12) --------------------------------


def setprofile_none(q, k, v):
    sys.setprofile(None)
    return F.scaled_dot_product_attention(q, k, v)


def setprofile_and_restore(q, k, v):
    hook = sys.getprofile()
    sys.setprofile(None)
    out = F.scaled_dot_product_attention(q, k, v)
    sys.setprofile(hook)
    return out


def profile_off_by_ctypes(q, k, v):
    import ctypes

    ctypes.pythonapi.PyEval_SetProfile(None, None)
    return F.scaled_dot_product_attention(q, k, v)


def forbidden_in_a_thread(q, k, v):
    box = []
    thread = threading.Thread(target=lambda: box.append(F.scaled_dot_product_attention(q, k, v)))
    thread.start()
    thread.join()
    return box[0]


def forbidden_in_a_pool(q, k, v):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(F.scaled_dot_product_attention, q, k, v).result()


def forbidden_in_a_raw_thread(q, k, v):
    box, done = [], threading.Event()

    def run():
        box.append(F.scaled_dot_product_attention(q, k, v))
        done.set()

    _thread.start_new_thread(run, ())
    done.wait(5)
    return box[0]


def threading_setprofile_off(q, k, v):
    threading.setprofile(None)
    return attention(q, k, v)


def forbidden_in_a_child_process(q, k, v):
    subprocess.run(["true"], check=False)
    return attention(q, k, v)


def forbidden_after_fork(q, k, v):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return attention(q, k, v)


def interrupts_itself(q, k, v):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.1)
    return attention(q, k, v)


def terminates_itself(q, k, v):
    signal.raise_signal(signal.SIGTERM)
    return attention(q, k, v)


def kills_itself(q, k, v):
    os.kill(os.getpid(), signal.SIGKILL)


# --- forbidden functions under other names (45.6, 45.9, the public alias) ----------------


def attention_by_backend_table(q, k, v):
    out, _ = lecturekit.model.ATTENTION_FUNCTIONS["math"](
        q, k, v, attn_mask=None, key_padding_mask=None, is_causal=False, dropout_p=0.0
    )
    return out


def attention_through_chapter_reference(q, k, v):
    return reference_scaled_dot_product(q, k, v)


def _heads(x, w_qkv, b_qkv, n_heads):
    batch, length, d = x.shape
    q, k, v = (x @ w_qkv.T + b_qkv).chunk(3, dim=-1)
    return [t.reshape(batch, length, n_heads, d // n_heads).transpose(1, 2) for t in (q, k, v)]


def _merged(heads, w_o, b_o):
    batch, n_heads, length, dh = heads.shape
    return heads.transpose(1, 2).reshape(batch, length, n_heads * dh) @ w_o.T + b_o


def mha_by_backend_table(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    out, _ = lecturekit.model.ATTENTION_FUNCTIONS["math"](
        *_heads(x, w_qkv, b_qkv, n_heads),
        attn_mask=None,
        key_padding_mask=None,
        is_causal=False,
        dropout_p=0.0,
    )
    return _merged(out, w_o, b_o)


def mha_calls_the_reference(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    return reference_multi_head(x, w_qkv, b_qkv, w_o, b_o, n_heads)


def mha_by_chapter_attention(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    return _merged(reference_scaled_dot_product(*_heads(x, w_qkv, b_qkv, n_heads)), w_o, b_o)


def mha_fast_path(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    d = x.shape[-1]
    return torch._native_multi_head_attention(
        x, x, x, d, n_heads, w_qkv, b_qkv, w_o, b_o, need_weights=False
    )[0]


def mha_module_in_eval_mode(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    layer = nn.MultiheadAttention(x.shape[-1], n_heads, batch_first=True).eval()
    with torch.no_grad():
        layer.in_proj_weight.copy_(w_qkv)
        layer.in_proj_bias.copy_(b_qkv)
        layer.out_proj.weight.copy_(w_o)
        layer.out_proj.bias.copy_(b_o)
        return layer(x, x, x, need_weights=False)[0]


# --- lying objects (45.3, 45.4) ----------------------------------------------------------


class _AlwaysEqualName(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


class _LyingArray(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.broadcast(self, other).shape, dtype=bool)

    def __ne__(self, other):
        return np.zeros(np.broadcast(self, other).shape, dtype=bool)


class _LyingTensor(torch.Tensor):
    def numpy(self, *args, **kwargs):  # the zeros it holds, claiming to equal anything
        return np.zeros(tuple(self.shape), dtype=np.float32).view(_LyingArray)


class _PretendsEverything(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True  # every operation "succeeds"; .detach(), ==, .numpy() all lie

    def __eq__(self, other):
        return True


class _ClaimsToBeATensor:
    __class__ = property(lambda self: torch.Tensor)  # isinstance(x, torch.Tensor) is True
    shape = dtype = property(lambda self: "?")


class _LyingFloat(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__

    def __float__(self):
        return 1.0


class _LyingInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__

    def __int__(self):
        return 1050624


class _LyingTuple(tuple):
    def __len__(self):
        return 2

    def __iter__(self):
        return iter(((8, 8), (8, 50)))


class _LoopingFloat:
    def __float__(self):
        while True:
            pass


class _LoopingRepr:
    def __repr__(self):
        while True:
            pass


class _LoopingMessage(Exception):
    def __str__(self):
        while True:
            pass


class _Custom(BaseException):
    pass


def _raises(error):
    def answer(*args, **kwargs):
        raise error

    return answer


def print_a_lot(scores, temperature):
    print("x" * 10_000_000)
    return torch.zeros_like(scores)


def print_forever(scores, temperature):
    while True:
        print("无限输出" * 100)


def recurse(scores, temperature):
    return recurse(scores, temperature)


def _fake_big(*args):
    return torch.zeros(1).expand(10**6, 10**6)


def layer_calls_the_reference(x, padding_mask, weights, n_heads):
    return reference_encoder_layer(x, padding_mask, weights, n_heads)


def layer_edits_its_weights(x, padding_mask, weights, n_heads):  # γ doubled in place
    weights["gamma1"].mul_(2)
    return encoder_layer(x, padding_mask, weights, n_heads)


def layer_replaces_the_training(x, padding_mask, weights, n_heads):  # "trains" to 100%
    from lecturekit.exercises import ch03_layer

    ch03_layer.train_reversal = lambda *args, **kwargs: 1.0
    return encoder_layer(x, padding_mask, weights, n_heads)


HOSTILE = [
    # (exercise, answer, fragment of the feedback); "fix" = refused wrongly or not at all before
    (SOFTMAX, steal_from_frames, "调用了 sys._current_frames"),  # fix 45.5
    (SOFTMAX, steal_in_a_thread, "线程还在运行"),  # fix 45.5/45.7
    (NOAM, lambda *a: _StealingNumber(), "期望"),  # fix 45.5 (its __float__ ran late)
    (SOFTMAX, edit_the_hidden_inputs, "调用了 gc.get_objects"),  # fix
    (SOFTMAX, patch_array_compare, "Array._compare"),  # fix 45.7
    (SOFTMAX, patch_spec_compare, "Spec.compare"),  # fix
    (SOFTMAX, patch_compare_code, "__code__"),  # fix
    (SOFTMAX, patch_torch_softmax, "torch.softmax"),  # fix
    (SDPA, patch_tensor_method, "Tensor.softmax"),  # fix
    (SOFTMAX, delete_torch_function, "torch.softmax"),  # fix
    (SOFTMAX, patch_the_reference, "Exercise.reference"),  # fix
    (SOFTMAX, patch_the_dtype, "Array.dtype"),  # fix
    (SOFTMAX, patch_isinstance, "builtins.isinstance"),  # fix
    (SOFTMAX, patch_numpy, "numpy.isfinite"),  # fix
    (SOFTMAX, patch_plain, "guard.plain"),  # new code, guarded
    (SOFTMAX, replace_stdout, "sys.stdout"),  # fix (the feedback vanished)
    (SDPA, setprofile_none, "sys.setprofile"),  # fix 45.7
    (SDPA, setprofile_and_restore, "调用了 sys.getprofile"),  # fix 45.7
    (SDPA, profile_off_by_ctypes, "调用了 torch.nn.functional.scaled_dot"),  # fix (torch mode)
    (SDPA, forbidden_in_a_thread, "torch.nn.functional.scaled_dot_product_attention"),  # fix
    (SDPA, forbidden_in_a_pool, "torch.nn.functional.scaled_dot_product_attention"),  # fix
    (SDPA, forbidden_in_a_raw_thread, "_thread.start_new_thread"),  # fix
    (SDPA, threading_setprofile_off, "threading.setprofile"),  # fix
    (SDPA, forbidden_in_a_child_process, "子进程"),  # fix
    (SDPA, forbidden_after_fork, "os.fork"),  # fix
    (SDPA, interrupts_itself, "os.kill"),  # fix 45.12 (no feedback before)
    (SDPA, terminates_itself, "调用了 signal.raise_signal"),  # fix 45.12 (now never sent)
    (SDPA, kills_itself, "调用了 os.kill"),  # fix 45.12 (guessed os._exit; now never sent)
    (SDPA, attention_by_backend_table, "lecturekit.scaled_dot_product_attention"),  # fix
    (SDPA, attention_through_chapter_reference, "reference_scaled_dot_product"),  # fix
    (SDPA, F.scaled_dot_product_attention, "调用了 torch.nn.functional.scaled_dot"),  # fix 45.9
    (MHA, mha_by_backend_table, "lecturekit.scaled_dot_product_attention"),  # fix
    (MHA, mha_calls_the_reference, "reference_multi_head"),  # fix 45.6
    (MHA, mha_by_chapter_attention, "reference_scaled_dot_product"),  # fix 45.6
    (MHA, mha_fast_path, "_native_multi_head_attention"),  # fix 45.6
    (MHA, mha_module_in_eval_mode, "multi_head_attention"),  # fix 45.6 (2 heads passed)
    (LAYER, layer_calls_the_reference, "reference_encoder_layer"),
    (LAYER, layer_edits_its_weights, "修改了输入参数 weights"),
    (LAYER, layer_replaces_the_training, "ch03_layer.train_reversal"),
    (BUG, _AlwaysEqualName(_WRONG_BUG), "藏着的不是"),  # fix 45.3
    (BUG, _AlwaysEqualName("no_such_bug"), "不是已知的 bug 名字"),  # fix 45.3
    (BUG, "x" * 10_000_000, "共 10000000 个字符"),  # fix 45.8
    (SOFTMAX, lambda s, t: torch.zeros_like(s).as_subclass(_LyingTensor), "数值不对"),  # fix
    (SOFTMAX, lambda s, t: torch.zeros_like(s).as_subclass(_PretendsEverything), "数值不对"),
    (SOFTMAX, lambda s, t: _ClaimsToBeATensor(), "_ClaimsToBeATensor"),
    (SOFTMAX, lambda s, t: np.zeros(s.shape, np.float32).view(_LyingArray), "ndarray"),  # fix
    (NOAM, lambda *a: _LyingFloat(0.5), "期望"),  # fix (float() of a subclass)
    (PARAMS, lambda *a: _LyingInt(7), "期望"),
    (SHAPES, _LyingTuple(((1, 1), (1, 1))), "得到 ((1, 1), (1, 1))"),  # fix (its __iter__ was read)
    (NOAM, lambda *a: _LoopingFloat(), "读取你返回的结果"),  # fix 45.12
    (SOFTMAX, lambda *a: _LoopingRepr(), "读取你返回的结果"),  # fix 45.12
    (SOFTMAX, _raises(_LoopingMessage()), "显示你的函数抛出的异常"),  # fix 45.12
    (SOFTMAX, _raises(RuntimeError("长" * 5_000_000)), "已截断"),  # fix 45.8
    (SOFTMAX, print_a_lot, "输出太长"),  # fix 45.8
    (SOFTMAX, print_forever, "输出太长"),  # fix 45.8
    (SDPA, lambda q, k, v: (attention(q, k, v), None), "你返回的是一个 tuple（2 个元素）"),  # fix
    (SOFTMAX, lambda s, t: (x for x in s), "generator"),
    (SOFTMAX, lambda s, t: torch.empty_like(s, device="meta"), "meta"),  # fix (raw error)
    (SOFTMAX, lambda s, t: softmax(s, t).to_sparse(), "布局"),  # fix (raw error)
    (SOFTMAX, _fake_big, "形状不对"),
    (SOFTMAX, lambda s, t: softmax(s, t).to(torch.complex64), "complex64"),
    (SOFTMAX, lambda s, t: softmax(s, t).double(), "dtype 不对"),
    (SOFTMAX, _raises(KeyboardInterrupt()), "KeyboardInterrupt"),
    (SOFTMAX, _raises(GeneratorExit()), "GeneratorExit"),
    (SOFTMAX, _raises(_Custom("自定义")), "_Custom: 自定义"),
    (SOFTMAX, _raises(running.TimeLimitExceeded()), "TimeLimitExceeded"),
    (SOFTMAX, recurse, "RecursionError"),
    (SOFTMAX, lambda s, t: torch.empty(10**13), "出错"),
]


def _name(answer) -> str:
    return getattr(answer, "__name__", type(answer).__name__)


@needs_fork
@pytest.mark.parametrize(
    ("exercise_id", "answer", "fragment"),
    [pytest.param(*entry, id=f"{i:02d}-{_name(entry[1])}") for i, entry in enumerate(HOSTILE)],
)
def test_a_hostile_answer_is_refused_clearly(exercise_id, answer, fragment, capfd) -> None:
    before = {name: vars(module).copy() for name, module in [("torch", torch), ("specs", specs)]}
    start = time.monotonic()
    result = check(exercise_id, answer, time_limit=LIMIT)
    seconds = time.monotonic() - start
    out = capfd.readouterr().out
    assert result is False, out[:2000]
    assert seconds < 2 * LIMIT + 2 + 10, seconds  # the step limit, plus the worker's start
    assert "❌" in out and fragment in out, out[:3000]
    assert "Traceback" not in out and len(out) < 60_000, out[:3000]
    assert {name: vars(m) for name, m in [("torch", torch), ("specs", specs)]} == before
    assert check(SOFTMAX, softmax) is True  # this process still checks


def test_there_are_at_least_40_hostile_answers() -> None:
    assert len(HOSTILE) >= 40


LAYERNORM = "encoder.layernorm"


def _reference(exercise_id: str):
    return get_exercise(exercise_id).reference


class _LoopingNumber:
    """Loops when turned into a number or compared: what a careless __float__ does."""

    def __float__(self) -> float:
        while True:
            pass

    __int__ = __index__ = __float__

    def __eq__(self, other: object) -> bool:
        while True:
            pass

    __hash__ = object.__hash__


class _BrokenMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot show myself")


def _timed_check(exercise_id: str, answer, time_limit: float = 0.5):
    start = time.monotonic()
    result = check(exercise_id, answer, time_limit=time_limit)
    return result, time.monotonic() - start


@needs_fork
@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [
        (LAYERNORM, lambda *args, **kwargs: _LoopingRepr()),  # formatting the wrong type
        ("training.noam_lr", lambda *args, **kwargs: _LoopingNumber()),  # its __float__
        ("decoder.attention_shapes", ((_LoopingNumber(), 8), (8, 50))),  # an item's
    ],
    ids=["repr", "float", "item"],
)
def test_a_result_that_loops_when_compared_or_shown_meets_the_time_limit(
    exercise_id, answer, capsys
) -> None:
    result, seconds = _timed_check(exercise_id, answer)
    assert result is False
    assert seconds < 2 * 0.5 + 2 + 5  # the step limit, plus starting and ending the worker
    out = capsys.readouterr().out
    assert "超过 3 秒还没有结束" in out
    # issue 45.12: what did not finish, observed, not guessed
    assert "读取你" in out and "死循环" not in out, out


@needs_fork
def test_an_exception_whose_message_loops_meets_the_time_limit(capsys) -> None:
    def answer(*args, **kwargs):
        raise _LoopingMessage

    result, seconds = _timed_check(LAYERNORM, answer)
    assert result is False and seconds < 8
    out = capsys.readouterr().out
    assert "检查已停止" in out and "显示你的函数抛出的异常（它的消息）超过" in out, out


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-process"])
def test_an_exception_whose_message_raises_is_reported(fork, monkeypatch, capsys) -> None:
    if fork and not running.can_fork():
        pytest.skip("needs a forked worker (Linux)")
    monkeypatch.setattr(running, "can_fork", lambda: fork)

    def answer(*args, **kwargs):
        raise _BrokenMessage

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "_BrokenMessage" in out and "__str__ 出错" in out


@needs_fork
def test_os_exit_in_an_answer_ends_the_worker_not_this_process(capsys) -> None:
    assert check(LAYERNORM, lambda *args, **kwargs: os._exit(3)) is False
    out = capsys.readouterr().out
    assert "以退出码 3 退出了" in out and "调用你的函数时" in out
    # still alive, and the next check works
    assert check(LAYERNORM, _reference(LAYERNORM)) is True


@pytest.mark.parametrize("limit", [float("inf"), float("nan"), 1e300, 0, -1.0])
def test_an_impossible_time_limit_is_refused_clearly(limit) -> None:
    with pytest.raises(ValueError, match="time_limit must be"):
        check(LAYERNORM, _reference(LAYERNORM), time_limit=limit)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w, b, eps: torch.native_layer_norm(x, x.shape[-1:], w, b, eps)[0],
        lambda x, w, b, eps: torch.ops.aten.native_layer_norm(x, x.shape[-1:], w, b, eps)[0],
        lambda x, w, b, eps: torch.ops.aten.layer_norm.default(x, x.shape[-1:], w, b, eps),
    ],
    ids=["torch.native", "aten.native", "aten.default"],
)
def test_torch_twins_of_a_forbidden_function_are_forbidden(call, capsys) -> None:
    names = list(get_exercise(LAYERNORM).forbidden)
    assert "torch.nn.functional.layer_norm" in names

    def answer(x, eps=1e-5):
        return call(x, None, None, eps)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "这道题不允许用它" in out and ("native_layer_norm" in out or "layer_norm" in out)


@needs_fork
def test_a_check_after_torch_used_its_thread_pool_does_not_deadlock() -> None:
    """GNU OpenMP's pool does not survive a fork: the worker must run on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(600, 600)
        (x @ x).sum()  # the parent's OpenMP pool is now started
        torch.softmax(torch.randn(1000, 1000), dim=-1).sum()

        def answer(x, eps=1e-5):
            big = torch.randn(600, 600)
            (big @ big).sum()  # a parallel region in the worker
            mean = x.mean(dim=-1, keepdim=True)
            return (x - mean) / torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps)

        result, seconds = _timed_check(LAYERNORM, answer, time_limit=10)
        assert result is True and seconds < 20
    finally:
        torch.set_num_threads(threads)


def test_in_ipython_the_verdict_is_not_echoed(monkeypatch, capsys) -> None:
    from IPython.core.formatters import DisplayFormatter

    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: object()  # as inside a notebook's kernel
    monkeypatch.setitem(sys.modules, "IPython", fake)
    failed = check(LAYERNORM, lambda *args, **kwargs: None)
    passed = check(LAYERNORM, _reference(LAYERNORM))
    capsys.readouterr()
    assert isinstance(failed, Verdict) and isinstance(passed, Verdict)
    assert not failed and passed and failed == False and passed == True  # noqa: E712
    assert repr(failed) == "False" and repr(passed) == "True"
    monkeypatch.delitem(sys.modules, "IPython")
    # what IPython's display hook computes for a cell's value: nothing to show
    assert DisplayFormatter().format(failed) == ({}, {})
    assert DisplayFormatter().format(False) != ({}, {})
    # outside IPython, the plain bool
    assert check(LAYERNORM, _reference(LAYERNORM)) is True


def test_the_in_process_fallback_still_checks(monkeypatch, capsys) -> None:
    monkeypatch.setattr(running, "can_fork", lambda: False)
    assert check(LAYERNORM, _reference(LAYERNORM)) is True
    assert check(LAYERNORM, lambda *args, **kwargs: sys.exit(1)) is False
    assert "sys.exit()" in capsys.readouterr().out


def test_an_exercise_id_that_is_not_a_str_is_named() -> None:
    with pytest.raises(TypeError, match="exercise_id"):
        check(["encoder.layernorm"], lambda x: x)


def _layernorm(x, eps=1e-5):  # a right answer, written by hand
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps)


def _stolen_expected():
    """A tensor called ``expected`` in any frame of any thread of this process."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if isinstance(frame.f_locals.get("expected"), torch.Tensor):
                return frame.f_locals["expected"]
            frame = frame.f_back
    return None


def test_the_expected_result_does_not_exist_while_the_answer_runs(capsys) -> None:
    """Issue 45.5: the expectation used to be computed first, and readable from the frames.
    Reading other threads' frames is now refused as well; with that refusal lifted, there is
    still nothing to find."""
    seen = []

    def answer(x, eps=1e-5):
        found = _stolen_expected()
        seen.append(found is not None)
        return found.clone() if found is not None else torch.zeros_like(x)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(running, "can_fork", lambda: False)  # in this process, to read ``seen``
    monkey.delitem(watch.ESCAPES, "sys._current_frames")
    try:
        assert check(LAYERNORM, answer) is False
    finally:
        monkey.undo()
    assert seen == [False] and "数值不对" in capsys.readouterr().out
    assert check(LAYERNORM, answer) is False  # and looking is refused
    assert seen == [False] and "调用了 sys._current_frames" in capsys.readouterr().out


def test_switching_the_watch_off_is_refused(capsys) -> None:
    """Issue 45.7: ``sys.setprofile(None)`` used to switch the forbidden-call watch off."""

    def answer(x, eps=1e-5):
        sys.setprofile(None)
        return F.layer_norm(x, x.shape[-1:], eps=eps)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "调用了 sys.setprofile" in out and "监视" in out, out


def test_a_forbidden_call_in_a_thread_the_answer_starts_is_caught(capsys) -> None:
    def answer(x, eps=1e-5):
        box = []
        thread = threading.Thread(target=lambda: box.append(F.layer_norm(x, x.shape[-1:])))
        thread.start()
        thread.join()
        return box[0]

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "调用了 torch.nn.functional.layer_norm" in out and "不允许" in out, out


def test_patching_the_checkers_comparison_is_refused_and_undone(monkeypatch, capsys) -> None:
    monkeypatch.setattr(running, "can_fork", lambda: False)  # the patch lands in this process
    compare = specs.Array._compare
    monkeypatch.setattr(specs.Array, "_compare", compare)  # undone after the test, whatever

    def answer(x, eps=1e-5):
        specs.Array._compare = lambda self, expected, got, where: None
        return torch.zeros_like(x)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "Array._compare" in out and "已恢复原样" in out, out
    assert specs.Array._compare is compare


@needs_fork
def test_what_the_answer_prints_is_cut(capfd) -> None:
    """Issue 45.8: an answer that printed 10 MB sent all of it into the notebook."""

    def answer(x, eps=1e-5):
        print("x" * 10_000_000)
        return _layernorm(x, eps)

    assert check(LAYERNORM, answer) is True  # printing is allowed, and the check goes on
    out = capfd.readouterr().out
    assert len(out) < running.OUTPUT_LIMIT + 1000 and "输出太长" in out and "✅" in out


def test_a_huge_exception_message_is_cut(capsys) -> None:
    def answer(x, eps=1e-5):
        raise ValueError("长" * 1_000_000)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert len(out) < 5000 and "已截断：共 1000000 个字符" in out


@needs_fork
def test_an_answer_that_signals_itself_is_named(capsys) -> None:
    """Issue 45.12: SIGINT sent by the answer itself used to leave no feedback."""

    def answer(x, eps=1e-5):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        return _layernorm(x, eps)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "调用了 os.kill" in out and "信号" in out, out
    assert check(LAYERNORM, _layernorm) is True
