"""Issue #28 for the capstone's baselines: ``k`` is bounded by the declared
``max_candidates``, so ``candidates(..., k=10**9)`` is refused at once instead of running."""

from __future__ import annotations

import time

import pytest

from lecturekit.chapters.capstone_pinyin import LookupBaseline, UnigramBaseline
from lecturekit.data.pinyin import Word

WORDS = [Word("学", "xue", 80), Word("雪", "xue", 20), Word("学习", "xue xi", 30)]


@pytest.mark.parametrize("baseline_class", [UnigramBaseline, LookupBaseline])
def test_k_above_max_candidates_is_refused_at_once(baseline_class) -> None:
    baseline = baseline_class(WORDS)
    assert baseline.max_candidates == 1_000
    start = time.monotonic()
    with pytest.raises(ValueError, match="at most 1000 candidates, got k=1000000000"):
        baseline.candidates(["xue xue xue xue"], k=10**9)
    assert time.monotonic() - start < 0.5
    # the bound itself is allowed, and gives what a smaller k gives when fewer exist
    assert baseline.candidates(["xue"], k=1_000) == baseline.candidates(["xue"], k=5)
