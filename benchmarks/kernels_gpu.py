"""GPU benchmark of lecturekit's Triton kernels: correctness at real sizes, then speed.

Usage, from the repository root (``bash benchmarks/gpu_check.sh`` runs the kernel tests and
then this script, and saves both outputs):

    python benchmarks/kernels_gpu.py             # CUDA GPU: est. 1-2 min (H200), 3-4 min (T4)
    python benchmarks/kernels_gpu.py --dry-run   # CPU, Triton interpreter: tiny sizes, seconds

The dry run, chosen also when ``TRITON_INTERPRET=1`` or when no CUDA GPU is present, runs every
code path of this script once on tiny sizes through Triton's interpreter, so that the script
itself is tested on machines without a GPU. Its times say nothing about a GPU, so it prints no
speed ``RESULT`` lines.

Each device is measured in the 16-bit dtype it is built for: bf16 from sm80 (A100, H100/H200)
on, fp16 before (Colab's T4 is sm75: no bf16 tensor cores, and no flash backend in SDPA).

1. Correctness of FlashAttention forward and backward at sequence lengths n = 1k and 4k, head
   dims 64 and 128, causal or not, with key padding, in fp16 and (where supported) bf16. The
   rule of Dao-AILab/flash-attention's tests: the kernel's max error against a float64
   reference computed from the same inputs is at most 2x (+ 1e-5) the error of a *plain*
   PyTorch implementation, ``softmax(Q K^T * scale + mask) V`` written out, run in the same
   16-bit dtype. The plain version measures what the dtype costs anyway; SDPA's fused kernels
   keep more in fp32 than that, so comparing against them reports false failures.
2. FlashAttention TFLOP/s, forward and forward+backward, against
   ``torch.nn.functional.scaled_dot_product_attention`` restricted to the best backend that
   runs here (flash, else memory-efficient, else math; probed, printed in the table), head dims
   64 and 128, n = 1k to 16k (8k before sm80), causal and not. FLOPs = 4 * B * h * n^2 * d_k,
   halved when causal, x3.5 for forward+backward: the convention of Dao-AILab/flash-attention's
   benchmarks/benchmark_flash_attention.py, which counts FlashAttention-2's backward (recompute
   S = QK^T, then four more matrix products: five against the forward's two, 2.5x; 3.5x in
   all). lecturekit's backward runs two kernels that each recompute S and dP (seven products,
   4.5x in all), so its TFLOP/s is "effective" under that convention, as fair to SDPA as the
   FlashAttention project's own numbers. Batch * sequence = 16k tokens, h * d_k = 2048.
3. Softmax and LayerNorm forward bandwidth (GB/s) against torch and against a measured
   device-to-device copy of the same bytes, with the same correctness rule.

Every time is the median of at least ``MIN_RUNS`` timed runs (``triton.testing.do_bench``,
which flushes the L2 cache before each run). Prints markdown tables for
benchmarks/RESULTS.md, headed by the hardware and in the book's symbols (sequence length n,
h heads, head dim d_k), and ``RESULT <name> <value>`` lines last.
Goals: attention >= 0.8x SDPA's best backend; softmax and LayerNorm >= 85% of copy.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

if __name__ == "__main__" and ("--dry-run" in sys.argv[1:] or not torch.cuda.is_available()):
    # Triton chooses between compiling and interpreting when a kernel is defined, i.e. when
    # lecturekit.kernels is imported below, so the switch must be set before that import.
    os.environ["TRITON_INTERPRET"] = "1"

import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from lecturekit.kernels.flash_attention import attention_reference, flash_attention  # noqa: E402
from lecturekit.kernels.fused_softmax import softmax, softmax_reference  # noqa: E402
from lecturekit.kernels.layernorm import layer_norm, layer_norm_reference  # noqa: E402

FP16, BF16 = torch.float16, torch.bfloat16
ATOL = 1e-5  # the "+ 1e-5" of the error rule: room for exact zeros in the plain error
SDPA_PREFERENCE = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)
MIN_RUNS = 30  # timed runs behind every reported median, however long one run takes
WARMUP_MS, REP_MS = 25.0, 100.0  # do_bench's durations (ms) for calls shorter than ~2 ms


@dataclass(frozen=True)
class Grid:
    """The sizes of one run: a GPU's, or the dry run's tiny ones."""

    check_lengths: tuple[int, ...]  # sequence lengths n of the correctness table
    head_dims: tuple[int, ...]
    bench_lengths: tuple[int, ...]  # sequence lengths n of the TFLOP/s table
    tokens: int  # batch * n in the TFLOP/s table
    width: int  # h * d_k in the TFLOP/s table
    row_lengths: tuple[int, ...]  # softmax / LayerNorm rows
    elements: int  # rows * row length in the bandwidth table


GPU_GRID = Grid(
    check_lengths=(1024, 4096),
    head_dims=(64, 128),
    bench_lengths=(1024, 2048, 4096, 8192, 16384),
    tokens=16384,
    width=2048,
    row_lengths=(512, 1024, 2048, 4096, 8192),
    elements=32 * 2**20,
)
# Before sm80 (T4: ~65 fp16 tensor TFLOP/s against ~990 bf16 on an H100) one forward+backward
# at n = 16k should take about a second, and MIN_RUNS of them for both implementations would
# use up gpu_check.sh's time budget; stopping at n = 8k keeps a T4 run to an estimated 3-4 min.
SMALL_GPU_GRID = replace(GPU_GRID, bench_lengths=GPU_GRID.bench_lengths[:-1])
# The error rule compares maxima, which need enough elements to be stable: at n = 97 (an odd
# size, as in tests/kernels) it held for ten seeds; at n = 40 a lucky plain-PyTorch maximum
# failed one tensor in forty.
DRY_RUN_GRID = Grid(
    check_lengths=(97,),
    head_dims=(16, 32),
    bench_lengths=(32, 64),
    tokens=64,
    width=64,
    row_lengths=(16, 64),
    elements=1024,
)


@dataclass
class Run:
    """Where and how this run measures: device, dtypes, sizes, and the timer's bookkeeping."""

    device: torch.device
    dtype: torch.dtype  # of the speed tables
    check_dtypes: tuple[torch.dtype, ...]  # of the correctness table
    grid: Grid
    fewest_runs: int = field(default=sys.maxsize)  # timed runs behind the thinnest median

    @property
    def dry_run(self) -> bool:
        return self.device.type != "cuda"

    @property
    def timing(self) -> str:
        return "dry run: times not meaningful" if self.dry_run else f"median of >= {MIN_RUNS} runs"

    def time_ms(self, fn: Callable[[], object]) -> float:
        """Median time of ``fn()`` in milliseconds (on the CPU: a few runs, not meaningful)."""
        times = _gpu_times_ms(fn) if not self.dry_run else _cpu_times_ms(fn)
        self.fewest_runs = min(self.fewest_runs, len(times))
        return statistics.median(times)


