"""Chapter 1 (seq2seq) exercise: the Jacobian product that carries a tanh RNN's gradient back
through time (limitation 3 of the chapter)."""

from __future__ import annotations

import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array


def reference_rnn_jacobian(w_h: torch.Tensor, pre_activations: torch.Tensor) -> torch.Tensor:
    """``dh_n/dh_t = J_n ... J_{t+1}`` with ``J_s = diag(1 - tanh(a_s)^2) W_h``.

    ``w_h``: ``(d, d)``; ``pre_activations``: ``(k, d)``, row ``i`` is ``a_{t+1+i}`` (time order,
    ``k = n - t`` may be 0); returns ``(d, d)``, the identity when ``k = 0``.
    """
    jacobian = torch.eye(w_h.shape[0], dtype=w_h.dtype)  # (d, d): dh_t/dh_t
    for a in pre_activations:  # a_{t+1}, ..., a_n: each new step multiplies on the left
        jacobian = (1 - torch.tanh(a) ** 2)[:, None] * w_h @ jacobian
    return jacobian


def _jacobian_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)
    skew = torch.tensor([[0.5, 2.0], [0.0, 1.0]], dtype=torch.float64)
    steps = torch.tensor([[0.0, 3.0], [2.0, 0.0], [-1.0, 0.5]], dtype=torch.float64)
    cases = [
        Case(args=(rotation, torch.zeros(3, 2, dtype=torch.float64)), label="a 全为 0，3 步"),
        Case(args=(skew, steps), label="2 维、3 步，W_h 不对称，每一步的 a 不同"),
        Case(args=(skew, steps[:1]), label="只有 1 步：k = 1"),
        Case(args=(skew, steps[:0]), label="k = 0：t = n"),
        Case(args=(skew, 10 * steps), label="a 很大：tanh 饱和"),
    ]
    rng = random.Random(11)
    for _ in range(3):
        d, k = rng.randint(1, 6), rng.randint(0, 8)
        w = torch.randn(d, d, generator=g, dtype=torch.float64) * rng.choice([0.5, 1.0, 2.0])
        a = torch.randn(k, d, generator=g, dtype=torch.float64) * rng.choice([0.5, 2.0])
        cases.append(Case(args=(w, a), label=f"随机：d = {d}，k = {k}"))
    return cases


register(
    Exercise(
        id="seq2seq.rnn_jacobian",
        chapter=1,
        title="梯度穿过时间：雅可比矩阵的连乘",
        prompt=(
            "本章的 tanh RNN 是 h_s = tanh(a_s)，a_s = W_h h_{s-1} + W_x x_s + b。"
            "写函数 rnn_jacobian(w_h, pre_activations)，返回 h_n 对 h_t 的雅可比矩阵 "
            "∂h_n/∂h_t（第 i 行第 j 列是 h_n 的第 i 维对 h_t 的第 j 维的偏导数）。\n"
            "w_h 是 W_h，形状 (d, d)；pre_activations 的形状是 (k, d)，k = n - t，"
            "按时间顺序存放 a_{t+1}, a_{t+2}, ..., a_n（第 0 行是 a_{t+1}，最后一行是 a_n）。"
            "k 可以是 0（这时 t = n），d 可以是 1；W_h 一般不对称，各步的 a_s 也不同。"
            "输入和结果都是 float64。"
        ),
        hint=(
            "先只看一步：h_s 对 h_{s-1} 的导数是什么？tanh 的导数能用 tanh 本身写出来，"
            "它逐维作用，相当于乘上一个对角矩阵。再用链式法则把 k 步接起来，"
            "矩阵乘法不能交换：每个因子乘在哪一边，要从链式法则自己推出来。"
            "一步都没有时，h_t 对自己的导数是什么？"
        ),
        explanation=(
            "每一步 J_s = ∂h_s/∂h_{s-1} = diag(1 - tanh²(a_s)) W_h；"
            "∂h_n/∂h_t = J_n J_{n-1} ⋯ J_{t+1}，k = 0 时是单位矩阵。"
            "从单位矩阵开始，按时间顺序每读一行 a_s 就在左边乘上 J_s。"
            "每个因子的范数不超过 ‖W_h‖，所以 ‖W_h‖ < 1 时梯度随 k 指数衰减。"
        ),
        kind="function",
        returns=Array("float64", "(d, d)"),
        cases=_jacobian_cases,
        reference=reference_rnn_jacobian,
    )
)
