"""Evaluation during and after training: teacher-forced loss and token accuracy, and
greedy-decoding exact match (p46: a whole sentence is right or wrong)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from lecturekit._common import eval_mode
from lecturekit.decoding.search import greedy
from lecturekit.model.tagger import EncoderTagger
from lecturekit.training.checks import check_decode_length
from lecturekit.training.losses import label_smoothed_nll

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from lecturekit.model.transformer import Transformer
    from lecturekit.training.loop import _Run

__all__ = ["evaluate"]


def _until_eos(tokens: Tensor, eos_id: int) -> list[list[int] | None]:
    """Each row's ids before its first EOS; None for a row without EOS (never stopped)."""
    rows: list[list[int] | None] = []
    for row in tokens.tolist():
        rows.append(row[: row.index(eos_id)] if eos_id in row else None)
    return rows


@torch.no_grad()
def evaluate(
    model: Transformer | EncoderTagger,
    data: Iterable[Any],
    label_smoothing: float = 0.0,
    decode_max_len: int | None = None,
) -> dict[str, float]:
    """Teacher-forced loss and token accuracy, and greedy-decoding exact match, over ``data``.

    Args:
        model: a :class:`lecturekit.Transformer`, or an encoder-only
            :class:`~lecturekit.model.tagger.EncoderTagger` (labels ``batch.tags``; its
            exact match: every position's argmax right).
        data: an iterable of ``lecturekit.data.Batch``.
        label_smoothing: smoothing of the reported loss (0 = plain cross-entropy).
        decode_max_len: greedy decoding length (None: the batch's target length + 2, at
            most the model's ``max_len`` with learned positions).

    Returns:
        ``{"loss", "token_accuracy", "exact_match"}``; exact match compares the greedy output
        up to its EOS with the gold target (lecture p46's evaluation by whole sentence).
    """
    cfg = model.config
    check_decode_length(decode_max_len, cfg)
    device = next(model.parameters()).device
    loss_sum, correct, tokens, exact, sentences = 0.0, 0, 0, 0, 0
    with eval_mode(model), torch.inference_mode():  # only floats leave this block
        for batch in data:
            batch = batch.to(device)
            tagging = isinstance(model, EncoderTagger)
            logits = model(batch.src) if tagging else model(batch.src, batch.tgt_in)
            labels = batch.tags if tagging else batch.tgt_out
            loss_sum += float(
                label_smoothed_nll(logits, labels, label_smoothing, cfg.pad_id, "sum")
            )
            keep = labels != cfg.pad_id
            right = (logits.argmax(-1) == labels) & keep
            correct += int(right.sum())
            tokens += int(keep.sum())
            if tagging:
                exact += int((right | ~keep).all(-1).sum())
                sentences += len(labels)
                continue
            max_len = decode_max_len or batch.tgt_out.shape[1] + 2
            if cfg.positional == "learned":  # positions stop there; +2 is only slack
                max_len = min(max_len, cfg.max_len)
            out = greedy(model, batch.src, max_len, src_key_padding_mask=batch.src_padding_mask)
            gold = _until_eos(batch.tgt_out, cfg.eos_id)
            for pred, ref in zip(_until_eos(out.tokens, cfg.eos_id), gold, strict=True):
                exact += pred == ref
            sentences += len(gold)
    if sentences == 0:
        raise ValueError("data: no batches to evaluate")
    return {
        "loss": loss_sum / max(tokens, 1),
        "token_accuracy": correct / max(tokens, 1),
        "exact_match": exact / sentences,
    }


def _record_evaluation(run: _Run, step: int) -> dict[str, float]:
    """``fit``'s evaluation at ``step``: :func:`evaluate` on ``run.valid`` and the caller's
    ``run.metrics``, recorded in ``run.history`` (the metrics draw no random numbers of the
    training's); returns :func:`evaluate`'s metrics (empty without ``run.valid``)."""
    config, history = run.config, run.history
    metrics: dict[str, float] = {}
    if run.valid is not None:
        metrics = evaluate(
            run.model, run.valid, config.label_smoothing, config.valid_decode_max_len
        )
        history.valid_loss.append(metrics["loss"])
        history.valid_token_accuracy.append(metrics["token_accuracy"])
        history.valid_exact_match.append(metrics["exact_match"])
    if run.metrics is not None:
        rng = torch.get_rng_state()
        with eval_mode(run.model):
            extra = _checked_metrics(run.metrics(run.model))
        torch.set_rng_state(rng)
        for name, value in extra.items():
            history.metrics.setdefault(name, []).append(value)
    history.eval_step.append(step)
    history.eval_seconds.append(run.seconds_before + run.stopping.elapsed())
    if run.bar is not None and run.valid is not None:
        run.bar.set_postfix(
            loss=f"{history.loss[-1]:.3f}", valid_em=f"{metrics['exact_match']:.3f}"
        )
    return metrics


def _checked_metrics(metrics: Any) -> dict[str, float]:
    if not isinstance(metrics, dict) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) for k, v in metrics.items()
    ):
        raise TypeError(f"metrics must return a dict of str -> float, got {str(metrics)[:60]!r}")
    return {k: float(v) for k, v in metrics.items()}
