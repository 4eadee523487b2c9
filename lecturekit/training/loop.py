"""Training a Transformer with teacher forcing (slides p44-p46), readable in one sitting.

``fit(model, train, valid, TrainConfig(...))`` runs the loop of the paper (Vaswani et al.,
2017, section 5): teacher forcing, label-smoothed cross-entropy over the non-padding tokens
(:mod:`lecturekit.training.losses`), Adam with betas (0.9, 0.98) and eps 1e-9, the warmup /
inverse-square-root learning rate (:mod:`lecturekit.training.schedules`), gradient clipping.
It returns a :class:`History` (plain data; the book's ``plot_training`` draws it). Under
``torchrun`` the same call trains with DistributedDataParallel
(:mod:`lecturekit.training.distributed`); with ``TrainConfig(scheduled_sampling=...)`` it
trains with scheduled sampling (:mod:`lecturekit.training.scheduled_sampling`); with
``state_path=`` it can be stopped and continued (:mod:`lecturekit.training._fit_state`). The
same loop trains the encoder-only :class:`~lecturekit.model.tagger.EncoderTagger` with a label
at every source position (the capstone's NAT tagger).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from lecturekit._common import check_has_data, check_int
from lecturekit.model.tagger import EncoderTagger
from lecturekit.training import distributed
from lecturekit.training._fit_state import Position, StateFile
from lecturekit.training._inputs import as_batches, progress_bar, resolve_device, safe_len
from lecturekit.training.checks import (
    check_batch_ids,
    check_decode_length,
    check_epoch,
    check_finite,
    check_passes,
    check_stopping,
    check_weights,
    clip_and_measure,
    optimizer_step,
)
from lecturekit.training.config import TrainConfig
from lecturekit.training.evaluation import _record_evaluation
from lecturekit.training.history import History
from lecturekit.training.losses import label_smoothed_nll
from lecturekit.training.scheduled_sampling import mix_decoder_inputs
from lecturekit.training.schedules import _set_lr, learning_rate

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.model.transformer import Transformer

Metrics = Callable[[nn.Module], dict[str, float]]

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
    before they touch the weights) raise ``FloatingPointError`` naming ``step`` and the
    learning rate; when the weights were already broken by the previous update, the error
    says so (:mod:`lecturekit.training.checks`).
    """
    if parameters is None:
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
    parameters = list(parameters)
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clip_and_measure(parameters, clip_grad_norm)
    if not math.isfinite(float(grad_norm)):  # the step's one synchronisation
        if step > 1:
            check_weights(parameters, step - 1, lr)  # broken by the previous update?
        check_finite("gradients", grad_norm, step, lr)  # before they touch the weights
    # No norm of the weights after the update: from finite weights, gradients and learning
    # rate, Adam (or SGD) computes a finite update (Adam's is about lr in size), so the
    # weights can only become inf by overflowing float32 (a learning rate near 1e30; an
    # overflow inside the step raises in optimizer_step). Broken weights then give the next
    # step a non-finite loss or gradient norm, whose check names the update that broke them
    # (check_weights, on that failure only); the end of training checks them once.
    optimizer_step(optimizer, step, lr)


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
        return target is not None and metrics.get("exact_match", -1.0) >= target


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
    if parameters is None:
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
    parameters = list(parameters)
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
    check_weights(parameters, step, float(optimizer.param_groups[0]["lr"]))  # the last update
    return losses


# --------------------------------------------------------------------------------------
# fit: one run's state and its steps
# --------------------------------------------------------------------------------------


@dataclass
class _Run:
    """Everything one :func:`fit` call works with."""

    model: Transformer | EncoderTagger
    trained: nn.Module  # the model, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    config: TrainConfig
    dist: distributed.DistContext
    device: torch.device
    valid: Iterable[Any] | None
    stopping: Stopping
    ss_generator: torch.Generator
    metrics: Metrics | None = None
    history: History = field(default_factory=History)
    bar: Any = None
    seconds_before: float = 0.0  # trained by earlier calls (a continued state)


