"""Training-step time of lecturekit.Transformer relative to torch.nn.Transformer and to
Hugging Face transformers' BART.

Both models get the same embeddings (scaled by sqrt(d_model), sinusoidal positions), the same
output layer, the same sizes (2+2 layers, d_ff = 4 d_model, 4 heads, dropout 0.1), the same
batch (64 x 32 tokens, with padding) and the same masks. One step = forward, cross-entropy,
backward, Adam (``foreach=True`` for both, so the optimiser adds few operations to either
side). The two are timed in interleaved rounds (alternating which goes first); each round
gives one ratio lecturekit / torch, and the median of these paired ratios is the result (on
a shared machine the load drifts between rounds, and pairing cancels it). The ratio of the
two median times is printed too. Prints one line per d_model, then
``RESULT train_step_ratio <x>`` with the worse (larger) of the two sizes. Goal: <= 1.0.

The second reference is the model a user would pick from Hugging Face: a
``BartForConditionalGeneration`` built from a config with the sizes of
``benchmarks/decode.py`` (d_model 256, 4 heads, FFN 1024, 3+3 layers, vocabulary 1000,
dropout 0, ReLU; random weights, nothing downloaded), against lecturekit's model of the same
sizes, on the same batch with the same loss, and AdamW (``foreach=True``) on both sides.
BART differs in details that cost little (learned positions, a LayerNorm after the
embeddings, biases in every projection), so this compares two complete implementations of
the same architecture. Prints ``RESULT train_step_vs_hf <x>`` (goal: <= 1.0); without
``transformers`` (``pip install -e '.[bench]'``) it says so and skips that comparison.

    python benchmarks/train_step.py [--steps 30] [--backend sdpa]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

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
    times = time_interleaved(runs, labels, steps)
    return report(f"d_model={d_model} backend={backend}", times, "torch", "nn.Transformer")


def time_interleaved(
    runs: dict[str, tuple[Callable[[], torch.Tensor], torch.optim.Optimizer]],
    labels: torch.Tensor,
    steps: int,
) -> dict[str, list[float]]:
    """Seconds of each run's training step (forward, cross-entropy, backward, optimiser),
    ``steps`` rounds after 3 warm-up rounds, alternating which run goes first."""
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
    return times


def report(label: str, times: dict[str, list[float]], other: str, other_name: str) -> float:
    """Print both medians and the median paired ratio lecturekit / ``other``; return it."""
    ours_ms = statistics.median(times["lecturekit"]) * 1e3
    theirs_ms = statistics.median(times[other]) * 1e3
    paired = statistics.median(
        a / b for a, b in zip(times["lecturekit"], times[other], strict=True)
    )
    print(
        f"{label}: median lecturekit {ours_ms:.1f} ms, {other_name} {theirs_ms:.1f} ms "
        f"(ratio of medians {ours_ms / theirs_ms:.3f}), median paired ratio {paired:.3f}"
    )
    return paired


def time_ratio_vs_hf(steps: int, backend: str) -> float | None:
    """lecturekit / BART training-step time at the sizes of benchmarks/decode.py; None when
    ``transformers`` is not installed."""
    try:
        from transformers import BartConfig, BartForConditionalGeneration
    except ImportError:
        return None
    torch.manual_seed(0)
    ours = Transformer(
        TransformerConfig(
            VOCAB,
            VOCAB,
            d_model=256,
            n_heads=4,
            d_ff=1024,
            n_encoder_layers=3,
            n_decoder_layers=3,
            dropout=0.0,
            activation="relu",
            attention_backend=backend,
        )
    )
    bart = BartForConditionalGeneration(
        BartConfig(
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
            max_position_embeddings=LENGTH,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
            attn_implementation="sdpa",
        )
    )
    ours.train(), bart.train()
    src, tgt = make_batch(torch.Generator().manual_seed(1))
    labels = tgt.roll(-1, dims=1)
    src_padding, tgt_padding = padding_mask(src, 0), padding_mask(tgt, 0)
    runs = {
        "lecturekit": (
            lambda: ours(
                src, tgt, src_key_padding_mask=src_padding, tgt_key_padding_mask=tgt_padding
            ),
            torch.optim.AdamW(ours.parameters(), lr=1e-4, foreach=True),
        ),
        "bart": (
            lambda: (
                bart(
                    input_ids=src,
                    attention_mask=~src_padding,
                    decoder_input_ids=tgt,
                    decoder_attention_mask=~tgt_padding,
                ).logits
            ),
            torch.optim.AdamW(bart.parameters(), lr=1e-4, foreach=True),
        ),
    }
    times = time_interleaved(runs, labels, steps)
    return report(f"BART sizes, backend={backend}", times, "bart", "HF BART")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--backend", default="sdpa", choices=["math", "sdpa"])
    args = parser.parse_args()
    ratios = [time_ratio(d_model, args.steps, args.backend) for d_model in (128, 256)]
    vs_hf = time_ratio_vs_hf(args.steps, args.backend)
    if vs_hf is None:
        print("skipped: the comparison with Hugging Face BART needs `pip install -e '.[bench]'`")
    print(f"RESULT train_step_ratio {max(ratios):.3f}")
    if vs_hf is not None:
        print(f"RESULT train_step_vs_hf {vs_hf:.3f}")


if __name__ == "__main__":
    main()
