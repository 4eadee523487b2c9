"""The capstone's input methods side by side: pinyin -> Chinese words on held-out words.

Loads the shipped Transformer (``lecturekit.pretrained.load("pinyin-ime")``), rebuilds its word
split (jieba's dictionary with pypinyin readings, the recipe's seed) and scores, in the same
run, on three views of ``--n`` words each:

- ``freq``: held-out words drawn by frequency (what a person typing meets);
- ``uniform``: distinct held-out words drawn uniformly (the long tail);
- ``seen``: training words drawn by frequency (what the lookup table has memorised);

the unigram baseline (most frequent character per syllable), the lookup table (most frequent
training word with this pinyin), the HMM of ``Pinyin2Hanzi`` and the Transformer with greedy
decoding and with beam search. Metrics: top-1 and top-5 exact match, character error rate of
the first candidate. Decoding is deterministic; the numbers depend only on the checkpoint, the
package versions and the seeds.

Last lines: ``RESULT pinyin_top1`` (Transformer, beam search, top-1 on the frequency-weighted
held-out view), ``RESULT pinyin_top1_unigram`` and ``RESULT pinyin_top1_hmm`` (same view).

    python benchmarks/pinyin.py [--n 2000] [--beam 5]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from lecturekit import pretrained
from lecturekit.chapters.capstone_pinyin import (
    HmmBaseline,
    LookupBaseline,
    TransformerIME,
    UnigramBaseline,
    evaluate,
    format_table,
)
from lecturekit.data.pinyin import split_lexicon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="words per view")
    parser.add_argument("--beam", type=int, default=5, help="beam size (top-5 needs >= 5)")
    parser.add_argument("--model", default="pinyin-ime", help="a lecturekit.pretrained recipe")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, 1 thread, load average {load:.1f}", flush=True)

    ckpt = pretrained.load(args.model)
    seed = pretrained.RECIPES[args.model].task_kwargs.get("seed", 0)
    split = split_lexicon(seed=seed)
    views = {name: split.view(name, args.n) for name in ("freq", "uniform", "seen")}
    for name, words in views.items():
        print(f"view {name:8s}: {len(words)} words, {len(set(words))} distinct")
    systems = [
        UnigramBaseline(split.train),
        LookupBaseline(split.train),
        HmmBaseline(),
        TransformerIME(ckpt.model, ckpt.src_vocab, ckpt.tgt_vocab, beam_size=1),
        TransformerIME(ckpt.model, ckpt.src_vocab, ckpt.tgt_vocab, beam_size=args.beam),
    ]
    results = {}
    for system in systems:
        start = time.process_time()
        for view, words in views.items():
            results[system.name, view] = evaluate(system, words, k=5)
        print(
            f"{system.name:22s} evaluated in {time.process_time() - start:6.1f} s CPU", flush=True
        )
    print()
    print(format_table(results))
    print()
    beam = systems[-1].name
    for view in ("uniform", "seen"):
        print(f"RESULT pinyin_top1_{view} {results[beam, view].top1:.4f}")
    print(f"RESULT pinyin_top5 {results[beam, 'freq'].topk:.4f}")
    print(f"RESULT pinyin_top1 {results[beam, 'freq'].top1:.4f}")
    print(f"RESULT pinyin_top1_unigram {results['unigram', 'freq'].top1:.4f}")
    print(f"RESULT pinyin_top1_hmm {results[systems[2].name, 'freq'].top1:.4f}")


if __name__ == "__main__":
    main()
