"""The capstone's input box (lecturekit.capstone.widget): the candidate bar follows the typing."""

from __future__ import annotations

from test_capstone_analysis import _tiny_at

from lecturekit.capstone.analysis import candidate_bar_text
from lecturekit.capstone.widget import pinyin_input_box


def test_pinyin_input_box_follows_the_text_and_shows_errors() -> None:
    model, src_vocab, tgt_vocab = _tiny_at()
    box = pinyin_input_box(model, src_vocab, tgt_vocab, k=2)
    assert "输入拼音" in box.output.value
    box.controls["pinyin"].value = "shijian"
    assert candidate_bar_text(model, src_vocab, tgt_vocab, "shijian", k=2) in box.output.value
    box.controls["pinyin"].value = "shiq"
    assert "cannot be split" in box.output.value and "1." not in box.output.value
    box.controls["pinyin"].value = "shi" * 40
    assert "at most 30 syllables" in box.output.value
