"""Hostile cases, part E2 (issue #45, round 3): more kinds for the capstone's engines (special
tokens, full-width and odd spacing, the shared bound on k and on the beam, misused metrics)
and for the clause cache (a folder where the file goes, paths that are no paths, a cache
rewritten with a matching checksum but impossible rows, other damage). The cache cases replace
the minute-long build by a two-clause corpus."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from hostile.cases import error, result, tmp
from hostile.cases_e import EIGHT, PAIRS, _at, _fused, _model, _ngram, _same, _tagger, _unigram

ENGINES = {"tagger": _tagger, "ngram": _ngram, "fused": _fused, "transformer_ime": _at,
           "unigram": _unigram}  # fmt: skip

# ------------------------------------------------------------------ engines: typed input, k
for _name, _make in ENGINES.items():
    error("capstone", f"{_name}_special_token_unk", lambda m=_make: m().candidates(["ni <unk>"], 1),
          "<unk>")  # fmt: skip
    result("capstone", f"{_name}_full_width", lambda m=_make: _same(m(), "ｎｉ ｈａｏ", "ni hao"),
           bool)  # fmt: skip
    result("capstone", f"{_name}_newline_and_nbsp",
           lambda m=_make: _same(m(), " ni\nhao\u00a0", "ni hao"), bool)  # fmt: skip
    error("capstone", f"{_name}_generator_input",
          lambda m=_make: m().candidates((p for p in ["ni hao"]), 1), "pinyins")  # fmt: skip
    error("capstone", f"{_name}_k_float", lambda m=_make: m().candidates(["ni hao"], 2.0), "k")
    error("capstone", f"{_name}_k_true", lambda m=_make: m().candidates(["ni hao"], True), "k")
    result("capstone", f"{_name}_no_inputs", lambda m=_make: m().candidates([], 1),
           lambda r: r == [])  # fmt: skip

error("capstone", "tagger_pad_token", lambda: _tagger().candidates(["<pad>"], 1), "<pad>")
error("capstone", "transformer_ime_eos_token", lambda: _at().candidates(["<eos> ni"], 1), "<eos>")
error("capstone", "transformer_ime_beam_size_1e9", lambda: _at(10**9), "beam_size")
error("capstone", "transformer_ime_model_none", lambda: _transformer_ime(None), "model")
error("capstone", "transformer_ime_vocabs_swapped", lambda: _transformer_ime("swap"), "src_vocab")
error("capstone", "hmm_k_best_k_1e9", lambda: _hmm_k_best(10**9), "k")
error("capstone", "hmm_k_1000_eight_syllables", lambda: _hmm_k_best(1000), "k")  # once a minute
error("capstone", "fused_weight_nan", lambda: _fused_weight(float("nan")), "weight")
error("capstone", "ngram_set_discount_nan", lambda: _ngram().set_discount(float("nan")), "discount")
result("capstone", "ngram_1000_syllables", lambda: _ngram().candidates([" ".join(["shi"] * 1000)], 2),
       lambda r: len(r[0]) >= 1 and all(len(c) == 1000 for c in r[0]))  # fmt: skip
result("capstone", "tagger_600_syllables", lambda: _tagger().candidates([" ".join(["ni"] * 600)], 2),
       lambda r: len(r[0]) == 2 and all(len(c) == 600 for c in r[0]))  # fmt: skip
result("capstone", "unigram_eight_syllables_k_at_bound", lambda: _unigram().candidates([EIGHT], 100),
       lambda r: 1 <= len(r[0]) <= 100 and len(set(r[0])) == len(r[0]))  # fmt: skip


def _transformer_ime(model: Any):
    from lecturekit.capstone.engines import TransformerIME

    real, (src, tgt) = _model("at")
    if model == "swap":
        return TransformerIME(real, tgt, src)
    return TransformerIME(model, src, tgt)


def _hmm_k_best(k: int):
    from lecturekit.capstone.engines import HmmBaseline, hmm_k_best

    return hmm_k_best(HmmBaseline().params, ["shi"] * 6, k)


def _fused_weight(weight: float):
    from lecturekit.capstone.tagger import FusedIME

    return FusedIME(_tagger(), _ngram(), weight)


# ------------------------------------------------------------------ the candidate bar, analyses
def _ime_candidates(text: str, vocabs: Any = None, k: int = 3):
    from lecturekit.capstone.tagger import ime_candidates

    model, real = _model("at")
    return ime_candidates(model, *(real if vocabs is None else vocabs), text, k=k)


error("capstone", "ime_candidates_vocabs_none", lambda: _ime_candidates("ni", (None, None)),
      "src_vocab")  # fmt: skip
error("capstone", "ime_candidates_special_token", lambda: _ime_candidates("<unk>"), "text")
result("capstone", "ime_candidates_tone_marks",
       lambda: _ime_candidates("Nǐ hǎo") == _ime_candidates("nihao"), bool)  # fmt: skip
error("capstone", "candidate_bar_typed_none", lambda: _bar(None), "typed")
error("capstone", "next_char_steps_text_outside_vocab", lambda: _next_text("𠀀𠀀"), "text")
error("capstone", "attention_near_diagonal_layer_9", lambda: _near(layer=9), "layer")


def _bar(typed: Any):
    from lecturekit.capstone.analysis import candidate_bar_text

    return candidate_bar_text(_at(), typed)


def _next_text(text: str):
    from lecturekit.capstone.engines import next_char_steps

    return next_char_steps(_at(), "ni hao", text=text)


def _near(**kw: Any):
    from lecturekit.capstone.analysis import attention_near_diagonal

    return attention_near_diagonal(_at(), PAIRS[:2], **kw)


def _split(text: str):
    from lecturekit.capstone.pinyin_input import split_syllables

    return split_syllables(text)


result("capstone", "split_20000_syllables", lambda: _split("zhuang" * 20000),
       lambda r: r == ["zhuang"] * 20000)  # fmt: skip
error("capstone", "split_zero_width_space", lambda: _split("ni\u200bhao"), "text")


# ------------------------------------------------------------------ metrics and training clauses
def _unigram_of(pairs: Any):
    from lecturekit.capstone.analysis import SyllableUnigram

    return SyllableUnigram(pairs)


def _evaluate(pairs: Any):
    from lecturekit.capstone.ngram import evaluate_clauses

    return evaluate_clauses(lambda pinyins, k: [[""]] * len(pinyins), pairs)


def _scores(candidates: Any):
    from lecturekit.capstone.ngram import sentence_scores

    return sentence_scores(candidates, ["你好"])


def _paired(a: Any, b: Any, n: Any, **kw: Any):
    from lecturekit.capstone.analysis import paired_cer_difference

    return paired_cer_difference(a, b, n, **kw)


error("capstone", "ngram_pairs_empty_clause", lambda: _ngram_pairs([("", "")]), "pairs")
error("capstone", "unigram_pairs_of_bytes", lambda: _unigram_of([(b"ni", "你")]), "pairs")
error("capstone", "unigram_pairs_of_triples", lambda: _unigram_of([("ni", "你", 1)]), "pairs")
error("capstone", "evaluate_pairs_not_pairs", lambda: _evaluate(["ni hao"]), "pairs")
error("capstone", "evaluate_pairs_of_bytes", lambda: _evaluate([(b"ni", b"x")]), "pairs")
error("capstone", "sentence_scores_string_candidates", lambda: _scores(["你好"]), "candidates")
error("capstone", "paired_cer_zero_chars", lambda: _paired([0, 0], [0, 0], [0, 0]), "chars")
error("capstone", "paired_cer_nan", lambda: _paired([float("nan"), 0], [0, 0], [1, 1]), "finite")
error("capstone", "paired_cer_groups_of_empty_clauses",
      lambda: _paired([1, 0], [0, 0], [1, 0], groups=["a", "b"], n_resamples=50), "chars")  # fmt: skip


def _ngram_pairs(pairs: Any):
    from lecturekit.capstone.ngram import NgramIME

    return NgramIME(pairs, 2)


# ------------------------------------------------------------------ the clause cache
def _fake_corpus():
    from lecturekit.data.sentences import Clause, SentenceCorpus

    return SentenceCorpus(
        [Clause("我爱北京", "wo ai bei jing", "rmrb", 0), Clause("质量不错", "zhi liang bu cuo",
                                                                   "pos", 3)], {"rmrb:short": 2}
    )  # fmt: skip


def _sentences(directory: Any = None):
    """load_sentences with the build replaced by the fake corpus (a rebuild is counted)."""
    import lecturekit.data.sentences as sentences

    sentences.build_sentences = _fake_corpus  # type: ignore[assignment]
    return sentences.load_sentences(directory)


def _damaged_cache(damage: Any) -> bool:
    """Write a good cache, damage it, load again: the fake corpus comes back (rebuilt)."""
    import lecturekit.data.sentences as sentences

    folder = tmp("x").parent
    _sentences(folder)
    path = sentences._cache_path(folder)
    path.write_bytes(damage(path.read_bytes()))
    again = _sentences(folder)
    return again == _fake_corpus() and sentences._read_cache(path) == _fake_corpus()


def _rewritten(edit_row: Any = None, **fields: Any) -> Any:
    """A cache rewritten by hand with a matching checksum (rows and header edited)."""

    def damage(data: bytes) -> bytes:
        header, body = data.decode("utf-8").split("\n", 1)
        if edit_row is not None:
            body = "\n".join(edit_row(row.split("\t")) for row in body.splitlines()) + "\n"
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
        head = {**json.loads(header), "sha256": digest, **fields}
        return (json.dumps(head, ensure_ascii=False) + "\n" + body).encode("utf-8")

    return damage


def _cache_path_is(kind: str, load: str = "sentences") -> Any:
    import lecturekit.data.pinyin as pinyin_data
    import lecturekit.data.sentences as sentences

    def refuse() -> Any:
        raise RuntimeError("built although the cache file cannot be replaced (a minute lost)")

    sentences.build_sentences = refuse  # type: ignore[assignment]
    pinyin_data._build_lexicon = refuse  # type: ignore[assignment]
    folder = tmp("x").parent
    module = sentences if load == "sentences" else pinyin_data
    path = module._cache_path(folder)
    if kind == "folder":
        path.mkdir()
    else:
        os.symlink("/dev/null", path)
    return (
        sentences.load_sentences(folder)
        if load == "sentences"
        else pinyin_data.load_lexicon(folder)
    )


error("capstone", "clause_cache_file_is_a_folder", lambda: _cache_path_is("folder"), "cache file")
error("capstone", "clause_cache_file_links_to_dev_null", lambda: _cache_path_is("device"),
      "cache file")  # fmt: skip
error("capstone", "lexicon_cache_file_is_a_folder", lambda: _cache_path_is("folder", "lexicon"),
      "cache file")  # fmt: skip
for _what, _bad in {"int": 5, "bytes": b"/tmp/cache", "empty": "", "nul": "/tmp/a\0b"}.items():
    error("capstone", f"clause_cache_directory_{_what}", lambda d=_bad: _sentences(d), "directory")
_DAMAGES = {
    "rows_with_a_syllable_missing": _rewritten(lambda r: "\t".join([*r[:3], r[3].rsplit(" ", 1)[0]])),
    "rows_with_latin_text": _rewritten(lambda r: "\t".join([*r[:2], "abcd", r[3]])),
    "rows_of_an_unknown_source": _rewritten(lambda r: "\t".join(["wiki", *r[1:]])),
    "header_rows_true": _rewritten(rows=True),
    "header_dropped_a_string": _rewritten(dropped="ab"),
    "header_a_json_list": lambda b: b"[1, 2]\n" + b.split(b"\n", 1)[1],
    "binary_garbage": lambda b: bytes(range(256)) * 40,
    "windows_line_endings": lambda b: b.replace(b"\n", b"\r\n"),
    "one_byte_of_the_body_flipped": lambda b: b[:-5] + bytes([b[-5] ^ 1]) + b[-4:],
}  # fmt: skip
for _what, _damage in _DAMAGES.items():
    result("capstone", f"clause_cache_{_what}", lambda d=_damage: _damaged_cache(d), bool)


def _split_sentences(clauses: Any, **kw: Any):
    from lecturekit.data.sentences import split_sentences

    return split_sentences(clauses, **kw)


def _clauses(lines: int, source: str = "rmrb"):
    from lecturekit.data.sentences import Clause

    return [Clause("机器学习", "ji qi xue xi", source, i) for i in range(lines)]


error("capstone", "split_sentences_tuples", lambda: _split_sentences([("机器学习", "ji qi xue xi")]),
      "corpus")  # fmt: skip
error("capstone", "split_sentences_reviews_only", lambda: _split_sentences(_clauses(9, "pos")),
      "block_lines")  # fmt: skip
error("capstone", "split_sentences_block_lines_1e9",
      lambda: _split_sentences(_clauses(500), block_lines=10**9), "block_lines")  # fmt: skip
result("capstone", "split_sentences_three_blocks", lambda: _split_sentences(_clauses(150)),
       lambda s: len(s.train) == len(s.valid) == len(s.test) == 50)  # fmt: skip
