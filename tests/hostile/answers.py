"""Hostile and careless answers to the exercises, round 3 (issue 45): a test asset, run by
tests/test_exercises_hostile_answers.py. None of them is in the first set
(``HOSTILE`` in tests/test_exercises_hostile.py).

``ANSWERS`` lists (exercise id, answer, a fragment the feedback must contain). Each must be
refused with a clear message in Simplified Chinese, in bounded time, with the test process
alive. The kinds: patching the checker's own classes and the modules it reads its inputs
with, reaching the watch's state, forbidden attention under its backends' names, lying
subclasses, wrong types, careless edits of the inputs, results remembered across cases,
global settings, and output or exits past ``sys.stdout``.
"""

from __future__ import annotations

import builtins
import copy
import functools
import gc
import os
import pickle
import sys
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

from lecturekit.exercises import check, get_exercise, guard, running, specs, watch
from lecturekit.lab.bugs import BUGS
from lecturekit.model import layers

SOFTMAX, SDPA, MHA = (
    "setup.temperature_softmax",
    "attention.scaled_dot_product",
    "attention.multi_head",
)
NOAM, SHAPES, BUG, LAYER = (
    "training.noam_lr",
    "decoder.attention_shapes",
    "lab.find_bug_1",
    "encoder.layer",
)
_RIGHT_BUG = get_exercise(BUG).reference
_WRONG_BUG = next(name for name in sorted(BUGS) if name != _RIGHT_BUG)


def _zeros(scores, temperature):
    return torch.zeros_like(scores)


def _accept_anything():
    specs.Array._compare = lambda self, expected, got, where: None


# --- patching the checker's classes and the modules it reads its inputs with ------------


def patch_snapshot_class(scores, temperature):
    guard.Snapshot.changed = lambda self: []
    _accept_anything()
    return _zeros(scores, temperature)


def patch_snapshot_code(scores, temperature):
    guard._changed.__code__ = (lambda entries, code: []).__code__
    _accept_anything()
    return _zeros(scores, temperature)


def patch_builtin_set(scores, temperature):  # what the comparison of the snapshot uses
    builtins.set = lambda *args: frozenset()
    _accept_anything()
    return _zeros(scores, temperature)


def patch_frozen_thaw(scores, temperature):  # the reference would run on zeros
    guard.Frozen.thaw = lambda self: ((torch.zeros(4), 1.0), {})
    return _zeros(scores, temperature)


def patch_pickle_loads(scores, temperature):
    pickle.loads = lambda blob: ((torch.zeros(4), 1.0), {})
    return _zeros(scores, temperature)


def patch_deepcopy(scores, temperature):
    copy.deepcopy = lambda x, memo=None: x
    return _zeros(scores, temperature)


def patch_verdict(scores, temperature):
    running.Verdict.__bool__ = lambda self: True
    return _zeros(scores, temperature)


def patch_the_watch_method(q, k, v):
    watch.Watch._forbidden = lambda self, frame, event, arg: None  # the profile hook's
    watch.Watch.named = lambda self, function: None  # the torch function mode's
    return F.scaled_dot_product_attention(q, k, v)


def patch_the_model_class(x, padding_mask, weights, n_heads):  # the reference's layer
    layers.EncoderLayer.forward = lambda self, *args, **kwargs: torch.zeros_like(x)
    return torch.zeros_like(x)


def set_default_dtype(scores, temperature):
    torch.set_default_dtype(torch.float64)
    return torch.softmax(scores / temperature, dim=-1)


def set_recursion_limit(scores, temperature):
    sys.setrecursionlimit(60)
    return torch.softmax(scores / temperature, dim=-1)


# --- reaching the watch's own state --------------------------------------------------------


def _hook_cells(hook):
    return [cell.cell_contents for cell in hook.__closure__ or ()]


def read_the_hook(q, k, v):
    for state in _hook_cells(sys.getprofile()):
        if type(state).__name__ == "Seen":
            state.done = True
    return F.scaled_dot_product_attention(q, k, v)


def read_the_thread_hook(q, k, v):
    threading.getprofile()
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1) @ v


def switch_off_through_threading(q, k, v):  # the hook threading keeps for new threads
    for state in _hook_cells(threading._profile_hook):
        if type(state).__name__ == "Seen":
            state.done = True
    return F.scaled_dot_product_attention(q, k, v)


def empty_the_tables(q, k, v):
    for state in _hook_cells(threading._profile_hook):
        if type(state).__name__ == "Watch":
            state.codes, state.builtins = {}, {}
    return F.scaled_dot_product_attention(q, k, v)


def find_inputs_by_referrers(scores, temperature):
    for holder in gc.get_referrers(scores):
        if isinstance(holder, dict):
            holder.clear()
    return _zeros(scores, temperature)


def edit_the_main_thread(scores, temperature):
    for frame in sys._current_frames().values():
        frame.f_locals.get("snapshot")
    return _zeros(scores, temperature)


def trace_the_checker(scores, temperature):
    sys.settrace(lambda frame, event, arg: None)
    return _zeros(scores, temperature)


