"""The sentence-level input method's shipped models, trained in resumable pieces.

Two recipes read People's Daily clauses (:mod:`lecturekit.data.sentences`): ``ime-sentences-at``,
the encoder-decoder :class:`lecturekit.Transformer` (characters one after another), and
``ime-sentences-nat``, the :class:`~lecturekit.capstone.tagger.SyllableTagger`
(every character at once). Their training takes hours on two CPU cores, longer than one
sitting, so unlike the other recipes it runs in **pieces**:

    python -m lecturekit.capstone build ime-sentences-at --max-minutes 30

trains for 30 minutes (or to the recipe's last step) and stops. Every ``save_every`` steps and
at the stop it writes the whole training state (weights, Adam moments, step, random state,
history) atomically (a temporary file, read back, then ``os.replace``), with a SHA-256
checksum, to :func:`state_path`, outside the package (a damaged state is refused); the next
``build`` continues from it, and the batches, the learning rate and the dropout draws
continue exactly where they stopped (a resumed run equals an uninterrupted
one on the same machine and thread count). At each stop the shipped file
``<name>.pt`` (float16 weights, vocabularies, history) is rewritten, so
:func:`load_sentence_model` always reads the latest piece; its ``metadata["finished"]`` says
whether the recipe's ``total_steps`` are done.

No hyperparameter was tuned, on validation or on test: the sizes follow the 24 MiB budget of
shipped files and the step budgets the training time available, about 2 hours of 2 cores for
the pair: AT 3,700 steps (1.6 hours on one thread); NAT 8,000 steps, the first 5,000 in the same
1.6 hours on the other thread, the last 3,000 alone on both threads (28 minutes). The
validation split only feeds the history: the mean training loss of every ``eval_every`` steps
and the validation CER (greedy with the model's own EOS / argmax, on ``n_eval`` validation
clauses) at the same steps and at every stop (evaluating draws no random numbers, so the extra
points do not change the training).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from lecturekit._common import check_int, check_number
from lecturekit.capstone.engines import TransformerIME
from lecturekit.capstone.ngram import sentence_scores
from lecturekit.capstone.tagger import SyllableTagger, TaggerIME, clause_batch, sentence_vocabs
from lecturekit.data.pinyin import _cache_folder
from lecturekit.data.sentences import split_sentences
from lecturekit.data.vocab import Vocab
from lecturekit.model.config import TransformerConfig
from lecturekit.model.transformer import Transformer
from lecturekit.pretrained import DATA_DIR
from lecturekit.pretrained._files import STATE_FIX, check_entries, load_state, read_payload
from lecturekit.pretrained._files import save_state as _save_state
from lecturekit.pretrained._files import ship as _ship
from lecturekit.pretrained.building import _torch_threads
from lecturekit.training.checks import check_finite, optimizer_step

__all__ = [
    "SentenceRecipe",
    "SENTENCE_RECIPES",
    "sentence_checkpoint_path",
    "state_path",
    "sentence_pairs",
    "make_sentence_model",
    "train_sentences",
    "load_sentence_model",
    "SentenceModel",
]


@dataclass(frozen=True)
class SentenceRecipe:
    """How one sentence-IME model is made.

    Attributes:
        name, description: registry key (file ``<name>.pt``) and one line.
        kind: ``"at"`` (encoder-decoder Transformer) or ``"nat"`` (encoder-only tagger).
        model: ``TransformerConfig`` arguments (vocabulary sizes come from the data).
        total_steps, batch_size: the training budget (clauses per step).
        peak_lr, warmup_steps: Adam's learning rate rises linearly for ``warmup_steps`` to
            ``peak_lr``, then decays as ``1/sqrt(step)`` (the paper's schedule, rescaled).
        label_smoothing: of the cross-entropy.
        min_count: output characters seen fewer times in training become ``<unk>``.
        eval_every, save_every: steps between history points and between state saves.
        n_eval: validation clauses (a seeded sample) scored at every history point.
        seed: seeds the initialisation, the batch order and dropout.
    """

    name: str
    description: str
    kind: str
    model: dict[str, Any]
    total_steps: int
    batch_size: int = 128
    peak_lr: float = 1e-3
    warmup_steps: int = 400
    label_smoothing: float = 0.0
    min_count: int = 2
    eval_every: int = 100
    save_every: int = 50
    n_eval: int = 500
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("at", "nat"):
            raise ValueError(f"kind must be 'at' or 'nat', got {self.kind!r}")
        for name in ("total_steps", "batch_size", "warmup_steps", "eval_every", "save_every"):
            check_int(name, getattr(self, name), 1)
        check_int("n_eval", self.n_eval, 1)
        check_int("min_count", self.min_count, 1)
        check_number("peak_lr", self.peak_lr, 0, exclusive=("minimum",))
        check_number("label_smoothing", self.label_smoothing, 0, 1, exclusive=("maximum",))


SENTENCE_RECIPES: dict[str, SentenceRecipe] = {}


def _register(recipe: SentenceRecipe) -> None:
    SENTENCE_RECIPES[recipe.name] = recipe


def _recipe(name: str | SentenceRecipe) -> SentenceRecipe:
    if isinstance(name, SentenceRecipe):
        return name
    if name not in SENTENCE_RECIPES:
        raise ValueError(f"name must be one of {sorted(SENTENCE_RECIPES)}, got {name!r}")
    return SENTENCE_RECIPES[name]


def sentence_checkpoint_path(name: str) -> Path:
    """The shipped file of recipe ``name`` (beside every shipped model, in
    ``lecturekit/pretrained/``: one folder holds the package's weights and their size budget)."""
    return DATA_DIR / f"{_recipe(name).name}.pt"


def state_path(name: str) -> Path:
    """The training state of recipe ``name`` between pieces (outside the package, in
    ``lecturekit.data.pinyin.cache_dir()``; never shipped)."""
    return _cache_folder(None) / "training" / f"{_recipe(name).name}.state.pt"


def sentence_pairs(split: Any = None) -> dict[str, list[tuple[str, str]]]:
    """``{"train", "valid", "test", "ood"}`` -> ``(pinyin, text)`` clauses of ``split`` (a
    ``SentenceSplit``; default ``split_sentences()``, seed 0)."""
    split = split_sentences() if split is None else split
    return {
        part: [(c.pinyin, c.text) for c in getattr(split, part)]
        for part in ("train", "valid", "test", "ood")
    }


def make_sentence_model(recipe: SentenceRecipe, src_vocab: Any, tgt_vocab: Any) -> torch.nn.Module:
    """A freshly initialised model of ``recipe`` (seeded by ``recipe.seed``)."""
    torch.manual_seed(recipe.seed)
    config = TransformerConfig(
        src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), **recipe.model
    )
    return Transformer(config) if recipe.kind == "at" else SyllableTagger(config)


def _epoch_batches(n: int, lengths: Sequence[int], batch_size: int, seed: int, epoch: int):
    # shuffle, sort by length within windows of 50 batches (little padding), shuffle batches
    rng = random.Random(f"ime-sentences:{seed}:{epoch}")
    order = list(range(n))
    rng.shuffle(order)
    window = 50 * batch_size
    batches = []
    for start in range(0, n, window):
        part = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def _loss(model: torch.nn.Module, recipe: SentenceRecipe, batch: Any) -> torch.Tensor:
    if recipe.kind == "at":
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        target = batch.tgt_out.masked_fill(batch.tgt_out == model.config.pad_id, -100)
    else:
        logits, target = model(batch.src), batch.labels  # (B, S, V), (B, S)
    return F.cross_entropy(
        logits.flatten(0, 1),
        target.flatten(),
        ignore_index=-100,
        label_smoothing=recipe.label_smoothing,
    )


@torch.no_grad()
def _valid_cer(model: torch.nn.Module, recipe: SentenceRecipe, pairs, vocabs) -> float:
    model.eval()
    ime: TransformerIME | TaggerIME
    if recipe.kind == "at":
        ime = TransformerIME(model, *vocabs, beam_size=1)
        ime._extra_steps = 1  # the shipped histories were measured so: a rebuild matches them
    else:
        ime = TaggerIME(model, *vocabs)
    answers = ime.candidates([p for p, _ in pairs], 1)
    model.train()
    s = sentence_scores(answers, [t for _, t in pairs], k=1)
    return float(s["edits"].sum() / s["chars"].sum())


def _start(recipe: SentenceRecipe, pairs: dict, path: Path) -> dict[str, Any]:
    """The saved training state at ``path``, or a fresh one (step 0)."""
    if path.is_file():
        state = load_state(path)
        if _training_fields(state["recipe"]) != _training_fields(dataclasses.asdict(recipe)):
            raise ValueError(
                f"state_path: {path} was saved by another version of recipe {recipe.name!r}; "
                "delete it to train from scratch"
            )
        state["recipe"] = dataclasses.asdict(recipe)  # the current budget and description
        try:
            vocabs = (Vocab.from_dict(state["src_vocab"]), Vocab.from_dict(state["tgt_vocab"]))
            model = make_sentence_model(recipe, *vocabs)
            model.load_state_dict(state["model"])
        except (KeyError, RuntimeError, TypeError, ValueError) as err:
            raise ValueError(f"state_path: {path} is damaged ({err}); {STATE_FIX}") from err
    else:
        vocabs = sentence_vocabs(pairs["train"], recipe.min_count)
        model = make_sentence_model(recipe, *vocabs)
        state = {
            "recipe": dataclasses.asdict(recipe),
            "step": 0,
            "seconds": 0.0,
            "history": {"step": [], "train_loss": [], "valid_cer": []},
            "rng": torch.get_rng_state(),
            "optimizer": None,
            "loss_sum": 0.0,
        }
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.peak_lr, betas=(0.9, 0.98), eps=1e-9)
    try:
        if state["optimizer"] is not None:
            optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])  # dropout continues its stream
    except (KeyError, RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"state_path: {path} is damaged ({err!r}); {STATE_FIX}") from err
    return {**state, "model_obj": model, "optimizer_obj": optimizer, "vocabs": vocabs}


