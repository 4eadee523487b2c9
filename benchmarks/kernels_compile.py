"""Compile every Triton kernel of lecturekit for a CUDA GPU architecture, without a GPU.

Triton's interpreter (``TRITON_INTERPRET=1``, used by ``tests/kernels``) checks what the
kernels compute, but it never runs Triton's compiler, so code that only fails to compile
(a type that changes inside a loop, a block shape ``tl.dot`` rejects, too much shared memory)
would go unnoticed on a machine without a GPU. This script compiles each kernel, with the
launch configurations ``lecturekit.kernels`` uses on a GPU, all the way to a cubin with the
``ptxas`` that ships with triton, and prints the shared memory each one needs. Attention
kernels are compiled with their tuned tiles and with the smaller fallback tiles
(``_attention_launch._FALLBACK_CONFIGS``) that a GPU with less shared memory gets; the last
line is the most shared memory any attention kernel needs with the smallest tiles.

Usage (any machine with triton; TRITON_INTERPRET must be unset):

    python benchmarks/kernels_compile.py            # sm_90 (H100/H200), a few minutes
    python benchmarks/kernels_compile.py --arch 80  # sm_80 (A100)
    python benchmarks/kernels_compile.py --arch 75  # sm_75 (T4, Colab's free GPU)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("kernels_compile.py: unset TRITON_INTERPRET; the interpreter never compiles.")

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from lecturekit.kernels import _attention_launch as launch  # noqa: E402
from lecturekit.kernels import flash_attention as fa  # noqa: E402
from lecturekit.kernels import fused_softmax as sm  # noqa: E402
from lecturekit.kernels import layernorm as ln  # noqa: E402
from lecturekit.kernels._utils import num_warps_for  # noqa: E402

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def compile_kernel(target, kernel, arg_type, constexprs, num_warps, num_stages) -> int:
    """Compile ``kernel`` with the given constexprs; returns its shared memory in bytes."""
    signature = {
        name: "constexpr" if name in constexprs else arg_type(name) for name in kernel.arg_names
    }
    start = time.time()
    compiled = triton.compile(
        ASTSource(kernel, signature, constexprs=constexprs),
        target=target,
        options={"num_warps": num_warps, "num_stages": num_stages},
    )
    shared = compiled.metadata.shared
    flags = ", ".join(f"{k}={v}" for k, v in constexprs.items())
    print(f"ok  {kernel.__name__:<30} {shared:>7} B shared  {time.time() - start:5.1f} s  {flags}")
    return shared


def attention_types(dtype: str):
    def arg_type(name: str) -> str:
        if name in ("Q", "K", "V", "OUT", "DO", "DQ", "DK", "DV"):
            return f"*{dtype}"
        if name in ("LSE", "DELTA"):
            return "*fp32"
        if name == "KPM":
            return "*u8"
        if name in ("qk_scale", "sm_scale", "dropout_p", "dropout_scale"):
            return "fp32"
        return "i32"

    return arg_type


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 80, 90")
    args = parser.parse_args()
    target = GPUTarget("cuda", args.arch, 32)
    print(f"compiling lecturekit kernels for sm_{args.arch} with triton {triton.__version__}")
    count = 0
    smallest_tiles_shared = 0
    for dtype in ("bf16", "fp16", "fp32"):
        for head_dim in (64, 128):
            cfg = launch._launch_config(head_dim, getattr(torch, DTYPES[dtype]), None, None)
            precision = "ieee" if dtype == "fp32" else "tf32"
            # every optional feature on: the largest variant of each kernel
            flags = dict(
                IS_CAUSAL=True, HAS_KPM=True, HAS_DROPOUT=True, UPCAST=False,
                DOT_PRECISION=precision, BLOCK_D=head_dim,
            )  # fmt: skip
            types = attention_types(dtype)
            # the tuned tiles, then the smaller ones used where they do not fit
            for tiles in (cfg, *launch._FALLBACK_CONFIGS):
                for kernel, block_m, block_n, pass_flags in (
                    (fa._attn_fwd_kernel, tiles.fwd_m, tiles.fwd_n, {}),
                    (fa._attn_bwd_kernel, tiles.dkdv_m, tiles.dkdv_n, {"DKDV": True}),
                    (fa._attn_bwd_kernel, tiles.dq_m, tiles.dq_n, {"DKDV": False}),
                ):
                    constexprs = dict(flags, **pass_flags, BLOCK_M=block_m, BLOCK_N=block_n)
                    shared = compile_kernel(
                        target, kernel, types, constexprs, tiles.num_warps, tiles.num_stages
                    )
                    count += 1
                    if tiles is launch._FALLBACK_CONFIGS[-1]:
                        smallest_tiles_shared = max(smallest_tiles_shared, shared)
            compile_kernel(
                target, fa._attn_bwd_preprocess_kernel, types,
                dict(BLOCK_M=cfg.dq_m, BLOCK_D=head_dim), cfg.num_warps, cfg.num_stages,
            )  # fmt: skip
            count += 1

    def softmax_types(name: str) -> str:
        return {"MASK": "*u8", "scale": "fp32"}.get(name, "*bf16" if name.isupper() else "i32")

    for block, single in ((1024, True), (sm.MAX_SINGLE_BLOCK, False)):
        warps = num_warps_for(block)
        fwd = dict(HAS_MASK=True, MASK_IS_BOOL=True, BLOCK_N=block, SINGLE_BLOCK=single)
        compile_kernel(target, sm._softmax_fwd_kernel, softmax_types, fwd, warps, 3)
        bwd = dict(BLOCK_N=block, SINGLE_BLOCK=single)
        compile_kernel(target, sm._softmax_bwd_kernel, softmax_types, bwd, warps, 3)
        count += 2

    def layer_norm_types(name: str) -> str:
        if name in ("MEAN", "RSTD", "DW_PARTIAL", "DB_PARTIAL"):
            return "*fp32"
        return {"eps": "fp32"}.get(name, "*bf16" if name.isupper() else "i32")

    for block in (512, 4096, ln.MAX_FEATURES):
        rows = ln._rows_per_tile(block)
        warps = num_warps_for(rows * block)
        constexprs = dict(ROWS=rows, BLOCK_N=block)
        compile_kernel(target, ln._layer_norm_fwd_kernel, layer_norm_types, constexprs, warps, 3)
        compile_kernel(target, ln._layer_norm_bwd_dx_kernel, layer_norm_types, constexprs, warps, 3)
        count += 2
    dwdb = dict(BLOCK_G=32, BLOCK_N=128)
    compile_kernel(target, ln._layer_norm_bwd_dwdb_kernel, layer_norm_types, dwdb, 4, 3)
    count += 1
    print(f"RESULT kernels_compiled_sm{args.arch} {count}")
    # what a GPU must offer per block for every attention kernel to run (with the smallest
    # fallback tiles): 64 KiB on a T4 (sm_75), 99 KiB on an L4 (sm_89)
    print(f"RESULT smallest_tiles_shared_kib_sm{args.arch} {smallest_tiles_shared / 1024:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
