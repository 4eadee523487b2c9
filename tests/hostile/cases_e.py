"""Hostile cases, part E (issue #45): the capstone's engines, metrics, clause cache and
sentence models, on toy clauses and untrained tiny models (the shipped files only where a
case damages a copy of one)."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path
from typing import Any

from hostile.cases import error, result, tmp

PAIRS = [
    ("wo ai bei jing", "我爱北京"),
    ("bei jing huan ying ni", "北京欢迎你"),
    ("ni hao", "你好"),
    ("shi shi", "事实"),
    ("shi jian", "时间"),
    ("li shi", "历史"),
    ("lv se", "绿色"),
    ("xue xi", "学习"),
]
EIGHT = " ".join(["shi"] * 8)


def _ngram(order: int = 2, beam: int | None = None):
    from lecturekit.capstone.ngram import NgramIME

    return NgramIME(PAIRS * 2, order, beam=beam)


def _recipe(kind: str):
    from lecturekit.capstone import models as ps

    base = ps.SENTENCE_RECIPES[f"ime-sentences-{kind}"]
    small = {"d_model": 16, "d_ff": 32, "n_heads": 2, "dropout": 0.0}
    return dataclasses.replace(
        base, name=f"hostile-{kind}", total_steps=3, batch_size=8, warmup_steps=2,
        eval_every=1, save_every=1, n_eval=6, model={**base.model, **small},
    )  # fmt: skip


def _model(kind: str):
    from lecturekit.capstone import models as ps
    from lecturekit.capstone.tagger import sentence_vocabs

    vocabs = sentence_vocabs(PAIRS, min_count=1)
    return ps.make_sentence_model(_recipe(kind), *vocabs).eval(), vocabs


def _tagger():
    from lecturekit.capstone.tagger import TaggerIME

    model, vocabs = _model("nat")
    return TaggerIME(model, *vocabs)


def _at(beam: int = 3):
    from lecturekit.capstone.engines import TransformerIME

    model, vocabs = _model("at")
    return TransformerIME(model, *vocabs, beam)


def _fused():
    from lecturekit.capstone.tagger import FusedIME

    return FusedIME(_tagger(), _ngram(3), 0.5)


def _unigram():
    from lecturekit.capstone.analysis import SyllableUnigram

    return SyllableUnigram(PAIRS)


def _same(ime: Any, typed: str, plain: str, k: int = 2) -> bool:
    return ime.candidates([typed], k) == ime.candidates([plain], k)


# ------------------------------------------------------------------ k (item 1)
error(
    "capstone", "ngram_k_10000_eight_syllables", lambda: _ngram().candidates([EIGHT], 10_000), "k"
)
error("capstone", "ngram_scored_k_1e9", lambda: _ngram().scored("shi shi shi shi shi shi", 10**9), "k")  # fmt: skip
error("capstone", "ngram_exact_trigram_k_1000", lambda: _ngram(3).candidates([EIGHT], 1000), "k")
error("capstone", "fused_k_1e9", lambda: _fused().candidates(["ni hao"], 10**9), "k")
error("capstone", "tagger_k_1e9_four_syllables", lambda: _tagger().candidates(["shi shi shi shi"], 10**9), "k")  # fmt: skip
error("capstone", "unigram_k_1e9", lambda: _unigram().candidates([EIGHT], 10**9), "k")
error("capstone", "transformer_ime_k_above_beam", lambda: _at(3).candidates(["ni hao"], 4), "k")
result("capstone", "ngram_k_at_the_bound", lambda: _ngram().candidates(["shi shi"], 1000),
       lambda r: 1 <= len(r[0]) <= 1000, "k")  # fmt: skip

# ------------------------------------------------------------------ typed input (item 3)
for _name, _make in [("tagger", _tagger), ("ngram", _ngram), ("fused", _fused),
                     ("transformer_ime", _at), ("unigram", _unigram)]:  # fmt: skip
    error("capstone", f"{_name}_unspaced_nihao", lambda m=_make: m().candidates(["nihao"], 1),
          "ni hao")  # fmt: skip
    error("capstone", f"{_name}_misspelt_hoa", lambda m=_make: m().candidates(["ni hoa"], 1),
          "hoa")  # fmt: skip
    error("capstone", f"{_name}_empty_input", lambda m=_make: m().candidates(["  "], 1),
          "pinyins")  # fmt: skip
    error("capstone", f"{_name}_bytes_input", lambda m=_make: m().candidates([b"ni hao"], 1),
          "pinyins")  # fmt: skip
    error("capstone", f"{_name}_none_input", lambda m=_make: m().candidates([None], 1), "pinyins")
    error("capstone", f"{_name}_one_string", lambda m=_make: m().candidates("ni hao", 1), "pinyins")
    result("capstone", f"{_name}_tone_marks_and_case", lambda m=_make: _same(m(), "NǏ hǍo", "ni hao"),
           bool)  # fmt: skip
    result("capstone", f"{_name}_tone_numbers_unspaced", lambda m=_make: _same(m(), "ni3hao3", "ni hao"),
           bool)  # fmt: skip
result("capstone", "ngram_u_umlaut", lambda: _same(_ngram(), "lü sè", "lv se"), bool)
result("capstone", "ngram_unseen_syllable_marked", lambda: _ngram().candidates(["ni zhuang"], 1),
       lambda r: r == [["你□"]])  # fmt: skip
result("capstone", "hmm_tone_marks", lambda: _same(_hmm(), "Xué xí", "xue xi"), bool)
error("capstone", "hmm_unspaced", lambda: _hmm().candidates(["xuexi"], 1), "xue xi")


def _hmm():
    from lecturekit.capstone.engines import HmmBaseline

    return HmmBaseline()


# ------------------------------------------------------------------ lengths, small misuse (7, 11)
def _lengths_ok() -> bool:
    ime = _at(3)
    inputs = ["shi", "ni hao", "wo ai bei jing"]
    return all(len(c) <= len(p.split()) for p, row in zip(inputs, ime.candidates(inputs, 3),
                                                            strict=True) for c in row)  # fmt: skip


result("capstone", "transformer_ime_default_length", _lengths_ok, bool)


def _ime_candidates(model: Any, **kw: Any):
    from lecturekit.capstone.tagger import ime_candidates

    _, vocabs = _model("at")
    return ime_candidates(model, *vocabs, "woaibeijing", **kw)


error("capstone", "ime_candidates_k_1e9", lambda: _ime_candidates(_model("at")[0], k=10**9), "k")
error("capstone", "ime_candidates_tagger_model", lambda: _ime_candidates(_model("nat")[0]), "model")
error("capstone", "next_char_steps_top_1e9", lambda: _next(top=10**9), "top")


def _next(**kw: Any):
    from lecturekit.capstone.engines import next_char_steps

    return next_char_steps(_at(3), "ni hao", **kw)


def _split(*args: Any):
    from lecturekit.capstone.pinyin_input import split_syllables

    return split_syllables(*args)


result("capstone", "split_600_syllables", lambda: _split("nihao" * 300),
       lambda r: r == ["ni", "hao"] * 300)  # fmt: skip
error("capstone", "split_empty_vocabulary", lambda: _split("ni", frozenset()), "syllables")
error("capstone", "split_bytes", lambda: _split(b"nihao"), "text")
error("capstone", "split_not_pinyin", lambda: _split("qqq"), "text")


def _boot(*args: Any, **kw: Any):
    import numpy as np

    from lecturekit.capstone.ngram import bootstrap_interval

    return bootstrap_interval(*[np.asarray(a, dtype=float) for a in args], **kw)


error("capstone", "bootstrap_zero_characters", lambda: _boot([0, 0], [0, 0]), "denominator")
error(
    "capstone", "bootstrap_resamples_1e9", lambda: _boot([1, 0], n_resamples=10**9), "n_resamples"
)
error("capstone", "bootstrap_nan", lambda: _boot([1, float("nan")]), "numerator")
error("capstone", "bootstrap_empty", lambda: _boot([]), "numerator")


def _evaluate(decode: Any, pairs: Any = PAIRS):
    from lecturekit.capstone.ngram import evaluate_clauses

    return evaluate_clauses(decode, pairs)


error("capstone", "evaluate_decode_none", lambda: _evaluate(lambda p, k: None), "decode")
error("capstone", "evaluate_decode_short", lambda: _evaluate(lambda p, k: [["x"]]), "decode")
error("capstone", "evaluate_no_pairs", lambda: _evaluate(lambda p, k: [], []), "pairs")
error("capstone", "ngram_no_pairs", lambda: _ngram_of([]), "pairs")
error("capstone", "ngram_pairs_of_bytes", lambda: _ngram_of([(b"ni", "你")]), "pairs")
error("capstone", "ngram_bonus_nan", lambda: _bonus(float("nan")), "bonus")
error("capstone", "ngram_bonus_wrong_shape", lambda: _bonus(0.0, rows=3), "bonus")


def _ngram_of(pairs: Any):
    from lecturekit.capstone.ngram import NgramIME

    return NgramIME(pairs, 2)


def _bonus(value: float, rows: int = 2):
    import numpy as np

    ime = _ngram()
    return ime.scored("ni hao", 1, bonus=np.full((rows, len(ime.itos)), value))


# ------------------------------------------------------------------ sentence models (2, 5, 11)
def _split_data():
    from lecturekit.data.sentences import Clause, SentenceSplit

    clauses = [Clause(t, p, "rmrb", i) for i, (p, t) in enumerate(PAIRS * 8)]
    random.Random(0).shuffle(clauses)
    return SentenceSplit(train=clauses, valid=clauses[:6], test=clauses[:6], ood=[], seed=0,
                         block_lines=50)  # fmt: skip


def _train(recipe: Any, state: Path, out: Path, **kw: Any):
    from lecturekit.capstone import models as ps

    return ps.train_sentences(recipe, threads=1, split=_split_data(), state_file=state, out=out,
                              **kw)  # fmt: skip


def _train_nan() -> Any:
    folder = tmp("x").parent
    out = folder / "good.pt"
    _train(_recipe("nat"), folder / "s.pt", out, max_steps=1)
    good = out.read_bytes()
    wild = dataclasses.replace(_recipe("nat"), peak_lr=1e37, total_steps=20)
    try:
        _train(wild, folder / "s2.pt", out)
    finally:
        if out.read_bytes() != good:
            return "overwrote the good file"  # noqa: B012 - the outcome of the case
    return "trained on without a word"


error("capstone", "train_sentences_nan", _train_nan, "learning rate", "lr")
error("capstone", "sentence_recipe_warmup_0",
      lambda: dataclasses.replace(_recipe("at"), warmup_steps=0), "warmup_steps")  # fmt: skip
error("capstone", "sentence_recipe_smoothing_1",
      lambda: dataclasses.replace(_recipe("at"), label_smoothing=1.0), "label_smoothing")  # fmt: skip


def _trained(kind: str = "nat") -> tuple[Path, Path]:
    folder = tmp("x").parent
    _train(_recipe(kind), folder / "s.pt", folder / "o.pt", max_steps=1)
    return folder / "s.pt", folder / "o.pt"


def _damaged_file(damage: Any) -> Any:
    from lecturekit.capstone import models as ps

    _, out = _trained()
    out.write_bytes(damage(out.read_bytes()))
    return ps.load_sentence_model(_recipe("nat"), out)


def _damaged_state(damage: Any) -> Any:
    state, out = _trained()
    state.write_bytes(damage(state.read_bytes()))
    return _train(_recipe("nat"), state, out)


def _flip(data: bytes) -> bytes:
    """8 bytes flipped in the middle of the file's largest tensor (flipping at a fixed offset
    may hit the zip's alignment padding, which no reader looks at: no damage at all)."""
    import io
    import zipfile

    info = max(zipfile.ZipFile(io.BytesIO(data)).infolist(), key=lambda i: i.compress_size)
    at = info.header_offset
    name_len, extra_len = (int.from_bytes(data[at + k : at + k + 2], "little") for k in (26, 28))
    middle = at + 30 + name_len + extra_len + info.compress_size // 2
    b = bytearray(data)
    for i in range(middle, middle + 8):
        b[i] ^= 0xFF
    return bytes(b)


