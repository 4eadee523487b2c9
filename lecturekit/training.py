"""Training a Transformer with teacher forcing (slides p44-p46), readable in one sitting.

``fit(model, train, valid, TrainConfig(...))`` runs the loop of the paper (Vaswani et al.,
2017, section 5): teacher forcing, label-smoothed cross-entropy over the non-padding tokens,
Adam with betas (0.9, 0.98) and eps 1e-9, the warmup / inverse-square-root learning rate
(:func:`noam_lr`, or a constant one), gradient clipping. It returns a :class:`History` that one
call plots. Under ``torchrun`` the same call trains with DistributedDataParallel
(:mod:`lecturekit.distributed`); with ``TrainConfig(scheduled_sampling=...)`` it trains with
scheduled sampling (:mod:`lecturekit.scheduled_sampling`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from lecturekit import distributed
from lecturekit.scheduled_sampling import ScheduledSampling, mix_decoder_inputs
from lecturekit.training_checks import (
    check_batch_ids,
    check_decode_length,
    check_finite,
    check_pairs,
    check_train_config,
    clip_and_measure,
    optimizer_step,
    parameter_norm,
)

__all__ = [
    "TrainConfig",
    "History",
    "fit",
    "evaluate",
    "label_smoothed_nll",
    "noam_lr",
    "constant_lr",
    "learning_rate",
    "small_config",
    "small_train_config",
]


# --------------------------------------------------------------------------------------
# Loss
# --------------------------------------------------------------------------------------


def label_smoothed_nll(
    logits: Tensor,
    target: Tensor,
    smoothing: float = 0.1,
    ignore_index: int | None = 0,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy against a label-smoothed target distribution, ignoring padding (p46).

    The target puts ``1 - smoothing`` on the gold token and spreads ``smoothing`` uniformly
    over all ``V`` tokens (the gold one included), exactly like
    ``F.cross_entropy(..., label_smoothing=smoothing)``::

        loss_t = (1 - smoothing) * (-log p(y_t)) + smoothing * mean_v(-log p(v))

    Args:
        logits: ``(..., V)`` unnormalised scores.
        target: ``(...)`` gold ids; positions equal to ``ignore_index`` (padding) count for
            nothing.
        smoothing: in ``[0, 1)``; the paper uses 0.1.
        reduction: ``"mean"`` over the counted tokens, ``"sum"``, or ``"none"`` (zeros at
            ignored positions).
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits/target: expected logits (..., V) with ... = target.shape, got "
            f"{tuple(logits.shape)} and {tuple(target.shape)}"
        )
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing: expected a value in [0, 1), got {smoothing}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction: expected 'mean', 'sum' or 'none', got {reduction!r}")
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    keep = torch.ones_like(target, dtype=torch.bool)
    if ignore_index is not None:
        keep = target != ignore_index
    safe_target = torch.where(keep, target, torch.zeros_like(target))
    nll = -log_probs.gather(-1, safe_target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_probs.mean(dim=-1)
    loss = ((1.0 - smoothing) * nll + smoothing * uniform) * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / keep.sum().clamp(min=1)


# --------------------------------------------------------------------------------------
# Learning-rate schedules
# --------------------------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """The paper's schedule: ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It rises linearly for ``warmup_steps`` steps, peaks at
    ``factor * (d_model * warmup_steps) ** -0.5`` and then decays as ``1 / sqrt(step)``.
    ``step`` counts from 1 (the first optimiser step).
    """
    if step < 1:
        raise ValueError(f"step: expected >= 1 (steps count from 1), got {step}")
    if warmup_steps < 1 or d_model < 1:
        raise ValueError(f"warmup_steps, d_model: expected >= 1, got {warmup_steps}, {d_model}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def constant_lr(step: int, lr: float) -> float:
    """A constant learning rate (the schedule to compare warmup against)."""
    if step < 1:
        raise ValueError(f"step: expected >= 1 (steps count from 1), got {step}")
    return lr


# --------------------------------------------------------------------------------------
# Configuration and history
# --------------------------------------------------------------------------------------


@dataclass
class TrainConfig:
    """Everything :func:`fit` needs besides the model and the data.

    Attributes:
        epochs: passes over the training data (ignored when ``max_steps`` is set; training
            stops earlier at ``max_seconds`` or ``target_exact_match``).
        batch_size: sentences per optimiser step (the *global* batch under torchrun);
            used when ``train`` is a list of pairs or a ``TaskData``.
        schedule: ``"noam"`` (warmup then inverse square root, :func:`noam_lr`) or
            ``"constant"``.
        lr: the constant learning rate (``schedule="constant"``).
        lr_factor, warmup_steps: the ``"noam"`` schedule's ``factor`` and warmup.
        betas, adam_eps, weight_decay: Adam settings (the paper's 0.9, 0.98, 1e-9).
        label_smoothing: the paper's 0.1.
        clip_grad_norm: max gradient norm (None = no clipping).
        seed: seeds data order and dropout; same seed, same machine: same losses.
        max_steps: train for exactly this many optimiser steps, as many epochs as needed
            (None = ``epochs`` epochs).
        max_seconds: stop after this many seconds of training (None = no limit).
        target_exact_match: stop once validation exact match reaches it (None = never).
        eval_every: evaluate on ``valid`` every this many steps (None = once per epoch);
            training always ends with an evaluation.
        valid_decode_max_len: greedy-decoding length for exact match (None = longest
            validation target + 2).
        scheduled_sampling: a :class:`ScheduledSampling` to train with scheduled sampling.
        progress: show a tqdm progress bar (``tqdm.auto``: a widget in notebooks);
            False = quiet.
        device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.
    """

    epochs: int = 10
    batch_size: int = 64
    schedule: str = "noam"
    lr: float = 1e-3
    lr_factor: float = 1.0
    warmup_steps: int = 400
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_grad_norm: float | None = 1.0
    seed: int = 0
    max_steps: int | None = None
    max_seconds: float | None = None
    target_exact_match: float | None = None
    eval_every: int | None = None
    valid_decode_max_len: int | None = None
    scheduled_sampling: ScheduledSampling | None = None
    progress: bool = True
    device: str = "auto"

    def __post_init__(self) -> None:
        check_train_config(self)  # every field's type and range, with the fix in the message
        if isinstance(self.scheduled_sampling, dict):
            self.scheduled_sampling = ScheduledSampling(**self.scheduled_sampling)
        if not isinstance(self.scheduled_sampling, (ScheduledSampling, type(None))):
            raise TypeError(
                "scheduled_sampling must be a ScheduledSampling, a dict of its fields or None, "
                f"got {type(self.scheduled_sampling).__name__}"
            )
        self.betas = tuple(self.betas)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (for checkpoints)."""
        return asdict(self)


def learning_rate(step: int, config: TrainConfig, d_model: int) -> float:
    """The learning rate of optimiser step ``step`` (from 1) under ``config``."""
    if config.schedule == "noam":
        return noam_lr(step, d_model, config.warmup_steps, config.lr_factor)
    return constant_lr(step, config.lr)


def small_config(src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> Any:
    """The default small Transformer for the toy tasks (trains in about a minute on 2 CPU
    cores; tuned with ``benchmarks/toy_task.py``): d_model 64, 4 heads, d_ff 128, 2 encoder
    and 2 decoder layers, no dropout, Post-LN as in the paper. ``overrides`` replace fields.
    """
    from lecturekit.config import TransformerConfig

    fields_ = dict(
        d_model=64,
        n_heads=4,
        d_ff=128,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        max_len=64,
    )
    fields_.update(overrides)
    return TransformerConfig(src_vocab_size, tgt_vocab_size, **fields_)


def small_train_config(**overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` that goes with :func:`small_config` (``overrides`` replace
    fields): batch 128, warmup 100 steps, ``lr_factor`` 0.5 (peak learning rate about
    0.006 for d_model 64), the paper's label smoothing 0.1."""
    fields_: dict[str, Any] = dict(
        epochs=30,
        batch_size=128,
        schedule="noam",
        warmup_steps=100,
        lr_factor=0.5,
    )
    fields_.update(overrides)
    return TrainConfig(**fields_)


@dataclass
class History:
    """What :func:`fit` records. Per optimiser step: ``step``, ``loss`` (label-smoothed,
    per token), ``token_accuracy`` (teacher-forced, training batch), ``lr`` and
    ``teacher_prob`` (1.0 without scheduled sampling). Per evaluation: ``eval_step``,
    ``valid_loss``, ``valid_token_accuracy``, ``valid_exact_match`` (greedy decoding) and
    ``eval_seconds`` (wall time since the start of training).
    """

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    token_accuracy: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    teacher_prob: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)
    valid_token_accuracy: list[float] = field(default_factory=list)
    valid_exact_match: list[float] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def plot(self, smooth: int = 20) -> Any:
        """Loss, accuracy / exact match and learning-rate curves in one figure; returns it.

        Same as ``lecturekit.plotting.plot_history(history, ...)`` with the curves below.
        ``smooth``: moving-average window for the per-step training curves.
        """
        from lecturekit.plotting import plot_history

        keys = ["loss", "valid_loss", "token_accuracy", "valid_token_accuracy"]
        keys += ["valid_exact_match", "lr"]
        if any(p < 1.0 for p in self.teacher_prob):
            keys.append("teacher_prob")
        keys = [k for k in keys if getattr(self, k)]
        return plot_history(self, keys=keys, smooth=smooth)


# --------------------------------------------------------------------------------------
# Data plumbing
# --------------------------------------------------------------------------------------


def _as_batches(
    data: Any, config: TrainConfig, shuffle: bool, split: str, model_config: Any, auto: bool = False
) -> Iterable[Any] | None:
    """Accept a ``TaskData`` (its ``split``), a list of (src ids, tgt ids) pairs, or any
    re-iterable of ``Batch`` es (e.g. ``task.loader("train")``).

    Pairs are batched with the model's special ids and checked against the model first. An
    empty split is an error, except a validation split taken from the training ``TaskData``
    (``auto``), which means: no validation. A one-shot iterator of validation batches is
    read into a list, since every evaluation iterates it again.
    """
    from lecturekit.data import make_loader
    from lecturekit.data.vocab import BOS_ID, EOS_ID, PAD_ID

    if data is None:
        return None
    c = model_config
    if hasattr(data, "encoded") and hasattr(data, "loader"):  # TaskData
        if (c.pad_id, c.bos_id, c.eos_id) != (PAD_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"{split}: a TaskData's vocabularies use pad_id={PAD_ID}, bos_id={BOS_ID}, "
                f"eos_id={EOS_ID}, but the model has {c.pad_id}, {c.bos_id}, {c.eos_id}; build "
                "the model with the vocabulary's special ids (the TransformerConfig defaults)"
            )
        data = data.encoded(split)
    if isinstance(data, Sequence) and not isinstance(data, str) and len(data) == 0:
        if auto:
            return None
        raise ValueError(
            f"{split} is empty; pass some examples"
            + (", or valid=None to train without validation" if split == "valid" else "")
        )
    if isinstance(data, Sequence) and isinstance(data[0], tuple):
        check_pairs(data, split, c)
        return make_loader(
            data,
            batch_size=config.batch_size,
            shuffle=shuffle,
            seed=config.seed,
            pad_id=c.pad_id,
            bos_id=c.bos_id,
            eos_id=c.eos_id,
        )
    if not isinstance(data, Iterable) or isinstance(data, str):
        raise TypeError(
            f"{split}: expected a TaskData, a list of (src ids, tgt ids) pairs or an iterable "
            f"of Batch, got {type(data).__name__}"
        )
    if split == "valid" and isinstance(data, Iterator):
        data = list(data)
    return data


def _resolve_device(config: TrainConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' requested but torch.cuda.is_available() is False")
    return torch.device(config.device)


def _until_eos(tokens: Tensor, eos_id: int) -> list[list[int] | None]:
    """Each row's ids before its first EOS; None for a row without EOS (never stopped)."""
    rows: list[list[int] | None] = []
    for row in tokens.tolist():
        rows.append(row[: row.index(eos_id)] if eos_id in row else None)
    return rows


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: Iterable[Any],
    label_smoothing: float = 0.0,
    decode_max_len: int | None = None,
) -> dict[str, float]:
    """Teacher-forced loss and token accuracy, and greedy-decoding exact match, over ``data``.

    Args:
        model: a :class:`lecturekit.Transformer`.
        data: an iterable of ``lecturekit.data.Batch``.
        label_smoothing: smoothing of the reported loss (0 = plain cross-entropy).
        decode_max_len: greedy decoding length (None: the batch's target length + 2, at
            most the model's ``max_len`` with learned positions).

    Returns:
        ``{"loss", "token_accuracy", "exact_match"}``; exact match compares the greedy output
        up to its EOS with the gold target (lecture p46's evaluation by whole sentence).
    """
    from lecturekit.decoding import greedy

    cfg = model.config
    check_decode_length(decode_max_len, cfg)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss_sum, correct, tokens, exact, sentences = 0.0, 0, 0, 0, 0
    try:
        for batch in data:
            batch = batch.to(device)
            logits = model(batch.src, batch.tgt_in)
            loss_sum += float(
                label_smoothed_nll(
                    logits, batch.tgt_out, label_smoothing, cfg.pad_id, reduction="sum"
                )
            )
            keep = batch.tgt_out != cfg.pad_id
            correct += int(((logits.argmax(-1) == batch.tgt_out) & keep).sum())
            tokens += int(keep.sum())
            max_len = decode_max_len or batch.tgt_out.shape[1] + 2
            if cfg.positional == "learned":  # positions stop there; +2 is only slack
                max_len = min(max_len, cfg.max_len)
            out = greedy(model, batch.src, max_len, src_key_padding_mask=batch.src_padding_mask)
            gold = _until_eos(batch.tgt_out, cfg.eos_id)
            for pred, ref in zip(_until_eos(out, cfg.eos_id), gold, strict=True):
                exact += pred == ref
            sentences += len(gold)
    finally:
        model.train(was_training)
    if sentences == 0:
        raise ValueError("data: no batches to evaluate")
    return {
        "loss": loss_sum / max(tokens, 1),
        "token_accuracy": correct / max(tokens, 1),
        "exact_match": exact / sentences,
    }


# --------------------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------------------


def fit(
    model: nn.Module,
    train: Any,
    valid: Any = None,
    config: TrainConfig | None = None,
) -> History:
    """Train ``model`` with teacher forcing; return the :class:`History`.

    Args:
        model: a :class:`lecturekit.Transformer` (already initialised; seed before creating
            it for reproducible weights).
        train: a ``TaskData`` (its train split is used), a list of (source ids, target ids)
            pairs, or a re-iterable of ``lecturekit.data.Batch`` (e.g. ``task.loader("train")``).
        valid: same kinds (a ``TaskData`` gives its valid split); ``None`` skips evaluation.
            When ``train`` is a ``TaskData`` and ``valid`` is None, its valid split is used.
        config: a :class:`TrainConfig` (defaults if None).

    Returns:
        The :class:`History`; ``history.plot()`` draws it. The model is left in eval mode.

    Each step: decoder input ``<bos> y`` and labels ``y <eos>`` (teacher forcing, p46),
    logits ``(B, T, V)`` in one parallel pass, label-smoothed cross-entropy averaged over the
    non-padding label tokens, backward, gradient clipping, Adam step at the scheduled
    learning rate. Under ``torchrun`` (``WORLD_SIZE > 1``) the model is wrapped in
    DistributedDataParallel and each process trains on its share of every global batch; the
    loss is normalised by the global token count so the update equals a one-process step.

    Safeguards (:mod:`lecturekit.training_checks`): pairs are batched with the model's
    ``pad_id`` / ``bos_id`` / ``eos_id`` and checked against its vocabularies and learned
    positions before training; a one-shot iterator that runs out raises instead of looping;
    non-finite gradients (checked before the update) or weights raise ``FloatingPointError``
    naming the step and the learning rate.
    """
    config = config or TrainConfig()
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config: expected a TrainConfig, got {type(config).__name__}")
    if not hasattr(model, "config") or not callable(model):
        raise TypeError(f"model: expected a lecturekit.Transformer, got {type(model).__name__}")
    auto_valid = valid is None and hasattr(train, "encoded") and hasattr(train, "valid")
    if auto_valid:
        valid = train
    train_batches = _as_batches(train, config, True, "train", model.config)
    valid_batches = _as_batches(valid, config, False, "valid", model.config, auto=auto_valid)
    _check_passes(train_batches, config)
    check_decode_length(config.valid_decode_max_len, model.config)

    dist = distributed.setup(config.device)
    device = dist.device if dist.enabled else _resolve_device(config)
    torch.manual_seed(config.seed + dist.rank)  # dropout differs per process, like real DDP
    model.to(device)
    model.train()
    cfg = model.config
    trained = distributed.wrap(model, dist)
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=learning_rate(1, config, cfg.d_model),
        betas=config.betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        # one fused loop over all parameters instead of a Python loop per tensor; the same
        # arithmetic (bitwise equal results), and on CPU torch defaults to the slower loop
        foreach=True,
    )
    ss = config.scheduled_sampling
    ss_generator = torch.Generator(device=device).manual_seed(config.seed * 7919 + dist.rank)

    history = History()
    steps_per_epoch = _safe_len(train_batches)
    total = config.max_steps or (
        steps_per_epoch * config.epochs if steps_per_epoch is not None else None
    )
    bar = _progress_bar(total, enabled=config.progress and dist.is_main)
    start = time.perf_counter()
    step = 0
    stop = False
    epoch = 0
    while not stop and (config.max_steps is not None or epoch < config.epochs):
        if hasattr(getattr(train_batches, "batch_sampler", None), "set_epoch"):
            train_batches.batch_sampler.set_epoch(epoch)
        batches_this_epoch = 0
        for batch in train_batches:
            if step == 0:
                check_batch_ids(batch, "train", cfg)
            step += 1
            batches_this_epoch += 1
            lr = learning_rate(step, config, cfg.d_model)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = distributed.shard(batch, dist).to(device)
            tgt_in, teacher_prob = batch.tgt_in, 1.0
            if ss is not None:
                teacher_prob = ss.teacher_prob(step - 1)
                tgt_in = mix_decoder_inputs(
                    model,
                    batch.src,
                    batch.tgt_in,
                    teacher_prob,
                    pad_id=cfg.pad_id,
                    sample=ss.sample,
                    generator=ss_generator,
                )
            logits = trained(batch.src, tgt_in)
            loss_sum = label_smoothed_nll(
                logits, batch.tgt_out, config.label_smoothing, cfg.pad_id, reduction="sum"
            )
            keep = batch.tgt_out != cfg.pad_id
            with torch.no_grad():
                stats = torch.tensor(
                    [
                        float(loss_sum),
                        float(((logits.argmax(-1) == batch.tgt_out) & keep).sum()),
                        float(keep.sum()),
                    ],
                    dtype=torch.float64,
                    device=device,
                )
            stats = distributed.all_reduce_sum(stats, dist)
            n_tokens = max(float(stats[2]), 1.0)
            if not math.isfinite(float(stats[0])):
                raise FloatingPointError(
                    f"the training loss became {float(stats[0])} at step {step} (lr {lr:.3g}); "
                    "lower the learning rate (lr or lr_factor) or enable clip_grad_norm"
                )
            # DDP averages gradients over processes, hence the world_size factor
            loss = loss_sum * (dist.world_size / n_tokens)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = clip_and_measure(model.parameters(), config.clip_grad_norm)
            check_finite("gradients", grad_norm, step, lr)  # before they touch the weights
            optimizer_step(optimizer, step, lr)
            check_finite("parameters", parameter_norm(model), step, lr)

            history.step.append(step)
            history.loss.append(float(stats[0]) / n_tokens)
            history.token_accuracy.append(float(stats[1]) / n_tokens)
            history.lr.append(lr)
            history.teacher_prob.append(teacher_prob)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{history.loss[-1]:.3f}", lr=f"{lr:.2e}", refresh=False)

            at_epoch_end = step % steps_per_epoch == 0 if steps_per_epoch else False
            due = step % config.eval_every == 0 if config.eval_every is not None else at_epoch_end
            out_of_budget = (config.max_steps is not None and step >= config.max_steps) or (
                config.max_seconds is not None and time.perf_counter() - start >= config.max_seconds
            )
            if valid_batches is not None and (due or out_of_budget):
                metrics = _record_evaluation(history, model, valid_batches, config, step, start)
                if bar is not None:
                    bar.set_postfix(
                        loss=f"{history.loss[-1]:.3f}", valid_em=f"{metrics['exact_match']:.3f}"
                    )
                target = config.target_exact_match
                if target is not None and metrics["exact_match"] >= target:
                    stop = True
            if out_of_budget:
                stop = True
            # every process must take the same decision, or the others wait forever
            stop = distributed.any_true(stop, dist, device)
            if stop:
                break
        if step == 0:
            raise ValueError("train: the training data yielded no batch")
        if batches_this_epoch == 0:
            raise ValueError(
                f"train ran out after {step} steps: epoch {epoch + 1} yielded no batch. A "
                "generator or iter(loader) can be iterated only once; pass a re-iterable (a "
                "list of pairs, a DataLoader such as task.loader('train'), a TaskData) or set "
                f"max_steps <= {step}"
            )
        epoch += 1
    if (
        valid_batches is not None
        and step
        and (not history.eval_step or history.eval_step[-1] != step)
    ):
        _record_evaluation(history, model, valid_batches, config, step, start)
    if bar is not None:
        bar.close()
    history.seconds = time.perf_counter() - start
    model.eval()
    return history


def _check_passes(train_batches: Iterable[Any], config: TrainConfig) -> None:
    """A one-shot iterator cannot give the several passes that ``epochs > 1`` asks for."""
    if isinstance(train_batches, Iterator) and config.max_steps is None and config.epochs > 1:
        raise ValueError(
            f"train is an iterator, which can be iterated only once, but epochs={config.epochs} "
            "asks for that many passes; pass a re-iterable (a list of pairs, a DataLoader "
            "such as task.loader('train'), a TaskData), or epochs=1, or max_steps"
        )


def _record_evaluation(
    history: History,
    model: nn.Module,
    data: Iterable[Any],
    config: TrainConfig,
    step: int,
    start: float,
) -> dict[str, float]:
    metrics = evaluate(model, data, config.label_smoothing, config.valid_decode_max_len)
    history.eval_step.append(step)
    history.valid_loss.append(metrics["loss"])
    history.valid_token_accuracy.append(metrics["token_accuracy"])
    history.valid_exact_match.append(metrics["exact_match"])
    history.eval_seconds.append(time.perf_counter() - start)
    return metrics


def _safe_len(data: Iterable[Any]) -> int | None:
    try:
        return len(data)  # type: ignore[arg-type]
    except TypeError:
        return None


def _progress_bar(total: int | None, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="training", unit="step", leave=True)
