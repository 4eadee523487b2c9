"""Chapter 0 (set-up) exercise: a one-line answer that teaches show / check / hint / solution,
the softmax with temperature the chapter's first widget draws."""

from __future__ import annotations

import random

import torch

from lecturekit.exercises import Case, Exercise, register
from lecturekit.exercises.specs import Array


def reference_temperature_softmax(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """``softmax(scores / temperature)`` over the last dimension: ``(..., V) -> (..., V)``."""
    return torch.softmax(scores / temperature, dim=-1)


def _temperature_cases() -> list[Case]:
    chapter = torch.tensor([2.0, 1.0, 0.5, -1.0])  # the chapter's scores for 猫, 狗, 鱼, 鸟
    g = torch.Generator().manual_seed(0)
    cases = [
        Case(args=(chapter, 1.0), label="本章的 4 个候选，τ = 1"),
        Case(args=(chapter, 0.5), label="本章的 4 个候选，τ = 0.5"),
        Case(args=(chapter, 2.0), label="本章的 4 个候选，τ = 2"),
        Case(args=(torch.randn(2, 3, 5, generator=g), 0.7), label="一批分数，形状 (2, 3, 5)"),
        Case(args=(torch.tensor([40.0, 35.0, -20.0]), 0.05), label="分数很大、温度很低"),
        Case(
            args=(torch.tensor([[40.0, 35.0, -20.0], [0.3, 0.1, -0.2]]), 0.05),
            label="两行分数，一行很大、一行很小，温度很低",
        ),
    ]
    rng = random.Random(1)
    for _ in range(3):
        shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3)))
        temperature = rng.choice([0.1, 0.3, 1.5, 5.0])
        scores = torch.randn(shape, generator=g) * 3
        cases.append(
            Case(args=(scores, temperature), label=f"随机：形状 {shape}，τ = {temperature}")
        )
    return cases


register(
    Exercise(
        id="setup.temperature_softmax",
        chapter=0,
        title="带温度的 softmax",
        prompt=(
            "写函数 temperature_softmax(scores, temperature)，返回本章公式里的概率 p："
            "先把分数 scores 除以温度 temperature，再做 softmax。\n"
            "scores 是 float32 张量，最后一维是候选（形状 (..., V)，前面可以有任意多个批维度，"
            "也可以没有）；每一行候选的概率之和是 1。temperature 是正的 Python 浮点数。"
            "分数可能很大、温度可能很小，结果仍应是有限的概率。"
        ),
        hint=(
            "温度越低，分布应当越尖：想一想分数之间的差距该被放大还是缩小。"
            "softmax 要沿候选所在的最后一维做，批维度原样保留。"
            "如果自己写指数，分数很大时会溢出：先减去每行的最大值，结果不变。"
        ),
        explanation=(
            "torch.softmax(scores / temperature, dim=-1)。除以温度就是把分数之差缩放 1/τ 倍；"
            "torch.softmax 内部先减去每行的最大值，所以分数很大时也不会溢出。"
        ),
        kind="function",
        returns=Array("float32", "与 scores 相同"),
        cases=_temperature_cases,
        reference=reference_temperature_softmax,
        forbidden=("lecturekit.book.widgets.sampling_distribution",),
    )
)
