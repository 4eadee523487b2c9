"""Small pretrained models shipped with the package, and the recipes that re-create them.

A *recipe* says how a model was made: the task (generated offline, seeded), the model
configuration, the training configuration and the seed. ``load(name)`` returns the shipped
checkpoint (a :class:`lecturekit.training.checkpoint.Checkpoint`: model, vocabularies, metadata);
``python -m lecturekit.pretrained build [name ...]`` trains the recipes again from scratch
and overwrites the shipped files (the same machine gives the same weights).

Why ship models at all: a few hundred training steps amplify last-bit floating-point
differences (CPU instruction set, thread count, torch version) into visibly different
losses and accuracies, so a number the book prints about a trained model comes from a
shipped checkpoint, and its training curve from the history recorded in the checkpoint's
metadata (``metadata["history"]``, see :func:`history`). Rebuilding on another machine
gives a model whose first training steps follow the shipped curve (to about 1e-7, while
another seed differs by 10 % from the first steps on) and whose final evaluation figures
are another draw of the recipe: as far from the shipped ones as a change of seed, not bit
for bit (measured by ``benchmarks/rebuild_spread.py``, checked by tests/test_pretrained.py).

Adding a recipe is a few lines, e.g. in a chapter's exercise module or below::

    from lecturekit.pretrained import Recipe, register
    register(Recipe(
        name="reverse-ss",
        description="reverse task trained with scheduled sampling (chapter 6)",
        task="reverse", task_kwargs={"n_train": 2000},
        model={"d_model": 32, "n_heads": 2, "d_ff": 64,
               "n_encoder_layers": 1, "n_decoder_layers": 1},
        train={"epochs": 5, "batch_size": 64,
               "scheduled_sampling": {"schedule": "linear", "k": 1.0, "c": 0.005}},
        seed=0,
    ))

then run ``python -m lecturekit.pretrained build reverse-ss`` and commit the ``.pt`` file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lecturekit._common import check_int
from lecturekit._lazy import attach
from lecturekit.data import make_task
from lecturekit.training.checkpoint import load_checkpoint
from lecturekit.training.history import History

__all__ = [
    "Recipe",
    "RECIPES",
    "register",
    "list_recipes",
    "load",
    "build",
    "train_recipe",
    "TrainedRecipe",
    "checkpoint_path",
    "history",
    "recipe_task",
    "checkpoints",
]

# submodules (e.g. ``pretrained.<module>``) resolve on first attribute access
__getattr__, __dir__ = attach(__name__, names=False)

DATA_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Recipe:
    """How one pretrained model is made.

    Attributes:
        name: registry key and file name (``<name>.pt`` in this package).
        description: one line, shown by ``list_recipes()``.
        task: a ``lecturekit.data`` task name; ``task_kwargs`` go to ``make_task``.
        model: ``TransformerConfig`` arguments (vocabulary sizes come from the task).
        train: ``TrainConfig`` arguments (``progress`` is turned off).
        seed: seeds the model initialisation (the training seed is ``train["seed"]``,
            default 0).
        max_src_len: keep only pairs whose source has at most this many tokens, in every
            split (None: keep all); chapters use it to keep CPU training short.
        checkpoint_every, keep_checkpoints: also save the weights of every
            ``checkpoint_every`` steps, the last ``keep_checkpoints`` of them, for checkpoint
            averaging (:func:`checkpoints`); None and 0: save only the final weights.
    """

    name: str
    description: str
    task: str
    model: dict[str, Any]
    train: dict[str, Any]
    seed: int = 0
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    max_src_len: int | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int = 0

    def __post_init__(self) -> None:
        check_int("checkpoint_every", self.checkpoint_every, minimum=1, optional=True)
        check_int("keep_checkpoints", self.keep_checkpoints, minimum=0)
        if (self.checkpoint_every is None) != (self.keep_checkpoints == 0):
            raise ValueError(
                "checkpoint_every and keep_checkpoints go together: set both (e.g. 50 and 5) "
                f"or neither, got {self.checkpoint_every!r} and {self.keep_checkpoints!r}"
            )
        if self.max_src_len is not None and (
            isinstance(self.max_src_len, bool)
            or not isinstance(self.max_src_len, int)
            or self.max_src_len < 1
        ):
            raise ValueError(
                f"max_src_len must be a positive int or None, got {self.max_src_len!r}"
            )


RECIPES: dict[str, Recipe] = {}


def register(recipe: Recipe) -> Recipe:
    """Add ``recipe`` to the registry (a name may be registered once)."""
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a Recipe, got {type(recipe).__name__}")
    if recipe.name in RECIPES and RECIPES[recipe.name] != recipe:
        raise ValueError(f"recipe: the name {recipe.name!r} is already registered")
    RECIPES[recipe.name] = recipe
    return recipe


def list_recipes() -> dict[str, str]:
    """Recipe name -> description (with whether its checkpoint is shipped)."""
    return {
        name: r.description + ("" if checkpoint_path(name).is_file() else " [not built]")
        for name, r in RECIPES.items()
    }


def checkpoint_path(name: str) -> Path:
    """Where the shipped checkpoint of recipe ``name`` lives."""
    _recipe(name)
    return DATA_DIR / f"{name}.pt"


def _recipe(name: str) -> Recipe:
    if not isinstance(name, str):
        raise TypeError(
            f"name must be a recipe name (str), one of {sorted(RECIPES)}, got "
            f"{type(name).__name__} ({name!r:.80})"
        )
    if name not in RECIPES:
        raise ValueError(f"name must be one of {sorted(RECIPES)}, got {name!r}")
    return RECIPES[name]


def load(name: str, **runtime_overrides: Any):
    """The shipped checkpoint of recipe ``name``: a ``Checkpoint`` with ``.model`` (eval
    mode), ``.src_vocab``, ``.tgt_vocab`` and ``.metadata`` (task, test exact match, ...).

    ``runtime_overrides``: e.g. ``attention_backend="sdpa"`` (see ``load_checkpoint``).
    """
    path = checkpoint_path(name)
    if not path.is_file():
        raise FileNotFoundError(
            f"name: no shipped checkpoint for {name!r} at {path}; create it with "
            f"`python -m lecturekit.pretrained build {name}`"
        )
    return load_checkpoint(path, **runtime_overrides)


def recipe_task(name: str):
    """The data recipe ``name`` trains and is evaluated on: ``make_task(task, **task_kwargs)``
    with every split cut to sources of at most ``max_src_len`` tokens (a ``TaskData``)."""
    recipe = _recipe(name)
    task = make_task(recipe.task, **recipe.task_kwargs)
    if recipe.max_src_len is None:
        return task
    limit = recipe.max_src_len

    def short(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [pair for pair in pairs if len(task.encode_src(pair[0])) <= limit]

    return dataclasses.replace(
        task, train=short(task.train), valid=short(task.valid), test=short(task.test)
    )


def history(name: str):
    """The training history recorded when the shipped checkpoint ``name`` was built, as a
    ``lecturekit.training.History`` (``lecturekit.book.plotting.plot_training`` draws its
    curves)."""
    recorded = load(name).metadata.get("history")
    if recorded is None:
        raise ValueError(
            f"name: the shipped checkpoint {name!r} records no training history; rebuild it "
            f"with `python -m lecturekit.pretrained build {name}`"
        )
    return History(**recorded)


def checkpoints(name: str) -> dict[int, dict[str, Any]]:
    """The intermediate weights saved when the shipped checkpoint ``name`` was built: step ->
    state dict, oldest first (the recipe's ``checkpoint_every`` / ``keep_checkpoints``); the
    last one is the shipped model's. Average them with
    ``lecturekit.training.averaging.average_checkpoints``."""
    saved = load(name).metadata.get("checkpoints")
    if not saved:
        raise ValueError(
            f"name: the shipped checkpoint {name!r} keeps no intermediate weights; give its "
            "recipe checkpoint_every and keep_checkpoints and rebuild it with "
            f"`python -m lecturekit.pretrained build {name}`"
        )
    return {int(step): state for step, state in sorted(saved.items())}


# training a recipe lives in its own module; defined after the registry it reads
from lecturekit.pretrained.building import TrainedRecipe, build, train_recipe  # noqa: E402

# ----------------------------------------------------------------------------------------
# The shipped recipes
# ----------------------------------------------------------------------------------------

register(
    Recipe(
        name="reverse-tiny",
        description=(
            "reverse a string of letters after only 128 steps: deliberately under-trained, "
            "1+1 layers, d_model 32 (the smallest shipped model, for fast tests)"
        ),
        task="reverse",
        task_kwargs={"n_train": 1000, "n_valid": 100, "n_test": 200},
        model={
            "d_model": 32,
            "n_heads": 2,
            "d_ff": 64,
            "n_encoder_layers": 1,
            "n_decoder_layers": 1,
            "dropout": 0.0,
            "max_len": 32,
        },
        train={"epochs": 4, "batch_size": 32, "warmup_steps": 50, "lr_factor": 1.0},
    )
)

register(
    Recipe(
        name="translation-small",
        description=(
            "toy English-like -> Chinese-like translation with word reordering "
            "(cross-attention maps, chapters 4-5); 2+2 layers, d_model 64, d_ff 256"
        ),
        task="translation",
        model={
            "d_model": 64,
            "n_heads": 4,
            "d_ff": 256,
            "n_encoder_layers": 2,
            "n_decoder_layers": 2,
            "dropout": 0.0,
            "max_len": 64,
        },
        train={"epochs": 3, "max_steps": 900, "batch_size": 64, "warmup_steps": 200},
    )
)


register(
    Recipe(
        name="reverse-small",
        description=(
            "reverse strings of at most 8 letters: 1000 steps with label smoothing and the "
            "paper's warm-up schedule, 1+1 layers, d_model 32, with the weights of steps "
            "800-1000 for checkpoint averaging (chapters 4-5)"
        ),
        task="reverse",
        task_kwargs={"n_train": 4000, "n_valid": 300, "n_test": 300},
        max_src_len=8,
        model={
            "d_model": 32,
            "n_heads": 4,
            "d_ff": 64,
            "n_encoder_layers": 1,
            "n_decoder_layers": 1,
            "dropout": 0.0,
            "max_len": 32,
        },
        train={
            "max_steps": 1000,
            "batch_size": 128,
            "schedule": "noam",
            "warmup_steps": 100,
            "lr_factor": 0.5,
            "label_smoothing": 0.1,
            "eval_every": 200,
            "seed": 0,
        },
        checkpoint_every=50,
        keep_checkpoints=5,
    )
)


# ----------------------------------------------------------------------------------------
# Chapter 6: teacher forcing vs scheduled sampling (number reading, 5 seeds each)
# ----------------------------------------------------------------------------------------

EXPOSURE_BIAS_SEEDS = (0, 1, 2, 3, 4)
"""Seeds of chapter 6's recipes ``number-tf-s<seed>`` and ``number-ss-s<seed>``."""

EXPOSURE_BIAS_SCHEDULE = {"schedule": "inverse_sigmoid", "k": 100.0, "sample": True}
"""Chapter 6's scheduled sampling: ``ε_i = k / (k + exp(i / k))`` with ``k = 100`` (ε = 0.5
near step 460, 0.005 at the last step, 1000) and replacements *sampled* from the model. Chosen
on the validation split, seeds 0-2, among linear decay to 0.5 and this inverse sigmoid, each
with argmax or sampled replacements (the other candidates' scores are not shipped)."""


def _register_exposure_bias_recipes() -> None:
    """Chapter 6 (exposure bias): teacher forcing vs scheduled sampling at the same budget.

    1000 updates of 64 sentences with the paper's warm-up schedule: long enough that the
    teacher-forced models reach a test exact match near 0.99, so the models' own predictions
    are worth feeding back. Per seed, both methods share the initialisation and the data order.
    """
    for seed in EXPOSURE_BIAS_SEEDS:
        for method, ss in (("tf", None), ("ss", EXPOSURE_BIAS_SCHEDULE)):
            register(
                Recipe(
                    name=f"number-{method}-s{seed}",
                    description=(
                        f"number reading, {'scheduled sampling' if ss else 'teacher forcing'}, "
                        f"seed {seed}: 1000 steps, 1+1 layers, d_model 32 (chapter 6)"
                    ),
                    task="number",
                    task_kwargs={"n_train": 4000, "n_valid": 1000, "n_test": 2000},
                    model={
                        "d_model": 32,
                        "n_heads": 4,
                        "d_ff": 64,
                        "n_encoder_layers": 1,
                        "n_decoder_layers": 1,
                        "dropout": 0.0,
                        "max_len": 32,
                    },
                    train={
                        "max_steps": 1000,
                        "epochs": 1000,
                        "batch_size": 64,
                        "schedule": "noam",
                        "warmup_steps": 100,
                        "lr_factor": 0.5,
                        "label_smoothing": 0.0,
                        "eval_every": 1000,
                        "seed": seed,
                        "scheduled_sampling": ss,
                    },
                    seed=seed,
                )
            )


_register_exposure_bias_recipes()
