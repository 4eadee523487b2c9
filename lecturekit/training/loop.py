"""Training a Transformer with teacher forcing (slides p44-p46), readable in one sitting.

``fit(model, train, valid, TrainConfig(...))`` runs the loop of the paper (Vaswani et al.,
2017, section 5): teacher forcing, label-smoothed cross-entropy over the non-padding tokens
(:mod:`lecturekit.training.losses`), Adam with betas (0.9, 0.98) and eps 1e-9, the warmup /
inverse-square-root learning rate (:mod:`lecturekit.training.schedules`), gradient clipping.
It returns a :class:`History` (plain data; the book's ``plot_training`` draws it). Under
``torchrun`` the same call trains with DistributedDataParallel
(:mod:`lecturekit.training.distributed`); with ``TrainConfig(scheduled_sampling=...)`` it
trains with scheduled sampling (:mod:`lecturekit.training.scheduled_sampling`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from lecturekit._common import check_has_data
from lecturekit.training import distributed
from lecturekit.training.checks import (
    check_batch_ids,
    check_decode_length,
    check_epoch,
    check_finite,
    check_pair_shapes,
    check_pairs,
    check_passes,
    check_stopping,
    clip_and_measure,
    optimizer_step,
)
from lecturekit.training.config import TrainConfig
from lecturekit.training.evaluation import evaluate
from lecturekit.training.history import History
from lecturekit.training.losses import label_smoothed_nll
from lecturekit.training.scheduled_sampling import mix_decoder_inputs
from lecturekit.training.schedules import learning_rate, set_lr

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.model.transformer import Transformer

__all__ = ["Stopping", "update", "train_steps", "fit"]


# --------------------------------------------------------------------------------------
# The pieces: one update, stopping, a plain loop of updates
# --------------------------------------------------------------------------------------


def update(
    optimizer: torch.optim.Optimizer,
    loss: Tensor,
    *,
    parameters: Iterable[Tensor] | None = None,
    clip_grad_norm: float | None = None,
    step: int = 0,
) -> None:
    """One optimiser update: clear the gradients, backpropagate ``loss``, clip, step.

    ``clip_grad_norm``: rescale the gradients of ``parameters`` (default: the optimizer's) so
    that their joint norm is at most this (None = no clipping). Non-finite gradients (checked
    before they touch the weights) or weights raise ``FloatingPointError`` naming ``step``
    and the learning rate (:mod:`lecturekit.training.checks`).
    """
    if parameters is None:
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
    parameters = list(parameters)
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clip_and_measure(parameters, clip_grad_norm)
    check_finite("gradients", grad_norm, step, lr)  # before they touch the weights
    optimizer_step(optimizer, step, lr)
    weights = torch.nn.utils.get_total_norm(parameters, foreach=True)
    check_finite("parameters", weights, step, lr)


@dataclass(frozen=True)
class Stopping:
    """When training stops: after ``max_steps`` updates, after ``max_seconds`` of training, or
    once validation exact match reaches ``target_exact_match`` (each None = no such limit;
    ``max_seconds=inf`` is no limit too).

    Frozen, validated once by :func:`check_stopping` (the rules of ``TrainConfig``'s fields of
    the same names). The clock starts when the object is created; :meth:`restarted` gives
    the same rules with the clock started again.
    """

    max_steps: int | None = None
    max_seconds: float | None = None
    target_exact_match: float | None = None
    start: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        check_stopping(self.max_steps, self.max_seconds, self.target_exact_match)

    def restarted(self) -> Stopping:
        """The same rules, the clock started now."""
        return replace(self, start=time.perf_counter())

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.start

    def budget_spent(self, step: int) -> bool:
        """Whether ``step`` updates (or the time so far) use up the step or time budget."""
        if self.max_steps is not None and step >= self.max_steps:
            return True
        return self.max_seconds is not None and self.elapsed() >= self.max_seconds

    def target_reached(self, metrics: dict[str, float]) -> bool:
        """Whether validation ``metrics`` (from :func:`evaluate`) reach the target."""
        target = self.target_exact_match
        return target is not None and metrics["exact_match"] >= target


def train_steps(
    step_loss: Callable[[int], Tensor | tuple[Tensor, Tensor]],
    optimizer: torch.optim.Optimizer,
    stopping: Stopping,
    *,
    parameters: Iterable[Tensor] | None = None,
    clip_grad_norm: float | None = None,
) -> list[float]:
    """The plain loop of updates the chapter experiments train with; returns the losses.

    ``step_loss(step)`` (``step`` from 1) computes the loss of one step: a scalar tensor, or
    ``(objective, reported)`` when the update minimises more than the loss to record (an
    auxiliary term). Each step is one :func:`update`; the loop ends when ``stopping`` says
    the budget is spent (``stopping.max_steps`` is required: there is no validation here).
    """
    if stopping.max_steps is None and stopping.max_seconds in (None, math.inf):
        raise ValueError(
            "stopping must limit max_steps or max_seconds (finite), got "
            f"max_steps={stopping.max_steps}, max_seconds={stopping.max_seconds}"
        )
    parameters = None if parameters is None else list(parameters)
    losses: list[float] = []
    step = 0
    while not stopping.budget_spent(step):
        step += 1
        loss = step_loss(step)
        objective, reported = loss if isinstance(loss, tuple) else (loss, loss)
        update(
            optimizer, objective, parameters=parameters, clip_grad_norm=clip_grad_norm, step=step
        )
        losses.append(reported.item())
    return losses


# --------------------------------------------------------------------------------------
# fit: data plumbing
# --------------------------------------------------------------------------------------


_DATA_KINDS = "a TaskData, a list of (src ids, tgt ids) pairs or an iterable of Batch"


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
        if split == "train":
            raise TypeError(f"train must be {_DATA_KINDS}, got None")
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
    if isinstance(data, Sequence) and isinstance(data[0], (tuple, list)):
        data = check_pair_shapes(data, split)
        check_pairs(data, split, c)
        loader = make_loader(
            data,
            batch_size=config.batch_size,
            shuffle=shuffle,
            seed=config.seed,
            pad_id=c.pad_id,
            bos_id=c.bos_id,
            eos_id=c.eos_id,
        )
        # the validation batches never change (no shuffling): pad them once, not at every
        # evaluation
        return list(loader) if split == "valid" else loader
    if not isinstance(data, Iterable) or isinstance(data, str):
        raise TypeError(f"{split} must be {_DATA_KINDS}, got {type(data).__name__}")
    if split == "valid" and isinstance(data, Iterator):
        data = list(data)
    if split == "valid" and isinstance(data, list):  # read at every evaluation: check once
        for batch in data:
            check_batch_ids(batch, split, c)
    return data


def _resolve_device(config: TrainConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device must be available, got 'cuda' with no CUDA device")
    return torch.device(config.device)


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


# --------------------------------------------------------------------------------------
# fit: one run's state and its steps
# --------------------------------------------------------------------------------------


@dataclass
class _Run:
    """Everything one :func:`fit` call works with."""

    model: Transformer
    trained: nn.Module  # the model, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    config: TrainConfig
    dist: distributed.DistContext
    device: torch.device
    valid: Iterable[Any] | None
    stopping: Stopping
    ss_generator: torch.Generator
    history: History = field(default_factory=History)
    bar: Any = None


def _start(model: Transformer, config: TrainConfig, valid: Iterable[Any] | None) -> _Run:
    """Join the process group, seed, move and wrap the model, build Adam (the paper's)."""
    dist = distributed.setup(config.device)
    device = dist.device if dist.enabled else _resolve_device(config)
    torch.manual_seed(config.seed + dist.rank)  # dropout differs per process, like real DDP
    model.to(device)
    model.train()
    trained = distributed.wrap(model, dist)
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=learning_rate(1, config, model.config.d_model),
        betas=config.betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        # one fused loop over all parameters instead of a Python loop per tensor; the same
        # arithmetic (bitwise equal results), and on CPU torch defaults to the slower loop
        foreach=True,
    )
    # manual_seed takes 64 bits; the reduction changes no seed below 2**64 / 7919
    ss_seed = (config.seed * 7919 + dist.rank) % 2**64
    ss_generator = torch.Generator(device=device).manual_seed(ss_seed)
    stopping = Stopping(config.max_steps, config.max_seconds, config.target_exact_match)
    return _Run(model, trained, optimizer, config, dist, device, valid, stopping, ss_generator)


def _train_step(run: _Run, batch: Any, step: int) -> None:
    """One teacher-forced step on ``batch``: forward, loss, one :func:`update`, record."""
    config, cfg, dist = run.config, run.model.config, run.dist
    lr = learning_rate(step, config, cfg.d_model)
    set_lr(run.optimizer, lr)
    batch = distributed.shard(batch, dist).to(run.device)
    tgt_in, teacher_prob = batch.tgt_in, 1.0
    ss = config.scheduled_sampling
    if ss is not None:
        teacher_prob = ss.teacher_prob(step - 1)
        tgt_in = mix_decoder_inputs(
            run.model,
            batch.src,
            batch.tgt_in,
            teacher_prob,
            pad_id=cfg.pad_id,
            sample=ss.sample,
            generator=run.ss_generator,
        )
    logits = run.trained(batch.src, tgt_in)
    loss_sum = label_smoothed_nll(
        logits, batch.tgt_out, config.label_smoothing, cfg.pad_id, reduction="sum"
    )
    loss_total, n_correct, n_tokens = _global_counts(run, logits, batch.tgt_out, loss_sum)
    if not math.isfinite(loss_total):
        raise FloatingPointError(
            f"the training loss became {loss_total} at step {step} (lr {lr:.3g}); "
            "lower the learning rate (lr or lr_factor) or enable clip_grad_norm"
        )
    # DDP averages gradients over processes, hence the world_size factor
    loss = loss_sum * (dist.world_size / n_tokens)
    update(
        run.optimizer,
        loss,
        parameters=run.model.parameters(),
        clip_grad_norm=config.clip_grad_norm,
        step=step,
    )
    _record_step(run, step, loss_total / n_tokens, n_correct / n_tokens, lr, teacher_prob)


def _global_counts(
    run: _Run, logits: Tensor, tgt_out: Tensor, loss_sum: Tensor
) -> tuple[float, float, float]:
    """Summed loss, correct tokens and label tokens of this step, over every process."""
    keep = tgt_out != run.model.config.pad_id
    with torch.no_grad():
        stats = torch.tensor(
            [
                float(loss_sum),
                float(((logits.argmax(-1) == tgt_out) & keep).sum()),
                float(keep.sum()),
            ],
            dtype=torch.float64,
            device=run.device,
        )
    stats = distributed.all_reduce_sum(stats, run.dist)
    return float(stats[0]), float(stats[1]), max(float(stats[2]), 1.0)


def _record_step(
    run: _Run, step: int, loss: float, accuracy: float, lr: float, teacher_prob: float
) -> None:
    history = run.history
    history.step.append(step)
    history.loss.append(loss)
    history.token_accuracy.append(accuracy)
    history.lr.append(lr)
    history.teacher_prob.append(teacher_prob)
    if run.bar is not None:
        run.bar.update(1)
        run.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", refresh=False)


def _evaluate_and_record(run: _Run, valid: Iterable[Any], step: int) -> dict[str, float]:
    """Evaluation: :func:`evaluate` on ``valid`` (``run.valid``), recorded in the history."""
    config, history = run.config, run.history
    metrics = evaluate(run.model, valid, config.label_smoothing, config.valid_decode_max_len)
    history.eval_step.append(step)
    history.valid_loss.append(metrics["loss"])
    history.valid_token_accuracy.append(metrics["token_accuracy"])
    history.valid_exact_match.append(metrics["exact_match"])
    history.eval_seconds.append(run.stopping.elapsed())
    if run.bar is not None:
        run.bar.set_postfix(
            loss=f"{history.loss[-1]:.3f}", valid_em=f"{metrics['exact_match']:.3f}"
        )
    return metrics


def _should_stop(run: _Run, step: int, steps_per_epoch: int | None) -> bool:
    """Stopping: evaluate when due, then ask the budget and the target (same on every process)."""
    config = run.config
    at_epoch_end = step % steps_per_epoch == 0 if steps_per_epoch else False
    due = step % config.eval_every == 0 if config.eval_every is not None else at_epoch_end
    stop = run.stopping.budget_spent(step)
    if run.valid is not None and (due or stop):
        stop = run.stopping.target_reached(_evaluate_and_record(run, run.valid, step)) or stop
    # every process must take the same decision, or the others wait forever
    return distributed.any_true(stop, run.dist, run.device)


# --------------------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------------------


def fit(
    model: Transformer,
    train: Any,
    valid: Any = None,
    config: TrainConfig | None = None,
    *,
    on_step: Callable[[int, nn.Module], None] | None = None,
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
        on_step: called as ``on_step(step, model)`` after each update (``step`` from 1),
            before that step's evaluation; e.g. ``KeepLastCheckpoints`` of
            :mod:`lecturekit.training.averaging` copies the weights for checkpoint averaging.

    Returns:
        The :class:`History` (``plot_training(history)`` of the book's plotting module
        draws it). The model is left in eval mode.

    Each step (:func:`_train_step`): decoder input ``<bos> y`` and labels ``y <eos>``
    (teacher forcing, p46), logits ``(B, T, V)`` in one parallel pass, label-smoothed
    cross-entropy averaged over the non-padding label tokens, then one :func:`update`
    (backward, gradient clipping, Adam step at the scheduled learning rate). After each
    step, evaluation when due and :class:`Stopping`. Under ``torchrun`` (``WORLD_SIZE > 1``)
    the model is wrapped in DistributedDataParallel and each process trains on its share of
    every global batch; the loss is normalised by the global token count so the update
    equals a one-process step.

    Safeguards (:mod:`lecturekit.training.checks`): pairs are batched with the model's
    ``pad_id`` / ``bos_id`` / ``eos_id`` and checked against its vocabularies and learned
    positions before training; every batch must use the model's ``bos_id`` and ``pad_id``;
    a one-shot iterator that runs out raises instead of looping; non-finite gradients
    (checked before the update) or weights raise ``FloatingPointError`` naming the step and
    the learning rate.
    """
    config = config or TrainConfig()
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not hasattr(model, "config") or not callable(model):
        raise TypeError(f"model must be a lecturekit.Transformer, got {type(model).__name__}")
    check_has_data("model", model)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be callable or None, got {type(on_step).__name__}")
    auto_valid = valid is None and hasattr(train, "encoded") and hasattr(train, "valid")
    if auto_valid:
        valid = train
    # None comes back only for a validation split (none given, or an empty TaskData split)
    train_batches = cast("Iterable[Any]", _as_batches(train, config, True, "train", model.config))
    valid_batches = _as_batches(valid, config, False, "valid", model.config, auto=auto_valid)
    check_passes(train_batches, config.epochs, config.max_steps)
    check_decode_length(config.valid_decode_max_len, model.config)
    run = _start(model, config, valid_batches)
    steps_per_epoch = _safe_len(train_batches)
    total = config.max_steps or (
        steps_per_epoch * config.epochs if steps_per_epoch is not None else None
    )
    run.bar = _progress_bar(total, enabled=config.progress and run.dist.is_main)
    run.stopping = run.stopping.restarted()
    step, epoch, stop = 0, 0, False
    while not stop and (config.max_steps is not None or epoch < config.epochs):
        sampler: Any = getattr(train_batches, "batch_sampler", None)  # a DataLoader's
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        batches_this_epoch = 0
        for batch in train_batches:
            check_batch_ids(batch, "train", model.config)
            step += 1
            batches_this_epoch += 1
            _train_step(run, batch, step)
            if on_step is not None:
                on_step(step, model)
            stop = _should_stop(run, step, steps_per_epoch)
            if stop:
                break
        check_epoch(step, batches_this_epoch, epoch)
        epoch += 1
    history = run.history
    if run.valid is not None and step and (not history.eval_step or history.eval_step[-1] != step):
        _evaluate_and_record(run, run.valid, step)
    if run.bar is not None:
        run.bar.close()
    history.seconds = run.stopping.elapsed()
    model.eval()
    return history
