"""Decoding speed: the KV cache against recomputation, and lecturekit against Hugging Face.

Same model and weights (d_model 256, 4 heads, d_ff 1024, 3+3 layers, vocabulary 1000, eval
mode), a batch of 8 sources of 32 tokens (half of them padded), 128 new tokens each.

1. Greedy decoding with the KV cache vs recomputing the whole prefix at every step (EOS
   ignored, so both do the same work); their tokens are checked to be identical.
   ``RESULT kv_cache_speedup <x>`` = median recompute time / median cached time. Goal: >= 10.
2. lecturekit's ``greedy``, ``beam_search`` (4 beams) and ``sample`` (top-k 50, temperature 1)
   against ``transformers``' ``BartForConditionalGeneration.generate(..., use_cache=True)``
   (greedy, ``num_beams=4``, ``do_sample=True, top_k=50``), on a BART built from a config with
   the same sizes (ReLU, dropout 0, random weights, nothing downloaded), at batch 8 and at
   batch 1 (the first source). EOS is suppressed on both sides, so every run makes exactly
   128 tokens per row: ``min_new_tokens=128`` for HF; for lecturekit a decoder whose EOS
   log-probability is ``-inf`` (:class:`WithoutEOS`, the step protocol's way of changing a
   model's distribution). ``RESULT <strategy>_vs_hf <x>`` (and ``..._b1``) = median lecturekit
   time / median HF time. Goal: <= 0.8 each.

What differs between the two models, beyond the code: BART adds a LayerNorm after the
embeddings, learns its positions (lecturekit: sinusoidal) and ties its output projection to
the embedding. Beam search: lecturekit ranks by the log-probability (``length_penalty=0``),
HF divides finished hypotheses by ``length ** 1.0``; with EOS suppressed nothing finishes
before the last step, where all open beams have the same length, so both keep the same beams.
Sampling draws from different generators (lecturekit: its own seeded one; HF: torch's global).

To stay meaningful on a shared machine, every run is interleaved with the others: each round
runs every path once (the cached greedy decoding ``--cached-per-round`` times), in
alternating order, so a burst of load hits all paths alike; the figures are medians over the
rounds. Both libraries run in one process, with the same torch threads, under
``torch.inference_mode``. The CPU, the threads and the load average are printed at the start
and the end. Without ``transformers`` (``pip install -e '.[bench]'``) the script prints
lecturekit's figures and says which comparisons it skipped. ``--profile`` prints instead a
torch.profiler table of the cached greedy path (``--profile beam``: beam search).

    python benchmarks/decode.py [--rounds 5] [--cached-per-round 3] [--backend sdpa]
                                [--profile [greedy|beam]]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from lecturekit import Transformer, TransformerConfig, padding_mask
from lecturekit.decoding import TransformerDecoder, beam_search, greedy, sample

BATCH, SRC_LEN, NEW_TOKENS, VOCAB = 8, 32, 128, 1000
BEAMS, TOP_K = 4, 50
STRATEGIES = ("greedy", f"beam{BEAMS}", "sample")


@torch.inference_mode()
def greedy_cached(model: Transformer, src: torch.Tensor) -> torch.Tensor:
    """Each step feeds one token; keys/values of earlier steps come from the cache, which
    has room for every step. Inputs are checked once (the first step), as in
    ``lecturekit.decoding``: later tokens are argmaxes over the vocabulary."""
    src_padding = padding_mask(src, model.config.pad_id)
    memory = model.encode(src, src_key_padding_mask=src_padding)
    cache = model.init_cache(memory, memory_key_padding_mask=src_padding, capacity=NEW_TOKENS)
    token = torch.full((src.size(0),), model.config.bos_id, dtype=torch.long)
    generated = []
    for step in range(NEW_TOKENS):
        token = model.decode_step(token, cache, validate=step == 0).argmax(-1)  # (B,)
        generated.append(token)
    return torch.stack(generated, dim=1)  # (B, NEW_TOKENS)


@torch.inference_mode()
def greedy_recompute(model: Transformer, src: torch.Tensor) -> torch.Tensor:
    """Each step runs the decoder over the whole prefix again and keeps the last position."""
    src_padding = padding_mask(src, model.config.pad_id)
    memory = model.encode(src, src_key_padding_mask=src_padding)
    prefix = torch.full((src.size(0), 1), model.config.bos_id, dtype=torch.long)
    for _ in range(NEW_TOKENS):
        logits = model.decode(prefix, memory, memory_key_padding_mask=src_padding)
        prefix = torch.cat([prefix, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return prefix[:, 1:]


def build(backend: str) -> tuple[Transformer, torch.Tensor]:
    """The benchmark's seeded model (eval mode) and its padded batch of sources ``(B, S)``."""
    torch.manual_seed(0)
    config = TransformerConfig(
        VOCAB,
        VOCAB,
        d_model=256,
        n_heads=4,
        d_ff=1024,
        n_encoder_layers=3,
        n_decoder_layers=3,
        attention_backend=backend,
    )
    model = Transformer(config).eval()
    src = torch.randint(3, VOCAB, (BATCH, SRC_LEN), generator=torch.Generator().manual_seed(1))
    src[:, 28:] = torch.where(torch.arange(BATCH)[:, None] % 2 == 0, 0, src[:, 28:])  # padding
    return model, src