def _training_fields(recipe: dict[str, Any]) -> dict[str, Any]:
    # what a saved state must share with the recipe to continue it: everything but the
    # budget and the description (the schedule does not depend on total_steps, so a longer or
    # shorter budget continues the same run)
    return {k: v for k, v in recipe.items() if k not in ("total_steps", "description")}


def train_sentences(
    name: str | SentenceRecipe,
    *,
    max_minutes: float | None = None,
    max_steps: int | None = None,
    threads: int = 2,
    split: Any = None,
    state_file: str | Path | None = None,
    out: str | Path | None = None,
) -> dict[str, Any]:
    """Train recipe ``name`` for one piece: from its saved state (or from scratch) until
    ``max_minutes`` have passed, the step ``max_steps`` is reached or the recipe is done.

    Saves the state every ``save_every`` steps and at the stop (``state_file``, default
    :func:`state_path`) and writes the shipped file at the stop (``out``, default
    :func:`sentence_checkpoint_path`). ``split`` (a ``SentenceSplit``) replaces the corpus in
    tests. Returns ``{"step", "seconds", "history", "finished"}``.
    """
    recipe = _recipe(name)
    check_int("threads", threads, 1)
    check_int("max_steps", max_steps, 1, optional=True)
    check_number("max_minutes", max_minutes, 0, exclusive=("minimum",), optional=True)
    path = Path(state_file) if state_file is not None else state_path(recipe.name)
    pairs = sentence_pairs(split)
    train = pairs["train"]
    lengths = [len(t) for _, t in train]
    rng = random.Random(f"ime-valid:{recipe.seed}")
    valid = rng.sample(pairs["valid"], min(recipe.n_eval, len(pairs["valid"])))
    end = min(recipe.total_steps, max_steps or recipe.total_steps)
    with _torch_threads(threads):
        state = _start(recipe, pairs, path)
        n_batches = math.ceil(len(train) / recipe.batch_size)
        epoch, batches = -1, []
        start = piece_start = time.perf_counter()
        state["model_obj"].train()
        while state["step"] < end:
            if max_minutes is not None and time.perf_counter() - piece_start > 60 * max_minutes:
                break
            step = state["step"]
            if step // n_batches != epoch:
                epoch = step // n_batches
                batches = _epoch_batches(len(train), lengths, recipe.batch_size, recipe.seed, epoch)
            batch = clause_batch([train[i] for i in batches[step % n_batches]], *state["vocabs"])
            _update(state, recipe, batch)
            s = state["step"]
            if s % recipe.eval_every == 0 or s == recipe.total_steps:
                _record(state, recipe, valid)
            if s % recipe.save_every == 0:
                state["seconds"] += time.perf_counter() - start
                start = time.perf_counter()
                _save_state(state, path)
        state["seconds"] += time.perf_counter() - start
        history = state["history"]
        if state["step"] and (not history["step"] or history["step"][-1] != state["step"]):
            _record(state, recipe, valid)  # a history point at every stop, too
        _save_state(state, path)
        _ship(recipe, state, Path(out) if out else sentence_checkpoint_path(recipe.name), threads)
    return {
        "step": state["step"],
        "seconds": state["seconds"],
        "history": state["history"],
        "finished": state["step"] >= recipe.total_steps,
    }


