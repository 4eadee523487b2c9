"""The capstone's exercises (chapter "C"): the reference solutions against independent
references, then students' answers: correct solutions written in different styles must pass
the checker and typical mistakes must fail it, for the reason the feedback names."""

import functools
import itertools
import random

import pytest
from _answer_tests import (  # noqa: F401
    test_correct_solution_passes,
    test_every_exercise_has_solutions_and_mistakes,
    test_mistake_fails_for_its_reason,
)

from lecturekit import exercises
from lecturekit.exercises import CAPSTONE, LAB, Exercise, list_exercises, show
from lecturekit.exercises.capstone_pinyin import (
    reference_char_error_rate,
    reference_top_k_accuracy,
    reference_unigram_pick,
)
from lecturekit.exercises.specs import Real


def _edit_distance_recursive(a: str, b: str) -> int:
    """The definition, by recursion over the last characters (exponential without the cache)."""

    @functools.cache
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def test_char_error_rate_is_the_recursive_edit_distance_over_the_length():
    rng = random.Random(0)
    for _ in range(300):
        a = "".join(rng.choice("机器学习") for _ in range(rng.randint(0, 6)))
        b = "".join(rng.choice("机器学习") for _ in range(rng.randint(1, 6)))
        assert reference_char_error_rate(a, b) == _edit_distance_recursive(a, b) / len(b)


def test_unigram_pick_by_sorting_each_syllable():
    counts = {"shi": {"是": 3, "时": 3, "事": 1}, "ji": {"机": 1, "及": 2}}
    for pinyin in ("shi", "ji shi", "shi ji ji"):
        expected = "".join(
            sorted(counts[s].items(), key=lambda item: (-item[1], item[0]))[0][0]
            for s in pinyin.split()
        )
        assert reference_unigram_pick(counts, pinyin) == expected
    assert reference_unigram_pick(counts, "shi") == min("是", "时")


def test_top_k_accuracy_counts_the_rank_of_the_reference():
    rng = random.Random(1)
    words = ["事实", "实施", "实时", "逝世", "时事"]
    for k in (1, 2, 3, 5):
        bars = [rng.sample(words, rng.randint(0, 5)) for _ in range(20)]
        refs = [rng.choice(words) for _ in bars]
        ranks = [bar.index(r) + 1 if r in bar else None for bar, r in zip(bars, refs, strict=True)]
        expected = sum(r is not None and r <= k for r in ranks) / len(refs)
        assert reference_top_k_accuracy(bars, refs, k) == expected


def test_the_capstone_is_chapter_c_listed_between_chapters_6_and_7(capsys):
    ids = list_exercises(chapter=CAPSTONE)
    assert ids == ["pinyin.char_error_rate", "pinyin.top_k_accuracy", "pinyin.unigram_pick"]
    everything = list_exercises()
    positions = [everything.index(i) for i in ids]
    assert positions == list(range(positions[0], positions[0] + len(ids)))
    before, after = everything[: positions[0]], everything[positions[-1] + 1 :]
    assert set(before) == set(itertools.chain(*(list_exercises(chapter=c) for c in range(7))))
    # the debugging lab ("L") follows the capstone, before chapter 7
    later = list_exercises(chapter=LAB) + list_exercises(chapter=7) + list_exercises(chapter=8)
    assert set(after) == set(later)
    show("pinyin.unigram_pick")
    assert "（综合项目）" in capsys.readouterr().out


def test_a_chapter_is_a_number_or_the_capstone_label():
    fields = dict(
        id="sample.x", title="t", prompt="p", hint="h", explanation="e", kind="value",
        reference=1.0, returns=Real(),
    )  # fmt: skip
    assert Exercise(chapter=CAPSTONE, **fields).chapter == "C"
    with pytest.raises(ValueError, match="chapter must be a chapter number or 'C'"):
        Exercise(chapter="B", **fields)
    with pytest.raises(TypeError, match="chapter must be an int or 'C'"):
        Exercise(chapter=6.5, **fields)
    assert exercises._chapter_position(CAPSTONE) == 6.5


# --------------------------------------------------------------------------------------
# Students' answers: correct solutions in different styles must pass, typical mistakes fail
# --------------------------------------------------------------------------------------


def cer_full_table(prediction, reference):
    m, n = len(prediction), len(reference)
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(n + 1)] for i in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            same = prediction[i - 1] == reference[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (not same))
    return d[m][n] / n


def cer_recursive(prediction, reference):
    return _edit_distance_recursive(prediction, reference) / len(reference)


