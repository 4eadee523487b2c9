"""The capstone's input box (lecturekit.capstone.widget): the candidate bars follow the typing."""

from __future__ import annotations

import pytest
from test_capstone_analysis import PAIRS, _tiny_at

from lecturekit.capstone.analysis import SyllableUnigram, candidate_bar_text
from lecturekit.capstone.engines import TransformerIME
from lecturekit.capstone.models import at_engine, best_engine
from lecturekit.capstone.widget import pinyin_input_box


def test_pinyin_input_box_follows_the_text_and_shows_errors() -> None:
    beam = TransformerIME(*_tiny_at(), beam_size=2, exact_length=True)
    unigram = SyllableUnigram(PAIRS)
    box = pinyin_input_box(unigram, k=2, beside=[beam])
    assert "输入拼音" in box.output.value
    box.controls["pinyin"].value = "shijian"
    first, second = box.output.value.split("<br>")
    assert candidate_bar_text(unigram, "shijian", k=2) in first
    assert candidate_bar_text(beam, "shijian", k=2) in second and beam.name in second
    box.controls["pinyin"].value = "shiq"
    assert "cannot be split" in box.output.value and "1. " not in box.output.value
    box.controls["pinyin"].value = "shi" * 40
    assert "at most 30 syllables" in box.output.value
    box.controls["pinyin"].value = "xue"  # a syllable the unigram never saw: it writes □
    first, second = box.output.value.split("<br>")
    assert "1. □" in first and "1. " in second
    with pytest.raises(TypeError, match="engine must be an input method"):
        pinyin_input_box(object(), beside=())
    with pytest.raises(TypeError, match="every item of beside must be an input method"):
        pinyin_input_box(unigram, beside=[unigram.ranked])


def test_the_default_box_is_the_best_engine_with_the_at_beside_it() -> None:
    """The default engine is the chapter's best (the shipped tagger fused with the trigram of
    the training clauses); the shipped AT's bar is shown beside it. Neither writes 机器学习
    first for jiqixuexi (no training clause holds it): both list it among five."""
    box = pinyin_input_box()
    box.controls["pinyin"].value = "jiqixuexi"
    best, at = box.output.value.split("<br>")
    assert candidate_bar_text(best_engine(), "jiqixuexi") in best
    assert candidate_bar_text(at_engine(), "jiqixuexi") in at and "Transformer 束宽 5" in at
    assert "机器学习" in best and "机器学习" in at
