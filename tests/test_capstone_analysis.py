"""The sentence IME's analyses: per-syllable unigram, homophone contrast, attention near the
diagonal, the candidate bar and its widget."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter

import pytest
import torch

from lecturekit.capstone import analysis as ca
from lecturekit.capstone import models as ps
from lecturekit.capstone.analysis import (
    HomophoneSite,
    SyllableUnigram,
    attention_near_diagonal,
    block_subsets,
    candidate_bar_text,
    homophone_contrast,
    homophones,
    near_diagonal_chance,
)
from lecturekit.capstone.engines import TransformerIME, cross_attention
from lecturekit.capstone.ngram import UNKNOWN_CHAR
from lecturekit.capstone.tagger import ime_candidates, sentence_vocabs
from lecturekit.data.sentences import MAX_CLAUSE

PAIRS = [
    ("shi shi shi", "是事实"),
    ("shi jian", "时间"),
    ("shi shi", "事实"),
    ("jian shi", "见识"),
    ("shi jian shi", "是见识"),
    ("li shi", "历史"),
]


def test_homophones_counts_every_syllable_character_pair() -> None:
    table = homophones(PAIRS)
    assert table["shi"] == Counter({"是": 2, "事": 2, "实": 2, "时": 1, "识": 2, "史": 1})
    assert table["jian"] == Counter({"间": 1, "见": 2}) and table["li"] == Counter({"历": 1})
    assert sum(sum(c.values()) for c in table.values()) == sum(len(t) for _, t in PAIRS)
    with pytest.raises(ValueError, match="one syllable per character"):
        homophones([("shi", "是事")])


def _brute_force(pinyin: str, table: dict[str, Counter[str]]) -> dict[str, float]:
    # every clause the syllables allow, scored by the product of P(c | s)
    options = [list(table[s].items()) for s in pinyin.split()]
    scores: dict[str, float] = {}
    for combo in itertools.product(*options):
        p = math.prod(
            n / sum(table[s].values()) for s, (_, n) in zip(pinyin.split(), combo, strict=True)
        )
        scores["".join(c for c, _ in combo)] = math.log(p)
    return scores


def test_syllable_unigram_gives_the_k_most_probable_clauses() -> None:
    ime, table = SyllableUnigram(PAIRS), homophones(PAIRS)
    for pinyin in ["shi shi", "shi jian shi", "li shi jian", "jian"]:
        truth = _brute_force(pinyin, table)
        for k in (1, 3, 7, 50):
            got = ime.candidates([pinyin], k)[0]
            assert len(got) == min(k, len(truth)) and len(set(got)) == len(got)
            best = sorted(truth.values(), reverse=True)[: len(got)]
            assert [truth[c] for c in got] == pytest.approx(best)
    assert ime.candidates(["jian", "li"], 1) == [["见"], ["历"]]


def test_syllable_unigram_writes_the_unknown_mark_for_unseen_syllables() -> None:
    ime = SyllableUnigram(PAIRS)
    # a pinyin syllable never seen is marked; what is no syllable is refused, as everywhere
    assert ime.candidates(["li zhuang jian"], 2) == [[f"历{UNKNOWN_CHAR}见", f"历{UNKNOWN_CHAR}间"]]
    assert ime.candidates(["zhuang"], 3) == [[UNKNOWN_CHAR]]
    assert ime.candidates(["LI4 Jiàn"], 1) == ime.candidates(["li jian"], 1)
    with pytest.raises(ValueError, match="'zzz', which is not a pinyin syllable"):
        ime.candidates(["li zzz jian"], 2)
    with pytest.raises(TypeError, match="pinyins: expected a list"):
        ime.candidates("shi", 1)
    with pytest.raises(ValueError, match="k: expected a positive int"):
        ime.candidates(["shi"], 0)
    with pytest.raises(ValueError, match="k: this system gives at most 100 "):
        ime.candidates(["shi"], 10**9)
    with pytest.raises(ValueError, match="pairs must be a non-empty list"):
        SyllableUnigram([])
    with pytest.raises(TypeError, match=r"pairs\[0\] must hold two str"):
        SyllableUnigram([(b"shi", "是")])  # once accepted, as bytes
    with pytest.raises(TypeError, match=r"pairs\[0\] must be a \(pinyin, text\) pair"):
        SyllableUnigram([("shi", "是", 1)])  # once "too many values to unpack"


def test_homophone_contrast_sorts_positions_into_the_four_kinds() -> None:
    pairs = [("shi jian", "时间"), ("li shi", "历史"), ("shi shi", "事实"), ("jian shi", "见识")]
    table = homophones(PAIRS)  # shi: 6 characters, jian: 2, li: 1 (li is never compared)
    a = ["时见", "历史", "事实", "见"]  # the last is a character short: skipped
    b = ["是间", "历是", "事实", "见识"]
    out = homophone_contrast(pairs, a, b, table)
    # compared: 时间 (shi: A, jian: B), 历史 (shi: A), 事实 (both right, twice)
    assert (out.positions, out.both_right) == (5, 2)
    assert [(s.clause, s.position) for s in out.a_only] == [(0, 0), (1, 1)]
    assert [(s.clause, s.position) for s in out.b_only] == [(0, 1)]
    assert out.both_wrong == []
    assert (out.skipped_clauses, out.skipped_positions) == (1, 2)
    assert out.positions == out.both_right + len(out.a_only) + len(out.b_only)
    assert out.a_only[1].line("Transformer", "HMM") == "历【史】 (shi)  Transformer 史 · HMM 是"
    wrong = homophone_contrast([("jian", "见")], ["间"], ["间"], table)
    assert wrong.both_wrong == [HomophoneSite(0, 0, "jian", "见", "间", "间")]
    # with min_chars=3 only shi counts
    assert homophone_contrast(pairs, a, b, table, min_chars=3).positions == 4
    with pytest.raises(ValueError, match="answers_b must be a list of 4"):
        homophone_contrast(pairs, a, b[:3], table)


def _tiny_at(seed: int = 1) -> tuple[torch.nn.Module, object, object]:
    vocabs = sentence_vocabs(PAIRS, min_count=1)
    base = ps.SENTENCE_RECIPES["ime-sentences-at"]
    recipe = dataclasses.replace(
        base,
        seed=seed,
        model={**base.model, "d_model": 16, "d_ff": 32, "n_heads": 2, "dropout": 0.0},
    )
    return ps.make_sentence_model(recipe, *vocabs).eval(), *vocabs


def test_attention_near_diagonal_matches_a_brute_force_count() -> None:
    model, src_vocab, tgt_vocab = _tiny_at()
    ime = TransformerIME(model, src_vocab, tgt_vocab)
    pairs = [*PAIRS[:4], ("shi li", "是梨")]  # 梨 is not in the vocabulary: fed as <unk>
    with pytest.raises(ValueError, match="not in the vocabulary"):
        cross_attention(ime, "shi li", "是梨")
    for width in (0, 1):
        got = attention_near_diagonal(ime, pairs, width)
        per_layer = [attention_near_diagonal(ime, pairs, width, layer=i) for i in range(2)]
        expected, layer_expected = [], []
        for pinyin, text in pairs:
            src = torch.tensor([[src_vocab.stoi[s] for s in pinyin.split()]])
            tgt = torch.tensor([[tgt_vocab.bos_id, *tgt_vocab.encode(text)]])
            model(src, tgt, need_weights=True)
            layers = model.attention_weights["decoder_cross"]  # L x (1, H, T, S)
            n, shares = len(text), []
            for w in layers:
                cells = [
                    float(w[0, h, t, s])
                    for h in range(w.size(1))
                    for t in range(n)
                    for s in range(n)
                    if abs(s - t) <= width
                ]
                shares.append(sum(cells) / (w.size(1) * n))
            expected.append(sum(shares) / len(shares))
            layer_expected.append(shares)
        assert got.shape == (len(pairs),)
        assert got.tolist() == pytest.approx(expected, abs=1e-6)
        for i in range(2):
            assert per_layer[i].tolist() == pytest.approx([e[i] for e in layer_expected], abs=1e-6)
    assert attention_near_diagonal(ime, pairs, width=5).tolist() == pytest.approx([1.0] * 5)
    with pytest.raises(ValueError, match="layer must be in"):
        attention_near_diagonal(ime, pairs, layer=2)


def test_attention_near_diagonal_of_constructed_attention(monkeypatch) -> None:
    model, src_vocab, tgt_vocab = _tiny_at()
    ime = TransformerIME(model, src_vocab, tgt_vocab)
    pairs = [("shi jian shi", "是见识"), ("li shi", "历史")]

    def diagonal(ime, pairs, strict=True):  # every row on its own syllable; EOS on s=0
        n = len(pairs[0][0].split())
        w = torch.zeros(2, len(pairs), 2, n + 1, n)  # (L, B, H, T + 1, S)
        w[..., torch.arange(n), torch.arange(n)] = 1.0
        w[..., n, 0] = 1.0
        return w

    def uniform(ime, pairs, strict=True):
        n = len(pairs[0][0].split())
        return torch.full((2, len(pairs), 2, n + 1, n), 1.0 / n)

    monkeypatch.setattr(ca, "cross_attention_batch", diagonal)
    assert attention_near_diagonal(ime, pairs).tolist() == [1.0, 1.0]
    monkeypatch.setattr(ca, "cross_attention_batch", uniform)
    for width in (0, 1, 2):
        chance = near_diagonal_chance(pairs, width)
        assert attention_near_diagonal(ime, pairs, width).tolist() == pytest.approx(chance.tolist())
    # by hand: 1/S at width 0; at width 1, (3S - 2) / S^2 band cells over S rows of S
    assert near_diagonal_chance(pairs).tolist() == pytest.approx([1 / 3, 1 / 2])
    assert near_diagonal_chance(pairs, 1).tolist() == pytest.approx([7 / 9, 1.0])


def test_candidate_bar_text_lists_the_beam_and_explains_bad_input() -> None:
    model, src_vocab, tgt_vocab = _tiny_at()
    found = ime_candidates(model, src_vocab, tgt_vocab, "shi jian", k=3)
    beam = TransformerIME(model, src_vocab, tgt_vocab, beam_size=3, exact_length=True)
    bar = candidate_bar_text(beam, "shijian", k=3)
    assert bar == "  ".join(f"{i}. {c}" for i, (c, _) in enumerate(found, 1))
    longest = MAX_CLAUSE  # the longest training clause
    assert candidate_bar_text(beam, "shi" * longest, k=1).startswith("1. ")
    with pytest.raises(ValueError, match="at most 30 syllables"):
        candidate_bar_text(beam, "shi" * (longest + 1))
    with pytest.raises(ValueError, match="cannot be split"):
        candidate_bar_text(beam, "shiq")
    with pytest.raises(ValueError, match="at least one pinyin syllable"):
        candidate_bar_text(beam, " ")
    with pytest.raises(ValueError, match="at most 3 candidates"):
        candidate_bar_text(beam, "shi", k=4)  # the engine's own limit


def test_candidate_bar_text_takes_any_engine_with_candidates() -> None:
    class Echo:
        """An input method that writes each syllable's first letter, k times numbered."""

        def candidates(self, pinyins, k):
            return [[f"{p.replace(' ', '')[:1]}{i}" for i in range(k)] for p in pinyins]

    assert candidate_bar_text(Echo(), "woaibeijing", k=2) == "1. w0  2. w1"
    assert candidate_bar_text(SyllableUnigram(PAIRS), "shishi", k=1) == "1. 事事"
    for not_an_engine in (None, "shi", object()):
        with pytest.raises(TypeError, match=r"must be an input method with a method candidates"):
            candidate_bar_text(not_an_engine, "shi")


