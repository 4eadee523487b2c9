"""Measuring exposure bias: the same model with gold prefixes and with its own (p56-p57).

Training with teacher forcing shows the decoder only gold prefixes; at inference it reads its
own outputs. The gap between the two is what this module measures on a batch:

* :func:`teacher_forced_predictions`: the argmax at every position given the *gold* prefix
  (one parallel forward pass, as in training);
* :func:`free_running_predictions`: greedy decoding, each step fed the model's own output;
* :func:`error_after_mistake`: the error rate at a position split by whether the model's own
  prefix before it is still correct or already contains a mistake. The split is observational:
  the sentences that already hold a mistake are also the harder ones, so the two rates differ
  for both reasons at once;
* :func:`exposure_report`: all of the above plus exact match, in one call;
* :func:`inject_error` and :func:`recovery_after_error`: the controlled version of the split.
  Replace the gold token at position ``k`` by a wrong one, on every sentence, and measure how
  often the model still continues correctly, against the same sentences left intact;
  :func:`recovery_by_substitution` splits that rate by the kind of substitution.

Under greedy decoding the first mistake is always made on a clean prefix, where the model's
own prefix *is* the gold prefix; so a sentence is decoded exactly right if and only if every
teacher-forced prediction in it is right. ``ExposureReport.teacher_forced_sentences`` is that
fraction, and it equals ``exact_match``: whatever happens after a first mistake cannot change
exact match, it only decides how wrong a wrong output gets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lecturekit._common import check_int, check_token_ids, eval_mode
from lecturekit.decoding.protocol import as_decoder
from lecturekit.decoding.search import forbid_specials, greedy
from lecturekit.training.metrics import error_rate_by_position

__all__ = [
    "teacher_forced_predictions",
    "free_running_predictions",
    "error_after_mistake",
    "PrefixGroup",
    "ExposureReport",
    "exposure_report",
    "inject_error",
    "Recovery",
    "recovery_after_error",
    "SUBSTITUTION_KINDS",
    "substitution_kind",
    "SubstitutionRecovery",
    "recovery_by_substitution",
]


def _check_pair(pred: Tensor, gold: Tensor) -> None:
    check_token_ids("pred", pred)
    check_token_ids("gold", gold)
    if pred.shape != gold.shape:
        raise ValueError(
            f"pred and gold must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(gold.shape)}"
        )


def _check_targets(tgt_in: Tensor, tgt_out: Tensor) -> None:
    if tgt_in.shape != tgt_out.shape:
        raise ValueError(
            f"tgt_in and tgt_out must have the same shape, got {tuple(tgt_in.shape)} and "
            f"{tuple(tgt_out.shape)}"
        )


@torch.no_grad()
def teacher_forced_predictions(model: nn.Module, src: Tensor, tgt_in: Tensor) -> Tensor:
    """Argmax prediction at every position given the gold prefix (one forward pass).

    Args:
        model: a :class:`lecturekit.Transformer` (``model(src, tgt_in) -> (B, T, V)``).
        src: ``(B, S)`` source ids.
        tgt_in: ``(B, T)`` gold decoder input ``<bos> y_1 ... y_n`` (+ padding).

    Returns:
        ``(B, T)``: position ``t`` is the guess for label ``t`` (``y_{t+1}``, or EOS). As in
        :func:`lecturekit.decoding.greedy`, padding and BOS are never predicted, so on a gold
        prefix this is exactly the token greedy decoding would choose.
    """
    with eval_mode(model):
        logits = model(src, tgt_in)  # (B, T, V)
    allowed = forbid_specials(logits.flatten(0, 1), as_decoder(model))  # (B*T, V)
    return allowed.argmax(-1).view(tgt_in.shape)


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
class PrefixGroup:
    """Totals over the label positions of one group of :func:`error_after_mistake` (all
    positions, no ``min_count`` cut), with the model's own prefix and with the gold prefix.

    ``gold_prefix_errors`` counts teacher-forced errors at the *same* positions: the group's
    error rate when nothing is wrong with the prefix. Where it is high too, the group is made
    of harder sentences, not only of bad prefixes.
    """

    positions: int
    own_prefix_errors: int
    gold_prefix_errors: int

    @property
    def own_prefix_error(self) -> float:
        """Error rate with the model's own (free-running) prefix."""
        return self.own_prefix_errors / self.positions if self.positions else math.nan

    @property
    def gold_prefix_error(self) -> float:
        """Error rate at the same positions with the gold prefix (teacher forced)."""
        return self.gold_prefix_errors / self.positions if self.positions else math.nan