def _update(state: dict[str, Any], recipe: SentenceRecipe, batch: Any) -> None:
    # one Adam update at the schedule's learning rate; the step and the loss sum advance.
    # Non-finite gradients (checked before they touch the weights) or weights raise fit's
    # FloatingPointError, so no NaN state is ever saved or shipped
    model, optimizer = state["model_obj"], state["optimizer_obj"]
    s = state["step"] + 1
    lr = recipe.peak_lr * min(s / recipe.warmup_steps, math.sqrt(recipe.warmup_steps / s))
    for group in optimizer.param_groups:
        group["lr"] = lr
    loss = _loss(model, recipe, batch)
    optimizer.zero_grad()
    loss.backward()
    check_finite("gradients", torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), s, lr)
    optimizer_step(optimizer, s, lr)
    norms = torch.stack([p.detach().norm() for p in model.parameters()])
    check_finite("parameters", norms.norm(), s, lr)
    state["step"], state["loss_sum"] = s, state["loss_sum"] + loss.item()


def _record(state: dict[str, Any], recipe: SentenceRecipe, valid) -> None:
    # the mean training loss since the last history point, and the validation CER now
    history, step = state["history"], state["step"]
    since = step - (history["step"][-1] if history["step"] else 0)
    history["step"].append(step)
    history["train_loss"].append(round(state["loss_sum"] / since, 5))
    state["loss_sum"] = 0.0
    rng = torch.get_rng_state()  # evaluation draws nothing, but keep dropout's stream intact
    history["valid_cer"].append(
        round(_valid_cer(state["model_obj"], recipe, valid, state["vocabs"]), 5)
    )
    torch.set_rng_state(rng)


