"""``History``: what :func:`lecturekit.training.loop.fit` records, step by step and per
evaluation. It is data only; the book's figures draw it (``plot_training`` in the book's
plotting module)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["History"]


@dataclass
class History:
    """What :func:`fit` records. Per optimiser step: ``step``, ``loss`` (label-smoothed,
    per token), ``token_accuracy`` (teacher-forced, training batch), ``lr`` and
    ``teacher_prob`` (1.0 without scheduled sampling). Per evaluation: ``eval_step``,
    ``valid_loss``, ``valid_token_accuracy``, ``valid_exact_match`` (greedy decoding) and
    ``eval_seconds`` (wall time since the start of training); the ``valid_*`` lists are
    empty when ``fit`` had no validation data. ``metrics``: ``{name: values}`` of ``fit``'s
    ``metrics`` callable, one value per evaluation.
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
    metrics: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (for checkpoints and plotting)."""
        return asdict(self)
