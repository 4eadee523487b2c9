"""The capstone's input methods over whole inputs: the HMM baseline and the Transformer."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from lecturekit.capstone import models as ps
from lecturekit.capstone.engines import (
    HmmBaseline,
    TransformerIME,
    _top_rows,
    cross_attention,
    cross_attention_batch,
    hmm_k_best,
    next_char_probs,
    next_char_steps,
    teacher_forced_texts,
)
from lecturekit.capstone.pinyin_input import MAX_BEAM, MAX_CANDIDATES
from lecturekit.capstone.tagger import sentence_vocabs
from lecturekit.decoding import greedy

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PAIRS = [
    ("shi shi shi", "是事实"),
    ("shi jian", "时间"),
    ("shi shi", "事实"),
    ("jian shi", "见识"),
    ("li shi", "历史"),
    ("ji qi xue xi", "机器学习"),
]


def test_hmm_uses_its_own_spelling_of_u_umlaut() -> None:
    hmm = HmmBaseline()
    assert hmm.spell("xue xi lv nve") == ["xve", "xi", "lv", "nve"]
    (cands,) = hmm.candidates(["ji qi xue xi"], 3)
    assert cands[0] == "机器学习" and len(cands) == 3
    with pytest.raises(ValueError, match="'qqq', which is not a pinyin syllable"):
        hmm.candidates(["qqq"], 3)  # not a syllable: refused, as by every engine
    assert hmm.candidates(["Xué xi2"], 3) == hmm.candidates(["xue xi"], 3)  # normalised
    # k is bounded by max_candidates: refused before any decoding, not after minutes of it
    with pytest.raises(ValueError, match="at most 100 candidates, got k=1000000000"):
        hmm.candidates(["xue xue xue xue"], k=10**9)


def test_fast_viterbi_gives_the_package_viterbi_scores() -> None:
    """The package's own pure-Python viterbi is the reference: the same k best scores, and
    the same paths wherever the scores are not tied."""
    from Pinyin2Hanzi import viterbi

    hmm = HmmBaseline()
    for pinyin in ("shi shi", "ji qi xue xi", "yin hang", "lv se", "yi", "zhong hua ren min"):
        observations = hmm.spell(pinyin)
        ours = hmm_k_best(hmm.params, observations, 4)
        theirs = viterbi(hmm.params, observations, path_num=4, log=True)
        assert [score for score, _ in ours] == [item.score for item in theirs]
        scores = [score for score, _ in ours]
        for i, (score, text) in enumerate(ours):
            if scores.count(score) == 1:
                assert text == "".join(theirs[i].path), pinyin
    with pytest.raises(ValueError, match="k"):
        hmm_k_best(hmm.params, ["shi"], 0)


def test_top_rows_is_the_stable_argsort_of_each_column_cut_to_k() -> None:
    rng = np.random.default_rng(0)
    for m, c, k in ((1, 3, 5), (7, 4, 1), (30, 9, 5), (200, 50, 5), (12, 6, 12)):
        cand = rng.integers(0, 4, size=(m, c)).astype(float)  # many ties at every k-th value
        want = np.argsort(-cand, axis=0, kind="stable")[: min(k, m)]
        np.testing.assert_array_equal(_top_rows(cand, min(k, m)), want)


@pytest.fixture(scope="module")
def ime() -> TransformerIME:
    """An untrained small model of the sentence recipe, seeded: every property below holds
    for any weights, and a model that knows nothing tests the decoding, not the training."""
    vocabs = sentence_vocabs(PAIRS, min_count=1)
    base = ps.SENTENCE_RECIPES["ime-sentences-at"]
    recipe = dataclasses.replace(
        base, seed=1, model={**base.model, "d_model": 16, "d_ff": 32, "n_heads": 2, "dropout": 0.0}
    )
    return TransformerIME(ps.make_sentence_model(recipe, *vocabs).eval(), *vocabs, beam_size=5)


def test_transformer_ime_candidates_match_greedy_and_are_ranked(ime) -> None:
    inputs = ["shi shi", "xue xi", "li shi", "ji qi xue xi"]  # three of one length: a batch
    scored = ime.scored_candidates(inputs, 5)
    for row in scored:
        probs = [p for _, p in row]
        assert len(row) == 5 and probs == sorted(probs, reverse=True) and sum(probs) <= 1
    greedy_ime = TransformerIME(ime.model, ime.src_vocab, ime.tgt_vocab, beam_size=1)
    one_by_one = [
        [ime.tgt_vocab.decode(greedy(ime.model, ime.encode([p]), len(p.split())).tokens[0])]
        for p in inputs
    ]
    assert greedy_ime.candidates(inputs, 1) == one_by_one  # batching changes nothing
    assert ime.candidates(inputs[::-1], 5) == [[w for w, _ in row] for row in scored[::-1]]
    with pytest.raises(ValueError, match="at most 1"):
        greedy_ime.candidates(inputs, 2)


def test_step_by_step_decoding_and_cross_attention(ime) -> None:
    steps = next_char_steps(ime, "xue xi", top=3)
    chosen = [best[0][0] for _, best in steps]  # the most probable token of each step
    assert [prefix for prefix, _ in steps] == ["".join(chosen[:t]) for t in range(len(steps))]
    # greedy decoding, one step at a time: the same tokens, EOS included when written
    src = ime.encode(["xue xi"])
    reference = greedy(ime.model, src, 3).tokens[0].tolist()  # at most 2 characters + EOS
    assert chosen == [ime.tgt_vocab.itos[i] for i in reference]
    for _, best in steps:
        probs = [p for _, p in best]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-9
    # teacher forcing: the decoder reads the given characters, whatever it prefers
    forced = next_char_steps(ime, "ji qi xue xi", top=2, text="机器学习")
    assert [prefix for prefix, _ in forced] == ["", "机", "机器", "机器学", "机器学习"]
    # each step's distribution equals the teacher-forced forward pass of the whole word
    src = ime.encode(["ji qi xue xi"])
    tgt_in = torch.tensor([[ime.tgt_vocab.bos_id, *ime.tgt_vocab.encode("机器学习")]])
    probs = torch.softmax(ime.model(src, tgt_in).double(), dim=-1)[0]  # (5, V)
    for t, (_, best) in enumerate(forced):
        top = torch.topk(probs[t], 2)
        assert [c for c, _ in best] == [ime.tgt_vocab.itos[i] for i in top.indices.tolist()]
        assert [p for _, p in best] == pytest.approx(top.values.tolist(), abs=1e-6)
    weights = cross_attention(ime, "ji qi xue xi", "机器学习")
    layers, heads = ime.model.config.n_decoder_layers, ime.model.config.n_heads
    assert weights.shape == (layers, heads, 5, 4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(layers, heads, 5))


def test_next_char_probs_are_the_forward_pass_after_the_prefix(ime) -> None:
    src = ime.encode(["ji qi xue xi"])
    for prefix in ("", "机器"):
        tgt_in = torch.tensor([[ime.tgt_vocab.bos_id, *ime.tgt_vocab.encode(prefix)]])
        probs = torch.softmax(ime.model(src, tgt_in)[0, -1].double(), dim=-1)
        got = next_char_probs(ime, "ji qi xue xi", ["学", "习"], prefix)
        assert got == pytest.approx({c: float(probs[ime.tgt_vocab.stoi[c]]) for c in "学习"})
    # the later syllables are read: another input, another first step
    assert next_char_probs(ime, "ji qi", ["机"]) != next_char_probs(ime, "ji qi xue xi", ["机"])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        next_char_probs(ime, "ji qi", ["梨"])


def test_cross_attention_batch_gives_each_clause_its_own_weights(ime) -> None:
    pairs = [("shi jian", "时间"), ("jian shi", "见识"), ("li shi", "历史")]
    batch = cross_attention_batch(ime, pairs)
    config = ime.model.config
    assert batch.shape == (config.n_decoder_layers, 3, config.n_heads, 3, 2)
    for j, (pinyin, text) in enumerate(pairs):
        torch.testing.assert_close(batch[:, j], cross_attention(ime, pinyin, text))
    with pytest.raises(ValueError, match="one number of syllables and one text length"):
        cross_attention_batch(ime, [("shi jian", "时间"), ("ji qi xue xi", "机器学习")])
    with pytest.raises(ValueError, match="at least one"):
        cross_attention_batch(ime, [])


def test_teacher_forced_texts_take_the_best_character_after_each_reference_prefix(ime) -> None:
    pairs = [("shi jian", "时间"), ("ji qi xue xi", "机器学习"), ("jian shi", "见识")]
    forced = teacher_forced_texts(ime, pairs)  # the two clauses of two run in one batch
    chars = ime.tgt_vocab.itos[4:]  # every character (the specials are never written)
    for (pinyin, text), got in zip(pairs, forced, strict=True):
        assert len(got) == len(text)
        for t, char in enumerate(got):  # step t: the argmax after the reference's first t
            probs = next_char_probs(ime, pinyin, chars, text[:t])
            assert probs[char] == max(probs.values())
    # the first step reads only BOS, as free-running decoding does
    assert (
        forced[1][0]
        == TransformerIME(ime.model, ime.src_vocab, ime.tgt_vocab, 1).candidates(
            ["ji qi xue xi"], 1
        )[0][0][0]
    )
    with pytest.raises(ValueError, match="one syllable per character"):
        teacher_forced_texts(ime, [("shi", "时间")])
    with pytest.raises(ValueError, match="one syllable per character, got 'shi'"):
        teacher_forced_texts(ime, [("shi jian", "时间"), ("shi", "时间")])


def test_bad_inputs_get_errors_that_name_the_argument(ime) -> None:
    with pytest.raises(TypeError, match="pinyins: expected a list"):
        ime.candidates("shi shi", 1)  # a single string, not a list
    # what is unambiguous is normalised: case, tone marks and numbers, spacing, ü
    assert ime.candidates(["Shì  SHI3"], 2) == ime.candidates(["shi shi"], 2)
    assert ime.encode(["nü lü'xue"]).tolist() == ime.encode(["nv lv xue"]).tolist()
    with pytest.raises(ValueError, match="'nihao', which is not one syllable.*'ni hao'"):
        ime.candidates(["nihao"], 1)
    with pytest.raises(ValueError, match="'hoa', which is not a pinyin syllable"):
        ime.candidates(["ni hoa"], 1)
    with pytest.raises(TypeError, match="every input must be a str"):
        ime.candidates([b"ni hao"], 1)
    with pytest.raises(ValueError, match="top: this system gives at most"):
        next_char_steps(ime, "shi", top=10**9)
    with pytest.raises(ValueError, match="at least one syllable"):
        ime.candidates(["  "], 1)
    with pytest.raises(ValueError, match="k: expected a positive int"):
        ime.candidates(["shi"], 0)
    with pytest.raises(ValueError, match="not in the vocabulary|outside"):
        next_char_steps(ime, "shi", text="\u9fff")


def test_default_length_is_at_most_one_character_per_syllable(ime) -> None:
    """The docstring's promise: 'ni hao' never gives three characters (an unfinished
    hypothesis one step longer was once let through: '你好好')."""
    inputs = ["ni hao", "shi", "shi shi shi", "ji qi xue xi", "li shi"]
    for beam in (1, 5):
        engine = TransformerIME(ime.model, ime.src_vocab, ime.tgt_vocab, beam_size=beam)
        rows = engine.candidates(inputs, beam)
        assert all(
            len(c) <= len(p.split()) for p, row in zip(inputs, rows, strict=True) for c in row
        )
    steps = next_char_steps(ime, "ni hao")
    assert len(steps) <= 3 and len(steps[-1][0]) <= 2  # at most two characters, then EOS


def test_every_engine_bounds_k_by_the_one_shared_bound_and_refuses_special_tokens(ime) -> None:
    hmm = HmmBaseline()
    assert max(hmm.max_candidates, ime.max_candidates) <= MAX_CANDIDATES
    with pytest.raises(ValueError, match="at most 100 candidates, got k=101"):
        hmm_k_best(hmm.params, ["shi"], 101)  # k = 1000 took a minute on 8 syllables
    with pytest.raises(ValueError, match=f"beam_size: this system gives at most {MAX_BEAM}"):
        TransformerIME(ime.model, ime.src_vocab, ime.tgt_vocab, beam_size=10**9)
    for special in ("<unk>", "<pad>", "<eos>"):  # in the model's vocabulary, but no syllables
        with pytest.raises(ValueError, match=f"'{special}', which is not a pinyin syllable"):
            ime.candidates([f"ni {special}"], 1)
    assert ime.candidates(["ｎｉ ｈａｏ"], 2) == ime.candidates(["ni hao"], 2)  # full width


def test_transformer_ime_checks_its_model_and_vocabularies(ime) -> None:
    with pytest.raises(TypeError, match="model must be the encoder-decoder Transformer"):
        TransformerIME(None, ime.src_vocab, ime.tgt_vocab)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="src_vocab must be the model's syllable vocabulary"):
        TransformerIME(ime.model, ime.tgt_vocab, ime.tgt_vocab)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tgt_vocab must be the model's character vocabulary"):
        TransformerIME(ime.model, ime.src_vocab, ime.src_vocab)  # type: ignore[arg-type]