@dataclass(frozen=True)
class SentenceModel:
    """A shipped sentence model: ``model`` (float32, eval mode), ``src_vocab``, ``tgt_vocab``,
    the recipe, the ``history`` and ``metadata`` (steps, finished, train_seconds)."""

    model: torch.nn.Module
    src_vocab: Any
    tgt_vocab: Any
    recipe: SentenceRecipe
    history: dict[str, list]
    metadata: dict[str, Any]


_SHIPPED_ENTRIES = {
    "recipe": dict,
    "state": dict,
    "src_vocab": dict,
    "tgt_vocab": dict,
    "history": dict,
    "metadata": dict,
}


def load_sentence_model(name: str, path: str | Path | None = None) -> SentenceModel:
    """The shipped (or ``path``'s) checkpoint of recipe ``name`` as a :class:`SentenceModel`.

    A damaged file (unreadable, an entry missing, its checksum does not match) and a file of
    another recipe (an AT model loaded as the NAT) are refused with a ``ValueError``."""
    recipe = _recipe(name)
    path = Path(path) if path is not None else sentence_checkpoint_path(recipe.name)
    if not path.is_file():
        raise FileNotFoundError(
            f"name: no checkpoint for {recipe.name!r} at {path}; train it with "
            f"`python -m lecturekit.capstone build {recipe.name} --max-minutes 30` "
            "(repeat until it reports finished)"
        )
    fix = f"rebuild it with `python -m lecturekit.capstone build {recipe.name} --max-minutes 30`"
    saved = read_payload(path, "path", fix)
    check_entries(saved, _SHIPPED_ENTRIES, path, "path", fix)
    made_by = saved["recipe"]
    if (made_by.get("kind"), made_by.get("model")) != (recipe.kind, recipe.model):
        raise ValueError(
            f"name: {path} holds a model of recipe {made_by.get('name')!r} (kind "
            f"{made_by.get('kind')!r}), not one of {recipe.name!r} (kind {recipe.kind!r}); "
            "load it under its own name"
        )
    try:
        src_vocab = Vocab.from_dict(saved["src_vocab"])
        tgt_vocab = Vocab.from_dict(saved["tgt_vocab"])
        model = make_sentence_model(recipe, src_vocab, tgt_vocab)
        model.load_state_dict({k: v.float() for k, v in saved["state"].items()})
    except (AttributeError, KeyError, RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"path: {path} is damaged ({str(err)[:200]}); {fix}") from err
    return SentenceModel(
        model.eval(), src_vocab, tgt_vocab, recipe, saved["history"], saved["metadata"]
    )


# Sizes: the two float16 files fit beside the other shipped models in 24 MiB (4.8 M and 3.7 M
# parameters); the output layer (3,814 characters x 256) is a quarter of each
_MODEL = {"n_heads": 4, "dropout": 0.1, "max_len": 32}
_register(
    SentenceRecipe(
        name="ime-sentences-at",
        description=(
            "pinyin clauses -> characters, People's Daily 1998 (the sentence capstone): "
            "encoder-decoder Transformer, 2+2 layers, d_model 256, greedy / beam search"
        ),
        kind="at",
        model={
            **_MODEL,
            "d_model": 256,
            "d_ff": 1024,
            "n_encoder_layers": 2,
            "n_decoder_layers": 2,
            "tie_embeddings": True,
        },
        total_steps=3700,
        label_smoothing=0.1,
    )
)
_register(
    SentenceRecipe(
        name="ime-sentences-nat",
        description=(
            "pinyin clauses -> characters, People's Daily 1998 (the sentence capstone): "
            "non-autoregressive tagger, 4 encoder layers, d_model 256, one character per syllable"
        ),
        kind="nat",
        model={**_MODEL, "d_model": 256, "d_ff": 768, "n_encoder_layers": 4, "n_decoder_layers": 1},
        total_steps=8000,
    )
)