def _start(
    model: Transformer | EncoderTagger, config: TrainConfig, valid: Iterable[Any] | None
) -> _Run:
    """Join the process group, seed, move and wrap the model, build Adam (the paper's)."""
    dist = distributed.setup(config.device)
    device = dist.device if dist.enabled else resolve_device(config)
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
    _set_lr(run.optimizer, lr)  # a rate of the schedule: nothing to check
    batch = distributed.shard(batch, dist).to(run.device)
    tgt_in, labels, teacher_prob = batch.tgt_in, batch.tgt_out, 1.0
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
            forbid_specials=ss.forbid_specials,
            generator=run.ss_generator,
        )
    if isinstance(run.model, EncoderTagger):  # a label at every source position
        logits, labels = run.trained(batch.src), batch.tags
    else:
        logits = run.trained(batch.src, tgt_in)
    loss_sum = label_smoothed_nll(logits, labels, config.label_smoothing, cfg.pad_id, "sum")
    loss_total, n_correct, n_tokens = _global_counts(run, logits, labels, loss_sum)
    if not math.isfinite(loss_total):
        if step > 1:
            check_weights(run.model.parameters(), step - 1, lr)  # broken by the last update?
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
    run: _Run, logits: Tensor, labels: Tensor, loss_sum: Tensor
) -> tuple[float, float, float]:
    """Summed loss, correct tokens and label tokens of this step, over every process."""
    keep = labels != run.model.config.pad_id
    with torch.no_grad():
        stats = torch.tensor(
            [
                float(loss_sum),
                float(((logits.argmax(-1) == labels) & keep).sum()),
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


def _should_stop(run: _Run, step: int, steps_per_epoch: int | None) -> bool:
    """Stopping: evaluate when due, then ask the budget and the target (same on every process).

    A run that stops between evaluations is evaluated once more by :func:`fit`, after its
    training state is saved: a continued run then records the evaluations an uninterrupted
    one would."""
    config = run.config
    at_epoch_end = step % steps_per_epoch == 0 if steps_per_epoch else False
    due = step % config.eval_every == 0 if config.eval_every is not None else at_epoch_end
    stop = run.stopping.budget_spent(step)
    if (run.valid is not None or run.metrics is not None) and due:
        stop = run.stopping.target_reached(_record_evaluation(run, step)) or stop
    # every process must take the same decision, or the others wait forever
    return distributed.any_true(stop, run.dist, run.device)


# --------------------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------------------


def fit(
    model: Transformer | EncoderTagger,
    train: Any,
    valid: Any = None,
    config: TrainConfig | None = None,
    *,
    on_step: Callable[[int, nn.Module], None] | None = None,
    state_path: str | os.PathLike | None = None,
    save_every: int | None = None,
    metrics: Metrics | None = None,
) -> History:
    """Train ``model`` with teacher forcing; return the :class:`History`.

    Args:
        model: a :class:`lecturekit.Transformer` (already initialised; seed before creating
            it for reproducible weights), or an encoder-only
            :class:`~lecturekit.model.tagger.EncoderTagger`, trained with a label at every
            source position: its pairs have one target token per source token (``Batch.tags``
            are its labels; no scheduled sampling).
        train: a ``TaskData`` (its train split is used), a list of (source ids, target ids)
            pairs, or a re-iterable of ``lecturekit.data.Batch`` (e.g. ``task.loader("train")``).
        valid: same kinds (a ``TaskData`` gives its valid split); ``None`` skips evaluation.
            When ``train`` is a ``TaskData`` and ``valid`` is None, its valid split is used.
        config: a :class:`TrainConfig` (defaults if None).
        on_step: called as ``on_step(step, model)`` after each update (``step`` from 1),
            before that step's evaluation; e.g. ``KeepLastCheckpoints`` of
            :mod:`lecturekit.training.averaging` copies the weights for checkpoint averaging.
        state_path: a file for the training state, so that training can stop and continue
            (None: no state). If the file exists, training continues from it: the model's
            weights, Adam's moments, the step, the random generators (dropout, data order,
            scheduled sampling) and the history are restored, and the run goes on as if it
            had never stopped (bit for bit on the same machine and thread count). The state
            is written every ``save_every`` steps and when training stops (its budget spent,
            its target reached, its epochs done), atomically and with a checksum; a step
            whose numbers are not finite raises before anything is written. A file that is
            damaged, or was written for another model, other settings or other data, is
            refused with a ``ValueError`` saying so, and left as it is. The settings that
            may change between calls are the budget and the evaluation (``epochs``,
            ``max_steps``, ``max_seconds``, ``target_exact_match``, ``eval_every``,
            ``valid_decode_max_len``), ``progress`` and ``device``; ``max_steps`` counts all
            steps, ``max_seconds`` this call's. The file is a checkpoint too:
            ``load_checkpoint(state_path)`` gives its model (a Transformer's). ``on_step``
            callbacks keep no state in it; not under ``torchrun``.
        save_every: write the state every this many steps as well (None: only when training
            stops); needs ``state_path``.
        metrics: called as ``metrics(model)`` (in eval mode) at every evaluation, with or
            without ``valid``, it returns ``{name: value}`` recorded in ``history.metrics``
            (e.g. a character error rate of decoded sentences); random numbers it draws do not
            change the training.

    Returns:
        The :class:`History` (``plot_training(history)`` of the book's plotting module
        draws it), from step 1 also when continued. The model is left in eval mode.

    Example, a long training in pieces of at most ten minutes (run the cell again to
    continue; a crash loses at most 100 steps)::

        config = TrainConfig(max_steps=20_000, max_seconds=600)
        history = fit(model, task, config=config, state_path="runs/long.pt", save_every=100)

    Each step (:func:`_train_step`): decoder input ``<bos> y`` and labels ``y <eos>``
    (teacher forcing, p46), logits ``(B, T, V)`` in one parallel pass, label-smoothed
    cross-entropy averaged over the non-padding label tokens, then one :func:`update`
    (backward, gradient clipping, Adam step at the scheduled learning rate). After each
    step, evaluation when due and :class:`Stopping`. Under ``torchrun`` (``WORLD_SIZE > 1``)
    the model is wrapped in DistributedDataParallel and each process trains on its share of
    every global batch; the loss is normalised by the global token count so the update
    equals a one-process step.

    Safeguards (:mod:`lecturekit.training.checks`), checked once before training: the
    settings, and pairs batched with the model's ``pad_id`` / ``bos_id`` / ``eos_id`` and
    checked against its vocabularies and learned positions. Every step: each batch must use
    the model's ``bos_id`` and ``pad_id`` and labels inside its vocabulary; a one-shot
    iterator that runs out raises instead of looping; a non-finite loss or gradient norm
    raises ``FloatingPointError`` naming the step and the learning rate (before the update
    touches the weights), or the update that broke the weights; the weights are checked
    once more at the end.
    """
    config = config or TrainConfig()
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    given: Any = model  # any object may come in: checked here
    if not hasattr(given, "config") or not callable(given):
        raise TypeError(
            f"model must be a lecturekit.Transformer or EncoderTagger, got {type(model).__name__}"
        )
    check_has_data("model", model)
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be callable or None, got {type(on_step).__name__}")
    check_int("save_every", save_every, minimum=1, optional=True)
    if metrics is not None and not callable(metrics):
        raise TypeError(f"metrics must be callable or None, got {type(metrics).__name__}")
    tagging = isinstance(model, EncoderTagger)
    if tagging and config.scheduled_sampling is not None:
        raise ValueError("scheduled_sampling needs a decoder; an EncoderTagger has none")
    if save_every is not None and state_path is None:
        raise ValueError(f"save_every={save_every} needs a state_path to save to")
    auto_valid = valid is None and hasattr(train, "encoded") and hasattr(train, "valid")
    if auto_valid:
        valid = train
    # None comes back only for a validation split (none given, or an empty TaskData split)
    train_batches = cast(
        "Iterable[Any]", as_batches(train, config, True, "train", model.config, tagging=tagging)
    )
    valid_batches = as_batches(
        valid, config, False, "valid", model.config, auto=auto_valid, tagging=tagging
    )
    check_passes(train_batches, config.epochs, config.max_steps)
    check_decode_length(config.valid_decode_max_len, model.config)
    run = _start(model, config, valid_batches)
    run.metrics = metrics
    steps_per_epoch = safe_len(train_batches)
    state = StateFile(state_path, save_every, run, train_batches, steps_per_epoch)
    at = state.begin()
    total = config.max_steps or (
        steps_per_epoch * config.epochs if steps_per_epoch is not None else None
    )
    run.bar = progress_bar(total, config.progress and run.dist.is_main, initial=at.step)
    run.stopping = run.stopping.restarted()
    stop = at.step > 0 and run.stopping.budget_spent(at.step)  # a finished state
    while not stop and (config.max_steps is not None or at.epoch < config.epochs):
        stop = _train_epoch(run, state, at, train_batches, steps_per_epoch, on_step)
    _finish(run, state, at)
    return run.history


def _train_epoch(
    run: _Run,
    state: StateFile,
    at: Position,
    train_batches: Iterable[Any],
    steps_per_epoch: int | None,
    on_step: Callable[[int, nn.Module], None] | None,
) -> bool:
    """Train on the batches of epoch ``at.epoch`` (advancing ``at``); return whether to stop."""
    sampler: Any = getattr(train_batches, "batch_sampler", None)  # a DataLoader's
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(at.epoch)
    batches, at.batch = state.enter_epoch(at.epoch, train_batches)
    stop = False
    for batch in batches:
        check_batch_ids(batch, "train", run.model.config)
        at.step += 1
        at.batch += 1
        _train_step(run, batch, at.step)
        if on_step is not None:
            on_step(at.step, run.model)
        stop = _should_stop(run, at.step, steps_per_epoch)
        state.save(at)
        if stop:
            return True
    check_epoch(at.step, at.batch, at.epoch)
    at.epoch, at.batch = at.epoch + 1, 0
    return False


def _finish(run: _Run, state: StateFile, at: Position) -> None:
    """The end of :func:`fit`: check the weights the last update left, save the state,
    evaluate unless this step was, close the bar, leave the model in eval mode."""
    history = run.history
    if history.lr:
        check_weights(run.model.parameters(), at.step, history.lr[-1])
    state.save(at, final=True)
    if (
        (run.valid is not None or run.metrics is not None)
        and at.step
        and (not history.eval_step or history.eval_step[-1] != at.step)
    ):
        _record_evaluation(run, at.step)
    if run.bar is not None:
        run.bar.close()
    history.seconds = run.seconds_before + run.stopping.elapsed()
    run.model.eval()
