"""Training-step time of lecturekit.Transformer relative to torch.nn.Transformer.

Both models get the same embeddings (scaled by sqrt(d_model), sinusoidal positions), the same
output layer, the same sizes (2+2 layers, d_ff = 4 d_model, 4 heads, dropout 0.1), the same
batch (64 x 32 tokens, with padding) and the same masks. One step = forward, cross-entropy,
backward, Adam (``foreach=True`` for both, so the optimiser adds few operations to either
side). The two are timed in interleaved rounds (alternating which goes first); each round
gives one ratio lecturekit / torch, and the median of these paired ratios is the result (on
a shared machine the load drifts between rounds, and pairing cancels it). The ratio of the
two median times is printed too. Prints one line per d_model, then
``RESULT train_step_ratio <x>`` with the worse (larger) of the two sizes. Goal: <= 1.0.

    python benchmarks/train_step.py [--steps 30] [--backend sdpa]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from lecturekit import Transformer, TransformerConfig, causal_mask, padding_mask

VOCAB, BATCH, LENGTH = 1000, 64, 32


class TorchBaseline(nn.Module):
    """nn.Transformer between the lecturekit model's embeddings and output layer."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        c = model.config
        self.d_model = c.d_model
        self.src_embedding = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embedding = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.load_state_dict(model.state_dict(), strict=False)  # same embeddings and output
        self.positions = model.src_positions
        self.dropout = nn.Dropout(c.dropout)
        self.core = nn.Transformer(
            d_model=c.d_model,
            nhead=c.n_heads,
            num_encoder_layers=c.n_encoder_layers,
            num_decoder_layers=c.n_decoder_layers,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            batch_first=True,
        )

    def forward(self, src, tgt, src_key_padding_mask, tgt_key_padding_mask, tgt_mask):
        scale = math.sqrt(self.d_model)
        src_x = self.dropout(self.positions(self.src_embedding(src) * scale))
        tgt_x = self.dropout(self.positions(self.tgt_embedding(tgt) * scale))
        hidden = self.core(
            src_x,
            tgt_x,
            tgt_mask=tgt_mask,
            src_key_padding_mask=src_key_padding_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=src_key_padding_mask,
            tgt_is_causal=True,
        )
        return self.output_proj(hidden)


def make_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (B, T) in [3, VOCAB) with 0-padding after a random length in [24, 32]."""
    tokens = torch.randint(3, VOCAB, (2, BATCH, LENGTH), generator=generator)
    lengths = torch.randint(24, LENGTH + 1, (2, BATCH, 1), generator=generator)
    tokens = tokens.masked_fill(torch.arange(LENGTH) >= lengths, 0)
    return tokens[0], tokens[1]


def time_ratio(d_model: int, steps: int, backend: str) -> float:
    torch.manual_seed(0)
    config = TransformerConfig(
        VOCAB,
        VOCAB,
        d_model=d_model,
        n_heads=4,
        d_ff=4 * d_model,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.1,
        attention_backend=backend,
    )
    ours = Transformer(config)
    theirs = TorchBaseline(ours)
    src, tgt = make_batch(torch.Generator().manual_seed(1))
    labels = tgt.roll(-1, dims=1)
    src_padding, tgt_padding = padding_mask(src, 0), padding_mask(tgt, 0)
    future = causal_mask(LENGTH)

    runs = {
        "lecturekit": (
            lambda: ours(
                src, tgt, src_key_padding_mask=src_padding, tgt_key_padding_mask=tgt_padding
            ),
            torch.optim.Adam(ours.parameters(), lr=1e-4, foreach=True),
        ),
        "torch": (
            lambda: theirs(src, tgt, src_padding, tgt_padding, future),
            torch.optim.Adam(theirs.parameters(), lr=1e-4, foreach=True),
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(steps + 3):  # the first 3 rounds warm up
        order = list(runs) if i % 2 == 0 else list(reversed(runs))
        for name in order:
            forward, optimizer = runs[name]
            start = time.perf_counter()
            logits = forward()
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=0)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if i >= 3:
                times[name].append(time.perf_counter() - start)
    ours_ms = statistics.median(times["lecturekit"]) * 1e3
    theirs_ms = statistics.median(times["torch"]) * 1e3
    paired = statistics.median(
        a / b for a, b in zip(times["lecturekit"], times["torch"], strict=True)
    )
    print(
        f"d_model={d_model} backend={backend}: median lecturekit {ours_ms:.1f} ms, "
        f"nn.Transformer {theirs_ms:.1f} ms (ratio of medians {ours_ms / theirs_ms:.3f}), "
        f"median paired ratio {paired:.3f}"
    )
    return paired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--backend", default="sdpa", choices=["math", "sdpa"])
    args = parser.parse_args()
    ratios = [time_ratio(d_model, args.steps, args.backend) for d_model in (128, 256)]
    print(f"RESULT train_step_ratio {max(ratios):.3f}")


if __name__ == "__main__":
    main()
