"""The training loss of the paper (section 5.4) and the lecture (p46): label-smoothed
cross-entropy over the non-padding tokens."""

from __future__ import annotations

import torch
from torch import Tensor

from lecturekit._common import check_choice, check_number

__all__ = ["label_smoothed_nll"]


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
        target: ``(...)`` gold ids in ``[0, V)``; positions equal to ``ignore_index``
            (padding) count for nothing. Any other id raises ``ValueError`` naming it (checked
            on every call, so a bad label in a later batch is caught too).
        smoothing: in ``[0, 1)``; the paper uses 0.1.
        reduction: ``"mean"`` over the counted tokens, ``"sum"``, or ``"none"`` (zeros at
            ignored positions).
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits must have shape (..., V) with ... = target.shape, got "
            f"{tuple(logits.shape)} and {tuple(target.shape)}"
        )
    check_number("smoothing", smoothing, 0.0, 1.0, exclusive=("maximum",))
    check_choice("reduction", reduction, ("mean", "sum", "none"))
    _check_target(target, logits.shape[-1], ignore_index)
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


def _check_target(target: Tensor, vocab_size: int, ignore_index: int | None) -> None:
    """Every counted id of ``target`` is in ``[0, vocab_size)`` (one device sync)."""
    if target.dtype.is_floating_point or target.dtype.is_complex or target.dtype == torch.bool:
        raise TypeError(f"target must hold integer token ids, got dtype {target.dtype}")
    bad = (target < 0) | (target >= vocab_size)
    if ignore_index is not None:
        bad &= target != ignore_index
    if not bool(bad.any()):
        return
    where = tuple(int(i) for i in bad.nonzero()[0])
    value = int(target[where])
    fix = (
        f"; if {value} marks padding, pass ignore_index={value}"
        if value < 0
        else "; the labels must come from the same vocabulary as the model's output"
    )
    raise ValueError(
        f"target must hold ids in [0, {vocab_size}) (the logits' last dimension) or "
        f"ignore_index={ignore_index}, got {value} at position {where}{fix}"
    )
