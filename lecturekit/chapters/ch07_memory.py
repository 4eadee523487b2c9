"""Chapter 7: where data lives on a GPU, and how many bytes an eager PyTorch expression moves.

* ``H100_SXM`` holds the one GPU's cited figures the chapter computes with (peak FLOP/s,
  memory bandwidth, on-chip memory per SM): sections 7.1 and 7.2 both import it.
* ``draw_memory_hierarchy`` draws the levels of a GPU's memory (registers, shared memory,
  L2, HBM) as a stack of equal bars, fastest at the top, each labelled with the figures the
  caller passes (the notebook passes cited datasheet numbers), beside a sketch of a launch
  grid whose program instances run as thread blocks on the streaming multiprocessors.
* ``eager_traffic`` runs a function under a ``TorchDispatchMode`` and lists the ATen
  operators PyTorch calls, with how many tensors of a given size each reads and writes: the
  memory traffic of an unfused expression, counted instead of guessed.

Both run in milliseconds on a CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from lecturekit._common import check_int

__all__ = [
    "H100_SXM",
    "GpuSpec",
    "MemoryLevel",
    "OpTraffic",
    "draw_memory_hierarchy",
    "eager_traffic",
]


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's published peaks and on-chip memory, the numbers a roofline estimate needs.

    ``name``: the product, as the book writes it;
    ``tensor_flops``: dense bf16 tensor-core FLOP/s;
    ``fp32_flops``: float32 FLOP/s without tensor cores (a fused multiply-add counts as 2);
    ``memory_bandwidth``: device memory (HBM) bytes per second;
    ``registers_per_sm``, ``shared_memory_per_sm``: bytes of register file and the most
    shared memory one streaming multiprocessor (SM) can have (NVIDIA's "KB" is 1024 bytes);
    ``source``: where the figures are quoted from, as the book prints it (Chinese).
    """

    name: str
    tensor_flops: float
    fp32_flops: float
    memory_bandwidth: float
    registers_per_sm: int
    shared_memory_per_sm: int
    source: str

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte where the compute and bandwidth ceilings of the roofline meet
        (bf16 tensor cores): an operator of lower arithmetic intensity is memory-bound."""
        return self.tensor_flops / self.memory_bandwidth


# The GPU of chapter 7's examples. NVIDIA H100 whitepaper: bf16 dense 989 TFLOP/s (the
# datasheet's 1,979 is with structured sparsity) and, per SM, 256 KB of registers and up to
# 228 KB of shared memory; NVIDIA H100 SXM datasheet: float32 67 TFLOP/s, HBM3 3.35 TB/s.
H100_SXM = GpuSpec(
    name="H100 SXM",
    tensor_flops=989e12,
    fp32_flops=67e12,
    memory_bandwidth=3.35e12,
    registers_per_sm=256 * 1024,
    shared_memory_per_sm=228 * 1024,
    source=(
        "NVIDIA H100 白皮书（bf16 稠密算力，数据手册的 1,979 TFLOP/s 是含稀疏的值；寄存器、"
        "共享内存）；NVIDIA H100 SXM 数据手册（float32 算力、带宽）"
    ),
)


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a GPU's memory hierarchy, as the figure labels it.

    ``name``: what the level is called (Chinese, with the English term);
    ``capacity``: its size as text (e.g. ``"每个 SM 192 KB"``);
    ``bandwidth``: its bandwidth as text, ``""`` where none is published;
    ``scope``: who shares it (``"一个线程块"``, ``"整块 GPU"`` ...).
    """

    name: str
    capacity: str
    bandwidth: str
    scope: str