def trace_new_threads(scores, temperature):
    threading.settrace(lambda frame, event, arg: None)
    return _zeros(scores, temperature)


# --- forbidden attention under other names -------------------------------------------------


def aten_math_backend(q, k, v):
    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]


def torch_math_backend(q, k, v):
    return torch._scaled_dot_product_attention_math(q, k, v)[0]


def flash_backend(q, k, v):
    return torch._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]


def attention_by_getattr(q, k, v):
    return getattr(F, "scaled_" + "dot_product_attention")(q, k, v)


def mapped_in_a_thread(q, k, v):  # C calls C twice: no profile event for the forbidden call
    box = []

    def run():
        box.extend(map(functools.partial(F.scaled_dot_product_attention, q, k), [v]))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return box[0]


def attention_by_eval(q, k, v):
    return eval("F.scaled_dot_product_attention(q, k, v)")


def mha_module_in_training_mode(x, w_qkv, b_qkv, w_o, b_o, n_heads):
    layer = nn.MultiheadAttention(x.shape[-1], n_heads, batch_first=True, dropout=0.0)
    with torch.no_grad():
        layer.in_proj_weight.copy_(w_qkv)
        layer.in_proj_bias.copy_(b_qkv)
        layer.out_proj.weight.copy_(w_o)
        layer.out_proj.bias.copy_(b_o)
    return layer(x, x, x, need_weights=False)[0]


# --- lying subclasses and wrong types -----------------------------------------------------


class _LoopingReprTensor(torch.Tensor):
    def __repr__(self):
        while True:
            pass


