"""What ``fit`` costs around the model: steps per second of a small model, and the calls to
check functions (any function of ``lecturekit`` whose name starts with ``check_`` or
``_check``) per training step, counted with ``cProfile``.

The model is small (d_model 32, 1+1 layers, batches of 16 copy-task pairs) so that the
loop's own work (schedules, checks, synchronisations) shows beside the forward and backward
passes. One thread; run it on a quiet machine and report ``uptime``'s load with the result.
Prints ``RESULT fit_steps_per_second <x>`` (median of ``--repeats`` runs after a warm-up) and
``RESULT fit_check_calls_per_step <n>``.

    OMP_NUM_THREADS=1 python benchmarks/fit_overhead.py [--steps 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import torch

from lecturekit import Transformer, TransformerConfig
from lecturekit.data import make_task
from lecturekit.training import TrainConfig, fit


def _setup(steps: int) -> tuple[Transformer, object, TrainConfig]:
    task = make_task("copy", n_train=512, n_valid=16, n_test=8, seed=0)
    torch.manual_seed(0)
    config = TransformerConfig(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=32,
        n_heads=2,
        d_ff=64,
        n_encoder_layers=1,
        n_decoder_layers=1,
        dropout=0.1,
        max_len=32,
    )
    train = TrainConfig(
        max_steps=steps, batch_size=16, warmup_steps=20, progress=False, device="cpu"
    )
    return Transformer(config), task.encoded("train"), train


def _check_calls(profile: cProfile.Profile) -> int:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return sum(
        calls
        for (filename, _, name), (_, calls, *_) in stats.items()
        if "lecturekit" in filename and name.startswith(("check_", "_check"))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, pairs, train = _setup(20)
    fit(model, pairs, None, train)  # warm-up: the first calls are slow
    rates = []
    for _ in range(args.repeats):
        model, pairs, train = _setup(args.steps)
        start = time.perf_counter()
        fit(model, pairs, None, train)
        rates.append(args.steps / (time.perf_counter() - start))
    print("steps/s per run:", " ".join(f"{r:.1f}" for r in rates))
    print(f"RESULT fit_steps_per_second {statistics.median(rates):.1f}")
    counts = []
    for steps in (args.steps, 2 * args.steps):  # the difference cancels the one-off checks
        model, pairs, train = _setup(steps)
        profile = cProfile.Profile()
        profile.runcall(fit, model, pairs, None, train)
        counts.append(_check_calls(profile))
    print(f"check calls: {counts[0]} in {args.steps} steps, {counts[1]} in {2 * args.steps}")
    print(f"RESULT fit_check_calls_per_step {(counts[1] - counts[0]) / args.steps:.1f}")


if __name__ == "__main__":
    main()
