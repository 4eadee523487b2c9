"""Evaluation metrics for the toy tasks.

- ``exact_match``: fraction of outputs that equal the reference exactly (the strictest).
- ``token_accuracy``: fraction of reference tokens predicted correctly, padding ignored.
- ``error_rate_by_position``: error rate at each output position; under free-running
  decoding one early mistake derails what follows (exposure bias, lecture p56-p57), which
  shows as a rate that grows with the position.
- ``corpus_bleu``: corpus-level BLEU (lecture p54) through ``sacrebleu``, the reference
  implementation; we never re-implement BLEU.
- ``char_error_rate``: edit distance over reference length (speech recognition, input
  methods; the capstone chapter), from ``edit_distance``.

Predictions and references are strings (compared character by character), or sequences of
tokens/ids (e.g. ``text.split()`` for the word-level translation task), or, for the token
metrics, ``(B, T)`` tensors with padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from lecturekit.data.vocab import PAD_ID

__all__ = ["exact_match", "token_accuracy", "error_rate_by_position", "corpus_bleu"]


def exact_match(predictions: Sequence[Any], references: Sequence[Any]) -> float:
    """Fraction of ``predictions[i] == references[i]`` (strings or token sequences)."""
    predictions, references = _check_pairs(predictions, references)
    hits = sum(list(p) == list(r) for p, r in zip(predictions, references, strict=True))
    return hits / len(references)


def token_accuracy(predictions: Any, references: Any, pad_id: int = PAD_ID) -> float:
    """Fraction of reference tokens that the prediction gets right at the same position.

    Two input forms:

    - tensors: ``predictions`` ``(B, T)`` ids or ``(B, T, V)`` logits (argmax is taken),
      ``references`` ``(B, T)`` ids; positions where the reference is ``pad_id`` are ignored
      (the teacher-forced accuracy of a training batch);
    - sequences of strings / token lists: each reference token counts once; a prediction that
      is shorter misses the remaining tokens, extra predicted tokens are not counted.
    """
    if isinstance(predictions, torch.Tensor) or isinstance(references, torch.Tensor):
        predicted, target = _tensor_pair(predictions, references)
        keep = target != pad_id
        n = int(keep.sum())
        if n == 0:
            raise ValueError("references contain only padding: token accuracy is undefined")
        return float(((predicted == target) & keep).sum()) / n
    predictions, references = _check_pairs(predictions, references)
    correct = total = 0
    for p, r in zip(predictions, references, strict=True):
        p, r = list(p), list(r)
        correct += sum(a == b for a, b in zip(p, r, strict=False))
        total += len(r)
    if total == 0:
        raise ValueError("references are all empty: token accuracy is undefined")
    return correct / total


def error_rate_by_position(
    predictions: Any, references: Any, pad_id: int = PAD_ID, min_count: int = 1
) -> list[float]:
    """Error rate at each output position ``t = 0, 1, ...``.

    ``rate[t]`` = among examples whose reference has a token at position ``t``, the fraction
    whose prediction has a different token there (or none: too short). The list stops at the
    first position with fewer than ``min_count`` such examples, so a noisy tail made of a
    handful of long references can be cut off. Inputs are as for ``token_accuracy``
    (tensor form: ``(B, T)`` ids, reference padding ignored).
    """
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be a positive int, got {min_count!r}")
    if isinstance(predictions, torch.Tensor) or isinstance(references, torch.Tensor):
        predicted, target = _tensor_pair(predictions, references)
        keep = target != pad_id
        errors = ((predicted != target) & keep).sum(0).tolist()
        counts = keep.sum(0).tolist()
    else:
        predictions, references = _check_pairs(predictions, references)
        length = max(len(r) for r in references)
        errors, counts = [0] * length, [0] * length
        for p, r in zip(predictions, references, strict=True):
            p, r = list(p), list(r)
            for t, token in enumerate(r):
                counts[t] += 1
                errors[t] += t >= len(p) or p[t] != token
    rates = []
    for e, c in zip(errors, counts, strict=True):
        if c < min_count:
            break
        rates.append(e / c)
    return rates


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    tokenize: str = "char",
) -> float:
    """Corpus BLEU in ``[0, 100]`` computed by ``sacrebleu``.

    ``references``: one reference string per hypothesis, or a list of several references per
    hypothesis (all hypotheses must have the same number). ``tokenize`` is sacrebleu's
    tokenizer: ``"char"`` (default, the character-level number and date tasks), ``"zh"``
    (Chinese characters split, other text tokenized like ``13a``) or ``"none"`` (already
    space-separated words, e.g. the toy translation task).
    """
    from sacrebleu.metrics import BLEU

    hypotheses = list(hypotheses)
    references = list(references)
    if len(hypotheses) == 0:
        raise ValueError("hypotheses must not be empty")
    if len(references) != len(hypotheses):
        raise ValueError(
            f"references must have one entry per hypothesis: {len(hypotheses)} hypotheses, "
            f"{len(references)} references"
        )
    for name, items in (("hypotheses", hypotheses), ("references", references)):
        for item in items:
            if not isinstance(item, (str, list, tuple)):
                raise TypeError(f"{name} must hold str, got {type(item).__name__}")
    single = [r for r in references if isinstance(r, str)]
    if len(single) == len(references):  # one reference string per hypothesis
        streams: list[Sequence[str]] = [single]
    else:
        sizes = {len(r) if isinstance(r, (list, tuple)) else -1 for r in references}
        if len(sizes) != 1 or -1 in sizes or 0 in sizes:
            raise ValueError("with several references, give every hypothesis the same number")
        streams = [list(stream) for stream in zip(*references, strict=True)]
    if not all(isinstance(h, str) for h in hypotheses):
        raise TypeError("hypotheses must be strings (join token lists before calling)")
    return float(BLEU(tokenize=tokenize).corpus_score(hypotheses, streams).score)


def _check_pairs(predictions: Any, references: Any) -> tuple[list[Any], list[Any]]:
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references must have the same length, got {len(predictions)} "
            f"and {len(references)}"
        )
    if len(references) == 0:
        raise ValueError("references must not be empty")
    return predictions, references


def _tensor_pair(predictions: Any, references: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not (isinstance(predictions, torch.Tensor) and isinstance(references, torch.Tensor)):
        raise TypeError("pass both predictions and references as tensors, or neither")
    if predictions.dim() == 3:
        predictions = predictions.argmax(-1)  # logits (B, T, V) -> ids (B, T)
    if predictions.dim() != 2 or predictions.shape != references.shape:
        raise ValueError(
            "predictions must be (B, T) ids or (B, T, V) logits matching references (B, T); "
            f"got {tuple(predictions.shape)} and {tuple(references.shape)}"
        )
    return predictions, references


def edit_distance(prediction: Sequence[Any], reference: Sequence[Any]) -> int:
    """Levenshtein distance: the fewest insertions, deletions and substitutions of tokens
    (characters of a string) that turn ``prediction`` into ``reference``."""
    prediction, reference = list(prediction), list(reference)
    previous = list(range(len(reference) + 1))  # distances from the empty prefix
    for i, p in enumerate(prediction, start=1):
        current = [i]
        for j, r in enumerate(reference, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (p != r)))
        previous = current
    return previous[-1]


def char_error_rate(predictions: Sequence[Any], references: Sequence[Any]) -> float:
    """Character error rate (CER): total edit distance over total reference length.

    The standard metric of speech recognition and input methods; it can exceed 1 when the
    predictions are longer than the references. Strings are compared character by character.
    """
    predictions, references = _check_pairs(predictions, references)
    total = sum(len(r) for r in references)
    if total == 0:
        raise ValueError("references are all empty: the character error rate is undefined")
    edits = sum(edit_distance(p, r) for p, r in zip(predictions, references, strict=True))
    return edits / total
