"""The sentence-level input method's n-gram engines on real clauses (issue 29's baselines).

Builds (or loads from the cache) the People's Daily clauses and the review clauses
(:mod:`lecturekit.data.sentences`), prints the data statistics, measures how often pypinyin's
clause reading differs from the corpus words read one by one, chooses the Kneser-Ney discount
of the bigram and trigram HMMs on the validation split, then scores, once, on the test split
and on a seeded sample of review clauses (out of domain): the unigram (most frequent
character), the bigram and trigram HMMs from the same training clauses, and Pinyin2Hanzi's HMM
(its own statistics). Metrics: CER, exact match, top-5 match with 95 % bootstrap intervals,
milliseconds per clause. Last, the time of a training step of a ``lecturekit.Transformer`` of
the size the next model would have.

    python benchmarks/ngram_ime.py [--valid-n 2000] [--ood-n 3000] [--no-p2h]
"""

from __future__ import annotations

import argparse
import os
import random
import time

import numpy as np
import torch

from lecturekit.capstone.engines import HmmBaseline
from lecturekit.capstone.ngram import NgramIME, evaluate_clauses
from lecturekit.data.sentences import (
    load_sentences,
    reading_disagreements,
    split_sentences,
)


def pairs_of(clauses):
    return [(c.pinyin, c.text) for c in clauses]


def statistics(split) -> None:
    print("split      clauses  characters  avg len  syllables  characters (distinct)")
    for name in ("train", "valid", "test", "ood"):
        clauses = getattr(split, name)
        chars = sum(len(c.text) for c in clauses)
        syllables = len({s for c in clauses for s in c.syllables})
        distinct = len({ch for c in clauses for ch in c.text})
        print(
            f"{name:8s} {len(clauses):9d} {chars:11d} {chars / len(clauses):8.2f} "
            f"{syllables:10d} {distinct:10d}"
        )
    train_texts = {c.text for c in split.train}
    for name in ("valid", "test", "ood"):
        clauses = getattr(split, name)
        seen = sum(c.text in train_texts for c in clauses) / len(clauses)
        print(f"share of {name} clauses whose text also occurs in train: {seen:.3f}")


def polyphones(split, n: int) -> None:
    import pypinyin

    sample = random.Random("polyphones").sample(split.valid, n)
    readings: dict[str, int] = {}
    for c in sample:
        for ch in c.text:
            if ch not in readings:
                options = pypinyin.pinyin(ch, style=pypinyin.Style.NORMAL, heteronym=True)[0]
                readings[ch] = len(set(options))
    chars = sum(len(c.text) for c in sample)
    multi_chars = sum(readings[ch] > 1 for c in sample for ch in c.text)
    multi_clauses = sum(any(readings[ch] > 1 for ch in c.text) for c in sample)
    found = reading_disagreements(sample)
    differing = sum(
        sum(a != b for a, b in zip(c.syllables, alone.split(), strict=True)) for c, alone in found
    )
    print(
        f"polyphones on {n} validation clauses: {multi_chars / chars:.3f} of characters and "
        f"{multi_clauses / n:.3f} of clauses have a character with several toneless readings; "
        f"clause reading != words read alone in {len(found)} clauses ({len(found) / n:.3f}), "
        f"{differing} syllables ({differing / chars:.4f} of syllables)"
    )
    for c, alone in found[:25]:
        print(f"  {c.text}  clause: {c.pinyin}  |  words: {alone}")


def tune(train, valid, order: int, discounts, beam) -> NgramIME:
    start = time.perf_counter()
    ime = NgramIME(train, order, discounts[0], beam)
    print(f"{ime.name}: estimated in {time.perf_counter() - start:.1f} s")
    best = None
    for d in discounts:
        ime.set_discount(d)
        scores = evaluate_clauses(ime.candidates, valid)
        print(f"  discount {d:.2f}: " + scores.row(f"valid n={scores.n}"))
        if best is None or scores.cer[0] < best[1]:
            best = (d, scores.cer[0])
    ime.set_discount(best[0])
    print(f"  chosen discount {best[0]:.2f}")
    return ime


def transformer_speed(n_src: int, n_tgt: int, steps: int = 5) -> None:
    from lecturekit import Transformer, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=n_src + 4,
        tgt_vocab_size=n_tgt + 4,
        d_model=256,
        n_heads=4,
        d_ff=1024,
        n_encoder_layers=4,
        n_decoder_layers=2,
        dropout=0.1,
    )
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src = torch.randint(4, n_src + 4, (128, 15))
    tgt = torch.randint(4, n_tgt + 4, (128, 17))
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        logits = model(src, tgt[:, :-1])  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"Transformer d_model 256, 4+2 layers, vocab {n_src + 4}/{n_tgt + 4}: {params:,} "
        f"parameters; batch 128 x 15: {1 / np.median(times[1:]):.2f} steps/s "
        f"(median of {steps}, first step left out; torch threads {torch.get_num_threads()})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--valid-n", type=int, default=2000)
    parser.add_argument("--ood-n", type=int, default=3000)
    parser.add_argument("--no-p2h", action="store_true")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}, cpus {os.cpu_count()}")
    start = time.perf_counter()
    corpus = load_sentences()
    split = split_sentences(corpus)
    print(f"load_sentences + split: {time.perf_counter() - start:.1f} s; dropped {corpus.dropped}")
    statistics(split)
    polyphones(split, 2000)
    train = pairs_of(split.train)
    valid = pairs_of(random.Random("valid").sample(split.valid, args.valid_n))
    unigram = NgramIME(train, 1)
    bigram = tune(train, valid, 2, (0.5, 0.7, 0.8, 0.9, 0.95), None)
    trigram = tune(train, valid, 3, (0.5, 0.7, 0.8, 0.9, 0.95), 32)
    systems = [unigram, bigram, trigram] + ([] if args.no_p2h else [HmmBaseline()])
    views = {
        "test": pairs_of(split.test),
        "ood": pairs_of(random.Random("ood").sample(split.ood, args.ood_n)),
    }
    results = {}
    for view, pairs in views.items():
        print(f"\n{view} ({len(pairs)} clauses): CER, exact, top-5 [95 % interval], ms/clause")
        for system in systems:
            results[system.name, view] = scores = evaluate_clauses(system.candidates, pairs)
            print(scores.row(system.name), flush=True)
    for view in views:
        for system, tag in zip(systems, ("unigram", "bigram", "trigram", "p2h"), strict=False):
            print(f"RESULT ngram_cer_{tag}_{view} {results[system.name, view].cer[0]:.4f}")
    print(f"load: {os.getloadavg()}")
    transformer_speed(len(unigram.emission), len(unigram.itos) - 2)


if __name__ == "__main__":
    main()
