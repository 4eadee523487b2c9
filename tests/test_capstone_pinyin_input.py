"""Typed pinyin, read one way by every capstone engine: the normalisation, the refusal of what
is no syllable (special tokens included), the one bound on ``k`` and the equal-length batches
the engines run."""

from __future__ import annotations

import random

import pytest

from lecturekit.capstone.pinyin_input import (
    MAX_BEAM,
    MAX_CANDIDATES,
    check_k,
    check_pairs,
    length_batches,
    normalize_pinyin,
    plain_letters,
    read_pinyins,
)


def test_plain_letters_normalises_what_is_unambiguous() -> None:
    assert plain_letters("ＮＩ３ ｈǎｏ") == "ni hao"  # full-width letters and digits
    assert plain_letters("Lǚ xüé  nu:") == "lv xue nv"
    assert plain_letters("ni\u00a0hao\nma") == "ni hao ma"  # any white space
    assert plain_letters("ni³hao") == "ni hao"  # a superscript tone number


def test_special_tokens_are_no_syllables_even_in_an_engines_vocabulary() -> None:
    known = {"<unk>": 1, "<pad>": 0, "ng": 5}  # an engine's vocabulary with its specials
    assert normalize_pinyin("NG ni", known) == ["ng", "ni"]  # its own letters-only syllable
    for special in ("<unk>", "<pad>"):
        with pytest.raises(ValueError, match=f"'{special}', which is not a pinyin syllable"):
            normalize_pinyin(f"ni {special}", known)
    assert read_pinyins(["ｎǐ ｈǎｏ"]) == [["ni", "hao"]]


def test_one_bound_and_one_message_for_k() -> None:
    assert MAX_BEAM <= MAX_CANDIDATES
    check_k(MAX_CANDIDATES)
    with pytest.raises(ValueError, match=f"k: this system gives at most {MAX_CANDIDATES} cand"):
        check_k(MAX_CANDIDATES + 1)  # the shared bound holds without an engine's own
    with pytest.raises(ValueError, match=f"at most {MAX_CANDIDATES} candidates, got top=5000"):
        check_k(5000, 10**6, name="top")  # an engine's limit never lifts the shared bound
    with pytest.raises(ValueError, match="at most 3 candidates, got k=4"):
        check_k(4, 3)
    for bad in (0, -1, 2.0, True, "3", None):
        with pytest.raises(ValueError, match="k: expected a positive int"):
            check_k(bad)  # type: ignore[arg-type]


def test_pairs_are_clauses_with_one_syllable_per_character() -> None:
    check_pairs([("ni hao", "你好")])
    for bad in ([("ni hao ma", "你好")], [("", "")], [("ni", "")]):
        with pytest.raises(ValueError, match=r"pairs\[0\] must have one syllable per character"):
            check_pairs(bad)
    with pytest.raises(TypeError, match=r"pairs\[1\] must hold two str"):
        check_pairs([("ni", "你"), ("ni", None)])


def test_length_batches_group_equal_lengths_shortest_first_in_input_order() -> None:
    assert length_batches([2, 3, 2, 2], 2) == [[0, 2], [3], [1]]
    lengths = [random.Random(0).randint(1, 6) for _ in range(50)]
    batches = length_batches(lengths, 4)
    assert sorted(i for b in batches for i in b) == list(range(50))  # each index once
    assert all(len(b) <= 4 and len({lengths[i] for i in b}) == 1 for b in batches)
    assert [lengths[b[0]] for b in batches] == sorted(lengths[b[0]] for b in batches)
    assert all(b == sorted(b) for b in batches)
    assert length_batches([], 3) == []
    with pytest.raises(ValueError, match="size"):
        length_batches([1], 0)
