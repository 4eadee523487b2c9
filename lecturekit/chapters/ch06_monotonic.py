"""Monotonic attention as a decoding constraint: what it rules out (p51-p52).

Speech synthesis and recognition read their input from left to right: an output step should
look at the same input position as the step before or at the next one. Free attention has no
such rule, and the lecture's p51 shows what goes wrong: the decoder skips part of the input
(漏读) or goes back and reads it again (重复). This module makes both faults measurable on the
toy model of :mod:`lecturekit.chapters.ch06_copy` and adds the simplest hard monotonic rule:

* :func:`path_faults` reads an attention path (the most attended source position of every
  output step) and says whether it skips a source position and whether it goes back.
* :class:`MonotonicDecoder` wraps an :class:`~lecturekit.chapters.ch06_copy.AttentionToySeq2Seq`
  so that step ``t`` may only look at the position ``p`` the previous step looked at most, or
  at ``p + 1`` ("stay or advance by one"), and (with ``stop_rules=True``) so that it stops
  only once the alignment has reached the last position and moves on. The window rules out
  going back and jumping over a position before the end; the stop rules rule out stopping
  early. The forced stop is a heuristic for this toy model (it looks back once it has read
  the last position); real speech synthesis systems usually predict a separate stop flag. It
  follows the decoding step protocol, so :func:`lecturekit.decoding.greedy` decodes it.

Monotonic attention in the literature (Raffel et al. 2017; the forward attention of Zhang et
al. 2018 for speech synthesis) builds the rule into training; Deep Voice 3 (Ping et al. 2018)
only constrains the attention to a window after the last attended position at inference, as
done here on a model trained without any constraint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor

from lecturekit._common import check_int
from lecturekit.chapters.ch06_copy import AttentionToySeq2Seq

__all__ = ["path_faults", "MonotonicDecoder"]


def path_faults(path: Sequence[int], src_len: int) -> tuple[bool, bool]:
    """Whether an attention path skips a source position, and whether it goes back.

    Args:
        path: the source position each output step attends to most, in output order.
        src_len: number of real source positions ``S``; the path should visit ``0 .. S-1``.

    Returns:
        ``(skips, goes_back)``: ``skips`` is True when some position in ``[0, S)`` is never
        visited (the decoder "did not read" it); ``goes_back`` is True when some step looks
        at an earlier position than the step before (the decoder "reads it again"). A path
        that starts at 0, stays or advances by one and ends at ``S - 1`` has neither fault.
    """
    check_int("src_len", src_len, minimum=1)
    path = [int(p) for p in path]
    if any(not 0 <= p < src_len for p in path):
        raise ValueError(f"path positions must lie in [0, src_len={src_len}), got {path}")
    skips = set(range(src_len)) - set(path) != set()
    goes_back = any(b < a for a, b in pairwise(path))
    return skips, goes_back


class MonotonicDecoder:
    """Greedy-decodable view of a toy attention model with a "stay or advance by one" window.

    At output step ``t`` the cross-attention may only look at source positions ``p`` and
    ``p + 1``, where ``p`` is the position step ``t - 1`` attended to most (``p = -1`` before
    the first step, so the first step looks at position 0). Once the last real source
    position has been read, the window is lifted. With ``stop_rules`` the stop is tied to the
    alignment too: EOS is forbidden until the last position has been read, and the first step
    after that which looks away from the last position emits EOS (the alignment has moved
    past the end; a heuristic for the toy model, which looks back once it has read
    everything). Without them, the model's own output distribution decides when to stop.

    Args:
        model: a trained :class:`AttentionToySeq2Seq`; its weights are used unchanged.
        stop_rules: apply the two stop rules (default); ``False`` keeps only the window.

    Decoding state: ``(src (B, S), fed (B, t), position (B,), masks (B, t, S))``; ``masks``
    holds the window of every step so far (True = may not look).
    """

    def __init__(self, model: AttentionToySeq2Seq, *, stop_rules: bool = True) -> None:
        if not isinstance(model, AttentionToySeq2Seq):
            raise TypeError(f"model must be an AttentionToySeq2Seq, got {type(model).__name__}")
        if not isinstance(stop_rules, bool):
            raise TypeError(f"stop_rules must be True or False, got {stop_rules!r}")
        self.model, self.stop_rules = model, stop_rules
        self.vocab_size, self.pad_id = model.vocab_size, model.pad_id
        self.bos_id, self.eos_id = model.bos_id, model.eos_id

    def start(self, src: Tensor, *, src_key_padding_mask: Tensor | None = None) -> tuple:
        """The state before the first step: nothing fed, no position read yet (``-1``)."""
        B, S = src.shape
        position = torch.full((B,), -1, dtype=torch.long, device=src.device)
        masks = torch.zeros(B, 0, S, dtype=torch.bool, device=src.device)
        return src, src.new_empty(B, 0), position, masks

    def step(self, tokens: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        """Feed ``tokens (B,)``; next-token log-probs ``(B, V)`` under the window."""
        log_probs, state, _ = self._step(tokens, state)
        return log_probs, state

    def select(self, state: tuple, index: Tensor) -> tuple:
        return tuple(x.index_select(0, index) for x in state)

    def _step(self, tokens: Tensor, state: tuple) -> tuple[Tensor, tuple, Tensor]:
        src, fed, position, masks = state
        fed = torch.cat([fed, tokens[:, None]], dim=1)  # (B, t + 1)
        S = src.shape[1]
        last = (src != self.pad_id).sum(1) - 1  # (B,) last real source position
        s = torch.arange(S, device=src.device)[None]  # (1, S)
        window = (s >= position.clamp_min(0)[:, None]) & (s <= position[:, None] + 1)
        window |= (position >= last)[:, None]  # past the end: the window is lifted
        masks = torch.cat([masks, ~window[:, None]], dim=1)  # (B, t + 1, S)
        log_probs, attention = self.model(src, fed, attn_mask=masks)  # (B, t+1, V), (.., S)
        log_probs, attention = log_probs[:, -1].clone(), attention[:, -1]  # (B, V), (B, S)
        looked = attention.argmax(-1)  # (B,)
        at_end = position >= last
        if self.stop_rules:
            log_probs[~at_end, self.eos_id] = -math.inf  # no stop before the last is read
            left = at_end & (looked != last)  # the alignment has moved past the end: stop
            log_probs[left] = -math.inf
            log_probs[left, self.eos_id] = 0.0
        position = torch.where(at_end, position, looked)
        return log_probs, (src, fed, position, masks), attention

    @torch.no_grad()
    def attention(self, src: Tensor, tokens: Tensor) -> Tensor:
        """The constrained cross-attention with which the decoder produced ``tokens``.

        Args:
            src: ``(B, S)`` source ids.
            tokens: ``(B, T)`` an output (no BOS), e.g. ``greedy(self, src, T).tokens``.

        Returns:
            ``(B, T, S)``: the attention of every output step, replayed step by step.
        """
        state = self.start(src)
        fed = torch.cat([torch.full_like(tokens[:, :1], self.bos_id), tokens[:, :-1]], dim=1)
        rows = []
        for t in range(tokens.shape[1]):
            _, state, row = self._step(fed[:, t], state)
            rows.append(row)
        return torch.stack(rows, dim=1)
