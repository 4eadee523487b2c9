"""Learning-rate schedules: the paper's warmup / inverse square root (``noam_lr``) and a
constant rate to compare it with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lecturekit._common import check_int

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.training.config import TrainConfig

__all__ = ["noam_lr", "constant_lr", "learning_rate"]


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


def constant_lr(step: int, lr: float) -> float:
    """A constant learning rate (the schedule to compare warmup against)."""
    check_int("step", step, minimum=1)  # steps count from 1
    return lr


def learning_rate(step: int, config: TrainConfig, d_model: int) -> float:
    """The learning rate of optimiser step ``step`` (from 1) under ``config``."""
    if config.schedule == "noam":
        return noam_lr(step, d_model, config.warmup_steps, config.lr_factor)
    return constant_lr(step, config.lr)
