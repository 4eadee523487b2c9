"""The attention diagnostic of :mod:`lecturekit.lab.diagnostics`: a learner's ``attend``
against a float64 reference, output, gradients and ``torch.autograd.gradcheck``.

An ``attend`` that is broken (it raises, returns ``(out, weights)`` or a wrong shape, ignores an
input, or cuts the graph) is the finding, reported as a flagged :class:`Diagnosis`, never a
torch error from inside the check.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from lecturekit.lab._verdict import Diagnosis, _diagnosis, _not_finite
from lecturekit.model import attention

__all__ = ["attention_reference_check"]

PROBE = "attention_reference_check"


def _reference_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(Q K^T / sqrt(d_k) + causal mask) V over the keys, written out in float64."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def _course_attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    backend = attention.ATTENTION_FUNCTIONS["math"]  # read at call time: a planted bug shows
    kw = dict(attn_mask=None, key_padding_mask=None, dropout_p=0.0)
    return backend(q, k, v, is_causal=True, **kw)[0]


def _broken(out: object, shape: torch.Size) -> str | None:
    """Why ``attend``'s result cannot be compared, or None."""
    if isinstance(out, tuple):
        return "attend 应只返回输出张量 (B, H, T, Dh)，不要返回 (输出, 权重)"
    if not isinstance(out, Tensor) or out.shape != shape or not out.is_floating_point():
        return "attend 的返回值不是形状为 (B, H, T, Dh) 的浮点张量"
    if not out.requires_grad:
        return "attend 的输出与 q、k、v 断开了计算图（detach 或 no_grad？），无法检查梯度"
    return None


def attention_reference_check(attend: Callable[..., Tensor] | None = None) -> Diagnosis:
    """Compare ``attend(q, k, v)`` (causal self attention, ``(B, H, T, Dh)`` each, float64)
    with a float64 reference, output and gradients; ``torch.autograd.gradcheck`` checks its
    backward pass against finite differences. ``attend=None``: the course's math backend.

    A broken ``attend`` (it raises, returns a tuple or a wrong shape, cuts the graph) is
    reported as the finding; an input it ignores gets a zero gradient, which differs from the
    reference; NaN or inf is flagged, never passed."""
    attend = _course_attend if attend is None else attend
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    q, k, v = q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    ref = _reference_attention(q, k, v)  # (B, H, T, Dh)
    try:
        out = attend(q, k, v)
    except Exception as err:  # noqa: BLE001 - the learner's code failing is the finding
        return Diagnosis(PROBE, True, f"attend 运行出错：{type(err).__name__}", math.nan)
    problem = _broken(out, ref.shape)
    if problem is not None:
        return Diagnosis(PROBE, True, problem, math.nan)
    weight = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad((out * weight).sum(), (q, k, v), allow_unused=True)
    unused = zip(grads, (q, k, v), strict=True)  # an input attend ignores has no gradient
    grads = tuple(torch.zeros_like(x) if g is None else g for g, x in unused)
    ref_grads = torch.autograd.grad((ref * weight).sum(), (q, k, v))
    error = max(
        float((a - b).detach().abs().max())
        for a, b in zip((out, *grads), (ref, *ref_grads), strict=True)
    )
    if not math.isfinite(error):
        return _not_finite(PROBE, error)
    small = [x.detach()[:1, :1, :3, :4].clone().requires_grad_() for x in (q, k, v)]
    try:
        backward_ok = torch.autograd.gradcheck(attend, tuple(small), raise_exception=False)
    except Exception:  # noqa: BLE001 - e.g. an input it ignores: gradcheck cannot run
        backward_ok = False
    return _diagnosis(
        PROBE,
        error > 1e-8 or not backward_ok,
        "与 float64 参考实现不一致",
        "输出与梯度都与 float64 参考实现一致",
        error,
    )