def _gpu_times_ms(fn: Callable[[], object]) -> list[float]:
    """At least MIN_RUNS timings of ``fn()`` in ms, each after an L2 flush.

    ``do_bench``'s ``warmup`` and ``rep`` are durations in ms, not counts: it estimates one
    call from five, then runs ``rep / estimate`` calls, so a 200 ms call given ``rep=40`` is
    timed once; and it returns the mean unless asked otherwise. One call timed here sizes both
    durations so that long calls get MIN_RUNS runs (short ones get more, filling REP_MS); the
    estimate includes the L2 flush, so if too few runs came back, time again for longer.
    """
    fn()  # compile and allocate outside the timing
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once_ms = (time.perf_counter() - start) * 1e3
    warmup, rep = max(WARMUP_MS, 3 * once_ms), max(REP_MS, 1.2 * MIN_RUNS * once_ms)
    times = triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="all")
    while len(times) < MIN_RUNS:
        rep *= 1.5 * MIN_RUNS / len(times)
        times = triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="all")
    return times


def _cpu_times_ms(fn: Callable[[], object]) -> list[float]:
    """Three wall-clock timings (the dry run's: exercises the tables, measures nothing)."""
    fn()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def make_run(grid: Grid | None = None) -> Run:
    """The dry run under the interpreter; otherwise the device's best 16-bit dtype and grid."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        # the interpreter computes bf16 wrongly (tests/kernels skip it there): fp16 only
        return Run(torch.device("cpu"), FP16, (FP16,), grid or DRY_RUN_GRID)
    device = torch.device("cuda")
    ampere = torch.cuda.get_device_capability(device) >= (8, 0)
    if ampere and torch.cuda.is_bf16_supported():
        return Run(device, BF16, (FP16, BF16), grid or GPU_GRID)
    return Run(device, FP16, (FP16,), grid or (GPU_GRID if ampere else SMALL_GPU_GRID))


def nvidia_driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.split("\n")[0].strip() or "unknown"


def hardware_line(run: Run) -> str:
    versions = f"torch {torch.__version__}, triton {triton.__version__}"
    if run.dry_run:
        return (
            f"CPU ({platform.machine()}, {os.cpu_count()} cores), Triton interpreter: DRY RUN, "
            f"tiny sizes, times not meaningful; {versions}"
        )
    p = torch.cuda.get_device_properties(run.device)
    return (
        f"{p.name}, compute capability {p.major}.{p.minor}, {p.total_memory / 2**30:.0f} GiB, "
        f"{p.multi_processor_count} SMs; driver {nvidia_driver()}, CUDA {torch.version.cuda}; "
        f"{versions}; benchmark dtype {dtype_name(run.dtype)}"
    )


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float", "fp")


def max_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    if torch.isnan(a).any():
        return math.inf
    return (a.double() - ref.double()).abs().max().item()


def within_bound(got: torch.Tensor, plain: torch.Tensor, ref: torch.Tensor) -> tuple[float, ...]:
    """(kernel error, plain PyTorch error, bound): flash-attention's rule, errors vs ``ref``."""
    err, plain_err = max_err(got, ref), max_err(plain, ref)
    return err, plain_err, 2 * plain_err + ATOL


