"""The debugging lab's symptom gallery: a small model trained on the reverse task with one
bug planted, its training loss and its greedy output on two test sentences, next to the
healthy model's. The lab shows the results shipped in ``symptom_gallery.json`` (computed
once by :func:`write_gallery`), so the page reads the same on every machine; a live run of
:func:`train_with_bug` gives the same picture, not the same last digits.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from lecturekit._common import check_choice, check_int
from lecturekit.data import batching, make_task
from lecturekit.decoding.search import greedy
from lecturekit.lab.bugs import BUGS, plant
from lecturekit.model.config import TransformerConfig
from lecturekit.model.transformer import Transformer
from lecturekit.training.config import small_train_config
from lecturekit.training.loop import fit

__all__ = [
    "GALLERY_BUGS",
    "Symptom",
    "train_with_bug",
    "load_gallery",
    "write_gallery",
]

# the bugs that show in training or generation, not in a probe of a fresh model alone
GALLERY_BUGS = (
    "causal_mask_missing",
    "kv_cache_no_offset",
    "positions_missing",
    "loss_on_probabilities",
)
GALLERY_PATH = Path(__file__).with_name("symptom_gallery.json")
HEALTHY = "healthy"
RECORD_EVERY = 10  # keep the mean loss of every 10 steps


@dataclass(frozen=True)
class Symptom:
    """One training run: ``bug`` (a name of ``BUGS`` or ``"healthy"``), the mean training
    loss of each ``RECORD_EVERY`` steps (``losses``), and the greedy ``outputs`` on two test
    sentences whose correct outputs are ``references``."""

    bug: str
    steps: int
    losses: list[float]
    outputs: list[str]
    references: list[str]


def train_with_bug(bug: str, steps: int = 300, seed: int = 0) -> Symptom:
    """Train a 2+2-layer model (``d_model`` 32) on 2,000 reverse examples for ``steps`` Adam
    steps (batch 64, warm-up over the first sixth, cosine decay, seed ``seed``) with ``bug``
    planted (``"healthy"``: none), then decode the first two test sentences of 9 or more
    letters greedily (at most 14 tokens). About 5 s on one thread for 300 steps."""
    check_choice("bug", bug, (HEALTHY, *BUGS))
    check_int("steps", steps, minimum=2 * RECORD_EVERY)
    task = make_task("reverse", 2000, 100, 100, seed=0)
    pairs = [p for p in task.encoded("test") if len(p[1]) >= 9][:2]
    test = batching.collate(pairs)
    vocab = len(task.tgt_vocab)
    settings = dict(max_steps=steps, batch_size=64, warmup_steps=steps // 6, decay_steps=steps)
    with plant(bug) if bug != HEALTHY else contextlib.nullcontext():
        torch.manual_seed(seed)
        config = TransformerConfig(
            vocab, vocab, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2,
            n_decoder_layers=2, dropout=0.0, max_len=32,
        )  # fmt: skip
        model = Transformer(config)
        history = fit(model, task.encoded("train"), None, small_train_config(**settings))
        tokens = greedy(model, test.src, 14).tokens.tolist()
    return Symptom(
        bug=bug,
        steps=steps,
        losses=[
            round(sum(history.loss[i : i + RECORD_EVERY]) / RECORD_EVERY, 3)
            for i in range(0, steps - RECORD_EVERY + 1, RECORD_EVERY)
        ],
        outputs=[task.decode_tgt(t) for t in tokens],
        references=[task.decode_tgt(t) for _, t in pairs],
    )


def load_gallery(path: str | Path = GALLERY_PATH) -> dict[str, Symptom]:
    """The shipped results: ``"healthy"`` and each of ``GALLERY_BUGS``, by name."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    return {row["bug"]: Symptom(**row) for row in rows}


def write_gallery(path: str | Path = GALLERY_PATH) -> None:
    """Run :func:`train_with_bug` for the healthy model and each of ``GALLERY_BUGS`` (one
    thread, about 25 s) and write the results as JSON to ``path``."""
    rows = [asdict(train_with_bug(bug)) for bug in (HEALTHY, *GALLERY_BUGS)]
    text = json.dumps(rows, ensure_ascii=False, indent=1)
    Path(path).write_text(text + "\n", encoding="utf-8")