_DAMAGES = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "zip_header_only": lambda b: b[:100],
    "text": lambda b: b"not a model\n" * 10,
    "flipped": _flip,
}
for _what, _damage in _DAMAGES.items():
    error("capstone", f"sentence_file_{_what}", lambda d=_damage: _damaged_file(d), "damaged")
    error("capstone", f"sentence_state_{_what}", lambda d=_damage: _damaged_state(d), "damaged")


def _state_without(key: str) -> Any:
    import torch

    from lecturekit.training.checkpoint import _checksum

    state, out = _trained()
    saved = torch.load(state, weights_only=True)
    fit_state = {k: v for k, v in saved["fit_state"].items() if k != key}
    edited = {k: v for k, v in saved.items() if k != "checksum"} | {"fit_state": fit_state}
    torch.save({**edited, "checksum": _checksum(edited)}, state)  # whole but for the entry
    return _train(_recipe("nat"), state, out)


for _key in ("optimizer", "rng", "history", "step"):
    error("capstone", f"sentence_state_without_{_key}", lambda k=_key: _state_without(k), "damaged")


def _at_as_nat() -> Any:
    from lecturekit.capstone import models as ps

    _, out = _trained("at")
    return ps.load_sentence_model(_recipe("nat"), out)


error("capstone", "sentence_file_of_the_other_recipe", _at_as_nat, "name", "recipe")


# ------------------------------------------------------------------ caches (item 10)
def _cache_is_a_file(load: str, through_env: bool) -> Any:
    import lecturekit.data.pinyin as pinyin_data
    import lecturekit.data.sentences as sentences

    def refuse() -> Any:
        raise RuntimeError("built although the cache folder is a file (a minute lost)")

    sentences.build_sentences = refuse  # type: ignore[assignment]
    pinyin_data._build_lexicon = refuse  # type: ignore[assignment]
    a_file = tmp("cache-file")
    a_file.write_text("not a folder")
    function = sentences.load_sentences if load == "sentences" else pinyin_data.load_lexicon
    if through_env:
        os.environ["LECTUREKIT_CACHE"] = str(a_file)
        return function()
    return function(a_file / "below")


error("capstone", "clause_cache_env_is_a_file", lambda: _cache_is_a_file("sentences", True),
      "LECTUREKIT_CACHE")  # fmt: skip
error("capstone", "clause_cache_dir_under_a_file", lambda: _cache_is_a_file("sentences", False),
      "directory")  # fmt: skip
error("capstone", "lexicon_cache_env_is_a_file", lambda: _cache_is_a_file("lexicon", True),
      "LECTUREKIT_CACHE")  # fmt: skip