@dataclass
class ExposureReport:
    """Per-position error rates of one model on one batch (lists indexed by position ``t``).

    - ``teacher_forced``: error rate given gold prefixes (what training sees).
    - ``free_running``: error rate of greedy decoding (what inference sees).
    - ``clean``, ``after_mistake``: free-running error rate at ``t`` when the model's own
      prefix is still all correct / already contains an error (:func:`error_after_mistake`).
    - ``clean_group``, ``after_group``: the same split summed over all positions, with the
      teacher-forced errors at the same positions (:class:`PrefixGroup`).
    - ``exact_match``: fraction of free-running outputs equal to the gold output.
    - ``teacher_forced_sentences``: fraction of sentences whose teacher-forced predictions are
      all right; under greedy decoding it equals ``exact_match`` (see the module docstring).
    - ``independent_exact_match``: the exact match expected if every label token were wrong
      independently with probability ``token_error_teacher_forced``: the mean over sentences
      of ``(1 - ε) ** n``, ``n`` the sentence's number of label tokens (EOS included).
    - ``token_error_teacher_forced``, ``token_error_free_running``: over all label tokens.
    """

    teacher_forced: list[float]
    free_running: list[float]
    clean: list[float]
    after_mistake: list[float]
    clean_count: list[int]
    after_count: list[int]
    clean_group: PrefixGroup
    after_group: PrefixGroup
    exact_match: float
    teacher_forced_sentences: float
    independent_exact_match: float
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
    _check_targets(tgt_in, tgt_out)
    pad = model.config.pad_id
    tf = teacher_forced_predictions(model, src, tgt_in)
    fr = free_running_predictions(model, src, tgt_out.shape[1])
    tf_rates = error_rate_by_position(tf, tgt_out, pad_id=pad, min_count=min_count)
    fr_rates = error_rate_by_position(fr, tgt_out, pad_id=pad, min_count=min_count)
    clean, after, n_clean, n_after = error_after_mistake(fr, tgt_out, pad)
    n = len(fr_rates)
    valid = tgt_out != pad
    exact = ((fr == tgt_out) | ~valid).all(1).double().mean().item()
    tf_sentences = ((tf == tgt_out) | ~valid).all(1).double().mean().item()
    tf_err = ((tf != tgt_out) & valid).sum().item() / valid.sum().item()
    fr_err = ((fr != tgt_out) & valid).sum().item() / valid.sum().item()
    lengths = valid.sum(1).double()  # (B,) label tokens per sentence
    independent = torch.pow(1.0 - tf_err, lengths).mean().item()
    fr_wrong, tf_wrong = (fr != tgt_out) & valid, (tf != tgt_out) & valid
    dirty = (torch.cumsum(fr_wrong.long(), 1) - fr_wrong.long()) > 0  # an earlier own error
    groups = [
        PrefixGroup(
            positions=int(mask.sum()),
            own_prefix_errors=int((fr_wrong & mask).sum()),
            gold_prefix_errors=int((tf_wrong & mask).sum()),
        )
        for mask in (valid & ~dirty, valid & dirty)
    ]
    return ExposureReport(
        teacher_forced=tf_rates,
        free_running=fr_rates,
        clean=clean[:n],
        after_mistake=after[:n],
        clean_count=n_clean[:n],
        after_count=n_after[:n],
        clean_group=groups[0],
        after_group=groups[1],
        exact_match=exact,
        teacher_forced_sentences=tf_sentences,
        independent_exact_match=independent,
        token_error_teacher_forced=tf_err,
        token_error_free_running=fr_err,
    )


def _check_injection(
    tgt_in: Tensor, position: int, candidates: Sequence[int], pad_id: int
) -> Tensor:
    """Check :func:`inject_error`'s arguments; return the candidates as a ``(C,)`` tensor."""
    check_token_ids("tgt_in", tgt_in)
    check_int("position", position, minimum=1, maximum=tgt_in.shape[1] - 1)
    check_int("pad_id", pad_id, minimum=0)
    ids = list(candidates)
    for token in ids:
        check_int("candidates", token, minimum=0)  # before set(): 0-d tensors hash by identity
    if len(set(ids)) < 2 or len(set(ids)) != len(ids):
        raise ValueError(f"candidates must be at least two distinct token ids, got {ids}")
    if pad_id in ids:
        raise ValueError(f"candidates must not contain the padding id {pad_id}, got {ids}")
    return torch.tensor(ids, dtype=torch.long, device=tgt_in.device)


