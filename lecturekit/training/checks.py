"""Guards of the training loop: bad settings, data and numbers fail early and say why.

:func:`fit` and :class:`TrainConfig` call these so that a careless input gives a clear error
naming the argument and the fix, instead of a hang, a silent NaN or an error one epoch later:

- :func:`check_train_config`: every ``TrainConfig`` field has the right type and range
  (``lr="1e-3"``, ``betas=(0.9,)`` and ``lr=inf`` are refused when the config is created),
  by the same rules as the code that reads the field (:func:`check_stopping` is shared with
  ``Stopping``, ``check_rate`` with the learning-rate schedules);
- :func:`check_pair_shapes`, :func:`check_pairs`, :func:`check_batch_ids` (every batch),
  :func:`check_decode_length`: the data fits the model (its special ids, its vocabularies,
  its learned positions); :func:`check_passes`, :func:`check_epoch`: it yields batches in
  every epoch;
- :func:`clip_and_measure` / :func:`check_finite`: after each backward pass the gradients
  must be finite (one reduction and one synchronisation per step; with clipping the gradient
  norm comes for free); :func:`check_weights` checks the parameters where a failure needs its
  cause named, at the end of training and before a training state is saved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from lecturekit._common import (
    MAX_SEED,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_token_ids,
    check_type,
)
from lecturekit.data.batching import _ids
from lecturekit.decoding.search import MAX_DECODE_LEN
from lecturekit.training.scheduled_sampling import ScheduledSampling
from lecturekit.training.schedules import check_rate

__all__ = [
    "MAX_SEED",
    "check_train_config",
    "check_stopping",
    "check_pair_shapes",
    "check_pairs",
    "check_batch_ids",
    "check_decode_length",
    "check_epoch",
    "check_passes",
    "clip_and_measure",
    "parameter_norm",
    "optimizer_step",
    "check_finite",
    "check_weights",
]


# --------------------------------------------------------------------------------------
# TrainConfig
# --------------------------------------------------------------------------------------


def check_train_config(config: Any) -> None:
    """Raise ``TypeError`` / ``ValueError`` naming the first bad field of a ``TrainConfig``
    (the package's one style, :mod:`lecturekit._common`). The one validator of
    ``TrainConfig``: the rules it shares with the places that read a field (the learning-rate
    schedules, :class:`Stopping`) are the same functions, so a value it accepts is never
    refused later."""
    for name in ("epochs", "batch_size", "warmup_steps"):
        check_int(name, getattr(config, name), minimum=1)
    check_int("eval_every", config.eval_every, minimum=1, optional=True)
    # the same bound greedy() applies, checked here so a bad value fails before training
    check_int(
        "valid_decode_max_len",
        config.valid_decode_max_len,
        minimum=1,
        maximum=MAX_DECODE_LEN,
        optional=True,
    )
    check_choice("schedule", config.schedule, ("noam", "cosine", "constant"))
    check_int("decay_steps", config.decay_steps, minimum=1, optional=True)
    if config.schedule == "cosine" and (
        config.decay_steps is None or config.decay_steps <= config.warmup_steps
    ):
        raise ValueError(
            f'schedule="cosine" needs decay_steps > warmup_steps ({config.warmup_steps}), got '
            f"decay_steps={config.decay_steps}; set decay_steps to the step budget"
        )
    check_rate("lr", config.lr)
    check_rate("lr_factor", config.lr_factor)
    _check_adam(config.betas, config.adam_eps, config.weight_decay)
    check_number("label_smoothing", config.label_smoothing, 0.0, 1.0, exclusive=("maximum",))
    check_number(
        "clip_grad_norm", config.clip_grad_norm, 0.0, exclusive=("minimum",), optional=True
    )
    check_int("seed", config.seed, 0, MAX_SEED)
    check_stopping(config.max_steps, config.max_seconds, config.target_exact_match)
    check_type(
        "scheduled_sampling",
        config.scheduled_sampling,
        (ScheduledSampling, type(None)),
        "a ScheduledSampling, a dict of its fields or None",
    )
    check_bool("progress", config.progress)
    check_choice("device", config.device, ("auto", "cpu", "cuda"))


def _check_adam(betas: Any, adam_eps: Any, weight_decay: Any) -> None:
    if not isinstance(betas, tuple) or len(betas) != 2:
        raise ValueError(f"betas must be two numbers (beta1, beta2) in [0, 1), got {betas!r}")
    for i, beta in enumerate(betas):
        check_number(f"betas[{i}]", beta, 0.0, 1.0, exclusive=("maximum",))
    # Adam divides by sqrt(v) + adam_eps: with 0 (or a value float32 rounds to 0) a weight
    # whose gradient is always 0 (an unused embedding row) becomes 0 / 0 = NaN
    check_number("adam_eps", adam_eps, minimum=_FLOAT32_TINY)
    check_number("weight_decay", weight_decay, minimum=0.0)


_FLOAT32_TINY = 1.1754943508222875e-38  # torch.finfo(torch.float32).tiny


def check_stopping(
    max_steps: int | None, max_seconds: float | None, target_exact_match: float | None
) -> None:
    """The stopping rules of ``TrainConfig`` and :class:`Stopping` (the same rules for both):
    ``max_steps`` an int >= 1, ``max_seconds`` a number >= 0 (``inf`` = no limit),
    ``target_exact_match`` in [0, 1]; each may be None (no such limit)."""
    check_int("max_steps", max_steps, minimum=1, optional=True)
    check_number("max_seconds", max_seconds, minimum=0.0, optional=True, finite=False)
    check_number("target_exact_match", target_exact_match, 0.0, 1.0, optional=True)


# --------------------------------------------------------------------------------------
# Data against the model
# --------------------------------------------------------------------------------------


def check_pairs(pairs: Sequence[tuple[Any, Any]], split: str, model_config: Any) -> None:
    """(source ids, target ids) pairs must fit the model: ids inside its vocabularies and,
    with learned positions, sources of at most ``max_len`` and targets of at most
    ``max_len - 1`` tokens (the decoder also reads ``<bos>``)."""
    c = model_config
    longest = {}
    for side, part, vocab_name in (
        (0, "source", "src_vocab_size"),
        (1, "target", "tgt_vocab_size"),
    ):
        rows = [list(pair[side]) for pair in pairs]
        longest[part] = max(map(len, rows), default=0)
        if longest[part] == 0:
            continue
        # one (pairs, longest) tensor, padded with id 0 (inside every vocabulary): row i is
        # pair i, so the shared check names the pair of the first bad id
        ids = torch.tensor([row + [0] * (longest[part] - len(row)) for row in rows])
        check_token_ids(
            f"{split} {part}",
            ids,
            getattr(c, vocab_name),
            shape="(N, L)",
            fix=f"build the model from the data's vocabulary sizes (its {vocab_name})",
        )
    longest_src, longest_tgt = longest["source"], longest["target"]
    if c.positional != "learned":
        return
    for part, length, limit in (
        ("source", longest_src, c.max_len),
        ("target", longest_tgt, c.max_len - 1),
    ):
        if length > limit:
            raise ValueError(
                f"{split}: the longest {part} has {length} tokens but the model's learned "
                f"positions allow {limit} (max_len={c.max_len}); build the model with a larger "
                f"max_len or drop the long examples"
            )


def check_batch_ids(batch: Any, split: str, model_config: Any) -> None:
    """A ``Batch`` built by the caller must use the model's special ids: decoder inputs that
    start with ``bos_id``, padding masks that mark exactly the ``pad_id`` positions.

    :func:`fit` checks every batch (a batch without padding cannot show a wrong ``pad_id``,
    a later one can); a few comparisons of ``(B, T)`` id tensors, small beside a step.
    """
    c = model_config
    if not all(hasattr(batch, name) for name in ("src", "tgt_in", "tgt_out")):
        raise TypeError(
            f"{split} batches must be lecturekit.data.Batch (src, tgt_in, tgt_out, padding "
            f"masks), got {type(batch).__name__}; build them with make_loader(pairs, ...)"
        )
    first = batch.tgt_in[:, 0]
    if not bool((first == c.bos_id).all()):
        found = int(first[first != c.bos_id][0])
        raise ValueError(
            f"{split}: the decoder inputs start with id {found}, but the model's bos_id is "
            f"{c.bos_id}; build the batches with make_loader(pairs, pad_id={c.pad_id}, "
            f"bos_id={c.bos_id}, eos_id={c.eos_id})"
        )
    for mask_name, ids in (("src_padding_mask", batch.src), ("tgt_padding_mask", batch.tgt_out)):
        padding = getattr(batch, mask_name, None)
        if padding is not None and not torch.equal(padding, ids == c.pad_id):
            raise ValueError(
                f"{split}: the batches' {mask_name} does not mark the model's pad_id="
                f"{c.pad_id}; build them with make_loader(pairs, pad_id={c.pad_id}, ...)"
            )


def check_pair_shapes(pairs: Sequence[Any], split: str) -> list[tuple[Any, Any]]:
    """``pairs`` as a list of (source ids, target ids) tuples: each item must be a pair (a
    tuple or list of two) of id sequences (lists, tuples or 1-D integer tensors or arrays),
    not of strings; text must be encoded with the task's vocabularies first. Returns them as
    lists of int ids."""
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(
                f"{split}[{i}] must be a (source ids, target ids) pair, got {pair!r:.80}; "
                f"{split} holds pairs when its first item is one"
            )
        for side, ids in zip(("source", "target"), pair, strict=True):
            if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, torch.Tensor)):
                raise TypeError(
                    f"{split}[{i}] {side} must be a sequence of token ids, got "
                    f"{type(ids).__name__} ({ids!r:.40}); encode text with the vocabulary "
                    "first (vocab.encode(...) or task.encoded(split))"
                )
    # lists of int ids from here on (a 1-d integer tensor or array is what a student has)
    return [
        (_ids(src, f"{split}[{i}] source"), _ids(tgt, f"{split}[{i}] target"))
        for i, (src, tgt) in enumerate(pairs)
    ]


def check_decode_length(decode_max_len: int | None, model_config: Any) -> None:
    """An explicit decoding length must fit learned positions."""
    c = model_config
    if decode_max_len is not None and c.positional == "learned" and decode_max_len > c.max_len:
        raise ValueError(
            f"valid_decode_max_len must be <= the model's max_len={c.max_len} (learned "
            f"positions), got {decode_max_len}"
        )


def check_epoch(step: int, batches_this_epoch: int, epoch: int) -> None:
    """The training data must yield batches, in every epoch (a one-shot iterator does not)."""
    if step == 0:
        raise ValueError("train must yield at least one batch, got none")
    if batches_this_epoch == 0:
        raise ValueError(
            f"train ran out after {step} steps: epoch {epoch + 1} yielded no batch. A "
            "generator or iter(loader) can be iterated only once; pass a re-iterable (a "
            "list of pairs, a DataLoader such as task.loader('train'), a TaskData) or set "
            f"max_steps <= {step}"
        )


def check_passes(train_batches: Iterable[Any], epochs: int, max_steps: int | None) -> None:
    """A one-shot iterator cannot give the several passes that ``epochs > 1`` asks for."""
    if isinstance(train_batches, Iterator) and max_steps is None and epochs > 1:
        raise ValueError(
            f"train is an iterator, which can be iterated only once, but epochs={epochs} "
            "asks for that many passes; pass a re-iterable (a list of pairs, a DataLoader "
            "such as task.loader('train'), a TaskData), or epochs=1, or max_steps"
        )


# --------------------------------------------------------------------------------------
# Finite numbers after each step
# --------------------------------------------------------------------------------------


def clip_and_measure(parameters: Iterable[Tensor], clip_grad_norm: float | None) -> Tensor:
    """Clip the gradients to ``clip_grad_norm`` (None = no clipping); return their total norm
    before clipping (a 0-dim tensor, NaN or inf if any gradient is)."""
    parameters = [p for p in parameters if p.grad is not None]
    if clip_grad_norm is not None:
        return torch.nn.utils.clip_grad_norm_(parameters, clip_grad_norm, foreach=True)
    return torch.nn.utils.get_total_norm(
        [p.grad for p in parameters if p.grad is not None], foreach=True
    )


def parameter_norm(model: nn.Module) -> Tensor:
    """Total norm of ``model``'s parameters (a 0-dim tensor, NaN or inf if any is)."""
    return torch.nn.utils.get_total_norm(list(model.parameters()), foreach=True)


def optimizer_step(optimizer: torch.optim.Optimizer, step: int, lr: float) -> None:
    """``optimizer.step()``; an update too large for float32 (Adam's step size is about
    ``lr / (1 - beta1)``) becomes the same ``FloatingPointError`` as non-finite weights."""
    try:
        optimizer.step()
    except RuntimeError as error:
        if "overflow" not in str(error):
            raise
        raise FloatingPointError(_TOO_HIGH.format(value="inf", step=step, lr=lr)) from error


_TOO_HIGH = (
    "the parameters became {value} after the update of step {step} (lr {lr:.3g}): the "
    "learning rate is too high for this model; lower lr or lr_factor"
)


def check_finite(what: str, norm: Tensor, step: int, lr: float) -> None:
    """Raise ``FloatingPointError`` naming the step and the likely cause if ``norm`` is not
    finite (one synchronisation). ``what``: "gradients" or "parameters"."""
    value = float(norm)
    if math.isfinite(value):
        return
    if what == "gradients":
        raise FloatingPointError(
            f"the gradients became {value} at step {step} (lr {lr:.3g}); the weights were not "
            "updated with them. Likely causes: NaN or inf in the data or produced by a custom "
            "loss or hook, or weights driven too large by a high learning rate; check the "
            "inputs, lower lr or lr_factor, or set clip_grad_norm"
        )
    raise FloatingPointError(_TOO_HIGH.format(value=value, step=step, lr=lr))


def check_weights(parameters: Iterable[Tensor], step: int, lr: float) -> None:
    """Raise ``FloatingPointError`` ("the parameters became inf after the update of step
    ``step``") if the total norm of ``parameters`` is not finite: one reduction over all of
    them and one synchronisation, so it runs where it is needed, not after every update."""
    norm = torch.nn.utils.get_total_norm(list(parameters), foreach=True)
    value = float(norm)
    if not math.isfinite(value):
        raise FloatingPointError(_TOO_HIGH.format(value=value, step=step, lr=lr))
