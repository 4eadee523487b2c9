"""Learning-rate schedules: the paper's warmup / inverse square root (``noam_lr``), warmup
then cosine decay to zero over a fixed step budget (``cosine_lr``), a linear warmup to a
constant rate (``linear_warmup_lr``) and a constant rate to compare them with; ``set_lr``
writes a rate into an optimiser.

:func:`learning_rate`, which ``fit`` calls at every step, checks only the step and the width:
the rest comes from a ``TrainConfig``, validated when it was created."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from lecturekit._common import check_int, check_number

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.training.config import TrainConfig

__all__ = [
    "check_rate",
    "noam_lr",
    "cosine_lr",
    "linear_warmup_lr",
    "constant_lr",
    "learning_rate",
    "set_lr",
]


def check_rate(name: str, value: float) -> None:
    """A learning rate or a schedule's factor: a finite number > 0 (``TrainConfig`` checks
    its ``lr`` and ``lr_factor`` with this rule too)."""
    check_number(name, value, minimum=0.0, exclusive=("minimum",))


def noam_lr(step: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """The paper's schedule: ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It rises linearly for ``warmup_steps`` steps, peaks at
    ``factor * (d_model * warmup_steps) ** -0.5`` and then decays as ``1 / sqrt(step)``.
    ``step`` counts from 1 (the first optimiser step).
    """
    check_int("step", step, minimum=1)  # steps count from 1
    check_int("d_model", d_model, minimum=1)
    check_int("warmup_steps", warmup_steps, minimum=1)
    check_rate("factor", factor)
    return _noam(step, d_model, warmup_steps, factor)


def _noam(step: int, d_model: int, warmup_steps: int, factor: float) -> float:
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def cosine_lr(step: int, lr: float, warmup_steps: int, decay_steps: int) -> float:
    """Warmup then cosine decay: ``lr * step / warmup_steps`` for the first ``warmup_steps``
    steps, then ``lr * (1 + cos(pi * p)) / 2`` with ``p`` going from 0 at ``warmup_steps`` to
    1 at ``decay_steps``; 0 after ``decay_steps`` (the budget is spent).

    Unlike ``1 / sqrt(step)``, the rate reaches zero at a known step, so the last steps take
    small updates and the weights settle instead of jittering around a minimum.
    ``step`` counts from 1 (the first optimiser step).
    """
    check_int("step", step, minimum=1)  # steps count from 1
    check_rate("lr", lr)
    check_int("warmup_steps", warmup_steps, minimum=1)
    check_int("decay_steps", decay_steps, minimum=warmup_steps + 1)
    return _cosine(step, lr, warmup_steps, decay_steps)


def _cosine(step: int, lr: float, warmup_steps: int, decay_steps: int) -> float:
    if step <= warmup_steps:
        return lr * step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (decay_steps - warmup_steps))
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def linear_warmup_lr(step: int, lr: float, warmup_steps: int) -> float:
    """``lr * min(1, step / warmup_steps)``: a linear rise over the first ``warmup_steps``
    steps, then ``lr`` for good; ``warmup_steps=0`` is no warmup (``lr`` from step 1).
    ``step`` counts from 1 (the first optimiser step)."""
    check_int("step", step, minimum=1)  # steps count from 1
    check_rate("lr", lr)
    check_int("warmup_steps", warmup_steps, minimum=0)
    return lr * min(1.0, step / warmup_steps) if warmup_steps else lr


def constant_lr(step: int, lr: float) -> float:
    """A constant learning rate (the schedule to compare warmup against)."""
    check_int("step", step, minimum=1)  # steps count from 1
    check_rate("lr", lr)
    return lr


def learning_rate(step: int, config: TrainConfig, d_model: int) -> float:
    """The learning rate of optimiser step ``step`` (from 1) under ``config``."""
    check_int("step", step, minimum=1)  # steps count from 1
    check_int("d_model", d_model, minimum=1)
    c = config  # validated when created: the formulas need no checks of its fields
    if c.schedule == "noam":
        return _noam(step, d_model, c.warmup_steps, c.lr_factor)
    # a TrainConfig has decay_steps whenever its schedule is "cosine" (check_train_config)
    if c.schedule == "cosine" and c.decay_steps is not None:
        return _cosine(step, c.lr, c.warmup_steps, c.decay_steps)
    return c.lr


def set_lr(optimizer: Any, lr: float) -> None:
    """Use the learning rate ``lr`` in every parameter group of ``optimizer`` from its next
    ``step()`` on (how a schedule drives a ``torch.optim`` optimiser). ``lr`` may be 0 (the
    end of :func:`cosine_lr`)."""
    check_number("lr", lr, minimum=0.0)
    _set_lr(optimizer, lr)


def _set_lr(optimizer: Any, lr: float) -> None:
    """:func:`set_lr` without the check, for a rate from :func:`learning_rate`."""
    for group in optimizer.param_groups:
        group["lr"] = lr