def sdpa_backend(
    run: Run, head_dim: int, preference: tuple[SDPBackend, ...] = SDPA_PREFERENCE
) -> SDPBackend:
    """The first SDPA backend in ``preference`` that runs forward and backward here.

    Which backends run depends on the GPU (flash needs sm80+), dtype and head dim; one that
    cannot run warns why and raises RuntimeError, so each is tried on a small causal case.
    """
    q = torch.randn(1, 2, 128, head_dim, device=run.device, dtype=run.dtype, requires_grad=True)
    for backend in preference:
        with warnings.catch_warnings(record=True) as why:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
                return backend
            except RuntimeError as err:
                reason = " ".join(str(w.message) for w in why) or str(err)
        print(f"SDPA backend {backend.name} does not run here: {' '.join(reason.split())}")
    raise RuntimeError(f"no SDPA backend of {[b.name for b in preference]} runs here")


def attention_case(
    run: Run, dtype: torch.dtype, n: int, d: int, causal: bool
) -> list[tuple[str, tuple[float, ...]]]:
    """Errors of out, dq, dk, dv for one size: kernel and plain PyTorch vs float64."""
    torch.manual_seed(0)
    b, h = 2, 4
    q, k, v, d_out = (torch.randn(b, h, n, d, device=run.device, dtype=dtype) for _ in range(4))
    kpm = torch.zeros(b, n, dtype=torch.bool, device=run.device)
    kpm[1, n - n // 4 :] = True  # the second sequence is padded by a quarter

    def grads(fn: Callable[..., torch.Tensor], to: torch.dtype) -> list[torch.Tensor]:
        leaves = [t.to(to, copy=True).requires_grad_() for t in (q, k, v)]
        out = fn(*leaves, key_padding_mask=kpm, is_causal=causal)
        out.backward(d_out.to(to))
        return [out.detach()] + [t.grad for t in leaves]

    ref = grads(attention_reference, torch.float64)  # the same inputs, computed in float64
    plain = grads(attention_reference, dtype)  # plain PyTorch, rounding in the 16-bit dtype
    ours = grads(flash_attention, dtype)
    names = ("out", "dq", "dk", "dv")
    return [(name, within_bound(*t)) for name, *t in zip(names, ours, plain, ref, strict=True)]


def check_attention(run: Run) -> list[str]:
    """Correctness table of FlashAttention; returns failure messages."""
    print(f"## FlashAttention correctness: error vs float64, bound = 2 x plain PyTorch + {ATOL}\n")
    print("| dtype | n | d_k | causal | tensor | kernel error | plain PyTorch error | bound | ok |")
    print("|---|---|---|---|---|---|---|---|---|")
    failures = []
    for dtype in run.check_dtypes:
        for n in run.grid.check_lengths:
            for d in run.grid.head_dims:
                for causal in (False, True):
                    for name, (err, plain_err, bound) in attention_case(run, dtype, n, d, causal):
                        ok = err <= bound
                        print(
                            f"| {dtype_name(dtype)} | {n} | {d} | {causal} | {name} | {err:.2e} "
                            f"| {plain_err:.2e} | {bound:.2e} | {ok} |"
                        )
                        if not ok:
                            failures.append(f"{dtype_name(dtype)} n={n} d_k={d} {causal=} {name}")
    print()
    return failures


def forward_only(fn: Callable[[], torch.Tensor]) -> Callable[[], object]:
    def timed() -> object:
        with torch.no_grad():
            return fn()

    return timed


def forward_backward(
    fn: Callable[[], torch.Tensor], inputs: tuple[torch.Tensor, ...], d_out: torch.Tensor
) -> Callable[[], object]:
    return lambda: torch.autograd.grad(fn(), inputs, d_out)


def bench_attention(run: Run) -> tuple[float, float]:
    """TFLOP/s table; returns the worst forward and forward+backward ratios vs SDPA."""
    g = run.grid
    backends = {d: sdpa_backend(run, d) for d in g.head_dims}  # its messages before the table
    print(
        f"## FlashAttention, {dtype_name(run.dtype)}, TFLOP/s (batch x n = {g.tokens} tokens, "
        f"h x d_k = {g.width}; {run.timing})\n"
    )
    print("| d_k | causal | n | SDPA backend | fwd ours | fwd SDPA | ratio "
          "| fwd+bwd ours | fwd+bwd SDPA | ratio |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst_fwd, worst_bwd = math.inf, math.inf
    for d, backend in backends.items():
        for causal in (False, True):
            for n in g.bench_lengths:
                b, h = g.tokens // n, g.width // d
                shape = (b, h, n, d)
                q, k, v = (
                    torch.randn(shape, device=run.device, dtype=run.dtype, requires_grad=True)
                    for _ in range(3)
                )
                d_out = torch.randn_like(q)
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)

                def ours(q=q, k=k, v=v, c=causal):
                    return flash_attention(q, k, v, is_causal=c)

                def sdpa(q=q, k=k, v=v, c=causal, backend=backend):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=c)

                calls = [forward_only(ours), forward_only(sdpa)]
                calls += [forward_backward(f, (q, k, v), d_out) for f in (ours, sdpa)]
                row = [
                    mult * flops / (run.time_ms(call) * 1e-3) / 1e12
                    for mult, call in zip((1.0, 1.0, 3.5, 3.5), calls, strict=True)
                ]
                fwd_ratio, bwd_ratio = row[0] / row[1], row[2] / row[3]
                worst_fwd, worst_bwd = min(worst_fwd, fwd_ratio), min(worst_bwd, bwd_ratio)
                print(
                    f"| {d} | {causal} | {n} | {backend.name.lower()} | {row[0]:.1f} "
                    f"| {row[1]:.1f} | {fwd_ratio:.2f} | {row[2]:.1f} | {row[3]:.1f} "
                    f"| {bwd_ratio:.2f} |"
                )
                del q, k, v, d_out
    print()
    return worst_fwd, worst_bwd


