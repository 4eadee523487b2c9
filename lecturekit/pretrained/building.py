"""Training a registered recipe from scratch (:func:`train_recipe`) and saving it as the
shipped checkpoint (:func:`build`); the registry itself is ``lecturekit.pretrained``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lecturekit._common import check_int
from lecturekit.model.config import TransformerConfig
from lecturekit.model.transformer import Transformer
from lecturekit.pretrained import _recipe, checkpoint_path, recipe_task
from lecturekit.training.averaging import KeepLastCheckpoints
from lecturekit.training.checkpoint import load_checkpoint, save_checkpoint
from lecturekit.training.config import TrainConfig
from lecturekit.training.evaluation import evaluate
from lecturekit.training.loop import fit

__all__ = ["TrainedRecipe", "train_recipe", "build"]


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    # a fixed thread count: float reductions in a fixed order, so the build is repeatable
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class TrainedRecipe:
    """What :func:`train_recipe` returns: the trained ``model`` (a ``Transformer``), its
    ``train_config`` and ``history``, the training time in ``seconds``, and the weights kept
    for checkpoint averaging (``checkpoints``: step -> state dict; empty when the recipe
    keeps none)."""

    model: Any
    train_config: Any
    history: Any
    seconds: float
    checkpoints: dict[int, dict[str, Any]]


def train_recipe(
    name: str, *, max_steps: int | None = None, threads: int = 1, progress: bool = False
) -> TrainedRecipe:
    """Train recipe ``name`` from scratch without saving anything.

    Deterministic: seeded data, initialisation and training on ``threads`` CPU threads (the
    shipped files use 1; another count changes the order of float reductions, which is how
    ``benchmarks/rebuild_spread.py`` measures what a reader's machine may change).
    ``max_steps`` stops after that many updates (None: the recipe's own budget): the first
    steps of a rebuild follow the shipped training curve on any machine, long before
    floating-point noise has grown (``tests/test_pretrained.py``).
    """
    recipe = _recipe(name)
    check_int("threads", threads, minimum=1)
    check_int("max_steps", max_steps, minimum=1, optional=True)
    task = recipe_task(name)
    train = {**recipe.train, "progress": progress, "device": "cpu"}
    if max_steps is not None:
        train["max_steps"] = min(max_steps, recipe.train.get("max_steps") or max_steps)
    with _torch_threads(threads):
        torch.manual_seed(recipe.seed)
        config = TransformerConfig(
            src_vocab_size=len(task.src_vocab),
            tgt_vocab_size=len(task.tgt_vocab),
            **recipe.model,
        )
        model = Transformer(config)
        train_config = TrainConfig(**train)
        keeper = None
        if recipe.checkpoint_every is not None:
            keeper = KeepLastCheckpoints(recipe.checkpoint_every, recipe.keep_checkpoints)
        start = time.perf_counter()
        history = fit(model, task, config=train_config, on_step=keeper)
        seconds = time.perf_counter() - start
    return TrainedRecipe(
        model=model,
        train_config=train_config,
        history=history,
        seconds=seconds,
        checkpoints=dict(keeper.states) if keeper is not None else {},
    )


def build(name: str, path: str | Path | None = None, progress: bool = False, threads: int = 1):
    """Train recipe ``name`` from scratch (:func:`train_recipe`) and save it (default: the
    shipped file).

    Returns the saved ``Checkpoint``; its metadata holds the test-split exact match, token
    accuracy and loss and the whole training history (``History.to_dict()``, plain lists).
    """
    recipe = _recipe(name)
    path = Path(path) if path is not None else checkpoint_path(name)
    trained = train_recipe(name, threads=threads, progress=progress)
    task = recipe_task(name)
    with _torch_threads(threads):
        test = evaluate(trained.model, task.loader("test", batch_size=256))
    history = trained.history
    metadata = {
        "recipe": recipe.name,
        "description": recipe.description,
        "task": recipe.task,
        "task_kwargs": dict(recipe.task_kwargs),
        "max_src_len": recipe.max_src_len,
        "seed": recipe.seed,
        "steps": history.step[-1] if history.step else 0,
        "train_seconds": round(trained.seconds, 1),
        "test_exact_match": test["exact_match"],
        "test_token_accuracy": test["token_accuracy"],
        "test_loss": test["loss"],
        "history": history.to_dict(),
    }
    if trained.checkpoints:
        metadata["checkpoints"] = trained.checkpoints
    save_checkpoint(
        path,
        trained.model,
        src_vocab=task.src_vocab,
        tgt_vocab=task.tgt_vocab,
        train_config=trained.train_config,
        metadata=metadata,
    )
    return load_checkpoint(path)
