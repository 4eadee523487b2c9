"""GPU benchmark of lecturekit's Triton kernels: correctness at real sizes, then speed.

Usage (on a machine with a CUDA GPU, triton installed, TRITON_INTERPRET unset):

    python benchmarks/kernels_gpu.py            # about 2-5 minutes

1. Correctness: FlashAttention forward and backward in bf16 against a float32 reference, with
   the flash-attention rule (kernel error <= 2 x the error of PyTorch's own bf16 SDPA + 1e-5),
   at sequence lengths 1k and 4k, head dims 64 and 128, causal or not, with key padding.
2. FlashAttention TFLOP/s, forward and forward+backward, against
   ``torch.nn.functional.scaled_dot_product_attention`` restricted to its flash backend; bf16,
   head dims 64 and 128, sequence 1k to 16k, causal and not. FLOPs = 4 * B * h * n^2 * d_k,
   halved when causal, x3.5 for forward+backward: the convention of Dao-AILab/flash-attention's
   benchmarks/benchmark_flash_attention.py, which counts FlashAttention-2's backward (recompute
   S = QK^T, then four more matrix products: five against the forward's two, 2.5x; 3.5x in
   all). lecturekit's backward runs two kernels that each recompute S and dP (seven products,
   4.5x in all), so its TFLOP/s is "effective" under that convention, as fair to SDPA as the
   FlashAttention project's own numbers. Batch * sequence = 16k tokens, h * d_k = 2048.
3. Softmax and LayerNorm forward bandwidth (GB/s) against torch and against a measured
   device-to-device copy of the same bytes.

Prints markdown tables (paste them into benchmarks/RESULTS.md), headed in the book's symbols
(sequence length n, h heads, head dim d_k), and ``RESULT <name> <value>`` lines last.
Goals: attention >= 0.8x SDPA flash; softmax and LayerNorm >= 85% of copy.
"""

from __future__ import annotations

import math
import os
import sys
import time


def _require_gpu() -> None:
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("kernels_gpu.py: unset TRITON_INTERPRET; the benchmark needs compiled kernels.")
    import torch

    if not torch.cuda.is_available():
        sys.exit(
            "kernels_gpu.py: no CUDA GPU here, nothing to measure. The kernels are checked on "
            "the CPU by `TRITON_INTERPRET=1 pytest tests/kernels`; run this script on a GPU."
        )
    try:
        import triton  # noqa: F401
    except ImportError:
        sys.exit("kernels_gpu.py: triton is not installed (pip install 'lecturekit[gpu]').")


_require_gpu()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from lecturekit.kernels.flash_attention import flash_attention  # noqa: E402
from lecturekit.kernels.fused_softmax import softmax  # noqa: E402
from lecturekit.kernels.layernorm import layer_norm  # noqa: E402

DEVICE = torch.device("cuda")
BF16 = torch.bfloat16
TOKENS = 16384  # batch * sequence length
WIDTH = 2048  # heads * head dim


def bench_ms(fn) -> float:
    """Median time of ``fn()`` in milliseconds (triton.testing.do_bench flushes L2 between)."""
    return triton.testing.do_bench(fn, warmup=10, rep=40)


def forward_only(fn):
    def run():
        with torch.no_grad():
            fn()

    return run


def forward_backward(fn, inputs, d_out):
    def run():
        torch.autograd.grad(fn(), inputs, d_out)

    return run


def max_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return (a.float() - ref.float()).abs().max().item()


