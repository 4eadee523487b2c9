"""Training a Transformer with teacher forcing (slides p44-p46), readable in one sitting.

``fit(model, train, valid, TrainConfig(...))`` runs the loop of the paper (Vaswani et al.,
2017, section 5): teacher forcing, label-smoothed cross-entropy over the non-padding tokens
(:mod:`lecturekit.training.losses`), Adam with betas (0.9, 0.98) and eps 1e-9, the warmup /
inverse-square-root learning rate (:mod:`lecturekit.training.schedules`), gradient clipping.
It returns a :class:`History` that one call plots. Under ``torchrun`` the same call trains
with DistributedDataParallel (:mod:`lecturekit.training.distributed`); with
``TrainConfig(scheduled_sampling=...)`` it trains with scheduled sampling
(:mod:`lecturekit.training.scheduled_sampling`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from lecturekit.training import distributed
from lecturekit.training.checks import (
    check_batch_ids,
    check_decode_length,
    check_finite,
    check_pairs,
    clip_and_measure,
    optimizer_step,
    parameter_norm,
)
from lecturekit.training.config import TrainConfig
from lecturekit.training.evaluation import evaluate
from lecturekit.training.losses import label_smoothed_nll
from lecturekit.training.scheduled_sampling import mix_decoder_inputs
from lecturekit.training.schedules import learning_rate

__all__ = ["History", "fit"]


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

        Same as ``lecturekit.book.plotting.plot_history(history, ...)`` with the curves below.
        ``smooth``: moving-average window for the per-step training curves.
        """
        from lecturekit.book.plotting import plot_history

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

    Safeguards (:mod:`lecturekit.training.checks`): pairs are batched with the model's
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
