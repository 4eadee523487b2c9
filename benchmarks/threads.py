"""How many torch threads the chapters' small models should use: one or two, idle or busy.

The chapters train and run small models (d_model 32-64, two layers, batches of 32-64 short
sequences). Each operation on such tensors is a few thousand to a few hundred thousand
multiply-adds, so splitting it across threads saves little and costs a synchronisation per
operation; when another program keeps a core busy, a thread that waits for the busy core
stalls the whole operation. This benchmark times one training step (forward, cross-entropy,
backward, Adam) and one greedy-decoding pass of such a model with ``torch.set_num_threads(1)``
and ``(2)``, first on an idle machine, then while 1 and 2 other processes keep cores busy
(a pure-Python loop each, like a browser tab or an editor doing work).

Within each condition the two thread counts alternate in rounds, and each round gives a
paired ratio (two threads / one); the median of the ratios is reported, so a load that drifts
between rounds cancels. A ratio above 1 means two threads are slower.

Why two threads lose so much with one busy process: OpenMP's worker threads, between
operations, wait by spinning (GNU OpenMP's default policy spins for a while before it
sleeps), so a waiting thread burns the core that the busy process and the main thread need.
The last measurement repeats the one-busy-process condition in a child process started with
``OMP_WAIT_POLICY=PASSIVE`` (waiting threads sleep at once; the policy must be set before
torch starts, so a notebook cannot choose it): if the ratio falls to about 1 there, spinning
is the cause.

Prints one line per condition, then ``RESULT threads_two_over_one_<condition> <ratio>`` for
each (``busy1_passive`` last). The chapters use one thread where the ratio is >= 1.

    python benchmarks/threads.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from lecturekit import Transformer, greedy, small_config
from lecturekit.training import TrainConfig, fit

BUSY_LOOP = "while True: pass"


def small_model() -> Transformer:
    """The toy tasks' default model (``small_config``: 2+2 layers, d_model 64, 4 heads), the
    size chapters 3-6 train."""
    torch.manual_seed(0)
    return Transformer(small_config(40, 40))


def workload() -> Callable[[], None]:
    """Twenty training steps on 64 pairs of length 12, then greedy decoding of 64 sources."""
    model = small_model()
    generator = torch.Generator().manual_seed(0)
    sources = torch.randint(4, 40, (64, 12), generator=generator).tolist()
    pairs = [(source, source[::-1]) for source in sources]
    config = TrainConfig(batch_size=32, max_steps=20, warmup_steps=10, seed=0, progress=False)

    def run() -> None:
        fit(model, pairs, config=config)
        with torch.no_grad():
            greedy(model, torch.tensor(sources), max_len=14)

    return run


def seconds(run: Callable[[], None], threads: int) -> float:
    torch.set_num_threads(threads)
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(run: Callable[[], None], rounds: int) -> tuple[float, float, float]:
    """Median paired ratio two/one threads, and the median time of each."""
    ones, twos, ratios = [], [], []
    for index in range(rounds):
        order = (1, 2) if index % 2 == 0 else (2, 1)
        times = {threads: seconds(run, threads) for threads in order}
        ones.append(times[1])
        twos.append(times[2])
        ratios.append(times[2] / times[1])
    return statistics.median(ratios), statistics.median(ones), statistics.median(twos)


def measure_busy(run: Callable[[], None], busy: int, rounds: int, name: str) -> float:
    """The paired ratio while ``busy`` other processes spin; prints one line."""
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(busy)]
    try:
        time.sleep(0.5 if busy else 0)
        ratio, one, two = measure(run, rounds)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(
        f"{name:>13} ({busy} busy process{'es' if busy != 1 else ''}): one thread "
        f"{one * 1000:.0f} ms, two threads {two * 1000:.0f} ms, two/one {ratio:.2f}",
        flush=True,
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--passive-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    run = workload()
    seconds(run, 1)  # warm-up: first calls pay one-off costs
    if args.passive_child:
        print(f"RATIO {measure_busy(run, 1, args.rounds, 'busy1_passive'):.4f}")
        return
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {load:.2f}")
    results = {
        "idle" if busy == 0 else f"busy{busy}": measure_busy(
            run, busy, args.rounds, "idle" if busy == 0 else f"busy{busy}"
        )
        for busy in (0, 1, 2)
    }
    child = subprocess.run(
        [sys.executable, __file__, "--passive-child", "--rounds", str(args.rounds)],
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        capture_output=True,
        text=True,
        check=True,
    )
    lines = child.stdout.splitlines()
    print(lines[0])
    results["busy1_passive"] = float(lines[-1].split()[1])
    for name, ratio in results.items():
        print(f"RESULT threads_two_over_one_{name} {ratio:.2f}")


if __name__ == "__main__":
    main()
