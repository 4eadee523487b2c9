"""Measuring exposure bias: the same model with gold prefixes and with its own (p56-p57).

Training with teacher forcing shows the decoder only gold prefixes; at inference it reads its
own outputs. The gap between the two is what this module measures on a batch:

* :func:`teacher_forced_predictions`: the argmax at every position given the *gold* prefix
  (one parallel forward pass, as in training);
* :func:`free_running_predictions`: greedy decoding, each step fed the model's own output;
* :func:`error_after_mistake`: the error rate at a position split by whether the model's own
  prefix before it is still correct or already contains a mistake. If errors did not feed on
  each other the two rates would be equal; exposure bias makes the second much larger;
* :func:`exposure_report`: all of the above plus exact match, in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lecturekit._common import check_int, eval_mode
from lecturekit.decoding.protocol import as_decoder
from lecturekit.decoding.search import greedy
from lecturekit.training.metrics import error_rate_by_position

__all__ = [
    "teacher_forced_predictions",
    "free_running_predictions",
    "error_after_mistake",
    "ExposureReport",
    "exposure_report",
]


def _check_pair(pred: Tensor, gold: Tensor) -> None:
    for name, x in (("pred", pred), ("gold", gold)):
        if not isinstance(x, Tensor) or x.dim() != 2:
            raise ValueError(f"{name} must be a (B, T) tensor, got {getattr(x, 'shape', type(x))}")
        if x.dtype != torch.long:
            raise TypeError(f"{name} must have dtype torch.long, got {x.dtype}")
    if pred.shape != gold.shape:
        raise ValueError(
            f"pred and gold must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(gold.shape)}"
        )


@torch.no_grad()
def teacher_forced_predictions(model: nn.Module, src: Tensor, tgt_in: Tensor) -> Tensor:
    """Argmax prediction at every position given the gold prefix (one forward pass).

    Args:
        model: a :class:`lecturekit.Transformer` (``model(src, tgt_in) -> (B, T, V)``).
        src: ``(B, S)`` source ids.
        tgt_in: ``(B, T)`` gold decoder input ``<bos> y_1 ... y_n`` (+ padding).

    Returns:
        ``(B, T)``: position ``t`` is the guess for label ``t`` (``y_{t+1}``, or EOS).
    """
    with eval_mode(model):
        return model(src, tgt_in).argmax(-1)


@torch.no_grad()
def free_running_predictions(model: nn.Module, src: Tensor, length: int) -> Tensor:
    """Greedy decoding for up to ``length`` tokens, right-padded with ``pad_id`` to ``length``.

    Args:
        model: a :class:`lecturekit.Transformer`, or any model that follows the decoding
            step protocol (:mod:`lecturekit.decoding.protocol`).
        src: ``(B, S)`` source ids.
        length: number of output positions ``T`` to produce (e.g. ``tgt_out.shape[1]``).

    Returns:
        ``(B, T)`` generated ids (EOS included where produced, ``pad_id`` after it).
    """
    check_int("length", length, minimum=1)
    tokens = greedy(model, src, length).tokens
    pad = as_decoder(model).pad_id
    out = torch.full((src.shape[0], length), pad, dtype=torch.long, device=src.device)
    out[:, : tokens.shape[1]] = tokens
    return out


def error_after_mistake(
    pred: Tensor, gold: Tensor, pad_id: int = 0
) -> tuple[list[float], list[float], list[int], list[int]]:
    """Error rate at each position, split by the state of the *predicted* prefix.

    Position ``t`` of row ``b`` counts when ``gold[b, t]`` is not padding. It goes into the
    "clean" group when ``pred[b, :t] == gold[b, :t]`` and into the "after a mistake" group
    otherwise.

    Args:
        pred: ``(B, T)`` predicted ids (free-running output, padded to ``T``).
        gold: ``(B, T)`` gold labels (``y_1 ... y_n <eos>`` + padding).
        pad_id: padding id of ``gold``.

    Returns:
        ``(clean_rate, after_rate, clean_count, after_count)``, each a list of length ``T``;
        a rate is ``nan`` where its group is empty.
    """
    _check_pair(pred, gold)
    valid = gold != pad_id
    wrong = (pred != gold) & valid  # (B, T)
    # prefix_bad[:, t]: some earlier position (< t) is wrong
    earlier = torch.cumsum(wrong.long(), dim=1) - wrong.long()
    prefix_bad = earlier > 0
    clean = valid & ~prefix_bad
    after = valid & prefix_bad
    rates: list[list[float]] = []
    counts: list[list[int]] = []
    for group in (clean, after):
        n = group.sum(0)
        e = (wrong & group).sum(0)
        rates.append(
            [float(ei) / float(ni) if ni > 0 else float("nan") for ei, ni in zip(e, n, strict=True)]
        )
        counts.append(n.tolist())
    return rates[0], rates[1], counts[0], counts[1]


@dataclass
class ExposureReport:
    """Per-position error rates of one model on one batch (lists indexed by position ``t``).

    - ``teacher_forced``: error rate given gold prefixes (what training sees).
    - ``free_running``: error rate of greedy decoding (what inference sees).
    - ``clean``, ``after_mistake``: free-running error rate at ``t`` when the model's own
      prefix is still all correct / already contains an error (:func:`error_after_mistake`).
    - ``exact_match``: fraction of free-running outputs equal to the gold output.
    - ``token_error_teacher_forced``, ``token_error_free_running``: over all label tokens.
    """

    teacher_forced: list[float]
    free_running: list[float]
    clean: list[float]
    after_mistake: list[float]
    clean_count: list[int]
    after_count: list[int]
    exact_match: float
    token_error_teacher_forced: float
    token_error_free_running: float


def exposure_report(
    model: nn.Module, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, min_count: int = 20
) -> ExposureReport:
    """Teacher-forced vs free-running errors of ``model`` on one padded batch.

    Args:
        model: a :class:`lecturekit.Transformer`.
        src, tgt_in, tgt_out: ``(B, S)``, ``(B, T)``, ``(B, T)`` as in
            :class:`lecturekit.data.Batch`.
        min_count: the per-position lists stop at the first position with fewer than this
            many gold tokens (see :func:`lecturekit.training.metrics.error_rate_by_position`).
    """
    if tgt_in.shape != tgt_out.shape:
        raise ValueError(
            f"tgt_in and tgt_out must have the same shape, got {tuple(tgt_in.shape)} and "
            f"{tuple(tgt_out.shape)}"
        )
    pad = model.config.pad_id
    tf = teacher_forced_predictions(model, src, tgt_in)
    fr = free_running_predictions(model, src, tgt_out.shape[1])
    tf_rates = error_rate_by_position(tf, tgt_out, pad_id=pad, min_count=min_count)
    fr_rates = error_rate_by_position(fr, tgt_out, pad_id=pad, min_count=min_count)
    clean, after, n_clean, n_after = error_after_mistake(fr, tgt_out, pad)
    n = len(fr_rates)
    valid = tgt_out != pad
    exact = ((fr == tgt_out) | ~valid).all(1).float().mean().item()
    tf_err = ((tf != tgt_out) & valid).sum().item() / valid.sum().item()
    fr_err = ((fr != tgt_out) & valid).sum().item() / valid.sum().item()
    return ExposureReport(
        teacher_forced=tf_rates,
        free_running=fr_rates,
        clean=clean[:n],
        after_mistake=after[:n],
        clean_count=n_clean[:n],
        after_count=n_after[:n],
        exact_match=exact,
        token_error_teacher_forced=tf_err,
        token_error_free_running=fr_err,
    )