def draw_memory_hierarchy(
    levels: Sequence[MemoryLevel],
    *,
    title: str,
    n_sms: int = 4,
    n_programs: int = 10,
    ax_stack: Any = None,
    ax_grid: Any = None,
) -> Any:
    """Draw ``levels`` (fastest first) as a stack, and below it a launch grid mapped onto SMs.

    Top panel: one bar per level, the fastest at the top, each labelled with its name, then
    its capacity and bandwidth, then its scope (three short lines, so the figure can be
    narrow and its text stays readable on a phone). The bars are equally wide: capacity does
    not grow steadily downwards (an SM has more register file than shared memory), so the
    figure does not draw it as a pyramid. Bottom panel: ``n_programs`` program instances of
    a launch grid, dealt round-robin onto ``n_sms`` streaming multiprocessors (a sketch of
    the scheduling: the hardware decides the real order). Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    check_int("n_sms", n_sms, minimum=1)
    check_int("n_programs", n_programs, minimum=1)
    if not levels:
        raise ValueError("levels must name at least one memory level")
    if ax_stack is None or ax_grid is None:
        fig, (ax_stack, ax_grid) = plt.subplots(
            2, 1, figsize=(7, 7.6), gridspec_kw={"height_ratios": [1.7, 1]}, layout="constrained"
        )
    fig = ax_stack.figure
    n = len(levels)
    left, width = 0.1, 0.88  # equal widths: the labels, not the shape, give the capacities
    middle = left + width / 2
    for i, level in enumerate(levels):
        y = n - 1 - i
        ax_stack.add_patch(Rectangle((left, y + 0.06), width, 0.88, color=f"C{i}", alpha=0.35))
        ax_stack.text(middle, y + 0.72, level.name, ha="center", va="center", fontsize=13)
        detail = "，".join(t for t in (level.capacity, level.bandwidth) if t)
        ax_stack.text(middle, y + 0.45, detail, ha="center", va="center", fontsize=12)
        ax_stack.text(middle, y + 0.2, level.scope, ha="center", va="center", fontsize=12)
    ax_stack.annotate(
        "",
        xy=(0.02, n - 0.1),
        xytext=(0.02, 0.1),
        arrowprops={"arrowstyle": "->", "color": "gray"},
    )
    ax_stack.text(0.05, n / 2, "越往上越快、越靠近计算单元", rotation=90, va="center", fontsize=12)
    ax_stack.set_xlim(0, 1)
    ax_stack.set_ylim(0, n)
    ax_stack.axis("off")
    ax_stack.set_title(title, fontsize=13)

    for sm in range(n_sms):
        ax_grid.add_patch(Rectangle((sm * 1.1, 0), 1, 3.2, fill=False, lw=1.2))
        ax_grid.text(sm * 1.1 + 0.5, 3.35, f"SM {sm}", ha="center", fontsize=12)
    for pid in range(n_programs):
        sm, slot = pid % n_sms, pid // n_sms
        ax_grid.add_patch(
            Rectangle((sm * 1.1 + 0.1, 2.4 - slot * 0.8), 0.8, 0.6, color="C0", alpha=0.4)
        )
        ax_grid.text(
            sm * 1.1 + 0.5, 2.7 - slot * 0.8, f"pid {pid}", ha="center", va="center", fontsize=12
        )
    ax_grid.set_xlim(-0.1, n_sms * 1.1)
    ax_grid.set_ylim(-0.2, 3.8)
    ax_grid.axis("off")
    ax_grid.set_title(f"示意：{n_programs} 个程序实例（线程块）分到 {n_sms} 个 SM 上", fontsize=13)
    return fig


@dataclass(frozen=True)
class OpTraffic:
    """One ATen operator call: its name and how many tensors of the watched size it read
    (tensor arguments) and wrote (tensor results)."""

    op: str
    reads: int
    writes: int


class _Recorder(TorchDispatchMode):
    def __init__(self, numel: int) -> None:
        super().__init__()
        self.numel = numel
        self.calls: list[OpTraffic] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))

        def count(tree: Any) -> int:
            leaves = tree_leaves(tree)
            return sum(isinstance(t, torch.Tensor) and t.numel() == self.numel for t in leaves)

        name = func.overloadpacket.__name__
        self.calls.append(OpTraffic(name, count((args, kwargs or {})), count(out)))
        return out


def eager_traffic(fn: Callable[[], Any], *, numel: int) -> list[OpTraffic]:
    """The ATen operators ``fn()`` calls, with the tensors of ``numel`` elements each one
    reads and writes.

    Each operator of an eager (unfused) PyTorch expression is its own kernel on a GPU: it
    reads its tensor inputs from memory and writes its result back. Counting the tensors of
    the size of interest (e.g. ``R * N`` for a softmax over ``(R, N)``) gives the traffic in
    units of that tensor. Scalars and smaller tensors are not counted.

    Example: ``eager_traffic(lambda: torch.softmax(x * 0.5 + mask, -1), numel=x.numel())``
    lists ``mul`` (1 read, 1 write), ``add`` (2, 1) and ``_softmax`` (1, 1).
    """
    check_int("numel", numel, minimum=1)
    if not callable(fn):
        raise TypeError(f"fn must be a function of no arguments, got {type(fn).__name__}")
    recorder = _Recorder(numel)
    with recorder:
        fn()
    return recorder.calls