def inject_error(
    tgt_in: Tensor,
    position: int,
    candidates: Sequence[int],
    *,
    pad_id: int = 0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Replace the gold output token ``y_k`` (``k = position``) by a wrong one, in every row.

    The decoder input is ``<bos> y_1 ... y_n`` (+ padding), so ``y_k`` sits at column ``k``.
    Each row that has a token there gets one drawn uniformly from ``candidates`` minus the
    gold token; the other rows are left as they are.

    Args:
        tgt_in: ``(B, T)`` gold decoder input.
        position: ``k >= 1``, the output position to corrupt.
        candidates: the ids a wrong token is drawn from (ordinary tokens: no padding, BOS, EOS);
            at least two, so that every gold token has a wrong alternative.
        pad_id: padding id of ``tgt_in``.
        generator: randomness source (seed it for a repeatable draw).

    Returns:
        ``(corrupted, rows)``: the ``(B, T)`` corrupted input and the ``(B,)`` bool mask of the
        rows that have a token at ``k`` (only those were changed).
    """
    pool = _check_injection(tgt_in, position, candidates, pad_id)  # (C,)
    gold = tgt_in[:, position]  # (B,)
    rows = gold != pad_id
    weights = (pool[None, :] != gold[:, None]).float()  # (B, C): every candidate but the gold
    pick = torch.multinomial(weights, 1, generator=generator).squeeze(1)  # (B,)
    corrupted = tgt_in.clone()
    corrupted[:, position] = torch.where(rows, pool[pick], gold)
    return corrupted, rows


@dataclass
class Recovery:
    """What one wrong token at output position ``k`` does to the rest of the sentence.

    Over the ``rows`` sentences that have a token at ``k``, each fed once with its gold
    prefix (``clean``) and once with ``y_k`` replaced by a wrong token (``corrupted``):

    - ``next_clean``, ``next_corrupted``: the next token, ``y_{k+1}`` (or EOS), is right;
    - ``rest_clean``, ``rest_corrupted``: every label after ``k`` is right. Under greedy
      decoding this is the fraction of sentences whose continuation after the (possibly
      wrong) token ``k`` is exactly the gold one: the model *recovers*.
    """

    position: int
    rows: int
    next_clean: float
    next_corrupted: float
    rest_clean: float
    rest_corrupted: float


def recovery_after_error(
    model: nn.Module,
    src: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    positions: Sequence[int],
    candidates: Sequence[int],
    *,
    generator: torch.Generator | None = None,
) -> list[Recovery]:
    """Put one wrong token into the gold prefix at each of ``positions`` and measure recovery.

    For each ``k`` in ``positions`` (one at a time, wrong tokens drawn by :func:`inject_error`
    in the order given), the continuation is read off one teacher-forced pass over the
    corrupted input: as long as every prediction after ``k`` is right, greedy decoding from
    the corrupted prefix feeds exactly that input back, so "all teacher-forced predictions
    after ``k`` right" is "greedy decoding continues with the gold rest" (the same argument
    as for exact match). The clean pass is shared by all positions.

    Args:
        model: a :class:`lecturekit.Transformer`.
        src, tgt_in, tgt_out: ``(B, S)``, ``(B, T)``, ``(B, T)`` as in
            :class:`lecturekit.data.Batch`.
        positions: output positions ``k >= 1`` that get the wrong token.
        candidates, generator: see :func:`inject_error`; a generator seeded the same way
            gives every model the same wrong tokens.

    Returns:
        One :class:`Recovery` per position, in the order of ``positions``.
    """
    _check_targets(tgt_in, tgt_out)
    positions = list(positions)
    if not positions:
        raise ValueError("positions must name at least one output position, got []")
    clean_right = teacher_forced_predictions(model, src, tgt_in) == tgt_out  # (B, T)
    return [
        _recovery_at(model, src, tgt_in, tgt_out, clean_right, k, candidates, generator)
        for k in positions
    ]


def _recovery_at(
    model: nn.Module,
    src: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    clean_right: Tensor,
    k: int,
    candidates: Sequence[int],
    generator: torch.Generator | None,
) -> Recovery:
    """One position of :func:`recovery_after_error` (``clean_right``: ``(B, T)`` bool, the
    teacher-forced predictions on the intact input that are right)."""
    pad = model.config.pad_id
    corrupted, rows = inject_error(tgt_in, k, candidates, pad_id=pad, generator=generator)
    if not bool(rows.any()):
        raise ValueError(f"positions: no sentence in the batch has an output token at {k}")
    columns = torch.arange(tgt_out.shape[1], device=tgt_out.device)
    after = (tgt_out != pad) & (columns >= k)  # (B, T): the labels after position k
    bad_right = teacher_forced_predictions(model, src, corrupted) == tgt_out  # (B, T)
    rates = []
    for right in (clean_right, bad_right):
        rates.append(right[:, k][rows].double().mean().item())  # the next token
        rates.append((right | ~after).all(1)[rows].double().mean().item())  # the whole rest
    return Recovery(
        position=k,
        rows=int(rows.sum()),
        next_clean=rates[0],
        rest_clean=rates[1],
        next_corrupted=rates[2],
        rest_corrupted=rates[3],
    )


SUBSTITUTION_KINDS = ("digit->digit", "unit->unit", "digit<->unit")
"""The kinds of a one-token substitution, by whether the gold and the wrong token are units."""


def substitution_kind(gold: Tensor, wrong: Tensor, units: Tensor) -> Tensor:
    """Index into :data:`SUBSTITUTION_KINDS` of each substitution ``gold -> wrong``.

    ``gold``, ``wrong``: token ids of the same shape; ``units``: ``(U,)`` the ids that count as
    units. Returns int64 of that shape: 0 neither is a unit, 1 both are, 2 exactly one is.
    """
    gold_unit, wrong_unit = torch.isin(gold, units), torch.isin(wrong, units)
    both, one = gold_unit & wrong_unit, gold_unit ^ wrong_unit
    return both.long() + 2 * one.long()


@dataclass
class SubstitutionRecovery:
    """Recovery after a wrong token at ``position``, for one kind of substitution.

    ``kind`` is one of :data:`SUBSTITUTION_KINDS`; ``rows`` sentences had that kind of substitution at ``position``,
    and ``rest_corrupted`` of them had every label after it right (as in :class:`Recovery`);
    ``recovered``: ``(B,)`` bool, the sentences of this kind that did.
    """

    position: int
    kind: str
    rows: int
    rest_corrupted: float
    recovered: Tensor


def recovery_by_substitution(
    model: nn.Module,
    src: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    positions: Sequence[int],
    candidates: Sequence[int],
    units: Sequence[int],
    *,
    generator: torch.Generator | None = None,
) -> list[SubstitutionRecovery]:
    """:func:`recovery_after_error`'s recovery rate, split by the kind of substitution.

    The wrong tokens are drawn exactly as in :func:`recovery_after_error` (one
    :func:`inject_error` call per position, in order), so a generator seeded the same way
    gives the same substitutions, each sorted into a kind by :func:`substitution_kind`.

    Args:
        model, src, tgt_in, tgt_out, positions, candidates, generator: as in
            :func:`recovery_after_error`; ``src``: ``(B, S)``, ``tgt_in``/``tgt_out``:
            ``(B, T)``.
        units: the token ids that count as units (e.g. the ids of 十百千万), at least one.

    Returns:
        Per position (in order) one :class:`SubstitutionRecovery` per kind that occurs there;
        the rows-weighted mean of a position's entries is its ``Recovery.rest_corrupted``.
    """
    _check_targets(tgt_in, tgt_out)
    unit_list = list(units)
    for token in unit_list:
        check_int("units", token, minimum=0)
    if not unit_list:
        raise ValueError("units must name at least one token id, got []")
    unit_ids = torch.tensor(unit_list, dtype=torch.long, device=tgt_in.device)
    positions = list(positions)
    if not positions:
        raise ValueError("positions must name at least one output position, got []")
    pad = model.config.pad_id
    columns = torch.arange(tgt_out.shape[1], device=tgt_out.device)
    out = []
    for k in positions:
        corrupted, rows = inject_error(tgt_in, k, candidates, pad_id=pad, generator=generator)
        if not bool(rows.any()):
            raise ValueError(f"positions: no sentence in the batch has an output token at {k}")
        after = (tgt_out != pad) & (columns >= k)  # (B, T): the labels after position k
        right = teacher_forced_predictions(model, src, corrupted) == tgt_out  # (B, T)
        rest = (right | ~after).all(1)  # (B,)
        kinds = substitution_kind(tgt_in[:, k], corrupted[:, k], unit_ids)
        for index, kind in enumerate(SUBSTITUTION_KINDS):
            mask = rows & (kinds == index)
            if bool(mask.any()):
                rate = rest[mask].double().mean().item()
                out.append(SubstitutionRecovery(k, kind, int(mask.sum()), rate, mask & rest))
    return out
