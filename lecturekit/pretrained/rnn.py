"""Chapter 1's shipped RNN encoder-decoders, with and without additive attention.

The models are :class:`lecturekit.chapters.ch01_attention.RNNSeq2Seq`, not Transformers, so
they have their own small registry beside :data:`lecturekit.pretrained.RECIPES`, with the
same contract: a recipe says how a model was made, :func:`load_rnn` returns the shipped file,
:func:`build_rnn` (or ``python -m lecturekit.pretrained build rnn-copy-attn-s0``) trains it
again from scratch on one CPU thread, deterministically.

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

__all__ = [
    "RNNRecipe",
    "RNN_RECIPES",
    "RNN_SEEDS",
    "rnn_task",
    "rnn_checkpoint_path",
    "build_rnn",
    "load_rnn",
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
    from lecturekit.data import make_task

    return make_task("copy", **RNN_TASK_KWARGS)


def rnn_checkpoint_path(name: str) -> Path:
    """Where the shipped checkpoint of recipe ``name`` lives."""
    _recipe(name)
    return DATA_DIR / f"{name}.pt"


def _make_model(recipe: RNNRecipe, task: Any):
    from lecturekit.chapters.ch01_attention import RNNSeq2Seq, RNNSeq2SeqConfig

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
    from lecturekit.chapters.ch01_attention import exact_match_by_length, train_rnn_seq2seq

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
    _save_payload(
        {"recipe": dataclasses.asdict(recipe), "state": state, "metadata": metadata}, path
    )
    return model, metadata


def _save_payload(payload: dict[str, Any], path: str | Path) -> None:
    """Write ``payload`` (recipe, state, metadata) to ``path`` with a SHA-256 checksum, the way
    :func:`lecturekit.training.checkpoint.save_checkpoint` writes one: atomically, read back."""
    from lecturekit.training.checkpoint import _checksum, _write_atomically

    payload = {k: v for k, v in payload.items() if k != "checksum"}
    payload["checksum"] = _checksum(payload)
    _write_atomically(payload, Path(path))


def _load_payload(path: Path, rebuild: str) -> dict[str, Any]:
    """The payload :func:`_save_payload` wrote to ``path``, read safely (``weights_only``);
    raises ``ValueError`` naming ``rebuild`` (the command that remakes the file) when the file
    cannot be read or its checksum is missing or does not match."""
    from lecturekit.pretrained._files import read_payload

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
