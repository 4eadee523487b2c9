#!/usr/bin/env bash
# The GPU measurement of lecturekit's Triton kernels in one command, from the repository root:
#
#     bash benchmarks/gpu_check.sh                      # CUDA GPU, TRITON_INTERPRET unset
#     TRITON_INTERPRET=1 bash benchmarks/gpu_check.sh   # dry run on a CPU (1-2 minutes)
#
# 1. prints the hardware and software versions;
# 2. runs the kernel tests (tests/kernels) natively on the GPU, compiled by Triton, bf16 cases
#    included, with a time limit (TEST_LIMIT_S, default 180 s);
# 3. runs benchmarks/kernels_gpu.py in the time left of a 460 s budget (BUDGET_S): the
#    correctness table, the FlashAttention TFLOP/s table against SDPA's best backend, and the
#    softmax / LayerNorm bandwidth table, as markdown for benchmarks/RESULTS.md;
# 4. prints the RESULT lines last, and exits non-zero if a test or a correctness check failed.
#
# Estimated time (not yet measured, no GPU was available when this was written): tests 1-2
# min (mostly Triton compiling ~100 kernel variants), benchmark 1-2 min on an H100/H200 and
# 3-4 min on a T4 (whose grid stops at n = 8k); under 8 min in all, which the budget enforces.
# Under TRITON_INTERPRET=1 both steps run on the CPU through the interpreter: the whole kernel
# test suite (under a minute on 2 cores) and the benchmark's dry run (tiny sizes, no timings).
#
# Outputs go to $OUT when set, else _build/gpu_check/: tests.txt and kernels_gpu.md (the
# tables to paste). PYTHON selects the interpreter (default: python), e.g.
#     PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
TEST_LIMIT_S=${TEST_LIMIT_S:-180}
BUDGET_S=${BUDGET_S:-460}
DIR=${OUT:-_build/gpu_check}
mkdir -p "$DIR"
# measure this checkout's lecturekit, whatever an installed copy says
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 # a run stopped by its time limit keeps what it printed

echo "== hardware"
if command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv
fi
"$PYTHON" -c "import platform, torch, triton; print('python', platform.python_version(),
	'| torch', torch.__version__, '| CUDA', torch.version.cuda, '| triton', triton.__version__,
	'| GPU', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none')"

if [ "${TRITON_INTERPRET:-}" = 1 ]; then
	echo "TRITON_INTERPRET=1: dry run on the CPU, nothing here is a GPU figure"
	BENCH_ARGS=(--dry-run)
else
	BENCH_ARGS=()
fi
# parallel test workers compile kernels side by side; pytest-xdist is optional
JOBS=$(($(nproc) < 8 ? $(nproc) : 8))
XDIST=()
if "$PYTHON" -c "import xdist" 2>/dev/null; then XDIST=(-n "$JOBS"); fi

echo "== kernel tests (limit ${TEST_LIMIT_S} s)"
tests_rc=0
timeout "$TEST_LIMIT_S" "$PYTHON" -m pytest tests/kernels -q -p no:cacheprovider "${XDIST[@]}" \
	2>&1 | tee "$DIR/tests.txt" || tests_rc=$?
if [ "$tests_rc" = 124 ]; then echo "kernel tests stopped after ${TEST_LIMIT_S} s"; fi

bench_limit=$((BUDGET_S - SECONDS))
echo "== benchmarks/kernels_gpu.py ${BENCH_ARGS[*]} (limit ${bench_limit} s)"
bench_rc=0
timeout "$bench_limit" "$PYTHON" benchmarks/kernels_gpu.py "${BENCH_ARGS[@]}" \
	| tee "$DIR/kernels_gpu.md" || bench_rc=$?
if [ "$bench_rc" = 124 ]; then echo "benchmark stopped after ${bench_limit} s"; fi

echo "== ${SECONDS} s in all; tables in $DIR/kernels_gpu.md, test log in $DIR/tests.txt"
echo "RESULT kernel_tests_exit_code $tests_rc"
echo "RESULT kernels_gpu_exit_code $bench_rc"
grep '^RESULT' "$DIR/kernels_gpu.md" || true
exit $((tests_rc || bench_rc))