class _LoopingTorchFunction(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        while True:
            pass


class _LyingShape(torch.Tensor):
    def __getattribute__(self, name):  # claims the right shape, the right values
        if name == "shape":
            raise RuntimeError("看不到")
        return super().__getattribute__(name)


class _LyingStr(str):
    def __str__(self):
        return _RIGHT_BUG

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class _LoopingHashStr(str):
    def __hash__(self):
        while True:
            pass


class _LoopingReprFloat(float):
    def __repr__(self):
        while True:
            pass


class _ClaimsToBeAFloat:
    __class__ = property(lambda self: float)  # isinstance(x, float) is True

    def __float__(self):
        return 0.5


def returns_itself(scores, temperature):
    return returns_itself


def remember_the_first(scores, temperature, _seen=[]):  # noqa: B006 (the cache is the point)
    if not _seen:
        _seen.append(torch.softmax(scores / temperature, dim=-1))
    return _seen[0]


def edit_in_place(scores, temperature):
    return scores.div_(temperature).softmax(dim=-1)


def a_view_of_the_input(scores, temperature):
    return scores[...]


def extra_batch_dimension(scores, temperature):
    return torch.softmax(scores / temperature, dim=-1).unsqueeze(0)


def a_nested_list(scores, temperature):
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    return nested


def a_list_that_holds_itself(scores, temperature):
    loop: list = []
    loop.append(loop)
    return loop


def a_quantized_tensor(scores, temperature):
    probabilities = torch.softmax(scores / temperature, dim=-1)
    return torch.quantize_per_tensor(probabilities, 0.01, 0, torch.quint8)


def a_huge_exception_class_name(scores, temperature):
    raise type("E" * 100_000, (Exception,), {})("出错了")


def raise_stop_iteration(scores, temperature):
    raise StopIteration


# --- output and exits past sys.stdout ------------------------------------------------------


def write_to_descriptor_1(scores, temperature):
    os.write(1, b"x" * 3_000_000)
    return _zeros(scores, temperature)


def write_to_the_original_stdout(scores, temperature):
    sys.__stdout__.write("y" * 3_000_000)
    sys.__stdout__.flush()
    return _zeros(scores, temperature)


def print_to_stderr_forever(scores, temperature):
    while True:
        print("错误" * 100, file=sys.stderr)


def fake_success(scores, temperature):
    print(f"✅ 通过！练习 {SOFTMAX} 的 9 个测试全部正确。")
    return _zeros(scores, temperature)


def check_inside_the_answer(scores, temperature):  # a nested check of a right answer
    check(SOFTMAX, lambda s, t: torch.softmax(s / t, dim=-1))
    return _zeros(scores, temperature)


def close_every_descriptor(scores, temperature):
    os.closerange(3, 4096)
    return _zeros(scores, temperature)


def exit_by_faulthandler(scores, temperature):
    import faulthandler

    faulthandler.dump_traceback_later(0.05, exit=True, file=sys.__stderr__)
    time.sleep(1.0)
    return _zeros(scores, temperature)


def sleep_in_c(scores, temperature):
    time.sleep(30)


def crash_in_c(scores, temperature):
    import ctypes

    return ctypes.string_at(0)  # reads address 0: a segmentation fault


ANSWERS = [
    (SOFTMAX, patch_snapshot_class, "Snapshot.changed"),
    (SOFTMAX, patch_snapshot_code, "_changed.__code__"),
    (SOFTMAX, patch_builtin_set, "builtins.set"),
    (SOFTMAX, patch_frozen_thaw, "Frozen.thaw"),
    (SOFTMAX, patch_pickle_loads, "pickle.loads"),
    (SOFTMAX, patch_deepcopy, "copy.deepcopy"),
    (SOFTMAX, patch_verdict, "Verdict.__bool__"),
    (SDPA, patch_the_watch_method, "Watch._forbidden"),
    (LAYER, patch_the_model_class, "EncoderLayer.forward"),
    (SOFTMAX, set_default_dtype, "改了全局设置（torch.set_default_dtype）"),
    (SOFTMAX, set_recursion_limit, "改了全局设置（sys.setrecursionlimit）"),
    (SDPA, read_the_hook, "调用了 sys.getprofile"),
    (SDPA, read_the_thread_hook, "调用了 threading.getprofile"),
    (SDPA, switch_off_through_threading, "profile 钩子已经不在了或被改动了"),
    (SDPA, empty_the_tables, "profile 钩子已经不在了或被改动了"),
    (SOFTMAX, find_inputs_by_referrers, "调用了 gc.get_referrers"),
    (SOFTMAX, edit_the_main_thread, "调用了 sys._current_frames"),
    (SOFTMAX, trace_the_checker, "调用了 sys.settrace"),
    (SOFTMAX, trace_new_threads, "调用了 threading.settrace"),
    (SDPA, aten_math_backend, "（torch.ops.aten._scaled_dot_product_attention_math）"),
    (SDPA, torch_math_backend, "（torch._scaled_dot_product_attention_math）"),
    (SDPA, flash_backend, "_scaled_dot_product_flash_attention_for_cpu"),
    (SDPA, functools.partial(F.scaled_dot_product_attention), "scaled_dot_product_attention"),
    (SDPA, mapped_in_a_thread, "调用了 torch.nn.functional.scaled_dot_product_attention"),
    (SDPA, attention_by_getattr, "调用了 torch.nn.functional.scaled_dot_product_attention"),
    (SDPA, attention_by_eval, "调用了 torch.nn.functional.scaled_dot_product_attention"),
    (MHA, mha_module_in_training_mode, "multi_head_attention_forward"),
    (SOFTMAX, lambda s, t: _zeros(s, t).as_subclass(_LoopingReprTensor), "数值不对"),
    (SOFTMAX, lambda s, t: _zeros(s, t).as_subclass(_LoopingTorchFunction), "数值不对"),
    (SOFTMAX, lambda s, t: _zeros(s, t).as_subclass(_LyingShape), "数值不对"),
    (SOFTMAX, lambda s, t: nn.Parameter(_zeros(s, t)), "数值不对"),
    (BUG, _LyingStr(_WRONG_BUG), "藏着的不是"),
    (BUG, _LoopingHashStr(_WRONG_BUG), "藏着的不是"),
    (BUG, _RIGHT_BUG.encode(), "每个名字应是 str"),
    (NOAM, lambda *a: _LoopingReprFloat(0.5), "期望"),
    (NOAM, lambda *a: _ClaimsToBeAFloat(), "期望"),
    (SHAPES, {(1, 1), (2, 2)}, "set"),
    (SOFTMAX, returns_itself, "function"),
    (SOFTMAX, lambda s, t: {"probabilities": torch.softmax(s / t, -1)}, "dict"),
    (SOFTMAX, lambda s, t: str(torch.softmax(s / t, -1)), "str"),
    (SOFTMAX, lambda s, t: torch.softmax(s / t, -1).numpy(), "你返回的是 numpy 数组"),
    (SOFTMAX, lambda s, t: torch.softmax(s / t, -1).tolist(), "你返回的是 list"),
    (SOFTMAX, a_quantized_tensor, "量化张量"),
    (SOFTMAX, remember_the_first, "没有通过"),
    (SOFTMAX, edit_in_place, "修改了输入参数 scores"),
    (SOFTMAX, a_view_of_the_input, "数值不对"),
    (SOFTMAX, extra_batch_dimension, "形状不对"),
    (SOFTMAX, lambda s, t: torch.full_like(s, float("nan")), "得到 nan"),
    (SOFTMAX, lambda s, t: torch.softmax(s / t, -1).half(), "dtype 不对"),
    (SOFTMAX, a_nested_list, "你返回的是 list"),
    (SOFTMAX, a_list_that_holds_itself, "你返回的是 list"),
    (SOFTMAX, a_huge_exception_class_name, "EEEE"),
    (SOFTMAX, raise_stop_iteration, "StopIteration"),
    (SOFTMAX, write_to_descriptor_1, "数值不对"),
    (SOFTMAX, write_to_the_original_stdout, "数值不对"),
    (SOFTMAX, print_to_stderr_forever, "输出太长"),
    (SOFTMAX, fake_success, "数值不对"),
    (SOFTMAX, check_inside_the_answer, "调用了 sys._current_frames"),  # the inner checker's
    (SOFTMAX, close_every_descriptor, "运行检查的进程以退出码"),
    (SOFTMAX, exit_by_faulthandler, "运行检查的进程以退出码"),
    (SOFTMAX, sleep_in_c, "调用你的函数运行超过 2 秒还没有返回"),
    (SOFTMAX, crash_in_c, "被信号 SIGSEGV 终止了"),
]
