"""benchmarks/kernels_gpu.py on tiny sizes: every code path of the GPU benchmark runs here.

Under the interpreter this is the benchmark's dry run (CPU, fp16); on a GPU the same tiny
grid runs compiled, with real timings, so a broken table or timer shows up before the
minutes-long measurement does.
"""

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels_gpu.py"
# the dry run's sizes, fewer of them; n = 97 stays: the error rule needs enough elements
TINY = {"head_dims": (16,), "bench_lengths": (32,), "row_lengths": (16,)}


@pytest.fixture(scope="module")
def kernels_gpu():
    spec = importlib.util.spec_from_file_location("kernels_gpu", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernels_gpu"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules["kernels_gpu"]


@pytest.fixture
def run(kernels_gpu):
    return kernels_gpu.make_run(replace(kernels_gpu.DRY_RUN_GRID, **TINY))


def test_tables_and_results(kernels_gpu, run, capsys):
    assert kernels_gpu.check_attention(run) == []
    worst_fwd, worst_bwd = kernels_gpu.bench_attention(run)
    worst_softmax, worst_ln, failures = kernels_gpu.bench_bandwidth(run)
    assert failures == []
    assert min(worst_fwd, worst_bwd, worst_softmax, worst_ln) > 0
    assert run.fewest_runs >= (3 if run.dry_run else kernels_gpu.MIN_RUNS)
    out = capsys.readouterr().out
    assert out.count("| out |") == 2 * len(run.check_dtypes)  # causal and not
    assert "| softmax | 16 |" in out and "| layernorm | 16 |" in out
    hardware = kernels_gpu.hardware_line(run)
    assert ("DRY RUN" if run.dry_run else "compute capability") in hardware


def test_dtype_follows_the_device(run):
    if run.dry_run:
        assert run.dtype == torch.float16  # the interpreter computes bf16 wrongly
    elif torch.cuda.get_device_capability() < (8, 0):
        assert run.dtype == torch.float16  # no bf16 tensor cores before sm80 (T4)
    assert run.dtype in run.check_dtypes


def test_sdpa_backend_falls_back(kernels_gpu, run, capsys):
    """A backend that cannot run here is reported and the next one is taken."""
    if run.dry_run:  # the CPU has no memory-efficient backend
        preference = (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
        assert kernels_gpu.sdpa_backend(run, 16, preference) == SDPBackend.MATH
        assert "EFFICIENT_ATTENTION does not run here" in capsys.readouterr().out
    else:  # every CUDA GPU runs the memory-efficient or the flash backend in fp16/bf16
        assert kernels_gpu.sdpa_backend(run, 64) != SDPBackend.MATH


def test_gpu_timer_gets_enough_runs(kernels_gpu, monkeypatch):
    """do_bench counts in milliseconds; the timer asks again until MIN_RUNS timings come back.

    A fake do_bench stands in for the GPU: each run costs 5 ms (its L2 flush included), so
    its first answer, for the 100 ms floor, holds only 20 timings.
    """
    calls = []

    def fake_do_bench(fn, *, warmup, rep, return_mode):
        calls.append((warmup, rep, return_mode))
        return [5.0] * int(rep / 5.0)

    monkeypatch.setattr(kernels_gpu.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(kernels_gpu.triton.testing, "do_bench", fake_do_bench)
    times = kernels_gpu._gpu_times_ms(lambda: None)
    assert len(times) >= kernels_gpu.MIN_RUNS
    assert [mode for *_, mode in calls] == ["all", "all"]
    assert calls[0][1] == kernels_gpu.REP_MS
