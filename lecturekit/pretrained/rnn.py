"""Chapter 1's shipped RNN encoder-decoders, with and without additive attention.

The models are :class:`lecturekit.model.rnn.RNNSeq2Seq`, not Transformers, so they have
their own small registry beside :data:`lecturekit.pretrained.RECIPES`, with the same
contract: a recipe says how a model was made, :func:`load_rnn` returns the shipped file,
:func:`build_rnn` (or ``python -m lecturekit.pretrained build rnn-copy-attn-s0``) trains it
again from scratch on one CPU thread, deterministically: :func:`train_rnn_seq2seq` (Adam and
the package's plain loop), scored by :func:`exact_match_by_length`.

Every pair ``rnn-copy-plain-s<seed>`` / ``rnn-copy-attn-s<seed>`` shares the data, the
initial weights of every shared layer, the batch order, the optimiser and the number of
updates; the only difference is the attention.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lecturekit._common import check_int, check_number
from lecturekit.data import make_loader, make_task
from lecturekit.decoding import greedy
from lecturekit.model.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from lecturekit.pretrained._files import read_payload
from lecturekit.training.checkpoint import _write_payload
from lecturekit.training.loop import Stopping, train_steps

__all__ = [
    "RNNRecipe",
    "RNN_RECIPES",
    "RNN_SEEDS",
    "rnn_task",
    "rnn_checkpoint_path",
    "build_rnn",
    "load_rnn",
    "train_rnn_seq2seq",
    "exact_match_by_length",
]

DATA_DIR = Path(__file__).resolve().parent

RNN_SEEDS = (0, 1, 2)
"""Seeds of the chapter 1 pairs ``rnn-copy-plain-s<seed>`` and ``rnn-copy-attn-s<seed>``."""

RNN_TASK_KWARGS = {"n_train": 5000, "n_valid": 0, "n_test": 2000, "seed": 0}
"""The copy task (letters a-j, length 1-12) that every chapter 1 model trains on."""


@dataclass(frozen=True)
class RNNRecipe:
    """How one chapter 1 RNN model is made.

    Attributes:
        name: registry key and file name (``<name>.pt``).
        description: one line.
        attention: with (True) or without additive attention.
        seed: seeds the initial weights and the batch order.
        steps, batch_size, lr: training budget (Adam, gradient clipping at 1).
        d_embed, d_hidden: model sizes.
    """

    name: str
    description: str
    attention: bool
    seed: int
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    d_embed: int = 16
    d_hidden: int = 32


RNN_RECIPES: dict[str, RNNRecipe] = {}
for _seed in RNN_SEEDS:
    for _kind, _attention in (("plain", False), ("attn", True)):
        _name = f"rnn-copy-{_kind}-s{_seed}"
        RNN_RECIPES[_name] = RNNRecipe(
            name=_name,
            description=(
                f"copy task, GRU encoder-decoder {'with' if _attention else 'without'} "
                f"additive attention, seed {_seed}: 1500 steps, d_hidden 32 (chapter 1)"
            ),
            attention=_attention,
            seed=_seed,
        )


def _recipe(name: str) -> RNNRecipe:
    if not isinstance(name, str) or name not in RNN_RECIPES:
        raise ValueError(f"name must be one of {sorted(RNN_RECIPES)}, got {name!r}")
    return RNN_RECIPES[name]


def rnn_task():
    """The copy task of every chapter 1 recipe (a ``TaskData``)."""
    return make_task("copy", **RNN_TASK_KWARGS)


def rnn_checkpoint_path(name: str) -> Path:
    """Where the shipped checkpoint of recipe ``name`` lives."""
    _recipe(name)
    return DATA_DIR / f"{name}.pt"


def _make_model(recipe: RNNRecipe, task: Any):
    config = RNNSeq2SeqConfig(
        src_vocab_size=len(task.src_vocab),
        tgt_vocab_size=len(task.tgt_vocab),
        d_embed=recipe.d_embed,
        d_hidden=recipe.d_hidden,
        attention=recipe.attention,
    )
    return RNNSeq2Seq(config)


def build_rnn(name: str, path: str | Path | None = None):
    """Train recipe ``name`` from scratch on one thread and save it (default: the shipped
    file). Returns ``(model, metadata)``; the metadata holds the training losses and the
    test exact match per source length."""
    recipe = _recipe(name)
    path = Path(path) if path is not None else rnn_checkpoint_path(name)
    task = rnn_task()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # float reductions in a fixed order: a repeatable build
    try:
        torch.manual_seed(recipe.seed)
        model = _make_model(recipe, task)
        start = time.perf_counter()
        losses = train_rnn_seq2seq(
            model,
            task.encoded("train"),
            steps=recipe.steps,
            batch_size=recipe.batch_size,
            lr=recipe.lr,
            seed=recipe.seed,
        )
        seconds = time.perf_counter() - start
        by_length = exact_match_by_length(model, task.encoded("test"))
    finally:
        torch.set_num_threads(threads)
    metadata = {
        "recipe": name,
        "train_seconds": round(seconds, 1),
        "losses": losses,
        "test_exact_match_by_length": {str(k): v for k, v in by_length.items()},
    }
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _write_payload(  # atomic, read back, with a SHA-256 checksum
        {"recipe": dataclasses.asdict(recipe), "state": state, "metadata": metadata}, Path(path)
    )
    return model, metadata


def _load_payload(path: Path, rebuild: str) -> dict[str, Any]:
    """The payload :func:`build_rnn` wrote to ``path``, read safely (``weights_only``);
    raises ``ValueError`` naming ``rebuild`` (the command that remakes the file) when the file
    cannot be read or its checksum is missing or does not match."""
    return read_payload(path, "name", f"reinstall lecturekit or rebuild it with `{rebuild}`")


def load_rnn(name: str):
    """The shipped model of recipe ``name`` (eval mode) and its metadata, ``(model, metadata)``.

    ``metadata["losses"]``: the training loss of every step; ``metadata[
    "test_exact_match_by_length"]``: ``{source length (str): exact match}`` on the test split.
    """
    recipe = _recipe(name)
    path = rnn_checkpoint_path(name)
    if not path.is_file():
        raise FileNotFoundError(
            f"name: no shipped checkpoint for {name!r} at {path}; create it with "
            f"`python -m lecturekit.pretrained build {name}`"
        )
    saved = _load_payload(path, f"python -m lecturekit.pretrained build {name}")
    if saved["recipe"] != dataclasses.asdict(recipe):
        raise ValueError(
            f"{path} was built from another recipe; rebuild it with "
            f"`python -m lecturekit.pretrained build {name}`"
        )
    model = _make_model(recipe, rnn_task())
    model.load_state_dict(saved["state"])
    model.eval()
    return model, saved["metadata"]


def train_rnn_seq2seq(
    model: RNNSeq2Seq,
    pairs: list[tuple[list[int], list[int]]],
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    clip_grad_norm: float = 1.0,
    seed: int = 0,
) -> list[float]:
    """Teacher-forced training with Adam and the package's loop; returns the losses.

    ``pairs`` are (source ids, target ids) without special tokens; batches are drawn from a
    loader seeded with ``seed`` (the same order for every model given the same seed), one
    pass after another until ``steps`` updates are done.
    """
    check_int("steps", steps, minimum=1)
    check_number("lr", lr, minimum=0, exclusive=("minimum",))
    if not pairs:
        raise ValueError("pairs must not be empty")
    c = model.config
    loader = make_loader(
        pairs, batch_size=batch_size, shuffle=True, seed=seed, pad_id=c.pad_id,
        bos_id=c.bos_id, eos_id=c.eos_id,
    )  # fmt: skip
    batches = _cycle(loader)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()

    def step_loss(step: int) -> Tensor:
        batch = next(batches)
        logits, _ = model(batch.src, batch.tgt_in)  # (B, T, V)
        return F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=c.pad_id)

    losses = train_steps(
        step_loss, optimizer, Stopping(max_steps=steps), clip_grad_norm=clip_grad_norm
    )
    model.eval()
    return losses


def _cycle(loader: Any):
    """Endless passes over ``loader``, re-seeding its sampler each epoch."""
    epoch = 0
    while True:
        sampler = getattr(loader, "batch_sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


@torch.no_grad()
def exact_match_by_length(
    model: RNNSeq2Seq, pairs: list[tuple[list[int], list[int]]], *, batch_size: int = 256
) -> dict[int, float]:
    """Greedy-decode every source and return ``{source length: exact-match rate}``.

    A prediction counts as correct when its tokens before ``<eos>`` equal the target.
    """
    if not pairs:
        raise ValueError("pairs must not be empty")
    hits: dict[int, list[int]] = {}
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        src = nn.utils.rnn.pad_sequence(
            [torch.tensor(s) for s, _ in chunk], batch_first=True, padding_value=model.pad_id
        )
        max_len = max(len(t) for _, t in chunk) + 2
        tokens = greedy(model, src, max_len).tokens.tolist()
        for row, (s, t) in zip(tokens, chunk, strict=True):
            cut = row.index(model.eos_id) if model.eos_id in row else len(row)
            hits.setdefault(len(s), []).append(int(row[:cut] == list(t)))
    return {n: sum(h) / len(h) for n, h in sorted(hits.items())}
