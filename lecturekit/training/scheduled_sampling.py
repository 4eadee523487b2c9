"""Scheduled sampling (Bengio et al., 2015), adapted to a parallel Transformer decoder (p57).

Teacher forcing feeds the decoder the gold prefix; at inference it sees its own outputs, and
one early mistake puts it in states it never saw in training (exposure bias, p56). Scheduled
sampling feeds, during training, some of the model's own predictions instead of gold tokens,
more and more of them as training goes on.

In an RNN this is done step by step. A Transformer decoder computes all positions in one
pass, so we do it in two passes (as in Mihaylova & Martins, 2019, and Duckworth et al., 2019):

1. **Gold pass, no gradient.** Run the decoder on the gold input ``<bos> y_1 ... y_{n-1}``
   and take its prediction ``ŷ_t`` for every position (argmax, or a sample).
2. **Mix.** Each decoder input token ``y_t`` (``t >= 1``; BOS and padding are never touched)
   is replaced by the prediction made for that position, ``ŷ_t``, with probability
   ``1 - ε_i``, where ``ε_i`` is the *teacher-forcing probability* at training step ``i``.
   With ``forbid_specials`` the prediction is never ``<pad>``, ``<bos>`` or ``<eos>``: at
   inference a decoder never reads one of them after ``<bos>`` (decoding never generates
   ``<pad>`` or ``<bos>`` and stops at ``<eos>``), so feeding one trains on an input it will
   never see.
3. **Training pass.** Run the decoder on the mixed input and train on the gold labels
   ``y_1 ... y_n <eos>`` as usual.

Bengio et al.'s ``ε_i`` decays from 1 (pure teacher forcing) by one of three schedules:
linear ``max(ε_min, k - c i)``, exponential ``k^i`` (``k < 1``) and inverse sigmoid
``k / (k + exp(i / k))`` (``k >= 1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lecturekit._common import (
    BOS_ID,
    EOS_ID,
    check_bool,
    check_choice,
    check_int,
    check_number,
    eval_mode,
)

__all__ = ["ScheduledSampling", "check_schedule", "teacher_forcing_prob", "mix_decoder_inputs"]

SCHEDULES = ("linear", "exponential", "inverse_sigmoid")


def check_schedule(schedule: str, k: float, c: float = 0.0, min_prob: float = 0.0) -> None:
    """The rules of a teacher-forcing schedule (:func:`teacher_forcing_prob` and
    :class:`ScheduledSampling` check with this one function): ``schedule`` one of
    ``SCHEDULES``; ``k``, ``c`` finite numbers (never NaN: every comparison with NaN is False,
    so a NaN ``k`` would turn teacher forcing off silently), ``c >= 0``; ``0 < k < 1`` for
    ``"exponential"``, ``k >= 1`` for ``"inverse_sigmoid"``; ``min_prob`` in [0, 1]."""
    check_choice("schedule", schedule, SCHEDULES)
    check_number("k", k)
    check_number("c", c, minimum=0.0)
    check_number("min_prob", min_prob, 0.0, 1.0)
    if schedule == "exponential" and not 0.0 < k < 1.0:
        raise ValueError(f"k: the exponential schedule needs 0 < k < 1, got {k}")
    if schedule == "inverse_sigmoid" and k < 1.0:
        raise ValueError(f"k: the inverse-sigmoid schedule needs k >= 1, got {k}")


def teacher_forcing_prob(
    step: int, schedule: str, k: float, c: float = 0.0, min_prob: float = 0.0
) -> float:
    """Bengio et al.'s ``ε_i``: probability of feeding the gold token at training step ``i``.

    - ``"linear"``: ``max(min_prob, k - c * step)`` (e.g. ``k = 1``, ``c = 1 / 2000``).
    - ``"exponential"``: ``max(min_prob, k ** step)`` with ``0 < k < 1`` (e.g. ``0.999``).
    - ``"inverse_sigmoid"``: ``max(min_prob, k / (k + exp(step / k)))`` with ``k >= 1``
      (e.g. ``k = 300``: ε stays near 1 for a while, then falls around step ``k ln k``).

    The arguments follow :func:`check_schedule`; ``step`` is an int >= 0.
    """
    check_schedule(schedule, k, c, min_prob)
    check_int("step", step, minimum=0)
    if schedule == "linear":
        eps = k - c * step
    elif schedule == "exponential":
        eps = k**step
    else:
        # k / (k + exp(step / k)) written to avoid overflowing exp for large steps
        eps = 1.0 / (1.0 + math.exp(step / k - math.log(k))) if step / k < 700 else 0.0
    return float(min(1.0, max(min_prob, eps)))


@dataclass(frozen=True)
class ScheduledSampling:
    """Scheduled-sampling settings; pass one as ``TrainConfig(scheduled_sampling=...)``.

    Frozen and validated once, when created (:func:`check_schedule`, ``sample`` True or
    False); change a field with ``dataclasses.replace``, which validates again.

    Attributes:
        schedule: ``"linear"``, ``"exponential"`` or ``"inverse_sigmoid"``.
        k, c: schedule parameters (see :func:`teacher_forcing_prob`).
        min_prob: floor of the teacher-forcing probability.
        sample: replace with a token *sampled* from the model (True) or its argmax (False).
        forbid_specials: never replace with ``<pad>``, ``<bos>`` or ``<eos>`` (see
            :func:`mix_decoder_inputs`).
    """

    schedule: str = "inverse_sigmoid"
    k: float = 300.0
    c: float = 0.0
    min_prob: float = 0.0
    sample: bool = False
    forbid_specials: bool = False

    def __post_init__(self) -> None:
        check_schedule(self.schedule, self.k, self.c, self.min_prob)
        check_bool("sample", self.sample)
        check_bool("forbid_specials", self.forbid_specials)

    def teacher_prob(self, step: int) -> float:
        """``ε_i`` at training step ``step`` (0-based)."""
        return teacher_forcing_prob(step, self.schedule, self.k, self.c, self.min_prob)


@torch.no_grad()
def mix_decoder_inputs(
    model: nn.Module,
    src: Tensor,
    tgt_in: Tensor,
    teacher_prob: float,
    *,
    pad_id: int = 0,
    sample: bool = False,
    forbid_specials: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Steps 1-2 above: the decoder input with some gold tokens replaced by predictions.

    Args:
        model: a Transformer: ``model(src, tgt_in) -> logits (B, T, V)``.
        src: ``(B, S)`` source ids.
        tgt_in: ``(B, T)`` gold decoder input ``<bos> y_1 ... y_{n-1}`` (+ padding).
        teacher_prob: probability of keeping each gold token (``ε_i``).
        pad_id: padding id (padding positions are never replaced).
        sample: sample the replacement from the model's distribution instead of argmax.
        forbid_specials: never replace with ``<pad>`` (``pad_id``), ``<bos>`` or ``<eos>``
            (``BOS_ID``, ``EOS_ID``, as in every vocabulary of this package): their logits are
            set to ``-inf`` before the argmax or the sample. Needs another token.
        generator: randomness source for the coin flips (and the samples).

    Returns:
        ``(B, T)`` mixed decoder input; position 0 (BOS) is always gold.
    """
    check_number("teacher_prob", teacher_prob, 0.0, 1.0)
    check_bool("sample", sample)
    check_bool("forbid_specials", forbid_specials)
    if teacher_prob == 1.0:
        return tgt_in
    with eval_mode(model):  # predictions without dropout noise
        logits = model(src, tgt_in)  # (B, T, V): logits[:, t] predicts label y_{t+1}
    if forbid_specials:
        vocab = logits.shape[-1]
        forbidden = sorted({i for i in (pad_id, BOS_ID, EOS_ID) if i < vocab})
        if len(forbidden) == vocab:
            raise ValueError(
                f"forbid_specials: the vocabulary has {vocab} tokens, all of them "
                "<pad>, <bos> or <eos>: nothing is left to feed"
            )
        logits = logits.clone()
        logits[..., forbidden] = -math.inf
    if sample:
        probs = torch.softmax(logits.float(), dim=-1).flatten(0, 1)  # (B*T, V)
        predicted = torch.multinomial(probs, 1, generator=generator).view(tgt_in.shape)
    else:
        predicted = logits.argmax(dim=-1)
    # input position t (t >= 1) holds y_t; the model's guess for it was made at position t-1
    guess = torch.cat([tgt_in[:, :1], predicted[:, :-1]], dim=1)
    coins = torch.rand(tgt_in.shape, generator=generator, device=tgt_in.device)
    replace = coins >= teacher_prob
    replace[:, 0] = False
    replace &= tgt_in != pad_id
    return torch.where(replace, guess, tgt_in)
