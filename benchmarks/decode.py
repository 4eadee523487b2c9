"""Greedy decoding with the KV cache vs recomputing the whole prefix at every step.

Same model and weights (d_model 256, 4 heads, d_ff 1024, 3+3 layers, eval mode), a batch of 8
sources of 32 tokens, 128 new tokens each (EOS ignored, so both runs do the same work). The
tokens of the two runs are checked to be identical. Prints the times, then
``RESULT kv_cache_speedup <x>`` = median recompute time / median cached time. Goal: >= 5.

    python benchmarks/decode.py [--repeats 3] [--backend sdpa]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from lecturekit import Transformer, TransformerConfig, padding_mask

BATCH, SRC_LEN, NEW_TOKENS, VOCAB = 8, 32, 128, 1000


@torch.no_grad()
def greedy_cached(model: Transformer, src: torch.Tensor) -> torch.Tensor:
    """Each step feeds one token; keys/values of earlier steps come from the cache."""
    src_padding = padding_mask(src, model.config.pad_id)
    memory = model.encode(src, src_key_padding_mask=src_padding)
    cache = model.init_cache(memory, memory_key_padding_mask=src_padding)
    token = torch.full((src.size(0),), model.config.bos_id, dtype=torch.long)
    generated = []
    for _ in range(NEW_TOKENS):
        token = model.decode_step(token, cache).argmax(-1)  # (B,)
        generated.append(token)
    return torch.stack(generated, dim=1)  # (B, NEW_TOKENS)


@torch.no_grad()
def greedy_recompute(model: Transformer, src: torch.Tensor) -> torch.Tensor:
    """Each step runs the decoder over the whole prefix again and keeps the last position."""
    src_padding = padding_mask(src, model.config.pad_id)
    memory = model.encode(src, src_key_padding_mask=src_padding)
    prefix = torch.full((src.size(0), 1), model.config.bos_id, dtype=torch.long)
    for _ in range(NEW_TOKENS):
        logits = model.decode(prefix, memory, memory_key_padding_mask=src_padding)
        prefix = torch.cat([prefix, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return prefix[:, 1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", default="sdpa", choices=["math", "sdpa"])
    args = parser.parse_args()
    torch.manual_seed(0)
    config = TransformerConfig(
        VOCAB,
        VOCAB,
        d_model=256,
        n_heads=4,
        d_ff=1024,
        n_encoder_layers=3,
        n_decoder_layers=3,
        attention_backend=args.backend,
    )
    model = Transformer(config).eval()
    src = torch.randint(3, VOCAB, (BATCH, SRC_LEN), generator=torch.Generator().manual_seed(1))
    src[:, 28:] = torch.where(torch.arange(BATCH)[:, None] % 2 == 0, 0, src[:, 28:])  # padding
    times: dict[str, list[float]] = {"cached": [], "recompute": []}
    outputs = {}
    for i in range(args.repeats):
        runs = [("cached", greedy_cached), ("recompute", greedy_recompute)]
        for name, run in runs if i % 2 == 0 else runs[::-1]:
            start = time.perf_counter()
            outputs[name] = run(model, src)
            times[name].append(time.perf_counter() - start)
    if not torch.equal(outputs["cached"], outputs["recompute"]):
        raise SystemExit("cached and recomputed greedy decoding produced different tokens")
    cached, recompute = statistics.median(times["cached"]), statistics.median(times["recompute"])
    print(f"identical tokens: {tuple(outputs['cached'].shape)}")
    print(f"cached {cached:.3f} s, recompute {recompute:.3f} s (median of {args.repeats})")
    print(f"RESULT kv_cache_speedup {recompute / cached:.2f}")


if __name__ == "__main__":
    main()