def test_ime_candidates_checks_its_arguments() -> None:
    model, src_vocab, tgt_vocab = _tiny_at()
    with pytest.raises(TypeError, match="src_vocab must be the model's syllable vocabulary"):
        ime_candidates(model, src_vocab.stoi, tgt_vocab, "shi jian")
    with pytest.raises(TypeError, match="tgt_vocab must be the model's character vocabulary"):
        ime_candidates(model, src_vocab, None, "shi jian")
    with pytest.raises(ValueError, match="k: this system gives at most 100 candidates"):
        ime_candidates(model, src_vocab, tgt_vocab, "shi jian", k=101)


def _loop_paired(a, b, n, groups, n_resamples, seed, level):
    """Reference: draw group indices like the function, then add clause by clause."""
    import numpy as np

    names = sorted(set(groups))
    members = {g: [i for i, h in enumerate(groups) if h == g] for g in names}
    rng = np.random.default_rng(seed)
    diffs = []
    for draw in rng.integers(0, len(names), size=(n_resamples, len(names))):
        rows = [i for j in draw for i in members[names[j]]]
        diffs.append(sum(a[i] - b[i] for i in rows) / sum(n[i] for i in rows))
    tail = (1 - level) / 2 * 100
    return np.percentile(diffs, [tail, 100 - tail])


