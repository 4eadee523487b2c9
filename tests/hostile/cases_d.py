"""Hostile cases, part D: exercise checker, kernels fallback on CPU."""

from __future__ import annotations

import os
import sys

from hostile.cases import (
    INF,
    LN,
    NAN,
    check,
    error,
    finite,
    is_false,
    kx,
    result,
)


def _t():
    import torch

    return torch


def _lk():
    import lecturekit

    return lecturekit


# ------------------------------------------------------------------ exercise checker


class _Loop:
    def __repr__(self) -> str:
        while True:
            pass

    __str__ = __repr__

    def __float__(self) -> float:
        while True:
            pass


class _LoopMsg(Exception):
    def __str__(self) -> str:
        while True:
            pass


class _BadMsg(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def _raise(exc):
    def answer(*args, **kwargs):
        raise exc

    return answer


def _spin(*args, **kwargs):
    while True:
        pass


def _reference(eid=LN):
    return _lk().exercises.get_exercise(eid).reference


SURVIVE = {
    "check_os_exit": lambda *a, **k: os._exit(3),
    "check_sys_exit": lambda *a, **k: sys.exit(0),
    "check_keyboard_interrupt": _raise(KeyboardInterrupt()),
    "check_infinite_loop": _spin,
    "check_looping_repr": lambda *a, **k: _Loop(),
    "check_looping_exception_str": _raise(_LoopMsg()),
    "check_broken_exception_str": _raise(_BadMsg()),
    "check_recursion": lambda *a, **k: (lambda f: f(f))(lambda f: f(f)),
    "check_memory_error": _raise(MemoryError()),
    "check_returns_none": lambda *a, **k: None,
    "check_returns_nan": lambda x, *a, **k: _t().full_like(x, NAN),
    "check_edits_input": lambda x, *a, **k: x.zero_(),
    "check_wrong_dtype": lambda x, *a, **k: x.double(),
    "check_native_alias": lambda x, *a, **k: _t().native_layer_norm(
        x, x.shape[-1:], None, None, 1e-5
    )[0],
    "check_aten_alias": lambda x, *a, **k: _t().ops.aten.layer_norm(x, x.shape[-1:]),
    "check_forbidden_direct": lambda x, *a, **k: _t().nn.functional.layer_norm(x, x.shape[-1:]),
    "check_signal_kill": lambda *a, **k: os.kill(os.getpid(), 9),
    "check_not_callable": 42,
}
for case_name, answer in SURVIVE.items():
    result("exercises", case_name, lambda a=answer: check(a), is_false)
result(
    "exercises",
    "check_float_looping_item",
    lambda: check(((_Loop(), 8), (8, 50)), "decoder.attention_shapes"),
    is_false,
)
result(
    "exercises",
    "check_noam_looping_float",
    lambda: check(lambda *a, **k: _Loop(), "training.noam_lr"),
    is_false,
)
result("exercises", "check_reference_passes", lambda: check(_reference()), bool)
error(
    "exercises", "check_time_limit_inf", lambda: check(_reference(), time_limit=INF), "time_limit"
)
error(
    "exercises", "check_time_limit_nan", lambda: check(_reference(), time_limit=NAN), "time_limit"
)
error("exercises", "check_time_limit_0", lambda: check(_reference(), time_limit=0), "time_limit")
error(
    "exercises", "check_time_limit_str", lambda: check(_reference(), time_limit="1"), "time_limit"
)
error(
    "exercises",
    "check_unknown_id",
    lambda: check(_reference(), "encoder.layernrom"),
    "layernrom",
    "exercise",
)
error("exercises", "check_id_list", lambda: check(_reference(), ["encoder.layernorm"]), "exercise")
error("exercises", "hint_unknown", lambda: _lk().exercises.hint("nope"), "nope", "exercise")


def _row_sum_without_other():
    os.environ["TRITON_INTERPRET"] = "1"
    import triton
    import triton.language as tl

    @triton.jit
    def row_sum_kernel(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr):  # noqa: N803
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(X + row * stride_row + cols, mask=cols < n_cols)
        tl.store(OUT + row, tl.sum(acc, axis=0))

    return check(row_sum_kernel, "kernels.row_sum_kernel", time_limit=30.0)


result(
    "exercises",
    "check_row_sum_without_other",
    _row_sum_without_other,
    is_false,
    "triton",
    timeout=180,
)

# ------------------------------------------------------------------ kernels fallback on CPU
K = lambda: _lk().kernels  # noqa: E731
error("kernels", "layer_norm_eps_nan", lambda: K().layer_norm(kx(2, 8), None, None, eps=NAN), "eps")
error("kernels", "layer_norm_eps_0", lambda: K().layer_norm(kx(2, 8), None, None, eps=0.0), "eps")
error("kernels", "layer_norm_weight_shape", lambda: K().layer_norm(kx(2, 8), kx(4), None), "weight")
error(
    "kernels",
    "layer_norm_int_input",
    lambda: K().layer_norm(_t().ones(2, 8, dtype=_t().int64), None, None),
    "x",
    "dtype",
)
error("kernels", "layer_norm_empty", lambda: K().layer_norm(kx(2, 0), None, None), "x", "empty")
result(
    "kernels", "layer_norm_finite", lambda: K().layer_norm(kx(2, 8) * 1e30, None, None), finite, "x"
)
error("kernels", "softmax_scale_nan", lambda: K().softmax(kx(2, 5), scale=NAN), "scale")
error("kernels", "softmax_scale_inf", lambda: K().softmax(kx(2, 5), scale=INF), "scale")
error(
    "kernels",
    "softmax_mask_plus_inf",
    lambda: K().softmax(kx(2, 5), mask=_t().full((2, 5), INF)),
    "mask",
)
error(
    "kernels",
    "softmax_mask_nan",
    lambda: K().softmax(kx(2, 5), mask=_t().full((2, 5), NAN)),
    "mask",
)
error(
    "kernels",
    "softmax_mask_wrong_shape",
    lambda: K().softmax(kx(2, 5), mask=_t().zeros(3, 4, dtype=bool)),
    "mask",
)
error(
    "kernels",
    "softmax_mask_int",
    lambda: K().softmax(kx(2, 5), mask=_t().zeros(2, 5, dtype=_t().int64)),
    "mask",
)
error("kernels", "softmax_dim_5", lambda: K().softmax(kx(2, 5), dim=5), "dim")
result(
    "kernels",
    "softmax_fully_masked_zero",
    lambda: K().softmax(kx(2, 5), mask=_t().ones(2, 5, dtype=bool)),
    lambda r: bool((r == 0).all()),
    "mask",
)
result(
    "kernels",
    "softmax_minus_inf_row",
    lambda: K().softmax(_t().full((2, 5), -INF)),
    lambda r: finite(r),
    "x",
)
result(
    "kernels",
    "softmax_x_nan_propagates",
    lambda: K().softmax(kx(2, 5).index_fill(1, _t().tensor([1]), NAN)),
    lambda r: bool(r.isnan().all()),
    "x",
    "nan",
)


def _attn(q=None, **kw):
    q = kx(1, 2, 3, 4) if q is None else q
    return K().attention(q, kx(1, 2, 3, 4), kx(1, 2, 3, 4), **kw)


error("kernels", "attention_scale_nan", lambda: _attn(scale=NAN), "scale")
result(
    "kernels",
    "attention_scale_0_is_mean",
    lambda: _attn(scale=0.0),
    lambda r: bool(
        _t().allclose(r, kx(1, 2, 3, 4).mean(2, keepdim=True).expand(1, 2, 3, 4), atol=1e-6)
    ),
    "scale",
)
error("kernels", "attention_dropout_1", lambda: _attn(dropout_p=1.0), "dropout_p")
error(
    "kernels",
    "attention_mask_float",
    lambda: _attn(key_padding_mask=_t().zeros(1, 3)),
    "key_padding_mask",
)
error(
    "kernels",
    "attention_mask_shape",
    lambda: _attn(key_padding_mask=_t().zeros(2, 3, dtype=bool)),
    "key_padding_mask",
)
error("kernels", "attention_head_dim_256", lambda: _attn(q=kx(1, 2, 3, 256)), "q", "Dh", "head")
error(
    "kernels",
    "attention_3d",
    lambda: K().attention(kx(2, 3, 4), kx(2, 3, 4), kx(2, 3, 4)),
    "q",
    "4-d",
    "(B, H",
)
error(
    "kernels",
    "attention_int",
    lambda: _attn(q=_t().ones(1, 2, 3, 4, dtype=_t().int64)),
    "q",
    "dtype",
)
error("kernels", "attention_is_causal_str", lambda: _attn(is_causal="yes"), "is_causal")
result(
    "kernels",
    "attention_all_keys_masked_zero",
    lambda: _attn(key_padding_mask=_t().ones(1, 3, dtype=bool)),
    lambda r: bool((r == 0).all()),
)
error("kernels", "add_shape_mismatch", lambda: K().add(kx(4), kx(5)), "x", "y", "shape")
error("kernels", "add_list", lambda: K().add([1.0], [2.0]), "x", "Tensor")
error("kernels", "matmul_inner_mismatch", lambda: K().matmul(kx(2, 3), kx(4, 2)), "a", "b", "shape")
error("kernels", "matmul_3d", lambda: K().matmul(kx(2, 2, 2), kx(2, 2)), "a", "2-d", "2d")
result(
    "kernels",
    "matmul_empty_k",
    lambda: K().matmul(kx(2, 0), kx(0, 3)),
    lambda r: tuple(r.shape) == (2, 3) and bool((r == 0).all()),
    "a",
    "empty",
)
