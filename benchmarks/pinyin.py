"""The sentence-level input method: the course's Transformers against the n-gram engines.

Whole clauses of toneless pinyin -> characters on the People's Daily test split
(:mod:`lecturekit.data.sentences`; ``--n`` clauses, default all 6,222). Systems, all scored in
the same run by :func:`lecturekit.capstone.ngram.evaluate_clauses` (CER, exact match,
top-5 match with 95 % bootstrap intervals, ms per clause):

- the per-syllable unigram (each syllable's most frequent character);
- the bigram and trigram HMMs (Kneser-Ney, discount chosen on ``--valid-n`` validation
  clauses, as ``benchmarks/ngram_ime.py`` does) and Pinyin2Hanzi's HMM (``--no-p2h`` skips it);
- ``ime-sentences-at``: the encoder-decoder Transformer, beam search (``--beam``, default 5,
  KV cache) and greedy, both writing exactly one character per syllable;
- ``ime-sentences-nat``: the non-autoregressive tagger (argmax; top-5 by exact k-best);
- ``nat_trigram``: the tagger fused with the trigram HMM (:class:`FusedIME`: the HMM's score
  plus ``w`` times the tagger's log-probabilities; ``w`` chosen on the validation clauses).

The beam-pruned searches (the trigram, 32 paths, and the fused engine on it) keep other paths
when asked for more candidates, so their first candidate depends on ``k``: their CER and exact
match are scored on a search with ``k = 1``, their top-5 on one with ``k = 5``.

The best Transformer-only engine minus the trigram, with a 95 % interval from a bootstrap over
whole blocks. Then the learning curves on nested block subsets of the training clauses (1/16,
1/8, 1/4, 1/2, 1: whole blocks of 50 lines, :func:`lecturekit.capstone.analysis.block_subsets`):
the trigram counted on each (the chosen discount), the tagger trained on each
(``ime-sentences-nat-1of<n>``, shipped at its best validation CER) and the two fused with the
chosen weight, scored with ``k = 1`` on the same test clauses.

The models are whatever checkpoint exists (``python -m lecturekit.capstone build
ime-sentences-at --max-minutes 30``, repeated until finished); the header says how many steps
each has had. Then the same systems on ``--ood-n`` review clauses (out of domain, a seeded
sample). Last, the latency of the input method: the median wall time of beam search
(``--beam``) on one 12-syllable clause at a time (``--latency-n`` test clauses, one thread).

Last lines: ``RESULT pinyin_cer`` (Transformer, beam), ``pinyin_cer_bigram``,
``pinyin_cer_best_ngram`` (the better of bigram and trigram), ``pinyin_cer_p2h``,
``pinyin_cer_nat``, ``pinyin_cer_transformer`` (the best of the Transformer-only engines:
beam search, greedy, the tagger), ``pinyin_cer_trigram`` (``k = 1``), ``pinyin_cer_fused``
(the tagger with the trigram, ``k = 1``), ``curve_<trigram|nat|fused>_<fraction>`` for the
five fractions and ``pinyin_latency_ms``.

    python benchmarks/pinyin.py [--n 6222] [--valid-n 1000] [--ood-n 1000] [--beam 5] [--no-p2h]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import torch
from ngram_ime import pairs_of, tune

from lecturekit.capstone.analysis import SyllableUnigram, block_subsets, paired_cer_difference
from lecturekit.capstone.engines import HmmBaseline, TransformerIME
from lecturekit.capstone.models import load_sentence_model
from lecturekit.capstone.ngram import NgramIME, evaluate_clauses, sentence_scores
from lecturekit.capstone.tagger import FusedIME, TaggerIME, ime_candidates
from lecturekit.data.sentences import split_sentences


def load_models(names=("ime-sentences-at", "ime-sentences-nat")):
    """The shipped sentence models ``names``, or exit naming the command that builds them."""
    models = {}
    for name in names:
        try:
            models[name] = load_sentence_model(name)
        except FileNotFoundError:
            sys.exit(
                f"no checkpoint of {name!r}: build it first with `python -m lecturekit.capstone "
                f"build {name} --max-minutes 30` (repeat until it reports finished)"
            )
        meta = models[name].metadata
        print(
            f"{name}: {meta['steps']}/{models[name].recipe.total_steps} steps "
            f"({'finished' if meta['finished'] else 'NOT finished: figures are provisional'})"
        )
    return models


def latency_ms(model, pairs, n: int, beam: int) -> float:
    """Median ms of :func:`ime_candidates` (unspaced pinyin in, ``beam`` candidates out, KV
    cache) on up to ``n`` 12-syllable clauses, one at a time."""
    twelve = [p.replace(" ", "") for p, t in pairs if len(t) == 12][:n]
    times = []
    for typed in twelve:
        start = time.perf_counter()
        ime_candidates(model.model, model.src_vocab, model.tgt_vocab, typed, k=beam)
        times.append(1000 * (time.perf_counter() - start))
    print(f"latency: {len(twelve)} clauses of 12 syllables typed unspaced, beam {beam}")
    return statistics.median(times)


def tune_fusion(tagger, trigram, valid, weights) -> FusedIME:
    """The tagger fused with the trigram at the weight with the lowest validation CER."""
    cer = {}
    for w in weights:
        fused = FusedIME(tagger, trigram, w)
        scores = evaluate_clauses(fused.candidates, valid, k=1)
        print(f"  fusion weight {w:.2f}: " + scores.row(f"valid n={scores.n}"))
        cer[w] = scores.cer[0]
    best = min(cer, key=cer.get)
    print(f"  chosen fusion weight {best:.2f}")
    return FusedIME(tagger, trigram, best)


FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)
PRUNED = ("trigram", "nat_trigram")  # beam-pruned: the first candidate is scored with k = 1


def score(tag, system, pairs) -> tuple[float, list[str]]:
    """Print a system's row on ``pairs`` (k = 5; pruned searches also k = 1); its CER and
    its first candidates (of the k = 1 search for pruned ones)."""
    k = min(5, getattr(system, "max_candidates", 5))
    answers = {}

    def decode(pinyins, k):
        answers[k] = system.candidates(pinyins, k)
        return answers[k]

    scores = evaluate_clauses(decode, pairs, k=k)
    print(scores.row(tag), flush=True)
    if tag in PRUNED:
        scores = evaluate_clauses(decode, pairs, k=1)
        print(scores.row(f"{tag} k=1"), flush=True)
    return scores.cer[0], [found[0] if found else "" for found in answers[min(answers)]]


def curves(split, trigram, fused, test, whole) -> dict[str, dict[float, float]]:
    """The learning curves' test CERs (k = 1) on nested block subsets of the training split:
    the trigram counted on each subset, the tagger trained on it (``ime-sentences-nat-1of<n>``)
    and the two fused with the chosen weight; at 1 the whole-data systems' CERs, ``whole``."""
    out: dict[str, dict[float, float]] = {tag: {1: cer} for tag, cer in whole.items()}
    print("\nlearning curves (nested whole-block subsets, k = 1):")
    for fraction, clauses in zip(
        FRACTIONS[:-1], block_subsets(split.train, FRACTIONS[:-1], split.block_lines), strict=True
    ):
        ime = NgramIME(pairs_of(clauses), 3, trigram.lm.discount, beam=trigram.beam)
        name = f"ime-sentences-nat-1of{round(1 / fraction)}"
        nat = load_models([name])[name]
        tagger = TaggerIME(nat.model, nat.src_vocab, nat.tgt_vocab)
        chars = sum(len(c.text) for c in clauses)
        for tag, system in (
            ("trigram", ime),
            ("nat", tagger),
            ("fused", FusedIME(tagger, ime, fused.weight)),
        ):
            scores = evaluate_clauses(system.candidates, test, k=1)
            print(scores.row(f"{tag} {fraction:.4f} ({chars} chars)"), flush=True)
            out[tag][fraction] = scores.cer[0]
    return {tag: dict(sorted(points.items())) for tag, points in out.items()}


