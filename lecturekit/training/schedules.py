"""Learning-rate schedules: the paper's warmup / inverse square root (``noam_lr``), warmup
then cosine decay to zero over a fixed step budget (``cosine_lr``) and a constant rate to
compare them with."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lecturekit._common import check_int

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.training.config import TrainConfig

__all__ = ["noam_lr", "cosine_lr", "constant_lr", "learning_rate"]


def noam_lr(step: int, d_model: int, warmup_steps: int = 4000, factor: float = 1.0) -> float:
    """The paper's schedule: ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It rises linearly for ``warmup_steps`` steps, peaks at
    ``factor * (d_model * warmup_steps) ** -0.5`` and then decays as ``1 / sqrt(step)``.
    ``step`` counts from 1 (the first optimiser step).
    """
    check_int("step", step, minimum=1)  # steps count from 1
    check_int("d_model", d_model, minimum=1)
    check_int("warmup_steps", warmup_steps, minimum=1)
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
    check_int("warmup_steps", warmup_steps, minimum=1)
    check_int("decay_steps", decay_steps, minimum=warmup_steps + 1)
    if step <= warmup_steps:
        return lr * step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (decay_steps - warmup_steps))
    return lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def constant_lr(step: int, lr: float) -> float:
    """A constant learning rate (the schedule to compare warmup against)."""
    check_int("step", step, minimum=1)  # steps count from 1
    return lr


def learning_rate(step: int, config: TrainConfig, d_model: int) -> float:
    """The learning rate of optimiser step ``step`` (from 1) under ``config``."""
    if config.schedule == "noam":
        return noam_lr(step, d_model, config.warmup_steps, config.lr_factor)
    if config.schedule == "cosine":
        return cosine_lr(step, config.lr, config.warmup_steps, config.decay_steps)
    return constant_lr(step, config.lr)
