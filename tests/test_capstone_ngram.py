"""The n-gram input methods of the sentence-level capstone: Kneser-Ney probabilities (a hand
computation, sums to 1), the k-best Viterbi search against brute force over every candidate
sequence, and the clause metrics (a hand-computed CER, bootstrap intervals)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from lecturekit.capstone.kneser_ney import BOS, EOS, KneserNeyLM
from lecturekit.capstone.ngram import (
    UNKNOWN_CHAR,
    NgramIME,
    bootstrap_interval,
    evaluate_clauses,
    sentence_scores,
)

# three syllables, each with two or three characters (ids 2-8 once in an NgramIME)
READINGS = {"a": "甲乙丙", "b": "丁戊", "c": "己庚"}


def _toy_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Random clauses of 1-6 characters from READINGS, with a little structure: after 甲
    comes 丁 more often, so the bigram has something to learn."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        syllables, text = [], ""
        for _ in range(rng.randint(1, 6)):
            s = "b" if text.endswith("甲") and rng.random() < 0.7 else rng.choice("abc")
            syllables.append(s)
            text += rng.choice(READINGS[s])
        pairs.append((" ".join(syllables), text))
    return pairs


def test_kneser_ney_matches_a_hand_computation() -> None:
    # sequences 2 3 and 2 4, V = 5, d = 0.5. Bigram counts: (BOS 2) 2, (2 3) 1, (2 4) 1,
    # (3 EOS) 1, (4 EOS) 1. Continuation counts of the unigrams: 2 <- {BOS}, 3 <- {2},
    # 4 <- {2}, EOS <- {3, 4}: 1, 1, 1, 2 (total 5, 4 types).
    # P1(3) = (1 - .5)/5 + .5 * 4/5 * 1/4 = 0.2; P2(3 | 2) = (1 - .5)/2 + .5 * 2/2 * 0.2 = 0.35
    lm = KneserNeyLM([[2, 3], [2, 4]], vocab_size=5, order=2, discount=0.5)
    p = lm.prob(np.array([[2], [3]]), np.array([3, EOS]))
    assert p[0, 0] == pytest.approx(0.35)
    assert p[1, 1] == pytest.approx((1 - 0.5) / 1 + 0.5 * 1 / 1 * ((2 - 0.5) / 5 + 0.1))
    unigram = KneserNeyLM([[2, 3], [2, 4]], vocab_size=5, order=1, discount=0.0)
    np.testing.assert_allclose(
        unigram.prob(np.zeros((1, 0)), np.array([1, 2, 3, 4])), [[2, 2, 1, 1]] / np.float64(6)
    )


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("discount", [0.0, 0.3, 0.9])
def test_kneser_ney_sums_to_one_for_seen_and_unseen_histories(order, discount) -> None:
    rng = np.random.default_rng(order)
    sequences = [list(rng.integers(2, 9, size=rng.integers(1, 7))) for _ in range(60)]
    lm = KneserNeyLM(sequences, vocab_size=12, order=order, discount=discount)  # 9-11 unseen
    histories = rng.integers(0, 12, size=(40, order - 1))
    histories[:5] = BOS
    p = lm.prob(histories, np.arange(1, 12))  # every predictable id: all but BOS
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    assert (p > 0).all() or discount == 0.0


def test_kneser_ney_refuses_bad_ids_and_shapes() -> None:
    with pytest.raises(ValueError, match="sequences must hold ids in \\[2, 5\\)"):
        KneserNeyLM([[2, 5]], vocab_size=5, order=2, discount=0.5)
    lm = KneserNeyLM([[2, 3]], vocab_size=5, order=2, discount=0.5)
    with pytest.raises(ValueError, match="history must have shape \\(M, 1\\)"):
        lm.prob(np.array([2, 3]), np.array([3]))


def _brute_force(
    ime: NgramIME, pinyin: str, k: int, bonus: np.ndarray | None = None
) -> list[tuple[str, float]]:
    """Score every sequence of candidate characters: the definition the search must meet
    (``bonus[t, c]`` added for character ``c`` at syllable ``t``)."""
    options = [ime.emission[s] for s in pinyin.split()]
    scored = []
    for choice in itertools.product(*[range(len(ids)) for ids, _ in options]):
        ids = [int(options[t][0][j]) for t, j in enumerate(choice)]
        score = sum(float(options[t][1][j]) for t, j in enumerate(choice))
        score += 0.0 if bonus is None else sum(float(bonus[t, i]) for t, i in enumerate(ids))
        history = [BOS] * (ime.order - 1)
        for i in [*ids, EOS]:
            p = ime.lm.prob(np.array([history[len(history) - ime.order + 1 :]]), np.array([i]))
            score += float(np.log(p[0, 0]))
            history.append(i)
        scored.append(("".join(ime.itos[i] for i in ids), score))
    return sorted(scored, key=lambda item: -item[1])[:k]


@pytest.mark.parametrize("order", [1, 2, 3])
def test_viterbi_k_best_equals_brute_force(order) -> None:
    ime = NgramIME(_toy_pairs(300), order, discount=0.6)
    rng = random.Random(order)
    for _ in range(25):
        pinyin = " ".join(rng.choice("abc") for _ in range(rng.randint(1, 5)))
        found = ime.scored(pinyin, k=4)
        expected = _brute_force(ime, pinyin, k=4)
        np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], rtol=1e-10)
        assert found[0][0] == expected[0][0]  # random counts: no ties at the top
        assert len({t for t, _ in found}) == len(found)  # k distinct strings


def test_a_bonus_per_syllable_and_character_is_searched_exactly() -> None:
    ime = NgramIME(_toy_pairs(300), 3, discount=0.6)
    rng = np.random.default_rng(0)
    for pinyin in ("a b c", "c a a b", "b"):
        n = len(pinyin.split())
        bonus = rng.normal(0.0, 2.0, size=(n, len(ime.itos)))
        found = ime.scored(pinyin, k=4, bonus=bonus)
        expected = _brute_force(ime, pinyin, k=4, bonus=bonus)
        np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], rtol=1e-10)
        assert [t for t, _ in found][:1] == [t for t, _ in expected][:1]
    zero = ime.scored("a b c", k=3, bonus=np.zeros((3, len(ime.itos))))
    assert zero == ime.scored("a b c", k=3)
    with pytest.raises(ValueError, match="bonus must be"):
        ime.scored("a b", bonus=np.zeros((3, len(ime.itos))))
    with pytest.raises(ValueError, match="bonus must be"):
        ime.scored("a", bonus=np.full((1, len(ime.itos)), np.nan))


def _beam_reference(ime: NgramIME, pinyin: str, k: int, bonus: np.ndarray) -> list[float]:
    """The k best scores of a beam search written plainly for one clause: extend every
    path by every character, keep the k best per state (the last ``max(order - 1, 1)``
    characters), then the ``beam`` best paths; add the end of the clause."""
    width = max(ime.order - 1, 1)

    def context(path: tuple[int, ...]) -> np.ndarray:
        return np.array([((BOS,) * (ime.order - 1) + path)[len(path) :]])

    paths: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    for t, syllable in enumerate(pinyin.split()):
        ids, emit = ime.emission[syllable]
        states: dict[tuple[int, ...], list] = {}
        for path, score in paths:
            logp = np.log(ime.lm.prob(context(path), ids)[0])
            for i, e, lp in zip(ids.tolist(), emit, logp, strict=True):
                new = (*path, i)
                states.setdefault(new[-width:], []).append((new, score + lp + e + bonus[t, i]))
        kept = [x for group in states.values() for x in sorted(group, key=lambda x: -x[1])[:k]]
        paths = sorted(kept, key=lambda x: -x[1])[: ime.beam]
    ends = [score + np.log(ime.lm.prob(context(path), [EOS])[0, 0]) for path, score in paths]
    return sorted(ends, reverse=True)[:k]


@pytest.mark.parametrize("order", [1, 2, 3])
def test_clauses_searched_together_match_a_plain_beam_search(order) -> None:
    """candidates searches the clauses of equal length together, and a beam first drops the
    entries that cannot survive it: every clause gets the scores of a plain beam search of
    it alone, and the texts it gets when searched alone."""
    pairs, inputs = _toy_pairs(300), [p for p, _ in _toy_pairs(40, seed=3)]
    rng = np.random.default_rng(order)
    for beam in (1, 2, 4):
        ime = NgramIME(pairs, order, 0.6, beam=beam)
        bonuses = [rng.normal(0.0, 1.0, size=(len(p.split()), len(ime.itos))) for p in inputs]
        for k in (1, 3):
            together = ime.candidates(inputs, k, bonuses)
            for pinyin, bonus, texts in zip(inputs, bonuses, together, strict=True):
                alone = ime.scored(pinyin, k, bonus)
                assert texts == [text for text, _ in alone]
                expected = _beam_reference(ime, pinyin, k, bonus)
                np.testing.assert_allclose([s for _, s in alone], expected, rtol=1e-10)
    with pytest.raises(ValueError, match="bonuses must hold one array"):
        ime.candidates(inputs, 1, bonuses[:-1])


def test_pair_probabilities_are_the_table_entries() -> None:
    lm = NgramIME(_toy_pairs(300), 3, 0.6).lm
    rng = np.random.default_rng(0)
    history, new = rng.integers(0, lm.vocab_size, size=(50, 2)), rng.integers(1, lm.vocab_size, 50)
    table = lm.prob(history, np.arange(1, lm.vocab_size))  # (50, V - 1)
    np.testing.assert_array_equal(lm.pair_prob(history, new), table[np.arange(50), new - 1])


def test_unigram_writes_each_syllables_most_frequent_character() -> None:
    pairs = [("a b", "甲丁"), ("a", "乙"), ("a b", "乙戊"), ("a", "乙"), ("b", "戊")]
    ime = NgramIME(pairs, 1)
    assert ime.candidates(["a b a"], 1) == [["乙戊乙"]]  # 乙 3 of 4 a's, 戊 2 of 3 b's
    assert ime.candidates(["a"], 2) == [["乙", "甲"]]


def test_a_beam_never_beats_the_exact_search_and_unknown_syllables_are_marked() -> None:
    pairs = _toy_pairs(300, seed=1)
    exact, narrow = NgramIME(pairs, 3, 0.6), NgramIME(pairs, 3, 0.6, beam=2)
    for pinyin in ["a b c a", "c c a b b", "a a a a a a"]:
        assert narrow.scored(pinyin)[0][1] <= exact.scored(pinyin)[0][1] + 1e-12
    # a pinyin syllable never seen in training is marked; what is no syllable is refused
    assert exact.candidates(["a shi b"], 1)[0][0][1] == UNKNOWN_CHAR
    assert exact.candidates(["zhuang"], 3) == [[UNKNOWN_CHAR]]
    with pytest.raises(ValueError, match="'zzz', which is not a pinyin syllable"):
        exact.candidates(["a zzz b"], 1)


def test_set_discount_changes_the_scores_without_refitting() -> None:
    ime = NgramIME(_toy_pairs(100), 2, 0.6)
    before = ime.scored("a b c")[0][1]
    ime.set_discount(0.9)
    assert ime.lm.discount == 0.9 and ime.scored("a b c")[0][1] != before
    with pytest.raises(ValueError, match="discount"):
        ime.set_discount(1.0)
    with pytest.raises(TypeError, match="pinyins: expected a list"):
        ime.candidates("a b", 1)
    with pytest.raises(ValueError, match="order"):
        NgramIME(_toy_pairs(10), 4)


def test_cer_exact_and_topk_on_a_hand_computed_example() -> None:
    candidates = [["机器学习"], ["机器雪洗", "机器学习"], [], ["机器"]]
    references = ["机器学习", "机器学习", "你好", "机器学习"]
    s = sentence_scores(candidates, references, k=2)
    # 机器雪洗: 2 substitutions; nothing: 2 deletions; 机器 for 机器学习: 2 insertions
    np.testing.assert_array_equal(s["edits"], [0, 2, 2, 2])
    np.testing.assert_array_equal(s["chars"], [4, 4, 2, 4])
    assert s["edits"].sum() / s["chars"].sum() == pytest.approx(6 / 14)
    np.testing.assert_array_equal(s["exact"], [1, 0, 0, 0])
    np.testing.assert_array_equal(s["topk"], [1, 1, 0, 0])
    with pytest.raises(ValueError, match="same length"):
        sentence_scores(candidates, references[:2])


def test_bootstrap_interval_holds_the_estimate_and_is_seeded() -> None:
    rng = np.random.default_rng(0)
    edits, chars = rng.integers(0, 4, 300), rng.integers(4, 20, 300)
    estimate, low, high = bootstrap_interval(edits, chars, seed=7)
    assert estimate == pytest.approx(edits.sum() / chars.sum())
    assert low < estimate < high and high - low < 0.1
    assert bootstrap_interval(edits, chars, seed=7) == (estimate, low, high)
    assert bootstrap_interval(edits, chars, seed=8) != (estimate, low, high)
    assert bootstrap_interval(np.ones(10)) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="numerator and denominator"):
        bootstrap_interval(np.ones(3), np.ones(4))


def test_evaluate_clauses_scores_and_times_a_system() -> None:
    pairs = _toy_pairs(200)
    ime = NgramIME(pairs[:150], 2, 0.6)
    scores = evaluate_clauses(ime.candidates, pairs[150:], k=3)
    assert scores.n == 50 and scores.k == 3 and scores.ms_per_clause > 0
    assert scores.topk[0] >= scores.exact[0]
    perfect = evaluate_clauses(lambda ps, k: [[t] for _, t in pairs], pairs)
    assert perfect.cer == (0.0, 0.0, 0.0) and perfect.exact[0] == 1.0
    assert "0.000 [0.000, 0.000]" in perfect.row("oracle")


def test_k_is_bounded_by_max_candidates_before_any_search() -> None:
    pairs = _toy_pairs(100)
    exact3, beam3, bigram = NgramIME(pairs, 3), NgramIME(pairs, 3, beam=4), NgramIME(pairs, 2)
    assert (exact3.max_candidates, beam3.max_candidates, bigram.max_candidates) == (100, 1000, 1000)
    for ime in (exact3, beam3, bigram):
        limit = ime.max_candidates
        assert len(ime.candidates(["a b c"], limit)[0]) <= limit  # the bound itself is served
        for k in (limit + 1, 10**9):
            with pytest.raises(ValueError, match=f"at most {limit} candidates, got k={k}"):
                ime.candidates(["a b c a b c a b"], k)
            with pytest.raises(ValueError, match=f"at most {limit} candidates"):
                ime.scored("a b c a b c", k)


def test_input_is_normalised_and_what_is_no_syllable_is_refused() -> None:
    ime = NgramIME([("ni hao", "你好"), ("lv se", "绿色"), ("xue xi", "学习")], 2)
    typed = ["Nǐ hǎo", "NI3HAO3", " ni   hao ", "lü sè", "xüe xi2"]
    assert [c[0] for c in ime.candidates(typed, 1)] == ["你好"] * 3 + ["绿色", "学习"]
    with pytest.raises(ValueError, match="'nihao', which is not one syllable.*'ni hao'"):
        ime.candidates(["nihao"], 1)
    with pytest.raises(ValueError, match="at least one syllable"):
        ime.scored("  ")
    with pytest.raises(TypeError, match="every input must be a str"):
        ime.candidates([b"ni hao", None], 1)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="bonus must be an array"):
        ime.scored("ni hao", 1, bonus=np.full((2, len(ime.itos)), np.nan))


def test_small_misuses_get_errors_that_name_the_argument() -> None:
    with pytest.raises(ValueError, match="pairs must be a non-empty list"):
        NgramIME([], 2)
    with pytest.raises(TypeError, match=r"pairs\[0\] must hold two str"):
        NgramIME([(b"a b", "甲丁")], 2)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="denominator must be >= 0 with a positive sum"):
        bootstrap_interval(np.zeros(3), np.zeros(3))  # no characters: no error rate
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_interval(np.ones(3), n_resamples=10**9)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval(np.array([1.0, np.nan]))
    pairs = _toy_pairs(20)
    with pytest.raises(ValueError, match="decode must return one list of candidates per clause"):
        evaluate_clauses(lambda pinyins, k: None, pairs)
    with pytest.raises(ValueError, match="decode must return lists of candidate strings"):
        evaluate_clauses(lambda pinyins, k: [[None]] * len(pinyins), pairs)
    # once scored silently: CER 1 against references that were no clauses
    with pytest.raises(TypeError, match=r"pairs\[0\] must be a \(pinyin, text\) pair"):
        evaluate_clauses(lambda pinyins, k: [[""]] * len(pinyins), ["a b"])
    with pytest.raises(ValueError, match=r"pairs\[0\] must have one syllable per character"):
        NgramIME([("", "")], 2)  # once "vocab_size must be >= 3"
    with pytest.raises(TypeError, match="candidates must hold one list of candidate strings"):
        sentence_scores(["甲丁"], ["甲丁"])  # a string, not a list: '甲丁' "in" '甲丁'[:5]


def test_memoised_searches_equal_fresh_ones() -> None:
    """The log-probabilities are memoised by table and by row: searching the same clauses
    again (with another k, a bonus, after a change of discount) gives what a fresh engine
    gives."""
    pairs = _toy_pairs(200)
    inputs = [p for p, _ in _toy_pairs(30, seed=1)]
    warm = NgramIME(pairs, 3, 0.7, beam=4)
    bonus = {
        p: np.random.default_rng(0).normal(size=(len(p.split()), len(warm.itos))) for p in inputs
    }
    for k in (1, 3):
        for p in inputs:
            fresh = NgramIME(pairs, 3, 0.7, beam=4)
            assert warm.scored(p, k) == fresh.scored(p, k)
            assert warm.scored(p, k, bonus[p]) == fresh.scored(p, k, bonus[p])
    warm.set_discount(0.9)
    assert [warm.scored(p, 3) for p in inputs] == [
        NgramIME(pairs, 3, 0.9, beam=4).scored(p, 3) for p in inputs
    ]
