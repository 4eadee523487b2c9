"""The verdict every diagnostic of :mod:`lecturekit.lab.diagnostics` returns, and the
comparisons that make one: a NaN or inf never passes (``nan > limit`` is False, so a plain
comparison would pass a model whose output is NaN)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["TOLERANCE", "Diagnosis"]

NOT_FINITE = "输出含 NaN/inf：先找出它从哪一步开始出现"
# a change below this is float rounding, not information flowing (exact masking gives 0)
TOLERANCE = 1e-4


@dataclass(frozen=True)
class Diagnosis:
    """The verdict of one probe: ``flagged`` (True = trouble found), ``message`` (Chinese,
    no raw numbers) and the measured ``value`` behind it. Printed as ``probe：报警（…）``
    (flagged) or ``probe：放行（…）`` (passed)."""

    probe: str
    flagged: bool
    message: str
    value: float

    def __str__(self) -> str:
        return f"{self.probe}：{'报警' if self.flagged else '放行'}（{self.message}）"


def _diagnosis(probe: str, flagged: bool, bad: str, good: str, value: float) -> Diagnosis:
    return Diagnosis(probe, bool(flagged), bad if flagged else good, float(value))


def _gap(probe: str, gap: float, small_is_bad: bool, bad: str, good: str) -> Diagnosis:
    """Compare ``gap`` with ``TOLERANCE``; a NaN or inf gap is flagged on its own (``nan >
    TOLERANCE`` is False, so a plain comparison would pass a model whose output is NaN)."""
    if not math.isfinite(gap):
        return Diagnosis(probe, True, NOT_FINITE, gap)
    return _diagnosis(probe, gap < TOLERANCE if small_is_bad else gap > TOLERANCE, bad, good, gap)


def _max_gap(a: Tensor, b: Tensor) -> float:
    """``max |a - b|``, NaN when either side holds a NaN or inf (inf - inf would be NaN)."""
    finite = bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all())
    return float((a - b).abs().max()) if finite else math.nan


def _not_finite(probe: str, value: float, what: str = NOT_FINITE) -> Diagnosis:
    """The verdict of a probe whose measurement is NaN or inf: flagged, never passed."""
    return Diagnosis(probe, True, what, value)