def norm_functions(
    op: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor
) -> tuple[Callable[[], torch.Tensor], ...]:
    """(kernel, torch, plain PyTorch, float64 reference) for softmax or LayerNorm of ``x``."""
    n = x.shape[-1]
    if op == "softmax":
        return (
            lambda: softmax(x),
            lambda: torch.softmax(x, -1),
            lambda: softmax_reference(x),
            lambda: softmax_reference(x.double()),
        )
    return (
        lambda: layer_norm(x, w, b),
        lambda: F.layer_norm(x, (n,), w, b),
        lambda: layer_norm_reference(x, w, b),
        lambda: layer_norm_reference(x.double(), w.double(), b.double()),
    )


def bench_bandwidth(run: Run) -> tuple[float, float, list[str]]:
    """Softmax and LayerNorm GB/s vs torch and vs copy, checked by the attention rule.

    Returns the worst fractions of copy bandwidth and the failure messages.
    """
    g = run.grid
    print(
        f"## Softmax and LayerNorm forward, {dtype_name(run.dtype)}, GB/s (rows x row length "
        f"= {g.elements} elements; {run.timing})\n"
    )
    print("| op | row length | ours | torch | copy | ours / copy | error | bound |")
    print("|---|---|---|---|---|---|---|---|")
    worst, failures = {"softmax": math.inf, "layernorm": math.inf}, []
    for op in worst:
        for n in g.row_lengths:
            x = torch.randn(g.elements // n, n, device=run.device, dtype=run.dtype)
            w, b = (torch.randn(n, device=run.device, dtype=run.dtype) for _ in range(2))
            y = torch.empty_like(x)
            moved = 2 * x.numel() * x.element_size()  # read x once, write y once
            ours_fn, torch_fn, plain_fn, ref_fn = norm_functions(op, x, w, b)
            err, _, bound = within_bound(ours_fn(), plain_fn(), ref_fn())
            if not err <= bound:
                failures.append(f"{op} row length {n}")
            gbs = [
                moved / (run.time_ms(f) * 1e-3) / 1e9
                for f in (ours_fn, torch_fn, lambda x=x, y=y: y.copy_(x))
            ]
            frac = gbs[0] / gbs[2]
            worst[op] = min(worst[op], frac)
            flag = "" if err <= bound else " (FAILS)"
            print(
                f"| {op}{flag} | {n} | {gbs[0]:.0f} | {gbs[1]:.0f} | {gbs[2]:.0f} | {frac:.2f} "
                f"| {err:.1e} | {bound:.1e} |"
            )
            del x, y
    print()
    return worst["softmax"], worst["layernorm"], failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny sizes on the CPU through Triton's interpreter (the default without a GPU)",
    )
    parser.parse_args()  # --dry-run itself took effect before triton was imported
    start = time.time()
    torch.set_float32_matmul_precision("highest")  # no TF32 anywhere near a reference
    run = make_run()
    print(f"# lecturekit kernels on {hardware_line(run)}\n")
    attention_failures = check_attention(run)
    worst_fwd, worst_bwd = bench_attention(run)
    worst_softmax, worst_ln, norm_failures = bench_bandwidth(run)
    failures = attention_failures + norm_failures
    print(
        f"total time {time.time() - start:.0f} s; fewest timed runs behind a median: "
        f"{run.fewest_runs}; correctness failures: {failures or 'none'}"
    )
    if run.dry_run:
        print("dry run: the speed RESULT lines are printed on a GPU only")
        print(f"RESULT dry_run_correctness_failures {len(failures)}")
    else:
        print(f"RESULT attention_fwd_min_ratio_vs_sdpa {worst_fwd:.3f}")
        print(f"RESULT attention_fwd_bwd_min_ratio_vs_sdpa {worst_bwd:.3f}")
        print(f"RESULT softmax_min_fraction_of_copy {worst_softmax:.3f}")
        print(f"RESULT layernorm_min_fraction_of_copy {worst_ln:.3f}")
        print(f"RESULT attention_correctness_failures {len(attention_failures)}")
        print(f"RESULT softmax_layernorm_correctness_failures {len(norm_failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