class WithoutEOS(TransformerDecoder):
    """The model's decoder with EOS never generated, as HF's ``min_new_tokens``: every row
    runs to ``max_len``. Cached steps and in-place beam reordering are inherited."""

    def step(self, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        log_probs, state = super().step(tokens, state)
        log_probs[:, self.eos_id] = -math.inf  # log_softmax's fresh (N, V) output
        return log_probs, state


def lecturekit_runs(model: Transformer) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Each strategy as ``src (B, S) -> tokens (B, NEW_TOKENS)``, EOS suppressed."""
    dec = WithoutEOS(model)
    return {
        "greedy": lambda src: greedy(dec, src, NEW_TOKENS).tokens,
        f"beam{BEAMS}": lambda src: beam_search(dec, src, BEAMS, NEW_TOKENS).tokens,
        "sample": lambda src: sample(dec, src, NEW_TOKENS, top_k=TOP_K, seed=0).tokens,
    }


def hf_runs(pad_id: int, bos_id: int, eos_id: int) -> dict[str, Callable] | None:
    """HF's ``generate`` for each strategy, on a seeded BART of the benchmark's sizes
    (``src (B, S) -> tokens (B, 1 + NEW_TOKENS)``, the start token first); None without
    ``transformers``."""
    try:
        from transformers import BartConfig, BartForConditionalGeneration
    except ImportError:
        return None
    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=VOCAB,
        d_model=256,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_ffn_dim=1024,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        activation_function="relu",
        max_position_embeddings=512,
        pad_token_id=pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        decoder_start_token_id=bos_id,
        forced_bos_token_id=None,
        forced_eos_token_id=None,  # BART's default forces EOS as the last token
    )
    model = BartForConditionalGeneration(config).eval()
    common = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, use_cache=True)
    options = {
        "greedy": dict(do_sample=False, num_beams=1),
        f"beam{BEAMS}": dict(do_sample=False, num_beams=BEAMS),
        "sample": dict(do_sample=True, num_beams=1, top_k=TOP_K, top_p=1.0, temperature=1.0),
    }

    def run(src: torch.Tensor, extra: dict) -> torch.Tensor:
        with torch.inference_mode():
            return model.generate(src, attention_mask=(src != pad_id).long(), **common, **extra)

    print(f"transformers BART, attention {model.config._attn_implementation}", flush=True)
    return {name: partial(run, extra=extra) for name, extra in options.items()}


def time_interleaved(
    runs: list[tuple[str, Callable[[], torch.Tensor]]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, torch.Tensor]]:
    """Run every ``(name, run)`` once per round, in reversed order on odd rounds; returns the
    seconds of each name's runs and each name's last output."""
    times: dict[str, list[float]] = {name: [] for name, _ in runs}
    outputs = {}
    for i in range(rounds):
        for name, run in runs if i % 2 == 0 else runs[::-1]:
            start = time.perf_counter()
            outputs[name] = run()
            times[name].append(time.perf_counter() - start)
    return times, outputs


def machine_line(when: str) -> str:
    cpu = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{when}: {cpu}, {os.cpu_count()} cores, torch {torch.__version__}, " + (
        f"{torch.get_num_threads()} threads, load average {load}"
    )


def kv_cache_part(
    model: Transformer, src: torch.Tensor, rounds: int, cached_per_round: int
) -> float:
    """Part 1: print the cached and recomputed greedy figures; return the speedup."""
    greedy_cached(model, src)  # warm-up: first-call allocations are not part of decoding
    runs = [("cached", partial(greedy_cached, model, src))] * cached_per_round
    runs.append(("recompute", partial(greedy_recompute, model, src)))
    times, outputs = time_interleaved(runs, rounds)
    if not torch.equal(outputs["cached"], outputs["recompute"]):
        raise SystemExit("cached and recomputed greedy decoding produced different tokens")
    print(f"identical tokens: {tuple(outputs['cached'].shape)}")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, median in medians.items():
        print(
            f"{name:9s} {median:.3f} s (median of {len(times[name])}, "
            f"min {min(times[name]):.3f} s), {1e3 * median / NEW_TOKENS:.2f} ms per token"
        )
    return medians["recompute"] / medians["cached"]


def library_part(model: Transformer, src: torch.Tensor, rounds: int) -> dict[str, float]:
    """Part 2: time lecturekit (and HF) at batch 8 and 1, print the table; return the
    ratios ``{"greedy_vs_hf": ..., "greedy_vs_hf_b1": ...}`` (empty without HF)."""
    ours = lecturekit_runs(model)
    theirs = hf_runs(model.config.pad_id, model.config.bos_id, model.config.eos_id)
    batches = {"": src, "_b1": src[:1]}
    runs = []
    for suffix, batch in batches.items():
        for name in STRATEGIES:
            runs.append((f"{name}{suffix}", partial(ours[name], batch)))
            if theirs is not None:
                runs.append((f"{name}{suffix} hf", partial(theirs[name], batch)))
    for _, run in runs:  # warm-up
        run()
    times, outputs = time_interleaved(runs, rounds)
    for name, tokens in outputs.items():  # EOS suppressed: every row made every token
        width = NEW_TOKENS + (1 if name.endswith(" hf") else 0)  # HF: the start token too
        if tokens.shape[1] != width or bool((tokens == model.config.eos_id).any()):
            raise SystemExit(f"{name}: expected {NEW_TOKENS} new tokens without EOS per row")
    medians = {name: statistics.median(t) for name, t in times.items()}
    ratios = print_table(medians, {suffix: b.size(0) for suffix, b in batches.items()})
    if theirs is None:
        skipped = ", ".join(f"{n}_vs_hf{s}" for s in batches for n in STRATEGIES)
        print(f"transformers is not installed (pip install -e '.[bench]'): skipped {skipped}")
    return ratios


def print_table(medians: dict[str, float], batches: dict[str, int]) -> dict[str, float]:
    """Print one line per strategy and batch size (HF columns when HF ran); return the
    lecturekit / HF ratios by RESULT name."""
    with_hf = any(name.endswith(" hf") for name in medians)
    header = f"{'strategy':10s} {'batch':>5s} {'lecturekit':>11s} {'ms/token':>9s}"
    print(header + (f" {'HF':>8s} {'ratio':>6s}" if with_hf else ""))
    ratios = {}
    for suffix, size in batches.items():
        for name in STRATEGIES:
            ours = medians[f"{name}{suffix}"]
            line = f"{name:10s} {size:5d} {ours:9.3f} s {1e3 * ours / NEW_TOKENS:9.2f}"
            if with_hf:
                theirs = medians[f"{name}{suffix} hf"]
                ratios[f"{name}_vs_hf{suffix}"] = ours / theirs
                line += f" {theirs:6.3f} s {ours / theirs:6.2f}"
            print(line)
    return ratios


def profile(model: Transformer, src: torch.Tensor, what: str, rows: int = 25) -> None:
    """Print where cached greedy decoding (or beam search) spends its time, by operator."""
    if what == "greedy":
        run = partial(greedy_cached, model, src)
    else:
        run = partial(lecturekit_runs(model)[f"beam{BEAMS}"], src)
    run()  # warm-up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cached-per-round", type=int, default=3)
    parser.add_argument("--backend", default="sdpa", choices=["math", "sdpa"])
    parser.add_argument("--profile", nargs="?", const="greedy", choices=["greedy", "beam"])
    args = parser.parse_args()
    model, src = build(args.backend)
    if args.profile:
        profile(model, src, args.profile)
        return
    print(machine_line("start"), flush=True)
    speedup = kv_cache_part(model, src, args.rounds, args.cached_per_round)
    ratios = library_part(model, src, args.rounds)
    print(machine_line("end"))
    print(f"RESULT kv_cache_speedup {speedup:.2f}")
    for name, ratio in ratios.items():
        print(f"RESULT {name} {ratio:.2f}")


if __name__ == "__main__":
    main()
