"""The sentence IME's neural engines (lecturekit.capstone.tagger): splitter, vocabularies,
the tagger as an input method, k-best, the fused engine."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import torch

from lecturekit.capstone.ngram import NgramIME
from lecturekit.capstone.pinyin_input import pinyin_syllables, plain_letters, split_syllables
from lecturekit.capstone.tagger import (
    FusedIME,
    TaggerIME,
    ime_candidates,
    k_best_independent,
    sentence_vocabs,
)
from lecturekit.data.batching import pad_sequences
from lecturekit.model.config import TransformerConfig
from lecturekit.model.tagger import EncoderTagger

PAIRS = [
    ("wo ai bei jing", "我爱北京"),
    ("bei jing huan ying ni", "北京欢迎你"),
    ("wo men ai zu guo", "我们爱祖国"),
    ("zu guo fa zhan", "祖国发展"),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("woaibeijing", ["wo", "ai", "bei", "jing"]),
        ("xian", ["xian"]),  # longest match: one syllable (先), not xi an
        ("xi'an", ["xi", "an"]),  # an apostrophe forces the boundary
        ("fanguo", ["fan", "guo"]),  # fang would leave "uo": backtrack
        ("Zhong Guo", ["zhong", "guo"]),
        ("lvse", ["lv", "se"]),
        ("", []),
    ],
)
def test_split_syllables_examples(text: str, expected: list[str]) -> None:
    assert split_syllables(text) == expected


def _splittable(s: str, vocab: frozenset[str]) -> bool:
    # independent reference: dynamic programming over prefixes
    ok = [True] + [False] * len(s)
    for j in range(1, len(s) + 1):
        ok[j] = any(ok[i] and s[i:j] in vocab for i in range(max(0, j - 6), j))
    return ok[-1]


def test_split_syllables_finds_a_split_whenever_one_exists() -> None:
    vocab = pinyin_syllables()
    assert len(vocab) == 410 and {"lv", "nve", "jue", "er"} <= vocab and "null" not in vocab
    rng = random.Random(0)
    ordered = sorted(vocab)
    for _ in range(300):
        s = "".join(rng.sample(ordered, rng.randint(1, 5)))
        if rng.random() < 0.3:  # damage some strings
            s = s[:-1] + rng.choice("bcdfgkv")
        s = plain_letters(s)  # what split_syllables reads (jv, qv, xv, yv are ju, qu, xu, yu)
        if _splittable(s, vocab):
            pieces = split_syllables(s)
            assert "".join(pieces) == s and all(p in vocab for p in pieces)
        else:
            with pytest.raises(ValueError, match="cannot be split"):
                split_syllables(s)


def test_split_syllables_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="text must be toneless pinyin"):
        split_syllables("bcd")
    with pytest.raises(TypeError, match="text"):
        split_syllables(3)  # type: ignore[arg-type]


def test_sentence_vocabs_cut_rare_characters_and_keep_every_syllable() -> None:
    src, tgt = sentence_vocabs(PAIRS, min_count=2)
    assert pinyin_syllables() <= set(src.itos)
    # 北 京 爱 祖 国 appear twice, 我 twice; the rest once
    assert tgt.itos[4:] == sorted("北京爱祖国我")  # ties by character
    _, everything = sentence_vocabs(PAIRS, min_count=1)
    assert len(everything) == 4 + len(set("".join(t for _, t in PAIRS)))
    with pytest.raises(ValueError, match="min_count"):
        sentence_vocabs(PAIRS, min_count=0)


def _tagger(vocabs) -> EncoderTagger:
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=len(vocabs[0]),
        tgt_vocab_size=len(vocabs[1]),
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_encoder_layers=2,
        n_decoder_layers=1,
        dropout=0.0,
        max_len=32,
    )
    return EncoderTagger(config).eval()


def _src(pairs, src_vocab) -> torch.Tensor:
    """The padded syllable ids ``(B, S)`` of ``pairs``."""
    return pad_sequences([[src_vocab.token_to_id(s) for s in p.split()] for p, _ in pairs])


def test_tagger_writes_one_character_per_syllable_independent_of_padding() -> None:
    vocabs = sentence_vocabs(PAIRS, min_count=1)
    model = _tagger(vocabs)
    logits = model(_src(PAIRS, vocabs[0]))
    assert logits.shape == (4, 5, len(vocabs[1]))
    alone = model(_src(PAIRS[:1], vocabs[0]))  # no padding at all
    torch.testing.assert_close(logits[0, :4], alone[0], rtol=1e-5, atol=1e-5)


def test_k_best_independent_matches_exhaustive_search() -> None:
    torch.manual_seed(0)
    log_probs = torch.randn(4, 5).log_softmax(-1)
    every = sorted(
        (
            (sum(log_probs[i, t].item() for i, t in enumerate(ids)), list(ids))
            for ids in itertools.product(range(5), repeat=4)
        ),
        key=lambda x: -x[0],
    )
    got = k_best_independent(log_probs, 7)
    assert [ids for _, ids in got] == [ids for _, ids in every[:7]]
    assert [s for s, _ in got] == pytest.approx([s for s, _ in every[:7]], abs=1e-5)
    with pytest.raises(ValueError, match="log_probs must have shape"):
        k_best_independent(torch.zeros(5), 2)


def test_tagger_ime_candidates_are_distinct_and_start_with_the_argmax() -> None:
    vocabs = sentence_vocabs(PAIRS, min_count=1)
    model = _tagger(vocabs)
    ime = TaggerIME(model, *vocabs)
    out = ime.candidates(["wo ai bei jing", "zu guo"], 5)
    assert [len(c) for c in out] == [5, 5]
    assert all(
        len(set(c)) == 5 and all(len(s) == n for s in c) for c, n in zip(out, (4, 2), strict=True)
    )
    logits = model(_src([("zu guo", "祖国")], vocabs[0]))[0]
    logits[:, :4] = -torch.inf
    assert out[1][0] == vocabs[1].decode(logits.argmax(-1).tolist())


def test_fused_ime_is_the_hmm_at_weight_zero_and_the_tagger_at_a_huge_weight() -> None:
    pairs = PAIRS * 3 + [("wo ai zu guo", "我爱祖国"), ("bei jing fa zhan", "北京发展")]
    vocabs = sentence_vocabs(pairs, min_count=4)  # 欢 迎 你 们 (3 times) become <unk>
    assert vocabs[1].token_to_id("欢") == vocabs[1].unk_id
    tagger = TaggerIME(_tagger(vocabs), *vocabs)
    hmm = NgramIME(pairs, 2, discount=0.5)
    inputs = ["wo ai bei jing", "zu guo fa zhan", "bei jing huan ying ni"]
    assert FusedIME(tagger, hmm, 0.0).candidates(inputs, 3) == hmm.candidates(inputs, 3)
    # the fused score, one clause, brute force over the characters seen with each syllable
    weight = 0.7
    log_probs = tagger.log_probs(inputs)
    for pinyin, lp in zip(inputs, log_probs, strict=True):
        options = [hmm.emission[s][0] for s in pinyin.split()]
        scored = {
            text: score
            + weight * sum(lp[t, vocabs[1].token_to_id(c)].item() for t, c in enumerate(text))
            for text, score in hmm.scored(pinyin, k=hmm.max_candidates)
        }
        assert len(scored) == np.prod([len(o) for o in options])  # every sequence
        best = max(scored, key=scored.get)
        assert FusedIME(tagger, hmm, weight).candidates([pinyin], 1) == [[best]]
    # a huge weight: the tagger's choice among the characters seen with each syllable
    huge = FusedIME(tagger, hmm, 1e6).candidates(inputs, 1)
    for pinyin, lp, (got,) in zip(inputs, log_probs, huge, strict=True):
        want = ""
        for t, s in enumerate(pinyin.split()):
            chars = [hmm.itos[i] for i in hmm.emission[s][0]]
            want += max(chars, key=lambda c: lp[t, vocabs[1].token_to_id(c)].item())
        assert got == want
    with pytest.raises(ValueError, match="weight"):
        FusedIME(tagger, hmm, -1.0)
    with pytest.raises(TypeError, match="string"):
        tagger.log_probs("wo ai")


def test_with_weight_is_a_fresh_fusion_that_runs_the_tagger_once_per_clause(monkeypatch) -> None:
    vocabs = sentence_vocabs(PAIRS, min_count=1)
    tagger = TaggerIME(_tagger(vocabs), *vocabs)
    hmm = NgramIME(PAIRS, 3, discount=0.5, beam=4)
    inputs = ["wo ai bei jing", "zu guo fa zhan", "wo ai bei jing"]  # a repeated clause
    want = {w: FusedIME(tagger, hmm, w).candidates(inputs, 3) for w in (0.0, 0.3, 5.0)}
    runs = []
    log_probs = tagger.log_probs
    monkeypatch.setattr(tagger, "log_probs", lambda p: runs.append(list(p)) or log_probs(p))
    fusion = FusedIME(tagger, hmm, 0.0)
    for w in (0.0, 0.3, 5.0):
        grid = fusion.with_weight(w)
        assert grid.weight == w and grid.candidates(inputs, 3) == want[w]
    assert runs == [inputs]  # the first weight ran the tagger; the others reused its scores
    fusion.with_weight(1.0).candidates(["zu guo", "wo ai bei jing"], 1)
    assert runs == [inputs, ["zu guo"]]
    with pytest.raises(ValueError, match="weight"):
        fusion.with_weight(-0.1)


def test_split_syllables_of_a_long_unspaced_run_and_of_an_empty_vocabulary() -> None:
    assert split_syllables("nihao" * 400) == ["ni", "hao"] * 400  # no recursion limit
    assert split_syllables("NI3hao3 lü") == ["ni", "hao", "lv"]
    with pytest.raises(ValueError, match="syllables must be a non-empty set"):
        split_syllables("ni", frozenset())


def test_tagger_and_fused_ime_read_input_as_the_other_engines_and_bound_k() -> None:
    vocabs = sentence_vocabs(PAIRS, min_count=1)
    tagger = TaggerIME(_tagger(vocabs), *vocabs)
    fused = FusedIME(tagger, NgramIME(PAIRS, 3), 0.5)
    for ime in (tagger, fused):
        assert ime.candidates(["Wǒ ÀI zu3guo2"], 2) == ime.candidates(["wo ai zu guo"], 2)
        with pytest.raises(ValueError, match="'nihao', which is not one syllable.*'ni hao'"):
            ime.candidates(["nihao"], 1)  # once tagged as one confident <unk> character
        with pytest.raises(ValueError, match="'wp', which is not a pinyin syllable"):
            ime.candidates(["wp ai"], 1)
        with pytest.raises(ValueError, match="pinyins: every input needs at least one syllable"):
            ime.candidates([""], 1)
        limit = ime.max_candidates
        with pytest.raises(ValueError, match=f"at most {limit} candidates, got k={10**9}"):
            ime.candidates(["wo ai"], 10**9)
    assert (tagger.max_candidates, fused.max_candidates) == (100, 100)  # the exact trigram's
    with pytest.raises(ValueError, match="k: this system gives at most 100"):
        ime_candidates(_tagger(vocabs), *vocabs, "woai", k=10**9)
    with pytest.raises(TypeError, match="model must be the encoder-decoder"):
        ime_candidates(_tagger(vocabs), *vocabs, "woai", k=2)
    with pytest.raises(ValueError, match="'<unk>', which is not a pinyin syllable"):
        tagger.candidates(["wo <unk>"], 1)  # once a confident character for the unknown token
    with pytest.raises(ValueError, match="'<pad>', which is not a pinyin syllable"):
        fused.candidates(["<pad> ai"], 1)