def test_paired_cer_difference_matches_a_loop_and_pairs_the_clauses():
    import numpy as np

    from lecturekit.capstone.analysis import paired_cer_difference

    rng = np.random.default_rng(1)
    n = rng.integers(4, 20, size=40)
    a = rng.binomial(n, 0.2)
    b = rng.binomial(n, 0.1)
    est, low, high = paired_cer_difference(a, b, n, n_resamples=200, seed=3)
    assert est == pytest.approx(a.sum() / n.sum() - b.sum() / n.sum())
    ref = _loop_paired(a, b, n, list(range(40)), 200, 3, 0.95)
    assert (low, high) == pytest.approx(tuple(ref))
    groups = [f"block{i // 5}" for i in range(40)]
    est_g, low_g, high_g = paired_cer_difference(a, b, n, groups=groups, n_resamples=200)
    assert est_g == pytest.approx(est)
    assert (low_g, high_g) == pytest.approx(tuple(_loop_paired(a, b, n, groups, 200, 0, 0.95)))
    # paired: a system against itself differs by exactly zero in every draw
    assert paired_cer_difference(a, a, n) == (0.0, 0.0, 0.0)


def test_paired_cer_difference_rejects_bad_input():
    from lecturekit.capstone.analysis import paired_cer_difference

    with pytest.raises(ValueError, match="equal non-empty"):
        paired_cer_difference([1, 2], [1], [3, 3])
    with pytest.raises(ValueError, match="one id per clause"):
        paired_cer_difference([1, 2], [1, 0], [3, 3], groups=[0])
    with pytest.raises(ValueError, match="level"):
        paired_cer_difference([1], [0], [3], level=1.0)
    with pytest.raises(ValueError, match="chars must be >= 0 with a positive sum"):
        paired_cer_difference([0, 0], [0, 0], [0, 0])  # once (nan, nan, nan)
    with pytest.raises(ValueError, match="finite numbers"):
        paired_cer_difference([float("nan"), 0], [0, 0], [1, 1])
    with pytest.raises(ValueError, match="chars: too many zeros"):
        paired_cer_difference([1, 0], [0, 0], [1, 0], groups=["a", "b"], n_resamples=50)


def test_block_subsets_are_nested_whole_blocks() -> None:
    @dataclasses.dataclass
    class Clause:
        line: int

    clauses = [Clause(line) for line in range(0, 400, 3)]  # 8 blocks of 50 lines
    halves = block_subsets(clauses, (1 / 8, 1 / 4, 1 / 2, 1), 50, seed=1)
    sizes = [len({c.line // 50 for c in subset}) for subset in halves]
    assert sizes == [1, 2, 4, 8] and halves[-1] == clauses
    for small, big in itertools.pairwise(halves):
        assert all(c in big for c in small)  # nested, clauses in the corpus order
        assert [c for c in big if c in small] == small
    for subset in halves:  # whole blocks: a block is in or out
        blocks = {c.line // 50 for c in subset}
        assert subset == [c for c in clauses if c.line // 50 in blocks]
    assert block_subsets(clauses, (1 / 100,), 50)[0]  # at least one block
    assert block_subsets(clauses, (0.5,), 50, seed=2) != halves[2]  # the seed shuffles
    with pytest.raises(ValueError, match="fraction"):
        block_subsets(clauses, (0,), 50)