def paired_difference(first_a, first_b, clauses, block_lines: int) -> str:
    """CER of first candidates ``first_a`` minus ``first_b`` on ``clauses`` with a 95 %
    interval from a bootstrap over whole blocks (clauses of one block are not independent)."""
    texts = [c.text for c in clauses]
    sa = sentence_scores([[a] for a in first_a], texts, k=1)
    sb = sentence_scores([[b] for b in first_b], texts, k=1)
    groups = [c.line // block_lines for c in clauses]
    diff, low, high = paired_cer_difference(sa["edits"], sb["edits"], sa["chars"], groups=groups)
    return f"{diff:+.4f} [{low:+.4f}, {high:+.4f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="test clauses (default: all)")
    parser.add_argument("--valid-n", type=int, default=1000, help="clauses to tune n-grams")
    parser.add_argument("--ood-n", type=int, default=1000, help="review clauses (0: none)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--latency-n", type=int, default=100)
    parser.add_argument("--no-p2h", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, 1 thread, load average {load:.1f}", flush=True)
    models = load_models()
    split = split_sentences()
    train, test = pairs_of(split.train), pairs_of(split.test)[: args.n]
    valid = pairs_of(random.Random("valid").sample(split.valid, args.valid_n))
    discounts = (0.7, 0.8, 0.9)
    bigram = tune(train, valid, 2, discounts, None)
    trigram = tune(train, valid, 3, discounts, 32)
    at, nat = models["ime-sentences-at"], models["ime-sentences-nat"]
    beam = TransformerIME(
        at.model, at.src_vocab, at.tgt_vocab, beam_size=args.beam, exact_length=True
    )
    tagger = TaggerIME(nat.model, nat.src_vocab, nat.tgt_vocab)
    fused = tune_fusion(tagger, trigram, valid, (0.0, 0.1, 0.2, 0.3, 0.5, 1.0))
    systems = {
        "unigram": SyllableUnigram(train),
        "bigram": bigram,
        "trigram": trigram,
        **({} if args.no_p2h else {"p2h": HmmBaseline()}),
        "at_beam": beam,
        "at_greedy": TransformerIME(
            at.model, at.src_vocab, at.tgt_vocab, beam_size=1, exact_length=True
        ),
        "nat": tagger,
        "nat_trigram": fused,
    }
    print(f"\ntest ({len(test)} clauses): CER, exact, top-5 [95 % interval], ms/clause")
    scored = {tag: score(tag, system, test) for tag, system in systems.items()}
    cer = {tag: value for tag, (value, _) in scored.items()}
    whole = {"trigram": cer["trigram"], "nat": cer["nat"], "fused": cer["nat_trigram"]}
    curve = curves(split, trigram, fused, test, whole)
    alone = ("at_beam", "at_greedy", "nat")  # a Transformer's scores only
    best = min(alone, key=cer.get)
    difference = paired_difference(
        scored[best][1], scored["trigram"][1], split.test[: args.n], split.block_lines
    )
    print(f"\n{best} minus trigram (k = 1), block bootstrap: {difference}")
    if args.ood_n:
        ood = pairs_of(random.Random("ood").sample(split.ood, min(args.ood_n, len(split.ood))))
        print(f"\nout of domain ({len(ood)} review clauses): same columns")
        for tag, system in systems.items():
            score(tag, system, ood)
    latency = latency_ms(at, pairs_of(split.test), args.latency_n, args.beam)
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"RESULT pinyin_cer {cer['at_beam']:.4f}")
    print(f"RESULT pinyin_cer_bigram {cer['bigram']:.4f}")
    print(f"RESULT pinyin_cer_best_ngram {min(cer['bigram'], cer['trigram']):.4f}")
    if "p2h" in cer:
        print(f"RESULT pinyin_cer_p2h {cer['p2h']:.4f}")
    print(f"RESULT pinyin_cer_nat {cer['nat']:.4f}")
    transformer = cer[best]
    print(f"RESULT pinyin_cer_transformer {transformer:.4f}")
    print(f"RESULT pinyin_cer_trigram {cer['trigram']:.4f}")
    print(f"RESULT pinyin_cer_fused {cer['nat_trigram']:.4f}")
    for system, points in curve.items():
        for fraction, value in points.items():
            print(f"RESULT curve_{system}_{fraction:g} {value:.4f}")
    print(f"RESULT pinyin_latency_ms {latency:.1f}")


if __name__ == "__main__":
    main()