def cer_position_by_position(prediction, reference):
    wrong = sum(a != b for a, b in zip(prediction, reference, strict=False))
    return (wrong + abs(len(prediction) - len(reference))) / len(reference)


def cer_over_prediction_length(prediction, reference):
    return _edit_distance_recursive(prediction, reference) / max(len(prediction), 1)


def cer_substitutions_only(prediction, reference):
    return sum(a != b for a, b in zip(prediction, reference, strict=False)) / len(reference)


def cer_capped_at_one(prediction, reference):
    return min(1.0, cer_full_table(prediction, reference))


def unigram_sorted(counts, pinyin):
    return "".join(sorted(counts[s], key=lambda c: (-counts[s][c], c))[0] for s in pinyin.split())


def unigram_loop(counts, pinyin):
    out = []
    for syllable in pinyin.split():
        best = None
        for char, n in counts[syllable].items():
            if (
                best is None
                or n > counts[syllable][best]
                or (n == counts[syllable][best] and char < best)
            ):
                best = char
        out.append(best)
    return "".join(out)


def unigram_first_listed(counts, pinyin):
    return "".join(next(iter(counts[s])) for s in pinyin.split())


def unigram_least_frequent(counts, pinyin):
    return "".join(min(counts[s], key=lambda c: (counts[s][c], c)) for s in pinyin.split())


def unigram_most_frequent_overall(counts, pinyin):  # ignores the syllable
    totals = {}
    for chars in counts.values():
        for c, n in chars.items():
            totals[c] = totals.get(c, 0) + n
    return min(totals, key=lambda c: (-totals[c], c)) * len(pinyin.split())


def unigram_max_ties_last(counts, pinyin):  # max() keeps the first of equal keys, not the smaller
    return "".join(max(counts[s], key=counts[s].get) for s in pinyin.split())


def unigram_list_of_chars(counts, pinyin):
    return [min(counts[s], key=lambda c: (-counts[s][c], c)) for s in pinyin.split()]


def top_k_comprehension(candidates, references, k):
    return sum(r in c[:k] for c, r in zip(candidates, references, strict=True)) / len(references)


def top_k_ranks(candidates, references, k):
    hits = 0
    for cands, ref in zip(candidates, references, strict=True):
        for rank, word in enumerate(cands, start=1):
            if word == ref and rank <= k:
                hits += 1
    return hits / len(references)


def top_k_whole_list(candidates, references, k):
    return sum(r in c for c, r in zip(candidates, references, strict=True)) / len(references)


def top_k_only_kth(candidates, references, k):
    hits = sum(len(c) >= k and c[k - 1] == r for c, r in zip(candidates, references, strict=True))
    return hits / len(references)


def top_k_first_only(candidates, references, k):
    hits = sum(bool(c) and c[0] == r for c, r in zip(candidates, references, strict=True))
    return hits / len(references)


def top_k_skips_empty_lists(candidates, references, k):
    pairs = [(c, r) for c, r in zip(candidates, references, strict=True) if c]
    return sum(r in c[:k] for c, r in pairs) / len(pairs)


def top_k_count(candidates, references, k):  # the number of hits, not the fraction
    return sum(r in c[:k] for c, r in zip(candidates, references, strict=True))


SOLUTIONS = {
    "pinyin.char_error_rate": [cer_full_table, cer_recursive],
    "pinyin.unigram_pick": [unigram_sorted, unigram_loop],
    "pinyin.top_k_accuracy": [top_k_comprehension, top_k_ranks],
}

MISTAKES = {
    "pinyin.char_error_rate": [
        (cer_position_by_position, "漏掉第一个字"),
        (cer_over_prediction_length, "期望"),
        (cer_substitutions_only, "少写一个字"),
        (cer_capped_at_one, "CER 可以大于 1"),
    ],
    "pinyin.unigram_pick": [
        (unigram_first_listed, "期望"),
        (unigram_least_frequent, "期望"),
        (unigram_most_frequent_overall, "期望"),
        (unigram_max_ties_last, "次数并列时取较小的字"),
        (unigram_list_of_chars, "题目要求 str"),
    ],
    "pinyin.top_k_accuracy": [
        (top_k_whole_list, "期望"),
        (top_k_only_kth, "期望"),
        (top_k_first_only, "k = 2"),
        (top_k_skips_empty_lists, "期望"),
        (top_k_count, "期望"),
    ],
}


# SOLUTIONS and MISTAKES cover every exercise of these chapters (tests/_answer_tests.py)
CHAPTERS = (CAPSTONE,)
