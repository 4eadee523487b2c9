"""Greedy decoding with the KV cache vs recomputing the whole prefix at every step.

Same model and weights (d_model 256, 4 heads, d_ff 1024, 3+3 layers, eval mode), a batch of 8
sources of 32 tokens, 128 new tokens each (EOS ignored, so both runs do the same work). The
tokens of the two runs are checked to be identical.

To stay meaningful on a shared machine, the runs are interleaved: each round runs the
recomputation once and the cached decoding ``--cached-per-round`` times, in alternating
order, so a burst of load hits both paths alike; the figures are medians over the rounds.
Prints the median time of each path and its time per generated token, then
``RESULT kv_cache_speedup <x>`` = median recompute time / median cached time. Goal: >= 10.
``--profile`` prints instead a torch.profiler table of the cached path (where its time goes).

    python benchmarks/decode.py [--rounds 5] [--cached-per-round 3] [--backend sdpa] [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from lecturekit import Transformer, TransformerConfig, padding_mask

BATCH, SRC_LEN, NEW_TOKENS, VOCAB = 8, 32, 128, 1000


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


def profile_cached(model: Transformer, src: torch.Tensor, rows: int = 25) -> None:
    """Print where the cached path spends its time, by operator (self CPU time)."""
    greedy_cached(model, src)  # warm-up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        greedy_cached(model, src)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cached-per-round", type=int, default=3)
    parser.add_argument("--backend", default="sdpa", choices=["math", "sdpa"])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    model, src = build(args.backend)
    if args.profile:
        profile_cached(model, src)
        return
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    greedy_cached(model, src)  # warm-up: first-call allocations are not part of decoding
    times: dict[str, list[float]] = {"cached": [], "recompute": []}
    outputs = {}
    for i in range(args.rounds):
        runs = [("cached", greedy_cached)] * args.cached_per_round
        runs.append(("recompute", greedy_recompute))
        for name, run in runs if i % 2 == 0 else runs[::-1]:
            start = time.perf_counter()
            outputs[name] = run(model, src)
            times[name].append(time.perf_counter() - start)
    if not torch.equal(outputs["cached"], outputs["recompute"]):
        raise SystemExit("cached and recomputed greedy decoding produced different tokens")
    print(f"identical tokens: {tuple(outputs['cached'].shape)}")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, median in medians.items():
        print(
            f"{name:9s} {median:.3f} s (median of {len(times[name])}, "
            f"min {min(times[name]):.3f} s), {1e3 * median / NEW_TOKENS:.2f} ms per token"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"RESULT kv_cache_speedup {medians['recompute'] / medians['cached']:.2f}")


if __name__ == "__main__":
    main()
