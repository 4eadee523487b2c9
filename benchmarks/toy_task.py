"""Train the default small Transformer from scratch on two toy tasks until it has learnt them.

For the number-reading task (``20481`` -> ``两万零四百八十一``) and the date task (several
English / Chinese forms -> ``YYYY-MM-DD``): train ``lecturekit.training.small_config`` with the
default ``small_train_config``, evaluate held-out (valid split) exact match by greedy decoding
every ``--eval-every`` steps, and stop at >= 99.5%. Then report, on the test split, exact match
and corpus BLEU (sacrebleu, character tokens).

Prints per task the wall seconds until held-out exact match >= 0.99 (evaluation time
included), then the two RESULT lines: the slowest task's seconds and the lowest final exact
match. Goal (issue 15): <= 30 s per task on 2 quiet CPU cores, exact match >= 0.99.

    python benchmarks/toy_task.py [--tasks number date] [--max-seconds 300]
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import time
from typing import Any

import torch

from lecturekit.data import make_task
from lecturekit.decoding import greedy
from lecturekit.model import Transformer
from lecturekit.training import evaluate, fit, small_config, small_train_config
from lecturekit.training.metrics import corpus_bleu

TARGET = 0.99
# training continues a little past TARGET so that the final test exact match, measured on
# other sentences than the stopping criterion, is not just at the edge
STOP_AT = 0.995


def run(
    task_name: str,
    max_seconds: float,
    eval_every: int,
    seed: int,
    model_overrides: dict[str, Any],
    train_overrides: dict[str, Any],
) -> dict[str, float]:
    task = make_task(task_name, seed=seed)
    torch.manual_seed(seed)
    model = Transformer(small_config(len(task.src_vocab), len(task.tgt_vocab), **model_overrides))
    config = small_train_config(
        **train_overrides,
        eval_every=eval_every,
        max_seconds=max_seconds,
        target_exact_match=STOP_AT,
        progress=False,
        seed=seed,
    )
    history = fit(model, task, config=config)
    reached = [
        s
        for s, em in zip(history.eval_seconds, history.valid_exact_match, strict=True)
        if em >= TARGET
    ]
    seconds = reached[0] if reached else math.inf
    test_batches = task.loader("test", batch_size=256)
    test = evaluate(model, test_batches)
    hyps, refs = [], []
    for batch in test_batches:
        out = greedy(model, batch.src, batch.tgt_out.shape[1] + 2).tokens
        hyps += [task.decode_tgt(row) for row in out]
        refs += [task.decode_tgt(row) for row in batch.tgt_out]
    bleu = corpus_bleu(hyps, refs, tokenize="char")
    steps = history.step[-1]
    curve = zip(history.eval_step, history.valid_exact_match, history.eval_seconds, strict=True)
    print(
        f"{task_name:7s} valid EM by step: "
        + ", ".join(f"{s}:{em:.3f}@{t:.0f}s" for s, em, t in curve)
    )
    print(
        f"{task_name:7s} steps {steps:5d}  seconds to valid EM >= {TARGET}: {seconds:7.1f}  "
        f"valid EM {history.valid_exact_match[-1]:.4f}  test EM {test['exact_match']:.4f}  "
        f"test BLEU {bleu:.2f}  ({steps / history.seconds:.1f} steps/s)",
        flush=True,
    )
    return {"seconds": seconds, "exact_match": test["exact_match"], "bleu": bleu}


def _parse(item: str) -> tuple[str, Any]:
    key, _, value = item.partition("=")
    return key, ast.literal_eval(value) if value not in ("True", "False") else value == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["number", "date"])
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", nargs="*", default=[], help="small_config overrides k=v")
    parser.add_argument("--train", nargs="*", default=[], help="small_train_config overrides k=v")
    args = parser.parse_args()
    model_overrides = dict(_parse(kv) for kv in args.model)
    train_overrides = dict(_parse(kv) for kv in args.train)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}",
        flush=True,
    )
    start = time.perf_counter()
    results = [
        run(name, args.max_seconds, args.eval_every, args.seed, model_overrides, train_overrides)
        for name in args.tasks
    ]
    print(f"total wall time {time.perf_counter() - start:.1f} s")
    print(f"RESULT toy_task_seconds {max(r['seconds'] for r in results):.1f}")
    print(f"RESULT toy_task_exact_match {min(r['exact_match'] for r in results):.4f}")


if __name__ == "__main__":
    main()