def check_attention() -> list[str]:
    """Correctness in bf16 at real sizes; returns failure messages."""
    failures = []
    print("## Correctness (bf16, vs float32 reference; bound = 2 x SDPA-bf16 error + 1e-5)\n")
    print("| n | d_k | causal | tensor | kernel error | SDPA bf16 error | ok |")
    print("|---|---|---|---|---|---|---|")
    for n in (1024, 4096):
        for d in (64, 128):
            for causal in (False, True):
                torch.manual_seed(0)
                b, h = 2, 4
                q, k, v = (torch.randn(b, h, n, d, device=DEVICE) for _ in range(3))
                kpm = torch.zeros(b, n, dtype=torch.bool, device=DEVICE)
                kpm[1, n - n // 4 :] = True  # the second sequence is padded by a quarter
                allowed = ~kpm[:, None, None, :]
                if causal:
                    allowed = allowed & torch.ones(n, n, dtype=torch.bool, device=DEVICE).tril()
                d_out = torch.randn(b, h, n, d, device=DEVICE)

                def run(fn, dtype, q=q, k=k, v=v, d_out=d_out):
                    leaves = [t.to(dtype).clone().requires_grad_() for t in (q, k, v)]
                    out = fn(*leaves)
                    out.backward(d_out.to(dtype))
                    return [out] + [t.grad for t in leaves]

                ref = run(lambda q, k, v, m=allowed: F.scaled_dot_product_attention(
                    q, k, v, attn_mask=m), torch.float32)  # fmt: skip
                torch_bf16 = run(lambda q, k, v, m=allowed: F.scaled_dot_product_attention(
                    q, k, v, attn_mask=m), BF16)  # fmt: skip
                ours = run(lambda q, k, v, m=kpm, c=causal: flash_attention(
                    q, k, v, key_padding_mask=m, is_causal=c), BF16)  # fmt: skip
                for name, a, t, r in zip(
                    ("out", "dq", "dk", "dv"), ours, torch_bf16, ref, strict=True
                ):
                    err, terr = max_err(a, r), max_err(t, r)
                    ok = err <= 2 * terr + 1e-5 and not torch.isnan(a).any().item()
                    print(f"| {n} | {d} | {causal} | {name} | {err:.2e} | {terr:.2e} | {ok} |")
                    if not ok:
                        failures.append(f"attention N={n} D={d} causal={causal} {name}")
                del q, k, v, ref, torch_bf16, ours
    print()
    return failures


def bench_attention() -> tuple[float, float]:
    """TFLOP/s table; returns the worst forward and forward+backward ratios vs SDPA flash."""
    print("## FlashAttention, bf16, TFLOP/s (batch x n = 16k tokens, h x d_k = 2048)\n")
    print(
        "| d_k | causal | n | fwd ours | fwd SDPA-flash | ratio | fwd+bwd ours | fwd+bwd SDPA-flash | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    worst_fwd, worst_bwd = math.inf, math.inf
    for d in (64, 128):
        for causal in (False, True):
            for n in (1024, 2048, 4096, 8192, 16384):
                b, h = TOKENS // n, WIDTH // d
                q, k, v = (
                    torch.randn(b, h, n, d, device=DEVICE, dtype=BF16, requires_grad=True)
                    for _ in range(3)
                )
                d_out = torch.randn_like(q)
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)

                def ours(q=q, k=k, v=v, c=causal):
                    return flash_attention(q, k, v, is_causal=c)

                def sdpa(q=q, k=k, v=v, c=causal):
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=c)

                calls = [forward_only(ours), forward_only(sdpa)]
                calls += [forward_backward(f, (q, k, v), d_out) for f in (ours, sdpa)]
                row = [
                    mult * flops / (bench_ms(call) * 1e-3) / 1e12
                    for mult, call in zip((1.0, 1.0, 3.5, 3.5), calls, strict=True)
                ]
                fwd_ratio, bwd_ratio = row[0] / row[1], row[2] / row[3]
                worst_fwd, worst_bwd = min(worst_fwd, fwd_ratio), min(worst_bwd, bwd_ratio)
                print(
                    f"| {d} | {causal} | {n} | {row[0]:.1f} | {row[1]:.1f} | {fwd_ratio:.2f} "
                    f"| {row[2]:.1f} | {row[3]:.1f} | {bwd_ratio:.2f} |"
                )
                del q, k, v, d_out
    print()
    return worst_fwd, worst_bwd


def bench_bandwidth() -> tuple[float, float]:
    """Softmax and LayerNorm GB/s vs torch and vs copy; returns the worst fractions of copy."""
    print("## Softmax and LayerNorm forward, bf16, GB/s (rows x row length = 32M elements)\n")
    print("| op | row length | ours | torch | copy | ours / copy |")
    print("|---|---|---|---|---|---|")
    worst = {"softmax": math.inf, "layernorm": math.inf}
    for op in ("softmax", "layernorm"):
        for n in (512, 1024, 2048, 4096, 8192):
            rows = (32 * 2**20) // n
            x = torch.randn(rows, n, device=DEVICE, dtype=BF16)
            w = torch.randn(n, device=DEVICE, dtype=BF16)
            b = torch.randn(n, device=DEVICE, dtype=BF16)
            y = torch.empty_like(x)
            moved = 2 * x.numel() * x.element_size()  # read x once, write y once
            if op == "softmax":
                ours_fn, torch_fn = (lambda x=x: softmax(x)), (lambda x=x: torch.softmax(x, -1))
            else:
                ours_fn = lambda x=x, w=w, b=b: layer_norm(x, w, b)  # noqa: E731
                torch_fn = lambda x=x, w=w, b=b, n=n: F.layer_norm(x, (n,), w, b)  # noqa: E731
            copy_fn = lambda x=x, y=y: y.copy_(x)  # noqa: E731
            ok = max_err(ours_fn(), torch_fn().float()) <= (0.02 if op == "softmax" else 0.1)
            gbs = [moved / (bench_ms(f) * 1e-3) / 1e9 for f in (ours_fn, torch_fn, copy_fn)]
            frac = gbs[0] / gbs[2]
            worst[op] = min(worst[op], frac)
            flag = "" if ok else " (MISMATCH)"
            print(f"| {op}{flag} | {n} | {gbs[0]:.0f} | {gbs[1]:.0f} | {gbs[2]:.0f} | {frac:.2f} |")
            del x, y
    print()
    return worst["softmax"], worst["layernorm"]


def main() -> int:
    start = time.time()
    props = torch.cuda.get_device_properties(DEVICE)
    print(
        f"# lecturekit kernels on {props.name} ({props.total_memory / 2**30:.0f} GiB, "
        f"{props.multi_processor_count} SMs), torch {torch.__version__}, "
        f"triton {triton.__version__}, CUDA {torch.version.cuda}\n"
    )
    failures = check_attention()
    worst_fwd, worst_bwd = bench_attention()
    worst_softmax, worst_ln = bench_bandwidth()
    print(f"total time {time.time() - start:.0f} s; correctness failures: {failures or 'none'}")
    print(f"RESULT attention_fwd_min_ratio_vs_sdpa_flash {worst_fwd:.3f}")
    print(f"RESULT attention_fwd_bwd_min_ratio_vs_sdpa_flash {worst_bwd:.3f}")
    print(f"RESULT softmax_min_fraction_of_copy {worst_softmax:.3f}")
    print(f"RESULT layernorm_min_fraction_of_copy {worst_ln:.3f}")
    print(f"RESULT attention_correctness_failures {len(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
