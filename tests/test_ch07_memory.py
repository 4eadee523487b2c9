"""lecturekit.chapters.ch07_memory: the traffic of eager PyTorch expressions, counted, and the
memory-hierarchy figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from lecturekit.chapters.ch07_memory import (
    H100_SXM,
    GpuSpec,
    MemoryLevel,
    OpTraffic,
    draw_memory_hierarchy,
    eager_traffic,
)


def test_ridge_point_is_peak_flops_over_bandwidth() -> None:
    gpu = GpuSpec("toy", 100.0, 10.0, 4.0, 1024, 512, "made up")
    assert gpu.ridge_point == 25.0
    # the figures sections 7.1 and 7.2 quote: H100's ridge point is about 295 FLOP/byte
    assert round(H100_SXM.ridge_point) == 295
    assert H100_SXM.shared_memory_per_sm == 228 * 1024 < H100_SXM.registers_per_sm


def test_eager_softmax_with_scale_and_mask_is_three_kernels() -> None:
    x, mask = torch.randn(4, 8), torch.zeros(4, 8)
    calls = eager_traffic(lambda: torch.softmax(x * 0.5 + mask, -1), numel=32)
    assert calls == [OpTraffic("mul", 1, 1), OpTraffic("add", 2, 1), OpTraffic("_softmax", 1, 1)]


def test_smaller_tensors_and_scalars_are_not_counted() -> None:
    x, bias = torch.randn(4, 8), torch.randn(8)  # bias broadcasts: not an (R, N) tensor
    calls = eager_traffic(lambda: (x + bias).sum(), numel=32)
    assert [(c.op, c.reads, c.writes) for c in calls] == [("add", 1, 1), ("sum", 1, 0)]


def test_eager_traffic_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="numel"):
        eager_traffic(lambda: None, numel=0)
    with pytest.raises(TypeError, match="fn"):
        eager_traffic(torch.randn(2), numel=2)  # type: ignore[arg-type]


def test_memory_hierarchy_figure_draws_every_level_and_program() -> None:
    levels = [
        MemoryLevel("寄存器", "256 KB", "", "线程"),
        MemoryLevel("显存", "40 GB", "1.5 TB/s", "GPU"),
    ]
    fig = draw_memory_hierarchy(levels, title="t", n_sms=3, n_programs=7)
    stack, grid = fig.axes
    texts = [t.get_text() for t in stack.texts]
    assert "寄存器" in texts and "显存" in texts and "40 GB，1.5 TB/s" in texts and "GPU" in texts
    assert "256 KB" in texts  # no bandwidth published: no dangling comma
    assert len(stack.patches) == 2
    # equal bars: capacity does not grow steadily downwards (registers > shared memory)
    assert len({patch.get_width() for patch in stack.patches}) == 1
    assert len(grid.patches) == 3 + 7  # one box per SM, one per program instance
    plt.close(fig)
    with pytest.raises(ValueError, match="levels"):
        draw_memory_hierarchy([], title="t")
